"""The account and calibrate commands' numeric option types (``dpopt.cli.account``).

Each parser reads one command-line number and checks its range; a refusal is an argparse type
error (argparse turns it into a usage message naming the option), never a Python exception.
The expected values and messages are written out here by hand.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import pytest

from dpopt.cli import account

ACCEPT: list[tuple[Callable[[str], float], str, float]] = [
    (account._positive, "2.5", 2.5), (account._positive, "1e-300", 1e-300),
    (account._nonneg, "0", 0.0), (account._nonneg, "3", 3.0),
    (account._whole, "7", 7), (account._whole, "1e3", 1000),
    (account._rate, "1", 1.0), (account._rate, "0.25", 0.25),
    (account._probability, "0.5", 0.5),
]
REFUSE: list[tuple[Callable[[str], float], str, str]] = [
    (account._positive, "abc", "not a number: 'abc'"),
    (account._positive, "0", "must be a finite number > 0, got 0"),
    (account._positive, "inf", "must be a finite number > 0, got inf"),
    (account._positive, "nan", "must be a finite number > 0, got nan"),
    (account._nonneg, "-1", "must be a finite number >= 0, got -1"),
    (account._nonneg, "x1", "not a number: 'x1'"),
    (account._whole, "2.5", "must be a whole number >= 1, got 2.5"),
    (account._whole, "0", "must be a whole number >= 1, got 0"),
    (account._whole, "inf", "must be a whole number >= 1, got inf"),
    (account._whole, "", "not a number: ''"),
    (account._rate, "1.5", "must be in (0, 1], got 1.5"),
    (account._probability, "1", "must be in (0, 1), got 1"),
]


@pytest.mark.parametrize("parse, text, value", ACCEPT)
def test_numbers_in_range_are_read(parse: Callable[[str], float], text: str,
                                   value: float) -> None:
    got = parse(text)
    assert got == value and type(got) is type(value) and math.isfinite(got)


@pytest.mark.parametrize("parse, text, message", REFUSE)
def test_numbers_out_of_range_or_not_numbers_are_refused(parse: Callable[[str], float],
                                                         text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    assert str(info.value) == message
