r"""The exact Gaussian (ε, δ) curve of Balle & Wang (2018) in log form, and its safe inverses.

Private core shared by :mod:`dpopt.accounting.gdp` and :mod:`dpopt.accounting.budgets` (MATH.md
§4.2, §5.1). Inputs are
assumed validated. With :math:`q = \mu^2` (the Mahalanobis bound of a Gaussian mechanism) and
:math:`m = \sqrt q`,

.. math:: h_\varepsilon(q) = \Phi(m/2 - \varepsilon/m) - e^\varepsilon \Phi(-m/2 - \varepsilon/m),

the smallest δ for which the mechanism is (ε, δ)-DP. With :math:`a = m/2 - \varepsilon/m`,
:math:`b = -m/2 - \varepsilon/m` one has :math:`b^2/2 - a^2/2 = \varepsilon`, so
:math:`e^\varepsilon\Phi(b) = \tfrac12 e^{-a^2/2}\,\mathrm{erfcx}(-b/\sqrt2)` and, for ``a < 0``,

.. math:: h = \tfrac12 e^{-a^2/2}\,[\mathrm{erfcx}(x) - \mathrm{erfcx}(x + m/\sqrt2)],
          \quad x = -a/\sqrt2,

never forming :math:`e^\varepsilon`. The difference of ``erfcx`` values is computed without
cancellation as :math:`\int_x^{x+h} g(u)\,du`, :math:`g = -\mathrm{erfcx}' = 2/\sqrt\pi -
2u\,\mathrm{erfcx}(u) > 0`, by 20-point Gauss–Legendre (with the asymptotic series of ``g`` for
``u >= 8``), which keeps full relative precision even when δ is far below the double range (log
form). For ``a >= 0`` (δ not small) the direct form is used, rewritten for small ε as
:math:`[\Phi(a) - \Phi(b)] - (e^\varepsilon - 1)\Phi(b)`.

Inverses solve monotone equations in log δ with :func:`scipy.optimize.brentq` on doubling
brackets, then move the answer to the safe side and re-verify the forward formula with a margin
(:func:`safety_margin`) that covers its rounding error, so a returned μ/q never gives more than
the target δ and a returned ε never less.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from dpopt.errors import SolverError

__all__ = [
    "log_delta",
    "max_bound",
    "min_epsilon",
    "safety_margin",
]

_SQRT2 = math.sqrt(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LOG_HALF = math.log(0.5)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)
# Asymptotic series of g(u) = -erfcx'(u): (2/sqrt(pi)) sum_{n>=1} (-1)^(n+1) (2n-1)!! / (2u^2)^n.
_ASYM_N = 25
_ASYM_COEF = np.array(
    [
        (-1.0) ** (n + 1) * float(np.prod(np.arange(1, 2 * n, 2, dtype=np.float64)))
        for n in range(1, _ASYM_N + 1)
    ]
)


def _neg_erfcx_prime(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """:math:`g(u) = 2/\\sqrt\\pi - 2u\\,\\mathrm{erfcx}(u) > 0` for ``u >= 0``, accurately."""
    out = np.empty_like(u)
    near = u < 8.0
    un = u[near]
    out[near] = _TWO_OVER_SQRT_PI - 2.0 * un * special.erfcx(un)
    uf = u[~near]
    if uf.size:
        w = 1.0 / (2.0 * uf * uf)
        acc = np.zeros_like(uf)
        for c in _ASYM_COEF[::-1]:
            acc = (acc + c) * w
        out[~near] = _TWO_OVER_SQRT_PI * acc
    return out


def _log_erfcx_diff(x: NDArray[np.float64], h: NDArray[np.float64]) -> NDArray[np.float64]:
    """:math:`\\log(\\mathrm{erfcx}(x) - \\mathrm{erfcx}(x + h))` for ``x >= 0, h > 0``."""
    out = np.empty_like(x)
    quad = h <= np.maximum(x, 1.0)
    xq, hq = x[quad], h[quad]
    if xq.size:
        nodes = xq[:, None] + 0.5 * hq[:, None] * (_GL_X[None, :] + 1.0)
        vals = _neg_erfcx_prime(nodes.ravel()).reshape(nodes.shape)
        integral = 0.5 * hq * (vals @ _GL_W)
        out[quad] = np.log(integral)
    xd, hd = x[~quad], h[~quad]
    out[~quad] = np.log(special.erfcx(xd) - special.erfcx(xd + hd))
    return out


def log_delta(epsilon: NDArray[np.float64], q: NDArray[np.float64]) -> NDArray[np.float64]:
    r""":math:`\log h_\varepsilon(q)` for broadcast arrays ``epsilon >= 0``, ``q >= 0``.

    ``q = 0`` gives ``-inf`` (δ = 0); results below the double range stay finite in log form.
    """
    eps, qq = np.broadcast_arrays(np.asarray(epsilon, np.float64), np.asarray(q, np.float64))
    shape = eps.shape
    eps = eps.ravel()
    qq = qq.ravel()
    out = np.full(eps.shape, -np.inf)
    pos = qq > 0.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        m = np.sqrt(qq)
        r = np.where(pos, eps / np.where(pos, m, 1.0), np.inf)
        a = m / 2.0 - r
        b = -m / 2.0 - r
    neg = pos & (a < 0.0)
    if np.any(neg):
        an, mn = a[neg], m[neg]
        with np.errstate(over="ignore"):
            half_a2 = an * an / 2.0
        out[neg] = _LOG_HALF - half_a2 + _log_erfcx_diff(-an / _SQRT2, mn / _SQRT2)
    big = pos & (a >= 0.0)
    small_eps = big & (eps < 1.0)
    if np.any(small_eps):
        a_, b_, e_ = a[small_eps], b[small_eps], eps[small_eps]
        p = 0.5 * (special.erf(a_ / _SQRT2) + special.erf(-b_ / _SQRT2))
        out[small_eps] = np.log(p - np.expm1(e_) * special.ndtr(b_))
    large_eps = big & (eps >= 1.0)
    if np.any(large_eps):
        a_, b_ = a[large_eps], b[large_eps]
        val = special.ndtr(a_) - 0.5 * np.exp(-a_ * a_ / 2.0) * special.erfcx(-b_ / _SQRT2)
        out[large_eps] = np.log(val)
    return out.reshape(shape)


def _log_delta1(epsilon: float, q: float) -> float:
    return float(log_delta(np.asarray(epsilon), np.asarray(q))[()])


def safety_margin(target_log_delta: float) -> float:
    """Margin (in log δ) covering the forward formula's rounding error (≈ 1e-14 relative)."""
    return 1e-12 * (1.0 + abs(target_log_delta))


def _expand(f: Callable[[float], float], start: float, sign: float, limit: int = 80) -> float:
    """Walk from ``start`` in direction ``sign`` with doubling steps until ``f`` changes sign."""
    step = 1.0
    x = start
    f0 = f(start) > 0.0
    for _ in range(limit):
        x = x + sign * step
        if (f(x) > 0.0) != f0:
            return x
        step *= 2.0
    raise SolverError(
        "could not bracket the root of the Balle-Wang curve; the target is outside the range "
        "representable in double precision (try a less extreme delta)"
    )


def max_bound(epsilon: float, target_log_delta: float) -> float:
    r"""Largest :math:`q` with :math:`\log h_\varepsilon(q) \le` ``target_log_delta`` (safe side).

    Solves the increasing equation :math:`\log h_\varepsilon(e^{2x}) = \log\delta` in
    :math:`x = \log\sqrt q` by Brent on a doubling bracket, then shrinks :math:`q` until the forward
    formula is below the target by :func:`safety_margin`.
    """
    goal = target_log_delta - safety_margin(target_log_delta)

    def f(x: float) -> float:
        return _log_delta1(epsilon, math.exp(2.0 * x)) - goal

    x0 = 0.5 * math.log(max(epsilon, 1e-3))
    if f(x0) > 0.0:
        lo, hi = _expand(f, x0, -1.0), x0
    else:
        lo, hi = x0, _expand(f, x0, 1.0)
    lo, hi = min(lo, hi), max(lo, hi)
    root = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    q = math.exp(2.0 * float(root))
    return shrink_until(q, lambda v: _log_delta1(epsilon, v) <= goal)


def min_epsilon(q: float, target_log_delta: float) -> float:
    r"""Smallest ε >= 0 with :math:`\log h_\varepsilon(q) \le` ``target_log_delta`` (safe side).

    :math:`h_\varepsilon(q)` is decreasing in ε; Brent on a doubling bracket ``[0, 2^k]``, then
    ε is increased until the forward formula is below the target by :func:`safety_margin`.
    """
    goal = target_log_delta - safety_margin(target_log_delta)

    def f(e: float) -> float:
        return _log_delta1(e, q) - goal

    if f(0.0) <= 0.0:
        return 0.0
    hi = _expand(f, 0.0, 1.0)
    root = float(
        optimize.brentq(f, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    )
    return grow_until(root, lambda e: f(e) <= 0.0)


def shrink_until(value: float, ok: Callable[[float], bool]) -> float:
    """Decrease a positive ``value`` by growing relative steps until ``ok(value)`` holds."""
    rel = 2.0**-52
    for _ in range(1100):
        if ok(value):
            return value
        value = value * (1.0 - rel) if rel < 0.5 else value * 0.5
        rel = min(2.0 * rel, 0.5)
    raise SolverError("could not move the solution to the safe side (value underflowed)")


def grow_until(value: float, ok: Callable[[float], bool]) -> float:
    """Increase a nonnegative ``value`` by growing relative steps until ``ok(value)`` holds."""
    rel = 2.0**-52
    for _ in range(1100):
        if ok(value):
            return value
        value = max(value * (1.0 + rel), value + 5e-324) if rel < 1.0 else 2.0 * value + 1e-300
        rel = min(2.0 * rel, 1.0)
    raise SolverError("could not move the solution to the safe side (value overflowed)")
