"""Canonical covariance problems with known optima (closed forms, docs/theory.md).

Reused by every covariance backend's tests (cvxpy forms, the structured solver, ...)::

    from tests.canonical import CANONICAL
    for case in CANONICAL:
        sol = my_solver(case.problem())
        assert abs(sol.value - case.value) <= 1e-6 * case.value

Each :class:`CanonicalCase` holds the data, the exact optimal value and, where it is unique, the
optimal covariance and the reduced-dual weights mu*.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certificates.problem import CovarianceProgram

__all__ = ["CANONICAL", "F1", "F1_HALF", "F2", "F3", "F4_RANKDEF", "CanonicalCase",
           "ChunkedArray"]


@dataclass(frozen=True)
class CanonicalCase:
    """A covariance program with its known optimum."""

    name: str
    vectors: NDArray[np.float64]
    weight: NDArray[np.float64]
    bound: float
    value: float
    covariance: NDArray[np.float64] | None = None
    mu: NDArray[np.float64] | None = None
    noise_floor: float = 0.0

    def problem(self) -> CovarianceProgram:
        return CovarianceProgram(self.vectors, self.weight, self.bound, self.noise_floor)


_CUBE = np.array([[1.0, 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
_W1 = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 0.5]])
_V1 = (np.sqrt(2.0) + 1.0 + np.sqrt(0.5)) ** 2
_S1 = np.diag([2.20710678118654752, 3.12132034355964257, 4.41421356237309505])

#: F1: uniform-query cube in d = 3, q = 1: v = (sqrt2 + 1 + sqrt.5)^2.
F1 = CanonicalCase(
    "F1", _CUBE, _W1, 1.0, _V1, _S1,
    np.array([0.40909903, 0.26767767, 0.09090097, 0.23232233]),
)
#: F1 with q = 0.5: value and covariance double.
F1_HALF = CanonicalCase("F1_half", _CUBE, _W1, 0.5, 2 * _V1, 2 * _S1)
#: F2: W = I, s_j = e_j, q = 2: v = 1.5, Sigma* = I/2.
F2 = CanonicalCase("F2", np.eye(3), np.eye(3), 2.0, 1.5, 0.5 * np.eye(3), np.full(3, 1 / 3))
#: F3: W = diag(1, 4, 9), s_j = e_j, q = 2: v = 7 = tr(W)/q, Sigma* = I/2, mu* = (1, 4, 9)/14.
F3 = CanonicalCase(
    "F3", np.eye(3), np.diag([1.0, 4.0, 9.0]), 2.0, 7.0,
    0.5 * np.eye(3), np.array([1.0, 4.0, 9.0]) / 14,
)
# Rank-deficient: the d = 2 uniform-query square (1, +-1) embedded in R^3 with a W
# that couples the span and its complement; q = 2. In the span W_r = [[2, .5], [.5, 1]] and the
# cube formula is exact for d = 2: v = (sqrt2 + 1)^2 / q, Sigma* = diag(sum_k sqrt W_kk /
# (q sqrt W_ii)) on the span and 0 on e_3.
_R2 = np.sqrt(2.0)
F4_RANKDEF = CanonicalCase(
    "F4_rankdef",
    np.array([[1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]),
    np.array([[2.0, 0.5, 0.3], [0.5, 1.0, 0.2], [0.3, 0.2, 0.5]]),
    2.0,
    (_R2 + 1.0) ** 2 / 2.0,
    np.diag([(_R2 + 1.0) / (2.0 * _R2), (_R2 + 1.0) / 2.0, 0.0]),
)

#: The canonical set every backend must solve.
CANONICAL: tuple[CanonicalCase, ...] = (F1, F1_HALF, F2, F3, F4_RANKDEF)


class ChunkedArray:
    """A :class:`~certificates.problem.VectorSource` over an array that yields tiny chunks
    (``chunk`` vectors each, whatever size is asked for): the chunked passes of the solvers and
    the checker are then exercised on a problem small enough to know its answer."""

    def __init__(self, arr: NDArray[np.float64], chunk: int = 3) -> None:
        self.arr = np.asarray(arr, dtype=np.float64)
        self.chunk = chunk

    @property
    def count(self) -> int:
        return int(self.arr.shape[0])

    @property
    def dim(self) -> int:
        return int(self.arr.shape[1])

    def chunks(self, size: int = 3) -> Iterator[tuple[int, NDArray[np.float64]]]:
        for start in range(0, self.count, self.chunk):
            yield start, self.arr[start : start + self.chunk]

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        return self.arr[indices]
