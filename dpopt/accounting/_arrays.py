"""Small array helpers shared by :mod:`dpopt.accounting.renyi`, :mod:`dpopt.accounting.gdp` and
:mod:`dpopt.accounting.budgets`.

Private: input cleaning goes through :mod:`certificates.validate`; this module only adds
broadcasting (with an error that names the parameters) and the scalar-in/scalar-out convention.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from certificates.validate import as_float_array
from dpopt.errors import InvalidParameterError

__all__ = ["FloatOrArray", "broadcast", "finish", "real_array"]

#: Return type of the vectorised functions: a Python ``float`` for scalar input, else an array.
FloatOrArray = float | NDArray[np.float64]


def real_array(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = True,
    high_open: bool = True,
    allow_inf: bool = False,
) -> NDArray[np.float64]:
    """Clean ``value`` into a float64 array (any shape, 0-d allowed) with a range check."""
    return as_float_array(
        name,
        value,
        low=low,
        high=high,
        low_open=low_open,
        high_open=high_open,
        allow_inf=allow_inf,
    )


def broadcast(**arrays: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """Broadcast named arrays against each other; a shape mismatch names every parameter."""
    try:
        return [np.asarray(a, dtype=np.float64) for a in np.broadcast_arrays(*arrays.values())]
    except ValueError:
        shapes = {k: np.shape(v) for k, v in arrays.items()}
        raise InvalidParameterError(
            ", ".join(arrays), shapes, "shapes cannot be broadcast together"
        ) from None


def finish(x: NDArray[np.float64] | float) -> FloatOrArray:
    """Return a Python float for 0-d results and a float64 array otherwise."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        return float(arr)
    return arr
