r"""The neighbouring relation: which datasets count as neighbours, and the one ×4 rule.

A Gaussian release's guarantee is a statement about the sup of :math:`s^\top\Sigma^{-1}s` over the
sensitivity set of a neighbouring relation:

- **add/remove** (:attr:`NeighbouringRelation.ADD_REMOVE`): :math:`D'` is :math:`D` with one record
  added or removed. dpopt's sensitivity sets (two-record vectors of the ideal denoiser,
  uniform-query differences) are add/remove sets.
- **replacement** (:attr:`NeighbouringRelation.REPLACEMENT`): one record of :math:`D` is replaced.
  Replacing a record moves the release by :math:`a - b` with :math:`a, b` two add/remove shifts, and
  :math:`(a-b)^\top P(a-b) \le 2(a^\top Pa + b^\top Pb)`, so the replacement sup is at most
  :data:`REPLACEMENT_FACTOR` :math:`= 4` times the add/remove sup (the optimal-covariance paper for
  the ideal denoiser, eq. (11)). This is a valid bound, not the exact replacement sup.

Everything in dpopt that converts between the two goes through :func:`replacement_sup` (add/remove
sup → sup for the relation) or :func:`add_remove_bound` (a bound the relation's set must meet → the
bound the add/remove set must meet); both round to the safe side.

Examples
--------
>>> as_relation("replacement")
<NeighbouringRelation.REPLACEMENT: 'replacement'>
>>> replacement_sup(0.5, "replacement"), add_remove_bound(2.0, "replacement")
(2.0, 0.5)
"""

from __future__ import annotations

import math
from enum import Enum

from dpopt.errors import InvalidParameterError, InvalidTypeError

__all__ = [
    "REPLACEMENT_FACTOR",
    "NeighbouringRelation",
    "RelationLike",
    "add_remove_bound",
    "as_relation",
    "replacement_sup",
]

#: The replacement sup is at most this many times the add/remove sup.
REPLACEMENT_FACTOR = 4.0


class NeighbouringRelation(str, Enum):
    """Which datasets are neighbours: ``"add_remove"`` or ``"replacement"``."""

    ADD_REMOVE = "add_remove"
    REPLACEMENT = "replacement"

    def __str__(self) -> str:
        return self.value


RelationLike = NeighbouringRelation | str

_ACCEPTED = ", ".join(repr(r.value) for r in NeighbouringRelation)


def as_relation(value: RelationLike, name: str = "relation") -> NeighbouringRelation:
    """The relation named by ``value``: a :class:`NeighbouringRelation` or its exact value string.

    Raises
    ------
    InvalidTypeError
        ``value`` is neither an enum member nor a string.
    InvalidParameterError
        ``value`` is a string other than ``"add_remove"`` / ``"replacement"`` (other spellings such
        as ``"add-remove"`` or ``"replace"`` are refused, with the accepted ones named).
    """
    if isinstance(value, NeighbouringRelation):
        return value
    if not isinstance(value, str):
        raise InvalidTypeError(name, value, f"a NeighbouringRelation or one of {_ACCEPTED}")
    for rel in NeighbouringRelation:
        if value == rel.value:
            return rel
    raise InvalidParameterError(name, value, f"must be one of {_ACCEPTED}")


def replacement_sup(add_remove_sup: float, relation: RelationLike) -> float:
    r"""Bound on the sup over the relation's set from the add/remove sup :math:`\rho_{ar}`.

    :math:`\rho_{ar}` for add/remove, :math:`4\rho_{ar}` for replacement (exact in binary
    floating point).
    """
    rel = as_relation(relation)
    value = float(add_remove_sup)
    if not value >= 0.0:
        raise InvalidParameterError("add_remove_sup", add_remove_sup, "must be >= 0")
    if rel is NeighbouringRelation.ADD_REMOVE:
        return value
    scaled = REPLACEMENT_FACTOR * value  # exact: a power of two, unless it overflows
    if not math.isfinite(scaled):
        raise InvalidParameterError(
            "add_remove_sup", add_remove_sup, "is too large for the replacement relation"
        )
    return scaled


def add_remove_bound(bound: float, relation: RelationLike) -> float:
    r"""The Mahalanobis bound the add/remove set must meet so that the relation's set meets
    ``bound``: ``bound`` itself for add/remove, :math:`q/4` (rounded down) for replacement."""
    rel = as_relation(relation)
    value = float(bound)
    if not value > 0.0:
        raise InvalidParameterError("bound", bound, "must be > 0")
    if rel is NeighbouringRelation.ADD_REMOVE:
        return value
    quarter = value / REPLACEMENT_FACTOR  # exact in binary unless it underflows
    if quarter * REPLACEMENT_FACTOR > value:
        quarter = math.nextafter(quarter, 0.0)
    if not quarter > 0.0:
        raise InvalidParameterError("bound", bound, "is too small for the replacement relation")
    return quarter
