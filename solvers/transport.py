r"""Discrete optimal-transport couplings for the Rényi Pufferfish calibration.

Given two discrete laws :math:`P = \sum_i p_i \delta_{x_i}` and :math:`Q = \sum_j q_j \delta_{y_j}`
and a cost matrix given by its logarithm :math:`\log C_{ij}`, these solvers return a coupling
:math:`\pi \in \Pi(P, Q)` (a plan with row sums :math:`p` and column sums :math:`q`) that minimises

.. math::

    V(\pi) = \sum_{ij} \pi_{ij} C_{ij}, \qquad
    \log V(\pi) = \operatorname{logsumexp}_{(i,j) \in \operatorname{supp}\pi}
    (\log \pi_{ij} + \log C_{ij}).

Three routes are offered, and they agree on shared instances:

1. :func:`quantile_coupling` — 1-D, the comonotone (north-west-corner) coupling, optimal for every
   cost :math:`h(x - y)` with :math:`h` convex (Santambrogio, ch. 2). It does not depend on the
   cost, so it is computed once and reused through a whole root-find. :math:`O((n+m)\log(n+m))`.
2. :func:`emd_coupling` — any dimension, the network-simplex LP of POT ``ot.emd``. Costs span
   hundreds of orders of magnitude, so the LP is fed the shifted, capped costs
   :math:`\tilde C_{ij} = \min(\exp(\log C_{ij} - s), e^{12})` and the returned plan is
   re-scored exactly in log domain (naive rescaling by the largest cost underflows
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
1. Peyré, Cuturi, "Computational Optimal Transport", Found. Trends ML 11 (2019), Section 2.
2. Flamary et al., "POT: Python Optimal Transport", JMLR 22 (2021).
3. Santambrogio, "Optimal Transport for Applied Mathematicians" (2015), Section 2.2 (monotone
   coupling).
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from certificates.coupling import ExactMasses, dyadic_integers
from certificates.errors import InvalidParameterError, SolverError
from certificates.validate import as_float_array, as_scalar
from solvers._types import SolverStats, map_cvxpy_status

if TYPE_CHECKING:  # pragma: no cover - cvxpy is imported lazily, when an LP is built
    import cvxpy as cp

__all__ = [
    "Coupling",
    "bottleneck_coupling",
    "capped_costs",
    "coupling_lp_dual",
    "coupling_lp_primal",
    "emd_coupling",
    "exact_coupling",
    "lp_coupling",
    "quantile_coupling",
]

#: Largest log-cost fed (after the shift) to an LP solver; see :func:`capped_costs`. A cap near e^50
#: suggests 50 / 1e15, but the network simplex works in absolute precision ~1e-16 * max cost, so a
#: cap of 1e15 hides every cost below ~0.1 (measured: errors up to 1.0 in log value on random
#: Gaussian costs); with e^12 the error was below 1e-11 and the re-solve loop handles plans that
#: sit on capped entries.
LOG_CAP = 12.0
#: Largest cost fed to an LP solver.
COST_CAP = float(np.exp(LOG_CAP))
#: Default tolerance on the total masses of the laws (input validation only: every coupling
#: returned here has exact marginals, see :attr:`Coupling.exact`).
MASS_TOL = 1e-9


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
    exact : ExactMasses or None
        The exact masses (integer numerators over one denominator): the plan is then an exact
        coupling of :math:`p/\sum p` and :math:`q/\sum q`; ``mass`` is this rounded to nearest.
    alternative : Coupling or None
        A second candidate, an exact coupling of laws within a tiny relative distance of
        :math:`p, q` (the LP solver's own plan, or the snapped quantile coupling), to be priced
        by :func:`certificates.coupling.perturbation_penalty`; ``None`` if there is none.
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
    exact: ExactMasses | None = None
    alternative: Coupling | None = None

    def mass_bounds(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Floats ``(lower, upper)`` enclosing the exact masses (``(mass, mass)`` if inexact)."""
        cached = self.__dict__.get("_bounds")
        if cached is None:
            if self.exact is None:
                cached = (self.mass, self.mass)
            else:
                cached = (self.exact.rounded(-1), self.exact.rounded(1))
            object.__setattr__(self, "_bounds", cached)
        return cached  # type: ignore[no-any-return]

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



def _check_law(name: str, weights: ArrayLike, tol: float) -> NDArray[np.float64]:
    w = as_float_array(name, weights, ndim=1, low=0.0, low_open=False)
    total = float(w.sum())
    if abs(total - 1.0) > tol:
        raise InvalidParameterError(name, weights, f"must sum to 1 within {tol:g} (sum {total!r})")
    return w


def quantile_coupling(
    x: ArrayLike, p: ArrayLike, y: ArrayLike, q: ArrayLike, *, mass_tol: float = MASS_TOL,
    snap: float = 0.0,
) -> Coupling:
    r"""The comonotone (quantile) coupling of two 1-D discrete laws, in exact arithmetic.

    With both supports sorted (stably), piece :math:`k` carries the mass of the interval
    :math:`(t_{k-1}, t_k]` of the merged cumulative distribution functions of the laws
    :math:`\hat p = p / \sum p` and :math:`\hat q = q / \sum q` from the atom of :math:`P` whose
    quantile range contains it to the atom of :math:`Q` likewise. The result is optimal for
    every cost :math:`h(x - y)` with :math:`h` convex (Santambrogio, ch. 2), and it is a
    :math:`W_\infty`-optimal coupling.

    The merge is exact: probabilities are binary fractions, so the cumulative sums are computed
    as Python integers over a common power of two and compared by cross-multiplication
    (:math:`C^P_i \sum q` against :math:`C^Q_j \sum p`). No atom is ever dropped (an atom of mass
    1e-300 gets its piece), and no piece is created that only floating-point round-off would
    produce. The exact masses are in ``Coupling.exact``; ``mass`` holds them rounded to nearest.

    Parameters
    ----------
    x : array_like, shape (n,)
        Support of :math:`P`.
    p : array_like, shape (n,)
        Probabilities of :math:`P` (non-negative, summing to 1 within ``mass_tol``; the law is
        ``p / sum(p)`` with the sum taken exactly).
    y : array_like, shape (m,)
        Support of :math:`Q`.
    q : array_like, shape (m,)
        Probabilities of :math:`Q`.
    mass_tol : float, default 1e-9
        Tolerance on the totals (input validation only; the coupling is exact).
    snap : float, default 0
        If positive, each interior cumulative sum of :math:`\hat q` that lies within ``snap``
        times the smaller of its two adjacent atoms' masses of a cumulative sum of
        :math:`\hat p` is moved onto it (exactly). The result is then an exact coupling of
        :math:`\hat p` and a law :math:`q'` within relative ``2 * snap`` of :math:`\hat q` atom
        by atom, which a certificate prices by the perturbation bound
        (:func:`certificates.coupling.perturbation_penalty`) instead of transporting a sliver
        of mass ~1e-17, left by decimal probabilities that do not sum exactly, to a far atom.

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
    pw = _check_law("p", p, max(tol, 1e-12))
    qw = _check_law("q", q, max(tol, 1e-12))
    if xs.shape != pw.shape:
        raise InvalidParameterError("p", p, f"must have the shape of x {xs.shape}")
    if ys.shape != qw.shape:
        raise InvalidParameterError("q", q, f"must have the shape of y {ys.shape}")
    ox = np.argsort(xs, kind="stable")
    oy = np.argsort(ys, kind="stable")
    big_p, _ = dyadic_integers(pw[ox])
    big_q, _ = dyadic_integers(qw[oy])
    tp, tq = sum(big_p), sum(big_q)
    # cumulative sums over the common denominator tp * tq
    cum_p = [c * tq for c in itertools.accumulate(big_p)]
    cum_q = [c * tp for c in itertools.accumulate(big_q)]
    if snap > 0.0:
        _snap(cum_p, cum_q, [v * tp for v in big_q], Fraction(as_scalar("snap", snap, high=0.25)))
    rows: list[int] = []
    cols: list[int] = []
    nums: list[int] = []
    i = j = 0
    prev = 0
    n, m = len(cum_p), len(cum_q)
    while i < n and j < m:
        a, b = cum_p[i], cum_q[j]
        t = a if a < b else b
        if t > prev:
            rows.append(i)
            cols.append(j)
            nums.append(t - prev)
            prev = t
        if a == t:
            i += 1
        if b == t:
            j += 1
    exact = ExactMasses(tuple(nums), tp * tq)
    stats = SolverStats(solver="quantile-exact", solve_time=time.perf_counter() - start)
    return Coupling(
        rows=ox[np.array(rows, dtype=np.intp)].astype(np.intp),
        cols=oy[np.array(cols, dtype=np.intp)].astype(np.intp),
        mass=exact.rounded(0),
        shape=(xs.size, ys.size),
        method="quantile",
        stats=stats,
        exact=exact,
    )


# --------------------------------------------------------------------------- exact repair
def _floor_scaled(w: float, total: int) -> int:
    """floor(w * total) exactly for a float w >= 0."""
    num, den = float(w).as_integer_ratio()
    return (num * total) // den


class _Forest:
    """Union-find over the n + m nodes (rows 0..n-1, columns n..n+m-1)."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, v: int) -> int:
        root = v
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[v] != root:
            self.parent[v], v = root, self.parent[v]
        return root

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[ra] = rb
        return True


def _tree_solve(
    a: list[int], b: list[int], edges: list[tuple[int, int]], rank: NDArray[np.float64],
    mass: NDArray[np.float64],
) -> dict[tuple[int, int], int] | None:
    """Exact masses on (a spanning forest of) the plan's support; None if that is infeasible.

    The heaviest acyclic subset of the support is kept (Kruskal by mass), the other support
    entries keep ``floor(mass * total)``; components whose targets do not balance are linked
    by the cheapest admissible edges (Kruskal by rank); then each tree is solved exactly by
    peeling leaves. This is what the network simplex computes on its basis, in exact arithmetic.
    """
    n, m = len(a), len(b)
    total = sum(a)
    res = [*a, *b]  # residual targets (columns as nodes n..n+m-1)
    forest = _Forest(n + m)
    tree: list[tuple[int, int]] = []
    fixed: dict[tuple[int, int], int] = {}
    order = sorted(range(len(edges)), key=lambda k: -mass[k])
    for k in order:
        i, j = edges[k]
        if forest.union(i, n + j):
            tree.append((i, j))
        else:
            v = _floor_scaled(float(mass[k]), total)
            if v > 0:
                fixed[(i, j)] = v
                res[i] -= v
                res[n + j] -= v
    if any(v < 0 for v in res):
        return None
    # balance of each component: rows count +, columns -
    bal: dict[int, int] = {}
    for v in range(n + m):
        r = forest.find(v)
        bal[r] = bal.get(r, 0) + (res[v] if v < n else -res[v])
    bad = {r for r, s in bal.items() if s != 0}
    if bad:
        rows_bad = np.array([i for i in range(n) if forest.find(i) in bad], dtype=np.intp)
        cols_bad = np.array([j for j in range(m) if forest.find(n + j) in bad], dtype=np.intp)
        if rows_bad.size == 0 or cols_bad.size == 0:
            return None
        sub = rank[np.ix_(rows_bad, cols_bad)]
        flat = np.argsort(sub, axis=None, kind="stable")
        roots = {forest.find(v) for v in bad}
        left = len(roots)
        for f in flat.tolist():
            if left <= 1:
                break
            ii, jj = divmod(f, cols_bad.size)
            if not np.isfinite(sub[ii, jj]):
                return None
            i, j = int(rows_bad[ii]), int(cols_bad[jj])
            if forest.union(i, n + j):
                tree.append((i, j))
                left -= 1
        if left > 1:
            return None
    # peel leaves of every tree
    adj: dict[int, list[int]] = {}
    for k, (i, j) in enumerate(tree):
        adj.setdefault(i, []).append(k)
        adj.setdefault(n + j, []).append(k)
    degree = {v: len(ks) for v, ks in adj.items()}
    alive = [True] * len(tree)
    flow: dict[tuple[int, int], int] = {}
    stack = [v for v, d in degree.items() if d == 1]
    while stack:
        v = stack.pop()
        if degree[v] != 1:
            continue
        k = next(k for k in adj[v] if alive[k])
        i, j = tree[k]
        u = n + j if v == i else i
        f = res[v]
        alive[k] = False
        degree[v] = 0
        degree[u] -= 1
        res[v] = 0
        res[u] -= f
        if f != 0:
            flow[(i, j)] = flow.get((i, j), 0) + f
        if degree[u] == 1:
            stack.append(u)
    if any(res):
        return None
    for key, v in fixed.items():
        flow[key] = flow.get(key, 0) + v
    return flow


def _floored(
    edges: list[tuple[int, int]], mass: NDArray[np.float64], total: int
) -> dict[tuple[int, int], int]:
    flow: dict[tuple[int, int], int] = {}
    for k, (i, j) in enumerate(edges):
        v = _floor_scaled(float(mass[k]), total)
        if v > 0:
            flow[(i, j)] = flow.get((i, j), 0) + v
    return flow


def _rebalance(
    a: list[int], b: list[int], start: dict[tuple[int, int], int], rank: NDArray[np.float64],
) -> dict[tuple[int, int], int] | None:
    """From a non-negative integer flow: trim the most expensive pieces of rows and columns
    that exceed their targets, then move the deficits along cheapest augmenting paths."""
    flow = {k: v for k, v in start.items() if v > 0}
    for axis, target in ((0, a), (1, b)):
        by: dict[int, list[tuple[int, int]]] = {}
        for key in flow:
            by.setdefault(key[axis], []).append(key)
        for node, keys in by.items():
            over = sum(flow[kk] for kk in keys) - target[node]
            for kk in sorted(keys, key=lambda e: -rank[e]):
                if over <= 0:
                    break
                cut = min(over, flow[kk])
                flow[kk] -= cut
                over -= cut
    flow = {kk: v for kk, v in flow.items() if v > 0}
    dr = list(a)
    dc = list(b)
    for (i, j), v in flow.items():
        dr[i] -= v
        dc[j] -= v
    budget = 3 * (sum(1 for v in dr if v) + sum(1 for v in dc if v)) + 20
    _augment(flow, dr, dc, rank, max_rounds=budget)
    _pair_cheapest(flow, dr, dc, rank)
    if any(dr) or any(dc):
        return None
    return flow


def _pair_cheapest(
    flow: dict[tuple[int, int], int], dr: list[int], dc: list[int], rank: NDArray[np.float64]
) -> None:
    """Move what deficits remain directly along the cheapest admissible (row, column) pairs
    (in place); used when the augmenting-path budget is spent."""
    ri = np.array([i for i, v in enumerate(dr) if v > 0], dtype=np.intp)
    cj = np.array([j for j, v in enumerate(dc) if v > 0], dtype=np.intp)
    if not (ri.size and cj.size):
        return
    sub = rank[np.ix_(ri, cj)]
    for f in np.argsort(sub, axis=None, kind="stable").tolist():
        ii, jj = divmod(f, cj.size)
        if not np.isfinite(sub[ii, jj]):
            return
        i, j = int(ri[ii]), int(cj[jj])
        move = min(dr[i], dc[j])
        if move > 0:
            flow[(i, j)] = flow.get((i, j), 0) + move
            dr[i] -= move
            dc[j] -= move


def _augment(
    flow: dict[tuple[int, int], int], dr: list[int], dc: list[int], rank: NDArray[np.float64],
    max_rounds: int | None = None,
) -> None:
    """Move row deficits ``dr`` to column deficits ``dc`` (in place) along cheapest augmenting
    paths of the residual graph (successive shortest paths, Bellman-Ford in numpy), cancelling
    any negative cycle met on the way.

    A path may add mass to a pair, take it off an existing piece, add it to another pair, and so
    on, so a tiny atom the LP did not see is served by re-routing a sliver of a nearby piece
    instead of being sent across the plan; a negative cycle (the LP solved capped costs, or
    its tolerance hid an improvement) is cancelled, which lowers the true cost. Costs are
    ``exp(rank)`` (clipped at e^690); ``+inf`` pairs are never used. Amounts are exact integers.
    """
    n, m = len(dr), len(dc)
    cost = np.where(np.isfinite(rank), np.exp(np.minimum(rank, 690.0)), np.inf)
    rounds = 4 * (n + m) + 50 if max_rounds is None else max_rounds
    for _ in range(rounds):
        src = [i for i in range(n) if dr[i] > 0]
        if not src:
            return
        keys = [k for k, v in flow.items() if v > 0]
        pr = np.array([k[0] for k in keys], dtype=np.intp)
        pc = np.array([k[1] for k in keys], dtype=np.intp)
        back = cost[pr, pc] if keys else np.zeros(0)
        is_src = np.zeros(n, dtype=bool)
        is_src[src] = True
        dist_r = np.where(is_src, 0.0, np.inf)
        pred_r = np.full(n, -1, dtype=np.intp)  # column whose piece was reduced to reach row
        dist_c = np.full(m, np.inf)
        pred_c = np.full(m, -1, dtype=np.intp)
        for _ in range(n + m + 1):
            cand = dist_r[:, None] + cost
            best_i = np.argmin(cand, axis=0)
            new_c = cand[best_i, np.arange(m)]
            # an improvement must exceed the round-off of the sums that produced it
            size_c = np.abs(dist_r[best_i]) + cost[best_i, np.arange(m)] + np.abs(dist_c)
            with np.errstate(invalid="ignore"):
                upd_c = np.where(np.isfinite(dist_c),
                                 new_c < dist_c - 1e-12 * size_c - 1e-300,
                                 np.isfinite(new_c))
            dist_c = np.where(upd_c, new_c, dist_c)
            pred_c = np.where(upd_c, best_i, pred_c)
            changed = bool(upd_c.any())
            if keys:
                via = dist_c[pc] - back
                order = np.lexsort((via, pr))
                first = np.ones(order.size, dtype=bool)
                first[1:] = pr[order][1:] != pr[order][:-1]
                rows_k, vals_k = pr[order][first], via[order][first]
                cols_k = pc[order][first]
                old = dist_r[rows_k]
                size = np.abs(dist_c[cols_k]) + cost[rows_k, cols_k] + np.abs(old)
                with np.errstate(invalid="ignore"):
                    upd = np.where(np.isfinite(old), vals_k < old - 1e-12 * size - 1e-300,
                                   np.isfinite(vals_k)) & ~is_src[rows_k]
                if upd.any():
                    dist_r[rows_k[upd]] = vals_k[upd]
                    pred_r[rows_k[upd]] = cols_k[upd]
                    changed = True
            if not changed:
                break
        sinks = [j for j in range(m) if dc[j] > 0 and np.isfinite(dist_c[j])]
        if not sinks:
            return
        j = min(sinks, key=lambda jj: dist_c[jj])
        path: list[tuple[int, int, int]] = []  # (row, col, +1 add / -1 remove), sink first
        first_edge: dict[int, int] = {}
        cycle: list[tuple[int, int, int]] | None = None
        for _ in range(n + 1):
            i = int(pred_c[j])
            if i < 0:
                return
            if i in first_edge:  # a negative cycle: cancel it
                cycle = [*path[first_edge[i] + 1:], (i, j, 1)]
                break
            first_edge[i] = len(path)
            path.append((i, j, 1))
            if is_src[i]:
                break
            j = int(pred_r[i])
            if j < 0:
                return
            path.append((i, j, -1))
        else:
            return
        edges = cycle if cycle is not None else path
        amount = min((flow.get((ii, jj), 0) for ii, jj, sg in edges if sg < 0), default=None)
        if cycle is None:
            ends = min(dc[path[0][1]], dr[path[-1][0]])
            amount = ends if amount is None else min(amount, ends)
        if amount is None or amount <= 0:
            return
        for ii, jj, sign in edges:
            v = flow.get((ii, jj), 0) + sign * amount
            if v:
                flow[(ii, jj)] = v
            else:
                flow.pop((ii, jj), None)
        if cycle is None:
            dr[path[-1][0]] -= amount
            dc[path[0][1]] -= amount


def exact_coupling(
    p: ArrayLike, q: ArrayLike, rows: ArrayLike, cols: ArrayLike, mass: ArrayLike,
    rank: ArrayLike,
) -> tuple[NDArray[np.intp], NDArray[np.intp], ExactMasses] | None:
    r"""An exact coupling of :math:`\hat p = p/\sum p` and :math:`\hat q = q/\sum q` from a
    floating-point plan (an LP solver's output), in integer arithmetic.

    LP solvers meet the marginals only up to absolute tolerances (HiGHS ~1e-7 by default,
    POT ~1e-16 times the largest mass), which is meaningless for an atom of mass 1e-8 or
    1e-300. This repair never drops an atom: it solves the marginal equations exactly on a
    spanning forest of the plan's support (the basis of the simplex method), linking components
    whose exact totals do not balance by the cheapest admissible edges; negative masses are
    then clipped, the most expensive pieces of over-full rows and columns trimmed, and the
    deficits moved along cheapest augmenting paths of the residual graph.

    Parameters
    ----------
    p, q : array_like, shapes (n,), (m,)
        The laws (exactly normalised).
    rows, cols, mass : array_like, shape (k,)
        The floating-point plan (entries with ``mass > 0`` are its support).
    rank : array_like, shape (n, m)
        Costs used to choose links and trims (any increasing function of the cost, e.g. the
        log-cost); ``+inf`` marks forbidden pairs.

    Returns
    -------
    (rows, cols, ExactMasses) or None
        ``None`` when no exact coupling avoiding the forbidden pairs was found.
    """
    pw = as_float_array("p", p, ndim=1, low=0.0, low_open=False)
    qw = as_float_array("q", q, ndim=1, low=0.0, low_open=False)
    rk = np.asarray(rank, dtype=np.float64)
    ri = np.asarray(rows, dtype=np.intp).ravel()
    ci = np.asarray(cols, dtype=np.intp).ravel()
    w = np.asarray(mass, dtype=np.float64).ravel()
    keep = (w > 0.0) & np.isfinite(rk[ri, ci])
    ri, ci, w = ri[keep], ci[keep], w[keep]
    big_p, _ = dyadic_integers(pw)
    big_q, _ = dyadic_integers(qw)
    tp, tq = sum(big_p), sum(big_q)
    a = [v * tq for v in big_p]
    b = [v * tp for v in big_q]
    edges = list(zip(ri.tolist(), ci.tolist(), strict=True))
    flow = _tree_solve(a, b, edges, rk, w)
    if flow is None or min(flow.values(), default=0) < 0:
        start = _floored(edges, w, sum(a)) if flow is None else flow
        flow = _rebalance(a, b, start, rk)
    if flow is None:
        return None
    keys = sorted(k for k, v in flow.items() if v > 0)
    return (
        np.array([k[0] for k in keys], dtype=np.intp),
        np.array([k[1] for k in keys], dtype=np.intp),
        ExactMasses(tuple(flow[k] for k in keys), tp * tq),
    )


def _snap(cum_p: list[int], cum_q: list[int], q_mass: list[int], tol: Fraction) -> None:
    """Move interior entries of ``cum_q`` onto the nearest entry of ``cum_p`` (in place) when
    within ``tol`` times the smaller adjacent mass of ``q`` (all integers, exact)."""
    num, den = tol.numerator, tol.denominator
    for j in range(len(cum_q) - 1):
        b = cum_q[j]
        k = bisect.bisect_left(cum_p, b)
        best = None
        for cand in (k - 1, k):
            if 0 <= cand < len(cum_p):
                d = abs(cum_p[cand] - b)
                if best is None or d < abs(best - b):
                    best = cum_p[cand]
        if best is None or best == b:
            continue
        lo = cum_q[j - 1] if j > 0 else 0
        if abs(best - b) * den <= num * min(q_mass[j], q_mass[j + 1]) and lo < best < cum_q[j + 1]:
            cum_q[j] = best


def capped_costs(log_cost: NDArray[np.float64], shift: float) -> NDArray[np.float64]:
    r"""Shifted, capped costs fed to an LP solver, :math:`\tilde C \le e^{\log C - s}`.

    :math:`\tilde C = e^{x}` for :math:`x = \log C - s \le 12`, and above the cap
    :math:`\tilde C = e^{12}(1 + \log(1 + x - 12))`: still increasing in the cost (so the LP
    prefers the cheaper of two pairs above the cap, e.g. where a tiny far atom should go) while
    the largest entry stays within a few times :math:`e^{12}` (the network simplex works in
    absolute precision ~1e-16 times the largest cost). Since :math:`1 + \log(1+t) \le e^t`,
    :math:`\tilde C \le e^{\log C - s}`: potentials feasible for :math:`\tilde C` remain
    feasible for the true shifted cost.
    """
    x = np.asarray(log_cost, dtype=np.float64) - shift
    over = np.maximum(x - LOG_CAP, 0.0)
    return np.where(x <= LOG_CAP, np.exp(np.minimum(x, LOG_CAP)), COST_CAP * (1.0 + np.log1p(over)))


def _lp_inputs(
    p: ArrayLike, q: ArrayLike, log_cost: ArrayLike, shift: float | None
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


_REPAIRS: dict[tuple[bytes, ...], tuple[Any, Any, ExactMasses]] = {}


def _exactify(
    pw: NDArray[np.float64], qw: NDArray[np.float64], lc: NDArray[np.float64],
    plan: NDArray[np.float64], **fields: Any,
) -> Coupling:
    """An exact coupling from a solver's dense floating-point plan (see :func:`exact_coupling`)."""
    rows, cols = np.nonzero(plan > 0.0)
    # The exact masses depend on the plan's support (the LP basis), not on the costs: a root
    # find re-solving at nearby scales mostly meets the same basis, so reuse its repair.
    key = (pw.tobytes(), qw.tobytes(), rows.tobytes(), cols.tobytes())
    out = _REPAIRS.get(key)
    if out is None:
        out = exact_coupling(pw, qw, rows, cols, plan[rows, cols], lc)
        if out is not None:
            if len(_REPAIRS) >= 256:
                _REPAIRS.pop(next(iter(_REPAIRS)))
            _REPAIRS[key] = out
    if out is None:  # pragma: no cover - every pair is admissible here
        raise SolverError("could not repair the LP plan to an exact coupling")
    r, c, ex = out
    raw = Coupling(rows=rows.astype(np.intp), cols=cols.astype(np.intp),
                   mass=plan[rows, cols], shape=(pw.size, qw.size), **fields)
    return Coupling(rows=r, cols=c, mass=ex.rounded(0), shape=(pw.size, qw.size), exact=ex,
                    alternative=raw, **fields)


def emd_coupling(
    p: ArrayLike,
    q: ArrayLike,
    log_cost: ArrayLike,
    *,
    shift: float | None = None,
    max_iter: int = 1_000_000,
) -> Coupling:
    r"""Optimal coupling by the network simplex of POT ``ot.emd`` on capped costs.

    Solves :math:`\min_{\pi \ge 0,\ \pi 1 = p,\ \pi^\top 1 = q} \sum_{ij}\pi_{ij}\tilde C_{ij}`
    with the shifted, capped costs :math:`\tilde C` of :func:`capped_costs`. The solver's plan
    is then made an *exact* coupling of :math:`p/\sum p` and :math:`q/\sum q` by
    :func:`exact_coupling` (solver marginals are only accurate to an absolute tolerance) and
    re-scored exactly in log domain. The returned potentials are feasible for the capped costs,
    hence for :math:`e^{\log C - s}`. While the plan sits on capped entries or its log value is
    far from :math:`s`, the LP is re-solved with :math:`s` moved to the plan's log value (at most
    10 solves) and the best exactly re-scored plan is returned.

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
        ``status`` ``"optimal"`` or ``"iteration_limit"``; ``exact`` holds the exact masses.

    Raises
    ------
    SolverError
        If POT fails (remedy: check the marginals, raise ``max_iter``).
    """
    pw, qw, lc, s = _lp_inputs(p, q, log_cost, shift)
    return _refined(lambda sh: _emd_once(pw, qw, lc, sh, max_iter), lc, s)


def _refined(solve: Callable[[float], Coupling], lc: NDArray[np.float64], shift: float
             ) -> Coupling:
    """Re-solve with the shift moved to the best plan's exact log value until they agree.

    The LP is accurate (absolute ~1e-16 * cap) only for shifted costs near 1: entries above the
    cap are only ranked coarsely and entries far below it are indistinguishable. So while the
    plan sits on capped entries or its exact log value is more than 2 away from the shift,
    re-solve with the shift at the best value found (at most 10 solves); return the best
    exactly re-scored plan.
    """
    best: Coupling | None = None
    best_value = np.inf
    s = shift
    tried: set[float] = set()
    for _ in range(10):
        tried.add(s)
        c = solve(s)
        value = c.log_value(lc[c.rows, c.cols])
        if value < best_value:
            best, best_value = c, value
        capped = bool(np.any(lc[c.rows, c.cols] - s >= LOG_CAP))
        if (not capped and abs(value - s) <= 2.0) or not np.isfinite(best_value):
            break
        if best_value in tried:
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
    stats = SolverStats(
        solver="pot.emd", version=str(ot.__version__), solve_time=time.perf_counter() - start
    )
    return _exactify(
        pw, qw, lc, np.asarray(plan, dtype=np.float64), method="emd", status=status,
        row_potential=np.asarray(log["u"], dtype=np.float64),
        col_potential=np.asarray(log["v"], dtype=np.float64),
        potential_shift=s, stats=stats,
    )


def coupling_lp_primal(
    p: NDArray[np.float64], q: NDArray[np.float64], cost: NDArray[np.float64]
) -> tuple[cp.Problem, cp.Variable, tuple[cp.Constraint, cp.Constraint]]:
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
) -> tuple[cp.Problem, cp.Variable, cp.Variable]:
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
    p: ArrayLike,
    q: ArrayLike,
    log_cost: ArrayLike,
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
    stats = SolverStats(
        solver=f"cvxpy-{name}", version=str(cp.__version__),
        solve_time=time.perf_counter() - start,
    )
    return _exactify(
        pw, qw, lc, plan, method="lp", status=status,
        row_potential=-np.asarray(rc.dual_value, dtype=np.float64).ravel(),
        col_potential=-np.asarray(cc.dual_value, dtype=np.float64).ravel(),
        potential_shift=s, stats=stats,
    )


def bottleneck_coupling(p: ArrayLike, q: ArrayLike, distance: ArrayLike
                        ) -> tuple[float, Coupling]:
    r"""A coupling minimising the largest displacement, :math:`W_\infty = \min_\pi \max d_{ij}`.

    The maximum runs over the support of :math:`\pi`.

    Bisection over the sorted distinct distances :math:`t`: a coupling supported on
    :math:`\{d_{ij} \le t\}` exists iff the LP with cost :math:`1[d_{ij} > t]` has value 0
    (``ot.emd``; :math:`O(\log(nm))` LPs). A level counts as feasible only when the LP's plan
    can be repaired (:func:`exact_coupling`) to an *exact* coupling on :math:`\{d \le t\}`,
    so a tiny atom the LP's tolerance ignores can never hide a long displacement; the
    returned plan is exact (``Coupling.exact``).

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

    def attempt(t: float) -> tuple[NDArray[np.intp], NDArray[np.intp], ExactMasses] | None:
        plan = np.asarray(ot.emd(pn, qn, (dist > t).astype(np.float64)), dtype=np.float64)
        rows, cols = np.nonzero(plan > 0.0)
        rank = np.where(dist <= t, dist, np.inf)
        return exact_coupling(pw, qw, rows, cols, plan[rows, cols], rank)

    lo, hi = 0, levels.size - 1
    best = attempt(float(levels[hi]))
    if best is None:  # pragma: no cover - the full support is always feasible
        raise SolverError("POT ot.emd failed to find any coupling; check the marginals")
    while lo < hi:
        mid = (lo + hi) // 2
        found = attempt(float(levels[mid]))
        if found is None:
            lo = mid + 1
        else:
            hi, best = mid, found
    rows, cols, exact = best
    w_inf = float(np.max(dist[rows, cols]))
    stats = SolverStats(solver="pot.emd-bisection", solve_time=time.perf_counter() - start)
    return w_inf, Coupling(
        rows=rows, cols=cols, mass=exact.rounded(0), shape=(pw.size, qw.size),
        method="bottleneck", stats=stats, exact=exact,
    )
