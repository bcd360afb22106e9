r"""Rényi DP of the subsampled Gaussian mechanism, and its conversion to (ε, δ).

A release with Mahalanobis bound :math:`q` (``sup_s s^T Σ^{-1} s <= q``) is a Gaussian mechanism
with noise multiplier :math:`\sigma = 1/\sqrt q`. Run on a Poisson subsample (each record kept with
probability :math:`p`), under add/remove neighbours, its Rényi divergence of integer order
:math:`\alpha \ge 2` is at most (Mironov, Talwar & Zhang, "Rényi Differential Privacy of the
Sampled Gaussian Mechanism", Sec. 3.3; the worse of the two directions is the one below)

.. math::

    \varepsilon_\alpha = \frac{1}{\alpha - 1}\log A_\alpha,\qquad
    A_\alpha = \sum_{k=0}^{\alpha}\binom{\alpha}{k}(1-p)^{\alpha-k}p^k
               \exp\!\Big(\frac{(k^2-k)\,q}{2}\Big),

a finite sum of positive terms, computed here in log form (independently of any library). For
a fractional order between two integers :math:`a < \alpha < a + 1` the value used is the
log-convex interpolation :math:`(\alpha-1)\varepsilon_\alpha \le (a+1-\alpha)(a-1)\varepsilon_a
+ (\alpha-a)\,a\,\varepsilon_{a+1}` — valid because :math:`(\alpha-1)D_\alpha` is a cumulant
generating function, convex in α (Hölder's inequality) — rather than Mironov–Talwar–Zhang's
infinite series for fractional orders, whose numerical truncation has no certified tail bound.
Without subsampling (:math:`p = 1`) the curve is exact: :math:`\varepsilon_\alpha = \alpha q/2`.

Sampling **without replacement** (fixed batch size, replace-one neighbours) uses the bound of
Wang, Balle & Kasiviswanathan, "Subsampled Rényi Differential Privacy and Analytical Moments
Accountant" (Thm. 9/27), as implemented by Google's ``dp-accounting`` (wrapped: its errors never
reach the caller).

RDP composes by addition; (ε, δ) follows from the conversion of Balle, Barthe, Gaboardi, Hsu &
Sato, "Hypothesis Testing Interpretations and Rényi Differential Privacy" (Thm. 21; also
Canonne, Kamath & Steinke):

.. math:: \varepsilon = \min_\alpha\ \varepsilon_\alpha + \log(1-1/\alpha)
          - \frac{\log\delta + \log\alpha}{\alpha-1}.

Every value is rounded up by a relative margin covering floating-point error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpopt.errors import InvalidParameterError, SolverError
from dpopt.relation import required_sampling

__all__ = [
    "DEFAULT_ORDERS",
    "rdp_epsilon_from_curve",
    "rdp_log_delta_from_curve",
    "subsampled_gaussian_rdp",
]

#: Orders used by default: fractional orders in (1, 2) and up to 16, every integer to 64, then a
#: geometric tail to 1024.
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1.0 + k / 8.0 for k in range(1, 8)]
    + [2.0 + k / 4.0 for k in range(0, 56)]
    + [float(a) for a in range(16, 65)]
    + [72.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 256.0, 320.0, 384.0, 512.0, 768.0, 1024.0]
)

#: Relative margin on every RDP value (log-sum-exp of at most ~1000 positive terms is accurate to
#: a few ulps times the number of terms).
_RDP_MARGIN = 1e-10


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x > 0, without overflow or cancellation."""
    with np.errstate(divide="ignore"):
        return np.where(x > 1.0, x + np.log(-np.expm1(-x)), np.log(np.expm1(np.minimum(x, 1.0))))


def _log_a_int(p: float, q: float, alpha: int) -> float:
    r"""log A_α for integer α >= 2, as log1p(A_α - 1) with
    :math:`A_\alpha - 1 = \sum_{k\ge2}\binom{\alpha}{k}(1-p)^{\alpha-k}p^k(e^{(k^2-k)q/2}-1)`
    (the binomial weights sum to 1): positive terms, no cancellation when A_α is close to 1."""
    k = np.arange(2, alpha + 1, dtype=np.float64)
    log_binom = special.gammaln(alpha + 1.0) - special.gammaln(k + 1.0) - special.gammaln(
        alpha - k + 1.0
    )
    terms = (log_binom + k * math.log(p) + (alpha - k) * math.log1p(-p)
             + _log_expm1((k * k - k) * (q / 2.0)))
    return float(np.logaddexp(0.0, special.logsumexp(terms)))


def _cgf_int(p: float, q: float, alpha: int) -> float:
    """(α - 1) ε_α at an integer order α >= 1 (0 at α = 1)."""
    if alpha <= 1:
        return 0.0
    if p == 1.0:
        return (alpha - 1) * alpha * q / 2.0
    return max(_log_a_int(p, q, alpha), 0.0)


def _rdp_poisson(p: float, q: float, alpha: float, known: dict[int, float] | None = None
                 ) -> float:
    """ε_α of one Poisson-subsampled release; ``known`` memoises the integer-order values
    :func:`_cgf_int` across the orders of one curve (a fractional order needs two of them)."""
    if p == 1.0:
        return alpha * q / 2.0
    cgf_at = known if known is not None else {}

    def at(a: int) -> float:
        if a not in cgf_at:
            cgf_at[a] = _cgf_int(p, q, a)
        return cgf_at[a]

    lo = math.floor(alpha)
    if lo == alpha:
        return at(int(alpha)) / (alpha - 1.0)
    t = alpha - lo
    cgf = (1.0 - t) * at(lo) + t * at(lo + 1)
    return cgf / (alpha - 1.0)


def _rdp_without_replacement(p: float, q: float, orders: Sequence[float]) -> NDArray[np.float64]:
    """WBK bound at the integer orders needed (one library call), log-convex interpolation at
    fractional orders (as for Poisson sampling)."""
    from dpopt.accounting import _dp_accounting as lib

    needed = sorted({math.floor(a) for a in orders} | {math.ceil(a) for a in orders}
                    - {1})
    vals = lib.rdp_without_replacement(p, lib.noise_multiplier_down(q), [float(a) for a in needed])
    cgf = {1: 0.0, **{a: (a - 1) * float(v) for a, v in zip(needed, vals, strict=True)}}
    out = []
    for a in orders:
        lo = math.floor(a)
        t = a - lo
        c = cgf[lo] if t == 0 else (1.0 - t) * cgf[lo] + t * cgf[lo + 1]
        out.append(c / (a - 1.0))
    return np.asarray(out, dtype=np.float64)


def subsampled_gaussian_rdp(
    bound: float,
    sampling_rate: float = 1.0,
    orders: Sequence[float] = DEFAULT_ORDERS,
    sampling: str | None = None,
) -> NDArray[np.float64]:
    r"""RDP curve :math:`\varepsilon_\alpha` of ONE subsampled Gaussian release (rounded up).

    Parameters
    ----------
    bound : float
        Mahalanobis bound q > 0 of the release (noise multiplier :math:`1/\sqrt q`).
    sampling_rate : float
        p in (0, 1]; 1 means no subsampling.
    orders : sequence of float
        Orders α > 1.
    sampling : {"poisson", "without_replacement", "full_batch"}
        Poisson subsampling (add/remove neighbours) or a fixed-size batch drawn without
        replacement (replace-one neighbours); required when ``sampling_rate < 1`` (never
        implied), ``None`` at rate 1 is the full batch.

    Returns
    -------
    ndarray
        ε_α at each order (``inf`` where it overflows).
    """
    q = float(bound)
    p = float(sampling_rate)
    if not (q > 0.0 and math.isfinite(q)):
        raise InvalidParameterError("bound", bound, "must be a finite number > 0")
    if not 0.0 < p <= 1.0:
        raise InvalidParameterError("sampling_rate", sampling_rate, "must be in (0, 1]")
    al = np.asarray(orders, dtype=np.float64)
    if al.ndim != 1 or al.size == 0 or not np.all(np.isfinite(al)) or np.any(al <= 1.0):
        raise InvalidParameterError("orders", orders, "must be a non-empty list of finite α > 1")
    sampling = required_sampling(sampling, p).value
    if sampling == "full_batch" and p != 1.0:
        raise InvalidParameterError("sampling_rate", sampling_rate,
                                    "must be 1 with sampling='full_batch'")
    with np.errstate(over="ignore", invalid="ignore"):
        if sampling != "without_replacement" or p == 1.0:
            known: dict[int, float] = {}
            out = np.array([_rdp_poisson(p, q, float(a), known) for a in al],
                           dtype=np.float64)
        else:
            out = _rdp_without_replacement(p, q, [float(a) for a in al])
        out = np.where(np.isnan(out), np.inf, out)
        return out * (1.0 + _RDP_MARGIN) + 1e-300


def _check_curve(orders: Sequence[float], rdp: ArrayLike
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    al = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    if al.shape != r.shape or al.ndim != 1:
        raise InvalidParameterError("rdp", rdp, "must be 1-D and match the orders")
    if np.any(np.isnan(r)) or np.any(r < 0.0):
        raise SolverError("the RDP curve has NaN or negative values (numerical failure)")
    return al, r


def rdp_epsilon_from_curve(orders: Sequence[float], rdp: ArrayLike, delta: float
                           ) -> tuple[float, float]:
    r"""Smallest certified ε at δ from an RDP curve, and the order that gave it.

    :math:`\varepsilon = \min_\alpha \varepsilon_\alpha + \log(1-1/\alpha) - (\log\delta +
    \log\alpha)/(\alpha-1)`, clipped at 0, rounded up. ``inf`` if every order overflows.
    """
    al, r = _check_curve(orders, rdp)
    with np.errstate(over="ignore", invalid="ignore"):
        eps = r + np.log1p(-1.0 / al) - (math.log(delta) + np.log(al)) / (al - 1.0)
    eps = np.where(np.isnan(eps), np.inf, eps)
    k = int(np.argmin(eps))
    best = float(eps[k])
    if not math.isfinite(best):
        return math.inf, float(al[k])
    if best <= 0.0:  # (ε, δ) for some ε <= 0 implies (0, δ)
        return 0.0, float(al[k])
    return best + 1e-12 * (1.0 + best), float(al[k])


def rdp_log_delta_from_curve(orders: Sequence[float], rdp: ArrayLike, epsilon: float
                             ) -> tuple[float, float]:
    r"""Smallest certified log δ at ε from an RDP curve (same conversion), and its order.

    :math:`\log\delta = \min_\alpha (\alpha-1)(\varepsilon_\alpha - \varepsilon + \log(1-1/\alpha))
    - \log\alpha`, capped at 0 (δ <= 1), rounded up.
    """
    al, r = _check_curve(orders, rdp)
    with np.errstate(over="ignore", invalid="ignore"):
        ld = (al - 1.0) * (r - epsilon + np.log1p(-1.0 / al)) - np.log(al)
    ld = np.where(np.isnan(ld), np.inf, ld)
    k = int(np.argmin(ld))
    best = float(ld[k])
    return min(best + 1e-12 * (1.0 + abs(best)), 0.0), float(al[k])
