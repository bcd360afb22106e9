r"""The neighbouring relation: which datasets count as neighbours, and the one ×4 rule.

A Gaussian release's guarantee is a statement about the sup of :math:`s^\top\Sigma^{-1}s` over the
sensitivity set of a neighbouring relation:

- **add/remove** (:attr:`NeighbouringRelation.ADD_REMOVE`): :math:`D'` is :math:`D` with one record
  added or removed. dpopt's sensitivity sets (two-record vectors of the ideal denoiser,
  uniform-query differences) are add/remove sets.
- **replacement** (:attr:`NeighbouringRelation.REPLACEMENT`): one record of :math:`D` is replaced.
  Replacing a record moves the release by :math:`a - b` with :math:`a, b` two add/remove shifts, and
  :math:`(a-b)^\top P(a-b) \le 2(a^\top Pa + b^\top Pb)`, so the replacement sup is at most
  :data:`REPLACEMENT_FACTOR` :math:`= 4` times the add/remove sup (the replacement bound of the
  theory page). This is a valid bound, not the exact replacement sup.

Everything in dpopt that converts between the two goes through :func:`replacement_sup` (add/remove
sup → sup for the relation) or :func:`add_remove_bound` (a bound the relation's set must meet → the
bound the add/remove set must meet); both round to the safe side.

For a sum of records each clipped to ℓ2 norm C (DP-SGD's gradient sum) the factor is exact: adding
or removing a record moves the sum by at most C, replacing one moves it by up to 2C
(:func:`sensitivity_factor`), so a noise multiplier σ (noise std / C) has bound :math:`1/\sigma^2`
under add/remove and :math:`4/\sigma^2` under replacement.

The **sampling scheme** (:class:`SamplingScheme`) of a subsampled run fixes the relation its
analysis needs: Poisson sampling is analysed under add/remove neighbours, fixed-size batches drawn
without replacement under replace-one neighbours, and full-batch steps (every record every step)
under add/remove. Shuffling the data once per epoch and cutting it into batches is refused: no
tight analysis of it exists, and reporting the Poisson ε for such a loader is optimistic.

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
    "SamplingLike",
    "SamplingScheme",
    "add_remove_bound",
    "as_relation",
    "as_sampling",
    "replacement_sup",
    "sensitivity_factor",
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


def sensitivity_factor(relation: RelationLike) -> float:
    """ℓ2 sensitivity of a sum of records clipped to norm C, in units of C: 1 for add/remove, 2
    for replacement (the square root of :data:`REPLACEMENT_FACTOR`)."""
    return 1.0 if as_relation(relation) is NeighbouringRelation.ADD_REMOVE else 2.0


class SamplingScheme(str, Enum):
    """How each step's batch is drawn, which fixes the neighbouring relation of its analysis.

    ``"poisson"``
        every record joins the batch independently with probability p (Opacus' Poisson sampling,
        TensorFlow Privacy's DP-SGD analysis): add/remove neighbours.
    ``"without_replacement"``
        a batch of exactly B = pN records drawn uniformly without replacement, afresh at every
        step (fixed-size batches): replace-one neighbours, sensitivity 2C for gradients clipped
        to C.
    ``"full_batch"``
        every record at every step (rate 1): add/remove neighbours.
    """

    POISSON = "poisson"
    WITHOUT_REPLACEMENT = "without_replacement"
    FULL_BATCH = "full_batch"

    def __str__(self) -> str:
        return self.value

    @property
    def relation(self) -> NeighbouringRelation:
        """The neighbouring relation this scheme is analysed under."""
        if self is SamplingScheme.WITHOUT_REPLACEMENT:
            return NeighbouringRelation.REPLACEMENT
        return NeighbouringRelation.ADD_REMOVE

    def describe(self) -> str:
        """E.g. ``"Poisson sampling, add/remove neighbours"``."""
        what = {
            SamplingScheme.POISSON: "Poisson sampling",
            SamplingScheme.WITHOUT_REPLACEMENT: "fixed-size batches without replacement",
            SamplingScheme.FULL_BATCH: "full batch",
        }[self]
        rel = ("add/remove" if self.relation is NeighbouringRelation.ADD_REMOVE
               else "replace-one")
        return f"{what}, {rel} neighbours"


SamplingLike = SamplingScheme | str

_SAMPLINGS = ", ".join(repr(s.value) for s in SamplingScheme)
_SHUFFLING = ("shuffling", "shuffle", "shuffled", "random_reshuffling")
_SHUFFLING_MESSAGE = (
    "is refused: batches cut from a data set shuffled once per epoch have no tight privacy "
    "analysis (reporting the Poisson ε for them is optimistic); train with Poisson sampling "
    "('poisson', e.g. Opacus' UniformWithReplacementSampler) or with fixed-size batches drawn "
    "afresh at every step ('without_replacement')"
)


def as_sampling(value: SamplingLike, name: str = "sampling") -> SamplingScheme:
    """The sampling scheme named by ``value``: a :class:`SamplingScheme` or its value string.

    Raises
    ------
    InvalidTypeError
        ``value`` is neither an enum member nor a string.
    InvalidParameterError
        An unknown name; ``"shuffling"`` is refused with the reason and the safe schemes named.
    """
    if isinstance(value, SamplingScheme):
        return value
    if not isinstance(value, str):
        raise InvalidTypeError(name, value, f"a SamplingScheme or one of {_SAMPLINGS}")
    for s in SamplingScheme:
        if value == s.value:
            return s
    if value.lower() in _SHUFFLING:
        raise InvalidParameterError(name, value, _SHUFFLING_MESSAGE)
    raise InvalidParameterError(name, value, f"must be one of {_SAMPLINGS}")
