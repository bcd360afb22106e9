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
* :func:`exact_whitened_bound` proves the dual lower bound in the metric of the stored
  :math:`W` (exact congruence by a float inverse Cholesky factor), so an ill-conditioned
  :math:`W` does not square its condition number into the bound;
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
from scipy.linalg import lapack

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
    "exact_whitened_bound",
    "proven_min_eigenvalue_bound",
    "ratio_bounds",
    "ratio_chunk",
    "ratio_upper_bound",
    "refine_whitened_dual",
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


def ratio_bounds(b: NDArray[np.float64], x: NDArray[np.float64], sigma: NDArray[np.float64],
                 lam_low: float | NDArray[np.float64],
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Error-bounded :math:`s^\top\Sigma^{-1}s` of every row ``s`` of ``b`` from ANY
    approximate solution ``x`` of :math:`\Sigma x = s` (rows of ``x``): with the residual
    :math:`e = s - \Sigma\hat x`, :math:`s^\top\Sigma^{-1}s = \hat x^\top s + \hat x^\top e +
    e^\top\Sigma^{-1}e \le \hat x^\top s + \|\hat x\|\|e\| + \|e\|^2/\lambda_{\min}`, every
    float operation's error bounded (the module's :math:`\gamma_n` model). Returns
    ``(upper, estimate)``, the bounds and the float :math:`\hat x^\top s`, one per row.

    Works on stacks as well: ``b`` and ``x`` of shape (n, J, d), ``sigma`` (n, d, d) and
    ``lam_low`` of shape (n, 1) bound n programs at once (the same arithmetic per row)."""
    d = sigma.shape[-1]
    g_res = _gamma(d + 1)
    g_dot = _gamma(d)
    inflate = 1.0 + _gamma(2 * d + 16)
    res = b - x @ sigma
    e_abs = np.abs(res) + g_res * (np.abs(b) + np.abs(x) @ np.abs(sigma))
    # row sums by einsum (numpy's reductions over a short last axis cost several times more)
    e_norm = np.sqrt(np.einsum("...j,...j->...", e_abs, e_abs)) * inflate
    x_norm = np.sqrt(np.einsum("...j,...j->...", x, x)) * inflate
    xs = np.einsum("...j,...j->...", x, b)
    xs_err = g_dot * np.einsum("...j,...j->...", np.abs(x), np.abs(b)) * inflate
    upper = (xs + xs_err + x_norm * e_norm + e_norm * e_norm / lam_low) * inflate + 1e-300
    return upper, xs


def ratio_chunk(
    block: NDArray[np.float64],
    start: int,
    sigma: NDArray[np.float64],
    chol: NDArray[np.float64],
    lam_low: float,
    inverse: NDArray[np.float64] | None = None,
) -> RatioChunk:
    r"""One chunk of :func:`ratio_upper_bound`: ``(start, size, bound, estimate, argmax)``.

    ``bound`` is the error-bounded maximum of :math:`s^\top\Sigma^{-1}s` over the chunk's
    vectors (``inf`` if any of them gives a non-finite value), ``estimate`` the float maximum of
    :math:`\hat x^\top s` and ``argmax`` its global index. A pure function of its arguments, so
    it can run anywhere (see :class:`ChunkMap`). :math:`\hat x` comes from the Cholesky solves,
    or, given an approximate ``inverse`` of :math:`\Sigma`, from one product with it (a tenth
    of the cost for small d): the bound of :func:`ratio_bounds` holds for any :math:`\hat x`,
    and the residual it charges grows only to about :math:`u\,\kappa(\Sigma)` relative.
    """
    b = np.asarray(block, dtype=np.float64)
    if inverse is not None:
        x = b @ inverse
    else:
        x = sla.cho_solve((chol, True), b.T, check_finite=False).T
    upper, xs = ratio_bounds(b, x, sigma, lam_low)
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


#: The verification pass multiplies by an inverse of Sigma (instead of Cholesky solves) when
#: ||Sigma||_inf / lambda_low is at most this: the bound then carries an extra relative residual
#: of about u times this ratio (2e-12), below every margin of the check.
_INVERSE_MAX_COND = 1e4


def _small_inverse(sigma: NDArray[np.float64], chol: NDArray[np.float64],
                   lam_low: float) -> NDArray[np.float64] | None:
    """The inverse of Sigma from its Cholesky factor (LAPACK potri) when Sigma is well
    conditioned (:data:`_INVERSE_MAX_COND`, by the infinity norm over the certified lower bound
    on lambda_min), else ``None`` (the pass then solves with the factor)."""
    if not float(np.abs(sigma).sum(axis=1).max()) <= _INVERSE_MAX_COND * lam_low:
        return None
    low, info = lapack.dpotri(chol, lower=1)
    if info != 0:
        return None
    inverse = np.tril(low)
    inverse += np.tril(low, -1).T
    return inverse if bool(np.isfinite(inverse).all()) else None


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
    inverse = _small_inverse(sigma, chol, lam_low)
    if chunk_map is None:
        results = [ratio_chunk(block, start, sigma, chol, lam_low, inverse)
                   for start, block in source.chunks(chunk)]
    else:  # the same arguments, so the same bits as in this process
        results = list(chunk_map(ratio_chunk, source, chunk, (sigma, chol, lam_low, inverse)))
    return combine_ratio_chunks(results, count)


# ----------------------------------------------------------------------------- the W-metric


def _exact_to_float(ex: ExactArray) -> NDArray[np.float64]:
    """The exact dyadic array rounded to the nearest floats (entrywise)."""
    shape = ex.ints.shape
    den = 1 << ex.scale
    out = np.array([float(Fraction(int(v), den)) for v in ex.ints.ravel()], dtype=np.float64)
    return out.reshape(shape)


def proven_min_eigenvalue_bound(matrix: ExactArray, shift: float) -> float:
    r"""A proven lower bound on :math:`\lambda_{\min}(M)` of an exact symmetric matrix by one
    floating-point Cholesky factorisation of :math:`\mathrm{fl}(M) - \sigma I`
    (``shift`` :math:`= \sigma \ge 0`), or ``-inf`` when the factorisation breaks down.

    With :math:`M_f = \mathrm{fl}(M)` (nearest floats: :math:`|M - M_f| \le u|M_f| + 2^{-1074}`),
    :math:`C = \mathrm{fl}(M_f - \sigma I)` (diagonal rounded, :math:`|M_f - \sigma I - C| \le
    u|C|`) and :math:`R` the computed Cholesky factor of :math:`C`, the backward error theorem
    for Cholesky (Higham, "Accuracy and Stability of Numerical Algorithms", Theorem 10.3; any
    order of the inner products) gives :math:`R^\top R = C + \Delta C`,
    :math:`|\Delta C| \le \gamma_{d+1}|R^\top||R|`. Hence

    .. math:: M = R^\top R + \sigma I + (M - M_f) + (M_f - \sigma I - C) - \Delta C
              \succeq (\sigma - e_1 - e_2 - e_3) I

    with :math:`e_i` the Frobenius norms of the three error matrices, each bounded above in
    float with its own rounding covered (the idea of Rump, "Verification of positive
    definiteness", BIT 2006). Cheap (one O(d^3) float factorisation) where fraction-free
    elimination on the exact entries (:func:`certify_psd`) grows with their bit length.
    """
    mf = _exact_to_float(matrix)
    if not np.all(np.isfinite(mf)):
        return -math.inf
    d = mf.shape[0]
    inflate = 1.0 + _gamma(2 * d + 16)
    e1 = float(np.linalg.norm(_U * np.abs(mf) + 5e-324)) * inflate
    c = mf - shift * np.eye(d)
    e2 = float(np.linalg.norm(_U * np.abs(np.diag(c)))) * inflate
    try:
        r = sla.cholesky(c, lower=False, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return -math.inf
    if not np.all(np.isfinite(r)):
        return -math.inf
    ar = np.abs(r)
    e3 = _gamma(d + 1) * float(np.linalg.norm(ar.T @ ar)) * inflate * inflate
    return float(shift - (e1 + e2 + e3) * inflate)


def exact_whitened_bound(
    weight: NDArray[np.float64],
    dual: FactoredDual,
    dual_value: float,
    noise_floor: float,
    margins: tuple[float, ...] = (1e-13, 1e-11, 1e-9, 1e-7, 1e-5),
) -> tuple[float, float]:
    r"""Lower bound :math:`tD` on the optimum, proven in the metric of the *stored* :math:`W`.

    With :math:`S = H + \sum_j\lambda_j u_j u_j^\top` the dual's matrix (:math:`H = GG^\top`,
    left out when :math:`\eta = 0`, where it does not enter :math:`D`), weak duality gives
    :math:`\operatorname{tr}(W\Sigma) \ge tD` for every feasible :math:`\Sigma` as soon as
    :math:`W - tS \succeq 0`, :math:`t \ge 0`. That is proven without squaring the condition
    number of :math:`W`: :math:`X` is the float inverse of the float Cholesky factor of
    :math:`W`, a lower-triangular float matrix with a nonzero diagonal, hence *exactly*
    nonsingular, so by congruence

    .. math:: W - tS \succeq 0 \iff A - tB \succeq 0,\qquad A = XWX^\top,\ B = XSX^\top,

    with :math:`A` and :math:`B` computed **exactly** (Python integers on the dyadic values).
    :math:`A` is close to the identity whatever the condition of :math:`W` (about
    :math:`u\,\kappa(W)` away from it; exactness makes that harmless), so :math:`t` is found from
    the float generalised eigenvalue :math:`\lambda_{\max}(B, A)` and proven by
    :func:`proven_min_eigenvalue_bound` on the exact :math:`A - tB`, with a relative margin on
    :math:`t` from ``margins`` (the smallest that proves). The only limit left is the dual
    itself: :math:`t \le 1/\lambda_{\max}(S, W)` exactly, so the bound reaches what the stored
    dual carries.

    Returns
    -------
    (lower, t)
        ``lower = t * dual_value`` rounded down (0 when nothing is proven or ``dual_value`` <= 0).
    """
    d = weight.shape[0]
    if not dual_value > 0.0:
        return 0.0, 0.0
    try:
        chol = sla.cholesky(0.5 * (weight + weight.T), lower=True, check_finite=False)
        x = np.tril(sla.solve_triangular(chol, np.eye(d), lower=True, check_finite=False))
    except (np.linalg.LinAlgError, ValueError):
        return 0.0, 0.0
    diag = np.diag(x)
    if not (np.all(np.isfinite(x)) and np.all(diag != 0.0)):
        return 0.0, 0.0
    ex = ExactArray.of(x)
    a_ex = ex @ ExactArray.of(weight) @ ex.T
    k = int(dual.multipliers.shape[0])
    parts: list[ExactArray] = []
    if k:
        xu = ex @ ExactArray.of(dual.directions.reshape(k, d)).T  # (d, k)
        lam = ExactArray.of(dual.multipliers)
        parts.append(ExactArray(xu.ints * lam.ints.reshape(1, k), xu.scale + lam.scale) @ xu.T)
    g = dual.floor_factor.reshape(d, -1)
    if noise_floor > 0.0 and g.shape[1]:
        xg = ex @ ExactArray.of(g)
        parts.append(xg @ xg.T)
    if not parts:
        return 0.0, 0.0
    b_ex = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    a_f, b_f = _exact_to_float(a_ex), _exact_to_float(b_ex)
    if not (np.all(np.isfinite(a_f)) and np.all(np.isfinite(b_f))):
        return 0.0, 0.0
    try:
        top = float(sla.eigh(b_f, a_f, eigvals_only=True, check_finite=False)[-1])
    except (np.linalg.LinAlgError, ValueError):
        return 0.0, 0.0
    if not (math.isfinite(top) and top > 0.0):
        return 0.0, 0.0
    base = min(1.0, 1.0 / top)
    for m in margins:
        t = base * (1.0 - m)
        t_ex = ExactArray.of(t)
        m_ex = a_ex - ExactArray(b_ex.ints * t_ex.ints, b_ex.scale + t_ex.scale)
        shift = 0.5 * m * base  # lambda_min(A - tB) is about m * lambda_min(A) ~ m
        if proven_min_eigenvalue_bound(m_ex, shift) > 0.0:
            lower = Fraction(dual_value) * Fraction(t)
            return round_down(lower), t
    return 0.0, 0.0


#: Largest number of unknowns (d(d+1)/2 + k) for which :func:`refine_whitened_dual` runs.
MAX_REFINE_UNKNOWNS = 600


def refine_whitened_dual(
    weight: NDArray[np.float64],
    support_vectors: NDArray[np.float64],
    bound: float,
    dual: FactoredDual,
    covariance: NDArray[np.float64],
) -> FactoredDual | None:
    r"""A dual recomputed against the *stored* :math:`W` on the given dual's support, or None.

    A solver's dual is optimal for its own factorisation of :math:`W`, which differs from the
    stored matrix by about :math:`u\,\kappa(W)` in the weak directions; for a rotated :math:`W`
    of condition 1e12 that caps :func:`exact_whitened_bound` near 1e-6 whatever the check does.
    This re-solves the optimality conditions of the problem restricted to the support, in the
    whitened coordinates of the stored :math:`W` (:math:`A = XWX^\top` computed exactly, then
    rounded; :math:`\tilde s_j = L^\top s_j`; :math:`\tilde\Sigma = L^\top\Sigma L`):

    .. math:: A - \sum_j\lambda_j\tilde\Sigma^{-1}\tilde s_j\tilde s_j^\top\tilde\Sigma^{-1}
              - XGG^\top X^\top = 0,\qquad \tilde s_j^\top\tilde\Sigma^{-1}\tilde s_j = q,

    by Powell's hybrid method (``scipy.optimize.root``) from the stored covariance and
    multipliers, and returns the directions :math:`u_j = L\tilde\Sigma^{-1}\tilde s_j` with the
    new multipliers. It is only a *candidate*: the caller proves whatever bound it gives
    (:func:`exact_whitened_bound`) and keeps the better one, so nothing here needs to be exact.
    Runs when :math:`d(d+1)/2 + k \le` :data:`MAX_REFINE_UNKNOWNS`.
    """
    from scipy.optimize import root

    d = weight.shape[0]
    k = int(dual.multipliers.shape[0])
    iu = np.triu_indices(d)
    n_sym = len(iu[0])
    if k == 0 or n_sym + k > MAX_REFINE_UNKNOWNS:
        return None
    try:
        chol = sla.cholesky(0.5 * (weight + weight.T), lower=True, check_finite=False)
        x = np.tril(sla.solve_triangular(chol, np.eye(d), lower=True, check_finite=False))
        ex = ExactArray.of(x)
        a_f = _exact_to_float(ex @ ExactArray.of(weight) @ ex.T)
        g = dual.floor_factor.reshape(d, -1)
        if g.shape[1]:
            xg = ex @ ExactArray.of(g)
            a_f = a_f - _exact_to_float(xg @ xg.T)
        s_t = support_vectors @ chol  # rows (L^T s_j)^T
        sig0 = chol.T @ covariance @ chol
    except (np.linalg.LinAlgError, ValueError):
        return None

    def unpack(z: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        m = np.zeros((d, d))
        m[iu] = z[:n_sym]
        return m + m.T - np.diag(np.diag(m)), z[n_sym:]

    def residual(z: NDArray[np.float64]) -> NDArray[np.float64]:
        sig, lam = unpack(z)
        y = np.linalg.solve(sig, s_t.T)
        r = a_f - (y * lam) @ y.T
        return np.concatenate([r[iu], np.sum(s_t.T * y, axis=0) - bound])

    z0 = np.concatenate([sig0[iu], dual.multipliers])
    try:
        with np.errstate(all="ignore"):
            sol = root(residual, z0, method="hybr", options={"xtol": 1e-14})
            sig, lam = unpack(sol.x)
            y = np.linalg.solve(sig, s_t.T)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError):
        return None
    u = (chol @ y).T
    lam = np.clip(lam, 0.0, None)
    if not (np.all(np.isfinite(u)) and np.all(np.isfinite(lam))):
        return None
    return FactoredDual(dual.support, lam, u, g.copy())
