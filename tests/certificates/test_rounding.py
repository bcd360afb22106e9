"""Directed rounding and the integer validator, checked in exact rational arithmetic.

Every claim of :mod:`certificates.rounding` is a statement about exact values ("a double >= the
exact root, and the next double below is not"), so each test decides it with
:class:`fractions.Fraction` (every double is an exact rational), over doubles drawn across the
whole range (subnormals and values near the overflow threshold included).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.rounding import (
    add_up,
    div_sqrt_down,
    div_sqrt_up,
    next_down,
    next_up,
    round_down,
    round_up,
    sqrt_down,
    sqrt_up,
    square_down,
    step_down_until,
    step_up_until,
    sum_up,
    two_square,
)
from certificates.validate import as_int

POSITIVE = st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False, allow_infinity=False)
FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
RATIONAL = st.fractions(min_value=Fraction(1, 10**300), max_value=Fraction(10**300))


@settings(max_examples=100, deadline=None)
@given(q=POSITIVE)
def test_sqrt_up_is_above_the_root_by_at_most_one_ulp(q: float) -> None:
    r = sqrt_up(q)
    assert Fraction(r) ** 2 >= Fraction(q)
    assert Fraction(next_down(next_down(r))) ** 2 < Fraction(q)


@settings(max_examples=100, deadline=None)
@given(q=st.lists(POSITIVE, min_size=1, max_size=8))
def test_sqrt_up_of_an_array_is_the_scalar_elementwise(q: list[float]) -> None:
    arr = sqrt_up(np.array(q))
    assert arr.shape == (len(q),)
    assert [float(v) for v in arr] == [sqrt_up(v) for v in q]


@settings(max_examples=200, deadline=None)
@given(x=RATIONAL)
def test_sqrt_of_a_fraction_is_the_tightest_double_on_each_side(x: Fraction) -> None:
    up, down = sqrt_up(x), sqrt_down(x)
    assert Fraction(up) ** 2 >= x > Fraction(next_down(up)) ** 2
    assert Fraction(down) ** 2 <= x < Fraction(next_up(down)) ** 2


def test_sqrt_at_exact_squares_and_zero() -> None:
    assert sqrt_up(4.0) == 2.0 and sqrt_down(Fraction(9, 4)) == 1.5
    assert sqrt_up(0.0) == 0.0 and sqrt_up(Fraction(0)) == 0.0
    with pytest.raises(InvalidParameterError, match="x"):
        sqrt_up(Fraction(-1))


@settings(max_examples=100, deadline=None)
@given(mu=POSITIVE)
def test_square_down_is_the_largest_double_below_the_square(mu: float) -> None:
    q = square_down(mu)
    exact = Fraction(mu) ** 2
    assert Fraction(q) <= exact
    if q < sys.float_info.max:
        assert Fraction(next_up(q)) > exact or Fraction(next_up(next_up(q))) > exact


def test_square_down_of_an_overflowing_square_is_the_largest_double() -> None:
    assert square_down(1e200) == sys.float_info.max
    np.testing.assert_array_equal(square_down(np.array([0.0, 3.0])), [0.0, 9.0])


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(min_value=1e-130, max_value=1e140))
def test_two_square_is_error_free(mu: float) -> None:
    p, e = two_square(mu)
    assert Fraction(float(p)) + Fraction(float(e)) == Fraction(mu) ** 2


@settings(max_examples=100, deadline=None)
@given(a=st.floats(min_value=0.0, max_value=1e150), q=st.floats(min_value=1e-150, max_value=1e150))
def test_div_sqrt_up_is_the_least_scale_meeting_the_bound(a: float, q: float) -> None:
    s = div_sqrt_up(a, q)
    assert Fraction(s) ** 2 * Fraction(q) >= Fraction(a) ** 2
    if s > 0.0:
        assert Fraction(next_down(s)) ** 2 * Fraction(q) < Fraction(a) ** 2


def test_div_sqrt_up_refuses_a_zero_bound() -> None:
    with pytest.raises(InvalidParameterError, match="q"):
        div_sqrt_up(1.0, 0.0)


@settings(max_examples=200, deadline=None)
@given(a=FINITE, b=FINITE)
def test_add_up_is_the_least_double_above_the_sum(a: float, b: float) -> None:
    s = add_up(a, b)
    exact = Fraction(a) + Fraction(b)
    assert Fraction(s) >= exact > Fraction(next_down(s))


@settings(max_examples=100, deadline=None)
@given(values=st.lists(FINITE, max_size=20))
def test_sum_up_is_the_rounded_up_exact_sum(values: list[float]) -> None:
    exact = sum((Fraction(v) for v in values), Fraction(0))
    s = sum_up(values)
    assert Fraction(s) >= exact > Fraction(next_down(s))


@settings(max_examples=200, deadline=None)
@given(x=st.fractions(min_value=-10**300, max_value=10**300))
def test_round_up_and_down_bracket_a_rational(x: Fraction) -> None:
    up, down = round_up(x), round_down(x)
    assert Fraction(down) <= x <= Fraction(up)
    assert up == down or up == next_up(down)


def test_step_until_stops_at_the_first_double_that_passes() -> None:
    target = Fraction(1, 3)
    up = step_up_until(0.3333333333333333, lambda v: Fraction(v) >= target)
    assert up == round_up(target)
    assert step_down_until(1.0, lambda v: v <= 1.0) == 1.0
    with pytest.raises(InvalidParameterError, match="ulps"):
        step_up_until(0.0, lambda v: v >= 1.0, limit=10)
    assert math.isclose(step_down_until(1.0, lambda v: v < 1.0), next_down(1.0))


# ----------------------------------------------------------------------------- as_int


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3)])
def test_as_int_accepts_python_and_numpy_integers(value: object) -> None:
    out = as_int("n", value, low=1, high=3)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, 3.0, "3", None, np.float64(3.0)])
def test_as_int_rejects_what_is_not_an_integer(value: object) -> None:
    with pytest.raises(InvalidTypeError, match="n"):
        as_int("n", value)


def test_as_int_names_the_bound_it_breaks() -> None:
    with pytest.raises(InvalidParameterError, match=">= 1"):
        as_int("steps", 0, low=1)
    with pytest.raises(InvalidParameterError, match="<= 5"):
        as_int("steps", 6, high=5)


@pytest.mark.parametrize("x", [Fraction(2, 10**600), Fraction(3, 10**650), Fraction(10**600),
                               Fraction(1, 3)])
def test_sqrt_of_a_fraction_far_outside_the_double_range_of_its_square(x: Fraction) -> None:
    up, down = sqrt_up(x), sqrt_down(x)
    assert Fraction(up) ** 2 >= x > Fraction(next_down(up)) ** 2
    assert Fraction(down) ** 2 <= x < Fraction(next_up(down)) ** 2


@settings(max_examples=100, deadline=None)
@given(mu=st.lists(POSITIVE, min_size=1, max_size=8))
def test_square_down_scalar_fast_path_is_the_array_path(mu: list[float]) -> None:
    arr = square_down(np.array(mu))
    assert [float(v) for v in arr] == [square_down(v) for v in mu]


@settings(max_examples=100, deadline=None)
@given(a=st.floats(min_value=1e-150, max_value=1e150),
       q=st.floats(min_value=1e-150, max_value=1e150))
def test_div_sqrt_down_is_the_greatest_scale_below(a: float, q: float) -> None:
    s = div_sqrt_down(a, q)
    assert Fraction(s) ** 2 * Fraction(q) <= Fraction(a) ** 2
    assert Fraction(next_up(s)) ** 2 * Fraction(q) > Fraction(a) ** 2
    assert s <= div_sqrt_up(a, q)
