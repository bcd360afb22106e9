r"""The Mahalanobis sup :math:`\rho^*(\Sigma) = \sup_{s\in S} s^\top\Sigma^{-1}s` of a sensitivity
set.

Every Gaussian guarantee of a release :math:`f(D) + N(0, \Sigma)` is a function of this one number
(theory page, "One number describes a Gaussian release"): :func:`sup_mahalanobis` computes it by
enumeration with a residual-based floating-point margin, or bounds it by an SDP relaxation for a box
domain too large to enumerate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cho_factor, cho_solve, eigh

from certificates.problem import DEFAULT_CHUNK, VectorSource
from certificates.rigorous import ratio_upper_bound
from certificates.validate import as_psd_matrix
from dpopt.covariance.sensitivity import (
    BoxTwoRecordSet,
    BoxVertexDifferences,
    EllipsoidDifferences,
    as_vector_source,
    chunk_size_of,
)
from dpopt.errors import (
    AccuracyWarning,
    InvalidParameterError,
    SolverError,
)

#: Largest box dimension whose 2^(d-1) vertex differences :func:`sup_mahalanobis` enumerates.
MAX_ENUMERATION_DIM = 20

_U = float(np.finfo(np.float64).eps) / 2.0

__all__ = [
    "MAX_ENUMERATION_DIM",
    "MahalanobisSup",
    "sup_mahalanobis",
]


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
    # Cholesky backward error (d+1)u|L||L^T| plus triangular-solve error d u |L| (Higham,
    # "Accuracy and Stability of Numerical Algorithms", chapters 10 and 8),
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


def sup_mahalanobis(
    vectors: ArrayLike | VectorSource,
    covariance: ArrayLike,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    max_enumeration_dim: int = MAX_ENUMERATION_DIM,
) -> MahalanobisSup:
    r"""The Mahalanobis sup :math:`\rho^*(\Sigma) = \sup_j s_j^\top \Sigma^{-1} s_j`.

    For :class:`~dpopt.covariance.sensitivity.EllipsoidDifferences` (uniform query over a ball or
    an ellipsoid) the sup is the closed form :math:`4\lambda_{\max}(E^\top\Sigma^{-1}E)`, with
    an exactly proven upper bound (``method="closed_form"``).

    For a :class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet` (records anywhere in a box) the
    sup is certified by :func:`certificates.box_sup.certified_box_sup`: ``upper`` (= ``value``)
    is a proven bound, ``lower`` is attained by the pair behind ``vector``, ``exact=False``.

    Otherwise it enumerates the set in chunks: Cholesky solves :math:`\hat x = \Sigma^{-1}s` and
    the value :math:`\hat x^\top s`, with the rigorous residual bound of
    :func:`certificates.rigorous.ratio_upper_bound` as ``upper``. For a
    :class:`BoxVertexDifferences` of dimension above ``max_enumeration_dim`` (a max-cut-type
    problem) it returns instead the valid upper bound of the SDP relaxation

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
    if isinstance(vectors, EllipsoidDifferences):
        upper, lower, vec = vectors.sup(covariance)
        return MahalanobisSup(value=upper, upper=upper, lower=lower, exact=False,
                              method="closed_form", index=None, vector=vec,
                              margin=upper / lower - 1.0 if lower > 0 else 0.0)
    if isinstance(vectors, BoxTwoRecordSet):
        from dpopt.covariance.continuous import box_sup_as_mahalanobis

        cov = as_psd_matrix("covariance", covariance, dim=vectors.dim)
        return box_sup_as_mahalanobis(vectors, vectors.sup(cov))
    src = as_vector_source(vectors)
    d = int(src.dim)
    cov = as_psd_matrix("covariance", covariance, dim=d)
    chunk_size = chunk_size_of(chunk_size)
    box = src if isinstance(src, BoxVertexDifferences) and d > max_enumeration_dim else None
    chol, margin, eig = _cholesky_and_margin(cov, warn=box is not None)
    if box is not None:
        return _box_sdp_bound(box, chol, margin)
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
