r"""Discrete optimal-transport couplings for the Rényi Pufferfish calibration (MATH.md §2–§3).

Given two discrete laws :math:`P = \sum_i p_i \delta_{x_i}` and :math:`Q = \sum_j q_j \delta_{y_j}`
and a cost matrix given by its logarithm :math:`\log C_{ij}`, these solvers return a coupling
:math:`\pi \in \Pi(P, Q)` (a plan with row sums :math:`p` and column sums :math:`q`) that minimises

.. math::

    V(\pi) = \sum_{ij} \pi_{ij} C_{ij}, \qquad
    \log V(\pi) = \operatorname{logsumexp}_{(i,j) \in \operatorname{supp}\pi}
    (\log \pi_{ij} + \log C_{ij}).

Three routes are offered, and they agree on shared instances:

1. :func:`quantile_coupling` — 1-D, the comonotone (north-west-corner) coupling, optimal for every
   cost :math:`h(x - y)` with :math:`h` convex (MATH.md §3.2). It does not depend on the cost, so
   it is computed once and reused through a whole root-find. :math:`O((n+m)\log(n+m))`.
2. :func:`emd_coupling` — any dimension, the network-simplex LP of POT ``ot.emd``. Costs span
   hundreds of orders of magnitude, so the LP is fed the shifted, capped costs
   :math:`\tilde C_{ij} = \min(\exp(\log C_{ij} - s), e^{12})` and the returned plan is
   re-scored exactly in log domain (MATH.md §3.3: naive rescaling by the largest cost underflows
   and returns the value 0).
3. :func:`lp_coupling` — the same LP as a cvxpy program (:func:`coupling_lp_primal`,
   :func:`coupling_lp_dual`), whose dual potentials :math:`u_i + v_j \le \tilde C_{ij}` give a
   lower bound :math:`\sum_i p_i u_i + \sum_j q_j v_j` certifying optimality.

Because the capped cost never exceeds the true shifted cost, potentials that are feasible for the
capped LP are feasible for the true one, so they remain a valid lower bound on
:math:`e^{-s}\min_\pi V(\pi)`.

:func:`bottleneck_coupling` computes the :math:`W_\infty` coupling (least largest displacement) in
any dimension. This module knows nothing about privacy: costs and distances are plain arrays.

References
----------
1. Peyré, Cuturi, "Computational Optimal Transport", Found. Trends ML 11 (2019), §2.
2. Flamary et al., "POT: Python Optimal Transport", JMLR 22 (2021).
3. Santambrogio, "Optimal Transport for Applied Mathematicians" (2015), §2.2 (monotone coupling).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from certificates.errors import InvalidParameterError, SolverError
from certificates.validate import as_float_array, as_scalar
from solvers._types import SolverStats, map_cvxpy_status

__all__ = [
    "Coupling",
    "bottleneck_coupling",
    "capped_costs",
    "coupling_lp_dual",
    "coupling_lp_primal",
    "emd_coupling",
    "lp_coupling",
    "quantile_coupling",
]

#: Largest log-cost fed (after the shift) to an LP solver; see :func:`capped_costs`. MATH.md §3.3
#: suggests 50 / 1e15, but the network simplex works in absolute precision ~1e-16 * max cost, so a
#: cap of 1e15 hides every cost below ~0.1 (measured: errors up to 1.0 in log value on random
#: Gaussian costs); with e^12 the error was below 1e-11 and the re-solve loop handles plans that
#: sit on capped entries.
LOG_CAP = 12.0
#: Largest cost fed to an LP solver.
COST_CAP = float(np.exp(LOG_CAP))
#: LP plan entries below this are floating-point debris of the solver (dropped; the marginals stay
#: exact within ~1e-15 per atom, inside the certificate's stated tolerance).
PLAN_FLOOR = 1e-15
#: Default absolute tolerance for the total masses and for snapping equal cumulative sums.
MASS_TOL = 1e-12


@dataclass(frozen=True)
class Coupling:
    r"""A sparse transport plan between two discrete laws.

    Attributes
    ----------
    rows, cols : ndarray of int, shape (k,)
        Atom indices :math:`(i, j)` of the plan's support (indices into the *given* arrays).
    mass : ndarray, shape (k,)
        :math:`\pi_{ij} > 0` on the support.
    shape : tuple of int
        ``(n, m)``.
    method : str
        ``"quantile"``, ``"emd"``, ``"lp"`` or ``"bottleneck"``.
    status : str
        One of :data:`solvers._types.STATUSES`.
    row_potential, col_potential : ndarray or None
        Dual potentials :math:`u, v` with :math:`u_i + v_j \le \tilde C_{ij}` for the shifted,
        capped cost (``None`` when the method has none).
    potential_shift : float
        The shift :math:`s` with :math:`\tilde C \le e^{\log C - s}`.
    stats : SolverStats
    """

    rows: NDArray[np.intp]
    cols: NDArray[np.intp]
    mass: NDArray[np.float64]
    shape: tuple[int, int]
    method: str
    status: str = "optimal"
    row_potential: NDArray[np.float64] | None = None
    col_potential: NDArray[np.float64] | None = None
    potential_shift: float = 0.0
    stats: SolverStats = field(default_factory=lambda: SolverStats(solver="none"))

    def dense(self) -> NDArray[np.float64]:
        """The plan as a dense ``(n, m)`` array."""
        plan = np.zeros(self.shape)
        np.add.at(plan, (self.rows, self.cols), self.mass)
        return plan

    def log_value(self, log_cost: NDArray[np.float64]) -> float:
        r"""Exact :math:`\log \sum \pi_{ij} C_{ij}` from log-costs on the support, shape (k,)."""
        lc = np.asarray(log_cost, dtype=np.float64)
        if lc.shape != self.mass.shape:
            raise InvalidParameterError(
                "log_cost", lc.shape, f"must have one entry per support piece {self.mass.shape}"
            )
        return float(logsumexp(lc, b=self.mass))



def _check_law(name: str, weights: Any, tol: float) -> NDArray[np.float64]:
    w = as_float_array(name, weights, ndim=1, low=0.0, low_open=False)
    total = float(w.sum())
    if abs(total - 1.0) > tol:
        raise InvalidParameterError(name, weights, f"must sum to 1 within {tol:g} (sum {total!r})")
    return w


def quantile_coupling(
    x: Any, p: Any, y: Any, q: Any, *, mass_tol: float = MASS_TOL
) -> Coupling:
    r"""The comonotone (quantile) coupling of two 1-D discrete laws.

    Sorting both supports, piece :math:`k` carries the mass of the interval
    :math:`(t_{k-1}, t_k]` of the merged cumulative distribution functions from the atom of
    :math:`P` whose quantile range contains it to the atom of :math:`Q` likewise. The result is
    optimal for every cost :math:`h(x - y)` with :math:`h` convex (MATH.md §3.2), and also a
    :math:`W_\infty`-optimal coupling.

    Parameters
    ----------
    x : array_like, shape (n,)
        Support of :math:`P`.
    p : array_like, shape (n,)
        Probabilities of :math:`P` (non-negative, summing to 1 within ``mass_tol``).
    y : array_like, shape (m,)
        Support of :math:`Q`.
    q : array_like, shape (m,)
        Probabilities of :math:`Q`.
    mass_tol : float, default 1e-12
        Cumulative sums of :math:`Q` within ``mass_tol`` of one of :math:`P` are snapped onto it, so
        that masses meant to coincide do not create spurious pieces of mass ~1e-17 between far
        atoms; the plan's marginals are then exact up to ``mass_tol`` per atom.

    Returns
    -------
    Coupling
        At most ``n + m - 1`` pieces, ``rows``/``cols`` indexing the given (unsorted) arrays.

    Examples
    --------
    >>> c = quantile_coupling([0, 1, 2], [.5, .3, .2], [0, 1, 2, 3], [.2, .3, .3, .2])
    >>> [(int(i), int(j), round(float(w), 12)) for i, j, w in zip(c.rows, c.cols, c.mass)]
    [(0, 0, 0.2), (0, 1, 0.3), (1, 2, 0.3), (2, 3, 0.2)]
    """
    start = time.perf_counter()
    xs = as_float_array("x", x, ndim=1)
    ys = as_float_array("y", y, ndim=1)
    tol = as_scalar("mass_tol", mass_tol, low=0.0, high=1e-3)
    pw = _check_law("p", p, max(tol, 1e-9))
    qw = _check_law("q", q, max(tol, 1e-9))
    if xs.shape != pw.shape:
        raise InvalidParameterError("p", p, f"must have the shape of x {xs.shape}")
    if ys.shape != qw.shape:
        raise InvalidParameterError("q", q, f"must have the shape of y {ys.shape}")
    ox = np.argsort(xs, kind="stable")
    oy = np.argsort(ys, kind="stable")
    cp_ = np.cumsum(pw[ox])
    cq = np.cumsum(qw[oy])
    # Snap each cumulative sum of Q onto a cumulative sum of P within tol (and the totals).
    idx = np.clip(np.searchsorted(cp_, cq), 0, cp_.size - 1)
    idx_lo = np.clip(idx - 1, 0, cp_.size - 1)
    for cand in (idx, idx_lo):
        close = np.abs(cp_[cand] - cq) <= tol
        cq = np.where(close, cp_[cand], cq)
    total = cp_[-1]
    if abs(cq[-1] - total) > max(tol, 1e-9):
        raise InvalidParameterError(
            "q", q, f"total mass {cq[-1]!r} differs from that of p {total!r}"
        )
    cq[-1] = total
    cq = np.minimum(np.maximum.accumulate(cq), total)
    breaks = np.union1d(cp_, cq)
    breaks = breaks[breaks > 0.0]
    lower = np.concatenate(([0.0], breaks[:-1]))
    mass = breaks - lower
    keep = mass > 0.0
    mass, mid = mass[keep], 0.5 * (breaks[keep] + lower[keep])
    ri = np.clip(np.searchsorted(cp_, mid, side="left"), 0, cp_.size - 1)
    ci = np.clip(np.searchsorted(cq, mid, side="left"), 0, cq.size - 1)
    stats = SolverStats(solver="quantile", solve_time=time.perf_counter() - start)
    return Coupling(
        rows=ox[ri].astype(np.intp),
        cols=oy[ci].astype(np.intp),
        mass=mass,
        shape=(xs.size, ys.size),
        method="quantile",
        stats=stats,
    )


def capped_costs(log_cost: NDArray[np.float64], shift: float) -> NDArray[np.float64]:
    r"""Shifted, capped costs :math:`\min(e^{\log C - s}, e^{12}) \le e^{\log C - s}`."""
    return np.minimum(np.exp(np.minimum(log_cost - shift, LOG_CAP)), COST_CAP)


def _lp_inputs(
    p: Any, q: Any, log_cost: Any, shift: float | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], float]:
    pw = _check_law("p", p, 1e-9)
    qw = _check_law("q", q, 1e-9)
    lc = as_float_array("log_cost", log_cost, ndim=2, allow_inf=False)
    if lc.shape != (pw.size, qw.size):
        raise InvalidParameterError(
            "log_cost", lc.shape, f"must have shape (len(p), len(q)) = {(pw.size, qw.size)}"
        )
    if shift is None:  # the independent coupling's value: an upper bound on the optimum
        s = float(logsumexp(lc + np.log(pw + 1e-300)[:, None] + np.log(qw + 1e-300)[None, :]))
    else:
        s = as_scalar("shift", shift)
    return pw, qw, lc, s


def _sparse(
    plan: NDArray[np.float64], floor: float = 0.0
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    rows, cols = np.nonzero(plan > floor)
    return rows.astype(np.intp), cols.astype(np.intp)


def emd_coupling(
    p: Any,
    q: Any,
    log_cost: Any,
    *,
    shift: float | None = None,
    max_iter: int = 1_000_000,
) -> Coupling:
    r"""Optimal coupling by the network simplex of POT ``ot.emd`` on capped costs.

    Solves :math:`\min_{\pi \ge 0,\ \pi 1 = p,\ \pi^\top 1 = q} \sum_{ij}\pi_{ij}\tilde C_{ij}`
    with :math:`\tilde C = \min(\exp(\log C - s), e^{12})` (MATH.md §3.3). Re-score the
    plan exactly with :meth:`Coupling.log_value`. The returned potentials are feasible for the
    capped costs, hence for :math:`e^{\log C - s}`. When the plan uses capped entries, the LP is
    re-solved with :math:`s` moved to the plan's exact log value (at most 6 solves) and the best
    exactly re-scored plan is returned.

    Parameters
    ----------
    p : array_like, shape (n,)
    q : array_like, shape (m,)
    log_cost : array_like, shape (n, m)
        :math:`\log C_{ij}` (finite).
    shift : float, optional
        :math:`s`; by default the log value of the independent coupling :math:`pq^\top`. Choose
        it near the decision threshold (or the expected optimum) so that the entries that matter
        are neither capped nor underflowed.
    max_iter : int
        Network-simplex iteration limit.

    Returns
    -------
    Coupling
        ``status`` ``"optimal"`` or ``"iteration_limit"``.

    Raises
    ------
    SolverError
        If POT fails (remedy: check the marginals, raise ``max_iter``).
    """
    pw, qw, lc, s = _lp_inputs(p, q, log_cost, shift)
    return _refined(lambda sh: _emd_once(pw, qw, lc, sh, max_iter), lc, s)


def _refined(solve: Any, lc: NDArray[np.float64], shift: float) -> Coupling:
    """Re-solve with the shift moved to the best plan's exact log value until they agree.

    The LP is accurate (absolute ~1e-16 * cap) only for shifted costs near 1: entries above the
    cap cannot be ranked and entries far below it are indistinguishable. So while the plan sits
    on capped entries or its exact log value is more than 2 away from the shift, re-solve with
    the shift at the best value found (at most 10 solves); return the best exactly re-scored plan.
    """
    best: Coupling | None = None
    best_value = np.inf
    s = shift
    for _ in range(10):
        c = solve(s)
        value = c.log_value(lc[c.rows, c.cols])
        if value < best_value:
            best, best_value = c, value
        capped = bool(np.any(lc[c.rows, c.cols] - s >= LOG_CAP))
        if (not capped and abs(value - s) <= 2.0) or not np.isfinite(best_value):
            break
        if best_value == s:
            break
        s = best_value
    if best is None:  # pragma: no cover - the loop runs at least once
        raise SolverError("coupling LP produced no plan")
    return best


def _emd_once(
    pw: NDArray[np.float64], qw: NDArray[np.float64], lc: NDArray[np.float64], s: float,
    max_iter: int,
) -> Coupling:
    import ot

    start = time.perf_counter()
    cost = capped_costs(lc, s)
    try:
        plan, log = ot.emd(pw / pw.sum(), qw / qw.sum(), cost, numItermax=max_iter, log=True)
    except Exception as exc:  # POT raises plain exceptions
        raise SolverError(
            f"POT ot.emd failed ({exc}); check the marginals or raise max_iter"
        ) from exc
    code = int(log.get("result_code", 0))
    status = {1: "optimal", 2: "iteration_limit"}.get(code, "solver_error")
    if status == "solver_error":
        raise SolverError(f"POT ot.emd returned code {code} ({log.get('warning')}); check inputs")
    plan = np.asarray(plan, dtype=np.float64)
    rows, cols = _sparse(plan, floor=PLAN_FLOOR)
    stats = SolverStats(
        solver="pot.emd", version=str(ot.__version__), solve_time=time.perf_counter() - start
    )
    return Coupling(
        rows=rows,
        cols=cols,
        mass=plan[rows, cols],
        shape=(pw.size, qw.size),
        method="emd",
        status=status,
        row_potential=np.asarray(log["u"], dtype=np.float64),
        col_potential=np.asarray(log["v"], dtype=np.float64),
        potential_shift=s,
        stats=stats,
    )


def coupling_lp_primal(
    p: NDArray[np.float64], q: NDArray[np.float64], cost: NDArray[np.float64]
) -> tuple[Any, Any, tuple[Any, Any]]:
    r"""The coupling LP in cvxpy: :math:`\min \langle C, \pi\rangle` over :math:`\Pi(p,q)`.

    Returns ``(problem, plan_variable, (row_constraint, col_constraint))``. With cvxpy's sign
    convention the potentials are minus the constraints' dual values.
    """
    import cvxpy as cp

    plan = cp.Variable(cost.shape, nonneg=True)
    rows = cp.sum(plan, axis=1) == p
    cols = cp.sum(plan, axis=0) == q
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(cost, plan))), [rows, cols])
    return prob, plan, (rows, cols)


def coupling_lp_dual(
    p: NDArray[np.float64], q: NDArray[np.float64], cost: NDArray[np.float64]
) -> tuple[Any, Any, Any]:
    r"""The dual LP :math:`\max p^\top u + q^\top v` s.t. :math:`u_i + v_j \le C_{ij}` in cvxpy.

    Returns ``(problem, u, v)``.
    """
    import cvxpy as cp

    u = cp.Variable(p.size)
    v = cp.Variable(q.size)
    cons = [u[:, None] + v[None, :] <= cost]
    prob = cp.Problem(cp.Maximize(p @ u + q @ v), cons)
    return prob, u, v




def lp_coupling(
    p: Any,
    q: Any,
    log_cost: Any,
    *,
    shift: float | None = None,
    solver: str | None = None,
) -> Coupling:
    r"""Optimal coupling from the cvxpy primal LP, with its dual potentials.

    Same problem and capping as :func:`emd_coupling`. The potentials are read from the dual values
    of the marginal constraints (:math:`u = -y_{\text{rows}}`, :math:`v = -y_{\text{cols}}` in
    cvxpy's convention); :func:`certificates.coupling.check_coupling` turns them into a certified
    lower bound after repairing any dual infeasibility.

    Parameters
    ----------
    solver : str, optional
        A cvxpy LP solver name; ``"HIGHS"`` when installed, else ``"CLARABEL"``.

    Raises
    ------
    SolverError
        If the solver fails or reports a non-optimal status.
    """
    import cvxpy as cp

    pw, qw, lc, s = _lp_inputs(p, q, log_cost, shift)
    name = solver or ("HIGHS" if "HIGHS" in cp.installed_solvers() else "CLARABEL")
    return _refined(lambda sh: _lp_once(pw, qw, lc, sh, name), lc, s)


def _lp_once(
    pw: NDArray[np.float64], qw: NDArray[np.float64], lc: NDArray[np.float64], s: float, name: str
) -> Coupling:
    import cvxpy as cp

    cost = capped_costs(lc, s)
    start = time.perf_counter()
    prob, plan_var, (rc, cc) = coupling_lp_primal(pw, qw, cost)
    try:
        prob.solve(solver=name)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy solver {name} failed on the coupling LP ({exc}); "
                          "try solver='CLARABEL' or emd_coupling") from exc
    status = map_cvxpy_status(prob.status)
    if status not in ("optimal", "optimal_inaccurate") or plan_var.value is None:
        raise SolverError(f"cvxpy solver {name} returned status {prob.status!r} on the coupling "
                          "LP; try another solver or emd_coupling")
    plan = np.maximum(np.asarray(plan_var.value, dtype=np.float64), 0.0)
    floor = PLAN_FLOOR if name == "HIGHS" else 1e-10
    rows, cols = _sparse(plan, floor=floor)
    stats = SolverStats(
        solver=f"cvxpy-{name}", version=str(cp.__version__),
        solve_time=time.perf_counter() - start,
    )
    return Coupling(
        rows=rows,
        cols=cols,
        mass=plan[rows, cols],
        shape=(pw.size, qw.size),
        method="lp",
        status=status,
        row_potential=-np.asarray(rc.dual_value, dtype=np.float64).ravel(),
        col_potential=-np.asarray(cc.dual_value, dtype=np.float64).ravel(),
        potential_shift=s,
        stats=stats,
    )


def bottleneck_coupling(p: Any, q: Any, distance: Any) -> tuple[float, Coupling]:
    r"""A coupling minimising the largest displacement, :math:`W_\infty = \min_\pi \max d_{ij}`.

    The maximum runs over the support of :math:`\pi`.

    Bisection over the sorted distinct distances :math:`t`: a coupling supported on
    :math:`\{d_{ij} \le t\}` exists iff the LP with cost :math:`1[d_{ij} > t]` has value 0
    (``ot.emd``; :math:`O(\log(nm))` LPs).

    Parameters
    ----------
    p : array_like, shape (n,)
    q : array_like, shape (m,)
    distance : array_like, shape (n, m)
        Non-negative ground distances :math:`d_{ij}`.

    Returns
    -------
    (float, Coupling)
        :math:`W_\infty` and a plan attaining it.
    """
    import ot

    pw = _check_law("p", p, 1e-9)
    qw = _check_law("q", q, 1e-9)
    dist = as_float_array("distance", distance, ndim=2, low=0.0, low_open=False)
    if dist.shape != (pw.size, qw.size):
        raise InvalidParameterError("distance", dist.shape, f"must have shape {(pw.size, qw.size)}")
    start = time.perf_counter()
    levels = np.unique(dist)
    pn, qn = pw / pw.sum(), qw / qw.sum()

    def attempt(t: float) -> NDArray[np.float64] | None:
        plan = np.asarray(ot.emd(pn, qn, (dist > t).astype(np.float64)), dtype=np.float64)
        leak = float(plan[dist > t].sum())
        return plan if leak <= 1e-13 else None

    lo, hi = 0, levels.size - 1
    best = attempt(float(levels[hi]))
    if best is None:  # pragma: no cover - the full support is always feasible
        raise SolverError("POT ot.emd failed to find any coupling; check the marginals")
    while lo < hi:
        mid = (lo + hi) // 2
        plan = attempt(float(levels[mid]))
        if plan is None:
            lo = mid + 1
        else:
            hi, best = mid, plan
    rows, cols = _sparse(np.where(dist <= levels[hi], best, 0.0))
    mass = best[rows, cols]
    w_inf = float(np.max(dist[rows, cols]))
    stats = SolverStats(solver="pot.emd-bisection", solve_time=time.perf_counter() - start)
    return w_inf, Coupling(
        rows=rows, cols=cols, mass=mass, shape=(pw.size, qw.size), method="bottleneck", stats=stats
    )
