r"""Sensitivity sets of the ideal denoiser and the Mahalanobis sup :math:`\rho^*(\Sigma)`.

Seed 002 §III (MATH.md §7, §8, §11.3–11.4). A Gaussian release :math:`m_g(D) + N(0, \Sigma)` has
Rényi/zCDP/GDP/(ε, δ) guarantees that depend only on

.. math::

    \rho^*(\Sigma) = \sup_{s \in S} s^\top \Sigma^{-1} s,

where :math:`S` is the *sensitivity set*: every change :math:`m_g(D) - m_g(D')` of the query
between neighbouring datasets. The sets built here:

- **add/remove, fixed query** (Theorem 1): every deletion shift is a sub-convex combination of
  two-record vectors :math:`t_g(x, y) = m_g(\{x, y\}) - m_g(\{y\})`, so for a finite domain
  :math:`K` the sup over all datasets equals the max over the :math:`m(m-1)` vectors
  :math:`t_g(x, y)`, :math:`x \ne y \in K`. Since :math:`t_g(y, x) = -\frac{1-c}{c} t_g(x, y)`
  (antiparallel, :math:`c = \operatorname{expit}(\cdot)`), only the longer one of each unordered
  pair is kept: :math:`m(m-1)/2` vectors, generated on the fly by :class:`TwoRecordVectors`.
- **add/remove, uniform query** (Corollary 1): sup over all queries :math:`g` gives the differences
  :math:`x - y` (approached along :math:`g_\gamma = x + \gamma(x - y)`, :math:`\gamma \to \infty`);
  :class:`UniformQueryVectors` for finite domains, and for a box :math:`\prod[\ell_i, u_i]` the
  vertex differences :math:`v \circ L`, :math:`v \in \{-1, 1\}^d`, :math:`v_1 = 1`
  (:class:`BoxVertexDifferences`, :math:`2^{d-1}` vectors; a convex function on the difference body
  :math:`\prod[-L_i, L_i]` peaks at a vertex).
- **replacement**: :func:`replacement_bound` returns :math:`4\rho_{ar}` (seed eq. 11), an upper
  *bound* from :math:`(a - b)^\top P (a - b) \le 2(a^\top P a + b^\top P b)`, not the exact sup.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_factor, cho_solve, eigh
from scipy.special import expit

from certificates._errors import (
    AccuracyWarning,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)
from certificates._validate import as_float_array, as_psd_matrix, as_scalar, as_vectors
from certificates.problem import DEFAULT_CHUNK, ArrayVectors, VectorSource
from certificates.rigorous import ratio_upper_bound
from dpopt.domains import Box, FinitePoints, Grid, as_domain

__all__ = [
    "BoxVertexDifferences",
    "MahalanobisSup",
    "PrunedSet",
    "TwoRecordVectors",
    "UniformQueryVectors",
    "add_remove_set",
    "prune",
    "replacement_bound",
    "sup_mahalanobis",
    "uniform_query_set",
]

#: Largest box dimension whose 2^(d-1) vertex differences :func:`sup_mahalanobis` enumerates.
MAX_ENUMERATION_DIM = 20

_U = float(np.finfo(np.float64).eps) / 2.0


def _chunk_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or int(size) < 1:
        raise InvalidParameterError("size", size, "must be a positive integer")
    return int(size)


def _points_of(points: Any) -> NDArray[np.float64]:
    if isinstance(points, Grid):
        return points.points
    if isinstance(points, FinitePoints):
        return points.points
    if isinstance(points, Box):
        raise InvalidParameterError(
            "points",
            points,
            "must be a finite domain (FinitePoints, Grid or an (m, d) array); "
            "discretise the box with Grid",
        )
    return FinitePoints(points).points


class _PairVectors:
    r"""Base of the on-the-fly sources indexed by unordered pairs :math:`i < k` of m points.

    Vector j belongs to the pair :math:`(i, k)` in row-major order:
    ``(0,1), (0,2), ..., (0,m-1), (1,2), ...``.
    """

    def __init__(self, points: Any) -> None:
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

    def pair_indices(self, indices: Any) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Point indices ``(i, k)``, ``i < k``, of the given vector indices."""
        j = np.asarray(indices, dtype=np.int64)
        if j.size and (j.min() < 0 or j.max() >= self.count):
            raise InvalidParameterError("indices", indices, f"must lie in [0, {self.count})")
        i = np.searchsorted(self._offsets, j, side="right") - 1
        k = i + 1 + (j - self._offsets[i])
        return i.astype(np.intp), k.astype(np.intp)

    def _block(self, i: NDArray[np.intp], k: NDArray[np.intp]) -> NDArray[np.float64]:
        raise NotImplementedError

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """Yield ``(start, block)`` with ``block`` the vectors ``start .. start + k - 1``."""
        size = _chunk_size(size)
        m = self._m
        count = self.count
        start = 0
        while start < count:
            stop = min(count, start + size)
            j = np.arange(start, stop, dtype=np.int64)
            i = np.searchsorted(self._offsets, j, side="right") - 1
            k = i + 1 + (j - self._offsets[i])
            yield start, self._block(i.astype(np.intp), k.astype(np.intp))
            start = stop
        del m

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
    r"""The two-record vectors of Theorem 1 for a fixed query, generated on the fly.

    For each unordered pair :math:`\{p_i, p_k\}` of domain points (:math:`i < k`) the vector is the
    longer of :math:`t_g(p_i, p_k)` and :math:`t_g(p_k, p_i)` (they are antiparallel), i.e.

    .. math::

        z = \frac{|g - p_k|^2 - |g - p_i|^2}{2\sigma^2}, \qquad
        s = \operatorname{sign}(z)\,\operatorname{expit}(|z|)\,(p_i - p_k)

    (:math:`\operatorname{sign}(0) = 1`), which is :math:`t_g(p_i, p_k)` when :math:`z \ge 0` and
    :math:`t_g(p_k, p_i)` otherwise. The sup of :math:`s^\top P s` over these
    :math:`m(m-1)/2` vectors equals the sup over every dataset drawn from the domain and every
    deleted record (Theorem 1, add/remove adjacency, datasets of size >= 2).

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

    def __init__(self, points: Any, query: Any, sigma: Any) -> None:
        super().__init__(points)
        g = as_float_array("query", query)
        g = g[None] if g.ndim == 0 else g
        if g.ndim != 1 or g.shape[0] != self.dim:
            raise InvalidParameterError(
                "query", query, f"must be a vector of length d = {self.dim} (the domain dimension)"
            )
        s = as_scalar("sigma", sigma, low=0.0)
        self._query = g
        self._sigma = s
        diff = self._points - g
        self._half_sq = np.einsum("ij,ij->i", diff, diff) / (2.0 * s * s)

    @property
    def query(self) -> NDArray[np.float64]:
        """The query point g."""
        return self._query

    @property
    def sigma(self) -> float:
        """The denoiser noise scale."""
        return self._sigma

    def _block(self, i: NDArray[np.intp], k: NDArray[np.intp]) -> NDArray[np.float64]:
        z = self._half_sq[k] - self._half_sq[i]
        coef = expit(np.abs(z))
        coef = np.where(z >= 0, coef, -coef)
        out = self._points[i] - self._points[k]
        out *= coef[:, None]
        return out

    def ordered_pairs(self, indices: Any) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        r"""Indices ``(x, y)`` with vector j equal to :math:`t_g(p_x, p_y)` (x is removed)."""
        i, k = self.pair_indices(indices)
        z = self._half_sq[k] - self._half_sq[i]
        return np.where(z >= 0, i, k), np.where(z >= 0, k, i)


class UniformQueryVectors(_PairVectors):
    r"""Differences :math:`p_i - p_k`, :math:`i < k`, of a finite domain (Corollary 1).

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
    each antiparallel pair (MATH.md §7.1). Vector j has :math:`v_{i+1} = -1` iff bit i of j is set.
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

    def chunks(self, size: int = DEFAULT_CHUNK) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """Yield ``(start, block)`` in index order."""
        size = _chunk_size(size)
        for start in range(0, self.count, size):
            stop = min(self.count, start + size)
            yield start, self._block(np.arange(start, stop, dtype=np.int64))

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        """The vectors with the given indices."""
        j = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        if j.size and (j.min() < 0 or j.max() >= self.count):
            raise InvalidParameterError("indices", indices, f"must lie in [0, {self.count})")
        return self._block(j)

    def dense(self) -> NDArray[np.float64]:
        """All vectors, shape (2^(d-1), d)."""
        return self._block(np.arange(self.count, dtype=np.int64))


def add_remove_set(domain: Any, query: Any, sigma: Any) -> TwoRecordVectors:
    r"""The add/remove sensitivity set of :math:`m_g` for a fixed query (Theorem 1).

    Parameters
    ----------
    domain : FinitePoints, Grid or array_like, shape (m, d)
        A finite domain (a :class:`Box` is refused: discretise it with :class:`Grid`).
    query : array_like, shape (d,)
    sigma : float

    Returns
    -------
    TwoRecordVectors
    """
    dom = as_domain(domain)
    if isinstance(dom, Box):
        raise InvalidParameterError(
            "domain", dom, "the fixed-query set needs a finite domain; discretise the box with Grid"
        )
    return TwoRecordVectors(dom, query, sigma)


def uniform_query_set(domain: Any) -> UniformQueryVectors | BoxVertexDifferences:
    r"""The add/remove sensitivity set for a uniform (arbitrary) query, Corollary 1.

    A :class:`Box` or :class:`Grid` gives its :class:`BoxVertexDifferences`; a finite point set its
    pairwise :class:`UniformQueryVectors`.
    """
    dom = as_domain(domain)
    if isinstance(dom, Box | Grid):
        return BoxVertexDifferences(dom)
    return UniformQueryVectors(dom)


def replacement_bound(add_remove_sup: Any) -> float:
    r"""Upper bound :math:`4\rho_{ar}` on the replacement-adjacency sup (seed 002 eq. 11).

    Replacing record k by a new record moves the denoiser by :math:`a - b` with :math:`a, b` two
    add/remove shifts, and :math:`(a-b)^\top P (a-b) \le 2(a^\top P a + b^\top P b) \le 4\rho_{ar}`.
    This is a **bound**, not the exact replacement sup (MATH.md §8).

    Parameters
    ----------
    add_remove_sup : float
        :math:`\rho_{ar} = \sup_{s} s^\top \Sigma^{-1} s` over the add/remove set, >= 0.
    """
    return 4.0 * as_scalar("add_remove_sup", add_remove_sup, low=0.0, low_open=False)


# --------------------------------------------------------------------------------------------
# Mahalanobis sup


@dataclass(frozen=True)
class MahalanobisSup:
    r"""Result of :func:`sup_mahalanobis`: :math:`\rho^*(\Sigma) = \sup_s s^\top\Sigma^{-1}s`.

    Attributes
    ----------
    value : float
        The computed sup when ``exact``; otherwise a valid upper bound (SDP relaxation).
    upper : float
        ``value`` inflated by a floating-point error margin (see ``margin``): the number to use for
        privacy accounting, never below the true sup up to that model of rounding.
    lower : float
        A value :math:`s^\top\Sigma^{-1}s` attained by a vector of the set (= ``value`` if exact).
    exact : bool
        True when every vector was enumerated.
    method : str
        ``"enumeration"`` or ``"sdp_relaxation"``.
    index : int or None
        Index of the maximising vector (enumeration) or None.
    vector : ndarray, shape (d,)
        A vector attaining ``lower``.
    margin : float
        Relative floating-point margin ``upper / value - 1``: from the residual bound of
        :func:`certificates.rigorous.ratio_upper_bound` (enumeration; tight even for an
        ill-conditioned :math:`\Sigma`), or :math:`4 d (d+1) u\,\kappa(\Sigma) + 2^{-40}` (SDP
        relaxation).
    """

    value: float
    upper: float
    lower: float
    exact: bool
    method: str
    index: int | None
    vector: NDArray[np.float64]
    margin: float

    def __float__(self) -> float:
        return float(self.upper)


def _cholesky_and_margin(
    cov: NDArray[np.float64], *, warn: bool = True
) -> tuple[tuple[NDArray[np.float64], bool], float, NDArray[np.float64]]:
    d = cov.shape[0]
    eig = eigh(cov, eigvals_only=True)
    kappa = float(eig[-1] / eig[0])
    # Cholesky backward error (d+1)u|L||L^T| plus triangular-solve error d u |L| (Higham §10, §8),
    # with || |L||L^T| ||_2 <= d ||Sigma||_2, gives a relative error of the quadratic form below
    # ~ 3 d (d+1) u kappa; we use 4 d (d+1) u kappa plus a fixed 2^-40 for the summation.
    margin = 4.0 * d * (d + 1) * _U * kappa + 2.0**-40
    if margin >= 0.5:
        raise InvalidParameterError(
            "covariance", cov, f"is too ill-conditioned (condition number {kappa:.3g})"
        )
    if warn:
        _warn_margin(kappa, margin)
    try:
        chol = cho_factor(cov, lower=True)
    except np.linalg.LinAlgError:
        raise InvalidParameterError("covariance", cov, "must be positive definite") from None
    return chol, margin, eig


def _warn_margin(kappa: float, margin: float) -> None:
    if margin > 1e-6:
        warnings.warn(
            f"covariance has condition number {kappa:.3g}; the Mahalanobis sup carries a "
            f"relative floating-point margin of {margin:.2g}",
            AccuracyWarning,
            stacklevel=4,
        )


def _as_source(vectors: Any, dim: int | None = None) -> Any:
    if isinstance(vectors, FinitePoints | Box | Grid):
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


def sup_mahalanobis(
    vectors: Any,
    covariance: Any,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    max_enumeration_dim: int = MAX_ENUMERATION_DIM,
) -> MahalanobisSup:
    r"""The Mahalanobis sup :math:`\rho^*(\Sigma) = \sup_j s_j^\top \Sigma^{-1} s_j`.

    Enumerates the set in chunks: Cholesky solves :math:`\hat x = \Sigma^{-1}s` and the value
    :math:`\hat x^\top s`, with the rigorous residual bound of
    :func:`certificates.rigorous.ratio_upper_bound` as ``upper``. For a
    :class:`BoxVertexDifferences` of dimension above ``max_enumeration_dim`` (a max-cut-type
    problem, MATH.md §7.1) it returns instead the valid upper bound of the SDP relaxation

    .. math::

        \max_{v \in \{\pm1\}^d} v^\top \tilde P v \le \min\{\textstyle\sum_i y_i :
        \operatorname{diag}(y) \succeq \tilde P\}, \qquad \tilde P = D_L \Sigma^{-1} D_L,

    (any :math:`y` with :math:`\operatorname{diag}(y) \succeq \tilde P` is a bound; the solver's
    :math:`y` is repaired by :math:`y + \tau\mathbf 1`, :math:`\tau = \max(0,
    -\lambda_{\min}(\operatorname{diag}(y) - \tilde P))`), with ``exact=False``.

    Parameters
    ----------
    vectors : array_like, shape (J, d), VectorSource, or PrunedSet
        The sensitivity set.
    covariance : array_like, shape (d, d)
        Symmetric positive definite :math:`\Sigma`.
    chunk_size : int
        Vectors per triangular solve.
    max_enumeration_dim : int
        Box dimension above which the SDP bound replaces enumeration.

    Returns
    -------
    MahalanobisSup

    Examples
    --------
    >>> res = sup_mahalanobis([[1.0, 0.0], [0.0, 2.0]], 2.0 * np.eye(2))
    >>> round(res.value, 12), res.index, res.exact
    (2.0, 1, True)
    """
    src = _as_source(vectors)
    d = int(src.dim)
    cov = as_psd_matrix("covariance", covariance, dim=d)
    chunk_size = _chunk_size(chunk_size)
    is_box_sdp = isinstance(src, BoxVertexDifferences) and d > max_enumeration_dim
    chol, margin, eig = _cholesky_and_margin(cov, warn=is_box_sdp)
    if is_box_sdp:
        return _box_sdp_bound(src, chol, margin)
    # One pass: Cholesky solves plus the residual bound of certificates.rigorous (second order in
    # the residual, so tight even for an ill-conditioned Sigma such as a singular optimum with a
    # tiny ridge off the span of the vectors); lam_low only enters the second-order term.
    lam_low = float(eig[0]) - 4.0 * d * _U * float(eig[-1])
    if lam_low <= 0.0:
        lam_low = 0.5 * float(eig[0])
    bound, best, best_index = ratio_upper_bound(src, cov, chol[0], lam_low, chunk=chunk_size)
    if not (np.isfinite(best) and np.isfinite(bound)):
        raise InvalidParameterError("vectors", vectors, "gave a non-finite Mahalanobis norm")
    # an all-zero set (x^T s = 0 exactly, bound = the 1e-300 underflow allowance) is exactly 0
    upper = 0.0 if best == 0.0 and bound <= 1e-299 else max(bound, best) * (1.0 + 2.0**-40)
    margin = upper / best - 1.0 if best > 0 else 0.0
    _warn_margin(float(eig[-1] / eig[0]), margin)
    vec = np.asarray(src.take(np.array([best_index], dtype=np.intp))[0], dtype=np.float64)
    return MahalanobisSup(
        value=best,
        upper=upper,
        lower=best,
        exact=True,
        method="enumeration",
        index=best_index,
        vector=vec,
        margin=margin,
    )


def _box_sdp_bound(
    src: BoxVertexDifferences, chol: tuple[NDArray[np.float64], bool], margin: float
) -> MahalanobisSup:
    import cvxpy as cp

    lengths = src.box.side_lengths
    d = src.dim
    prec = cho_solve(chol, np.eye(d))
    prec = 0.5 * (prec + prec.T)
    pt = lengths[:, None] * prec * lengths[None, :]
    eig, vecs = eigh(pt)
    naive = d * float(eig[-1])  # y = lambda_max 1 is always feasible
    best_upper = naive
    y = cp.Variable(d)
    prob = cp.Problem(cp.Minimize(cp.sum(y)), [cp.diag(y) - pt >> 0])
    try:
        prob.solve(solver=cp.CLARABEL)
        y_val = None if y.value is None else np.asarray(y.value, dtype=np.float64)
    except cp.error.SolverError:
        y_val = None
    if y_val is not None and np.all(np.isfinite(y_val)):
        tau = max(0.0, -float(eigh(np.diag(y_val) - pt, eigvals_only=True)[0]))
        # eigenvalue error ~ d u ||pt||: add it to tau so the repaired y is feasible
        tau += 4.0 * d * _U * float(np.max(np.abs(eig)))
        best_upper = min(best_upper, float(np.sum(y_val)) + d * tau)
    elif best_upper <= 0:
        raise SolverError("CLARABEL failed on the box SDP bound; try a smaller dimension")
    # an attained value: round the top eigenvector to signs, then single-flip local search
    v = np.where(vecs[:, -1] >= 0, 1.0, -1.0)
    val = float(v @ pt @ v)
    improved = True
    while improved:
        improved = False
        gains = -4.0 * v * (pt @ v) + 4.0 * np.diag(pt)
        i = int(np.argmax(gains))
        if gains[i] > 1e-12 * max(abs(val), 1e-300):
            v[i] = -v[i]
            val = float(v @ pt @ v)
            improved = True
    if v[0] < 0:
        v = -v
    vec = v * lengths
    return MahalanobisSup(
        value=best_upper,
        upper=best_upper * (1.0 + margin),
        lower=min(val, best_upper),
        exact=False,
        method="sdp_relaxation",
        index=None,
        vector=vec,
        margin=margin,
    )


# --------------------------------------------------------------------------------------------
# Pruning


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


def _span_coordinates(s: NDArray[np.float64]) -> NDArray[np.float64]:
    _, sv, vt = np.linalg.svd(s, full_matrices=False)
    if sv.size == 0 or sv[0] == 0:
        return np.zeros((s.shape[0], 0))
    rank = int(np.sum(sv > sv[0] * max(s.shape) * np.finfo(float).eps * 10))
    return np.asarray(s @ vt[:rank].T, dtype=np.float64)


def _hull_keep(y: NDArray[np.float64], tol: float) -> NDArray[np.bool_]:
    from scipy.spatial import ConvexHull

    n = y.shape[0]
    hull = ConvexHull(np.vstack([y, -y]))
    keep = np.zeros(n, dtype=bool)
    keep[hull.vertices % n] = True
    # conservative: also keep every point within tol of a facet (never drop a boundary point
    # because of rounding); interior points satisfy normal . p + offset <= -tol * scale.
    scale = float(np.max(np.linalg.norm(y, axis=1)))
    eq = hull.equations
    worst = np.max(y @ eq[:, :-1].T + eq[:, -1][None, :], axis=1)
    keep |= worst > -tol * scale
    return keep


def _lp_keep(y: NDArray[np.float64], tol: float, rng: np.random.Generator) -> NDArray[np.bool_]:
    from scipy.optimize import linprog

    n, r = y.shape
    keep = np.ones(n, dtype=bool)
    # vectors maximising |w . y| for some direction w are vertices: keep them without an LP
    dirs = np.vstack([np.eye(r), rng.standard_normal((8 * r, r))])
    known = np.zeros(n, dtype=bool)
    known[np.unique(np.argmax(np.abs(y @ dirs.T), axis=0))] = True
    scale = float(np.max(np.linalg.norm(y, axis=1)))
    order = np.argsort(np.linalg.norm(y, axis=1), kind="stable")
    for j in order:
        if known[j]:
            continue
        others = np.flatnonzero(keep)
        others = others[others != j]
        if others.size == 0:
            continue
        yo = y[others]
        a_eq = np.hstack([yo.T, -yo.T])
        res = linprog(
            np.ones(2 * others.size),
            A_eq=a_eq,
            b_eq=y[j],
            bounds=(0, None),
            method="highs",
        )
        if res.status != 0:
            continue  # not representable (or LP trouble): keep, which is always safe
        lam = np.asarray(res.x)
        if float(np.sum(lam)) > 1.0 - tol / 2:
            continue
        # polish: re-solve the equality on the LP's support to machine precision, then re-check
        supp = np.flatnonzero(lam > 1e-12 * max(float(lam.max()), 1e-300))
        a_s = a_eq[:, supp]
        coef, *_ = np.linalg.lstsq(a_s, y[j], rcond=None)
        resid = float(np.max(np.abs(y[j] - a_s @ coef)))
        if float(np.sum(np.abs(coef))) <= 1.0 - tol and resid <= 1e-12 * r * scale:
            keep[j] = False
    return keep


def prune(
    vectors: Any,
    *,
    method: str = "auto",
    tol: float = 1e-9,
    rng: np.random.Generator | int | None = 0,
) -> PrunedSet:
    r"""Drop vectors inside the symmetric convex hull of the others.

    For every :math:`P \succeq 0`, :math:`s \mapsto s^\top P s` is convex and even, so its sup over
    a set equals its sup over the extreme points of :math:`\operatorname{conv}(S \cup -S)`;
    removing a vector that is a combination :math:`s = \sum_j c_j s_j` with
    :math:`\sum_j |c_j| \le 1` of the remaining ones leaves that hull, hence
    :math:`\rho^*(\Sigma)` for every :math:`\Sigma`, unchanged.
    Removal is sequential (each test is against the currently kept set), so duplicates and
    antiparallel pairs keep one member.

    Steps: drop zero vectors and exact (anti)duplicates; project onto the span of the set; then

    - ``"hull"`` (span dimension <= 6): Qhull vertices of :math:`\{\pm s_j\}`, plus every point
      within ``tol`` (relative) of a facet — conservative, never drops a boundary point;
    - ``"lp"``: for each candidate the linear program
      :math:`\min \sum_j (c^+_j + c^-_j)` s.t. :math:`\sum_j (c^+_j - c^-_j) s_j = s`,
      :math:`c^\pm \ge 0` (scipy HiGHS); dropped only if the optimum is :math:`\le 1 - ` ``tol``.

    Parameters
    ----------
    vectors : array_like, shape (J, d), or VectorSource
        The set (a source is materialised; for large J prefer a structure-exploiting solver).
    method : {"auto", "hull", "lp"}
    tol : float
        Relative safety tolerance (> 0): only points clearly inside are dropped.
    rng : numpy Generator or seed
        For the random screening directions of the LP method (the result is a valid pruning for
        any seed).

    Returns
    -------
    PrunedSet
    """
    src = _as_source(vectors)
    s = np.concatenate([np.asarray(b, dtype=np.float64) for _, b in src.chunks()], axis=0)
    tol = as_scalar("tol", tol, low=0.0, high=0.1)
    if method not in ("auto", "hull", "lp"):
        raise InvalidParameterError("method", method, "must be 'auto', 'hull' or 'lp'")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = s.shape[0]
    nonzero = np.flatnonzero(np.any(s != 0, axis=1))
    if nonzero.size == 0:
        return PrunedSet(s[:1].copy(), np.array([0], dtype=np.intp), n, "trivial")
    # canonical sign (first nonzero coordinate positive) to merge exact antiparallel duplicates
    cand = s[nonzero]
    first = np.argmax(cand != 0, axis=1)
    sign = np.sign(cand[np.arange(cand.shape[0]), first])
    canon = cand * sign[:, None]
    _, uniq = np.unique(canon, axis=0, return_index=True)
    uniq = np.sort(uniq)
    idx = nonzero[uniq]
    y = _span_coordinates(s[idx])
    r = y.shape[1]
    used = method
    if r == 1:
        keep = np.zeros(idx.size, dtype=bool)
        keep[int(np.argmax(np.abs(y[:, 0])))] = True
        used = "hull"
    else:
        if method == "auto":
            used = "hull" if r <= 6 else "lp"
        keep = None
        if used == "hull":
            try:
                keep = _hull_keep(y, tol)
            except Exception:  # Qhull precision/degeneracy trouble: fall back to LPs
                used = "lp"
        if keep is None:
            keep = _lp_keep(y, tol, gen)
    kept = idx[keep]
    return PrunedSet(s[kept].copy(), kept.astype(np.intp), n, used)
