"""Pure (alpha = inf) coupling certificates in proven arithmetic, checked in exact rationals.

Every claim here is about exact values ("the double is >= |x - y| / b"), so each test decides it
with :class:`fractions.Fraction` (every double is an exact rational) or, for a p-norm root, with
mpmath at 60 digits; the doubles are drawn across the range (offsets of 1e15, subnormals, values
near the overflow threshold).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from certificates.coupling import (
    check_pure_coupling,
    distance_upper,
    least_pure_scale,
    pure_value_upper,
)
from certificates.errors import InvalidParameterError
from certificates.rounding import div_up, next_down, next_up

POSITIVE = st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False, allow_infinity=False)
OFFSET = st.sampled_from([0.0, 1e12, 1.7e12, 1e15, 1.7e15, 8e15, 1e16, -1e16, 2.0**53 + 2.0])
SMALL = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
COORD = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(a=POSITIVE, b=POSITIVE)
def test_div_up_is_above_the_quotient_by_at_most_one_ulp(a: float, b: float) -> None:
    q = div_up(a, b)
    exact = Fraction(a) / Fraction(b)
    if math.isinf(q):
        assert exact > Fraction(np.finfo(np.float64).max)
        return
    assert Fraction(q) >= exact
    assert q == 0.0 or Fraction(next_down(next_down(q))) < exact


@settings(max_examples=50, deadline=None)
@given(a=st.lists(POSITIVE, min_size=1, max_size=6), b=POSITIVE)
def test_div_up_of_an_array_is_the_scalar_elementwise(a: list[float], b: float) -> None:
    assert div_up(np.array(a), b).tolist() == [div_up(v, b) for v in a]


def test_div_up_refuses_bad_operands() -> None:
    for a, b, name in ((-1.0, 1.0, "a"), (float("nan"), 1.0, "a"), (1.0, 0.0, "b"),
                       (1.0, float("inf"), "b")):
        with pytest.raises(InvalidParameterError, match=f"^{name}="):
            div_up(a, b)


def _exact_norm_sq_or_mp(diff: list[Fraction], p: float) -> mp.mpf:
    with mp.workdps(60):
        total = mp.fsum(abs(mp.mpf(d.numerator) / d.denominator) ** p for d in diff)
        return total ** (1 / mp.mpf(p))


@settings(max_examples=200, deadline=None)
@given(off=OFFSET, x=SMALL, y=SMALL)
def test_one_dimensional_distance_is_the_exact_difference_rounded_up(off: float, x: float,
                                                                     y: float) -> None:
    xs, ys = x + off, y + off  # doubles: the claim is about these values
    d = float(distance_upper([xs], [ys])[0])
    exact = abs(Fraction(xs) - Fraction(ys))
    assert (Fraction(d) >= exact and Fraction(next_down(d)) < exact) or (d == 0.0 == exact)


#: Two ulps at the bottom of the range: the tightness allowance a relative factor cannot give
#: at subnormal scale (the final step up of a rounded product is one whole subnormal ulp).
_SUBNORMAL_SLACK = 2 * 5e-324


@settings(max_examples=150, deadline=None)
@given(x=st.lists(COORD, min_size=2, max_size=4), y=st.lists(COORD, min_size=4, max_size=4),
       norm=st.sampled_from([1.0, 2.0, 3.0, math.inf]))
@example(x=[0.0, 5e-324], y=[0.0, 0.0, 0.0, 0.0], norm=2.0)  # found by hypothesis 6.170
@example(x=[1e-320, 0.0], y=[0.0, 0.0, 0.0, 0.0], norm=3.0)
@example(x=[1e-320, 0.0], y=[0.0, 0.0, 0.0, 0.0], norm=1.0)
def test_vector_distances_are_proven_from_above(x: list[float], y: list[float],
                                                norm: float) -> None:
    """Sound (exactly) and tight to a relative 1e-12 plus two subnormal ulps."""
    y = y[: len(x)]
    d = float(distance_upper(np.array([x]), np.array([y]), norm)[0])
    diff = [Fraction(a) - Fraction(b) for a, b in zip(x, y, strict=True)]
    if norm == 1.0:
        exact: Fraction | mp.mpf = sum((abs(v) for v in diff), Fraction(0))
    elif math.isinf(norm):
        exact = max(abs(v) for v in diff)
    elif norm == 2.0:
        assert Fraction(d) ** 2 >= sum((v * v for v in diff), Fraction(0))
        exact = _exact_norm_sq_or_mp(diff, 2.0)
    else:
        exact = _exact_norm_sq_or_mp(diff, norm)
    if isinstance(exact, Fraction):
        if math.isinf(d):
            assert exact > Fraction(np.finfo(np.float64).max) / 2
            return
        assert Fraction(d) >= exact
        assert (Fraction(d) <= exact * (1 + Fraction(1, 10**13)) + Fraction(_SUBNORMAL_SLACK)
                or exact == 0)
    else:
        with mp.workdps(60):
            assert math.isinf(d) or mp.mpf(d) >= exact
            assert math.isinf(d) or mp.mpf(d) <= (exact * (1 + mp.mpf(1e-12))
                                                  + mp.mpf(_SUBNORMAL_SLACK))


def test_tiny_differences_do_not_vanish() -> None:
    """A shift of 1e-170 in 2-D has norm 1e-170 (a naive sqrt of squares gives 0: no noise)."""
    d = distance_upper(np.array([[1e-170, 1e-170]]), np.zeros((1, 2)), 2.0)
    assert Fraction(float(d[0])) ** 2 >= 2 * Fraction(1e-170) ** 2
    assert float(distance_upper([5e-324], [0.0])[0]) == 5e-324


@settings(max_examples=200, deadline=None)
@given(w=POSITIVE, eps=st.floats(min_value=1e-6, max_value=1e3),
       pen=st.sampled_from([0.0, 1e-17, 3e-12, 1e-7]))
def test_least_pure_scale_is_proven_and_near_least(w: float, eps: float, pen: float) -> None:
    exact_min = Fraction(w) / (Fraction(eps) - Fraction(pen))
    if exact_min > Fraction(np.finfo(np.float64).max):
        with pytest.raises(InvalidParameterError, match=r"^epsilon="):
            least_pure_scale(w, eps, pen)
        return
    b = least_pure_scale(w, eps, pen)
    assert Fraction(w) / Fraction(b) + Fraction(pen) <= Fraction(eps)  # the privacy claim
    assert pure_value_upper(w, b, pen) <= eps  # what the certificate recomputes
    assert Fraction(b) <= exact_min * (1 + Fraction(8, 2**53)) + 8 * Fraction(5e-324)
    if pen == 0.0:  # then it is the least double with w / b <= eps, a closed form
        lo = float(exact_min)
        lo = lo if Fraction(lo) >= exact_min else next_up(lo)
        assert b == lo


def test_least_pure_scale_refusals() -> None:
    assert least_pure_scale(0.0, 1.0) == 0.0
    with pytest.raises(InvalidParameterError, match=r"^distance=inf.*overflow"):
        least_pure_scale(math.inf, 1.0)
    with pytest.raises(InvalidParameterError, match=r"^epsilon=.*penalty"):
        least_pure_scale(1.0, 1e-3, 1e-3)
    with pytest.raises(InvalidParameterError, match=r"^epsilon=.*overflows"):
        least_pure_scale(1e300, 1e-10)


@pytest.mark.parametrize("off", [0.0, 1e12, 1.7e12, 1.7e15, 8e15, 1e16, -1e16, 1e300])
@pytest.mark.parametrize("gap", [1.0, 3.0, 1e-3, 12.0])
def test_point_masses_at_offsets_certify_exactly_the_least_scale(off: float, gap: float) -> None:
    x, y = off + gap * max(1.0, 4096.0 * math.ulp(off)), off  # a gap the offset cannot swallow
    w = abs(Fraction(x) - Fraction(y))  # the doubles' true difference
    assert w > 0
    for eps in (1.0, 0.3, 7.0):
        b = least_pure_scale(float(distance_upper([x], [y])[0]), eps)
        assert w <= Fraction(b) * Fraction(eps)
        cert = check_pure_coupling([1.0], [1.0], [x], [y], [0], [0], [1.0], b, eps)
        assert cert.certified and Fraction(cert.log_value) >= w / Fraction(b)
        below = next_down(b)
        if w > Fraction(below) * Fraction(eps):  # a false claim: must not be certified
            bad = check_pure_coupling([1.0], [1.0], [x], [y], [0], [0], [1.0], below, eps)
            assert not bad.certified


def test_tampered_plans_are_rejected() -> None:
    """Plans edited after the fact: mass moved to a far pair, a non-coupling, a lowered scale."""
    off = 1.7e15
    x, y = [off, off + 1.0], [off + 1.0, off + 2.0]
    p = q = [0.5, 0.5]
    b = least_pure_scale(1.0, 1.0)
    good = check_pure_coupling(p, q, x, y, [0, 1], [0, 1], [0.5, 0.5], b, 1.0)
    assert good.certified and good.log_value == 1.0
    far = check_pure_coupling(p, q, x, y, [0, 1], [1, 0], [0.5, 0.5], b, 1.0)  # |x0 - y1| = 2
    assert not far.certified and far.log_value == 2.0
    short = check_pure_coupling(p, q, x, y, [0], [0], [0.5], b, 1.0)
    assert not short.certified and "not a coupling" in short.message
    assert not check_pure_coupling(p, q, x, y, [0, 1], [0, 1], [0.5, 0.5], next_down(b),
                                   1.0).certified
    assert not check_pure_coupling(p, q, x, y, [0, 1], [0, 1], [0.5, 0.5], 0.0, 1.0).certified
    same = check_pure_coupling([1.0], [1.0], [off], [off], [0], [0], [1.0], 0.0, 1.0)
    assert same.certified and same.log_value == 0.0
