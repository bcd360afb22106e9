"""The bracket-then-solve helper against closed-form roots (no solver, no dpopt)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.errors import SolverError
from certificates.roots import BracketError, bracket_increasing, solve_increasing


@settings(max_examples=200, deadline=None)
@given(root=st.floats(-1e6, 1e6), x0=st.floats(-1e6, 1e6), step=st.floats(1e-3, 10.0))
def test_bracket_contains_the_root_of_a_line(root: float, x0: float, step: float) -> None:
    calls = []

    def f(x: float) -> float:
        calls.append(x)
        return x - root

    lo, hi = bracket_increasing(f, x0, step=step)
    assert f(lo) <= 0.0 < f(hi) and lo < hi
    # geometric steps: evaluations logarithmic in the distance to the root
    assert len(calls) <= 4 + math.log2(2.0 + abs(root - x0) / step)


@pytest.mark.parametrize("root", [1e-30, 0.5, 3.0, 1e12])
def test_solve_matches_the_closed_form_root_in_log_scale(root: float) -> None:
    x = solve_increasing(lambda v: v - math.log(root), 0.0, xtol=1e-13)
    assert x == pytest.approx(math.log(root), abs=1e-12)


def test_limits_raise_a_named_solver_error() -> None:
    with pytest.raises(BracketError) as info:
        bracket_increasing(lambda x: -1.0, 0.0, high=10.0)
    assert info.value.side == "high" and info.value.at == 10.0
    assert isinstance(info.value, SolverError)
    with pytest.raises(BracketError) as low:
        bracket_increasing(lambda x: 1.0, 0.0, low=-5.0)
    assert low.value.side == "low"
    with pytest.raises(BracketError):
        bracket_increasing(lambda x: -1.0, 0.0, max_steps=5)


def test_constant_steps_when_grow_is_one() -> None:
    seen: list[float] = []

    def f(x: float) -> float:
        seen.append(x)
        return x + 3.5

    lo, hi = bracket_increasing(f, 0.0, step=1.0, grow=1.0)
    assert (lo, hi) == (-4.0, -3.0) and seen == [0.0, -1.0, -2.0, -3.0, -4.0]
