"""Per-pair transport machinery shared by calibration and baselines (private)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from dpopt.errors import InvalidParameterError
from dpopt.pufferfish.costs import RenyiCost
from dpopt.pufferfish.scenario import DiscreteLaw
from solvers.transport import (
    Coupling,
    bottleneck_coupling,
    emd_coupling,
    lp_coupling,
    quantile_coupling,
)

METHODS = ("auto", "quantile", "emd", "lp")


def log_mean_exp(lc: NDArray[np.float64], w: NDArray[np.float64]) -> float:
    """log sum_k w_k e^{c_k}; log1p(fsum(w - 1, w expm1(c))) when all c <= 1 (relative precision
    for thresholds near 0), else log-sum-exp."""
    if w.size == 0:
        return float("-inf")
    if float(np.max(lc)) <= 1.0:
        excess = math.fsum(np.concatenate([w, [-1.0], w * np.expm1(lc)]).tolist())
        return float(np.log1p(excess)) if excess > -1.0 else float("-inf")
    return float(logsumexp(lc, b=w))


def resolve_method(method: str, dim: int) -> str:
    """``auto`` -> ``quantile`` in 1-D (all our costs are convex, MATH.md §3.2), else ``emd``."""
    if method not in METHODS:
        raise InvalidParameterError("method", method, f"must be one of {METHODS}")
    if method == "auto":
        return "quantile" if dim == 1 else "emd"
    if method == "quantile" and dim != 1:
        raise InvalidParameterError("method", method, f"'quantile' needs a 1-D query (d = {dim})")
    return method


def safe_log_cost(cost: RenyiCost, diff: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """``cost.log_cost`` with the scale-0 convention: 0 for a zero shift, +inf otherwise."""
    if scale > 0.0:
        return cost.log_cost(diff, scale)
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

    def __post_init__(self) -> None:
        if self.method == "quantile":
            c = quantile_coupling(
                self.p_law.support[:, 0],
                self.p_law.probabilities,
                self.q_law.support[:, 0],
                self.q_law.probabilities,
            )
            self._quantile = c
            self._diff = self.p_law.support[c.rows] - self.q_law.support[c.cols]

    # full (n, m, d) differences for the LP routes
    def full_diff(self) -> NDArray[np.float64]:
        x, y = self.p_law.support, self.q_law.support
        return np.asarray(x[:, None, :] - y[None, :, :], dtype=np.float64)

    def log_cost_matrix(self, scale: float) -> NDArray[np.float64]:
        diff = self.full_diff()
        n, m, d = diff.shape
        return safe_log_cost(self.cost, diff.reshape(n * m, d), scale).reshape(n, m)

    def w_inf(self) -> tuple[float, Coupling]:
        r""":math:`W_\infty` in the cost's ground norm and a coupling attaining it."""
        if self._quantile is not None and self._diff is not None:
            dist = self.cost.distance(self._diff)
            return float(np.max(dist)), self._quantile
        diff = self.full_diff()
        n, m, d = diff.shape
        dist = self.cost.distance(diff.reshape(n * m, d)).reshape(n, m)
        return bottleneck_coupling(self.p_law.probabilities, self.q_law.probabilities, dist)

    def coupling(self, scale: float, level: float) -> Coupling:
        """An optimal coupling for the cost at ``scale`` (the quantile one is scale-free)."""
        if self._quantile is not None:
            return self._quantile
        lc = self.log_cost_matrix(scale)
        lc = np.minimum(lc, 1e300)
        solve = emd_coupling if self.method == "emd" else lp_coupling
        return solve(self.p_law.probabilities, self.q_law.probabilities, lc, shift=level)

    def log_value(self, scale: float, level: float) -> float:
        r"""Exact :math:`\log\min_\pi\sum\pi C` at ``scale`` (max over the support if pure)."""
        c = self.coupling(scale, level)
        diff = self.p_law.support[c.rows] - self.q_law.support[c.cols]
        lc = safe_log_cost(self.cost, diff, scale)
        if self.cost.is_pure:
            return float(np.max(lc))
        return log_mean_exp(lc, c.mass)
