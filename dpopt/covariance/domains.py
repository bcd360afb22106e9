r"""Record domains :math:`K \subset \mathbb{R}^d`: finite point sets, axis-aligned boxes, grids.

A domain is the set every record of a dataset is drawn from; the sensitivity sets of
:mod:`dpopt.covariance.sensitivity` are built from it (theory page, "The ideal denoiser and its
two-record sensitivity").

- :class:`FinitePoints` — :math:`K = \{p_1, \dots, p_m\}` (an ``(m, d)`` array).
- :class:`Box` — :math:`K = \prod_i [\ell_i, u_i]` with :math:`\ell_i \le u_i`.
- :class:`Grid` — the regular grid of ``shape[i]`` equally spaced values in each
  :math:`[\ell_i, u_i]` (end points included); a finite point set whose convex hull is the box.
- :class:`Ellipsoid` — :math:`K = \{c + Eu : |u| \le 1\}` (``E`` non-singular), and
  :class:`Ball` — :math:`K = \{x : |x - c| \le r\}`.

What a domain covers
--------------------
A guarantee computed on a domain holds for datasets whose records lie in that domain, and only
for those. A :class:`Grid` or :class:`FinitePoints` domain covers records that take *exactly*
those values; a real-valued record between two grid points is not covered (the fixed-query
sensitivity can be up to four times larger there). Two safe routes:

- snap every record to the domain before computing the release (:meth:`Grid.snap`,
  :meth:`FinitePoints.snap`, :class:`dpopt.covariance.mechanisms.DenoiserMechanism`): snapping
  is a fixed map applied to each record on its own, so neighbouring datasets stay neighbouring
  and the finite-domain guarantee covers the snapped release exactly;
- design on the :class:`Box` itself, whose guarantee covers every record in it.

The domain (like the query) must be **public**: fixed without looking at the private records.
Building a :class:`FinitePoints` domain from the very records that are released makes the noise a
function of the private data, and no guarantee of this package then applies.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array
from dpopt.errors import InvalidParameterError, InvalidTypeError

__all__ = ["Ball", "Box", "Domain", "Ellipsoid", "FinitePoints", "Grid", "SnapReport", "as_domain",
           "snap"]

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


def _store_read_only(obj: object, **arrays: NDArray[np.float64]) -> None:
    """Store a read-only float64 copy of each array on the frozen dataclass ``obj`` (a caller's
    array can then neither alias nor edit a domain's fields)."""
    for name, value in arrays.items():
        arr = np.array(value, dtype=np.float64)
        arr.setflags(write=False)
        object.__setattr__(obj, name, arr)


def _records(records: Any, dim: int) -> NDArray[np.float64]:
    """Validate records as a finite ``(n, d)`` array (a 1-D array is n records when d = 1)."""
    arr = as_float_array("records", records)
    if arr.ndim == 1 and dim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise InvalidParameterError(
            "records", records, f"must be an (n, {dim}) array, got shape {arr.shape}"
        )
    return np.array(arr, dtype=np.float64)


def _outside(records: NDArray[np.float64], lower: NDArray[np.float64],
             upper: NDArray[np.float64]) -> NDArray[np.bool_]:
    return np.asarray(np.any((records < lower) | (records > upper), axis=1), dtype=np.bool_)


@dataclass(frozen=True, eq=False)
class SnapReport:
    r"""The result of snapping records to a domain (:meth:`Grid.snap`, :meth:`FinitePoints.snap`,
    :meth:`Box.snap`).

    Snapping maps each record on its own, :math:`x \mapsto \pi(x)` with :math:`\pi` fixed by the
    public domain, so datasets that differ in one record map to datasets that differ in at most
    one record: a guarantee for the domain covers the release computed from the snapped records.

    .. warning::

       The counts below are functions of the private records. They are for the data holder's
       own diagnostics; publishing them is a further release that no guarantee here covers.

    Attributes
    ----------
    records : ndarray, shape (n, d)
        The snapped records (each a point of the domain).
    indices : ndarray of int, shape (n,) or None
        Index of each record's domain point in ``domain.points`` (None for a box).
    clamped : int
        Records that lay outside the domain's box (for a :class:`FinitePoints`, outside the
        bounding box of its points) and were moved onto it.
    moved : int
        Records whose value changed at all (``clamped`` included).
    max_distance : float
        Largest Euclidean distance a record was moved.
    """

    records: NDArray[np.float64]
    indices: NDArray[np.intp] | None
    clamped: int
    moved: int
    max_distance: float

    @property
    def count(self) -> int:
        """Number of records n."""
        return int(self.records.shape[0])

    def summary(self) -> str:
        """One line: how many records were moved and clamped."""
        return (f"{self.moved} of {self.count} records snapped to the domain "
                f"({self.clamped} clamped into its box); largest move {self.max_distance:.3g}")


def _report(raw: NDArray[np.float64], snapped: NDArray[np.float64],
            indices: NDArray[np.intp] | None, outside: NDArray[np.bool_]) -> SnapReport:
    dist = np.sqrt(np.sum((raw - snapped) ** 2, axis=1)) if raw.size else np.zeros(0)
    snapped.setflags(write=False)
    if indices is not None:
        indices.setflags(write=False)
    return SnapReport(
        records=snapped,
        indices=indices,
        clamped=int(np.count_nonzero(outside)),
        moved=int(np.count_nonzero(np.any(raw != snapped, axis=1))),
        max_distance=float(dist.max()) if dist.size else 0.0,
    )


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
        _store_read_only(self, points=arr)

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

    def snap(self, records: ArrayLike) -> SnapReport:
        r"""Replace each record by its nearest domain point (Euclidean; ties to the lowest index).

        .. math::

            \pi(x) = p_{k(x)}, \qquad k(x) = \min \operatorname{argmin}_k |x - p_k|.

        A guarantee designed for this domain then covers the release computed from the snapped
        records, whatever real values the records had (see :class:`SnapReport`). The domain must
        be public: never build it from the records being released.

        Parameters
        ----------
        records : array_like, shape (n, d)
            Finite records (a 1-D array is n records when d = 1).

        Returns
        -------
        SnapReport
            ``clamped`` counts the records outside the bounding box of the points.

        Examples
        --------
        >>> FinitePoints([[0.0], [1.0], [3.0]]).snap([[0.4], [2.2], [7.0]]).records.ravel()
        array([0., 3., 3.])
        """
        x = _records(records, self.dim)
        p = self.points
        idx = np.empty(x.shape[0], dtype=np.intp)
        # exact squared distances (no Gram-form cancellation), in chunks of ~4M entries
        rows = max(1, 2**22 // max(self.size * self.dim, 1))
        for start in range(0, x.shape[0], rows):
            blk = x[start : start + rows]
            d2 = np.sum((blk[:, None, :] - p[None, :, :]) ** 2, axis=2)
            idx[start : start + rows] = np.argmin(d2, axis=1)
        snapped = np.array(p[idx], dtype=np.float64)
        outside = _outside(x, p.min(axis=0), p.max(axis=0))
        return _report(x, snapped, idx, outside)


@dataclass(frozen=True, eq=False, init=False)
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

    def __init__(self, lower: ArrayLike, upper: ArrayLike) -> None:
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        self.__post_init__()

    def __post_init__(self) -> None:
        lo, hi = _bounds(self.lower, self.upper)
        _store_read_only(self, lower=lo, upper=hi)

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

    def contains(self, records: ArrayLike) -> NDArray[np.bool_]:
        """Whether each record (row of an ``(n, d)`` array) lies in the box."""
        x = _records(records, self.dim)
        return ~_outside(x, self.lower, self.upper)

    def snap(self, records: ArrayLike) -> SnapReport:
        r"""Clamp each record into the box, :math:`\pi(x)_i = \min(\max(x_i, \ell_i), u_i)`.

        Records inside the box are unchanged; a guarantee designed for the box covers the release
        computed from the clamped records.

        Examples
        --------
        >>> Box([0.0], [1.0]).snap([[0.25], [1.5]]).records.ravel()
        array([0.25, 1.  ])
        """
        x = _records(records, self.dim)
        snapped = np.clip(x, self.lower, self.upper)
        return _report(x, snapped, None, _outside(x, self.lower, self.upper))


@dataclass(frozen=True, eq=False, init=False)
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

    def __init__(self, lower: ArrayLike, upper: ArrayLike, shape: ArrayLike) -> None:
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "shape", shape)
        self.__post_init__()

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
        _store_read_only(self, lower=lo, upper=hi)
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

    def axis_values(self, axis: int) -> NDArray[np.float64]:
        """The ``shape[axis]`` values of one axis (``numpy.linspace(lower, upper, n)``)."""
        return np.linspace(self.lower[axis], self.upper[axis], self.shape[axis])

    def snap(self, records: ArrayLike) -> SnapReport:
        r"""Replace each record by its nearest grid point, clamping records outside the box.

        The grid is a product of axes, so the nearest point is found axis by axis: clamp
        :math:`x_i` to :math:`[\ell_i, u_i]` and round :math:`(x_i - \ell_i)/h_i` to the nearest
        index, :math:`h_i = (u_i - \ell_i)/(n_i - 1)` (the returned value is the grid's own
        ``linspace`` value, bit for bit, and the index is checked against its two neighbours on
        the exact distance). A guarantee designed for the grid then covers the release computed
        from the snapped records, whatever real values the records had (see
        :class:`SnapReport`).

        Parameters
        ----------
        records : array_like, shape (n, d)
            Finite records (a 1-D array is n records when d = 1).

        Returns
        -------
        SnapReport
            ``indices`` index :attr:`points` (last axis fastest).

        Examples
        --------
        >>> rep = Grid([0.0], [1.0], [3]).snap([[0.2], [0.3], [1.7]])
        >>> rep.records.ravel(), rep.clamped, rep.moved
        (array([0. , 0.5, 1. ]), 1, 3)
        """
        x = _records(records, self.dim)
        clamped = np.clip(x, self.lower, self.upper)
        n = x.shape[0]
        flat = np.zeros(n, dtype=np.intp)
        snapped = np.empty_like(x)
        for a in range(self.dim):
            vals = self.axis_values(a)
            k = self.shape[a]
            if k == 1:
                ia = np.zeros(n, dtype=np.intp)
            else:
                span = self.upper[a] - self.lower[a]
                guess = np.rint((clamped[:, a] - self.lower[a]) / span * (k - 1))
                ia = np.clip(guess, 0, k - 1).astype(np.intp)
                # rounding of the division can be off by one near a midpoint: compare neighbours
                for shift in (-1, 1):
                    alt = np.clip(ia + shift, 0, k - 1)
                    better = np.abs(vals[alt] - clamped[:, a]) < np.abs(vals[ia] - clamped[:, a])
                    ia = np.where(better, alt, ia)
            snapped[:, a] = vals[ia]
            flat = flat * k + ia
        return _report(x, snapped, flat.astype(np.intp), _outside(x, self.lower, self.upper))


@dataclass(frozen=True, eq=False, init=False)
class Ellipsoid:
    r"""The ellipsoid :math:`K = \{c + E u : |u| \le 1\}`, ``E`` a non-singular d x d matrix.

    Parameters
    ----------
    centre : array_like, shape (d,)
    shape : array_like, shape (d, d)
        The matrix :math:`E` (for example :math:`E = L` with :math:`LL^\top` the ellipsoid's
        "covariance"); its columns are the semi-axes when they are orthogonal.

    Examples
    --------
    >>> Ellipsoid([0.0, 0.0], [[2.0, 0.0], [0.0, 1.0]]).diameter()
    4.0
    """

    centre: NDArray[np.float64]
    shape: NDArray[np.float64]

    def __init__(self, centre: ArrayLike, shape: ArrayLike) -> None:
        c = as_float_array("centre", centre)
        c = c[None] if c.ndim == 0 else c
        if c.ndim != 1:
            raise InvalidParameterError("centre", centre, "must be a vector")
        e = as_float_array("shape", shape)
        if e.shape != (c.shape[0], c.shape[0]):
            raise InvalidParameterError("shape", shape, f"must be a {c.shape[0]} x {c.shape[0]} "
                                                        "matrix")
        sv = np.linalg.svd(e, compute_uv=False)
        if not sv[-1] > 1e-12 * sv[0]:
            raise InvalidParameterError("shape", shape, "must be non-singular (a flat ellipsoid: "
                                                        "drop the degenerate axes first)")
        _store_read_only(self, centre=c, shape=e)

    @property
    def dim(self) -> int:
        """Dimension d."""
        return int(self.centre.shape[0])

    def diameter(self) -> float:
        r"""Diameter :math:`2\sigma_{\max}(E)`."""
        return float(2.0 * np.linalg.svd(self.shape, compute_uv=False)[0])

    def bounding_box(self) -> Box:
        r"""The smallest box containing K: :math:`c_i \pm \sqrt{(EE^\top)_{ii}}`
        (widened by a relative :math:`2^{-40}` so rounding never makes it smaller)."""
        half = np.sqrt(np.sum(self.shape**2, axis=1)) * (1.0 + 2.0**-40)
        return Box(self.centre - half, self.centre + half)

    def _coords(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(np.linalg.solve(self.shape, (x - self.centre).T).T, dtype=np.float64)

    def contains(self, records: ArrayLike) -> NDArray[np.bool_]:
        r"""Whether each record satisfies :math:`|E^{-1}(x - c)| \le 1`."""
        x = _records(records, self.dim)
        u = self._coords(x)
        return np.asarray(np.einsum("ij,ij->i", u, u) <= 1.0, dtype=np.bool_)

    def snap(self, records: ArrayLike) -> SnapReport:
        r"""Map each record into K: :math:`x \mapsto c + E u/\max(1, |u|)`,
        :math:`u = E^{-1}(x - c)` (records inside K are unchanged; for a :class:`Ball` this is
        the nearest point of the ball). A fixed map applied to each record alone, so a guarantee
        for K covers the release computed from the mapped records."""
        x = _records(records, self.dim)
        u = self._coords(x)
        norm = np.sqrt(np.einsum("ij,ij->i", u, u))
        out = norm > 1.0
        scale = np.where(out, 1.0 / np.where(out, norm, 1.0), 1.0)
        snapped = np.where(out[:, None], self.centre + (u * scale[:, None]) @ self.shape.T, x)
        return _report(x, np.array(snapped, dtype=np.float64), None, out)


class Ball(Ellipsoid):
    r"""The Euclidean ball :math:`K = \{x : |x - c| \le r\}` (an :class:`Ellipsoid` with
    :math:`E = rI`).

    Examples
    --------
    >>> Ball([0.0, 0.0], 1.5).snap([[3.0, 4.0]]).records
    array([[0.9, 1.2]])
    """

    def __init__(self, centre: ArrayLike, radius: float) -> None:
        c = as_float_array("centre", centre)
        c = c[None] if c.ndim == 0 else c
        if c.ndim != 1:
            raise InvalidParameterError("centre", centre, "must be a vector")
        r = float(as_float_array("radius", radius, low=0.0))
        object.__setattr__(self, "radius", r)
        super().__init__(c, r * np.eye(c.shape[0]))

    radius: float


Domain = FinitePoints | Box | Grid | Ellipsoid


def snap(domain: Domain, records: ArrayLike) -> SnapReport:
    """Snap records to any domain: nearest point of a finite domain, clamping into a box.

    Same as ``domain.snap(records)``; see :meth:`Grid.snap`, :meth:`FinitePoints.snap`,
    :meth:`Box.snap`.
    """
    if not isinstance(domain, FinitePoints | Box | Grid | Ellipsoid):
        raise InvalidTypeError("domain", domain, "a FinitePoints, Box, Grid, Ball or Ellipsoid")
    return domain.snap(records)


def warn_if_built_from(domain: Domain, records: ArrayLike) -> None:
    """Warn when a finite domain holds exactly the released records (it must be public).

    A :class:`FinitePoints` domain whose points are the same rows as ``records`` was almost
    certainly built from the private data: the noise then depends on the records, which no
    guarantee covers. Issues a :class:`UserWarning` naming the safe route.
    """
    if not isinstance(domain, FinitePoints):
        return
    x = np.asarray(records, dtype=np.float64)
    if x.ndim == 1 and domain.dim == 1:
        x = x[:, None]
    if x.shape != domain.points.shape or x.shape[0] < 2:
        return
    same = np.array_equal(np.unique(x, axis=0), np.unique(domain.points, axis=0))
    if same:
        warnings.warn(
            "the FinitePoints domain holds exactly the records being released; the domain must "
            "be public (fixed without looking at the data). Use a public Box, or a public Grid "
            "with snapping, instead",
            UserWarning,
            stacklevel=3,
        )


def as_domain(domain: Domain | ArrayLike, name: str = "domain") -> Domain:
    """Return ``domain`` if it is a domain; an ``(m, d)`` array becomes :class:`FinitePoints`."""
    if isinstance(domain, FinitePoints | Box | Grid | Ellipsoid):
        return domain
    if isinstance(domain, np.ndarray | list | tuple):
        try:
            return FinitePoints(domain)  # type: ignore[arg-type]
        except InvalidParameterError as exc:
            raise InvalidParameterError(name, domain, exc.requirement) from None
    raise InvalidTypeError(name, domain,
                           "a FinitePoints, Box, Grid, Ball, Ellipsoid or an (m, d) array")
