r"""Record domains :math:`K \subset \mathbb{R}^d`: finite point sets, axis-aligned boxes, grids.

A domain is the set every record of a dataset is drawn from; the sensitivity sets of
:mod:`dpopt.covariance.sensitivity` are built from it (the optimal Gaussian covariance for
the ideal denoiser, Section III).

- :class:`FinitePoints` — :math:`K = \{p_1, \dots, p_m\}` (an ``(m, d)`` array).
- :class:`Box` — :math:`K = \prod_i [\ell_i, u_i]` with :math:`\ell_i \le u_i`.
- :class:`Grid` — the regular grid of ``shape[i]`` equally spaced values in each
  :math:`[\ell_i, u_i]` (end points included); a finite point set whose convex hull is the box.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array
from dpopt.errors import InvalidParameterError, InvalidTypeError

__all__ = ["Box", "Domain", "FinitePoints", "Grid", "as_domain"]

#: Largest number of points a :class:`Grid` materialises.
MAX_GRID_POINTS = 10_000_000


def _bounds(lower: Any, upper: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    lo = as_float_array("lower", lower)
    hi = as_float_array("upper", upper)
    lo = lo[None] if lo.ndim == 0 else lo
    hi = hi[None] if hi.ndim == 0 else hi
    if lo.ndim != 1:
        raise InvalidParameterError("lower", lower, "must be a vector (one bound per coordinate)")
    if hi.ndim != 1 or hi.shape != lo.shape:
        raise InvalidParameterError("upper", upper, f"must be a vector of length {lo.shape[0]}")
    if np.any(hi < lo):
        raise InvalidParameterError("upper", upper, "must be >= lower in every coordinate")
    return lo, hi


@dataclass(frozen=True, eq=False, init=False)
class FinitePoints:
    r"""A finite domain :math:`K = \{p_1, \dots, p_m\}`.

    Parameters
    ----------
    points : array_like, shape (m, d)
        Finite points (a 1-D array is read as m points in d = 1). Repeated rows are allowed.
    """

    points: NDArray[np.float64]

    def __init__(self, points: ArrayLike) -> None:
        object.__setattr__(self, "points", points)
        self.__post_init__()

    def __post_init__(self) -> None:
        arr = as_float_array("points", self.points)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise InvalidParameterError(
                "points", self.points, f"must be an (m, d) array, got shape {arr.shape}"
            )
        arr = np.array(arr, dtype=np.float64)
        arr.setflags(write=False)
        object.__setattr__(self, "points", arr)

    @property
    def dim(self) -> int:
        """Dimension d."""
        return int(self.points.shape[1])

    @property
    def size(self) -> int:
        """Number of points m."""
        return int(self.points.shape[0])

    def diameter(self) -> float:
        r"""Diameter :math:`\max_{i,j} |p_i - p_j|` (exact, chunked O(m^2 d))."""
        p = self.points
        sq = np.einsum("ij,ij->i", p, p)
        best = 0.0
        rows = max(1, 2**22 // max(self.size, 1))
        for start in range(0, self.size, rows):
            blk = p[start : start + rows]
            d2 = sq[start : start + rows, None] + sq[None, :] - 2.0 * blk @ p.T
            best = max(best, float(d2.max()))
            # exact recheck of the maximising pair (the Gram form can lose digits)
            i, j = np.unravel_index(int(np.argmax(d2)), d2.shape)
            best = max(best, float(np.sum((blk[i] - p[j]) ** 2)))
        return float(np.sqrt(max(best, 0.0)))


@dataclass(frozen=True, eq=False)
class Box:
    r"""The axis-aligned box :math:`K = \prod_{i=1}^d [\ell_i, u_i]`.

    Parameters
    ----------
    lower, upper : array_like, shape (d,)
        Finite bounds with ``lower <= upper``.

    Examples
    --------
    >>> Box([0.0, 0.0], [1.0, 2.0]).side_lengths
    array([1., 2.])
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]

    def __post_init__(self) -> None:
        lo, hi = _bounds(self.lower, self.upper)
        lo, hi = np.array(lo), np.array(hi)
        lo.setflags(write=False)
        hi.setflags(write=False)
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @property
    def dim(self) -> int:
        """Dimension d."""
        return int(self.lower.shape[0])

    @property
    def side_lengths(self) -> NDArray[np.float64]:
        r"""Side lengths :math:`L_i = u_i - \ell_i`."""
        return np.asarray(self.upper - self.lower, dtype=np.float64)

    def diameter(self) -> float:
        r"""Diameter :math:`|u - \ell|`."""
        return float(np.linalg.norm(self.side_lengths))

    def vertices(self) -> NDArray[np.float64]:
        """All 2^d vertices, shape (2^d, d) (only sensible for small d)."""
        d = self.dim
        if d > 24:
            raise InvalidParameterError("d", d, "vertex enumeration needs d <= 24")
        bits = (np.arange(2**d)[:, None] >> np.arange(d)[None, :]) & 1
        return np.asarray(self.lower + bits * self.side_lengths, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Grid:
    r"""Regular grid in the box :math:`\prod_i [\ell_i, u_i]` with ``shape[i]`` points per axis.

    Axis i holds ``numpy.linspace(lower[i], upper[i], shape[i])`` (``shape[i] = 1`` means the
    single value ``lower[i]``, which then must equal ``upper[i]``). The grid is a finite domain
    with :math:`m = \prod_i` ``shape[i]`` points and contains every vertex of its box.

    Examples
    --------
    >>> Grid([0.0], [1.0], [3]).points.ravel()
    array([0. , 0.5, 1. ])
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        lo, hi = _bounds(self.lower, self.upper)
        shp = np.atleast_1d(np.asarray(self.shape))
        if shp.ndim != 1 or not np.issubdtype(shp.dtype, np.integer) or shp.dtype == bool:
            raise InvalidTypeError("shape", self.shape, "a sequence of positive integers")
        if shp.shape[0] != lo.shape[0]:
            raise InvalidParameterError("shape", self.shape, f"must have length {lo.shape[0]}")
        if np.any(shp < 1):
            raise InvalidParameterError("shape", self.shape, "entries must be >= 1")
        if np.any((shp == 1) & (hi != lo)):
            raise InvalidParameterError(
                "shape", self.shape, "an axis with one point needs lower == upper on that axis"
            )
        if float(np.prod(shp.astype(float))) > MAX_GRID_POINTS:
            raise InvalidParameterError(
                "shape", self.shape, f"the grid must have at most {MAX_GRID_POINTS} points"
            )
        lo, hi = np.array(lo), np.array(hi)
        lo.setflags(write=False)
        hi.setflags(write=False)
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)
        object.__setattr__(self, "shape", tuple(int(s) for s in shp))

    @property
    def dim(self) -> int:
        """Dimension d."""
        return int(self.lower.shape[0])

    @property
    def size(self) -> int:
        """Number of points m."""
        return int(np.prod(self.shape))

    @property
    def box(self) -> Box:
        """The box spanned by the grid (its convex hull)."""
        return Box(self.lower, self.upper)

    @property
    def points(self) -> NDArray[np.float64]:
        """All grid points, shape (m, d), last axis varying fastest."""
        axes = [
            np.linspace(lo, hi, n)
            for lo, hi, n in zip(self.lower, self.upper, self.shape, strict=True)
        ]
        mesh = np.meshgrid(*axes, indexing="ij")
        return np.stack([m.ravel() for m in mesh], axis=1).astype(np.float64)

    def diameter(self) -> float:
        """Diameter (that of the box: the grid contains its vertices)."""
        return self.box.diameter()

    def as_finite(self) -> FinitePoints:
        """The grid as a :class:`FinitePoints`."""
        return FinitePoints(self.points)


Domain = FinitePoints | Box | Grid


def as_domain(domain: Domain | ArrayLike, name: str = "domain") -> Domain:
    """Return ``domain`` if it is a domain; an ``(m, d)`` array becomes :class:`FinitePoints`."""
    if isinstance(domain, FinitePoints | Box | Grid):
        return domain
    if isinstance(domain, np.ndarray | list | tuple):
        try:
            return FinitePoints(domain)  # type: ignore[arg-type]
        except InvalidParameterError as exc:
            raise InvalidParameterError(name, domain, exc.requirement) from None
    raise InvalidTypeError(name, domain, "a FinitePoints, Box, Grid or an (m, d) array")
