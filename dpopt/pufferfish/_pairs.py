"""Per-pair transport machinery shared by calibration and baselines (private)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from certificates.coupling import (
    distance_upper,
    log_value_upper,
    perturbation_penalty,
    relative_deviation,
)
from dpopt.errors import InvalidParameterError
from dpopt.pufferfish.costs import ExponentialCost, LaplaceCost, RenyiCost, is_declared_convex
from dpopt.pufferfish.scenario import DiscreteLaw
from solvers.transport import (
    Coupling,
    bottleneck_coupling,
    emd_coupling,
    lp_coupling,
    quantile_coupling,
)

METHODS = ("auto", "quantile", "emd", "lp")
#: Internal route: quantile coupling at every scale where the cost is verified convex on the
#: pair's shift grid, the POT LP elsewhere (custom costs in 1-D under ``auto``).
CHECKED = "quantile-checked"
#: Largest shift grid (n * m) the numerical convexity check evaluates.
MAX_GRID = 4_000_000
#: Relative tolerance for snapping cumulative sums of the quantile coupling (the alternative
#: candidate; priced by the perturbation bound).
SNAP = 1e-9
#: Largest relative deviation of a candidate's marginals that is priced (certificates.REL_TOL).
REL_TOL = 1e-6


def resolve_method(method: str, dim: int, cost: RenyiCost | None = None) -> str:
    """The coupling route.

    ``auto`` gives the quantile coupling in 1-D for the built-in costs (each is convex in the
    shift, a declared and proved property), the checked route for any other cost in 1-D (quantile
    only where a numerical convexity check on the actual shift grid passes, else the POT LP), and
    the POT LP in d > 1.
    """
    if method not in METHODS:
        raise InvalidParameterError("method", method, f"must be one of {METHODS}")
    if method == "auto":
        if dim != 1:
            return "emd"
        return "quantile" if cost is None or is_declared_convex(cost) else CHECKED
    if method == "quantile" and dim != 1:
        raise InvalidParameterError("method", method, f"'quantile' needs a 1-D query (d = {dim})")
    return method


def convex_on_grid(z: NDArray[np.float64], log_c: NDArray[np.float64], rtol: float = 1e-9) -> bool:
    r"""Discrete convexity of :math:`C = e^{c}` on the sorted distinct points ``z``.

    For consecutive :math:`z_0 < z_1 < z_2` checks
    :math:`(C_1 - C_0)(z_2 - z_1) \le (C_2 - C_1)(z_1 - z_0)` (up to a relative ``rtol``), in
    log domain (each triple scaled by its largest value). Then the piecewise-linear interpolant
    is convex and agrees with :math:`C` at every realised shift, so the comonotone coupling is
    optimal for :math:`C` on these laws.
    """
    if z.size < 3:
        return True
    c0, c1, c2 = log_c[:-2], log_c[1:-1], log_c[2:]
    top = np.maximum(np.maximum(c0, c1), c2)
    if not np.all(np.isfinite(top)):
        return False
    e0, e1, e2 = np.exp(c0 - top), np.exp(c1 - top), np.exp(c2 - top)
    h1, h2 = z[1:-1] - z[:-2], z[2:] - z[1:-1]
    left = (e1 - e0) * h2
    right = (e2 - e1) * h1
    slack = rtol * (np.abs(left) + np.abs(right) + (e0 + e1 + e2) * (h1 + h2))
    return bool(np.all(left <= right + slack))


def proven_norm(cost: RenyiCost) -> float | None:
    r"""The ground norm's order :math:`p` of a built-in pure cost (Laplace: 1, exponential: its
    ``norm``), whose distances :func:`certificates.coupling.distance_upper` bounds in proven
    arithmetic; ``None`` for a finite order or a custom cost (its own ``distance`` is used)."""
    if not cost.is_pure or not is_declared_convex(cost):
        return None
    if isinstance(cost, LaplaceCost):
        return 1.0
    return float(cost.norm) if isinstance(cost, ExponentialCost) else None


def safe_log_cost(cost: RenyiCost, diff: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """``cost.log_cost`` with the scale-0 convention: 0 for a zero shift, +inf otherwise."""
    if scale > 0.0:
        out = np.asarray(cost.log_cost(diff, scale), dtype=np.float64)
        if np.isnan(out).any():
            raise InvalidParameterError("cost", cost, f"log_cost returned NaN at scale {scale!r}")
        return out
    dist = cost.distance(diff)
    return np.where(dist == 0.0, 0.0, np.inf)


@dataclass
class PairTransport:
    """The transport problem between two laws under one cost (the scale varies)."""

    p_law: DiscreteLaw
    q_law: DiscreteLaw
    cost: RenyiCost
    method: str
    _quantile: Coupling | None = field(default=None, init=False)
    _diff: NDArray[np.float64] | None = field(default=None, init=False)
    _grid: NDArray[np.float64] | None = field(default=None, init=False)
    routes: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.method in ("quantile", CHECKED):
            c = quantile_coupling(
                self.p_law.support[:, 0],
                self.p_law.probabilities,
                self.q_law.support[:, 0],
                self.q_law.probabilities,
            )
            snapped = quantile_coupling(
                self.p_law.support[:, 0],
                self.p_law.probabilities,
                self.q_law.support[:, 0],
                self.q_law.probabilities,
                snap=SNAP,
            )
            if snapped.exact != c.exact or not np.array_equal(snapped.rows, c.rows):
                c = replace(c, alternative=snapped)
            self._quantile = c
            self._diff = self.p_law.support[c.rows] - self.q_law.support[c.cols]
        if self.method == CHECKED:
            n, m = self.p_law.size, self.q_law.size
            if n * m <= MAX_GRID:
                z = (self.p_law.support[:, 0][:, None] - self.q_law.support[:, 0][None, :])
                self._grid = np.unique(z.ravel())

    # full (n, m, d) differences for the LP routes
    def full_diff(self) -> NDArray[np.float64]:
        x, y = self.p_law.support, self.q_law.support
        return np.asarray(x[:, None, :] - y[None, :, :], dtype=np.float64)

    def log_cost_matrix(self, scale: float) -> NDArray[np.float64]:
        diff = self.full_diff()
        n, m, d = diff.shape
        return safe_log_cost(self.cost, diff.reshape(n * m, d), scale).reshape(n, m)

    def plan_distance(self, c: Coupling) -> float:
        r"""Largest ground distance on the support of ``c``: proven from above
        (:func:`certificates.coupling.distance_upper`) for the built-in pure costs."""
        x, y = self.p_law.support[c.rows], self.q_law.support[c.cols]
        norm = proven_norm(self.cost)
        dist = self.cost.distance(x - y) if norm is None else distance_upper(x, y, norm)
        return float(np.max(dist)) if dist.size else 0.0

    def w_inf(self) -> tuple[float, Coupling]:
        r""":math:`W_\infty` in the cost's ground norm and a coupling attaining it (for the
        built-in pure costs the largest distance on its support is proven from above)."""
        if self.method == "quantile" and self._quantile is not None and self._diff is not None:
            if proven_norm(self.cost) is not None:
                return self.plan_distance(self._quantile), self._quantile
            dist = self.cost.distance(self._diff)
            return float(np.max(dist)), self._quantile
        diff = self.full_diff()
        n, m, d = diff.shape
        dist = self.cost.distance(diff.reshape(n * m, d)).reshape(n, m)
        w, c = bottleneck_coupling(self.p_law.probabilities, self.q_law.probabilities, dist)
        if proven_norm(self.cost) is not None:
            w = self.plan_distance(c)
        return w, c

    def pure_plan(self, level: float) -> tuple[Coupling, float, float]:
        r"""For :math:`\alpha = \infty`: the :math:`W_\infty` plan (or its snapped alternative)
        needing the least scale, with its largest displacement and perturbation penalty."""
        w, c = self.w_inf()
        best = (c, w, 0.0)
        alt = c.alternative
        if alt is not None:
            pen = self._penalty(alt)
            if pen < level:
                w_alt = self.plan_distance(alt)
                if w_alt / (level - pen) < w / level:
                    best = (alt, w_alt, pen)
        return best

    def _convex_at(self, scale: float) -> bool:
        if self._grid is None:
            return False
        lc = safe_log_cost(self.cost, self._grid[:, None], scale)
        return convex_on_grid(self._grid, lc)

    def _solve(self, scale: float, level: float) -> Coupling:
        if self._quantile is not None and (self.method == "quantile" or self._convex_at(scale)):
            self.routes.add("quantile")
            return self._quantile
        lc = self.log_cost_matrix(scale)
        lc = np.minimum(lc, 1e300)
        route = "lp" if self.method == "lp" else "emd"
        self.routes.add(route)
        solve = lp_coupling if route == "lp" else emd_coupling
        return solve(self.p_law.probabilities, self.q_law.probabilities, lc, shift=level)

    def _penalty(self, c: Coupling) -> float:
        """Perturbation penalty of a candidate (0 for an exact coupling of the laws)."""
        cached = c.__dict__.get("_delta")
        if cached is None:
            cached = relative_deviation(
                self.p_law.probabilities, self.q_law.probabilities, c.rows, c.cols, c.mass,
                exact=c.exact,
            )
            object.__setattr__(c, "_delta", cached)
        if cached == 0.0:
            return 0.0
        if cached > REL_TOL:
            return float("inf")
        agg = "max" if self.cost.is_pure else "mean"
        return perturbation_penalty(self.cost.alpha, cached, agg)

    def _score(self, c: Coupling, scale: float) -> float:
        diff = self.p_law.support[c.rows] - self.q_law.support[c.cols]
        lc = safe_log_cost(self.cost, diff, scale)
        pen = self._penalty(c)
        if self.cost.is_pure:
            return float(np.max(lc)) + pen
        lower, upper = c.mass_bounds()
        return log_value_upper(lc, upper, lower) + pen

    def best(self, scale: float, level: float) -> tuple[Coupling, float]:
        """The better candidate at ``scale`` and its log value (perturbation penalty included)."""
        c = self._solve(scale, level)
        best, value = c, self._score(c, scale)
        if c.alternative is not None:
            v_alt = self._score(c.alternative, scale)
            if v_alt < value:
                best, value = c.alternative, v_alt
        return best, value

    def coupling(self, scale: float, level: float) -> Coupling:
        """An optimal coupling for the cost at ``scale`` (the quantile one is scale-free)."""
        return self.best(scale, level)[0]

    def log_value(self, scale: float, level: float) -> float:
        r"""Upper bound on :math:`\log\sum\pi C` at ``scale`` (the max over the support if pure),
        from exact masses rounded outwards, plus the perturbation penalty of the candidate."""
        return self.best(scale, level)[1]
