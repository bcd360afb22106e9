r"""Sample quality and memorisation measures for private samples.

- :func:`energy_distance`: :math:`\mathcal E(P, Q) = 2E|X - Y| - E|X - X'| - E|Y - Y'|`
  (Székely and Rizzo, "Energy statistics: A class of statistics based on distances"), the
  V-statistic over all pairs, >= 0 and 0 iff the two empirical laws coincide;
- :func:`sliced_wasserstein`: the mean over random unit directions :math:`\theta` of the 1-D
  Wasserstein-1 distance between the projections :math:`\theta^\top X`, :math:`\theta^\top Y`
  (Rabin, Peyré, Delon and Bernot, "Wasserstein barycenter and its application to texture
  mixing");
- :func:`nearest_record_distance`: for each sample the Euclidean distance to its nearest
  private record. The exact ideal denoiser reproduces training records (distance 0 at the end
  of sampling); a private sampler must not.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array
from dpopt.errors import InvalidParameterError

__all__ = ["energy_distance", "nearest_record_distance", "sliced_wasserstein"]


def _pair(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    a = as_float_array("x", x)
    b = as_float_array("y", y)
    a = a[:, None] if a.ndim == 1 else a
    b = b[:, None] if b.ndim == 1 else b
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or 0 in (a.shape[0], b.shape[0]):
        raise InvalidParameterError("y", f"shape {b.shape}",
                                    f"must be a non-empty (m, d) array matching x {a.shape}")
    return a, b


def _mean_dist(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    total = 0.0
    rows = max(1, 2**20 // max(b.shape[0], 1))
    for start in range(0, a.shape[0], rows):
        blk = a[start:start + rows]
        total += float(np.sqrt(((blk[:, None, :] - b[None, :, :]) ** 2).sum(-1)).sum())
    return total / (a.shape[0] * b.shape[0])


def energy_distance(x: ArrayLike, y: ArrayLike) -> float:
    r"""Energy distance :math:`2E|X-Y| - E|X-X'| - E|Y-Y'|` of two samples (V-statistic).

    Examples
    --------
    >>> energy_distance([[0.0], [1.0]], [[0.0], [1.0]])
    0.0
    >>> round(energy_distance([[0.0]], [[2.0]]), 12)
    4.0
    """
    a, b = _pair(x, y)
    return max(0.0, 2.0 * _mean_dist(a, b) - _mean_dist(a, a) - _mean_dist(b, b))


def sliced_wasserstein(x: ArrayLike, y: ArrayLike, *, projections: int = 128,
                       seed: int = 0) -> float:
    r"""Sliced Wasserstein-1 distance over ``projections`` random directions.

    Examples
    --------
    >>> sliced_wasserstein([[0.0]], [[2.0]], projections=4)   # in 1-D every direction is ±1
    2.0
    """
    from scipy.stats import wasserstein_distance

    a, b = _pair(x, y)
    if isinstance(projections, bool) or not isinstance(projections, int) or projections < 1:
        raise InvalidParameterError("projections", projections, "must be a positive integer")
    theta = np.random.default_rng(seed).standard_normal((projections, a.shape[1]))
    theta /= np.linalg.norm(theta, axis=1, keepdims=True)
    pa, pb = a @ theta.T, b @ theta.T
    return float(np.mean([wasserstein_distance(pa[:, i], pb[:, i])
                          for i in range(projections)]))


def nearest_record_distance(samples: ArrayLike, records: ArrayLike) -> NDArray[np.float64]:
    """Distance from each sample to its nearest record, shape (K,)."""
    from scipy.spatial import cKDTree

    a, b = _pair(samples, records)
    dist, _ = cKDTree(b).query(a)
    return np.asarray(dist, dtype=np.float64)
