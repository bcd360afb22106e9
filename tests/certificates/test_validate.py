"""certificates.validate.as_scalar: the plain-float fast path gives the general path's verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.errors import InvalidParameterError
from certificates.validate import as_scalar

_EDGES = [0.0, -0.0, 1.0, -1.0, 1e-300, 5e-324, 1e308, math.inf, -math.inf, math.nan]


def _general(value: float, **kw: object) -> float | str:
    """The verdict of the general path: a numpy float64 never takes the fast path."""
    try:
        return as_scalar("x", np.float64(value), **kw)  # type: ignore[arg-type]
    except InvalidParameterError as exc:
        return exc.requirement


def _fast(value: float, **kw: object) -> float | str:
    try:
        return as_scalar("x", value, **kw)  # type: ignore[arg-type]
    except InvalidParameterError as exc:
        return exc.requirement


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(_EDGES)),
       low=st.one_of(st.none(), st.sampled_from([0.0, -1.0, 1.0, 1e-300])),
       high=st.one_of(st.none(), st.sampled_from([1.0, 0.0, 1e300])),
       low_open=st.booleans(), high_open=st.booleans(), allow_inf=st.booleans())
def test_the_fast_path_agrees_with_the_general_one(value: float, low: float | None,
                                                   high: float | None, low_open: bool,
                                                   high_open: bool, allow_inf: bool) -> None:
    kw = {"low": low, "high": high, "low_open": low_open, "high_open": high_open,
          "allow_inf": allow_inf}
    fast, general = _fast(value, **kw), _general(value, **kw)
    if isinstance(general, float):
        assert isinstance(fast, float) and (fast == general or math.isnan(general))
    else:
        assert fast == general  # the same failure, named the same way


def test_failures_still_name_the_parameter() -> None:
    with pytest.raises(InvalidParameterError, match="must not be NaN"):
        as_scalar("tol", math.nan)
    with pytest.raises(InvalidParameterError, match=r"tol.*must be > 0"):
        as_scalar("tol", 0.0, low=0.0)
    with pytest.raises(InvalidParameterError, match="must be finite"):
        as_scalar("tol", math.inf)
    assert as_scalar("tol", math.inf, allow_inf=True) == math.inf
