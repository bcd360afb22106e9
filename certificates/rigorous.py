r"""Exact-arithmetic and error-bounded pieces of the covariance certificate.

The user's doubles are taken as exact dyadic rationals ``m 2^-K`` and every quantity of the
*support-sized* work (d x d matrices, the k support vectors) is computed exactly with Python
integers (numpy ``object`` arrays), then rounded outward to a float:

* :func:`certify_psd` proves ``A - t I`` positive definite by fraction-free (Bareiss) elimination:
  all leading principal minors are positive (Sylvester's criterion);
* :func:`certified_min_eigenvalue` returns a proven lower bound on :math:`\lambda_{\min}(A)`;
* :func:`exact_dual_bound` evaluates :math:`D = \eta\operatorname{tr}GG^\top +
  \sum_j\lambda_j(2u_j^\top s_j - q)` and :math:`\|E\|_F`,
  :math:`E = W - GG^\top - \sum_j\lambda_j u_ju_j^\top` exactly and returns the lower bound
  :math:`D/(1 + \|E\|_F/w_{\min})` rounded down;
* :func:`exact_trace_product` returns :math:`\operatorname{tr}(W\Sigma)` rounded up;
* :func:`ratio_upper_bound` bounds :math:`\max_j s_j^\top\Sigma^{-1}s_j` from above over ALL J
  vectors with one float pass (Cholesky solves and the residual :math:`s - \Sigma\hat x`) plus a
  forward error bound, using one exact d x d fact: :math:`\lambda_{\min}(\Sigma)` bounded below.

Float error model of the pass (standard, independent of the summation order, so valid for any
BLAS): a computed dot product of length n has absolute error at most :math:`\gamma_n\sum|x_iy_i|`,
:math:`\gamma_n = nu/(1-nu)`, :math:`u = 2^{-53}`, barring underflow (a tiny absolute term is
added). With :math:`\hat x = \mathrm{fl}(\Sigma^{-1}s)` (any accuracy) and the residual
:math:`e = s - \Sigma\hat x` bounded elementwise by
:math:`|\mathrm{fl}(e)| + \gamma_{d+1}(|s| + |\Sigma||\hat x|)`,

.. math::

    s^\top\Sigma^{-1}s = \hat x^\top s + \hat x^\top e + e^\top\Sigma^{-1}e
    \le \hat x^\top s + \|\hat x\|\|e\| + \|e\|^2/\lambda_{\min}(\Sigma).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from certificates.problem import DEFAULT_CHUNK, FactoredDual, VectorSource
from certificates.rounding import round_down, round_up, sqrt_up

__all__ = [
    "ChunkMap",
    "ExactArray",
    "RatioChunk",
    "certified_min_eigenvalue",
    "certify_psd",
    "combine_ratio_chunks",
    "exact_dual_bound",
    "exact_trace_product",
    "ratio_chunk",
    "ratio_upper_bound",
    "round_down",
    "round_up",
]

_U = 2.0**-53


def _gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u), slightly enlarged to be safe against its own rounding."""
    return (n * _U / (1.0 - n * _U)) * (1.0 + 1e-6)


class ExactArray:
    """An exact dyadic array ``ints * 2**-scale`` (ints: numpy object array of Python ints)."""

    __slots__ = ("ints", "scale")

    def __init__(self, ints: NDArray[np.object_], scale: int) -> None:
        self.ints = ints
        self.scale = scale

    @classmethod
    def of(cls, a: ArrayLike) -> ExactArray:
        """The exact value of a float array (or scalar)."""
        arr = np.asarray(a, dtype=np.float64)
        ratios = [float(x).as_integer_ratio() for x in arr.ravel()]
        scale = max((den.bit_length() - 1 for _, den in ratios), default=0)
        ints = [num << (scale - (den.bit_length() - 1)) for num, den in ratios]
        out = np.empty(arr.size, dtype=object)
        out[:] = ints
        return cls(out.reshape(arr.shape), scale)

    def _aligned(self, other: ExactArray) -> tuple[Any, Any, int]:
        k = max(self.scale, other.scale)
        return (self.ints * (1 << (k - self.scale)), other.ints * (1 << (k - other.scale)), k)

    def __add__(self, other: ExactArray) -> ExactArray:
        a, b, k = self._aligned(other)
        return ExactArray(a + b, k)

    def __sub__(self, other: ExactArray) -> ExactArray:
        a, b, k = self._aligned(other)
        return ExactArray(a - b, k)

    def __mul__(self, other: ExactArray) -> ExactArray:
        return ExactArray(self.ints * other.ints, self.scale + other.scale)

    def __matmul__(self, other: ExactArray) -> ExactArray:
        return ExactArray(self.ints @ other.ints, self.scale + other.scale)

    @property
    def T(self) -> ExactArray:
        return ExactArray(self.ints.T, self.scale)

    def sum(self) -> Fraction:
        return Fraction(int(np.sum(self.ints)) if self.ints.size else 0, 1 << self.scale)

    def fraction(self) -> Fraction:
        """The value of a 0-d array as a Fraction."""
        return Fraction(int(self.ints), 1 << self.scale)


def _bareiss_positive(m: Any) -> bool:
    """True iff every leading principal minor of the symmetric integer matrix m is > 0."""
    a = [[int(v) for v in row] for row in m]
    n = len(a)
    prev = 1
    for k in range(n):
        piv = a[k][k]
        if piv <= 0:
            return False
        rowk = a[k]
        for i in range(k + 1, n):
            rowi = a[i]
            aik = rowi[k]
            for j in range(k + 1, n):
                rowi[j] = (rowi[j] * piv - aik * rowk[j]) // prev
        prev = piv
    return True


def certify_psd(matrix: ExactArray | NDArray[np.float64], shift: float = 0.0) -> bool:
    """Prove ``matrix - shift * I`` positive definite exactly (False = not proven)."""
    ex = matrix if isinstance(matrix, ExactArray) else ExactArray.of(matrix)
    n = ex.ints.shape[0]
    if shift != 0.0:
        ex = ex - ExactArray.of(np.eye(n) * shift)
    return _bareiss_positive(ex.ints)


def certified_min_eigenvalue(
    matrix: NDArray[np.float64], factors: tuple[float, ...] = (1 - 1e-12, 1 - 1e-9, 1 - 1e-6,
                                                               1 - 1e-3, 0.9, 0.5, 0.1)
) -> float:
    """A proven lower bound on lambda_min of a symmetric float matrix (0.0 if none is found).

    Tries ``t = f * lambda_min(float)`` for the given factors, largest first, and returns the first
    ``t`` for which ``matrix - t I`` is proven positive definite by :func:`certify_psd`.
    """
    lam = float(sla.eigvalsh(matrix)[0])
    if lam > 0:
        for f in factors:
            t = f * lam
            if certify_psd(matrix, t):
                return t
    return 0.0


def exact_trace_product(weight: NDArray[np.float64], sigma: NDArray[np.float64]) -> float:
    """tr(W Sigma) for symmetric W, Sigma, computed exactly and rounded up."""
    return round_up((ExactArray.of(weight) * ExactArray.of(sigma)).sum())


def exact_dual_bound(
    support_vectors: NDArray[np.float64],
    weight: NDArray[np.float64],
    bound: float,
    noise_floor: float,
    dual: FactoredDual,
    w_min: float,
) -> tuple[float, float, float]:
    r"""Rigorous self-bounding lower bound

    Parameters
    ----------
    support_vectors : ndarray, shape (k, d)
        :math:`s_j` for ``j`` in ``dual.support``.
    w_min : float
        A proven lower bound on :math:`\lambda_{\min}(W)`, > 0.

    Returns
    -------
    lower, d_value, e_norm : float
        ``lower`` <= D / (1 + ||E||_F / w_min) (rounded down), D (rounded down) and an upper
        bound on ``||E||_F``.
    """
    lam = ExactArray.of(dual.multipliers)
    u = ExactArray.of(dual.directions)
    s = ExactArray.of(support_vectors)
    g = ExactArray.of(dual.floor_factor)
    w = ExactArray.of(weight)
    d = weight.shape[0]
    k = dual.multipliers.shape[0]
    q = ExactArray.of(bound).fraction()
    eta = ExactArray.of(noise_floor).fraction()
    h = g @ g.T if dual.floor_factor.shape[1] else ExactArray.of(np.zeros((d, d)))
    if k:
        lam_col = ExactArray(lam.ints.reshape(k, 1), lam.scale)
        lam_u = ExactArray(lam_col.ints * u.ints, lam.scale + u.scale)  # (k, d)
        a_sum = lam_u.T @ u
        us = u * s  # (k, d) elementwise
        us_rows = ExactArray(np.sum(us.ints, axis=1), us.scale)
        uts = sum(
            (Fraction(int(lam.ints[i]), 1 << lam.scale) * Fraction(int(us_rows.ints[i]),
                                                                  1 << us_rows.scale)
             for i in range(k)),
            Fraction(0),
        )
        lam_total = lam.sum()
        e = w - h - a_sum
    else:
        uts, lam_total = Fraction(0), Fraction(0)
        e = w - h
    tr_h = Fraction(int(np.trace(h.ints)), 1 << h.scale)
    dval = eta * tr_h + 2 * uts - q * lam_total
    e2 = Fraction(int(np.sum(e.ints * e.ints)), 1 << (2 * e.scale))
    e_norm = sqrt_up(e2)
    lower = dval / (1 + Fraction(e_norm) / Fraction(w_min))
    return round_down(lower), round_down(dval), e_norm


#: One chunk's share of the verification pass: ``(start, size, bound, estimate, argmax)``.
RatioChunk = tuple[int, int, float, float, int]


class ChunkMap(Protocol):
    """Runs the verification pass's per-chunk function over a source's chunks, elsewhere.

    ``chunk_map(fn, source, chunk, args)`` must return ``[fn(block, start, *args) for start,
    block in source.chunks(chunk)]``, in that order: the blocks holding the same vectors, bit for
    bit, as ``source.chunks(chunk)`` yields them. A distributed implementation (e.g. on a Dask
    cluster) generates the blocks where it runs ``fn``; this module only ever combines what comes
    back (:func:`combine_ratio_chunks`), and rejects results that do not tile ``0 .. J - 1``.
    """

    def __call__(self, fn: Callable[..., RatioChunk], source: VectorSource, chunk: int,
                 args: tuple[Any, ...]) -> list[RatioChunk]: ...


def ratio_chunk(
    block: NDArray[np.float64],
    start: int,
    sigma: NDArray[np.float64],
    chol: NDArray[np.float64],
    lam_low: float,
) -> RatioChunk:
    r"""One chunk of :func:`ratio_upper_bound`: ``(start, size, bound, estimate, argmax)``.

    ``bound`` is the error-bounded maximum of :math:`s^\top\Sigma^{-1}s` over the chunk's
    vectors (``inf`` if any of them gives a non-finite value), ``estimate`` the float maximum of
    :math:`\hat x^\top s` and ``argmax`` its global index. A pure function of its arguments, so
    it can run anywhere (see :class:`ChunkMap`).
    """
    b = np.asarray(block, dtype=np.float64)
    d = chol.shape[0]
    abs_sigma = np.abs(sigma)
    g_res = _gamma(d + 1)
    g_dot = _gamma(d)
    inflate = 1.0 + _gamma(2 * d + 16)
    x = sla.cho_solve((chol, True), b.T, check_finite=False).T
    res = b - x @ sigma
    e_abs = np.abs(res) + g_res * (np.abs(b) + np.abs(x) @ abs_sigma)
    e_norm = np.sqrt(np.sum(e_abs * e_abs, axis=1)) * inflate
    x_norm = np.sqrt(np.sum(x * x, axis=1)) * inflate
    xs = np.sum(x * b, axis=1)
    xs_err = g_dot * np.sum(np.abs(x * b), axis=1) * inflate
    upper = (xs + xs_err + x_norm * e_norm + e_norm * e_norm / lam_low) * inflate + 1e-300
    bound = float(np.max(upper)) if np.all(np.isfinite(upper)) else math.inf
    j = int(np.argmax(xs))
    return int(start), int(b.shape[0]), bound, float(xs[j]), int(start) + j


def combine_ratio_chunks(results: list[RatioChunk], count: int) -> tuple[float, float, int]:
    """Combine the chunks of the verification pass, in index order: ``(bound, estimate,
    argmax)`` over all ``count`` vectors (the first index attaining the estimate wins).

    Raises ``ValueError`` unless the chunks tile ``0 .. count - 1`` exactly, in order.
    """
    best, est, arg = -math.inf, -math.inf, -1
    expect = 0
    for item in results:
        start, size, bound, estimate, argmax = item
        if start != expect or size < 1:
            raise ValueError(
                f"verification pass: chunk at {start} (size {size}) does not follow {expect}"
            )
        expect = start + size
        if not bound <= best:  # NaN or larger: a NaN bound makes the pass fail (inf below)
            best = bound if bound == bound else math.inf
        if estimate > est:
            est, arg = estimate, argmax
    if expect != count:
        raise ValueError(f"verification pass covered {expect} of {count} vectors")
    if not np.isfinite(best):
        return math.inf, est, arg
    return best, est, arg


def ratio_upper_bound(
    source: VectorSource,
    sigma: NDArray[np.float64],
    chol: NDArray[np.float64],
    lam_low: float,
    *,
    chunk: int = DEFAULT_CHUNK,
    chunk_map: ChunkMap | None = None,
) -> tuple[float, float, int]:
    r"""Upper bound on :math:`\max_j s_j^\top\Sigma^{-1}s_j` over ALL vectors of ``source``.

    For each vector, :math:`\hat x \approx \Sigma^{-1}s` (Cholesky solves with ``chol``) and the
    residual :math:`e = s - \Sigma\hat x` give the identity
    :math:`s^\top\Sigma^{-1}s = \hat x^\top s + \hat x^\top e + e^\top\Sigma^{-1}e`, hence

    .. math::

        s^\top\Sigma^{-1}s \le \hat x^\top s + \|\hat x\|\,\|e\| + \|e\|^2/\lambda_{\min},

    with every float operation's error bounded (:math:`\gamma_n` model, see the module notes) and
    ``lam_low`` :math:`\le\lambda_{\min}(\Sigma)` (proven by :func:`certified_min_eigenvalue` in
    rigorous use). The residual is second order, so the bound is tight even when :math:`\Sigma`
    is very ill-conditioned (e.g. a singular optimum with a tiny ridge off the span of the
    :math:`s_j`), where bounds through :math:`\Sigma \succeq (1-\epsilon)LL^\top` lose
    :math:`u\,\kappa(\Sigma)`. Returns ``(bound, estimate, argmax)``: the error-bounded maximum,
    the plain float maximum of :math:`\hat x^\top s` and the index attaining it.

    The pass is chunk by chunk (:func:`ratio_chunk`), here by default; ``chunk_map`` runs the
    chunks elsewhere (e.g. as tasks on a cluster, :class:`ChunkMap`), and the results are combined
    here in index order (:func:`combine_ratio_chunks`), so the answer is the same.
    """
    if not lam_low > 0.0:
        return math.inf, math.inf, -1
    count = int(source.count)
    if chunk_map is None:
        results = [ratio_chunk(block, start, sigma, chol, lam_low)
                   for start, block in source.chunks(chunk)]
    else:
        results = list(chunk_map(ratio_chunk, source, chunk, (sigma, chol, lam_low)))
    return combine_ratio_chunks(results, count)
