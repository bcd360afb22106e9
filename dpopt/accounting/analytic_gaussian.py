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
:math:`g = -\mathrm{erfcx}' = 2/\sqrt\pi - 2u\,\mathrm{erfcx}(u) > 0`, by a Gauss–Legendre rule of
2 to 20 points picked per element by the interval's length against the scale of ``g`` (so that
the rule's error stays below 1e-17 relative; the asymptotic series of ``g`` with 4 to 20 terms
for ``u >= 8``), kept in log form so it cannot underflow; for
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
doubles when a step leaves it, so any representable answer is reached) from a start given by
the Gaussian tail asymptotics and polished on a cheap form of the curve (one evaluation of the
exact curve then usually suffices), then step the answer to
the safe side and re-evaluate the forward formula against the target minus a margin
(:func:`safety_margin`) covering its rounding error. The returned value is always one at which
that re-evaluation passed: a returned μ never gives more than the target δ and a returned ε
never less. Large arrays are processed in blocks of 8192 elements (no Python loop per element).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import special

from certificates.rounding import sqrt_up, square_down
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
# about rho^(-2n) relative, rho ~ 3.85 max(x, 1)/h (g varies on the scale max(x, 1) and is
# entire; 3.85 is measured against 40-digit values at x from 0 to 1000), so the rule is picked by
# r = h / max(x, 1): each class keeps (r/3.85)^(2n) below 1e-17, a tenth of the double rounding.
_GL_RULES = tuple(
    (r_max, *np.polynomial.legendre.leggauss(n))
    for r_max, n in ((2e-4, 2), (5e-3, 3), (0.025, 4), (0.12, 6), (0.3, 8), (1.0, 20))
)
# Asymptotic series of g(u) = -erfcx'(u): (2/sqrt(pi)) sum_{n>=1} (-1)^(n+1) (2n-1)!! / (2u^2)^n,
# used for u >= 8. Truncated after N terms the error is below the first omitted term,
# (2N+1)!! w^N relative (w = 1/(2u^2)); each (u_min, N) keeps it below 1e-17 for u >= u_min.
_ASYM_FROM = 8.0
_ASYM_TERMS = ((8.0, 20), (12.0, 13), (24.0, 9), (64.0, 6), (1000.0, 4))
_ASYM_COEF = np.array(
    [
        (-1.0) ** (n + 1) * float(np.prod(np.arange(1, 2 * n, 2, dtype=np.float64)))
        for n in range(1, 26)
    ]
)


_GL_R_MAX = np.array([rule[0] for rule in _GL_RULES])
_ASYM_LOW = np.array([low for low, _ in _ASYM_TERMS])
_N_TAIL = len(_ASYM_TERMS) + 2  # regimes: below 8, one per row of _ASYM_TERMS, straddling 8


def _count_above(
    values: Array, thresholds: Array, *, inclusive: bool = False
) -> NDArray[np.uint8]:
    """For each value, how many of the (few, sorted) thresholds are below it (or equal to it)."""
    out = np.zeros(values.shape, dtype=np.uint8)
    for t in thresholds:
        out += (values >= t) if inclusive else (values > t)
    return out


def _asymptotic_g(u: Array, terms: int) -> Array:
    """The first ``terms`` terms of the asymptotic series of :math:`g(u)` (Horner in w)."""
    w = 1.0 / (2.0 * u * u)
    acc = np.full_like(u, _ASYM_COEF[terms - 1])
    for c in _ASYM_COEF[terms - 2 :: -1]:
        acc *= w
        acc += c
    acc *= w
    acc *= _TWO_OVER_SQRT_PI
    return acc


def _g_near(u: Array) -> Array:
    """:math:`g(u) = 2/\\sqrt\\pi - 2u\\,\\mathrm{erfcx}(u)` directly (for ``0 <= u < 8``)."""
    val = special.erfcx(u)
    val *= -2.0 * u
    val += _TWO_OVER_SQRT_PI
    return np.asarray(val)


def _neg_erfcx_prime(u: Array) -> Array:
    """:math:`g(u) = 2/\\sqrt\\pi - 2u\\,\\mathrm{erfcx}(u) > 0` for ``u >= 0``, accurately."""
    out = np.empty_like(u)
    near = u < _ASYM_FROM
    out[near] = _g_near(u[near])
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
    the leading asymptotic term is integrated in closed form. The elements are grouped once (by
    quadrature rule, and by how ``g`` is evaluated on ``[x, x + h]``: ``erfcx`` below 8, the
    asymptotic series with as many terms as ``x`` needs, or node by node when the interval
    straddles 8), so each group is one array computation.
    """
    out = np.empty_like(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = h / np.maximum(x, 1.0)
        rule = _count_above(ratio, _GL_R_MAX)  # len(_GL_RULES): beyond the last rule
        n_rules = len(_GL_RULES)
        far = x >= _ASYM_X
        if far.any():
            xf, hf = x[far], h[far]
            val = log_h[far] - np.log(xf) - np.log(xf + hf) - _HALF_LOG_PI
            out[far] = np.where(np.isinf(xf), -np.inf, val)
            rule[far] = n_rules + 1
        direct = rule == n_rules
        if direct.any():
            xd, hd = x[direct], h[direct]
            out[direct] = np.log(special.erfcx(xd) - special.erfcx(xd + hd))
    tail = _count_above(x, _ASYM_LOW, inclusive=True)
    tail[(tail == 0) & (x + h >= _ASYM_FROM)] = _N_TAIL - 1
    key = rule * np.uint8(_N_TAIL) + tail
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=(n_rules + 2) * _N_TAIL)
    starts = np.concatenate(([0], np.cumsum(counts)))
    for k in np.flatnonzero(counts[: n_rules * _N_TAIL]):
        idx = order[starts[k] : starts[k + 1]]
        _, gx, gw = _GL_RULES[k // _N_TAIL]
        regime = k % _N_TAIL
        xq, hq = x[idx], h[idx]
        nodes = xq[:, None] + (0.5 * hq)[:, None] * (gx + 1.0)[None, :]
        flat = nodes.ravel()
        if regime == 0:
            vals = _g_near(flat)
        elif regime == _N_TAIL - 1:
            vals = _neg_erfcx_prime(flat)
        else:
            vals = _asymptotic_g(flat, _ASYM_TERMS[regime - 1][1])
        vals = vals.reshape(nodes.shape)
        # a row-wise numpy sum (not a BLAS product): each element's value is then the same
        # whatever array it is evaluated in, so a re-check repeats the evaluation bit for bit
        vals *= gw
        total = vals.sum(axis=1)
        out[idx] = _LOG_HALF + log_h[idx] + np.log(total)
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


def _curve(epsilon: Array, mu: Array, deriv: str | None = None) -> tuple[Array, Array]:
    r"""log δ(ε; μ) and, if ``deriv`` is ``"mu"`` or ``"eps"``,
    :math:`\partial\log\delta/\partial\log\mu` or :math:`\partial\log\delta/\partial\varepsilon`
    (flat arrays of one shape, ε, μ >= 0; without ``deriv`` the second array is meaningless).

    The value of log δ does not depend on ``deriv`` nor on the other elements of the arrays.
    """
    eps = np.asarray(epsilon, dtype=np.float64)
    m = np.asarray(mu, dtype=np.float64)
    out = np.full(eps.shape, -np.inf)
    slope = np.zeros(eps.shape) if deriv else out
    pos = m > 0.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        a = _shift_a(eps, m, pos)
        neg = pos & (a < 0.0)
        every = bool(neg.all())
        if every or neg.any():
            sel: slice | NDArray[np.bool_] = slice(None) if every else neg
            x = -a[sel] / _SQRT2
            h = m[sel] / _SQRT2
            log_m = np.log(m[sel])
            rest = _LOG_HALF + _log_erfcx_diff(x, h, log_m - 0.5 * math.log(2.0))
            out[sel] = rest - x * x
            # d log δ / d log μ = μ φ(a) / δ,  d log δ / dε = -e^ε Φ(b) / δ
            if deriv == "mu":
                slope[sel] = np.exp(log_m - _HALF_LOG_2PI - rest)
            elif deriv == "eps":
                slope[sel] = -np.exp(_LOG_HALF + np.log(special.erfcx(x + h)) - rest)
        if every:
            return out, slope
        b = a - m
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
            if deriv == "mu":
                slope[big] = np.exp(np.log(m_) - half_a2 - _HALF_LOG_2PI - ld)
            else:
                slope[big] = -np.exp(
                    _LOG_HALF - half_a2 + np.log(special.erfcx(-b_ / _SQRT2)) - ld
                )
    return out, slope


# Whole arrays are processed in blocks of this many elements: the temporaries of one block
# (64 KiB each) are reused from the heap instead of being mapped afresh (and page-faulted in)
# for every operation, which is about a third of the time on large arrays.
_BLOCK = 8192


def _blocks(n: int) -> list[slice]:
    return [slice(i, min(i + _BLOCK, n)) for i in range(0, n, _BLOCK)]


def log_delta_mu(epsilon: Array, mu: Array) -> Array:
    r""":math:`\log\delta(\varepsilon;\mu)` for broadcast arrays ``epsilon >= 0``, ``mu >= 0``.

    ``mu = 0`` gives ``-inf`` (δ = 0); otherwise ``-inf`` only when the true value is below
    the most negative double. Results far below the double range stay finite in log form.
    """
    eps, m = np.broadcast_arrays(np.asarray(epsilon, np.float64), np.asarray(mu, np.float64))
    shape = eps.shape
    e_flat, m_flat = eps.ravel(), m.ravel()
    out = np.empty(e_flat.size)
    for blk in _blocks(e_flat.size):
        out[blk] = _curve(e_flat[blk], m_flat[blk])[0]
    return out.reshape(shape)


def log_delta(epsilon: Array, q: Array) -> Array:
    r""":math:`\log\delta(\varepsilon;\sqrt q)` for broadcast arrays ``epsilon >= 0``, ``q >= 0``.

    ``q`` is the Mahalanobis bound (μ²); ``q = 0`` gives ``-inf``. See :func:`log_delta_mu`.
    """
    return log_delta_mu(epsilon, np.sqrt(np.asarray(q, np.float64)))


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


def _first_step(
    active: NDArray[np.intp],
    fixed: Array,
    goal: Array,
    x: Array,
    root: Array,
    pass_end: Array,
    fail_end: Array,
    evaluate: Callable[[Array, Array], tuple[Array, Array]],
    log_newton: bool,
    n: int,
) -> NDArray[np.intp]:
    """One Newton step from the starting points, with the cheap bookkeeping of a first step.

    Most starting points are already well inside Newton's quadratic range: those whose step is
    below the tolerance (and lands inside the bracket) get their root here, to be moved to the
    safe side and checked; the others are returned, to run the full safeguarded iteration from
    the same start (whose evaluation has updated the bracket ends in place).
    """
    whole = active.size == n
    sel: slice | NDArray[np.intp] = slice(None) if whole else active
    xa = x[sel]
    la, dla = evaluate(fixed[sel], xa)
    f = la - goal[sel]
    passed = f <= 0.0
    p_end = np.where(passed, xa, pass_end[sel])
    f_end = np.where(passed, fail_end[sel], xa)
    pass_end[sel], fail_end[sel] = p_end, f_end
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        step = -f / dla
        xn = xa * np.exp(step) if log_newton else xa + step
        rel = np.abs(step) if log_newton else np.abs(step) / np.maximum(np.abs(xa), 1e-300)
    quick = (
        (rel < _NEWTON_TOL)
        & (np.abs(f) <= 1e-6 * (1.0 + np.abs(goal[sel])))
        & (xn >= np.minimum(p_end, f_end))
        & (xn <= np.maximum(p_end, f_end))
    )
    if whole:
        root[quick] = xn[quick]
        return np.flatnonzero(~quick)
    root[active[quick]] = xn[quick]
    return active[~quick]


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
    if active.size:
        active = _first_step(
            active, fixed, goal, x, root, pass_end, fail_end, evaluate, log_newton, n
        )
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
    """Move each root a few ulps to the safe side and re-check; fall back to a known pass.

    The first candidate (4 ulps below a μ root, 1 ulp above an ε root) is taken whenever it
    passes, even where the iteration passed closer to the root: the answer is then a function
    of the root alone, not of the path to it, which keeps nearby inputs in order and makes a
    budget's μ and the ε recomputed from it agree (μ is the more cautious of the two). Later,
    larger steps are taken only while they beat the known pass.
    """
    out = known_pass.copy()
    direction = -1.0 if increasing else 1.0
    rel = (4.0 if increasing else 1.0) * 2.0**-52
    idx = np.arange(root.size)
    for step in range(12):
        if idx.size == 0:
            break
        r = root[idx]
        with np.errstate(over="ignore"):
            cand = r * (1.0 + direction * rel)
            if not increasing:
                cand = cand + 4.0 * 5e-324
        if increasing:
            cand = np.maximum(cand, 0.0)
            useful = (cand > out[idx]) | (step == 0)
        else:
            cand = np.minimum(cand, _DBL_MAX)
            useful = (cand < out[idx]) | (step == 0)
        ld = forward(fixed[idx], cand)
        passed = (ld <= goal[idx]) & np.isfinite(cand)
        take = passed & useful
        out[idx] = np.where(take, cand, out[idx])
        idx = idx[~passed & useful]
        rel *= 16.0
    return out


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_MIDPOINT_BELOW = 1e-5


def _cheap_curve(epsilon: Array, mu: Array, *, wrt_mu: bool) -> tuple[Array, Array]:
    r"""A cheap approximation of :func:`_curve`, used only for starting points.

    Returns log δ and its derivative with respect to log μ (``wrt_mu``) or ε. Where
    :math:`a < 0`, with :math:`x = -a/\sqrt2`, :math:`h = \mu/\sqrt2` and
    :math:`D = \mathrm{erfcx}(x) - \mathrm{erfcx}(x + h)`,

    .. math:: \log\delta = -x^2 + \log(D/2),\quad
              \frac{\partial\log\delta}{\partial\log\mu} = \frac{\mu\sqrt{2/\pi}}{D},\quad
              \frac{\partial\log\delta}{\partial\varepsilon} =
              -\frac{\mathrm{erfcx}(x + h)}{D},

    with ``D`` by the plain difference (relative error about :math:`10^{-16} x/h`) or, when
    :math:`h < 10^{-5}\max(x, 1)`, by the midpoint rule :math:`h\,g(x + h/2)` (relative error
    about :math:`(h/x)^2/4`): a few units in 1e-11 at worst, which one Newton step on the exact
    curve removes. Elsewhere :math:`\ell_a + \log(1 - e^{\ell_b - \ell_a})` with
    :math:`\ell_a = \log\Phi(a)`, :math:`\ell_b = \varepsilon + \log\Phi(b)`.
    """
    ld = np.full(epsilon.shape, np.nan)
    d = np.full(epsilon.shape, np.nan)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        a = mu / 2.0 - epsilon / mu
        tail = a < 0.0
        x = -a[tail] / _SQRT2
        m = mu[tail]
        h = m / _SQRT2
        e2 = special.erfcx(x + h)
        diff = special.erfcx(x) - e2
        short = h < _MIDPOINT_BELOW * np.maximum(x, 1.0)
        if short.any():
            u = x[short] + 0.5 * h[short]
            diff[short] = h[short] * (_TWO_OVER_SQRT_PI - 2.0 * u * special.erfcx(u))
        ld[tail] = np.log(0.5 * diff) - x * x
        d[tail] = m * _SQRT_2_OVER_PI / diff if wrt_mu else -e2 / diff
        rest = ~tail
        if rest.any():
            e_, m_, a_ = epsilon[rest], mu[rest], a[rest]
            la = special.log_ndtr(a_)
            lb = e_ + special.log_ndtr(a_ - m_)
            ld_ = la + np.log(-np.expm1(lb - la))
            ld[rest] = ld_
            if wrt_mu:
                d[rest] = np.exp(np.log(m_) - (a_ / _SQRT2) ** 2 - _HALF_LOG_2PI - ld_)
            else:
                d[rest] = -np.exp(lb - ld_)
    return ld, d


def _polish_guess(
    fixed: Array, goal: Array, guess: Array, *, solve_mu: bool, iterations: int = 8
) -> Array:
    """A few plain Newton steps on :func:`_cheap_curve`; falls back to ``guess`` where it fails.

    The steps run on the whole arrays while many elements still move, then on the few that
    do; either way an element stops at its first step below 1e-8, so its result does not
    depend on the other elements of the array.
    """
    x = guess.copy()
    idx: NDArray[np.intp] | None = None  # None: every element (those still moving: ``live``)
    live = np.ones(x.size, dtype=bool)
    for _ in range(iterations):
        if idx is None:
            xi, fi, gi = x, fixed, goal
        elif idx.size == 0:
            break
        else:
            xi, fi, gi = x[idx], fixed[idx], goal[idx]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            if solve_mu:
                ld, d = _cheap_curve(fi, xi, wrt_mu=True)
                step = np.clip((gi - ld) / d, -2.0, 2.0)
                xn = xi * np.exp(step)
                rel = np.abs(step)
            else:
                ld, d = _cheap_curve(xi, fi, wrt_mu=False)
                xn = xi + (gi - ld) / d
                rel = np.abs(xn - xi) / np.abs(xi)
        ok = np.isfinite(xn) & (xn > 0.0)
        moving = ok & ~(rel < 1e-8)  # the step just taken leaves an error ~ rel^2
        if idx is None:
            x = np.where(ok & live, xn, xi)
            live &= moving
            if np.count_nonzero(live) < x.size // 4:
                idx = np.flatnonzero(live)
        else:
            x[idx] = np.where(ok, xn, xi)
            idx = idx[moving]
    good = np.isfinite(x) & (x > 0.0)
    return np.where(good, x, guess)


def _eval_mu(epsilon: Array, mu: Array) -> tuple[Array, Array]:
    return _curve(epsilon, mu, deriv="mu")


def _eval_eps(mu: Array, epsilon: Array) -> tuple[Array, Array]:
    return _curve(epsilon, mu, deriv="eps")


def max_mu(epsilon: Array, target_log_delta: Array) -> Array:
    r"""Largest μ with :math:`\log\delta(\varepsilon;\mu) \le` target − margin (arrays).

    Broadcast arrays, ``epsilon >= 0`` finite, targets finite and < 0. Returns 0 where no
    positive double passes (the answer underflows); the largest double where every double
    passes does not happen for a target < 0 (δ → 1 as μ → ∞).
    """
    eps, tgt = np.broadcast_arrays(
        np.asarray(epsilon, np.float64), np.asarray(target_log_delta, np.float64)
    )
    e_flat, t_flat = eps.ravel(), tgt.ravel()
    out = np.empty(e_flat.size)
    for blk in _blocks(e_flat.size):
        out[blk] = _max_mu_block(e_flat[blk].copy(), t_flat[blk])
    return out.reshape(eps.shape)


def _max_mu_block(e: Array, t: Array) -> Array:
    """:func:`max_mu` on one block of flat arrays."""
    goal = t - safety_margin(t)
    # initial guess from the Gaussian tail: a = mu/2 - eps/mu = -z with z = sqrt(2|log delta|),
    # i.e. mu = 2 eps / (z + sqrt(z^2 + 2 eps))
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        two_e = 2.0 * e
        z = np.sqrt(-2.0 * goal)
        guess = two_e / (z + np.sqrt(z * z + two_e))
        # two fixed-point passes of the tail asymptotic delta ~ phi(z) mu / (z (z + mu)), z = -a
        for _ in range(2):
            z_new = np.sqrt(
                2.0 * (-goal - _HALF_LOG_2PI + np.log(guess) - np.log(z * (z + guess)))
            )
            ok = z_new > 1.0  # false for NaN
            z = np.where(ok, z_new, z)
            better = two_e / (z + np.sqrt(z * z + two_e))
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
    return ans


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
    m_flat, t_flat = m.ravel(), tgt.ravel()
    out = np.empty(m_flat.size)
    bad = np.zeros(m_flat.size, dtype=bool)
    for blk in _blocks(m_flat.size):
        out[blk], bad[blk] = _min_epsilon_block(m_flat[blk].copy(), t_flat[blk])
    return out.reshape(m.shape), bad.reshape(m.shape)


def _min_epsilon_block(mm: Array, t: Array) -> tuple[Array, NDArray[np.bool_]]:
    """:func:`min_epsilon_mu` on one block of flat arrays."""
    goal = t - safety_margin(t)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        z = np.sqrt(-2.0 * goal)
        # two fixed-point passes of the tail asymptotic delta ~ phi(z) mu / (z (z + mu)), z = -a
        base = -goal - _HALF_LOG_2PI + np.log(mm)
        for _ in range(2):
            z_new = np.sqrt(2.0 * (base - np.log(z * (z + mm))))
            z = np.where(z_new > 1.0, z_new, z)
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
    return ans, infeasible


# --------------------------------------------------------------------------------------------
# Scalar conveniences (kept for callers of the earlier scalar API)
# --------------------------------------------------------------------------------------------


def max_bound(epsilon: float, target_log_delta: float) -> float:
    r"""Largest :math:`q = \mu^2` with :math:`\log\delta \le` target − margin (safe side).

    Returns 0.0 when the admissible μ² underflows and the largest double when it overflows (both
    on the safe side: never above the exact value).
    """
    mu = float(max_mu(np.asarray(epsilon), np.asarray(target_log_delta))[()])
    return square_down(mu)


def min_epsilon(q: float, target_log_delta: float) -> float:
    r"""Smallest ε >= 0 with :math:`\log\delta(\varepsilon;\sqrt q) \le` target − margin.

    Raises
    ------
    SolverError
        If no finite double ε meets the target.
    """
    mu = sqrt_up(q)
    eps, bad = min_epsilon_mu(np.asarray(mu), np.asarray(target_log_delta))
    if bool(np.any(bad)):
        raise SolverError("no finite epsilon meets the target delta in double precision")
    return float(eps[()])


def shrink_until(value: float, ok: Callable[[float], bool]) -> float:
    """Decrease a positive ``value`` by growing relative steps until ``ok(value)`` holds."""
    rel = 2.0**-52
    for _ in range(1100):
        if ok(value):
            return value
        value = value * (1.0 - rel) if rel < 0.5 else value * 0.5
        rel = min(2.0 * rel, 0.5)
    raise SolverError("could not move the solution to the safe side (value underflowed)")
