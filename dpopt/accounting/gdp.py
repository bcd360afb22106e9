r"""Gaussian differential privacy (Dong, Roth & Su) and the exact Gaussian (ε, δ) curve.

A mechanism is :math:`\mu`-GDP if distinguishing neighbouring datasets is at least as hard as
telling :math:`N(0,1)` from :math:`N(\mu,1)`. A Gaussian mechanism whose worst-case shift
satisfies :math:`\sup_s s^\top\Sigma^{-1}s \le q` over the neighbouring relation is exactly
:math:`\sqrt q`-GDP (Dong, Roth & Su, "Gaussian Differential Privacy", Theorem 2.7). Every
function here is vectorised: array arguments broadcast with numpy rules, scalar input gives a
Python ``float``; the inverses run one safeguarded Newton iteration on the whole array (no Python
loop per element).

* Trade-off function (type-II error at type-I error α):
  :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)`.
* Exact (ε, δ) curve, tight for every ε simultaneously (Balle & Wang, "Improving the Gaussian
  Mechanism for Differential Privacy", Theorem 8; Dong, Roth & Su, Corollary 2.13):
  :math:`\delta(\varepsilon;\mu) = \Phi(\mu/2 - \varepsilon/\mu) - e^\varepsilon\Phi(-\mu/2 -
  \varepsilon/\mu)`, evaluated in log form without ever forming :math:`e^\varepsilon`.
* Composition is exact: :math:`\mu = \sqrt{\sum_i \mu_i^2}` (Dong, Roth & Su, Corollary 3.3).
* Subsampled CLT approximations (Bu, Dong, Long & Su, "Deep Learning with Gaussian Differential
  Privacy") — approximations, not bounds.
* RDP → (ε, δ) conversions (Mironov, "Rényi Differential Privacy"; Canonne, Kamath & Steinke),
  for comparison: the exact curve dominates them.

Calibration functions never under-noise: after the root-find the answer is moved to the safe side
and the forward formula is re-evaluated with a margin covering its rounding error.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from certificates.rounding import sqrt_up
from dpopt.accounting import analytic_gaussian as bw
from dpopt.accounting._arrays import FloatOrArray, broadcast, finish, real_array
from dpopt.errors import (
    ApproximationWarning,
    DpoptError,
    InfeasibleError,
    InvalidParameterError,
    InvalidTypeError,
)

__all__ = [
    "RDPCurve",
    "clt_mu_poisson",
    "clt_mu_uniform",
    "compose",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "epsilon_for_log_delta",
    "gaussian_sigma",
    "log_delta_for_epsilon",
    "mu_for",
    "mu_for_log_delta",
    "rdp_to_dp_improved",
    "rdp_to_dp_mironov",
    "tradeoff",
]

#: A Rényi-DP curve given as a function: order α > 1 ↦ ε_α >= 0 (``inf`` allowed); numpy
#: scalars are fine as values. Each value is validated when it is used.
RDPCurve = Callable[[float], float]


def _eps(value: ArrayLike, name: str = "epsilon") -> NDArray[np.float64]:
    return real_array(name, value, low=0.0, low_open=False)


def _mu(value: ArrayLike, name: str = "mu") -> NDArray[np.float64]:
    return real_array(name, value, low=0.0, low_open=False)


def _delta(value: ArrayLike, name: str = "delta") -> NDArray[np.float64]:
    return real_array(name, value, low=0.0, high=1.0)


def _log_delta_arg(value: ArrayLike, name: str = "log_delta") -> NDArray[np.float64]:
    return real_array(name, value, high=0.0)


def _elementwise(func: Callable[..., float], *arrays: NDArray[np.float64]) -> NDArray[np.float64]:
    """Apply a scalar function over already-broadcast arrays of one shape."""
    out = np.empty(arrays[0].shape, dtype=np.float64)
    flat = [a.ravel() for a in arrays]
    res = out.ravel()
    for i in range(res.size):
        res[i] = func(*(float(a[i]) for a in flat))
    return res.reshape(arrays[0].shape)


# --------------------------------------------------------------------------------------------
# Trade-off function and the exact curve
# --------------------------------------------------------------------------------------------


@overload
def tradeoff(alpha: float, mu: float) -> float: ...


@overload
def tradeoff(alpha: ArrayLike, mu: ArrayLike) -> FloatOrArray: ...


def tradeoff(alpha: ArrayLike, mu: ArrayLike) -> FloatOrArray:
    r"""Gaussian trade-off function :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)`.

    The smallest type-II error of any test between :math:`N(0,1)` and :math:`N(\mu,1)` with
    type-I error α (Dong, Roth & Su, Def. 2.7). Computed as
    :math:`\Phi(-\Phi^{-1}(\alpha) - \mu)` so tiny α keep their precision.

    Parameters
    ----------
    alpha : float or array_like
        Type-I error(s) in [0, 1].
    mu : float or array_like
        GDP parameter(s), finite and >= 0. Broadcast against ``alpha``.

    Returns
    -------
    float or ndarray
        :math:`G_\mu(\alpha)`; :math:`G_0(\alpha) = 1 - \alpha`.

    Examples
    --------
    >>> round(tradeoff(0.05, 1.0), 6)
    0.740489
    """
    al = real_array("alpha", alpha, low=0.0, high=1.0, low_open=False, high_open=False)
    m = _mu(mu)
    al, m = broadcast(alpha=al, mu=m)
    with np.errstate(over="ignore"):
        return finish(special.ndtr(-special.ndtri(al) - m))


@overload
def log_delta_for_epsilon(epsilon: float, mu: float) -> float: ...


@overload
def log_delta_for_epsilon(epsilon: ArrayLike, mu: ArrayLike) -> FloatOrArray: ...


def log_delta_for_epsilon(epsilon: ArrayLike, mu: ArrayLike) -> FloatOrArray:
    r"""Natural log of the exact δ(ε; μ) of a μ-GDP (Gaussian) mechanism (Balle & Wang, Theorem 8).

    .. math:: \delta(\varepsilon;\mu) = \Phi\Big(\frac{\mu}{2} - \frac{\varepsilon}{\mu}\Big)
              - e^{\varepsilon}\,\Phi\Big(-\frac{\mu}{2} - \frac{\varepsilon}{\mu}\Big)

    in an erfcx form that never forms :math:`e^\varepsilon` or :math:`\mu^2`, with full relative
    precision far below the double range (e.g. ``log δ = -5e5`` or ``-2e215``). ``mu = 0`` gives
    ``-inf``; otherwise ``-inf`` only when the true value is below the most negative double
    (``-1.797e308``), so it is below every finite target.

    Parameters
    ----------
    epsilon : float or array_like
        ε >= 0, finite.
    mu : float or array_like
        μ >= 0, finite. Broadcast against ``epsilon``.
    """
    e, m = broadcast(epsilon=_eps(epsilon), mu=_mu(mu))
    return finish(bw.log_delta_mu(e, m))


@overload
def delta_for_epsilon(epsilon: float, mu: float) -> float: ...


@overload
def delta_for_epsilon(epsilon: ArrayLike, mu: ArrayLike) -> FloatOrArray: ...


def delta_for_epsilon(epsilon: ArrayLike, mu: ArrayLike) -> FloatOrArray:
    r"""Exact δ(ε; μ) of a μ-GDP mechanism: it is (ε, δ(ε))-DP for all ε >= 0 at once, tightly.

    See :func:`log_delta_for_epsilon` for the formula; values below ~1e-308 underflow to 0 here,
    use the log version for them.

    Examples
    --------
    >>> round(delta_for_epsilon(1.0, 1.0), 12)
    0.126936737507
    """
    return finish(np.exp(np.asarray(log_delta_for_epsilon(epsilon, mu))))


@overload
def epsilon_for_log_delta(log_delta: float, mu: float) -> float: ...


@overload
def epsilon_for_log_delta(log_delta: ArrayLike, mu: ArrayLike) -> FloatOrArray: ...


def epsilon_for_log_delta(log_delta: ArrayLike, mu: ArrayLike) -> FloatOrArray:
    r"""Smallest ε >= 0 with :math:`\log\delta(\varepsilon;\mu) \le` ``log_delta`` (exact curve).

    A safeguarded Newton iteration on the decreasing function ε ↦ log δ(ε; μ), run on the whole
    array at once and bracketed over every double in [0, 1.8e308]; the result is moved up and
    the forward formula re-checked below the target with a rounding margin, so the returned ε is
    never too small.

    Parameters
    ----------
    log_delta : float or array_like
        Natural log of the target δ, finite and < 0 (δ in (0, 1)); may be far below -708.
    mu : float or array_like
        μ >= 0, finite. Broadcast against ``log_delta``.

    Raises
    ------
    InfeasibleError
        If no finite double ε meets the target (μ beyond ~1e150 with a tiny δ).
    """
    ld, m = broadcast(log_delta=_log_delta_arg(log_delta), mu=_mu(mu))
    eps, bad = bw.min_epsilon_mu(m, ld)
    if np.any(bad):
        i = int(np.flatnonzero(bad.ravel())[0])
        raise InfeasibleError(
            f"no finite epsilon makes a mu={float(m.ravel()[i])!r}-GDP mechanism meet "
            f"log(delta)={float(ld.ravel()[i])!r} in double precision"
        )
    return finish(eps)


@overload
def epsilon_for_delta(delta: float, mu: float) -> float: ...


@overload
def epsilon_for_delta(delta: ArrayLike, mu: ArrayLike) -> FloatOrArray: ...


def epsilon_for_delta(delta: ArrayLike, mu: ArrayLike) -> FloatOrArray:
    r"""Smallest ε >= 0 such that a μ-GDP mechanism is (ε, δ)-DP (exact curve, safe side).

    Parameters
    ----------
    delta : float or array_like
        Target δ in (0, 1).
    mu : float or array_like
        μ >= 0. Broadcast against ``delta``.

    Examples
    --------
    >>> round(epsilon_for_delta(1e-5, 1.0), 9)
    4.377178096
    """
    d = _delta(delta)
    return epsilon_for_log_delta(np.log(d), mu)


def _max_mu_checked(e: NDArray[np.float64], ld: NDArray[np.float64]) -> NDArray[np.float64]:
    mu = bw.max_mu(e, ld)
    zero = mu <= 0.0
    if np.any(zero):
        i = int(np.flatnonzero(zero.ravel())[0])
        raise InfeasibleError(
            f"(epsilon={float(e.ravel()[i])!r}, log(delta)={float(ld.ravel()[i])!r}) admits no "
            "positive mu in double precision (it underflows); relax epsilon or delta"
        )
    return mu


@overload
def mu_for_log_delta(epsilon: float, log_delta: float) -> float: ...


@overload
def mu_for_log_delta(epsilon: ArrayLike, log_delta: ArrayLike) -> FloatOrArray: ...


def mu_for_log_delta(epsilon: ArrayLike, log_delta: ArrayLike) -> FloatOrArray:
    r"""Largest μ with :math:`\log\delta(\varepsilon;\mu) \le` ``log_delta`` (exact curve, safe).

    δ(ε; μ) is increasing in μ with :math:`\partial\delta/\partial\mu = \varphi(\mu/2 -
    \varepsilon/\mu)`; a safeguarded Newton iteration in log μ over the whole array, bracketed
    over every positive double, then μ is stepped down until the forward formula meets the target
    with a rounding margin (never under-noises).

    Raises
    ------
    InfeasibleError
        If the admissible μ is below the smallest positive double (e.g. ε = 0, log δ = -1e4).
    """
    e, ld = broadcast(epsilon=_eps(epsilon), log_delta=_log_delta_arg(log_delta))
    return finish(_max_mu_checked(e, ld))


@overload
def mu_for(epsilon: float, delta: float) -> float: ...


@overload
def mu_for(epsilon: ArrayLike, delta: ArrayLike) -> FloatOrArray: ...


def mu_for(epsilon: ArrayLike, delta: ArrayLike) -> FloatOrArray:
    r"""Largest μ such that every μ-GDP mechanism is (ε, δ)-DP (inverse of the exact curve).

    Equivalently :math:`\mu = \sqrt{q^*}` where :math:`q^*(\varepsilon,\delta)` is the Balle–Wang
    bound. The returned μ satisfies δ(ε; μ) <= δ when re-evaluated.

    Parameters
    ----------
    epsilon : float or array_like
        ε >= 0, finite.
    delta : float or array_like
        δ in (0, 1). Broadcast against ``epsilon``.

    Examples
    --------
    >>> round(mu_for(1.0, 1e-5), 9)
    0.268051123
    """
    d = _delta(delta)
    return mu_for_log_delta(epsilon, np.log(d))


@overload
def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float: ...


@overload
def gaussian_sigma(
    epsilon: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
) -> FloatOrArray: ...


def gaussian_sigma(
    epsilon: ArrayLike, delta: ArrayLike, sensitivity: ArrayLike = 1.0
) -> FloatOrArray:
    r"""Noise scale of the analytic Gaussian mechanism (Balle & Wang 2018, Algorithm 1).

    The smallest σ (up to a relative rounding margin, always on the safe side) such that adding
    :math:`N(0, \sigma^2 I)` to a query of L2 sensitivity Δ (replacement or add/remove, whichever
    defines Δ) is (ε, δ)-DP: :math:`\sigma = \Delta/\mu^*(\varepsilon,\delta)`, with
    :math:`\mu^*` from :func:`mu_for` (checked on the forward formula with a margin) and the
    division rounded up, so that :math:`\Delta/\sigma \le \mu^*` exactly. Vectorised (no
    Python loop per element).

    Parameters
    ----------
    epsilon : float or array_like
        ε >= 0.
    delta : float or array_like
        δ in (0, 1).
    sensitivity : float or array_like, default 1
        L2 sensitivity Δ > 0. All three broadcast together.

    Raises
    ------
    InfeasibleError
        If σ = Δ/μ* is beyond the largest double (e.g. ε = 0, δ = 1e-300 gives σ ≈ 4e299, still
        fine; ε = 0 with δ = 1e-320 and Δ = 1e10 is not).

    Examples
    --------
    >>> round(gaussian_sigma(1.0, 1e-5), 8)
    3.73063163
    """
    e = _eps(epsilon)
    d = _delta(delta)
    s = real_array("sensitivity", sensitivity, low=0.0)
    e, d, s = broadcast(epsilon=e, delta=d, sensitivity=s)
    mu = _max_mu_checked(e, np.log(d))
    with np.errstate(over="ignore"):
        sigma = s / mu
    over = ~np.isfinite(sigma)
    if np.any(over):
        i = int(np.flatnonzero(over.ravel())[0])
        raise InfeasibleError(
            f"(epsilon={float(e.ravel()[i])!r}, delta={float(d.ravel()[i])!r}) with sensitivity "
            f"{float(s.ravel()[i])!r} needs a noise scale beyond the double range "
            f"(sensitivity / mu = {float(s.ravel()[i])!r} / {float(mu.ravel()[i])!r}); relax "
            "epsilon or delta"
        )
    # one ulp up covers the rounding of the division: s / sigma <= mu exactly, and mu passed the
    # forward check, so the mechanism's delta is at most the target (delta increases with mu)
    sigma = np.nextafter(sigma, np.inf)
    return finish(sigma)


# --------------------------------------------------------------------------------------------
# Composition and subsampling
# --------------------------------------------------------------------------------------------


@overload
def compose(*mus: float) -> float: ...


@overload
def compose(*mus: ArrayLike) -> FloatOrArray: ...


def compose(*mus: ArrayLike) -> FloatOrArray:
    r"""Exact composition of GDP guarantees: :math:`\mu = \sqrt{\sum_i \mu_i^2}`.

    Gaussian trade-off functions tensorise (Dong, Roth & Su, Cor. 3.3), so this is exact, not a
    limit. Arguments broadcast; each may be an array (e.g. a sweep). Computed with ``hypot`` (no
    intermediate overflow or underflow), then rounded up exactly: the result is the smallest
    double whose square is at least :math:`\sum_i \mu_i^2` (checked in rational arithmetic, a
    few microseconds per element), so a composed μ is never understated.

    Raises
    ------
    InvalidParameterError
        If the composed μ is beyond the largest double.

    Examples
    --------
    >>> round(compose(0.5, 1.0, 2.0), 11)
    2.29128784748
    """
    if not mus:
        raise InvalidParameterError("mus", mus, "needs at least one GDP parameter")
    arrs = [_mu(m, f"mus[{i}]") for i, m in enumerate(mus)]
    names = {f"mus_{i}": a for i, a in enumerate(arrs)}
    out = broadcast(**names)
    total = out[0]
    with np.errstate(over="ignore"):
        for a in out[1:]:
            total = np.hypot(total, a)
    if not np.all(np.isfinite(total)):
        raise InvalidParameterError(
            "mus", mus, "the composed mu = sqrt(sum mu_i^2) is beyond the largest double"
        )
    flat = total.ravel()
    cols = [a.ravel() for a in out]
    for i in range(flat.size):
        flat[i] = sqrt_up(sum((Fraction(float(c[i])) ** 2 for c in cols), Fraction(0)))
    return finish(flat.reshape(total.shape))


def _clt_args(
    sample_rate: ArrayLike, noise_multiplier: ArrayLike, steps: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    p = real_array("sample_rate", sample_rate, low=0.0, high=1.0, high_open=False)
    sig = real_array("noise_multiplier", noise_multiplier, low=0.0)
    t = real_array("steps", steps, low=0.0)
    p, sig, t = broadcast(sample_rate=p, noise_multiplier=sig, steps=t)
    return p, sig, t


_CLT_WARNING = (
    "the subsampled-Gaussian CLT gives an APPROXIMATE mu (a limit as steps -> infinity), not a "
    "bound: it can understate the privacy loss in the tails (e.g. eps(1e-5) 0.8345 by CLT vs "
    ">= 0.8628 by an exact accountant on one DP-SGD setting). Use an RDP or PLD accountant for "
    "a guarantee."
)


@overload
def clt_mu_poisson(sample_rate: float, noise_multiplier: float, steps: float) -> float: ...


@overload
def clt_mu_poisson(
    sample_rate: ArrayLike, noise_multiplier: ArrayLike, steps: ArrayLike
) -> FloatOrArray: ...


def clt_mu_poisson(
    sample_rate: ArrayLike, noise_multiplier: ArrayLike, steps: ArrayLike
) -> FloatOrArray:
    r"""CLT approximation of μ for Poisson-subsampled Gaussian steps.

    .. math:: \mu_{CLT} = p\sqrt{T\,(e^{1/\sigma^2} - 1)}

    (Bu, Dong, Long & Su 2020, Thm. 2; per step :math:`\mu_0 = 1/\sigma`, T steps, sampling
    probability p, replacement-free add/remove neighbours). **An approximation, not a bound**:
    it emits :class:`~dpopt.errors.ApproximationWarning` because it can understate the privacy loss.

    Parameters
    ----------
    sample_rate : float or array_like
        Poisson sampling probability p in (0, 1].
    noise_multiplier : float or array_like
        σ > 0 (noise std / clipping norm).
    steps : float or array_like
        Number of steps T > 0 (real values allowed, e.g. epochs · N / B).
    """
    p, sig, t = _clt_args(sample_rate, noise_multiplier, steps)
    warnings.warn(_CLT_WARNING, ApproximationWarning, stacklevel=2)
    x = 1.0 / (sig * sig)
    with np.errstate(over="ignore"):
        log_em1 = np.where(x > 1.0, x + np.log(-np.expm1(-x)), np.log(np.expm1(np.minimum(x, 1.0))))
        return finish(np.exp(np.log(p) + 0.5 * (np.log(t) + log_em1)))


@overload
def clt_mu_uniform(sample_rate: float, noise_multiplier: float, steps: float) -> float: ...


@overload
def clt_mu_uniform(
    sample_rate: ArrayLike, noise_multiplier: ArrayLike, steps: ArrayLike
) -> FloatOrArray: ...


def clt_mu_uniform(
    sample_rate: ArrayLike, noise_multiplier: ArrayLike, steps: ArrayLike
) -> FloatOrArray:
    r"""CLT approximation of μ for uniformly subsampled (without replacement) Gaussian steps.

    .. math:: \mu = \sqrt2\, p\sqrt T\,\sqrt{e^{1/\sigma^2}\Phi(1.5/\sigma) + 3\Phi(-0.5/\sigma)
              - 2}

    (Bu, Dong, Long & Su; the form used by the Opacus GDP script), evaluated as
    :math:`(e^{x^2}-1)\Phi(1.5x) + [\mathrm{erf}(1.5x/\sqrt2) - 3\,\mathrm{erf}(x/(2\sqrt2))]/2`
    with :math:`x = 1/\sigma` to avoid cancellation for large σ. **An approximation, not a bound**
    (emits :class:`~dpopt.errors.ApproximationWarning`).
    """
    p, sig, t = _clt_args(sample_rate, noise_multiplier, steps)
    warnings.warn(_CLT_WARNING, ApproximationWarning, stacklevel=2)
    x = 1.0 / sig
    r2 = math.sqrt(2.0)
    with np.errstate(over="ignore", invalid="ignore"):
        inner = np.expm1(x * x) * special.ndtr(1.5 * x) + 0.5 * (
            special.erf(1.5 * x / r2) - 3.0 * special.erf(0.5 * x / r2)
        )
        return finish(r2 * p * np.sqrt(t) * np.sqrt(inner))


# --------------------------------------------------------------------------------------------
# RDP -> (eps, delta) conversions (for comparison)
# --------------------------------------------------------------------------------------------

# Grid of log(alpha - 1) used to start the continuous optimisation over the order.
_LOG_AM1_GRID = np.linspace(-12.0, 14.0, 261)


def _mironov_terms(alpha: NDArray[np.float64], log_inv_delta: float) -> NDArray[np.float64]:
    return log_inv_delta / (alpha - 1.0)


def _improved_terms(alpha: NDArray[np.float64], log_inv_delta: float) -> NDArray[np.float64]:
    return np.log1p(-1.0 / alpha) + (log_inv_delta - np.log(alpha)) / (alpha - 1.0)


def _minimise_over_order(
    rdp_at: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    extra: Callable[[NDArray[np.float64], float], NDArray[np.float64]],
    log_inv_delta: float,
) -> float:
    """min over α > 1 of ε_α + extra(α): grid in log(α - 1), then bounded Brent refinement."""

    def objective(y: NDArray[np.float64]) -> NDArray[np.float64]:
        alpha = 1.0 + np.exp(y)
        with np.errstate(over="ignore", invalid="ignore"):
            val = rdp_at(alpha) + extra(alpha, log_inv_delta)
        return np.where(np.isnan(val), np.inf, val)

    vals = objective(_LOG_AM1_GRID)
    k = int(np.argmin(vals))
    best = float(vals[k])
    lo = _LOG_AM1_GRID[max(k - 1, 0)]
    hi = _LOG_AM1_GRID[min(k + 1, _LOG_AM1_GRID.size - 1)]
    if hi > lo:
        res = optimize.minimize_scalar(
            lambda y: float(objective(np.asarray([y]))[0]),
            bounds=(float(lo), float(hi)),
            method="bounded",
            options={"xatol": 1e-12},
        )
        if np.isfinite(res.fun):
            best = min(best, float(res.fun))
    return max(best, 0.0)


def _curve_value(curve: RDPCurve, alpha: float) -> float:
    """One value of a user RDP curve, validated: a real number >= 0 (``inf`` allowed), not NaN."""
    try:
        raw = curve(alpha)
    except DpoptError:
        raise
    except Exception as exc:  # the user's function failed: name it, keep the cause
        raise InvalidParameterError(
            "rdp", curve, f"raised {type(exc).__name__} at alpha={alpha!r}: {exc}"
        ) from exc
    if isinstance(raw, np.ndarray) and raw.ndim == 0:
        raw = raw[()]
    real = isinstance(raw, int | float | np.integer | np.floating)
    if isinstance(raw, bool | np.bool_) or not real:
        raise InvalidTypeError("rdp", curve, f"a function returning a real number, got {raw!r}")
    val = float(raw)
    if math.isnan(val) or val < 0.0:
        raise InvalidParameterError(
            "rdp", curve, f"returned {val!r} at alpha={alpha!r}; it must return epsilon >= 0"
        )
    return val


def _rdp_convert(
    kind: str,
    delta: ArrayLike,
    bound: ArrayLike | None,
    rdp: RDPCurve | ArrayLike | None,
    orders: ArrayLike | None,
) -> FloatOrArray:
    extra = _mironov_terms if kind == "mironov" else _improved_terms
    d = _delta(delta)
    if (bound is None) == (rdp is None):
        raise InvalidParameterError(
            "bound/rdp", (bound, rdp), "give exactly one of bound= (Gaussian) or rdp= (a curve)"
        )
    if bound is not None:
        q = real_array("bound", bound, low=0.0, low_open=False)
        d, q = broadcast(delta=d, bound=q)
        if kind == "mironov":
            # optimum at alpha - 1 = sqrt(2 log(1/delta) / q): eps = q/2 + sqrt(2 q log(1/delta))
            return finish(q / 2.0 + np.sqrt(2.0 * q * -np.log(d)))

        def one(d1: float, q1: float) -> float:
            return _minimise_over_order(lambda a: a * q1 / 2.0, extra, -math.log(d1))

        return finish(_elementwise(one, d, q))
    if callable(rdp):
        curve = rdp

        def at(alpha: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.array([_curve_value(curve, float(a)) for a in alpha], dtype=np.float64)

        def one_curve(d1: float) -> float:
            best = _minimise_over_order(at, extra, -math.log(d1))
            if not math.isfinite(best):
                raise InvalidParameterError(
                    "rdp", curve, "is infinite at every order tried: no finite epsilon"
                )
            return best

        return finish(_elementwise(one_curve, d))
    if orders is None:
        raise InvalidParameterError("orders", None, "is required when rdp is an array")
    if isinstance(rdp, str):
        raise InvalidTypeError("rdp", rdp, "a callable or an array of epsilons")
    al = real_array("orders", orders, low=1.0, allow_inf=False)
    ep = real_array("rdp", rdp, low=0.0, low_open=False)
    if al.ndim != 1 or ep.shape != al.shape:
        raise InvalidParameterError(
            "rdp", rdp, f"must be a 1-D array matching orders (shape {al.shape}), got {ep.shape}"
        )

    def discrete(d1: float) -> float:
        return max(float(np.min(ep + extra(al, -math.log(d1)))), 0.0)

    return finish(_elementwise(discrete, d))


@overload
def rdp_to_dp_mironov(
    delta: float,
    *,
    bound: float | None = None,
    rdp: RDPCurve | ArrayLike | None = None,
    orders: ArrayLike | None = None,
) -> float: ...


@overload
def rdp_to_dp_mironov(
    delta: ArrayLike,
    *,
    bound: ArrayLike | None = None,
    rdp: RDPCurve | ArrayLike | None = None,
    orders: ArrayLike | None = None,
) -> FloatOrArray: ...


def rdp_to_dp_mironov(
    delta: ArrayLike,
    *,
    bound: ArrayLike | None = None,
    rdp: RDPCurve | ArrayLike | None = None,
    orders: ArrayLike | None = None,
) -> FloatOrArray:
    r"""(ε, δ) from Rényi DP by Mironov's conversion (2017, Proposition 3).

    .. math:: \varepsilon = \min_{\alpha>1}\; \varepsilon_\alpha + \frac{\log(1/\delta)}{\alpha-1}

    For comparison only: the exact curve (:func:`epsilon_for_delta`) is never worse.

    Parameters
    ----------
    delta : float or array_like
        δ in (0, 1).
    bound : float or array_like, optional
        Mahalanobis bound q of a Gaussian mechanism, :math:`\varepsilon_\alpha = \alpha q/2`
        (closed form :math:`q/2 + \sqrt{2q\log(1/\delta)}`). Broadcast against ``delta``.
    rdp : callable or array_like, optional
        A generic RDP curve: a callable ``alpha -> epsilon_alpha`` (optimised over continuous
        α > 1) or an array of ε at ``orders`` (minimised over those orders). Exactly one of
        ``bound`` / ``rdp``.
    orders : array_like, optional
        The orders (> 1) matching an array ``rdp``.
    """
    return _rdp_convert("mironov", delta, bound, rdp, orders)


@overload
def rdp_to_dp_improved(
    delta: float,
    *,
    bound: float | None = None,
    rdp: RDPCurve | ArrayLike | None = None,
    orders: ArrayLike | None = None,
) -> float: ...


@overload
def rdp_to_dp_improved(
    delta: ArrayLike,
    *,
    bound: ArrayLike | None = None,
    rdp: RDPCurve | ArrayLike | None = None,
    orders: ArrayLike | None = None,
) -> FloatOrArray: ...


def rdp_to_dp_improved(
    delta: ArrayLike,
    *,
    bound: ArrayLike | None = None,
    rdp: RDPCurve | ArrayLike | None = None,
    orders: ArrayLike | None = None,
) -> FloatOrArray:
    r"""(ε, δ) from Rényi DP by the improved conversion (Canonne, Kamath & Steinke 2020, Prop. 12).

    .. math:: \varepsilon = \min_{\alpha>1}\; \varepsilon_\alpha + \frac{\log(1/\delta)
              - \log\alpha}{\alpha-1} + \log(1 - 1/\alpha)

    (also Balle, Barthe, Gaboardi, Hsu and Sato, "Hypothesis Testing Interpretations and Rényi
    Differential Privacy"), optimised over continuous α (grid in log(α-1), then
    bounded Brent) or over the given ``orders``. Results are clipped at 0. Parameters as in
    :func:`rdp_to_dp_mironov`. Any α gives a valid bound, so an imperfect optimisation only loses
    tightness, never validity.
    """
    return _rdp_convert("improved", delta, bound, rdp, orders)
