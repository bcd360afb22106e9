"""Rounding margins that must not vanish at subnormal scale.

A relative allowance ``x (1 + k u)`` covers the rounding of a product only while the product is
a normal double; once it underflows the error is absolute (up to half of ``2^-1074``) and the
relative allowance is worth nothing. Each bound here is checked against the exact value
(:class:`fractions.Fraction`, or mpmath at 80 digits for ``log1p``/``expm1``) on inputs whose
products underflow and round to the unsafe side.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.coupling import log_value_upper
from certificates.covariance import _trace_upper
from certificates.rounding import next_down, next_up

TINY = 5e-324


def _exact_log1p(lc: np.ndarray, masses: list[Fraction]) -> mp.mpf:
    with mp.workdps(80):
        s = mp.fsum(mp.mpf(m.numerator) / m.denominator * mp.expm1(mp.mpf(c))
                    for m, c in zip(masses, lc.tolist(), strict=True))
        return mp.log1p(s)


def test_log_value_upper_with_underflowing_negative_terms() -> None:
    """Exact masses 1/2 and 100 x 1/200 (bracketed by one ulp); every negative product
    0.005 x 140 ulps underflows and rounds up (to 1 ulp from 0.7), so a relative-only shrink
    leaves s_neg 30 ulps too large, more than the 17 ulps added to the positive side, and the
    'upper bound' came out below the exact log(1 + S) = 2^-1075."""
    n = 100
    lc = np.array([141 * TINY] + [-140 * TINY] * n)
    up = np.array([0.5] + [next_up(0.005)] * n)
    down = np.array([0.5] + [next_down(0.005)] * n)
    masses = [Fraction(1, 2)] + [Fraction(1, 200)] * n
    assert sum(masses) == 1
    assert Fraction(down[1]) <= masses[1] <= Fraction(up[1])
    v = log_value_upper(lc, up, down)
    exact = _exact_log1p(lc, masses)
    with mp.workdps(80):
        assert mp.mpf(v) >= exact
        assert mp.mpf(v) <= exact + 1e-320  # and still near it (no big absolute floor)


@settings(max_examples=100, deadline=None)
@given(k=st.integers(min_value=1, max_value=300), cost=st.integers(min_value=1, max_value=4000),
       pos=st.integers(min_value=0, max_value=4000))
def test_log_value_upper_is_above_at_subnormal_costs(k: int, cost: int, pos: int) -> None:
    """Exact masses 1/2 and k x 1/(2k), costs a few thousand subnormal ulps either side of 0."""
    lc = np.array([pos * TINY] + [-cost * TINY] * k)
    share = Fraction(1, 2 * k)
    up = np.array([0.5] + [next_up(float(share))] * k)
    down = np.array([0.5] + [next_down(float(share))] * k)
    v = log_value_upper(lc, up, down)
    exact = _exact_log1p(lc, [Fraction(1, 2)] + [share] * k)
    with mp.workdps(80):
        assert mp.mpf(v) >= exact


def test_trace_upper_covers_products_that_underflow() -> None:
    """W = 0.4 I, Sigma = 3 ulps I (d = 10): each product 1.2 ulps rounds down to 1 ulp, so the
    float sum is 10 ulps and a relative error bound plus one ulp gives 11 < the exact 12."""
    d = 10
    w = 0.4 * np.eye(d)
    sigma = 3 * TINY * np.eye(d)
    exact = sum((Fraction(a) * Fraction(b) for a, b in zip(w.ravel(), sigma.ravel(),
                                                           strict=True)), Fraction(0))
    assert Fraction(_trace_upper(w, sigma)) >= exact


@settings(max_examples=100, deadline=None)
@given(d=st.integers(min_value=1, max_value=6), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1e-320, 1e-310, 1e-300, 1.0]))
def test_trace_upper_is_above_the_exact_trace(d: int, seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    w = a @ a.T
    b = rng.normal(size=(d, d))
    sigma = (b @ b.T) * scale
    exact = sum((Fraction(x) * Fraction(y) for x, y in zip(w.ravel(), sigma.ravel(),
                                                           strict=True)), Fraction(0))
    assert Fraction(_trace_upper(w, sigma)) >= exact
