r"""The sensitivity set of one denoiser release, reduced exactly on a grid.

For a finite domain :math:`K` the add/remove sensitivity set of :math:`m_g` at a fixed query is
the set of two-record vectors :math:`t_g(x, y)`, :math:`x \ne y \in K` (the two-record theorem,
derived on the theory page; :func:`dpopt.covariance.sensitivity.add_remove_set`),
:math:`m(m-1)/2` vectors after dropping the shorter of each antiparallel pair. On a regular grid
most of them can never attain :math:`\sup_s s^\top P s` for any :math:`P \succeq 0`:

**Lemma (corner reduction).** Write :math:`\delta = x - y` and

.. math::

    t_g(x, y) = \operatorname{expit}(z)\,\delta, \qquad
    z = \frac{|g - y|^2 - |g - x|^2}{2\sigma^2} = \frac{\delta^\top(2g - 2y - \delta)}{2\sigma^2}.

For a fixed difference :math:`\delta` the value :math:`t^\top P t = \operatorname{expit}(z)^2\,
\delta^\top P\delta` is increasing in :math:`z`, and :math:`z` is affine in :math:`y`. On a grid
the records :math:`y` with :math:`y + \delta` in the grid form a sub-grid whose convex hull is a
box with grid points at its corners, so the largest :math:`z` is attained at one of its
:math:`2^d` corners. Hence, for every :math:`P \succeq 0`,

.. math::

    \sup_{x \ne y \in K} t_g(x, y)^\top P\, t_g(x, y)
    = \max_{\delta}\ \operatorname{expit}(z^*_\delta)^2\,\delta^\top P \delta,
    \qquad z^*_\delta = \max_{y \in \text{corners}(\delta)} |z(y, \delta)|,

over the :math:`((2n_1 - 1)\cdots(2n_d - 1) - 1)/2` differences with a positive first non-zero
coordinate (the sign of :math:`\delta` is covered by :math:`|z|`: swapping :math:`x` and
:math:`y` flips :math:`\delta` and :math:`z`). Every reduced vector is a member of the full set,
so the reduced set has exactly the same Mahalanobis sup for every covariance; on a
20 × 20 grid it holds 760 vectors instead of 79,800. The tests re-check it against the brute
force over every pair.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from certificates.problem import VectorSource
from dpopt.covariance.denoiser import query_and_sigma
from dpopt.covariance.domains import Box, Domain, FinitePoints, Grid, as_domain
from dpopt.covariance.sensitivity import BoxTwoRecordSet, add_remove_set
from dpopt.errors import InvalidParameterError

__all__ = ["GridReduction", "grid_reduction", "release_set"]

#: Largest number of (difference, corner) pairs the grid reduction materialises.
MAX_REDUCTION_SIZE = 5_000_000


class GridReduction:
    r"""The query-independent part of the corner reduction of a :class:`Grid`.

    Holds, for every difference :math:`\delta` (positive first non-zero coordinate) and every
    corner of its sub-grid, the pair :math:`(x, y)`; :meth:`vectors` evaluates the reduced set at
    a query in :math:`O(2^d \cdot \#\delta\cdot d)`.

    Parameters
    ----------
    grid : Grid
    """

    def __init__(self, grid: Grid) -> None:
        if not isinstance(grid, Grid):
            raise InvalidParameterError("grid", grid, "must be a Grid")
        n = np.asarray(grid.shape, dtype=np.int64)
        d = grid.dim
        if grid.size < 2:
            raise InvalidParameterError("grid", grid, "must hold at least 2 points")
        count = (int(np.prod(2 * n - 1)) - 1) // 2
        if count * (1 << d) > MAX_REDUCTION_SIZE:
            raise InvalidParameterError(
                "grid", grid.shape,
                f"the corner reduction would hold {count * (1 << d)} pairs "
                f"(at most {MAX_REDUCTION_SIZE}); use a coarser grid",
            )
        ranges = [np.arange(-(m - 1), m, dtype=np.int64) for m in n]
        ks = np.stack([a.ravel() for a in np.meshgrid(*ranges, indexing="ij")], axis=1)
        nz = ks != 0
        first = np.where(nz.any(axis=1), ks[np.arange(ks.shape[0]), np.argmax(nz, axis=1)], 0)
        ks = ks[first > 0]
        lo = np.maximum(0, -ks)
        hi = (n - 1)[None, :] - np.maximum(0, ks)
        step = np.where(n > 1, (grid.upper - grid.lower) / np.maximum(n - 1, 1), 0.0)
        ys, xs = [], []
        for bits in itertools.product((0, 1), repeat=d):
            yi = np.where(np.asarray(bits, dtype=bool)[None, :], hi, lo)
            ys.append(grid.lower + yi * step)
            xs.append(grid.lower + (yi + ks) * step)
        self._grid = grid
        self._y = np.stack(ys)          # (2^d, count, d)
        self._x = np.stack(xs)

    @property
    def grid(self) -> Grid:
        """The grid."""
        return self._grid

    @property
    def count(self) -> int:
        """Number of reduced vectors (one per difference)."""
        return int(self._x.shape[1])

    def vectors(self, query: ArrayLike, sigma: float) -> NDArray[np.float64]:
        r"""The reduced two-record set at query ``g`` and noise scale ``sigma``.

        Row j is :math:`\operatorname{sign}(z)\operatorname{expit}(|z|)(x - y)` for the corner
        pair of difference j with the largest :math:`|z|`: a member of
        :func:`~dpopt.covariance.sensitivity.add_remove_set` with the same Mahalanobis sup.

        Returns
        -------
        ndarray, shape (count, d)
        """
        g, s = query_and_sigma(query, sigma, self._grid.dim)
        dy = self._y - g
        dx = self._x - g
        z = (np.einsum("cjd,cjd->cj", dy, dy) - np.einsum("cjd,cjd->cj", dx, dx)) / (2.0 * s * s)
        best = np.argmax(np.abs(z), axis=0)
        zj = z[best, np.arange(z.shape[1])]
        xj = self._x[best, np.arange(z.shape[1])]
        yj = self._y[best, np.arange(z.shape[1])]
        coef = expit(np.abs(zj))
        coef = np.where(zj >= 0, coef, -coef)
        return np.asarray(coef[:, None] * (xj - yj), dtype=np.float64)


@lru_cache(maxsize=8)
def _cached(lower: tuple[float, ...], upper: tuple[float, ...],
            shape: tuple[int, ...]) -> GridReduction:
    return GridReduction(Grid(np.array(lower), np.array(upper), shape))


def grid_reduction(grid: Grid) -> GridReduction:
    """The (cached) :class:`GridReduction` of ``grid``."""
    return _cached(tuple(float(v) for v in grid.lower), tuple(float(v) for v in grid.upper),
                   tuple(grid.shape))


def release_set(domain: Domain | ArrayLike, query: ArrayLike, sigma: float,
                *, reduce: bool = True) -> NDArray[np.float64] | VectorSource | BoxTwoRecordSet:
    r"""The add/remove sensitivity set of :math:`m_g(D)` at ``(query, sigma)`` on ``domain``.

    A :class:`Grid` gives the exact corner reduction (``reduce=True``) or every pair;
    finite points give every pair (:func:`~dpopt.covariance.sensitivity.add_remove_set`); a
    :class:`Box` gives the continuous set of every pair of records in the box
    (:class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet`: designed by exchange, its sup
    certified by :mod:`certificates.box_sup`).
    """
    dom = as_domain(domain)
    if isinstance(dom, Grid) and reduce:
        return grid_reduction(dom).vectors(query, sigma)
    if isinstance(dom, Grid | FinitePoints | Box):
        return add_remove_set(dom, query, sigma)
    raise InvalidParameterError("domain", domain, "must be a Grid, FinitePoints or Box")
