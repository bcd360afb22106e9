"""Deprecated: the sensitivity sets moved to :mod:`dpopt.covariance.sensitivity` (and the
Mahalanobis sup to :mod:`dpopt.covariance.mahalanobis_sup`, pruning to
:mod:`dpopt.covariance.pruning`). This alias goes in dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import warn_module

warn_module(__name__, "dpopt.covariance.sensitivity", __file__)

from certificates.validate import as_scalar  # noqa: E402
from dpopt.covariance.mahalanobis_sup import MahalanobisSup, sup_mahalanobis  # noqa: E402
from dpopt.covariance.pruning import prune  # noqa: E402
from dpopt.covariance.sensitivity import (  # noqa: E402
    BoxVertexDifferences,
    PrunedSet,
    TwoRecordVectors,
    UniformQueryVectors,
    add_remove_set,
    uniform_query_set,
)
from dpopt.relation import replacement_sup  # noqa: E402

__all__ = [
    "BoxVertexDifferences",
    "MahalanobisSup",
    "PrunedSet",
    "TwoRecordVectors",
    "UniformQueryVectors",
    "add_remove_set",
    "prune",
    "replacement_bound",
    "sup_mahalanobis",
    "uniform_query_set",
]


def replacement_bound(add_remove_sup: float) -> float:
    r"""Deprecated: :func:`dpopt.relation.replacement_sup` with ``"replacement"``
    (:math:`4\rho_{ar}`, a bound on the replacement sup from the add/remove sup)."""
    rho = as_scalar("add_remove_sup", add_remove_sup, low=0.0, low_open=False)
    return replacement_sup(rho, "replacement")
