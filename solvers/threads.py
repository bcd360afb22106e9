"""The one owner of BLAS thread limits (``threadpoolctl``).

dpopt's hot loops are many small dense operations (the structured solver's Newton systems, the
sampler's per-step solves, the accountants' one-dimensional dot products). A multi-threaded BLAS
buys nothing there: its worker threads wake for each call and then spin, which costs CPU time
(measured: a third of an accounting call's CPU) without shortening the wall time. Every place that
limits the BLAS threads enters :func:`blas_limits`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import wraps
from typing import Any, TypeVar

from threadpoolctl import ThreadpoolController

__all__ = ["blas_limits", "single_blas_thread"]

_F = TypeVar("_F", bound=Callable[..., Any])
#: (how many modules were loaded, the controller of the BLAS libraries loaded then)
_CONTROLLER: list[tuple[int, ThreadpoolController]] = []


def blas_limits(threads: int) -> AbstractContextManager[object]:
    """A context limiting the BLAS thread pools to ``threads`` (restored on exit).

    The loaded BLAS libraries are found again only when modules were imported since the last
    look (reading the process's memory map costs about 0.7 ms, more than a whole small solve):
    entering the context then costs microseconds. Batches enter it once for all their solves."""
    # a library loaded since (scipy brings its own BLAS) comes with new modules: look again then
    if not _CONTROLLER or _CONTROLLER[0][0] != len(sys.modules):
        _CONTROLLER[:] = [(len(sys.modules), ThreadpoolController())]
    limiter: AbstractContextManager[object] = _CONTROLLER[0][1].limit(limits=threads,
                                                                      user_api="blas")
    return limiter


def single_blas_thread(fn: _F) -> _F:
    """Run ``fn`` with one BLAS thread (:func:`blas_limits`); the caller's setting is restored."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with blas_limits(1):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
