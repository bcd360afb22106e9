r"""α-Wasserstein calibration of additive noise for Rényi Pufferfish privacy.

Reference: Ding, Yang, Zhang, "α-Wasserstein Mechanism for Rényi Pufferfish Privacy".

For every prior :math:`\theta` and discriminative pair :math:`(s_i, s_j)` with conditional laws
:math:`P, Q`, the scale :math:`b` (Laplace), :math:`\sigma` (Gaussian) or :math:`\theta`
(exponential mechanism) must satisfy the sufficient condition of Ding, Yang and Zhang

.. math:: \log V_\alpha(b) = \log\min_{\pi\in\Pi(P,Q)} \sum_{kl}\pi_{kl}\,C_\alpha(x_k - y_l; b)
          \le (\alpha-1)\varepsilon,

which implies :math:`D_\alpha(P*N_b\,\|\,Q*N_b) \le \varepsilon` *and* the reverse order (the
costs are symmetric in the shift). :math:`V_\alpha` is continuous and nonincreasing in :math:`b`
(each cost is nonincreasing in the scale), so the least feasible scale of a pair is the root of
:math:`\log V_\alpha(e^u) = (\alpha-1)\varepsilon` in :math:`u = \log b`, bracketed above by the
:math:`W_\infty` baseline (always feasible: an average never exceeds a maximum) and below by
Jensen's bound :math:`V_\alpha \ge C_\alpha(\bar x - \bar y)` (costs convex in the shift),
and found by Brent's method. The released scale is the maximum over pairs and priors.

Safety: the root-find targets :math:`(1 - 10^{-11})(\alpha-1)\varepsilon` (log values are
computed with relative precision), the result is nudged upwards until the computed value is below
the target, and every pair is then re-checked at the released scale by
:func:`certificates.coupling.check_coupling` with the cost evaluated afresh (a failing check
raises :class:`~dpopt.errors.CertificateError`).

With :math:`\alpha=\infty` (Laplace or exponential) the condition is
:math:`\min_\pi \max_{\operatorname{supp}\pi} \lVert x-y\rVert / b \le \varepsilon`, i.e. the
Wasserstein mechanism :math:`b = W_\infty/\varepsilon` of Song, Wang and Chaudhuri, "Pufferfish
Privacy Mechanisms for Correlated Data". Nothing of it is a plain float comparison: the distances
are bounded from above from the exact differences of the atoms (so a shared offset such as a
timestamp's 1.7e15 loses nothing), the released scale is the least double whose quotient, rounded
up, proves :math:`W_\infty/b \le \varepsilon`
(:func:`certificates.coupling.least_pure_scale`), and the certificate
(:func:`certificates.coupling.check_pure_coupling`) re-derives the same bound.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq

from certificates.coupling import (
    CouplingCertificate,
    check_coupling,
    check_pure_coupling,
    least_pure_scale,
)
from certificates.roots import BracketError, bracket_increasing
from certificates.validate import as_scalar
from dpopt.errors import CertificateError, InvalidParameterError, InvalidTypeError
from dpopt.pufferfish._pairs import (
    CHECKED,
    PairTransport,
    proven_norm,
    resolve_method,
    safe_log_cost,
)
from dpopt.pufferfish.costs import (
    ExponentialCost,
    GaussianCost,
    LaplaceCost,
    RenyiCost,
    safe_level,
)
from dpopt.pufferfish.scenario import Scenario
from solvers.transport import Coupling

__all__ = [
    "Calibration",
    "PairCalibration",
    "calibrate",
    "calibrate_exponential",
    "calibrate_gaussian",
    "calibrate_laplace",
]

@dataclass(frozen=True)
class PairCalibration:
    """One (prior, pair): its own least scale, :math:`W_\\infty`, the plan and its certificate.

    Attributes
    ----------
    prior : hashable
    secrets : (hashable, hashable)
    scale : float
        Least scale satisfying the condition for this pair alone.
    w_inf : float
        :math:`W_\\infty(P, Q)` in the cost's ground norm.
    coupling : Coupling
        The plan at the released scale.
    certificate : CouplingCertificate
        The independent check of that plan at the released scale.
    """

    prior: Hashable
    secrets: tuple[Hashable, Hashable]
    scale: float
    w_inf: float
    coupling: Coupling
    certificate: CouplingCertificate


@dataclass(frozen=True)
class Calibration:
    """The calibrated noise scale for an :math:`(\\alpha,\\varepsilon)`-RPP scenario.

    Attributes
    ----------
    scale : float
        :math:`b` (Laplace, per coordinate), :math:`\\sigma` (Gaussian :math:`N(0,\\sigma^2 S)`)
        or :math:`\\theta` (exponential mechanism).
    mechanism : str
    cost : str
        The cost's name, e.g. ``laplace-exact``.
    alpha, epsilon : float
    method : str
        Coupling route: ``quantile``, ``emd`` or ``lp``.
    binding_pair : (prior, s_i, s_j)
        The pair whose own scale is the released one.
    pairs : tuple of PairCalibration
    certified : bool
        Every pair's coupling certificate holds at ``scale``.
    """

    scale: float
    mechanism: str
    cost: str
    alpha: float
    epsilon: float
    method: str
    binding_pair: tuple[Hashable, Hashable, Hashable]
    pairs: tuple[PairCalibration, ...]
    certified: bool


def _pair_scale(pt: PairTransport, epsilon: float) -> tuple[float, float]:
    """Least scale of one pair and its :math:`W_\\infty`."""
    cost = pt.cost
    level = cost.level(epsilon)
    if cost.is_pure:
        _, w_inf, pen = pt.pure_plan(level)
        if w_inf == 0.0:
            return 0.0, 0.0
        if not np.isfinite(w_inf):
            raise InvalidParameterError(
                "scenario", f"W_inf = {w_inf!r}",
                "the atoms' differences overflow the double range (rescale the query)",
            )
        if proven_norm(cost) is not None:  # W_inf / b <= eps proven (directed rounding)
            return least_pure_scale(w_inf, level, pen), w_inf
        # a custom pure cost: its own float distance, compared as its certificate does
        return _nudge_up(w_inf / (level - pen), lambda s: w_inf / s + pen - level), w_inf
    w_inf, _ = pt.w_inf()
    if w_inf == 0.0:
        return 0.0, 0.0
    target = safe_level(level)

    def f(scale: float) -> float:
        return pt.log_value(scale, level) - target

    # the least scale on the log scale, u = log(scale): h(u) = -f(exp(u)) is nondecreasing
    # (V decreases as the scale grows), negative where the scale is infeasible. Start at the
    # Jensen bound (the distance of the means: infeasible below it) and step first to the W_inf
    # bound (feasible for the built-in costs; a custom cost may exceed its profile bound, and
    # the steps then grow geometrically until a feasible scale is found)
    w_bound = w_inf / cost.profile_inverse(target)
    mean_diff = (pt.p_law.mean - pt.q_law.mean)[None, :]
    jensen = float(cost.distance(mean_diff)[0]) / cost.profile_inverse(target)
    lo = min(jensen * (1.0 - 1e-9), 0.5 * w_bound) if jensen > 0.0 else 0.5 * w_bound

    def h(u: float) -> float:
        return -f(float(np.exp(u)))

    u0 = float(np.log(lo))
    try:
        u_lo, u_hi = bracket_increasing(h, u0, step=float(np.log(w_bound)) - u0, grow=2.0,
                                        low=-745.0, high=709.0)
    except BracketError as exc:
        if exc.side == "high":
            raise CertificateError(f"no feasible scale found for {cost.name} below "
                                   f"{float(np.exp(exc.at))!r}") from None
        # feasible down to the limit (V > 1 for P != Q at tiny scales, so this is not reached)
        return _nudge_up(float(np.exp(exc.at)), f), w_inf  # pragma: no cover
    u = float(brentq(h, u_lo, u_hi, xtol=1e-14, rtol=1e-15))
    return _nudge_up(float(np.exp(u)), f), w_inf


def _nudge_up(scale: float, f: Callable[[float], float]) -> float:
    """Smallest ``scale * (1 + k-th step)`` with ``f <= 0`` (steps 1e-14, doubling)."""
    step = 1e-14
    s = scale
    while f(s) > 0.0:
        s = scale * (1.0 + step)
        step *= 2.0
        if step > 1.0:  # pragma: no cover - the W_inf bracket is always feasible
            raise CertificateError(f"could not reach a feasible scale near {scale!r}")
    return s


def _certify_all(
    transports: list[tuple[Hashable, Hashable, Hashable, PairTransport]],
    scales: list[tuple[float, float]],
    cost: RenyiCost,
    scale: float,
    level: float,
) -> list[PairCalibration] | None:
    """Plan and independent certificate of every pair at ``scale`` (None if one fails)."""
    results: list[PairCalibration] = []
    for (theta, si, sj, pt), (s_pair, w_inf) in zip(transports, scales, strict=True):
        plan = pt.pure_plan(level)[0] if cost.is_pure else pt.coupling(scale, level)
        x, y = pt.p_law.support, pt.q_law.support

        def lc(i: Any, j: Any, x: Any = x, y: Any = y) -> Any:
            return safe_log_cost(cost, x[i] - y[j], scale)

        norm = proven_norm(cost)
        if norm is not None:
            pure = check_pure_coupling(
                pt.p_law.probabilities, pt.q_law.probabilities, x, y, plan.rows, plan.cols,
                plan.mass, scale, level, norm=norm, exact=plan.exact,
            )
            if not pure.certified:
                return None
            results.append(PairCalibration(theta, (si, sj), s_pair, w_inf, plan, pure))
            continue
        pots = None
        if plan.row_potential is not None and plan.col_potential is not None and scale > 0:
            pots = (plan.row_potential, plan.col_potential, plan.potential_shift)
        cert = check_coupling(
            pt.p_law.probabilities, pt.q_law.probabilities, plan.rows, plan.cols, plan.mass,
            lc, level, aggregate="max" if cost.is_pure else "mean", potentials=pots,
            exact=plan.exact, alpha=cost.alpha,
        )
        if not cert.certified:
            return None
        results.append(PairCalibration(theta, (si, sj), s_pair, w_inf, plan, cert))
    return results


def calibrate(
    scenario: Scenario,
    cost: RenyiCost,
    epsilon: float,
    *,
    method: str = "auto",
) -> Calibration:
    r"""Least scale with :math:`\log V_\alpha \le (\alpha-1)\varepsilon` over all pairs and priors.

    Parameters
    ----------
    scenario : Scenario
    cost : RenyiCost
        :class:`LaplaceCost`, :class:`GaussianCost` or :class:`ExponentialCost` (carries α).
    epsilon : float
        Target :math:`\varepsilon > 0`.
    method : {"auto", "quantile", "emd", "lp"}
        Coupling route (``auto``: the quantile coupling in 1-D, the POT LP otherwise). ``lp``
        (cvxpy) re-solves at every root-find step: use it on small instances.

    Returns
    -------
    Calibration

    Raises
    ------
    InvalidParameterError
        ε ≤ 0, unknown method, quantile coupling in d > 1.
    CertificateError
        If a pair's coupling certificate fails at the released scale (never expected).

    Examples
    --------
    >>> sc = Scenario.from_laws({"a": ([0, 1, 2], [.5, .3, .2]),
    ...                          "b": ([0, 1, 2, 3], [.2, .3, .3, .2])})
    >>> round(calibrate(sc, LaplaceCost(2.0), 1.0).scale, 6)
    0.646254
    """
    if not isinstance(scenario, Scenario):
        raise InvalidTypeError("scenario", scenario, "a Scenario")
    if not isinstance(cost, RenyiCost):
        raise InvalidTypeError("cost", cost, "a LaplaceCost, GaussianCost or ExponentialCost")
    eps = as_scalar("epsilon", epsilon, low=0.0)
    meth = resolve_method(method, scenario.dim, cost)
    level = cost.level(eps)

    transports: list[tuple[Hashable, Hashable, Hashable, PairTransport]] = []
    scales: list[tuple[float, float]] = []
    for theta, si, sj, p_law, q_law in scenario.iter_pairs():
        pt = PairTransport(p_law, q_law, cost, meth)
        transports.append((theta, si, sj, pt))
        scales.append(_pair_scale(pt, eps))
    k_bind = int(np.argmax([s for s, _ in scales]))
    scale = scales[k_bind][0]
    if not np.isfinite(scale):
        raise InvalidParameterError(
            "epsilon", eps, f"too small: the required scale overflows ({scale!r})"
        )

    results = _certify_all(transports, scales, cost, scale, level)
    if results is None:
        # An LP re-solved at the released scale may be a hair less accurate for a non-binding
        # pair: raise the scale by tiny steps (never lowers privacy) before giving up.
        for k in range(20):
            scale *= 1.0 + 1e-10 * 2.0**k
            results = _certify_all(transports, scales, cost, scale, level)
            if results is not None:
                break
    if results is None:
        raise CertificateError(
            f"a coupling certificate fails at scale {scale!r} ({cost.name}); please report"
        )
    theta, si, sj, _ = transports[k_bind]
    routes = set().union(*(pt.routes for *_, pt in transports))
    if meth == CHECKED:  # report the route actually taken (the LP if any scale needed it)
        meth = "emd" if "emd" in routes else "quantile"
    return Calibration(
        scale=scale, mechanism=cost.mechanism, cost=cost.name, alpha=cost.alpha, epsilon=eps,
        method=meth, binding_pair=(theta, si, sj), pairs=tuple(results), certified=True,
    )


def calibrate_laplace(
    scenario: Scenario, alpha: float, epsilon: float, *, form: str = "exact", method: str = "auto"
) -> Calibration:
    """:func:`calibrate` with :class:`LaplaceCost` (``alpha=np.inf``: the W∞/ε mechanism)."""
    return calibrate(scenario, LaplaceCost(alpha, form=form), epsilon, method=method)


def calibrate_gaussian(
    scenario: Scenario,
    alpha: float,
    epsilon: float,
    *,
    covariance: ArrayLike | None = None,
    method: str = "auto",
) -> Calibration:
    """:func:`calibrate` with :class:`GaussianCost` (noise :math:`N(0, \\sigma^2 S)`)."""
    return calibrate(scenario, GaussianCost(alpha, covariance=covariance), epsilon, method=method)


def calibrate_exponential(
    scenario: Scenario,
    alpha: float,
    epsilon: float,
    *,
    norm: float = 2.0,
    form: str = "ratio",
    method: str = "auto",
) -> Calibration:
    """:func:`calibrate` with :class:`ExponentialCost` (density ∝ exp(-‖z‖/θ))."""
    return calibrate(scenario, ExponentialCost(alpha, norm=norm, form=form), epsilon, method=method)

