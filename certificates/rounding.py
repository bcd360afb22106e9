r"""Directed rounding: doubles on the proven side of an exact value (one module for the package).

A privacy bound computed in floating point must not land on the unsafe side of the exact value
by one rounding: a noise scale must be at least :math:`\Delta/\sqrt q`, a Mahalanobis bound at
most :math:`\mu^2`, a composed bound at least :math:`\sum_t q_t`. Each helper here returns a
double and proves its side exactly, either with an error-free transformation (Dekker's product
split, Knuth's two-sum: T. J. Dekker, "A floating-point technique for extending the available
precision", Numer. Math. 18, 1971; D. E. Knuth, *The Art of Computer Programming*, vol. 2,
section 4.2.2) or in rational arithmetic (:class:`fractions.Fraction`, every double being an exact
rational). Correctly rounded ``sqrt`` and division (IEEE 754) put the start within one unit in
the last place, so the ulp steps below take at most a few iterations.

Functions
---------
:func:`next_up`, :func:`next_down`
    One ulp towards :math:`+\infty` / :math:`-\infty`.
:func:`round_up`, :func:`round_down`
    The nearest double above / below a rational.
:func:`step_up_until`, :func:`step_down_until`
    Move a double by ulps until a (monotone) check holds: the one ulp loop every safe-side
    nudge uses.
:func:`sqrt_up`, :func:`sqrt_down`, :func:`square_down`
    :math:`\sqrt q` rounded up / down, :math:`\mu^2` rounded down (arrays or scalars; a
    :class:`~fractions.Fraction` argument of the square roots is taken exactly).
:func:`div_sqrt_up`, :func:`div_sqrt_down`
    The least double :math:`\sigma` with :math:`\sigma^2 q \ge a^2`, i.e. :math:`a/\sqrt q`
    rounded up (a noise scale from a sensitivity and a bound), and the greatest with
    :math:`\sigma^2 q \le a^2`.
:func:`add_up`, :func:`sum_up`
    A sum rounded up.
:func:`div_up`
    A quotient :math:`a/b` rounded up (elementwise): a pure-privacy loss
    :math:`\lVert x - y\rVert / b` that is proven not to exceed its double.

Examples
--------
>>> from fractions import Fraction
>>> sqrt_up(2.0) ** 2 >= 2.0, Fraction(sqrt_up(2.0)) ** 2 >= 2
(True, True)
>>> third = Fraction(1, 3)
>>> Fraction(round_down(third)) < third < Fraction(round_up(third))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.errors import InvalidParameterError

__all__ = [
    "add_up",
    "div_sqrt_down",
    "div_sqrt_up",
    "div_up",
    "next_down",
    "next_up",
    "round_down",
    "round_up",
    "sqrt_down",
    "sqrt_up",
    "square_down",
    "step_down_until",
    "step_up_until",
    "sum_up",
    "two_square",
]

#: Most ulp steps a nudge may take (the starts here are within a few ulps of the answer).
MAX_ULP_STEPS = 10_000


def next_up(x: float) -> float:
    """The next double above ``x``."""
    return math.nextafter(float(x), math.inf)


def next_down(x: float) -> float:
    """The next double below ``x``."""
    return math.nextafter(float(x), -math.inf)


def round_up(x: Fraction | int) -> float:
    """The smallest double >= ``x`` (``x`` finite and within the double range)."""
    f = float(x)
    while Fraction(f) < x:
        f = next_up(f)
    return f


def round_down(x: Fraction | int) -> float:
    """The largest double <= ``x``."""
    f = float(x)
    while Fraction(f) > x:
        f = next_down(f)
    return f


def _step(x: float, ok: Callable[[float], bool], towards: float, limit: int) -> float:
    for _ in range(limit):
        if ok(x):
            return x
        x = math.nextafter(x, towards)
    if ok(x):
        return x
    raise InvalidParameterError("x", x, f"no double within {limit} ulps satisfies the check")


def step_up_until(x: float, ok: Callable[[float], bool], *,
                  limit: int = MAX_ULP_STEPS) -> float:
    """``x`` moved up one ulp at a time until ``ok`` holds (``x`` itself if it holds).

    Raises
    ------
    InvalidParameterError
        After ``limit`` steps without success (the start was not near the answer).
    """
    return _step(float(x), ok, math.inf, limit)


def step_down_until(x: float, ok: Callable[[float], bool], *,
                    limit: int = MAX_ULP_STEPS) -> float:
    """``x`` moved down one ulp at a time until ``ok`` holds (``x`` itself if it holds).

    Raises
    ------
    InvalidParameterError
        After ``limit`` steps without success.
    """
    return _step(float(x), ok, -math.inf, limit)


def two_square(mu: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(p, e)`` with ``p = fl(mu²)`` and ``e = mu² - p`` exactly (Dekker's split).

    Exact for ``1e-137 < |mu| < 1e150`` (no overflow of the split, no underflow of the low
    part's square); outside that range the callers here decide in rational arithmetic.
    """
    m = np.asarray(mu, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        p = m * m
        split = m * 134217729.0  # 2^27 + 1
        hi = split - (split - m)
        lo = m - hi
        err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo
    return p, err


def _in_exact_range(mu: NDArray[np.float64]) -> NDArray[np.bool_]:
    return np.asarray((mu > 1e-137) & (mu < 1e150))


def _sqrt_start(x: Fraction) -> float:
    r""":math:`\sqrt x` within a few ulps for any rational ``x > 0`` (scaled by a power of 4 to
    near 1 first, so no underflow or overflow spoils the start)."""
    try:
        f = float(x)
    except OverflowError:
        f = math.inf
    if 1e-300 < f < 1e300:
        return math.sqrt(f)
    k = (x.denominator.bit_length() - x.numerator.bit_length()) // 2
    scaled = x * Fraction(4) ** k if k >= 0 else x / Fraction(4) ** -k
    return math.ldexp(math.sqrt(float(scaled)), -k)


def _sqrt_up_fraction(x: Fraction) -> float:
    if x < 0:
        raise InvalidParameterError("x", x, "must be >= 0")
    if x == 0:
        return 0.0
    f = _sqrt_start(x)
    while Fraction(f) ** 2 < x:
        f = next_up(f)
    while f > 0.0 and Fraction(next_down(f)) ** 2 >= x:
        f = next_down(f)
    return f


def _sqrt_up_array(q: NDArray[np.float64]) -> NDArray[np.float64]:
    m = np.sqrt(q)
    p, err = two_square(m)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = _in_exact_range(m)
        enough = exact & ((p - q) + err >= 0.0)
    # outside the range of Dekker's split (rare): decide in rational arithmetic
    flat_m, flat_q = np.reshape(m, -1), np.reshape(q, -1)
    flat_enough = np.array(enough, dtype=bool).reshape(-1)
    for i in np.flatnonzero(~np.reshape(exact, -1) & np.isfinite(flat_m) & (flat_q > 0.0)):
        flat_enough[i] = Fraction(float(flat_m[i])) ** 2 >= Fraction(float(flat_q[i]))
    enough = flat_enough.reshape(np.shape(m))
    up = np.where(enough, m, np.nextafter(m, np.inf))
    return np.asarray(np.where(q > 0.0, up, 0.0), dtype=np.float64)


@overload
def sqrt_up(q: float | Fraction) -> float: ...


@overload
def sqrt_up(q: NDArray[np.float64]) -> NDArray[np.float64]: ...


def sqrt_up(q: float | Fraction | NDArray[np.float64]) -> float | NDArray[np.float64]:
    r"""A double :math:`\ge \sqrt q` (elementwise; ``q >= 0``).

    For doubles: the correctly rounded ``sqrt``, one ulp up unless its square is provably
    :math:`\ge q` (Dekker's exact square, rational arithmetic outside its range), so at most one
    ulp above the exact root. For a :class:`~fractions.Fraction`: the smallest such double.
    """
    if isinstance(q, Fraction):
        return _sqrt_up_fraction(q)
    if isinstance(q, np.ndarray):
        return _sqrt_up_array(np.asarray(q, dtype=np.float64))
    x = float(q)
    if 1e-270 < x < 1e300:  # scalar fast path: Dekker's exact square in Python floats
        m = math.sqrt(x)
        p = m * m
        split = m * 134217729.0
        hi = split - (split - m)
        lo = m - hi
        err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo
        return m if (p - x) + err >= 0.0 else next_up(m)
    return float(_sqrt_up_array(np.asarray(x, dtype=np.float64))[()])


def sqrt_down(q: float | Fraction) -> float:
    r"""The largest double :math:`\le \sqrt q` (``q >= 0``)."""
    x = Fraction(q)
    if x < 0:
        raise InvalidParameterError("q", q, "must be >= 0")
    if x == 0:
        return 0.0
    f = _sqrt_start(x)
    while Fraction(f) ** 2 > x:
        f = next_down(f)
    while Fraction(next_up(f)) ** 2 <= x:
        f = next_up(f)
    return f


@overload
def square_down(mu: float) -> float: ...


@overload
def square_down(mu: NDArray[np.float64]) -> NDArray[np.float64]: ...


def square_down(mu: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
    r"""A double :math:`\le \mu^2` (elementwise): ``fl(mu²)``, one ulp down unless provably
    :math:`\le \mu^2`. An overflowing square gives the largest double."""
    if not isinstance(mu, np.ndarray):
        m = abs(float(mu))
        if 1e-137 < m < 1e150:  # scalar fast path: Dekker's exact square in Python floats
            sq = m * m
            split = m * 134217729.0
            hi = split - (split - m)
            lo = m - hi
            rest = ((hi * hi - sq) + 2.0 * hi * lo) + lo * lo
            return sq if rest >= 0.0 else math.nextafter(sq, 0.0)
    arr = np.asarray(mu, dtype=np.float64)
    p, err = two_square(arr)
    exact = _in_exact_range(np.abs(arr))
    exact_ok = exact & (err >= 0.0)
    # outside the range of Dekker's split (rare: mu below 1e-137, where mu² may be subnormal,
    # or above 1e150): decide fl(mu²) <= mu² in rational arithmetic
    flat_mu, flat_p = np.reshape(arr, -1), np.reshape(p, -1)
    flat_ok = np.array(exact_ok, dtype=bool).reshape(-1)
    for i in np.flatnonzero(~np.reshape(exact, -1) & np.isfinite(flat_p)):
        flat_ok[i] = Fraction(float(flat_p[i])) <= Fraction(float(flat_mu[i])) ** 2
    exact_ok = flat_ok.reshape(np.shape(arr))
    out = np.asarray(np.where(exact_ok, p, np.nextafter(p, 0.0)), dtype=np.float64)
    return out if isinstance(mu, np.ndarray) else float(out[()])


def div_sqrt_up(a: float, q: float) -> float:
    r"""The smallest double :math:`\sigma` with :math:`\sigma^2 q \ge a^2` exactly: :math:`a/\sqrt
    q` rounded up (``a >= 0``, ``q > 0``). With ``a`` a sensitivity and ``q`` a bound on
    :math:`(a/\sigma)^2`, it is the least noise scale that meets the bound."""
    if not q > 0.0:
        raise InvalidParameterError("q", q, "must be > 0")
    fa, fq = Fraction(a) ** 2, Fraction(q)

    def ok(s: float) -> bool:
        return Fraction(s) ** 2 * fq >= fa

    s = step_up_until(float(a) / math.sqrt(q), ok)
    while s > 0.0 and ok(next_down(s)):
        s = next_down(s)
    return s


def div_sqrt_down(a: float, q: float) -> float:
    r"""The largest double :math:`\sigma` with :math:`\sigma^2 q \le a^2` exactly: :math:`a/\sqrt
    q` rounded down (``a >= 0``, ``q > 0``)."""
    if not q > 0.0:
        raise InvalidParameterError("q", q, "must be > 0")
    fa, fq = Fraction(a) ** 2, Fraction(q)

    def ok(s: float) -> bool:
        return Fraction(s) ** 2 * fq <= fa

    s = step_down_until(float(a) / math.sqrt(q), ok)
    while ok(next_up(s)):
        s = next_up(s)
    return s


def add_up(a: float, b: float) -> float:
    r"""A double :math:`\ge a + b` (exact sum), at most one ulp above it.

    Knuth's two-sum gives the rounding error of ``a + b`` exactly; the sum is moved up only
    when it rounded down.
    """
    s = a + b
    if not math.isfinite(s):
        return s
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return next_up(s) if err > 0.0 else s


def sum_up(values: Iterable[float | Fraction]) -> float:
    """The smallest double >= the exact sum of ``values`` (rational arithmetic)."""
    return round_up(sum((Fraction(v) for v in values), Fraction(0)))


def _two_product_ok(q: NDArray[np.float64], b: NDArray[np.float64], a: NDArray[np.float64]
                    ) -> NDArray[np.bool_]:
    """``q * b >= a`` exactly, by Dekker's product split (valid where no part under/overflows)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        p = q * b
        sq, sb = q * 134217729.0, b * 134217729.0
        qh, bh = sq - (sq - q), sb - (sb - b)
        ql, bl = q - qh, b - bh
        err = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl
        return np.asarray((p - a) + err >= 0.0)  # p - a is exact (Sterbenz: p is within 2x of a)


@overload
def div_up(a: float, b: float) -> float: ...


@overload
def div_up(a: NDArray[np.float64], b: float | NDArray[np.float64]) -> NDArray[np.float64]: ...


def div_up(a: float | NDArray[np.float64], b: float | NDArray[np.float64]
           ) -> float | NDArray[np.float64]:
    r"""A double :math:`\ge a/b` exactly, at most one ulp above it (elementwise; ``a >= 0``,
    ``b > 0``; ``a = inf`` gives ``inf``).

    The correctly rounded quotient :math:`q = \mathrm{fl}(a/b)` is kept when :math:`q\,b \ge a`
    holds exactly (decided by Dekker's exact product where its split cannot under- or overflow,
    in rational arithmetic elsewhere) and moved up one ulp otherwise.
    """
    arr_a = np.asarray(a, dtype=np.float64)
    arr_b = np.broadcast_to(np.asarray(b, dtype=np.float64), arr_a.shape)
    if np.any(arr_a < 0.0) or np.any(np.isnan(arr_a)):
        raise InvalidParameterError("a", a, "must be >= 0 (no NaN)")
    if not (np.all(arr_b > 0.0) and np.all(np.isfinite(arr_b))):
        raise InvalidParameterError("b", b, "must be finite and > 0")
    with np.errstate(over="ignore", under="ignore"):
        q = arr_a / arr_b
    lo, hi = 1e-130, 1e130
    fast = (q > lo) & (q < hi) & (arr_b > lo) & (arr_b < hi)
    enough = np.asarray(fast & _two_product_ok(q, arr_b, arr_a), dtype=bool)
    flat_q, flat_a, flat_b = q.reshape(-1), arr_a.reshape(-1), arr_b.reshape(-1)
    flat_enough = enough.reshape(-1).copy()
    slow = ~fast.reshape(-1) & np.isfinite(flat_q) & (flat_a > 0.0)
    for i in np.flatnonzero(slow):
        flat_enough[i] = Fraction(float(flat_q[i])) * Fraction(float(flat_b[i])) >= Fraction(
            float(flat_a[i]))
    flat_enough |= (flat_a == 0.0) | ~np.isfinite(flat_q)
    out = np.where(flat_enough, flat_q, np.nextafter(flat_q, np.inf)).reshape(q.shape)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.asarray(out, dtype=np.float64)
    return float(out[()])
