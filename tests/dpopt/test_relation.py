"""dpopt.relation: one enum, one spelling, the x4 rule on the safe side."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import (
    NeighbouringRelation,
    add_remove_bound,
    as_relation,
    replacement_sup,
)


def test_accepted_spellings() -> None:
    assert as_relation("add_remove") is NeighbouringRelation.ADD_REMOVE
    assert as_relation("replacement") is NeighbouringRelation.REPLACEMENT
    assert as_relation(NeighbouringRelation.REPLACEMENT) is NeighbouringRelation.REPLACEMENT


@pytest.mark.parametrize(
    "old", ["add-remove", "replace", "add/remove", "Replacement", "ADD_REMOVE"]
)
def test_old_spellings_rejected_with_the_accepted_ones_named(old: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        as_relation(old)
    msg = str(info.value)
    assert old in msg and "'add_remove'" in msg and "'replacement'" in msg


def test_wrong_type() -> None:
    with pytest.raises(InvalidTypeError):
        as_relation(4)  # type: ignore[arg-type]


@given(st.floats(min_value=0.0, max_value=1e300, allow_nan=False))
def test_replacement_sup_never_below_four_times(rho: float) -> None:
    up = replacement_sup(rho, "replacement")
    assert Fraction(up) >= 4 * Fraction(rho)
    assert replacement_sup(rho, "add_remove") == rho


@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False))
def test_add_remove_bound_never_above_a_quarter(q: float) -> None:
    b = add_remove_bound(q, "replacement")
    assert 0 < b and 4 * Fraction(b) <= Fraction(q)
    # the two directions agree: a set meeting b under add/remove meets q under replacement
    assert replacement_sup(b, "replacement") <= q or math.isclose(
        replacement_sup(b, "replacement"), q, rel_tol=1e-15
    )
    assert add_remove_bound(q, "add_remove") == q


def test_bad_bounds() -> None:
    with pytest.raises(InvalidParameterError):
        add_remove_bound(0.0, "replacement")
    with pytest.raises(InvalidParameterError):
        add_remove_bound(5e-324, "replacement")
    with pytest.raises(InvalidParameterError):
        replacement_sup(float("nan"), "replacement")
