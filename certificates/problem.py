r"""Plain data of the covariance program, shared by every layer.

The optimal-covariance program (derived on the theory page, "The covariance program") is

.. math::

    v_\eta(q) = \min_{\Sigma \succeq \eta I} \operatorname{tr}(W\Sigma)
    \quad\text{s.t.}\quad s_j^\top \Sigma^{-1} s_j \le q,\quad j = 1..J,

with sensitivity vectors :math:`s_j` (rows of ``vectors``), weight :math:`W \succ 0`, Mahalanobis
bound :math:`q > 0` and noise floor :math:`\eta \ge 0`. The vectors are either an in-memory
``(J, d)`` array or a :class:`VectorSource` that yields them in chunks (two-record vectors of a
large domain are generated on the fly).

A solution is certified by a *factored dual*: multipliers :math:`\lambda_j \ge 0`
and directions :math:`u_j` on a support, and a factor :math:`G` with :math:`H = GG^\top`, so that
:math:`Z_j = \lambda_j [u_j; -1][u_j; -1]^\top \succeq 0` and :math:`H \succeq 0` by construction.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.errors import InvalidParameterError
from certificates.validate import as_float_array, as_psd_matrix, as_scalar, as_vectors

__all__ = [
    "NORM_RANGE",
    "ArrayVectors",
    "CovarianceProgram",
    "FactoredDual",
    "VectorSource",
    "check_norm_range",
]

#: Default number of vectors per chunk in a pass over a :class:`VectorSource`.
DEFAULT_CHUNK = 65536
#: Range of the largest sensitivity norm the solvers and certificates handle without under- or
#: overflow (products of squared norms, covariances and multipliers stay inside double range).
NORM_RANGE = (1e-100, 1e100)


@runtime_checkable
class VectorSource(Protocol):
    """A re-iterable collection of ``count`` vectors in ``R^dim``, produced in chunks.

    ``chunks(size)`` yields ``(start, block)`` with ``block`` a ``(k, dim)`` float64 array holding
    vectors ``start .. start + k - 1``; every call restarts from vector 0 and yields the same
    vectors in the same order. ``take(indices)`` returns the given vectors as an array.
    """

    @property
    def count(self) -> int: ...

    @property
    def dim(self) -> int: ...

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]: ...

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]: ...


@dataclass(frozen=True)
class ArrayVectors:
    """A :class:`VectorSource` over an in-memory ``(J, d)`` array."""

    array: NDArray[np.float64]

    @property
    def count(self) -> int:
        return int(self.array.shape[0])

    @property
    def dim(self) -> int:
        return int(self.array.shape[1])

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]:
        for start in range(0, self.count, size):
            yield start, self.array[start : start + size]

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        return np.asarray(self.array[np.asarray(indices, dtype=np.intp)], dtype=np.float64)


class NormTrackingSource:
    """A :class:`VectorSource` wrapper that records the largest squared norm during the first
    complete pass anyone makes over it, so the program's ``max_norm`` costs no pass of its own.

    It rejects a chunk with a non-finite entry (``InvalidParameterError`` naming ``vectors``).
    Attributes other than the protocol's are read from the wrapped source (``inner``).
    """

    def __init__(self, inner: VectorSource) -> None:
        self.inner = inner
        self.recorded_max_sq_norm: float | None = None

    @property
    def count(self) -> int:
        return int(self.inner.count)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]:
        if self.recorded_max_sq_norm is not None:
            yield from self.inner.chunks(size)
            return
        top, seen = 0.0, 0
        for start, block in self.inner.chunks(size):
            arr = np.asarray(block, dtype=np.float64)
            if arr.size:
                largest = float(np.max(np.einsum("ij,ij->i", arr, arr)))
                if not np.isfinite(largest):
                    raise InvalidParameterError(
                        "vectors", f"chunk starting at vector {start}",
                        "must be finite (NaN/inf entries, or norms beyond double range)",
                    )
                top = max(top, largest)
            seen += int(arr.shape[0]) if arr.ndim == 2 else 0
            yield start, block
        if seen == self.count:
            self.recorded_max_sq_norm = top

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        return self.inner.take(indices)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not yet set (during copy/unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)


def check_norm_range(largest: float) -> None:
    """Reject a sensitivity set that is all zero or whose scale leaves double range.

    Raises
    ------
    InvalidParameterError
        All vectors are zero (the release does not depend on the data: no noise is needed), or
        the largest norm is outside :data:`NORM_RANGE`.
    """
    if largest == 0.0:
        raise InvalidParameterError(
            "vectors", "all zero",
            "the release does not depend on any record, so no noise is needed (nothing to solve)",
        )
    low, high = NORM_RANGE
    if not low <= largest <= high:
        raise InvalidParameterError(
            "vectors", f"largest norm {largest:.3g}",
            f"must lie between {low:g} and {high:g}; express the query in other units",
        )


@dataclass(frozen=True, init=False)
class CovarianceProgram:
    r"""Validated data of :math:`\min \operatorname{tr}(W\Sigma)` s.t.
    :math:`s_j^\top\Sigma^{-1}s_j \le q`, :math:`\Sigma \succeq \eta I`.

    Parameters
    ----------
    vectors : array_like, shape (J, d), or VectorSource
        Sensitivity vectors :math:`s_j`.
    weight : array_like, shape (d, d), optional
        Symmetric positive definite :math:`W`; identity when omitted.
    bound : float
        Mahalanobis bound :math:`q > 0` (from a budget's ``mahalanobis_bound``).
    noise_floor : float, default 0
        :math:`\eta \ge 0`.
    """

    vectors: NDArray[np.float64] | VectorSource
    weight: NDArray[np.float64] | None = None
    bound: float = 1.0
    noise_floor: float = 0.0
    source: VectorSource = field(init=False, repr=False, compare=False)

    def __init__(self, vectors: ArrayLike | VectorSource, weight: ArrayLike | None = None,
                 bound: float = 1.0, noise_floor: float = 0.0) -> None:
        object.__setattr__(self, "vectors", vectors)
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bound", bound)
        object.__setattr__(self, "noise_floor", noise_floor)
        self.__post_init__()

    def __post_init__(self) -> None:
        self._validate(weight_checked=False)

    def with_vectors(self, vectors: ArrayLike | VectorSource, bound: float | None = None,
                     noise_floor: float | None = None) -> CovarianceProgram:
        r"""The program on other sensitivity vectors with this program's weight :math:`W`.

        ``vectors``, ``bound`` and ``noise_floor`` (this program's when omitted) are validated
        exactly as by the constructor; :math:`W` was validated (symmetric positive definite,
        finite) when this program was made and is shared, not checked again, so a batch of
        programs over one weight pays for its eigen-decomposition once. Only its dimension is
        compared with the new vectors'.

        Raises
        ------
        InvalidParameterError, InvalidTypeError
            As the constructor, for the vectors, the bound and the floor; also when the vectors'
            dimension is not W's.

        Examples
        --------
        >>> base = CovarianceProgram(np.eye(2), weight=np.diag([1.0, 4.0]), bound=2.0)
        >>> other = base.with_vectors(np.array([[1.0, 1.0]]))
        >>> other.bound, float(other.weight[1, 1])
        (2.0, 4.0)
        """
        new = object.__new__(CovarianceProgram)
        object.__setattr__(new, "vectors", vectors)
        object.__setattr__(new, "weight", self.weight)
        object.__setattr__(new, "bound", self.bound if bound is None else bound)
        object.__setattr__(new, "noise_floor",
                           self.noise_floor if noise_floor is None else noise_floor)
        new._validate(weight_checked=True)
        return new

    def _validate(self, weight_checked: bool) -> None:
        """Validate the fields in place; ``weight_checked``: ``weight`` is another program's
        validated W (only its dimension is checked)."""
        if not isinstance(self.vectors, np.ndarray) and isinstance(self.vectors, VectorSource):
            src: VectorSource = self.vectors
            if src.count < 1 or src.dim < 1:
                raise InvalidParameterError("vectors", src, "must hold at least one vector")
            if not isinstance(src, NormTrackingSource):
                src = NormTrackingSource(src)
        else:
            arr = as_vectors("vectors", self.vectors)
            object.__setattr__(self, "vectors", arr)
            src = ArrayVectors(arr)
            top = float(np.max(np.einsum("ij,ij->i", arr, arr)))  # cached: max_sq_norm
            check_norm_range(math.sqrt(top))
            object.__setattr__(self, "_max_sq_norm", top)
        object.__setattr__(self, "source", src)
        d = src.dim
        if weight_checked:
            w = np.asarray(self.weight, dtype=np.float64)
            if w.shape != (d, d):
                raise InvalidParameterError(
                    "weight", f"array of shape {w.shape}",
                    f"must be {d} x {d} to match the vectors' dimension")
        else:
            w = np.eye(d) if self.weight is None else as_psd_matrix("weight", self.weight, dim=d)
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "bound", as_scalar("bound", self.bound, low=0.0))
        object.__setattr__(
            self, "noise_floor", as_scalar("noise_floor", self.noise_floor, low=0.0, low_open=False)
        )

    @property
    def dim(self) -> int:
        """Dimension d."""
        return self.source.dim

    @property
    def count(self) -> int:
        """Number of sensitivity vectors J."""
        return self.source.count

    def max_sq_norm(self) -> float:
        """Largest squared Euclidean norm of the vectors (one pass over a chunked source, made
        once: the program caches it, so every consumer reads the same number)."""
        cached = self.__dict__.get("_max_sq_norm")
        if cached is None and isinstance(self.source, NormTrackingSource):
            cached = self.source.recorded_max_sq_norm
        if cached is not None:
            return float(cached)
        top = 0.0
        for _, block in self.source.chunks():
            b = np.asarray(block, dtype=np.float64)
            if b.size:
                top = max(top, float(np.max(np.einsum("ij,ij->i", b, b))))
        object.__setattr__(self, "_max_sq_norm", top)
        return top

    def max_norm(self) -> float:
        """Largest Euclidean norm of the vectors (one pass over a chunked source)."""
        return float(np.sqrt(self.max_sq_norm()))

    def dense_vectors(self) -> NDArray[np.float64]:
        """All vectors as one ``(J, d)`` array (materialises a chunked source)."""
        if isinstance(self.vectors, np.ndarray):
            return self.vectors
        return np.concatenate([blk for _, blk in self.source.chunks()], axis=0)


@dataclass(frozen=True)
class FactoredDual:
    r"""Factored dual certificate.

    Attributes
    ----------
    support : ndarray of int, shape (k,)
        Indices j of the vectors carrying dual weight.
    multipliers : ndarray, shape (k,)
        :math:`\lambda_j \ge 0`.
    directions : ndarray, shape (k, d)
        :math:`u_j`; :math:`Z_j = \lambda_j [u_j; -1][u_j; -1]^\top`.
    floor_factor : ndarray, shape (d, r)
        :math:`G` with :math:`H = GG^\top` (``r = 0`` when there is no floor block).
    """

    support: NDArray[np.intp]
    multipliers: NDArray[np.float64]
    directions: NDArray[np.float64]
    floor_factor: NDArray[np.float64]

    def __post_init__(self) -> None:
        sup = np.asarray(self.support)
        if sup.ndim != 1 or (sup.size and not np.issubdtype(sup.dtype, np.integer)):
            raise InvalidParameterError("support", self.support, "must be a 1-D integer array")
        k = sup.shape[0]
        lam = as_float_array("multipliers", self.multipliers, ndim=1, allow_empty=True)
        u = as_float_array("directions", self.directions, ndim=2, allow_empty=True)
        g = as_float_array("floor_factor", self.floor_factor, ndim=2, allow_empty=True)
        if lam.shape[0] != k or u.shape[0] != k:
            raise InvalidParameterError(
                "multipliers/directions", (lam.shape, u.shape), f"must have {k} rows like support"
            )
        if np.any(lam < 0):
            raise InvalidParameterError("multipliers", lam, "must be >= 0")
        object.__setattr__(self, "support", sup.astype(np.intp))
        object.__setattr__(self, "multipliers", lam)
        object.__setattr__(self, "directions", u)
        object.__setattr__(self, "floor_factor", g)


def __getattr__(name: str) -> object:
    if name == "CovarianceProblem":  # the program type's name before the package layout
        from certificates._deprecated import warn_moved

        warn_moved("certificates.problem.CovarianceProblem",
                   "certificates.problem.CovarianceProgram")
        return CovarianceProgram
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
