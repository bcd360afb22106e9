r""":math:`W_\infty` baselines for (Rényi) Pufferfish privacy.

With :math:`W_\infty(P,Q) = \min_\pi \max_{\operatorname{supp}\pi}\lVert x - y\rVert` (the ground
norm of the cost: :math:`\ell_1` for product Laplace, Mahalanobis for Gaussian) and the largest
value over pairs and priors:

* pure Pufferfish, Wasserstein mechanism of Song, Wang and Chaudhuri (2017):
  :math:`b = W_\infty/\varepsilon`;
* RPP with :math:`W_\infty` (the general Wasserstein mechanism of Pierquin, Bellet, Tommasi and
  Boussard, "Rényi Pufferfish Privacy: General Additive Noise Mechanisms and Privacy
  Amplification by Iteration", re-derived here): Laplace, the smallest :math:`b` with
  :math:`D^{Lap}_\alpha(W_\infty/b)\le \varepsilon`
  (:math:`\log M^{Lap}_\alpha(W_\infty/b) \le (\alpha-1)\varepsilon`); Gaussian,
  :math:`\sigma^2 = \alpha W_\infty^2/(2\varepsilon)`.

Because an average never exceeds a maximum, the α-Wasserstein calibration of
:mod:`dpopt.pufferfish.calibration` with the same (exact) cost is never larger.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from certificates.coupling import least_pure_scale
from certificates.validate import as_scalar
from dpopt.errors import InvalidTypeError
from dpopt.pufferfish._pairs import PairTransport, proven_norm, resolve_method
from dpopt.pufferfish.costs import GaussianCost, LaplaceCost, RenyiCost, safe_level
from dpopt.pufferfish.scenario import Scenario

__all__ = [
    "Baseline",
    "rpp_winf_gaussian",
    "rpp_winf_laplace",
    "wasserstein_inf",
    "winf_baseline",
    "winf_laplace",
]


@dataclass(frozen=True)
class Baseline:
    r"""A :math:`W_\infty` calibration.

    Attributes
    ----------
    name : str
    scale : float
        :math:`W_\infty / t^*` with :math:`g(t^*) = (\alpha-1)\varepsilon` for the cost profile g.
    w_inf : float
        Largest :math:`W_\infty` over pairs and priors (ground norm of the cost).
    binding_pair : (prior, s_i, s_j)
    alpha, epsilon : float
    """

    name: str
    scale: float
    w_inf: float
    binding_pair: tuple[Hashable, Hashable, Hashable]
    alpha: float
    epsilon: float


def wasserstein_inf(scenario: Scenario, cost: RenyiCost | None = None
                    ) -> dict[tuple[Hashable, Hashable, Hashable], float]:
    r""":math:`W_\infty` of every ``(prior, s_i, s_j)`` in the cost's ground norm (default
    :math:`\ell_1`, which is :math:`|x - y|` in 1-D).

    1-D: from the quantile coupling (:math:`W_\infty`-optimal); d > 1: bisection over LPs
    (:func:`solvers.transport.bottleneck_coupling`). For the pure Laplace and exponential costs
    (the default included) each value is the plan's largest distance rounded up from the exact
    differences of the atoms (:func:`certificates.coupling.distance_upper`).
    """
    if not isinstance(scenario, Scenario):
        raise InvalidTypeError("scenario", scenario, "a Scenario")
    c = LaplaceCost(float("inf")) if cost is None else cost
    meth = resolve_method("auto", scenario.dim, c)
    out: dict[tuple[Hashable, Hashable, Hashable], float] = {}
    for theta, si, sj, p_law, q_law in scenario.iter_pairs():
        out[(theta, si, sj)] = PairTransport(p_law, q_law, c, meth).w_inf()[0]
    return out


def winf_baseline(scenario: Scenario, cost: RenyiCost, epsilon: float) -> Baseline:
    r"""Generic :math:`W_\infty` calibration: the least scale with
    :math:`g(W_\infty/\text{scale}) \le (\alpha-1)\varepsilon` (ε when α = ∞), with the same
    round-off margin as the calibration (``costs.LEVEL_MARGIN``). With α = ∞ (Laplace,
    exponential) the scale is the least double proving :math:`W_\infty/b \le \varepsilon`
    (:func:`certificates.coupling.least_pure_scale`)."""
    if not isinstance(cost, RenyiCost):
        raise InvalidTypeError("cost", cost, "a RenyiCost")
    eps = as_scalar("epsilon", epsilon, low=0.0)
    w = wasserstein_inf(scenario, cost)
    key = max(w, key=lambda k: w[k])
    w_max = w[key]
    if w_max == 0.0:
        scale = 0.0
    elif proven_norm(cost) is not None:  # pure: W_inf / b <= eps proven (directed rounding)
        scale = least_pure_scale(w_max, eps)
    else:
        level = cost.level(eps) if cost.is_pure else safe_level(cost.level(eps))
        t_star = cost.profile_inverse(level)
        scale = w_max / t_star
        while float(cost.profile(np.array([w_max / scale]))[0]) > level:  # safe side
            scale *= 1.0 + 1e-15
    return Baseline(
        name=f"winf-{cost.name}", scale=scale, w_inf=w_max, binding_pair=key,
        alpha=cost.alpha, epsilon=eps,
    )


def winf_laplace(scenario: Scenario, epsilon: float) -> Baseline:
    r"""Pure Pufferfish Wasserstein mechanism (Song, Wang and Chaudhuri, "Pufferfish Privacy
    Mechanisms for Correlated Data"): b = W∞/ε."""
    return winf_baseline(scenario, LaplaceCost(float("inf")), epsilon)


def rpp_winf_laplace(scenario: Scenario, alpha: float, epsilon: float) -> Baseline:
    r"""RPP with :math:`W_\infty`, Laplace: least :math:`b` with
    :math:`D^{Lap}_\alpha(W_\infty/b) \le \varepsilon` (Pierquin et al.)."""
    return winf_baseline(scenario, LaplaceCost(alpha, form="exact"), epsilon)


def rpp_winf_gaussian(
    scenario: Scenario, alpha: float, epsilon: float, *, covariance: ArrayLike | None = None
) -> Baseline:
    r"""RPP with :math:`W_\infty`, Gaussian: :math:`\sigma^2 = \alpha W_\infty^2/(2\varepsilon)`."""
    return winf_baseline(scenario, GaussianCost(alpha, covariance=covariance), epsilon)
