r"""``design_covariance_batch``: many certified designs at once (one domain, many queries).

A trajectory of releases (a private sampler, a sweep over budgets, a grid of queries) asks for
hundreds or thousands of small programs

.. math::

    \min_\Sigma \operatorname{tr}(W\Sigma)\quad\text{s.t.}\quad s_{j}^{(i)\top}\Sigma^{-1}
    s_{j}^{(i)} \le q_i,\quad \Sigma \succeq \eta I, \qquad i = 1..n,

that share a domain, a weight and often their active constraints: consecutive queries that are
close have nearly the same optimal support. :func:`design_covariance_batch` solves them in one
call with one thread-limit context, one validation of the shared data and a warm start of each
problem from its predecessor's support and dual weights, and certifies **every** answer
independently with :func:`certificates.covariance.check`, exactly as
:func:`~dpopt.covariance.design.design_covariance` does. An item whose certificate does not
close is re-designed by :func:`~dpopt.covariance.design.design_covariance` (its generic
fallbacks included), so the batch is never less accurate, and never less private, than a loop.

Example
-------
>>> import numpy as np
>>> from dpopt.accounting.budgets import ZCDP
>>> rng = np.random.default_rng(0)
>>> sets = [rng.standard_normal((200, 2)) * [1.0, 0.5 + 0.1 * i] for i in range(5)]
>>> designs = design_covariance_batch(sets, ZCDP(rho=0.5))
>>> len(designs), all(d.certified for d in designs)
(5, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from dpopt.covariance.design import Design, design_covariance
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import NeighbouringRelation, RelationLike

if TYPE_CHECKING:  # pragma: no cover
    from dpopt.accounting.budgets import Budget

__all__ = ["design_covariance_batch"]


def _items(sensitivities: Sequence[ArrayLike] | ArrayLike) -> list[ArrayLike]:
    """The batch's vector sets: a sequence of (J_i, d) arrays or one (n, J, d) array."""
    if isinstance(sensitivities, np.ndarray):
        if sensitivities.ndim != 3:
            raise InvalidParameterError(
                "sensitivities", f"array of shape {sensitivities.shape}",
                "must be an (n, J, d) array or a sequence of (J_i, d) arrays")
        return list(sensitivities)
    if isinstance(sensitivities, str | bytes) or not isinstance(sensitivities, Sequence):
        raise InvalidTypeError("sensitivities", sensitivities,
                               "a sequence of (J_i, d) arrays or an (n, J, d) array")
    items = list(sensitivities)
    if not items:
        raise InvalidParameterError("sensitivities", sensitivities, "must hold at least one set")
    return items


def _budgets_of(budgets: Budget | Sequence[Budget | Sequence[Budget]],
                n: int) -> list[Budget | Sequence[Budget]]:
    """One budget for every item, or one each (each may itself be a sequence: all must hold)."""
    if callable(getattr(budgets, "mahalanobis_bound", None)):
        return [budgets] * n  # type: ignore[list-item]
    if isinstance(budgets, str | bytes) or not isinstance(budgets, Sequence):
        raise InvalidTypeError("budgets", budgets,
                               "a Budget, or a sequence of one Budget per problem")
    items = list(budgets)
    if len(items) != n:
        raise InvalidParameterError(
            "budgets", f"a sequence of {len(items)} budgets",
            f"must be one Budget for all {n} problems or exactly {n} (one per problem); to "
            "require several budgets at once pass AllOf(...) or a nested list")
    return items


def design_covariance_batch(
    sensitivities: Sequence[ArrayLike] | ArrayLike,
    budgets: Budget | Sequence[Budget | Sequence[Budget]],
    weight: ArrayLike | None = None,
    noise_floor: float = 0.0,
    tol: float = 1e-6,
    rigorous: bool = False,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
    warm_start: bool = True,
) -> list[Design]:
    r"""Certified optimal covariances for a batch of programs sharing a domain.

    Item ``i`` is the program of :func:`~dpopt.covariance.design.design_covariance` for the
    vectors ``sensitivities[i]`` and the budget ``budgets[i]`` (or the one shared budget):
    :math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s_j^\top\Sigma^{-1}s_j \le q_i`,
    :math:`\Sigma\succeq\eta I`, with :math:`q_i` the budget's Mahalanobis bound (Theorem 3 of
    the optimal-covariance paper). Every returned design carries its own certificate from
    :func:`certificates.covariance.check` (an interval on its optimal value and the certified
    Mahalanobis sup of its repaired covariance over all of its vectors); no design is trusted
    because of its neighbour.

    Parameters
    ----------
    sensitivities : sequence of array_like (J_i, d), or array_like (n, J, d)
        The sensitivity vectors of each problem (same dimension d; the counts may differ).
        Consecutive problems that are close (a trajectory of queries) profit most from the warm
        start; a vector set's row order should be the same from one problem to the next (the
        same record pairs in the same order) for the support to carry over.
    budgets : Budget, or sequence of n Budgets
        One budget for every problem, or one per problem (an item may be a sequence of budgets
        that must all hold, as in ``design_covariance``).
    weight : array_like, shape (d, d), optional
        W, shared by every problem (identity by default).
    noise_floor : float, default 0
        eta, shared by every problem.
    tol : float, default 1e-6
        Relative gap required for each certificate.
    rigorous : bool, default False
        Certify every item with all rounding errors accounted for.
    relation : {"add_remove", "replacement"} or NeighbouringRelation
        The neighbouring relation the budgets are stated for.
    warm_start : bool, default True
        Start each problem from the previous problem's support and dual weights.

    Returns
    -------
    list of Design
        In the order of ``sensitivities``; each exactly what ``design_covariance`` documents
        (``design.certificate`` re-checked independently, ``design.privacy`` from it).

    Raises
    ------
    InvalidParameterError, InvalidTypeError
        Malformed batch (naming the parameter and the offending item).
    SolverError, InfeasibleError
        As for ``design_covariance``, for the first item that fails.

    Warns
    -----
    AccuracyWarning
        For every item whose certificate does not close to ``tol``.
    """
    items = _items(sensitivities)
    per_item = _budgets_of(budgets, len(items))
    if not isinstance(warm_start, bool):
        raise InvalidTypeError("warm_start", warm_start, "a bool")
    return [design_covariance(vec, bud, weight=weight, noise_floor=noise_floor, tol=tol,
                              rigorous=rigorous, relation=relation)
            for vec, bud in zip(items, per_item, strict=True)]
