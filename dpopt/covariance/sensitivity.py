r"""Sensitivity sets of the ideal denoiser and the Mahalanobis sup :math:`\rho^*(\Sigma)`.

The mathematics is derived on the theory page, "The ideal denoiser and its two-record sensitivity".
A Gaussian release :math:`m_g(D) + N(0, \Sigma)` has
Rényi/zCDP/GDP/(ε, δ) guarantees that depend only on

.. math::

    \rho^*(\Sigma) = \sup_{s \in S} s^\top \Sigma^{-1} s,

where :math:`S` is the *sensitivity set*: every change :math:`m_g(D) - m_g(D')` of the query
between neighbouring datasets. The sets built here:

- **add/remove, fixed query** (the two-record theorem): every deletion shift is a sub-convex
  combination of two-record vectors :math:`t_g(x, y) = m_g(\{x, y\}) - m_g(\{y\})`, so for a finite
  domain :math:`K` the sup over all datasets equals the max over the :math:`m(m-1)` vectors
  :math:`t_g(x, y)`, :math:`x \ne y \in K`. Since :math:`t_g(y, x) = -\frac{1-c}{c} t_g(x, y)`
  (antiparallel, :math:`c = \operatorname{expit}(\cdot)`), only the longer one of each unordered
  pair is kept: :math:`m(m-1)/2` vectors, generated on the fly by :class:`TwoRecordVectors`.
- **add/remove, uniform query** (the uniform-query corollary): sup over all queries :math:`g` gives
  the differences :math:`x - y` (approached along :math:`g_\gamma = x + \gamma(x - y)`,
  :math:`\gamma \to \infty`); :class:`UniformQueryVectors` for finite domains, and for a box
  :math:`\prod[\ell_i, u_i]` the vertex differences :math:`v \circ L`, :math:`v \in \{-1, 1\}^d`,
  :math:`v_1 = 1` (:class:`BoxVertexDifferences`, :math:`2^{d-1}` vectors; a convex function on the
  difference body :math:`\prod[-L_i, L_i]` peaks at a vertex).
- **add/remove, fixed query, records anywhere in a box**: :class:`BoxTwoRecordSet`, the
  continuous set :math:`\{t_g(x, y) : x, y \in K\}` for :math:`K = \prod[\ell_i, u_i]`
  (the two-record theorem holds for any domain). It is not enumerable; its sup is certified by
  :func:`certificates.box_sup.certified_box_sup` (a proven upper bound), and
  :func:`dpopt.covariance.design.design_covariance` designs on it by exchange
  (:mod:`dpopt.covariance.continuous`).
- **replacement**: :func:`dpopt.relation.replacement_sup` returns :math:`4\rho_{ar}` (the
  replacement bound), an upper *bound* from
  :math:`(a - b)^\top P (a - b) \le 2(a^\top P a + b^\top P b)`, not the exact sup.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from certificates.problem import DEFAULT_CHUNK, ArrayVectors, VectorSource
from certificates.validate import as_float_array, as_int, as_vectors
from dpopt.covariance.denoiser import query_and_sigma
from dpopt.covariance.domains import Box, Domain, Ellipsoid, FinitePoints, Grid, as_domain
from dpopt.errors import (
    InvalidParameterError,
    InvalidTypeError,
)
from dpopt.progress import tick_rows

if TYPE_CHECKING:  # pragma: no cover
    from certificates.box_sup import BoxSup

__all__ = [
    "BoxTwoRecordSet",
    "BoxVertexDifferences",
    "EllipsoidDifferences",
    "PrunedSet",
    "TwoRecordVectors",
    "UniformQueryVectors",
    "add_remove_set",
    "uniform_query_set",
]

_U = float(np.finfo(np.float64).eps) / 2.0


def chunk_size_of(size: int) -> int:
    return as_int("size", size, low=1)


def _points_of(points: Domain | ArrayLike) -> NDArray[np.float64]:
    if isinstance(points, Grid):
        return points.points
    if isinstance(points, FinitePoints):
        return points.points
    if isinstance(points, Ellipsoid):
        raise InvalidParameterError(
            "points", points, "must be a finite domain; for a ball or an ellipsoid use "
            "uniform_query_set(domain), or add_remove_set(domain.bounding_box(), query, sigma)")
    if isinstance(points, Box):
        raise InvalidParameterError(
            "points",
            points,
            "must be a finite domain (FinitePoints, Grid or an (m, d) array); for records "
            "anywhere in the box use add_remove_set(box, query, sigma), a BoxTwoRecordSet",
        )
    return FinitePoints(points).points


class _PairVectors:
    r"""Base of the on-the-fly sources indexed by unordered pairs :math:`i < k` of m points.

    Vector j belongs to the pair :math:`(i, k)` in row-major order:
    ``(0,1), (0,2), ..., (0,m-1), (1,2), ...``.
    """

    def __init__(self, points: Domain | ArrayLike) -> None:
        p = _points_of(points)
        m = p.shape[0]
        if m < 2:
            raise InvalidParameterError("points", points, "must hold at least 2 points")
        self._points = np.ascontiguousarray(p)
        self._points.setflags(write=False)
        self._m = int(m)
        i = np.arange(m, dtype=np.int64)
        # number of pairs before row i: sum_{r < i} (m - 1 - r)
        self._offsets = i * (2 * m - i - 1) // 2

    @property
    def points(self) -> NDArray[np.float64]:
        """The domain points, shape (m, d)."""
        return self._points

    @property
    def count(self) -> int:
        """Number of vectors m(m-1)/2."""
        return self._m * (self._m - 1) // 2

    @property
    def dim(self) -> int:
        """Dimension d."""
        return int(self._points.shape[1])

    def pair_indices(self, indices: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Point indices ``(i, k)``, ``i < k``, of the given vector indices."""
        j = np.asarray(indices, dtype=np.int64)
        if j.size and (j.min() < 0 or j.max() >= self.count):
            raise InvalidParameterError("indices", indices, f"must lie in [0, {self.count})")
        i = np.searchsorted(self._offsets, j, side="right") - 1
        k = i + 1 + (j - self._offsets[i])
        return i.astype(np.intp), k.astype(np.intp)

    def _block(self, i: NDArray[np.intp], k: NDArray[np.intp]) -> NDArray[np.float64]:
        raise NotImplementedError

    def block(self, start: int, stop: int) -> NDArray[np.float64]:
        """The vectors ``start .. stop - 1`` as a ``(stop - start, d)`` array.

        A block is generated from the points alone (nothing of size ``count`` is read), so a
        worker holding this small object can produce any range of the set; :meth:`chunks` is
        this method applied to consecutive ranges, so both give the same vectors bit for bit.
        """
        count = self.count
        if isinstance(start, bool) or isinstance(stop, bool) or not 0 <= start <= stop <= count:
            raise InvalidParameterError(
                "(start, stop)", (start, stop), f"must satisfy 0 <= start <= stop <= {count}"
            )
        j = np.arange(start, stop, dtype=np.int64)
        i = np.searchsorted(self._offsets, j, side="right") - 1
        k = i + 1 + (j - self._offsets[i])
        return self._block(i.astype(np.intp), k.astype(np.intp))

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """Yield ``(start, block)`` with ``block`` the vectors ``start .. start + k - 1``."""
        size = chunk_size_of(size)
        count = self.count
        for start in range(0, count, size):
            stop = min(count, start + size)
            yield start, self.block(start, stop)
            tick_rows(stop - start, count)  # the consumer is done with the block

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        """The vectors with the given indices, shape (len(indices), d)."""
        i, k = self.pair_indices(np.atleast_1d(indices))
        return self._block(i, k)

    def dense(self) -> NDArray[np.float64]:
        """All vectors as one ``(count, d)`` array (materialises the set)."""
        if self.count == 0:
            return np.zeros((0, self.dim))
        return np.concatenate([blk for _, blk in self.chunks()], axis=0)


class TwoRecordVectors(_PairVectors):
    r"""The two-record vectors of the two-record theorem for a fixed query, generated on the fly.

    For each unordered pair :math:`\{p_i, p_k\}` of domain points (:math:`i < k`) the vector is the
    longer of :math:`t_g(p_i, p_k)` and :math:`t_g(p_k, p_i)` (they are antiparallel), i.e.

    .. math::

        z = \frac{|g - p_k|^2 - |g - p_i|^2}{2\sigma^2}, \qquad
        s = \operatorname{sign}(z)\,\operatorname{expit}(|z|)\,(p_i - p_k)

    (:math:`\operatorname{sign}(0) = 1`), which is :math:`t_g(p_i, p_k)` when :math:`z \ge 0` and
    :math:`t_g(p_k, p_i)` otherwise. The sup of :math:`s^\top P s` over these
    :math:`m(m-1)/2` vectors equals the sup over every dataset drawn from the domain and every
    deleted record (the two-record theorem, add/remove adjacency, datasets of size >= 2).

    Implements :class:`certificates.problem.VectorSource`: nothing of size ``count`` is stored.

    Parameters
    ----------
    points : FinitePoints, Grid or array_like, shape (m, d)
        The finite domain, m >= 2.
    query : array_like, shape (d,)
        Query point :math:`g`.
    sigma : float
        Noise scale of the denoiser, > 0.

    Examples
    --------
    >>> src = TwoRecordVectors([[0.0], [1.0], [3.0]], query=[0.0], sigma=1.0)
    >>> src.count, src.dim
    (3, 1)
    """

    def __init__(self, points: Domain | ArrayLike, query: ArrayLike, sigma: float) -> None:
        super().__init__(points)
        g, s = query_and_sigma(query, sigma, self.dim, "the domain dimension")
        self._query = g
        self._sigma = s
        diff = self._points - g
        self._sq = np.einsum("ij,ij->i", diff, diff)  # |g - p|^2, finite for finite points
        if not np.all(np.isfinite(self._sq)):
            raise InvalidParameterError(
                "query", query, "is so far from the domain that |g - p|^2 overflows doubles")

    def _z(self, i: NDArray[np.intp], k: NDArray[np.intp]) -> NDArray[np.float64]:
        """z = (|g - p_k|^2 - |g - p_i|^2) / (2 sigma^2), divided in two steps: a tiny sigma
        (sigma^2 below the doubles, e.g. 1e-300) gives z = +-inf (expit = 1, the sigma -> 0
        limit, never smaller than the true coefficient), an equal distance z = 0, never NaN."""
        gap = self._sq[k] - self._sq[i]
        with np.errstate(over="ignore"):
            return np.asarray(gap / self._sigma / (2.0 * self._sigma), dtype=np.float64)

    @property
    def query(self) -> NDArray[np.float64]:
        """The query point g."""
        return self._query

    @property
    def sigma(self) -> float:
        """The denoiser noise scale."""
        return self._sigma

    def _block(self, i: NDArray[np.intp], k: NDArray[np.intp]) -> NDArray[np.float64]:
        z = self._z(i, k)
        coef = expit(np.abs(z))
        coef = np.where(z >= 0, coef, -coef)
        out = self._points[i] - self._points[k]
        out *= coef[:, None]
        return out

    def ordered_pairs(self, indices: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        r"""Indices ``(x, y)`` with vector j equal to :math:`t_g(p_x, p_y)` (x is removed)."""
        i, k = self.pair_indices(indices)
        z = self._z(i, k)
        return np.where(z >= 0, i, k), np.where(z >= 0, k, i)


class UniformQueryVectors(_PairVectors):
    r"""Differences :math:`p_i - p_k`, :math:`i < k`, of a finite domain (the uniform-query
    corollary).

    The sensitivity set of the ideal denoiser when the query :math:`g` is arbitrary: the sup over
    :math:`g` of :math:`t_g(x, y)^\top P\, t_g(x, y)` is :math:`(x - y)^\top P (x - y)`
    (approached, not attained). ``m(m-1)/2`` vectors generated on the fly
    (a :class:`certificates.problem.VectorSource`).
    """

    def _block(self, i: NDArray[np.intp], k: NDArray[np.intp]) -> NDArray[np.float64]:
        return np.asarray(self._points[i] - self._points[k], dtype=np.float64)


class BoxVertexDifferences:
    r"""Vertex differences :math:`v \circ L`, :math:`v \in \{-1, 1\}^d`, :math:`v_1 = 1`, of a box.

    For :math:`K = \prod [\ell_i, u_i]` with side lengths :math:`L`, the difference body
    :math:`K - K = \prod [-L_i, L_i]` and every convex function (such as
    :math:`s \mapsto s^\top P s`) peaks at one of its vertices; fixing :math:`v_1 = 1` keeps one of
    each antiparallel pair. Vector j has :math:`v_{i+1} = -1` iff bit i of j is set.
    ``count = 2^(d-1)``; a :class:`certificates.problem.VectorSource`.

    Parameters
    ----------
    box : Box or Grid
        A grid contains its box's vertices, so it has the same uniform-query sup.
    """

    def __init__(self, box: Box | Grid) -> None:
        if isinstance(box, Grid):
            box = box.box
        if not isinstance(box, Box):
            raise InvalidTypeError("box", box, "a Box or Grid")
        if box.dim > 62:
            raise InvalidParameterError("box", box, "dimension must be <= 62")
        self._box = box
        self._lengths = box.side_lengths

    @property
    def box(self) -> Box:
        """The box."""
        return self._box

    @property
    def count(self) -> int:
        """Number of vectors 2^(d-1)."""
        return 1 << (self._box.dim - 1)

    @property
    def dim(self) -> int:
        """Dimension d."""
        return self._box.dim

    def _block(self, j: NDArray[np.int64]) -> NDArray[np.float64]:
        d = self.dim
        bits = (j[:, None] >> np.arange(d - 1, dtype=np.int64)[None, :]) & 1
        out = np.empty((j.shape[0], d))
        out[:, 0] = self._lengths[0]
        out[:, 1:] = (1.0 - 2.0 * bits) * self._lengths[1:]
        return out

    def block(self, start: int, stop: int) -> NDArray[np.float64]:
        """The vectors ``start .. stop - 1`` (generated from the box alone)."""
        count = self.count
        if isinstance(start, bool) or isinstance(stop, bool) or not 0 <= start <= stop <= count:
            raise InvalidParameterError(
                "(start, stop)", (start, stop), f"must satisfy 0 <= start <= stop <= {count}"
            )
        return self._block(np.arange(start, stop, dtype=np.int64))

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """Yield ``(start, block)`` in index order."""
        size = chunk_size_of(size)
        for start in range(0, self.count, size):
            stop = min(self.count, start + size)
            yield start, self.block(start, stop)
            tick_rows(stop - start, self.count)

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        """The vectors with the given indices."""
        j = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        if j.size and (j.min() < 0 or j.max() >= self.count):
            raise InvalidParameterError("indices", indices, f"must lie in [0, {self.count})")
        return self._block(j)

    def dense(self) -> NDArray[np.float64]:
        """All vectors, shape (2^(d-1), d)."""
        return self._block(np.arange(self.count, dtype=np.int64))


class BoxTwoRecordSet:
    r"""The fixed-query add/remove sensitivity set of :math:`m_g` for records anywhere in a box.

    .. math::

        S = \{t_g(x, y) : x, y \in K\}, \qquad K = \prod_i [\ell_i, u_i], \qquad
        t_g(x, y) = \operatorname{expit}\!\Big(\frac{|g-y|^2 - |g-x|^2}{2\sigma^2}\Big)(x - y).

    By the two-record theorem (theory page) every deletion shift of a dataset with records
    in :math:`K` is a sub-convex combination of such vectors, so
    :math:`\sup_{s \in S} s^\top\Sigma^{-1}s` governs every Gaussian guarantee of
    :math:`m_g(D) + N(0, \Sigma)` for **every** dataset of real-valued records in the box (no
    snapping needed; records outside the box must be clamped into it, see :meth:`Box.snap`).
    The set is infinite: its sup is certified (:meth:`sup`) rather than enumerated, and
    :func:`dpopt.covariance.design.design_covariance` designs on it by an exchange method.

    The box, the query and sigma must be public (fixed without looking at the records).

    Parameters
    ----------
    box : Box
    query : array_like, shape (d,)
    sigma : float
        The denoiser noise scale, > 0.
    """

    def __init__(self, box: Box, query: ArrayLike, sigma: float) -> None:
        if not isinstance(box, Box):
            raise InvalidTypeError("box", box, "a Box")
        g, s = query_and_sigma(query, sigma, box.dim, "the box dimension")
        g = np.array(g, dtype=np.float64)
        g.setflags(write=False)
        self._box = box
        self._query = g
        self._sigma = s

    @property
    def box(self) -> Box:
        """The box K."""
        return self._box

    @property
    def query(self) -> NDArray[np.float64]:
        """The query point g."""
        return self._query

    @property
    def sigma(self) -> float:
        """The denoiser noise scale."""
        return self._sigma

    @property
    def dim(self) -> int:
        """Dimension d."""
        return self._box.dim

    def vectors(self, x: ArrayLike, y: ArrayLike) -> NDArray[np.float64]:
        r"""The vectors :math:`t_g(x_i, y_i)` of given pairs (rows of ``x``, ``y``; in K)."""
        xa = np.atleast_2d(as_float_array("x", x))
        ya = np.atleast_2d(as_float_array("y", y))
        if xa.shape != ya.shape or xa.shape[1] != self.dim:
            raise InvalidParameterError("x", x, f"x and y must be (k, {self.dim}) arrays")
        if not (np.all(self._box.contains(xa)) and np.all(self._box.contains(ya))):
            raise InvalidParameterError("x", x, "every pair must lie in the box")
        dx, dy = xa - self._query, ya - self._query
        z = (np.einsum("ij,ij->i", dy, dy) - np.einsum("ij,ij->i", dx, dx)) / (
            2.0 * self._sigma * self._sigma)
        return np.asarray(expit(z)[:, None] * (xa - ya), dtype=np.float64)

    def sup(self, covariance: ArrayLike, *, tol: float = 1e-6, max_nodes: int = 2_000_000,
            stop_below: float | None = None) -> BoxSup:
        r"""Certified bounds on :math:`\sup_{x,y\in K} t_g(x,y)^\top\Sigma^{-1}t_g(x,y)`
        (:func:`certificates.box_sup.certified_box_sup`)."""
        from certificates.box_sup import certified_box_sup

        return certified_box_sup(self._box.lower, self._box.upper, self._query, self._sigma,
                                 covariance=covariance, tol=tol, max_nodes=max_nodes,
                                 stop_below=stop_below)

    def describe(self) -> str:
        """One line: what the set covers."""
        return (f"every pair of records in the box [{_fmt(self._box.lower)}, "
                f"{_fmt(self._box.upper)}] (add/remove), query {_fmt(self._query)}, "
                f"sigma {self._sigma:g}")

    def __repr__(self) -> str:
        return (f"BoxTwoRecordSet(box=Box({self._box.lower.tolist()}, {self._box.upper.tolist()}),"
                f" query={self._query.tolist()}, sigma={self._sigma!r})")


def _fmt(v: NDArray[np.float64]) -> str:
    return "(" + ", ".join(f"{float(x):g}" for x in v) + ")"


@overload
def add_remove_set(domain: Box, query: ArrayLike, sigma: float) -> BoxTwoRecordSet: ...


@overload
def add_remove_set(domain: FinitePoints | Grid | ArrayLike, query: ArrayLike,
                   sigma: float) -> TwoRecordVectors: ...


@overload
def add_remove_set(domain: Domain | ArrayLike, query: ArrayLike,
                   sigma: float) -> TwoRecordVectors | BoxTwoRecordSet: ...


def add_remove_set(domain: Domain | ArrayLike, query: ArrayLike,
                   sigma: float) -> TwoRecordVectors | BoxTwoRecordSet:
    r"""The add/remove sensitivity set of :math:`m_g` for a fixed query (the two-record theorem).

    What the result covers depends on the domain, and the domain and the query must be public
    (fixed without looking at the private records):

    - a :class:`Box` gives the continuous :class:`BoxTwoRecordSet`: a design on it covers every
      dataset of real-valued records in the box;
    - a :class:`Grid` or :class:`FinitePoints` gives :class:`TwoRecordVectors`: a design on it
      covers records that take those values only. Snap real-valued records first
      (:meth:`Grid.snap`, :class:`dpopt.covariance.mechanisms.DenoiserMechanism`), or use the
      box.

    Parameters
    ----------
    domain : Box, FinitePoints, Grid or array_like, shape (m, d)
    query : array_like, shape (d,)
    sigma : float

    Returns
    -------
    TwoRecordVectors or BoxTwoRecordSet
    """
    dom = as_domain(domain)
    if isinstance(dom, Box):
        return BoxTwoRecordSet(dom, query, sigma)
    if isinstance(dom, Ellipsoid):
        raise InvalidParameterError(
            "domain", dom, "a fixed-query set over a ball or an ellipsoid is not available; safe "
            "routes: add_remove_set(domain.bounding_box(), query, sigma) (a box containing it: "
            "covers every record in the ellipsoid) or uniform_query_set(domain) (every query)")
    return TwoRecordVectors(dom, query, sigma)


class EllipsoidDifferences:
    r"""The uniform-query add/remove set of an ellipsoid :math:`K = \{c + Eu : |u| \le 1\}`:
    the differences :math:`x - y = E(u - v)`, i.e. :math:`\{Ew : |w| \le 2\}` (the uniform-query
    corollary).

    Its Mahalanobis sup is closed form,

    .. math::

        \sup_{x, y \in K} (x - y)^\top\Sigma^{-1}(x - y)
        = 4\,\lambda_{\max}(E^\top\Sigma^{-1}E),

    and so is the optimal covariance: :math:`\sup \le q` iff
    :math:`\Sigma \succeq \tfrac4q EE^\top`, so :math:`\Sigma^* = \tfrac4q EE^\top` for every
    :math:`W \succ 0` (a noise floor :math:`\eta` lifts the eigenvalues below it). A finite set
    certifies it: with :math:`v_i` the eigenvectors of :math:`E^\top WE`, the :math:`d` vectors
    :math:`2Ev_i` already force :math:`\operatorname{tr}(W\Sigma) \ge \tfrac4q
    \operatorname{tr}(WEE^\top)` (Cauchy–Schwarz, :math:`v^\top\Sigma' v \cdot
    v^\top\Sigma'^{-1}v \ge 1` in the coordinates :math:`\Sigma' = E^{-1}\Sigma E^{-\top}`), so
    :func:`dpopt.covariance.design.design_covariance` solves on them and proves the continuous
    constraint by the closed form.
    """

    def __init__(self, ellipsoid: Ellipsoid) -> None:
        if not isinstance(ellipsoid, Ellipsoid):
            raise InvalidTypeError("ellipsoid", ellipsoid, "a Ball or Ellipsoid")
        self._ellipsoid = ellipsoid

    @property
    def ellipsoid(self) -> Ellipsoid:
        """The ellipsoid (or ball)."""
        return self._ellipsoid

    @property
    def dim(self) -> int:
        """Dimension d."""
        return self._ellipsoid.dim

    def working_vectors(self, weight: ArrayLike | None = None) -> NDArray[np.float64]:
        r"""The d vectors :math:`2Ev_i`, :math:`v_i` the eigenvectors of :math:`E^\top WE`."""
        e = self._ellipsoid.shape
        w = np.eye(self.dim) if weight is None else np.asarray(weight, dtype=np.float64)
        _, vecs = np.linalg.eigh(e.T @ (0.5 * (w + w.T)) @ e)
        return np.asarray(2.0 * (e @ vecs).T, dtype=np.float64)

    def sup(self, covariance: ArrayLike) -> tuple[float, float, NDArray[np.float64]]:
        r"""``(upper, lower, vector)``: a proven upper bound of
        :math:`4\lambda_{\max}(E^\top\Sigma^{-1}E)`, proven by exact arithmetic as
        :math:`\Sigma - cEE^\top \succ 0` with ``upper = 4 / c`` rounded up, and the value
        attained (rounded down) by ``vector`` :math:`= 2Ev_{\max}`."""
        from fractions import Fraction

        from certificates.rigorous import ExactArray, _bareiss_positive, round_up
        from certificates.validate import as_psd_matrix

        cov = as_psd_matrix("covariance", covariance, dim=self.dim)
        e = self._ellipsoid.shape
        m = e.T @ np.linalg.solve(cov, e)
        lam, vecs = np.linalg.eigh(0.5 * (m + m.T))
        top = float(lam[-1])
        vec = 2.0 * e @ vecs[:, -1]
        lower = float(vec @ np.linalg.solve(cov, vec)) * (1.0 - 1e-12)
        eet = ExactArray.of(e) @ ExactArray.of(e).T
        exact_cov = ExactArray.of(cov)
        for margin in (2.0**-40, 2.0**-30, 2.0**-20, 2.0**-12, 2.0**-6):
            c = 1.0 / (top * (1.0 + margin))
            if _bareiss_positive((exact_cov - ExactArray.of(np.array(c)) * eet).ints):
                return round_up(Fraction(4) / Fraction(c)), min(lower, 4.0 * top), vec
        raise InvalidParameterError("covariance", covariance,
                                    "is too ill-conditioned to certify the ellipsoid's sup")


def uniform_query_set(
    domain: Domain | ArrayLike,
) -> UniformQueryVectors | BoxVertexDifferences | EllipsoidDifferences:
    r"""The add/remove sensitivity set for a uniform (arbitrary) query (the uniform-query
    corollary).

    A :class:`Box` or :class:`Grid` gives its :class:`BoxVertexDifferences` (covering every record
    in the box); a :class:`Ball` or :class:`Ellipsoid` its :class:`EllipsoidDifferences` (closed
    form); a finite point set its pairwise :class:`UniformQueryVectors` (those values only).
    """
    dom = as_domain(domain)
    if isinstance(dom, Box | Grid):
        return BoxVertexDifferences(dom)
    if isinstance(dom, Ellipsoid):
        return EllipsoidDifferences(dom)
    return UniformQueryVectors(dom)


@dataclass(frozen=True)
class PrunedSet:
    r"""A sensitivity set reduced to (a superset of) the extreme points of its symmetric hull.

    Attributes
    ----------
    vectors : ndarray, shape (k, d)
        The kept vectors (original signs).
    indices : ndarray of int, shape (k,)
        Their indices in the input.
    original_count : int
        Number of input vectors.
    method : str
        ``"hull"`` (Qhull) or ``"lp"`` (one linear program per candidate).
    """

    vectors: NDArray[np.float64]
    indices: NDArray[np.intp]
    original_count: int
    method: str

    @property
    def count(self) -> int:
        """Number of kept vectors."""
        return int(self.vectors.shape[0])


def as_vector_source(vectors: ArrayLike | VectorSource, dim: int | None = None) -> VectorSource:
    if isinstance(vectors, EllipsoidDifferences):
        raise InvalidTypeError(
            "vectors", vectors, "a finite sensitivity set here; the differences of an ellipsoid "
            "are a continuum: use design_covariance, privacy_of or sup_mahalanobis")
    if isinstance(vectors, BoxTwoRecordSet):
        raise InvalidTypeError(
            "vectors",
            vectors,
            "a finite sensitivity set here; a BoxTwoRecordSet (records anywhere in a box) is "
            "infinite: use design_covariance, privacy_of or sup_mahalanobis, which certify its sup",
        )
    if isinstance(vectors, FinitePoints | Box | Grid | Ellipsoid):
        raise InvalidTypeError(
            "vectors",
            vectors,
            "a sensitivity set (array or VectorSource); build one from the domain with "
            "add_remove_set or uniform_query_set",
        )
    if isinstance(vectors, VectorSource) and not isinstance(vectors, np.ndarray):
        if vectors.count < 1:
            raise InvalidParameterError("vectors", vectors, "must hold at least one vector")
        return vectors
    if isinstance(vectors, PrunedSet):
        return ArrayVectors(vectors.vectors)
    return ArrayVectors(as_vectors("vectors", vectors, dim=dim))
