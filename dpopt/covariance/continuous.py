r"""The optimal covariance when records may lie anywhere in a box: a semi-infinite program.

For the ideal denoiser at a public query :math:`g` and records anywhere in a public box
:math:`K`, the covariance program (theory page) has one
constraint per pair of records,

.. math::

    \min_{\Sigma \succeq \eta I} \operatorname{tr}(W\Sigma) \quad\text{s.t.}\quad
    t_g(x, y)^\top \Sigma^{-1} t_g(x, y) \le q \quad \forall\, x, y \in K,

infinitely many. :func:`design_box` solves it by **exchange** (cutting planes):

1. a finite *working set* of pairs — the points of a small grid of the box (vertices included)
   and the query clipped into the box, all pairs oriented so that the vector is the longer of the
   two antiparallel ones — gives an ordinary program, solved and certified by
   :func:`dpopt.covariance.design.design_covariance`;
2. the certified sup :math:`\rho(\Sigma_k)` over all of :math:`K \times K` of the candidate
   (:func:`certificates.box_sup.certified_box_sup`) decides whether :math:`\Sigma_k` already
   meets every constraint up to :math:`q(1 + \tau)`; if not, the maximising pair and the other
   local maximisers above :math:`q` join the working set, and the step repeats;
3. finally :math:`\Sigma = c\,\Sigma_k` with :math:`c = \rho_{\rm upper}(\Sigma_k)/q` (times a
   small margin), and the sup of the final :math:`\Sigma` is certified again: it is at most
   :math:`q` for **every** pair of records in the box, whatever the working set missed.

Certificate interval: the working set's constraints are a subset of the continuous ones, so the
working-set program is a relaxation and its certified dual bound is a valid **lower** bound on
the continuous optimum; the **upper** bound is :math:`\operatorname{tr}(W\Sigma)` of the final
(scaled, verified) covariance. The uniform-query design of the box
(:func:`dpopt.covariance.sensitivity.uniform_query_set`, the uniform-query corollary) is feasible
for the continuous program (:math:`\operatorname{expit} < 1` and :math:`x - y` lies in the
difference box), so its value caps the result: when the exchange does not beat it, that covariance
is returned.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cholesky, solve_triangular

from certificates.box_sup import BoxSup, certified_box_sup, local_maximisers
from certificates.covariance import check
from certificates.validate import as_scalar
from dpopt.covariance.mahalanobis_sup import MahalanobisSup
from dpopt.covariance.privacy import CovariancePrivacy, privacy_from_sup
from dpopt.covariance.sensitivity import (
    BoxTwoRecordSet,
    BoxVertexDifferences,
    EllipsoidDifferences,
    TwoRecordVectors,
)
from dpopt.errors import AccuracyWarning, InfeasibleError, InvalidParameterError
from dpopt.relation import NeighbouringRelation, RelationLike, add_remove_bound, as_relation

if TYPE_CHECKING:  # pragma: no cover
    from dpopt.accounting.budgets import Budget
    from dpopt.covariance.design import Design

__all__ = [
    "BoxCoverage",
    "EllipsoidCoverage",
    "box_privacy",
    "box_sup_as_mahalanobis",
    "design_box",
    "design_ellipsoid",
    "initial_pairs",
]

Arr = NDArray[np.float64]

#: Points per axis of the initial working grid, by dimension (2 = the vertices only).
INITIAL_POINTS = {1: 11, 2: 5, 3: 3}
#: Largest dimension for which the uniform-query design (2^(d-1) vectors) is computed as a cap.
UNIFORM_CAP_MAX_DIM = 12


@dataclass(frozen=True)
class BoxCoverage:
    r"""What a design on a :class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet` covers, and how
    it was certified.

    Attributes
    ----------
    sensitivity : BoxTwoRecordSet
        The continuous set (box, query, sigma).
    sup : BoxSup
        Certified bounds of :math:`\sup_{x,y\in K} t^\top\Sigma^{-1}t` at the returned covariance
        (``sup.upper <= q`` for the add/remove bound q).
    pairs_x, pairs_y : ndarray, shape (k, d)
        The working set (pairs of records in the box) whose dual gives the lower bound.
    iterations : int
        Exchange rounds.
    history : tuple of dict
        Per round: working-set size, tr(W Sigma_k), certified sup / q.
    uniform_query_value : float or None
        tr(W Sigma) of the uniform-query design of the box (the cap), when computed.
    method : str
        ``"exchange"`` or ``"uniform-query"`` (the cap was better).
    seconds : float
        CPU time.
    """

    sensitivity: BoxTwoRecordSet
    sup: BoxSup
    pairs_x: Arr
    pairs_y: Arr
    iterations: int
    history: tuple[dict[str, float], ...]
    uniform_query_value: float | None
    method: str
    seconds: float = field(default=0.0)

    def describe(self) -> str:
        """One line: the domain covered and the certified sup."""
        return (f"covers {self.sensitivity.describe()}; certified sup over the box "
                f"{self.sup.upper:.10g} (attained >= {self.sup.lower:.10g})")


def box_sup_as_mahalanobis(sset: BoxTwoRecordSet, res: BoxSup) -> MahalanobisSup:
    """A :class:`MahalanobisSup` from certified box bounds (``exact=False``: a proven bound)."""
    vec = sset.vectors(res.x[None], res.y[None])[0]
    return MahalanobisSup(
        value=res.upper, upper=res.upper, lower=res.lower, exact=False,
        method="box_branch_and_bound", index=None, vector=vec,
        margin=res.gap if math.isfinite(res.gap) else 0.0,
    )


def box_privacy(sset: BoxTwoRecordSet, covariance: Arr, *, relation: RelationLike =
                NeighbouringRelation.ADD_REMOVE, tol: float = 1e-6,
                max_nodes: int = 2_000_000) -> tuple[CovariancePrivacy, BoxSup]:
    """The privacy of ``covariance`` for every dataset of records in the box (certified sup)."""
    res = sset.sup(covariance, tol=tol, max_nodes=max_nodes)
    priv = privacy_from_sup(box_sup_as_mahalanobis(sset, res), covariance,
                            sset.box.diameter(), relation)
    return priv, res


def initial_pairs(sset: BoxTwoRecordSet, points_per_axis: int | None = None) -> tuple[Arr, Arr]:
    """The initial working set: every pair of a small grid of the box plus the clipped query,
    each oriented as the longer of its two antiparallel two-record vectors."""
    from dpopt.covariance.domains import Grid

    box = sset.box
    n = points_per_axis or INITIAL_POINTS.get(box.dim, 2)
    shape = tuple(int(n) if length > 0 else 1 for length in box.side_lengths)
    pts = Grid(box.lower, box.upper, shape).points
    pts = np.unique(np.vstack([pts, np.clip(sset.query, box.lower, box.upper)[None]]), axis=0)
    if pts.shape[0] < 2:
        return pts[:0], pts[:0]
    src = TwoRecordVectors(pts, sset.query, sset.sigma)
    xi, yi = src.ordered_pairs(np.arange(src.count))
    return pts[xi], pts[yi]


def _precision_factor(cov: Arr) -> Arr:
    low = cholesky(cov, lower=True)
    return np.asarray(solve_triangular(low, np.eye(cov.shape[0]), lower=True), dtype=np.float64)


def _dedupe(xs: Arr, ys: Arr) -> tuple[Arr, Arr]:
    both = np.round(np.hstack([xs, ys]), 14)
    _, idx = np.unique(both, axis=0, return_index=True)
    idx = np.sort(idx)
    return xs[idx], ys[idx]


def _isotropic_value(sset: BoxTwoRecordSet, weight: Arr, q: float, eta: float) -> float:
    """c tr(W) for the best isotropic c I: c = sup |t|^2 / q (certified with A = I)."""
    d = sset.dim
    # a valid upper bound of the sup suffices for the comparison (loose by at most its gap)
    res = certified_box_sup(sset.box.lower, sset.box.upper, sset.query, sset.sigma,
                            factor=np.eye(d), tol=1e-4, max_nodes=50_000)
    return max(res.upper / q, eta) * float(np.trace(weight))


def design_box(
    sensitivity: BoxTwoRecordSet,
    budgets: Budget | Sequence[Budget],
    weight: ArrayLike | None = None,
    noise_floor: float = 0.0,
    solver: str = "auto",
    tol: float = 1e-6,
    rigorous: bool = False,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
    *,
    max_iterations: int = 60,
    max_nodes: int = 2_000_000,
    points_per_axis: int | None = None,
    uniform_cap: bool = True,
) -> Design:
    r"""The least-error covariance whose guarantee covers every pair of records in the box.

    Exchange on a working set of pairs, certified sup over the box, final scaling to the proven
    bound (see the module docstring). Called by
    :func:`dpopt.covariance.design.design_covariance` for a
    :class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet`; the parameters are the same, plus:

    Parameters
    ----------
    max_iterations : int
        Exchange rounds before stopping (the result is then private but possibly not certified
        to ``tol``; an :class:`AccuracyWarning` says so).
    max_nodes : int
        Node budget of each certified sup.
    points_per_axis : int, optional
        Initial working grid (default 11, 5, 3 points per axis for d = 1, 2, 3, else the
        vertices).
    uniform_cap : bool
        Compute the uniform-query design of the box (d <= 12) and return it if it is better.

    Returns
    -------
    Design
        ``covariance`` satisfies the budget for every dataset of records in the box (certified
        sup <= q); ``certificate`` is the working set's certificate at that covariance (its
        ``lower`` is the relaxation's dual bound, its ``upper`` is tr(W Sigma)); ``coverage``
        records the box, the certified sup and the working set.
    """
    from dpopt.covariance.design import Design, _bound_of, design_covariance

    cpu0 = time.process_time()
    if not isinstance(sensitivity, BoxTwoRecordSet):
        raise InvalidParameterError("sensitivity", sensitivity, "must be a BoxTwoRecordSet")
    sset = sensitivity
    q, stated = _bound_of(budgets)
    rel = as_relation(relation)
    q_ar = add_remove_bound(q, rel)
    tol = as_scalar("tol", tol, low=0.0, high=1.0)
    eta = as_scalar("noise_floor", noise_floor, low=0.0, low_open=False)
    d = sset.dim
    w = np.eye(d) if weight is None else np.asarray(weight, dtype=np.float64)
    if not np.any(sset.box.side_lengths > 0):
        raise InvalidParameterError(
            "sensitivity", sset, "the box is a single point: every release is the same, no noise "
            "is needed")
    # exchange threshold and inner tolerances: the final gap is about tol_x + the working gap
    tol_x = 0.5 * tol
    tol_in = max(1e-9, 0.25 * tol)
    xs, ys = initial_pairs(sset, points_per_axis)
    history: list[dict[str, float]] = []
    inner: Design | None = None
    res: BoxSup | None = None
    it = 0
    used_x, used_y = xs, ys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        for it in range(1, max_iterations + 1):
            used_x, used_y = xs, ys
            vecs = sset.vectors(xs, ys)
            inner = design_covariance(vecs, budgets, weight, noise_floor, solver, tol_in,
                                      rigorous, rel)
            cov = inner.covariance
            res = sset.sup(cov, tol=max(1e-9, 0.5 * tol_x), max_nodes=max_nodes,
                           stop_below=q_ar * (1.0 + tol_x))
            history.append({"iteration": float(it), "pairs": float(xs.shape[0]),
                            "value": float(inner.value), "sup_over_q": res.upper / q_ar})
            if res.upper <= q_ar * (1.0 + tol_x):
                break
            if res.lower <= q_ar * (1.0 + 0.5 * tol_x):
                # the node budget ran out before the bound closed, and no pair violates the
                # constraints by more than the tolerance: more pairs cannot help; the final
                # scaling to the proven bound keeps the design private (gap reported)
                break
            # add the certified maximiser and the other local maximisers above q
            lx, ly, lv = local_maximisers(sset.box.lower, sset.box.upper, sset.query, sset.sigma,
                                          _precision_factor(cov), starts=32, seed=it)
            sel = lv > q_ar * (1.0 + 0.5 * tol_x)
            new_x = np.vstack([res.x[None], lx[sel][:16]])
            new_y = np.vstack([res.y[None], ly[sel][:16]])
            xs, ys = _dedupe(np.vstack([xs, new_x]), np.vstack([ys, new_y]))
    assert inner is not None and res is not None
    # final scaling to the proven sup, then an independent certified re-check of the result
    base = inner.covariance
    xs, ys = used_x, used_y
    program = inner.program
    dual = inner.solution.dual
    # the margin m leaves the final proof (and any verifier's) a gap of about m to close
    margin = max(0.5 * tol_x, 1e-9)
    scale = res.upper / q_ar * (1.0 + margin)
    if eta > 0:
        lam_min = float(np.linalg.eigvalsh(base)[0])
        scale = max(scale, 1.0) if lam_min * scale < eta * (1 + 1e-9) else scale
    final_sup: BoxSup | None = None
    cert = None
    for _ in range(8):
        cand = base * scale
        cert = check(program, cand, dual, tol=tol, rigorous=rigorous)
        if not math.isfinite(cert.upper):
            scale *= 1.0 + margin
            continue
        cov_final = cert.repaired_covariance
        final_sup = sset.sup(cov_final, tol=0.0, max_nodes=max_nodes, stop_below=q_ar)
        if final_sup.upper <= q_ar:
            break
        # not proven within the node budget: scale to the proven bound with room for the gap
        # the search did reach, so that the next proof needs no more than that
        scale *= final_sup.upper / q_ar * (1.0 + max(margin, min(final_sup.gap, 0.5)))
    if cert is None or final_sup is None or not final_sup.upper <= q_ar:
        raise InfeasibleError(
            "could not certify a covariance for every record in the box within the node budget; "
            "raise max_nodes or use uniform_query_set(box), which covers every record in the box"
        )
    method = "exchange"
    uq_value: float | None = None
    if uniform_cap and d <= UNIFORM_CAP_MAX_DIM:
        uq = design_covariance(BoxVertexDifferences(sset.box), budgets, weight, noise_floor,
                               solver, tol_in, rigorous, rel)
        uq_value = float(uq.value)
        if uq_value < cert.upper:
            uq_cert = check(program, uq.covariance, dual, tol=tol, rigorous=rigorous)
            uq_sup = sset.sup(uq_cert.repaired_covariance, tol=0.0, max_nodes=max_nodes,
                              stop_below=q_ar)
            if uq_sup.upper <= q_ar and uq_cert.upper < cert.upper:
                cert, final_sup, method = uq_cert, uq_sup, "uniform-query"
    cov_final = np.array(cert.repaired_covariance, dtype=np.float64)
    # the lower bound: the final working set's certified dual bound (its constraints are a subset
    # of the continuous ones: a relaxation); re-derived from the file by a verifier
    lower = cert.lower
    gap = cert.gap
    certified = bool(cert.certified)
    cert = replace(cert, message=f"box exchange: lower = working-set dual bound, upper = "
                                 f"tr(W Sigma); {cert.message}")
    privacy = privacy_from_sup(box_sup_as_mahalanobis(sset, final_sup), cov_final,
                               sset.box.diameter(), rel)
    if not privacy.mahalanobis_bound <= q:
        raise InfeasibleError(
            f"re-check failed: the certified sup over the box {privacy.mahalanobis_bound!r} "
            f"exceeds the budget's bound {q!r} ({rel})")
    coverage = BoxCoverage(
        sensitivity=sset, sup=final_sup, pairs_x=xs, pairs_y=ys, iterations=it,
        history=tuple(history), uniform_query_value=uq_value, method=method,
        seconds=time.process_time() - cpu0,
    )
    status = "optimal" if certified else "optimal_inaccurate"
    msg = (f"records anywhere in the box: {method} design, {it} exchange rounds, "
           f"{xs.shape[0]} working pairs; optimum in [{lower:.10g}, {cert.upper:.10g}] "
           f"(gap {gap:.3g}, tol {tol:g}); certified sup over the box {final_sup.upper:.10g} "
           f"<= q = {q_ar:.10g}")
    if not certified:
        msg += ("; the covariance is private for every record in the box (certified) but may be "
                f"suboptimal by up to a factor {1 + gap:.6g}")
        warnings.warn(msg, AccuracyWarning, stacklevel=3)
    iso = _isotropic_value(sset, w, q_ar, eta)
    solution = inner.solution
    return Design(
        covariance=cov_final, value=cert.upper, certificate=cert, privacy=privacy,
        isotropic_value=iso, bound=q, solution=solution, program=program, relation=rel,
        status=status, message=msg, coverage=coverage, budget=stated,
        path=f"box exchange ({method}, {it} rounds); its last working set by "
             f"{inner.path or solution.stats.solver}",
    )


@dataclass(frozen=True)
class EllipsoidCoverage:
    """What a uniform-query design on a ball or an ellipsoid covers (closed-form sup).

    Attributes
    ----------
    sensitivity : EllipsoidDifferences
    sup : MahalanobisSup
        The proven closed-form sup at the returned covariance (``sup.upper <= q``).
    relation : NeighbouringRelation
        The neighbouring relation the design's privacy report assumes.
    """

    sensitivity: EllipsoidDifferences
    sup: MahalanobisSup
    relation: NeighbouringRelation = NeighbouringRelation.ADD_REMOVE

    def describe(self) -> str:
        """One line: the domain covered and the proven sup."""
        e = self.sensitivity.ellipsoid
        return (f"covers every query and every record in the ellipsoid centred at "
                f"{e.centre.tolist()} ({self.relation}); proven sup {self.sup.upper:.10g}")


def design_ellipsoid(
    sensitivity: EllipsoidDifferences,
    budgets: Budget | Sequence[Budget],
    weight: ArrayLike | None = None,
    noise_floor: float = 0.0,
    solver: str = "auto",
    tol: float = 1e-6,
    rigorous: bool = False,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
) -> Design:
    r"""The uniform-query design of a ball or an ellipsoid (closed form, certified).

    Solves on the d working vectors :math:`2Ev_i` of
    :meth:`~dpopt.covariance.sensitivity.EllipsoidDifferences.working_vectors` (a relaxation whose
    optimum is the continuous one, :math:`\tfrac4q EE^\top` without a noise floor), then scales
    the covariance to the proven closed-form sup over the whole ellipsoid. Same parameters as
    :func:`dpopt.covariance.design.design_covariance`.
    """
    from dpopt.covariance.design import design_covariance

    rel = as_relation(relation)
    base = design_covariance(sensitivity.working_vectors(weight), budgets, weight, noise_floor,
                             solver, tol, rigorous, rel)
    q_ar = base.program.bound
    cov = base.covariance
    for _ in range(8):
        upper, lower, vec = sensitivity.sup(cov)
        if upper <= q_ar:
            break
        cov = cov * (upper / q_ar * (1.0 + 1e-12))
    else:  # pragma: no cover - the closed form is exact up to rounding
        raise InfeasibleError("could not prove the ellipsoid's sup below q")
    cert = check(base.program, cov, base.solution.dual, tol=tol, rigorous=rigorous)
    cov = np.array(cert.repaired_covariance, dtype=np.float64)
    upper, lower, vec = sensitivity.sup(cov)
    if not upper <= q_ar:  # pragma: no cover - the repair only scales up
        raise InfeasibleError("the repaired covariance exceeds q over the ellipsoid")
    sup = MahalanobisSup(value=upper, upper=upper, lower=lower, exact=False,
                         method="closed_form", index=None, vector=vec,
                         margin=upper / lower - 1.0 if lower > 0 else 0.0)
    privacy = privacy_from_sup(sup, cov, sensitivity.ellipsoid.diameter(), rel)
    coverage = EllipsoidCoverage(sensitivity=sensitivity, sup=sup, relation=rel)
    return replace(base, covariance=cov, value=cert.upper, certificate=cert, privacy=privacy,
                   coverage=coverage, path=f"ellipsoid (closed-form sup); its working vectors by "
                                           f"{base.path or base.solution.stats.solver}",
                   message=f"uniform query over an ellipsoid (closed form): {cert.message}")
