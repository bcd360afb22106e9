r"""The exact Gaussian (ε, δ) curve of Balle & Wang in log form, and its safe vectorised inverses.

Private core shared by :mod:`dpopt.accounting.gdp` and :mod:`dpopt.accounting.budgets`. Inputs
are assumed validated. For a Gaussian mechanism whose whitened shift is :math:`\mu`
(:math:`\mu^2 = q`, the Mahalanobis bound), Balle & Wang, "Improving the Gaussian Mechanism for
Differential Privacy" (Theorem 8), and Dong, Roth & Su, "Gaussian Differential Privacy"
(Corollary 2.13) give the smallest δ at which it is (ε, δ)-DP:

.. math:: \delta(\varepsilon;\mu) = \Phi(a) - e^\varepsilon \Phi(b),
          \quad a = \mu/2 - \varepsilon/\mu,\ b = -\mu/2 - \varepsilon/\mu .

Since :math:`b^2/2 - a^2/2 = \varepsilon`, :math:`e^\varepsilon\Phi(b) = \tfrac12
e^{-a^2/2}\,\mathrm{erfcx}(-b/\sqrt2)` and, for ``a < 0`` with :math:`x = -a/\sqrt2`,
:math:`h = \mu/\sqrt2`,

.. math:: \log\delta = -x^2 + \log\tfrac12 + \log[\mathrm{erfcx}(x) - \mathrm{erfcx}(x + h)],

never forming :math:`e^\varepsilon` nor :math:`\mu^2` (so μ from the smallest subnormal to the
largest double is allowed). The difference of ``erfcx`` values is :math:`\int_x^{x+h} g(u)\,du`,
:math:`g = -\mathrm{erfcx}' = 2/\sqrt\pi - 2u\,\mathrm{erfcx}(u) > 0`, by 20-point Gauss–Legendre
(asymptotic series of ``g`` for ``u >= 8``), kept in log form so it cannot underflow; for
``x >= 1e8`` the closed form :math:`h / (\sqrt\pi\,x(x+h))` of the leading asymptotic term is used
(relative error below :math:`1.5/x^2 \le 1.5\cdot 10^{-16}`, and on the side of a larger δ). The
result is ``-inf`` only when μ = 0 or the true log δ is below ``-1.797e308`` (the most negative
double): every finite target is then met. For ``a >= 0`` (δ not small) the direct form is used,
rewritten for small ε as :math:`[\Phi(a) - \Phi(b)] - (e^\varepsilon - 1)\Phi(b)`, and as
:math:`\log(1 - [\Phi(-a) + e^\varepsilon\Phi(b)])` (``log1p`` of two positive terms) when δ is
close to 1; for μ < 1e-100 as :math:`\log(\mu/\sqrt{2\pi}) + \log(1 - \varepsilon\sqrt{\pi/2}/\mu)`.

The derivatives are closed forms: :math:`\partial\delta/\partial\mu = \varphi(a)` and
:math:`\partial\delta/\partial\varepsilon = -e^\varepsilon\Phi(b)`. The inverses (largest μ for
a target δ, smallest ε for a target δ) run a safeguarded Newton iteration on whole arrays at once
(Newton in log μ, or in ε, kept inside a bracket that is bisected on the bit pattern of the
doubles when a step leaves it, so any representable answer is reached), then step the answer to
the safe side and re-evaluate the forward formula against the target minus a margin
(:func:`safety_margin`) covering its rounding error. The returned value is always one at which
that re-evaluation passed: a returned μ never gives more than the target δ and a returned ε
never less.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpopt.errors import SolverError

__all__ = [
    "log_delta",
    "log_delta_mu",
    "max_bound",
    "max_mu",
    "min_epsilon",
    "min_epsilon_mu",
    "safety_margin",
]

Array = NDArray[np.float64]

_SQRT2 = math.sqrt(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LOG_HALF = math.log(0.5)
_HALF_LOG_PI = 0.5 * math.log(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
_DBL_MAX = float(np.finfo(np.float64).max)
_ASYM_X = 1e8
# Gauss-Legendre rules for the integral of g over [x, x + h]. The error of the n-point rule is
# about rho^(-2n) relative, rho ~ 4 max(x, 1)/h (g varies on the scale max(x, 1) and is entire),
# so the rule is picked by r = h / max(x, 1): each class keeps (r/4)^(2n) below 1e-20.
_GL_RULES = tuple(
    (r_max, *np.polynomial.legendre.leggauss(n))
    for r_max, n in ((4e-5, 2), (1.5e-3, 3), (1e-2, 4), (0.07, 6), (0.2, 8), (1.0, 20))
)
# Asymptotic series of g(u) = -erfcx'(u): (2/sqrt(pi)) sum_{n>=1} (-1)^(n+1) (2n-1)!! / (2u^2)^n,
# used for u >= 8. Truncated after N terms the error is below the first omitted term,
# (2N+1)!! w^N relative (w = 1/(2u^2)); each (u_min, N) keeps it below 1e-19 for u >= u_min.
_ASYM_FROM = 8.0
_ASYM_TERMS = ((8.0, 25), (12.0, 15), (24.0, 10), (64.0, 7), (1000.0, 4))
_ASYM_COEF = np.array(
    [
        (-1.0) ** (n + 1) * float(np.prod(np.arange(1, 2 * n, 2, dtype=np.float64)))
        for n in range(1, 26)
    ]
)


def _asymptotic_g(u: Array, terms: int) -> Array:
    """The first ``terms`` terms of the asymptotic series of :math:`g(u)` (Horner in w)."""
    w = 1.0 / (2.0 * u * u)
    acc = np.full_like(u, _ASYM_COEF[terms - 1])
    for c in _ASYM_COEF[terms - 2 :: -1]:
        acc = acc * w + c
    return _TWO_OVER_SQRT_PI * (acc * w)


def _neg_erfcx_prime(u: Array) -> Array:
    """:math:`g(u) = 2/\\sqrt\\pi - 2u\\,\\mathrm{erfcx}(u) > 0` for ``u >= 0``, accurately."""
    near = u < _ASYM_FROM
    if near.all():
        return np.asarray(_TWO_OVER_SQRT_PI - 2.0 * u * special.erfcx(u))
    out = np.empty_like(u)
    un = u[near]
    out[near] = _TWO_OVER_SQRT_PI - 2.0 * un * special.erfcx(un)
    bounds = [t[0] for t in _ASYM_TERMS[1:]] + [np.inf]
    for (low, terms), high in zip(_ASYM_TERMS, bounds, strict=True):
        sel = (u >= low) & (u < high)
        if sel.any():
            out[sel] = _asymptotic_g(u[sel], terms)
    return out


def _log_erfcx_diff(x: Array, h: Array, log_h: Array) -> Array:
    """:math:`\\log(\\mathrm{erfcx}(x) - \\mathrm{erfcx}(x + h))` for ``x >= 0, h > 0``.

    Never underflows: the quadrature sum and its width are combined in log form (``log_h`` is
    passed separately so a subnormal ``h`` keeps its relative precision), and for ``x >= 1e8``
    the leading asymptotic term is integrated in closed form.
    """
    out = np.empty_like(x)
    far = x >= _ASYM_X
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if far.any():
            xf, hf = x[far], h[far]
            val = log_h[far] - np.log(xf) - np.log(xf + hf) - _HALF_LOG_PI
            out[far] = np.where(np.isinf(xf), -np.inf, val)
        ratio = np.where(far, np.inf, h / np.maximum(x, 1.0))
    low = 0.0
    for r_max, gx, gw in _GL_RULES:
        sel = (ratio > low) & (ratio <= r_max) if low > 0.0 else ratio <= r_max
        low = r_max
        if not sel.any():
            continue
        xq, hq = x[sel], h[sel]
        nodes = xq[:, None] + 0.5 * hq[:, None] * (gx[None, :] + 1.0)
        vals = _neg_erfcx_prime(nodes.ravel()).reshape(nodes.shape)
        # an explicit sum (not a BLAS product): each element's value is then the same whatever
        # array it is evaluated in, so a re-check repeats the evaluation bit for bit
        total = vals[:, 0] * gw[0]
        for j in range(1, gw.size):
            total += vals[:, j] * gw[j]
        out[sel] = _LOG_HALF + log_h[sel] + np.log(total)
    direct = ~far & (ratio > 1.0)
    if direct.any():
        xd, hd = x[direct], h[direct]
        out[direct] = np.log(special.erfcx(xd) - special.erfcx(xd + hd))
    return out


def _shift_a(eps: Array, m: Array, pos: NDArray[np.bool_]) -> Array:
    r""":math:`a = \mu/2 - \varepsilon/\mu` to a few ulps of ``a`` itself (``-inf`` where μ = 0).

    The direct difference is accurate unless the two terms cancel, which needs
    :math:`\mu/4 < \varepsilon/\mu < \mu` (otherwise :math:`|a|` is at least half the larger
    term); only those elements go through :func:`_shift_a_exact`.
    """
    mu_safe = np.where(pos, m, 1.0)
    ratio = eps / mu_safe
    out = np.where(pos, mu_safe / 2.0 - ratio, -np.inf)
    hard = pos & (ratio > 0.25 * mu_safe) & (ratio < mu_safe)
    if hard.any():
        out[hard] = _shift_a_exact(eps[hard], m[hard], np.ones(int(hard.sum()), dtype=bool))
    return out


def _shift_a_exact(eps: Array, m: Array, pos: NDArray[np.bool_]) -> Array:
    r""":math:`a = \mu/2 - \varepsilon/\mu` to a few ulps of ``a`` itself, even when the two terms
    nearly cancel (ε ≈ μ²/2, i.e. δ of order 1 with a large μ).

    With μ scaled by a power of two to :math:`\mu' \in [1, 2)` (and ε by its square),
    :math:`a = 2^k(\mu'^2 - 2\varepsilon')/(2\mu')` where :math:`\mu'^2` is split exactly into
    ``p + e`` (Dekker's product) and ``p - 2ε'`` is exact by Sterbenz's lemma in the cancelling
    case. Elements whose scaled ε leaves the normal range (no cancellation there) use the
    direct formula; ``mu = 0`` gives ``-inf``.
    """
    mu_safe = np.where(pos, m, 1.0)
    direct = np.where(pos, mu_safe / 2.0 - eps / mu_safe, -np.inf)
    mant, expo = np.frexp(mu_safe)  # mu = mant * 2^expo, mant in [0.5, 1)
    mp_ = mant * 2.0  # in [1, 2)
    k = expo - 1
    eps_s = np.ldexp(eps, -2 * k)
    ok = pos & np.isfinite(eps_s) & ((eps_s == 0.0) | (eps_s > 1e-290))
    prod = mp_ * mp_
    split = mp_ * 134217729.0  # 2^27 + 1
    hi = split - (split - mp_)
    lo = mp_ - hi
    err = ((hi * hi - prod) + 2.0 * hi * lo) + lo * lo
    num = (prod - 2.0 * eps_s) + err
    accurate = np.ldexp(num / (2.0 * mp_), k)
    return np.asarray(np.where(ok, accurate, direct), dtype=np.float64)


def _curve(epsilon: Array, mu: Array, deriv: bool = False) -> tuple[Array, Array, Array]:
    r"""log δ(ε; μ) and, if ``deriv``, :math:`\partial\log\delta/\partial\log\mu` and
    :math:`\partial\log\delta/\partial\varepsilon` (flat arrays of one shape, ε, μ >= 0)."""
    eps = np.asarray(epsilon, dtype=np.float64)
    m = np.asarray(mu, dtype=np.float64)
    out = np.full(eps.shape, -np.inf)
    d_logmu = np.zeros(eps.shape) if deriv else out
    d_eps = np.zeros(eps.shape) if deriv else out
    pos = m > 0.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        a = _shift_a(eps, m, pos)
        b = a - m
        neg = pos & (a < 0.0)
        if np.any(neg):
            x = -a[neg] / _SQRT2
            h = m[neg] / _SQRT2
            log_m = np.log(m[neg])
            rest = _LOG_HALF + _log_erfcx_diff(x, h, log_m - 0.5 * math.log(2.0))
            x2 = x * x
            out[neg] = rest - x2
            if deriv:
                # d log δ / d log μ = μ φ(a) / δ,  d log δ / dε = -e^ε Φ(b) / δ
                d_logmu[neg] = np.exp(log_m - _HALF_LOG_2PI - rest)
                d_eps[neg] = -np.exp(_LOG_HALF + np.log(special.erfcx(x + h)) - rest)
        big = pos & (a >= 0.0)
        # tiny mu (then eps <= mu^2/2 is tinier): delta = mu/sqrt(2 pi) - eps/2 + O(mu^3), in log
        # form so that a subnormal mu keeps its relative precision
        tiny = big & (m < 1e-100)
        if np.any(tiny):
            m_, e_ = m[tiny], eps[tiny]
            out[tiny] = np.log(m_) - _HALF_LOG_2PI + np.log1p(-e_ * _SQRT_HALF_PI / m_)
        big &= ~tiny
        # delta near 1: 1 - delta = Phi(-a) + e^eps Phi(b), two positive terms, then log1p
        if np.any(big):
            a_, b_ = a[big], b[big]
            comp = special.ndtr(-a_) + 0.5 * np.exp(-((a_ / _SQRT2) ** 2)) * special.erfcx(
                -b_ / _SQRT2
            )
            near_one = np.zeros(eps.shape, dtype=bool)
            near_one[big] = comp < 0.25
            out[near_one] = np.log1p(-comp[comp < 0.25])
            big &= ~near_one
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
        big = pos & (a >= 0.0)
        if deriv and np.any(big):
            a_, b_, m_, ld = a[big], b[big], m[big], out[big]
            half_a2 = (a_ / _SQRT2) ** 2
            d_logmu[big] = np.exp(np.log(m_) - half_a2 - _HALF_LOG_2PI - ld)
            d_eps[big] = -np.exp(_LOG_HALF - half_a2 + np.log(special.erfcx(-b_ / _SQRT2)) - ld)
    return out, d_logmu, d_eps


def log_delta_mu(epsilon: Array, mu: Array) -> Array:
    r""":math:`\log\delta(\varepsilon;\mu)` for broadcast arrays ``epsilon >= 0``, ``mu >= 0``.

    ``mu = 0`` gives ``-inf`` (δ = 0); otherwise ``-inf`` only when the true value is below
    the most negative double. Results far below the double range stay finite in log form.
    """
    eps, m = np.broadcast_arrays(np.asarray(epsilon, np.float64), np.asarray(mu, np.float64))
    shape = eps.shape
    return _curve(eps.ravel(), m.ravel())[0].reshape(shape)


def log_delta(epsilon: Array, q: Array) -> Array:
    r""":math:`\log\delta(\varepsilon;\sqrt q)` for broadcast arrays ``epsilon >= 0``, ``q >= 0``.

    ``q`` is the Mahalanobis bound (μ²); ``q = 0`` gives ``-inf``. See :func:`log_delta_mu`.
    """
    return log_delta_mu(epsilon, np.sqrt(np.asarray(q, np.float64)))


def _log_delta1(epsilon: float, q: float) -> float:
    return float(log_delta(np.asarray(epsilon), np.asarray(q))[()])


def safety_margin(target_log_delta: float | Array) -> float | Array:
    """Margin (in log δ) covering the forward formula's rounding error (≈ 1e-14 relative)."""
    return 1e-12 * (1.0 + np.abs(target_log_delta))


# --------------------------------------------------------------------------------------------
# Vectorised safeguarded Newton
# --------------------------------------------------------------------------------------------


def _bitmid(lo: Array, hi: Array) -> Array:
    """Midpoint of ``0 <= lo < hi`` in the ordering of the doubles (bisects exponents too)."""
    lb = lo.view(np.int64)
    hb = hi.view(np.int64)
    return np.asarray(lb + (hb - lb) // 2, dtype=np.int64).view(np.float64)


def _adjacent(lo: Array, hi: Array) -> NDArray[np.bool_]:
    return np.asarray(hi.view(np.int64) - lo.view(np.int64) <= 1)


_MAX_ITER = 200
_NEWTON_TOL = 1e-10


def _solve(
    fixed: Array,
    goal: Array,
    guess: Array,
    *,
    increasing: bool,
    evaluate: Callable[[Array, Array], tuple[Array, Array]],
    forward: Callable[[Array, Array], Array],
    log_newton: bool,
    ok_pass: NDArray[np.bool_],
    ok_fail: NDArray[np.bool_],
) -> tuple[Array, NDArray[np.bool_]]:
    """Safe root of a monotone ``F(x) = L(fixed, x) - goal`` over ``x in [0, DBL_MAX]``.

    ``evaluate(fixed, x)`` returns ``L`` and its derivative with respect to ``log x``
    (``log_newton``) or ``x``. "Passing" means ``L <= goal``; for an increasing ``L`` the answer
    is the largest passing double found, for a decreasing one the smallest. Returns the answer
    and a mask of the elements with no passing double (all doubles fail: the answer would be
    outside the double range). ``ok_pass`` / ``ok_fail`` say whether the start of the range on
    the passing side (0 if increasing, the largest double if decreasing) and its other end pass.
    Every other returned value passed an evaluation.
    """
    n = fixed.size
    # pass_end: a point known to pass; fail_end: a point known to fail.
    pass_end = np.zeros(n) if increasing else np.full(n, _DBL_MAX)
    fail_end = np.full(n, _DBL_MAX) if increasing else np.zeros(n)
    # the two ends of the double range: known to the caller
    # the far end passes: it is the answer; the near end fails: no double passes
    answer = np.where(ok_fail, fail_end, np.nan)
    infeasible = ~ok_fail & ~ok_pass
    done = ok_fail | ~ok_pass
    lo = np.minimum(pass_end, fail_end)
    hi = np.maximum(pass_end, fail_end)
    x = np.where((guess > lo) & (guess < hi) & np.isfinite(guess), guess, _bitmid(lo, hi))
    root = np.full(n, np.nan)
    active = np.flatnonzero(~done)
    # sizes (in doubles) of the last two steps: a Newton step longer than half the step before
    # the last one is replaced by a bisection (as in Brent's method: guaranteed progress)
    w1 = np.full(n, np.iinfo(np.int64).max)
    w2 = w1.copy()
    for _ in range(_MAX_ITER):
        if active.size == 0:
            break
        xa = x[active]
        la, dla = evaluate(fixed[active], xa)
        f = la - goal[active]
        passed = f <= 0.0
        p_end, f_end = pass_end[active], fail_end[active]
        p_end = np.where(passed, xa, p_end)
        f_end = np.where(passed, f_end, xa)
        pass_end[active], fail_end[active] = p_end, f_end
        lo_a = np.minimum(p_end, f_end)
        hi_a = np.maximum(p_end, f_end)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            step = -f / dla
            xn = xa * np.exp(step) if log_newton else xa + step
            rel = np.abs(step) if log_newton else np.abs(step) / np.maximum(np.abs(xa), 1e-300)
        inside = np.isfinite(step) & np.isfinite(xn) & (xn >= lo_a) & (xn <= hi_a)
        near = np.abs(f) <= 1e-6 * (1.0 + np.abs(goal[active]))
        converged = (inside & near & (rel < _NEWTON_TOL)) | _adjacent(lo_a, hi_a)
        bad = ~inside | ((xn == lo_a) | (xn == hi_a)) & ~converged
        mid = _bitmid(lo_a, hi_a)
        xn = np.where(bad, mid, xn)
        size = np.abs(xn.view(np.int64) - xa.view(np.int64))
        slow = ~bad & (size > w2[active] // 2)
        xn = np.where(slow & ~converged, mid, xn)
        size = np.where(slow, np.abs(mid.view(np.int64) - xa.view(np.int64)), size)
        w2[active] = w1[active]
        w1[active] = size
        root[active] = np.where(converged, xn, np.nan)
        x[active] = xn
        active = active[~converged]
    else:  # pragma: no cover - bisection on 64-bit patterns ends long before
        raise SolverError("the safeguarded Newton iteration on the Balle-Wang curve did not end")
    todo = np.flatnonzero(~done)
    if todo.size:
        answer[todo] = _safe_step(
            fixed[todo], goal[todo], root[todo], pass_end[todo], increasing, forward
        )
    return answer, infeasible


def _safe_step(
    fixed: Array,
    goal: Array,
    root: Array,
    known_pass: Array,
    increasing: bool,
    forward: Callable[[Array, Array], Array],
) -> Array:
    """Move each root a few ulps to the safe side and re-check; fall back to a known pass."""
    out = known_pass.copy()
    direction = -1.0 if increasing else 1.0
    rel = 4.0 * 2.0**-52
    idx = np.arange(root.size)
    for _ in range(12):
        if idx.size == 0:
            break
        r = root[idx]
        with np.errstate(over="ignore"):
            cand = r * (1.0 + direction * rel)
            if not increasing:
                cand = cand + 4.0 * 5e-324
        if increasing:
            cand = np.maximum(cand, 0.0)
            useful = cand > out[idx]
        else:
            cand = np.minimum(cand, _DBL_MAX)
            useful = cand < out[idx]
        ld = forward(fixed[idx], cand)
        passed = (ld <= goal[idx]) & np.isfinite(cand)
        take = passed & useful
        out[idx] = np.where(take, cand, out[idx])
        idx = idx[~passed & useful]
        rel *= 16.0
    return out


def _cheap_curve(epsilon: Array, mu: Array) -> tuple[Array, Array, Array]:
    r"""A cheap approximation of :func:`_curve` (two ``log_ndtr``), used only for starting points.

    :math:`\log\delta \approx \ell_a + \log(1 - e^{\ell_b - \ell_a})` with
    :math:`\ell_a = \log\Phi(a)`, :math:`\ell_b = \varepsilon + \log\Phi(b)`; it loses
    relative precision when the two terms nearly cancel, which only costs Newton iterations later.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        r = epsilon / mu
        a = mu / 2.0 - r
        b = -mu / 2.0 - r
        la = special.log_ndtr(a)
        lb = epsilon + special.log_ndtr(b)
        ld = la + np.log(-np.expm1(lb - la))
        d_logmu = np.exp(np.log(mu) - (a / _SQRT2) ** 2 - _HALF_LOG_2PI - ld)
        d_eps = -np.exp(lb - ld)
    return ld, d_logmu, d_eps


def _polish_guess(
    fixed: Array, goal: Array, guess: Array, *, solve_mu: bool, iterations: int = 8
) -> Array:
    """A few plain Newton steps on :func:`_cheap_curve`; falls back to ``guess`` where it fails."""
    x = guess.copy()
    idx = np.arange(x.size)
    for _ in range(iterations):
        if idx.size == 0:
            break
        xi, fi, gi = x[idx], fixed[idx], goal[idx]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            if solve_mu:
                ld, d, _ = _cheap_curve(fi, xi)
                step = np.clip(-(ld - gi) / d, -2.0, 2.0)
                xn = xi * np.exp(step)
                rel = np.abs(step)
            else:
                ld, _, d = _cheap_curve(xi, fi)
                xn = xi - (ld - gi) / d
                rel = np.abs(xn - xi) / np.abs(xi)
        ok = np.isfinite(xn) & (xn > 0.0)
        x[idx] = np.where(ok, xn, xi)
        idx = idx[ok & ~(rel < 1e-8)]  # the step just taken leaves an error ~ rel^2
    good = np.isfinite(x) & (x > 0.0)
    return np.where(good, x, guess)


def _eval_mu(epsilon: Array, mu: Array) -> tuple[Array, Array]:
    ld, d_logmu, _ = _curve(epsilon, mu, deriv=True)
    return ld, d_logmu


def _eval_eps(mu: Array, epsilon: Array) -> tuple[Array, Array]:
    ld, _, d_eps = _curve(epsilon, mu, deriv=True)
    return ld, d_eps


def max_mu(epsilon: Array, target_log_delta: Array) -> Array:
    r"""Largest μ with :math:`\log\delta(\varepsilon;\mu) \le` target − margin (arrays).

    Broadcast arrays, ``epsilon >= 0`` finite, targets finite and < 0. Returns 0 where no
    positive double passes (the answer underflows); the largest double where every double
    passes does not happen for a target < 0 (δ → 1 as μ → ∞).
    """
    eps, tgt = np.broadcast_arrays(
        np.asarray(epsilon, np.float64), np.asarray(target_log_delta, np.float64)
    )
    shape = eps.shape
    e = eps.ravel().copy()
    t = tgt.ravel()
    goal = t - safety_margin(t)
    # initial guess from the Gaussian tail: a = mu/2 - eps/mu = -z with z = sqrt(2|log delta|)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        z = np.sqrt(2.0 * np.abs(goal))
        guess = 2.0 * e / (z + np.hypot(z, np.sqrt(2.0 * e)))
        # two fixed-point passes of the tail asymptotic delta ~ phi(z) mu / (z (z + mu)), z = -a
        for _ in range(2):
            z2 = 2.0 * (-goal - _HALF_LOG_2PI + np.log(guess) - np.log(z) - np.log(z + guess))
            z_new = np.sqrt(z2)
            ok = np.isfinite(z_new) & (z_new > 1.0)
            z = np.where(ok, z_new, z)
            better = 2.0 * e / (z + np.hypot(z, np.sqrt(2.0 * e)))
            guess = np.where(ok & (better > 0.0), better, guess)
        guess = np.maximum(guess, np.exp(goal + _HALF_LOG_2PI))
    guess = _polish_guess(e, goal, guess, solve_mu=True)
    # mu = 0 gives delta = 0 (passes); the largest mu gives delta = 1 (fails): goal < 0
    ans, _ = _solve(
        e,
        goal,
        guess,
        increasing=True,
        evaluate=_eval_mu,
        forward=lambda eps, mu: _curve(eps, mu)[0],
        log_newton=True,
        ok_pass=np.ones(e.size, dtype=bool),
        ok_fail=np.zeros(e.size, dtype=bool),
    )
    return ans.reshape(shape)


def _zero_epsilon_passes(mu: Array, goal: Array) -> NDArray[np.bool_]:
    r"""Whether ε = 0 meets ``goal``: :math:`\log\delta(0;\mu) \le` goal, on the forward formula.

    At ε = 0 the curve is :math:`\delta(0;\mu) = \Phi(\mu/2) - \Phi(-\mu/2) =
    \mathrm{erf}(\mu/(2\sqrt2))`, one ``erf`` per element: where that closed form is clearly above
    the goal (by more than its possible error, generously 0.01 + 1e-6·|goal| in log), ε = 0
    fails; the other elements are decided by the forward formula itself.
    """
    with np.errstate(divide="ignore", under="ignore"):
        closed = np.log(special.erf(mu / (2.0 * _SQRT2)))
    out = np.zeros(mu.shape, dtype=bool)
    check = np.flatnonzero(~(closed > goal + 0.01 + 1e-6 * np.abs(goal)))
    if check.size:
        out[check] = _curve(np.zeros(check.size), mu[check])[0] <= goal[check]
    return out


def min_epsilon_mu(mu: Array, target_log_delta: Array) -> tuple[Array, NDArray[np.bool_]]:
    r"""Smallest ε >= 0 with :math:`\log\delta(\varepsilon;\mu) \le` target − margin (arrays).

    Returns the answers and a mask of the elements for which no finite double passes.
    """
    m, tgt = np.broadcast_arrays(
        np.asarray(mu, np.float64), np.asarray(target_log_delta, np.float64)
    )
    shape = m.shape
    mm = m.ravel().copy()
    t = tgt.ravel()
    goal = t - safety_margin(t)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        z = np.sqrt(2.0 * np.abs(goal))
        # two fixed-point passes of the tail asymptotic delta ~ phi(z) mu / (z (z + mu)), z = -a
        for _ in range(2):
            z2 = 2.0 * (-goal - _HALF_LOG_2PI + np.log(mm) - np.log(z) - np.log(z + mm))
            z_new = np.sqrt(z2)
            z = np.where(np.isfinite(z_new) & (z_new > 1.0), z_new, z)
        guess = mm * z + mm * mm / 2.0
    guess = _polish_guess(mm, goal, guess, solve_mu=False)
    # epsilon = 0 may pass (answer 0); the largest epsilon passes unless mu is huge
    ok_fail = _zero_epsilon_passes(mm, goal)
    ok_pass = np.ones(mm.size, dtype=bool)
    huge = mm > 1e150
    if np.any(huge):
        ok_pass[huge] = _curve(np.full(int(huge.sum()), _DBL_MAX), mm[huge])[0] <= goal[huge]
    ans, infeasible = _solve(
        mm,
        goal,
        guess,
        increasing=False,
        evaluate=_eval_eps,
        forward=lambda mu, eps: _curve(eps, mu)[0],
        log_newton=False,
        ok_pass=ok_pass,
        ok_fail=ok_fail,
    )
    return ans.reshape(shape), infeasible.reshape(shape)


# --------------------------------------------------------------------------------------------
# Scalar conveniences (kept for callers of the earlier scalar API)
# --------------------------------------------------------------------------------------------


def max_bound(epsilon: float, target_log_delta: float) -> float:
    r"""Largest :math:`q = \mu^2` with :math:`\log\delta \le` target − margin (safe side).

    Returns 0.0 when the admissible μ² underflows and the largest double when it overflows (both
    on the safe side: never above the exact value).
    """
    mu = float(max_mu(np.asarray(epsilon), np.asarray(target_log_delta))[()])
    return _square_down(mu)


def _square_down(mu: float) -> float:
    with np.errstate(over="ignore", under="ignore"):
        q = mu * mu
    if math.isinf(q):
        return _DBL_MAX
    q = float(np.nextafter(q, 0.0)) if q > 0.0 else 0.0
    return q


def min_epsilon(q: float, target_log_delta: float) -> float:
    r"""Smallest ε >= 0 with :math:`\log\delta(\varepsilon;\sqrt q) \le` target − margin.

    Raises
    ------
    SolverError
        If no finite double ε meets the target.
    """
    mu = _sqrt_up(q)
    eps, bad = min_epsilon_mu(np.asarray(mu), np.asarray(target_log_delta))
    if bool(np.any(bad)):
        raise SolverError("no finite epsilon meets the target delta in double precision")
    return float(eps[()])


def _sqrt_up(q: float) -> float:
    """A double >= sqrt(q) (correctly rounded sqrt, moved up one ulp unless exact)."""
    m = math.sqrt(q)
    return m if m * m == q else float(np.nextafter(m, np.inf))


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
