"""Input cleaning used at every public boundary (one place, as in scipy.optimize)."""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import NDArray

from certificates.errors import InvalidParameterError, InvalidTypeError

__all__ = [
    "as_float_array",
    "as_int",
    "as_matrix",
    "as_psd_matrix",
    "as_scalar",
    "as_vectors",
]


def as_scalar(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = True,
    high_open: bool = True,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a Python float, checking it is a real number inside a range.

    Raises
    ------
    InvalidTypeError
        If ``value`` is not a real number (bools are rejected).
    InvalidParameterError
        If it is NaN, infinite (unless ``allow_inf``) or outside the range.
    """
    if type(value) is float and _plain_in_range(value, low, high, low_open, high_open,
                                                allow_inf):
        return value  # the common case, without the numpy checks below (same verdict)
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.number):
        arr = np.asarray(value) if isinstance(value, np.ndarray) else None
        if arr is not None and arr.ndim == 0 and np.issubdtype(arr.dtype, np.number):
            item = arr.item()
            value = item  # the Python number is what the errors below echo
            x = float(item)
        else:
            raise InvalidTypeError(name, value, "a real number")
    else:
        x = float(value)
    if np.isnan(x):
        raise InvalidParameterError(name, value, "must not be NaN")
    if np.isinf(x) and not allow_inf:
        raise InvalidParameterError(name, value, "must be finite")
    _check_range(name, value, np.asarray(x), low, high, low_open, high_open)
    return x


def _plain_in_range(x: float, low: float | None, high: float | None, low_open: bool,
                    high_open: bool, allow_inf: bool) -> bool:
    """Whether a Python float passes every check of :func:`as_scalar` (False also for NaN,
    whose comparisons all fail); :func:`as_scalar` then takes its general path and names the
    failure."""
    if not (allow_inf or -math.inf < x < math.inf) or x != x:
        return False
    if low is not None and not (x > low if low_open else x >= low):
        return False
    return high is None or (x < high if high_open else x <= high)


def as_int(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as a Python int, checking it is an integer in ``[low, high]``.

    Python and numpy integers are accepted; bools, floats (also ``2.0``) and strings are not.

    Raises
    ------
    InvalidTypeError
        If ``value`` is not an integer.
    InvalidParameterError
        If it is below ``low`` or above ``high``.

    Examples
    --------
    >>> as_int("steps", np.int64(3), low=1)
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        raise InvalidTypeError(name, value, "an integer")
    n = int(value)
    if low is not None and n < low:
        raise InvalidParameterError(name, value, f"must be >= {low}")
    if high is not None and n > high:
        raise InvalidParameterError(name, value, f"must be <= {high}")
    return n


def _check_range(
    name: str,
    original: object,
    x: NDArray[np.float64],
    low: float | None,
    high: float | None,
    low_open: bool,
    high_open: bool,
) -> None:
    if low is not None:
        bad = x <= low if low_open else x < low
        if np.any(bad):
            op = ">" if low_open else ">="
            raise InvalidParameterError(name, original, f"must be {op} {low:g}")
    if high is not None:
        bad = x >= high if high_open else x > high
        if np.any(bad):
            op = "<" if high_open else "<="
            raise InvalidParameterError(name, original, f"must be {op} {high:g}")


def as_float_array(
    name: str,
    value: object,
    *,
    ndim: int | None = None,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = True,
    high_open: bool = True,
    allow_inf: bool = False,
    allow_empty: bool = False,
) -> NDArray[np.float64]:
    """Return ``value`` as a float64 array, checking dtype, dimension, finiteness and range."""
    if isinstance(value, str | bytes) or value is None:
        raise InvalidTypeError(name, value, "an array of real numbers")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged lists
        raise InvalidParameterError(name, value, f"is not a rectangular array ({exc})") from None
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise InvalidTypeError(name, value, "an array of real numbers")
    arr = arr.astype(np.float64, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise InvalidParameterError(
            name, value, f"must have {ndim} dimension(s), got shape {arr.shape}"
        )
    if arr.size == 0 and not allow_empty:
        raise InvalidParameterError(name, value, "must not be empty")
    if np.isnan(arr).any():
        raise InvalidParameterError(name, value, "must not contain NaN")
    if not allow_inf and np.isinf(arr).any():
        raise InvalidParameterError(name, value, "must be finite")
    _check_range(name, value, arr, low, high, low_open, high_open)
    return arr


def as_vectors(name: str, value: object, *, dim: int | None = None) -> NDArray[np.float64]:
    """Return a (J, d) float array of finite vectors (a 1-D input is one vector)."""
    arr = as_float_array(name, value)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise InvalidParameterError(name, value, f"must be a (J, d) array, got shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise InvalidParameterError(
            name, value, f"must have {dim} columns to match the dimension, got {arr.shape[1]}"
        )
    return arr


def as_matrix(name: str, value: object, *, dim: int | None = None) -> NDArray[np.float64]:
    """Return a finite square (d, d) matrix, symmetric to relative tolerance 1e-10 (symmetrized)."""
    arr = as_float_array(name, value, ndim=2)
    if arr.shape[0] != arr.shape[1]:
        raise InvalidParameterError(name, value, f"must be square, got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise InvalidParameterError(name, value, f"must be {dim} x {dim}, got shape {arr.shape}")
    scale = max(float(np.max(np.abs(arr))), 1e-300)
    if np.max(np.abs(arr - arr.T)) > 1e-10 * scale:
        raise InvalidParameterError(name, value, "must be symmetric")
    return 0.5 * (arr + arr.T)


def as_psd_matrix(
    name: str, value: object, *, dim: int | None = None, strict: bool = True
) -> NDArray[np.float64]:
    """Return a symmetric matrix that is positive definite (``strict``) or semidefinite."""
    arr = as_matrix(name, value, dim=dim)
    eig = np.linalg.eigvalsh(arr)
    scale = max(float(np.max(np.abs(eig))), 1e-300)
    if strict and eig[0] <= 1e-14 * scale:
        raise InvalidParameterError(
            name, value, f"must be positive definite (smallest eigenvalue {eig[0]:.3g})"
        )
    if not strict and eig[0] < -1e-12 * scale:
        raise InvalidParameterError(
            name, value, f"must be positive semidefinite (smallest eigenvalue {eig[0]:.3g})"
        )
    return arr
