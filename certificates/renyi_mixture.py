r"""Proven two-sided bounds on the Rényi divergence of two noisy discrete laws (1-D).

For discrete laws :math:`P = \sum_k p_k\delta_{x_k}`, :math:`Q = \sum_l q_l\delta_{y_l}` on
:math:`\mathbb{R}` and additive noise of scale :math:`b`, the output densities are the mixtures
:math:`p = \sum_k p_k f_b(\cdot - x_k)` and :math:`q = \sum_l q_l f_b(\cdot - y_l)` and

.. math:: D_\alpha(P*N\,\|\,Q*N) = \frac{1}{\alpha-1}\log I,\qquad
          I = \int_{\mathbb{R}} p(y)^\alpha q(y)^{1-\alpha}\,dy .

This module returns an interval :math:`[D^-, D^+]` that provably contains the true divergence.
Everything is done in units of the scale (:math:`t = y/b`, atoms :math:`x_k/b`), in log domain.

Laplace noise (density :math:`e^{-|u|/b}/(2b)`)
    Between two consecutive support points of :math:`P \cup Q`, in a local coordinate
    :math:`s \in [0, \Delta]`, both mixtures have the form :math:`a e^{-s} + c e^{s}`, so with
    :math:`w = e^{2s}` the integrand is :math:`e^{-s}\varphi(w)`,
    :math:`\varphi(w) = (a + c w)^\alpha (d + g w)^{1-\alpha}`, the perspective of
    :math:`u^\alpha` composed with affine maps, hence **convex in w**. Integrating the chord of
    :math:`\varphi` against :math:`e^{-s}ds` gives the upper bound
    :math:`\tanh(\Delta/2)\,(f(0) + f(\Delta))`; Jensen's inequality with the same weight (whose
    centroid is :math:`w = e^{\Delta}`, the midpoint :math:`s = \Delta/2`) gives the lower bound
    :math:`2\sinh(\Delta/2)\,f(\Delta/2)`. Both are exact when :math:`P = Q`; pieces are split
    until the bounds meet within the requested gap. Beyond the extreme atoms both mixtures are
    single exponentials and the tails are integrated exactly. The coefficients come from prefix
    log-sums of :math:`p_k e^{\pm x_k/b}` over the sorted atoms (O(n)).

Gaussian noise :math:`N(0, \sigma^2)`
    Around a point :math:`m`, :math:`p(m+s) \propto e^{-s^2/2} M(s)` with
    :math:`M(s) = \sum_k c_k e^{(x_k - m)s}` **log-convex**. On a piece :math:`[m-\eta, m+\eta]`,
    :math:`\log M` lies below its chord through the end points and above its tangent at
    :math:`m` (slope = the posterior mean offset :math:`\sum_k w_k (x_k - m)`). Taking the chord
    for the law raised to :math:`\alpha` and the tangent for the law raised to
    :math:`1-\alpha < 0` (and vice versa for the lower bound) bounds the log-integrand by
    :math:`-s^2/2 + \lambda s + c`, integrated exactly with the normal CDF. Beyond the outermost
    grid point :math:`T` (which lies outside every atom and the integrand's centres
    :math:`\alpha x - (\alpha-1) y`), :math:`p(t)/p(T)` is bounded above through the extreme atom
    and below by Jensen through the posterior mean at :math:`T`; the tails are again Gaussian
    integrals.

:math:`\alpha = \infty` (Laplace only)
    :math:`D_\infty = \log\sup p/q`. On each piece :math:`p/q = (a + c w)/(d + g w)` is a Möbius
    function of :math:`w`, hence monotone, and it is constant beyond the extreme atoms, so the
    supremum is the largest ratio at an atom: exact up to rounding.

Rounding: every float step is covered by an explicit slack added to the upper and subtracted
from the lower bound: per elementary operation 64 units in the last place of the magnitudes
involved (numpy's ``exp``/``log``/``log1p`` are accurate to a few ulps), accumulated over the
prefix sums and the final sum. The slack is typically below 1e-9 in :math:`D_\alpha`.

A calibration claim ("scale :math:`b` is :math:`(\alpha,\varepsilon)`-Rényi Pufferfish private
for these laws, and :math:`b'` is not") is checked by :func:`check_calibration` from the laws
alone, and stored in / re-checked from a JSON file by :func:`write_mixture_certificate` /
:func:`verify_mixture_file`. The claim "b' is not private" uses the monotonicity of the true
divergence in the scale (Gaussian: adding independent noise; Laplace:
:math:`\mathrm{Lap}(b_2) = \mathrm{Lap}(b_1) * [r^2\delta_0 + (1-r^2)\mathrm{Lap}(b_2)]`,
:math:`r = b_1/b_2`): a lower bound above :math:`\varepsilon` at :math:`b'` rules out every
smaller scale. This module imports numpy and scipy only.

References
----------
1. Mironov, "Rényi Differential Privacy", CSF 2017 (Rényi divergence, Laplace moments).
2. Pierquin, Bellet, Tommasi, Boussard, "Rényi Pufferfish Privacy: General Additive Noise
   Mechanisms and Privacy Amplification by Iteration", ICML 2024.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr, ndtr

from certificates import strict_json as sj
from certificates.errors import (
    CertificateError,
    DpoptError,
    InvalidParameterError,
    InvalidTypeError,
)
from certificates.validate import as_float_array, as_scalar

__all__ = [
    "FORMAT",
    "FORMATS",
    "FORMAT_V1",
    "NOISES",
    "DivergenceBounds",
    "MixtureCertificate",
    "PairBounds",
    "check_calibration",
    "divergence_bounds",
    "read_mixture_certificate",
    "verify_mixture_file",
    "write_mixture_certificate",
]

#: Format tag of the certificate files written now (an infinite alpha or upper is ``null``).
FORMAT = "dpopt-renyi-mixture-certificate/2"
#: The previous tag, still read: it spelt an infinite alpha or upper as the string ``"inf"``.
FORMAT_V1 = "dpopt-renyi-mixture-certificate/1"
#: Every tag the reader accepts.
FORMATS = (FORMAT, FORMAT_V1)
#: Noise families with proven bounds.
NOISES = ("laplace", "gaussian")

_U = 2.0**-53  # unit roundoff
_ULPS = 64.0  # ulps allowed per elementary operation
_MAX_PIECES = 400_000  # refinement stops here (bounds stay valid, only looser)
_MAX_ROUNDS = 40
_GAUSS_TAIL = 12.0  # initial distance (in sigma) of the Gaussian grid beyond the atoms
_WINDOW = 40.0  # Gaussian mixtures: atoms farther than this (in sigma) are bounded, not summed
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

Arr = NDArray[np.float64]


@dataclass(frozen=True)
class DivergenceBounds:
    r"""A proven interval :math:`D^- \le D_\alpha(P*N\|Q*N) \le D^+`.

    Attributes
    ----------
    lower, upper : float
        The bounds (``upper`` may be ``inf``; ``lower`` is clamped at 0).
    pieces : int
        Number of integration pieces used.
    slack : float
        The rounding slack included in both bounds (in units of :math:`D`).
    """

    lower: float
    upper: float
    pieces: int
    slack: float


# ---------------------------------------------------------------------------------- helpers
def logsumexp(v: Arr) -> float:
    """log sum exp(v) of a 1-D array (-inf entries allowed; +inf propagates)."""
    if v.size == 0:
        return float("-inf")
    m = float(np.max(v))
    if not math.isfinite(m):
        return m
    return m + math.log(float(np.sum(np.exp(v - m))))


def _log_tanh_half(d: Arr) -> Arr:
    """log tanh(d/2) for d > 0, stably."""
    e = np.exp(-d)
    with np.errstate(divide="ignore"):  # a zero-width piece contributes nothing
        return np.asarray(np.log(-np.expm1(-d)) - np.log1p(e))


def _log_2sinh_half(d: Arr) -> Arr:
    """log(2 sinh(d/2)) for d > 0, stably."""
    with np.errstate(divide="ignore"):
        return np.asarray(0.5 * d + np.log(-np.expm1(-d)))


def _log_diff_ndtr(centre: Arr, half: Arr) -> tuple[Arr, Arr]:
    r"""Lower and upper bounds of :math:`\log(\Phi(m + \eta) - \Phi(m - \eta))`, elementwise,
    for exact doubles :math:`m` and :math:`\eta > 0`.

    The end points :math:`m \pm \eta` are rounded when computed (for :math:`|m| \gg \eta`, e.g.
    a steep tangent at a large Rényi order, the computed interval may even be empty), so the
    upper bound is taken over the outward-rounded interval (one ulp beyond each computed end,
    which contains the exact one) and the lower bound over the inward-rounded one (``-inf`` if
    empty); the mean-value bounds use the exact width :math:`2\eta`. The better of: the
    difference of log-CDFs (no cancellation where the interval is wide, with its rounding
    error amplified by 1 + 1/|la - lb|) and the mean-value bounds
    width * phi(farthest end from 0) <= Phi(b) - Phi(a) <= width * phi(nearest point to 0),
    which stay sharp where the interval is narrow.
    """
    centre, half = np.broadcast_arrays(np.asarray(centre, float), np.asarray(half, float))
    lo, hi = centre - half, centre + half
    out_lo, out_hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
    in_lo, in_hi = np.nextafter(lo, np.inf), np.nextafter(hi, -np.inf)
    c = _ULPS * _U
    # mean-value bounds over the exact interval (inside the outward one, width 2 eta)
    fo = out_lo > 0.0
    oa, ob = np.where(fo, -out_hi, out_lo), np.where(fo, -out_lo, out_hi)
    far = np.maximum(np.abs(oa), np.abs(ob))
    near = np.where(ob <= 0.0, np.abs(ob), 0.0)
    width = 2.0 * half
    lw_lo = np.log(width * (1 - 4 * _U))
    lw_hi = np.log(width * (1 + 4 * _U))
    mvt_lo = lw_lo - 0.5 * far * far - _LOG_SQRT_2PI - c * (far * far + np.abs(lw_lo) + 1.0)
    mvt_hi = lw_hi - 0.5 * near * near - _LOG_SQRT_2PI + c * (near * near + np.abs(lw_hi) + 1.0)
    _, ex_hi = _log_diff_ndtr_ends(out_lo, out_hi)
    nonempty = in_lo < in_hi
    ex_lo, _ = _log_diff_ndtr_ends(np.where(nonempty, in_lo, out_lo),
                                   np.where(nonempty, in_hi, out_hi))
    ex_lo = np.where(nonempty, ex_lo, -np.inf)
    return np.maximum(ex_lo, mvt_lo), np.minimum(ex_hi, mvt_hi)


def _log_diff_ndtr_ends(lo: Arr, hi: Arr) -> tuple[Arr, Arr]:
    """Bounds of log(Phi(hi) - Phi(lo)) from the CDFs at exact ends ``lo < hi`` (-inf, inf
    where they cannot tell)."""
    flip = lo > 0.0  # use the symmetry Phi(b) - Phi(a) = Phi(-a) - Phi(-b)
    a = np.where(flip, -hi, lo)
    b = np.where(flip, -lo, hi)
    c = _ULPS * _U
    ex_lo = np.full(a.shape, -np.inf)
    ex_hi = np.full(a.shape, np.inf)
    left = b <= 0.0  # both ends in the left half: ratio of log-CDFs
    if np.any(left):
        la, lb = log_ndtr(a[left]), log_ndtr(b[left])
        dif = la - lb
        ok = dif < 0.0
        d_safe = np.where(ok, dif, -1.0)
        val = lb + np.log(-np.expm1(d_safe))
        # d/dx log(-expm1(x)) = 1/(1 - e^{-x}) <= 1 + 1/|x|: the error of la - lb is amplified
        err = c * (np.abs(la) + np.abs(lb) + 1.0) * (2.0 + 1.0 / np.abs(d_safe)) + c * np.abs(val)
        ex_lo[left] = np.where(ok, val - err, -np.inf)
        ex_hi[left] = np.where(ok, val + err, np.inf)
    mid = ~left  # a <= 0 < b: Phi(b) - Phi(a) >= Phi(b) - 1/2 >= 0, no cancellation
    if np.any(mid):
        diff = ndtr(b[mid]) - ndtr(a[mid])
        ok = diff > 0.0
        safe = np.where(ok, diff, 1.0)
        val = np.log(safe)
        err = c * (2.0 + 2.0 / safe + np.abs(val))
        ex_lo[mid] = np.where(ok, val - err, -np.inf)
        ex_hi[mid] = np.where(ok, val + err, np.inf)
    return ex_lo, ex_hi


def _to_split(lu: Arr, ll: Arr, tot_l: float, log_gap: float) -> NDArray[np.bool_]:
    """Pieces to subdivide: those whose gap exceeds half their share of the target and is
    within 1e-3 of the largest one (the dominant gaps first)."""
    excess = np.exp(np.minimum(lu - tot_l, 700.0)) - np.exp(np.minimum(ll - tot_l, 700.0))
    budget = math.expm1(min(log_gap, 700.0)) / max(lu.size, 1)
    top = float(np.max(excess)) if excess.size else 0.0
    return np.asarray((excess > 0.5 * budget) & (excess >= 1e-3 * top))


class _Stall:
    """True once the gap has shrunk by less than 10 % in each of 4 consecutive rounds (the
    rounding slack, not the pieces, then limits the bounds)."""

    def __init__(self) -> None:
        self.prev = float("inf")
        self.count = 0

    def __call__(self, gap: float) -> bool:
        self.count = self.count + 1 if gap > 0.9 * self.prev else 0
        self.prev = gap
        return self.count >= 4


def _refined_enough(tot_l: float, tot_u: float, pieces: int, log_gap: float,
                    log_decide: float | None, stall: _Stall) -> bool:
    """Stop refining: the bounds are within the gap, the piece budget is spent, the comparison
    with the decision level is settled, or rounding stalls further progress."""
    return (
        tot_u - tot_l <= log_gap
        or pieces >= _MAX_PIECES
        or _decided(tot_l, tot_u, log_decide)
        or stall(tot_u - tot_l)
    )


def _decided(lo: float, hi: float, threshold: float | None) -> bool:
    """The bounds already settle the comparison with the threshold (a small margin kept for
    the rounding slack)."""
    if threshold is None:
        return False
    margin = 1e-9 * abs(threshold) + 1e-300
    return hi <= threshold - margin or lo > threshold + margin


def _merge(x: Arr, p: Arr, y: Arr, q: Arr) -> tuple[Arr, Arr, Arr]:
    """Sorted union of the atoms and the log masses of P and Q on it (-inf where absent)."""
    z, inv = np.unique(np.concatenate([x, y]), return_inverse=True)
    inv = np.ravel(inv)
    mp = np.bincount(inv[: x.size], weights=p, minlength=z.size)
    mq = np.bincount(inv[x.size :], weights=q, minlength=z.size)
    with np.errstate(divide="ignore"):
        return z, np.log(mp), np.log(mq)


def _check_law(name: str, atoms: ArrayLike, probs: ArrayLike) -> tuple[Arr, Arr]:
    a = as_float_array(f"{name} atoms", atoms, ndim=1)
    w = as_float_array(f"{name} probabilities", probs, ndim=1, low=0.0, low_open=False)
    if a.size != w.size:
        raise InvalidParameterError(f"{name} probabilities", w.size, f"need {a.size} entries")
    if not abs(float(w.sum()) - 1.0) <= 1e-9:
        raise InvalidParameterError(f"{name} probabilities", float(w.sum()), "must sum to 1")
    keep = w > 0.0
    return a[keep], w[keep]


# ---------------------------------------------------------------------------------- Laplace
@dataclass
class _LaplaceLaw:
    """Prefix log-sums of one law on the union grid z (units of b, shifted so z[0] = 0)."""

    fwd: Arr  # log sum_{z_k <= z_i} m_k e^{-(z_i - z_k)}
    bwd: Arr  # log sum_{z_k >= z_i} m_k e^{-(z_k - z_i)}

    @classmethod
    def build(cls, z: Arr, lm: Arr) -> _LaplaceLaw:
        with np.errstate(invalid="ignore"):
            fwd = np.logaddexp.accumulate(lm + z) - z
            bwd = np.logaddexp.accumulate((lm - z)[::-1])[::-1] + z
        return cls(np.asarray(fwd), np.asarray(bwd))

    def log_density(self, z: Arr, idx: NDArray[np.intp], s: Arr) -> Arr:
        """log of sum_k m_k e^{-|t - z_k|} at t = z[idx] + s, 0 <= s <= z[idx+1] - z[idx]."""
        right = z[idx + 1] - z[idx] - s
        return np.asarray(np.logaddexp(self.fwd[idx] - s, self.bwd[idx + 1] - np.maximum(right, 0)))


def _laplace_bounds(
    z: Arr, lp: Arr, lq: Arr, alpha: float, log_gap: float, log_decide: float | None
) -> tuple[float, float, int, float]:
    """(log I lower, log I upper, pieces, log slack) for Laplace noise, I = int p^a q^(1-a)."""
    P, Q = _LaplaceLaw.build(z, lp), _LaplaceLaw.build(z, lq)
    a1 = 1.0 - alpha
    # exact tails (beyond the extreme atoms both densities are single exponentials), factor 1/2
    tails = [alpha * P.bwd[0] + a1 * Q.bwd[0], alpha * P.fwd[-1] + a1 * Q.fwd[-1]]
    tails = [t - math.log(2.0) for t in tails]
    n = z.size
    span = float(z[-1] - z[0])
    if n == 1:
        lt = float(np.logaddexp(*tails))
        slack = _laplace_slack(alpha, n, span, 2)
        return lt, lt, 0, slack
    idx = np.arange(n - 1, dtype=np.intp)
    s0 = np.zeros(n - 1)
    width = np.diff(z)

    def piece_bounds(idx: NDArray[np.intp], s0: Arr, width: Arr) -> tuple[Arr, Arr]:
        def lf(s: Arr) -> Arr:
            return alpha * P.log_density(z, idx, s) + a1 * Q.log_density(z, idx, s)

        lu = _log_tanh_half(width) + np.logaddexp(lf(s0), lf(s0 + width)) - math.log(2.0)
        ll = _log_2sinh_half(width) + lf(s0 + 0.5 * width) - math.log(2.0)
        return lu, ll

    lu, ll = piece_bounds(idx, s0, width)
    tail_arr = np.array(tails)
    stall = _Stall()
    for _ in range(_MAX_ROUNDS):
        tot_u = logsumexp(np.concatenate([lu, tail_arr]))
        tot_l = logsumexp(np.concatenate([ll, tail_arr]))
        if _refined_enough(tot_l, tot_u, idx.size, log_gap, log_decide, stall):
            break
        split = _to_split(lu, ll, tot_l, log_gap)
        if not split.any():
            break
        k = 4
        ns = int(np.count_nonzero(split))
        c_idx = np.repeat(idx[split], k)
        # children share their end points exactly (the last one ends where the parent ended),
        # so the pieces tile each interval; widths are the float differences of the end points
        p_s0, p_end = s0[split], s0[split] + width[split]
        c_s0 = np.repeat(p_s0, k) + np.repeat(width[split] / k, k) * np.tile(np.arange(k), ns)
        c_end = np.concatenate([c_s0[1:], [0.0]])
        c_end[k - 1 :: k] = p_end
        c_w = c_end - c_s0
        c_lu, c_ll = piece_bounds(c_idx, c_s0, c_w)
        keep = ~split
        idx = np.concatenate([idx[keep], c_idx])
        s0 = np.concatenate([s0[keep], c_s0])
        width = np.concatenate([width[keep], c_w])
        lu = np.concatenate([lu[keep], c_lu])
        ll = np.concatenate([ll[keep], c_ll])
    total_pieces = int(idx.size)
    slack = _laplace_slack(alpha, n, span, total_pieces + 2)
    return tot_l, tot_u, total_pieces, slack


def _laplace_slack(alpha: float, n: int, span: float, pieces: int) -> float:
    """Absolute rounding bound on log I (Laplace): prefix sums, local evaluation, final sum."""
    mag = span + 760.0  # |log mass + z| <= 745 + span
    d_logp = _ULPS * _U * (n + 4) * (mag + 1.0)
    return float((2.0 * alpha + 1.0) * d_logp + _ULPS * _U * (alpha * mag + pieces + 16.0))


def _laplace_dinf(z: Arr, lp: Arr, lq: Arr) -> tuple[float, float]:
    """(D_inf(P||Q), slack): the largest log-ratio over the atoms."""
    P, Q = _LaplaceLaw.build(z, lp), _LaplaceLaw.build(z, lq)
    n = z.size
    if n == 1:
        return 0.0, 0.0
    idx = np.concatenate([np.arange(n - 1), [n - 2]]).astype(np.intp)
    s = np.concatenate([np.zeros(n - 1), [z[-1] - z[-2]]])
    ratio = P.log_density(z, idx, s) - Q.log_density(z, idx, s)
    span = float(z[-1] - z[0])
    slack = 2.0 * _ULPS * _U * (n + 4) * (span + 761.0)
    return float(np.max(ratio)), slack


# ---------------------------------------------------------------------------------- Gaussian
@dataclass
class _GaussLaw:
    """Sorted distinct atoms (units of sigma), their log masses and mass prefix sums."""

    atoms: Arr
    lm: Arr
    cum: Arr  # cum[j] = mass of atoms[:j]
    max_d: float = 0.0  # largest |t - atom| used so far
    last_err: Arr | None = None  # rounding bound of the last eval's log values, per point
    last_slope_err: Arr | None = None  # and of its posterior-mean slopes

    @classmethod
    def build(cls, x: Arr, p: Arr) -> _GaussLaw:
        atoms, inv = np.unique(x, return_inverse=True)
        mass = np.bincount(np.ravel(inv), weights=p, minlength=atoms.size)
        return cls(atoms, np.log(mass), np.concatenate([[0.0], np.cumsum(mass)]))

    def eval(self, t: Arr) -> tuple[Arr, Arr, Arr]:
        r"""At each point: (lower, upper) of :math:`\log\sum_k m_k e^{-(t-x_k)^2/2}` and the
        posterior mean offset of the atoms used for the lower value.

        Only atoms within ``_WINDOW`` of a block of points (and at least the nearest atom on each
        side) are summed: that sum is a lower bound, and the others add at most
        (their mass) :math:`\times e^{-d^2/2}`, d the distance to the nearest excluded atom.
        """
        order = np.argsort(t, kind="stable")
        ts = t[order]
        low = np.empty(t.size)
        up = np.empty(t.size)
        mu = np.empty(t.size)
        err = np.empty(t.size)
        serr = np.empty(t.size)
        x, lm, cum = self.atoms, self.lm, self.cum
        n = x.size
        blk = 256
        for i in range(0, ts.size, blk):
            tb = ts[i : i + blk]
            j0 = int(np.searchsorted(x, tb[0] - _WINDOW, "left"))
            j1 = int(np.searchsorted(x, tb[-1] + _WINDOW, "right"))
            j0 = max(0, min(j0, int(np.searchsorted(x, tb[0], "right")) - 1))
            j1 = min(n, max(j1, int(np.searchsorted(x, tb[-1], "left")) + 1))
            d = x[None, j0:j1] - tb[:, None]
            self.max_d = max(self.max_d, float(np.max(np.abs(d))))
            e = lm[None, j0:j1] - 0.5 * d * d
            mx = np.max(e, axis=1)
            w = np.exp(e - mx[:, None])
            sw = w.sum(axis=1)
            lw = mx + np.log(sw)
            mu[i : i + blk] = (w * d).sum(axis=1) / sw
            rem = np.full(tb.size, -np.inf)
            with np.errstate(divide="ignore"):
                if j0 > 0:
                    dl = tb - x[j0 - 1]
                    rem = np.logaddexp(rem, math.log(max(cum[j0], 1e-320)) - 0.5 * dl * dl)
                if j1 < n:
                    dr = x[j1] - tb
                    tail_mass = max(float(cum[n] - cum[j1]), 1e-320)
                    rem = np.logaddexp(rem, math.log(tail_mass) - 0.5 * dr * dr)
            low[i : i + blk] = lw
            up[i : i + blk] = np.logaddexp(lw, rem)
            # rounding: exponents lm - d^2/2 carry absolute error <= c u (|e| + 1500); in the
            # log-sum-exp only the dominant ones matter (sum_k w_k |e_k - mx| <= n / e), so the
            # value errs by <= c u (|mx| + n + 1500); the slope by that times max |d| + 1
            e_val = _ULPS * _U * (np.abs(mx) + np.abs(lw) + (j1 - j0) + 1500.0)
            err[i : i + blk] = e_val
            serr[i : i + blk] = e_val * (float(np.max(np.abs(d))) + 1.0)
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        self.last_err = err[inv]
        self.last_slope_err = serr[inv]
        return low[inv], up[inv], mu[inv]


def _gauss_piece_bounds(
    t0: Arr, t1: Arr, P: _GaussLaw, Q: _GaussLaw, alpha: float
) -> tuple[Arr, Arr]:
    """Per-piece (log upper, log lower) of int_{t0}^{t1} p^a q^(1-a) / sqrt(2 pi).

    A piece whose end points coincide (far from 0, where consecutive grid points can be one
    double) is empty: it contributes nothing (``-inf``), and computes no 0/0.
    """
    m = 0.5 * (t0 + t1)
    empty = t1 <= t0
    eta = np.where(empty, 1.0, 0.5 * (t1 - t0))
    pts, inv = np.unique(np.concatenate([t0, t1, m]), return_inverse=True)
    inv = np.ravel(inv)
    pl, pu, mup_all = (v[inv] for v in P.eval(pts))
    assert P.last_err is not None and P.last_slope_err is not None
    ep, sp = P.last_err[inv], P.last_slope_err[inv]
    ql, qu, muq_all = (v[inv] for v in Q.eval(pts))
    assert Q.last_err is not None and Q.last_slope_err is not None
    eq, sq = Q.last_err[inv], Q.last_slope_err[inv]
    k = t0.size
    # rounding of the inputs of each piece: values at the three points, tangent slopes at the
    # middle (a chord's slope error, val_err / eta, moves the line by at most val_err)
    val_err = np.maximum.reduce([ep[:k], ep[k : 2 * k], ep[2 * k :], eq[:k], eq[k : 2 * k],
                                 eq[2 * k :]])
    slope_err = np.maximum(sp[2 * k :], sq[2 * k :])
    p0, p1, pm, mup = pu[:k], pu[k : 2 * k], pl[2 * k :], mup_all[2 * k :]
    q0, q1, qm, muq = qu[:k], qu[k : 2 * k], ql[2 * k :], muq_all[2 * k :]
    a1 = 1.0 - alpha
    h2 = 0.5 * eta * eta
    # upper: chord of log M for P (power alpha), tangent for Q (power 1 - alpha < 0)
    cu = alpha * (h2 + 0.5 * (p0 + p1)) + a1 * qm
    lu = alpha * (p1 - p0) / (2.0 * eta) + a1 * muq
    cl = alpha * pm + a1 * (h2 + 0.5 * (q0 + q1))
    ll = alpha * mup + a1 * (q1 - q0) / (2.0 * eta)
    _, du = _log_diff_ndtr(-lu, eta)  # upper bound for the upper piece
    dl, _ = _log_diff_ndtr(-ll, eta)  # lower bound for the lower piece
    eu = el = 0.0  # (their rounding is inside those bounds)
    up = cu + 0.5 * lu * lu + du
    low = cl + 0.5 * ll * ll + dl
    # input errors scaled by the powers (|alpha| + |1 - alpha| <= 2 alpha): values and chords
    # move the exponent by <= 2 val_err, a tangent slope error by <= eta times it on the piece
    # (the computed lambda is the exact slope of a line within that distance), plus the
    # rounding of this assembly; the pieces' end points and middles are exact floats, so the
    # pieces tile the line up to slivers of width <= 4 u |t| (covered by the last term)
    a2 = 2.0 * alpha
    c = _ULPS * _U
    slack_u = a2 * (2.0 * val_err + slope_err * eta) + eu + c * (
        np.abs(cu) + 0.5 * lu * lu + np.abs(du) + 1.0
    )
    slack_l = a2 * (2.0 * val_err + slope_err * eta) + el + c * (
        np.abs(cl) + 0.5 * ll * ll + np.abs(dl) + 1.0
    )
    return (np.asarray(np.where(empty, -np.inf, up + slack_u)),
            np.asarray(np.where(empty, -np.inf, low - slack_l)))


def _gauss_slivers(t0: Arr, t1: Arr, P: _GaussLaw, Q: _GaussLaw, alpha: float) -> float:
    """log of a bound on the integral over the gaps/overlaps left where a piece's float middle
    and half-width do not reproduce its end points exactly (-inf when they all do).

    A sliver of width delta next to an end point t lies within delta of it; there
    p^a q^(1-a) <= exp(a log p_up(t) + (1-a) log q_low(t) + 2 a delta dmax) (log-densities are
    Lipschitz with constant max |x - t|)."""
    m = 0.5 * (t0 + t1)
    eta = 0.5 * (t1 - t0)
    bad = (m - eta != t0) | (m + eta != t1)
    if not bad.any():
        return float("-inf")
    ends = np.concatenate([t0[bad], t1[bad]])
    _, pu, _ = P.eval(ends)
    ql, _, _ = Q.eval(ends)
    delta = 4.0 * _U * (np.abs(ends) + 1.0)
    dmax = max(P.max_d, Q.max_d) + 1.0
    lf = alpha * pu + (1.0 - alpha) * ql + 2.0 * alpha * delta * dmax - _LOG_SQRT_2PI
    return logsumexp(np.log(delta) + lf) + 1e-12


def _gauss_tails(
    lo: float, hi: float, P: _GaussLaw, Q: _GaussLaw, alpha: float
) -> tuple[Arr, Arr]:
    """(log upper, log lower) of the two tails beyond [lo, hi] (both outside every atom)."""
    pts = np.array([lo, hi])
    pl, pu, muP = P.eval(pts)
    ql, qu, muQ = Q.eval(pts)
    a1 = 1.0 - alpha
    cu = alpha * pu + a1 * ql
    cl = alpha * pl + a1 * qu
    # right tail t = hi + u: p(t)/p(hi) <= exp(-(u^2 + 2u(hi - x_max))/2) (extreme atom) and
    # >= exp(-(u^2 + 2u(hi - xbar))/2) (Jensen, xbar = posterior mean at hi); same for q.
    lam_u_r = alpha * (hi - P.atoms[-1]) + a1 * (-muQ[1])
    lam_l_r = alpha * (-muP[1]) + a1 * (hi - Q.atoms[-1])
    # left tail t = lo - u: the mirror image with the smallest atoms
    lam_u_l = alpha * (P.atoms[0] - lo) + a1 * muQ[0]
    lam_l_l = alpha * muP[0] + a1 * (Q.atoms[0] - lo)
    lam_u = np.array([lam_u_l, lam_u_r])
    lam_l = np.array([lam_l_l, lam_l_r])
    ln_u, ln_l = log_ndtr(-lam_u), log_ndtr(-lam_l)
    up = cu + 0.5 * lam_u**2 + ln_u
    low = cl + 0.5 * lam_l**2 + ln_l
    assert P.last_err is not None and Q.last_err is not None
    assert P.last_slope_err is not None and Q.last_slope_err is not None
    c = _ULPS * _U
    dmag = abs(lo) + abs(hi) + float(np.max(np.abs(P.atoms))) + float(np.max(np.abs(Q.atoms)))
    e_in = 2.0 * alpha * (np.maximum(P.last_err, Q.last_err) + np.maximum(
        P.last_slope_err, Q.last_slope_err) * (1.0 + np.abs(lam_u) + np.abs(lam_l)))
    e_in = e_in + 2.0 * alpha * c * dmag * (1.0 + np.abs(lam_u) + np.abs(lam_l))
    su = e_in + c * (np.abs(cu) + lam_u**2 + np.abs(ln_u) + 1.0)
    sl = e_in + c * (np.abs(cl) + lam_l**2 + np.abs(ln_l) + 1.0)
    return np.asarray(up + su), np.asarray(low - sl)


def _gauss_grid(atoms: Arr, lo: float, hi: float, reach: float) -> tuple[Arr, Arr]:
    """Initial pieces: steps of 1/2 within ``reach`` of the atoms (and to lo, hi), one piece
    across every wider gap between atom clusters (refined later only if it matters)."""
    cut = np.nonzero(np.diff(atoms) > 2.0 * reach)[0]
    # end points on the grid of multiples of 1/2, so that every split into quarters keeps the
    # middles and half-widths exact floats (the pieces then tile the line exactly)
    starts = np.floor(2.0 * np.concatenate([[lo], atoms[cut + 1] - reach])) / 2.0
    ends = np.ceil(2.0 * np.concatenate([atoms[cut] + reach, [hi]])) / 2.0
    left: list[Arr] = []
    right: list[Arr] = []
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        n = max(2, round((b - a) / 0.5))
        e = a + 0.5 * np.arange(n + 1)
        left.append(e[:-1])
        right.append(e[1:])
        if k + 1 < starts.size:  # the gap to the next cluster
            left.append(np.array([b]))
            right.append(np.array([starts[k + 1]]))
    return np.concatenate(left), np.concatenate(right)


def _gauss_bounds(
    x: Arr, p: Arr, y: Arr, q: Arr, alpha: float, log_gap: float, log_decide: float | None
) -> tuple[float, float, int, float]:
    """(log I lower, log I upper, pieces, log slack) for Gaussian noise (units of sigma)."""
    P, Q = _GaussLaw.build(x, p), _GaussLaw.build(y, q)
    # the grid covers the atoms and _GAUSS_TAIL beyond; it is widened while the proven tail
    # bounds are too far apart (the integrand's mass can lie beyond the atoms, near the
    # centres alpha x - (alpha - 1) y of the point-mass case)
    zmin = min(float(x.min()), float(y.min()))
    zmax = max(float(x.max()), float(y.max()))
    tail = _GAUSS_TAIL
    result = (0.0, 0.0, 0, 0.0)
    for _ in range(6):
        lo, hi = zmin - tail, zmax + tail
        t0, t1 = _gauss_grid(np.union1d(P.atoms, Q.atoms), lo, hi, tail)
        lo, hi = float(t0[0]), float(t1[-1])
        tu, tl = _gauss_tails(lo, hi, P, Q, alpha)
        lu, ll = _gauss_piece_bounds(t0, t1, P, Q, alpha)
        stall = _Stall()
        for _round in range(_MAX_ROUNDS):
            tot_u = logsumexp(np.concatenate([lu, tu]))
            tot_l = logsumexp(np.concatenate([ll, tl]))
            if _refined_enough(tot_l, tot_u, t0.size, log_gap, log_decide, stall):
                break
            # a piece is split only where its quarters are distinct doubles (at |t| ~ 1e13 a
            # width below ~1e-2 is not: the bounds stay valid there, only as wide as they are)
            split = _to_split(lu, ll, tot_l, log_gap) & (
                (t1 - t0) > 16.0 * np.spacing(np.maximum(np.abs(t0), np.abs(t1))))
            if not split.any():
                break
            k = 4
            a, w = t0[split], (t1[split] - t0[split]) / k
            c0 = np.repeat(a, k) + np.repeat(w, k) * np.tile(np.arange(k), a.size)
            c1 = np.concatenate([c0[1:], [0.0]])
            c1[k - 1 :: k] = t1[split]  # children share end points exactly
            c_lu, c_ll = _gauss_piece_bounds(c0, c1, P, Q, alpha)
            keep = ~split
            t0 = np.concatenate([t0[keep], c0])
            t1 = np.concatenate([t1[keep], c1])
            lu = np.concatenate([lu[keep], c_lu])
            ll = np.concatenate([ll[keep], c_ll])
        total_pieces = int(t0.size)
        sliver = _gauss_slivers(t0, t1, P, Q, alpha)
        if sliver > float("-inf"):
            tot_u = float(np.logaddexp(tot_u, sliver))
            # overlaps may have been counted twice in the lower bound
            tot_l = tot_l + math.log(-math.expm1(min(sliver - tot_l, -1e-300)))
        tail_excess = math.exp(min(logsumexp(tu) - tot_l, 700.0)) - math.exp(
            min(logsumexp(tl) - tot_l, 700.0)
        )
        # every piece already carries its own rounding slack; what is left is the final sum of
        # the pieces (relative error <= count u) and its log
        slack = float(_ULPS * _U * (total_pieces + 16.0 + abs(tot_u)))
        result = (tot_l, tot_u, total_pieces, slack)
        if (
            tail_excess <= 0.25 * math.expm1(min(log_gap, 700.0))
            or total_pieces >= _MAX_PIECES
            or _decided(tot_l, tot_u, log_decide)
        ):
            break
        tail *= 2.0
    return result


# ---------------------------------------------------------------------------------- public
def divergence_bounds(
    x: ArrayLike,
    p: ArrayLike,
    y: ArrayLike,
    q: ArrayLike,
    *,
    noise: str,
    scale: float,
    alpha: float,
    gap: float = 1e-4,
    decide: float | None = None,
) -> DivergenceBounds:
    r"""Proven bounds on :math:`D_\alpha(P*N_b\,\|\,Q*N_b)` for 1-D discrete laws.

    Parameters
    ----------
    x, p : array_like, shape (n,)
        Atoms and probabilities of :math:`P` (sum 1; repeated atoms are merged).
    y, q : array_like, shape (m,)
        Atoms and probabilities of :math:`Q`.
    noise : {"laplace", "gaussian"}
        :math:`\mathrm{Lap}(0, b)` or :math:`N(0, \sigma^2)`.
    scale : float
        :math:`b` or :math:`\sigma` (>= 0). Scale 0 (no noise) gives the divergence of the
        laws themselves, :math:`\frac{1}{\alpha-1}\log\sum_k p_k^\alpha q_k^{1-\alpha}`
        (infinite when an atom of :math:`P` is not one of :math:`Q`), which bounds the noisy
        divergence at every scale from above (data processing).
    alpha : float
        Rényi order > 1; ``inf`` (Laplace only) gives :math:`D_\infty = \log\sup p/q`.
    gap : float, default 1e-4
        Target width :math:`D^+ - D^-` (refinement stops earlier only at a piece budget; the
        interval is valid either way).
    decide : float, optional
        Stop refining as soon as the bounds settle whether :math:`D_\alpha` is above or below
        this value (used by searches; the interval is valid either way).

    Returns
    -------
    DivergenceBounds

    Examples
    --------
    >>> b = divergence_bounds([0.0], [1.0], [1.0], [1.0], noise="gaussian", scale=1.0, alpha=2.0)
    >>> b.lower <= 1.0 <= b.upper and b.upper - b.lower < 1e-4
    True
    """
    if noise not in NOISES:
        raise InvalidParameterError("noise", noise, f"must be one of {NOISES}")
    xs, ps = _check_law("P", x, p)
    ys, qs = _check_law("Q", y, q)
    b = as_scalar("scale", scale, low=0.0, low_open=False)
    a = as_scalar("alpha", alpha, low=1.0, allow_inf=True)
    g = as_scalar("gap", gap, low=0.0)
    if math.isinf(a) and noise != "laplace":
        raise InvalidParameterError(
            "alpha", alpha, "alpha = inf needs Laplace noise (a Gaussian is never pure)"
        )
    if b == 0.0:
        return _discrete_bounds(xs, ps, ys, qs, a)
    xs, ys, delta = scaled_atoms(xs, ys, b)
    span = float(max(xs.max(), ys.max()))  # the atoms now lie in [0, span]
    if math.isinf(a):
        # shift first, then merge: atoms that coincide after rounding become one atom
        z, lp, lq = _merge(xs, ps, ys, qs)
        d, slack = _laplace_dinf(z, lp, lq)
        # each density moves by a factor within e^{+-delta} when its atoms move by delta
        slack = _up(slack + 2.0 * delta)
        return DivergenceBounds(max(0.0, d - slack), d + slack, int(z.size), slack)
    log_gap = g * (a - 1.0)
    log_decide = None if decide is None else float(decide) * (a - 1.0)
    if noise == "laplace":
        z, lp, lq = _merge(xs, ps, ys, qs)
        lo, hi, pieces, slack = _laplace_bounds(z, lp, lq, a, log_gap, log_decide)
        lo, hi = lo - slack, hi + slack
        move = _up((2.0 * a - 1.0) * delta)  # pointwise e^{+-delta}: p^a q^(1-a) by e^{+-move}
        lo, hi = lo - move, hi + move
    else:
        lo0, hi0, pieces, slack = _gauss_bounds(xs, ps, ys, qs, a, log_gap, log_decide)
        lo, hi = _gauss_moved(lo0 - slack, hi0 + slack, a, span, delta)
        move = max(lo0 - slack - lo, hi - hi0 - slack, 0.0)  # reported with the slack
    if not (math.isfinite(lo) and not math.isnan(hi)):
        raise CertificateError(f"non-finite divergence bounds ({lo!r}, {hi!r}); please report")
    s = _up((slack + move) / (a - 1.0))
    return DivergenceBounds(max(0.0, lo / (a - 1.0)), _up(hi / (a - 1.0)), pieces, s)


_TINY = 2.0**-1074  # the smallest subnormal: the absolute error of a division that underflows


def _up(x: float) -> float:
    """``x`` moved up by a relative 4u (covers the one rounding of the expression computing it)."""
    return math.nextafter(x + 4.0 * _U * abs(x), math.inf) if math.isfinite(x) else x


def scaled_atoms(x: Arr, y: Arr, scale: float) -> tuple[Arr, Arr, float]:
    r"""The atoms in units of the scale, **shifted first in the data's units**, and a bound on
    how far each computed atom lies from the exact one.

    The divergence only depends on the differences of the atoms, so they are shifted by
    :math:`c = \min_k \min(x_k, y_k)` (an atom, so the shifted atoms are :math:`\ge 0` and the
    smallest is exactly 0) *before* dividing by the scale: a timestamp of 1.7e15 with a
    spread of 10 then carries a rounding error of about :math:`u\cdot 10/b`, not
    :math:`u\cdot 1.7\mathrm{e}15/b`. Each step is one correctly rounded operation:
    :math:`\mathrm{fl}(x_k - c)` is within :math:`u|x_k - c|` of the exact difference and
    :math:`\mathrm{fl}(d_k/b)` within :math:`u|d_k/b|` (plus the smallest subnormal if it
    underflows), so every computed atom :math:`z_k` is within

    .. math:: \delta = \max_k\ (2u + u^2)\,z_k(1 + u) + 2\cdot 2^{-1074}

    of the exact :math:`(x_k - c)/b` (:math:`u = 2^{-53}`). The bounds of
    :func:`divergence_bounds` are widened for a displacement :math:`\delta` of every atom.

    Returns
    -------
    (x', y', delta)

    Raises
    ------
    InvalidParameterError
        The atoms span more than the double range (their differences overflow), or the scale is
        so small that a shifted atom divided by it overflows.
    """
    c = float(min(x.min(), y.min()))
    with np.errstate(over="ignore", invalid="ignore"):
        dx, dy = x - c, y - c
    if not (np.all(np.isfinite(dx)) and np.all(np.isfinite(dy))):
        raise InvalidParameterError(
            "atoms", f"[{c!r}, {float(max(x.max(), y.max()))!r}]",
            "span more than the double range: their differences overflow",
        )
    with np.errstate(over="ignore", under="ignore"):
        zx, zy = dx / scale, dy / scale
    if not (np.all(np.isfinite(zx)) and np.all(np.isfinite(zy))):
        raise InvalidParameterError("scale", scale, "too small: the atoms / scale overflow")
    top = float(max(zx.max(), zy.max()))
    delta = (2.0 * _U + _U * _U) * top * (1.0 + _U) + 2.0 * _TINY
    return zx, zy, _up(delta)


def _gauss_moved(log_lo: float, log_hi: float, alpha: float, span: float,
                 delta: float) -> tuple[float, float]:
    r"""Bounds on :math:`\log I` of the exact atoms from those of the computed atoms (Gaussian).

    The atoms of both laws lie in :math:`[0, S]` and each exact atom is within :math:`\delta`
    of its computed value. With :math:`r = |t - S/2|` and :math:`\rho = r + S/2 \ge |t - z|`
    for every atom :math:`z`, one Gaussian factor moves by
    :math:`\varphi(t-z-e)/\varphi(t-z) = e^{e(t-z) - e^2/2} \in
    [e^{-\delta\rho-\delta^2/2}, e^{\delta\rho}]`, so with :math:`c = (2\alpha-1)\delta` the
    integrand :math:`g = p^\alpha q^{1-\alpha}` moves by a factor within
    :math:`[e^{-c\rho - \alpha\delta^2/2}, e^{c\rho + (\alpha-1)\delta^2/2}]`. On
    :math:`r \le R` this is at most :math:`e^{\pm c(R + S/2)}`; beyond, for :math:`r \ge S/2`,
    :math:`p(t) \le \varphi(r - S/2)` and :math:`q(t) \ge \varphi(r + S/2)`, so
    :math:`g \le (2\pi)^{-1/2} e^{-(r^2 - (2\alpha-1)Sr + S^2/4)/2}` and

    .. math:: \int_{r>R} g\,e^{c\rho}\,dt \le T_c(R) = 2\,e^{B^2/8 - S^2/8 + cS/2}\,
              \bar\Phi(R - B/2),\qquad B = (2\alpha-1)S + 2c .

    Hence :math:`\tilde I \le e^{(\alpha-1)\delta^2/2}(e^{c(R+S/2)} I + T_c(R))` and
    :math:`\tilde I \ge e^{-\alpha\delta^2/2 - c(R+S/2)}(I - T_0(R))`, with :math:`R` chosen
    so that :math:`T_c(R) \le e^{-60}` (while :math:`I \ge 1` for :math:`\alpha > 1`, Jensen).
    """
    if delta == 0.0:
        return log_lo, log_hi
    c = (2.0 * alpha - 1.0) * delta
    big = (2.0 * alpha - 1.0) * span + 2.0 * c

    def log_tail(cc: float, bb: float, r: float) -> float:
        return float(math.log(2.0) + bb * bb / 8.0 - span * span / 8.0 + cc * span / 2.0
                     + log_ndtr(bb / 2.0 - r))

    expo = big * big / 8.0 - span * span / 8.0 + c * span / 2.0
    r_cut = max(0.5 * span, 0.5 * big + math.sqrt(2.0 * max(expo, 0.0) + 2.0 * 62.0) + 1.0)
    t_c = log_tail(c, big, r_cut)
    t_0 = log_tail(0.0, (2.0 * alpha - 1.0) * span, r_cut)
    # each of these is computed to within a few ulps of terms of size ~ big^2: widen by that
    err = 64.0 * _U * (big * big + r_cut * r_cut + 10.0) + 1e-300
    t_c, t_0 = t_c + err, t_0 + err
    widen = c * (r_cut + 0.5 * span)
    hi = (alpha - 1.0) * delta * delta / 2.0 + float(np.logaddexp(widen + log_hi, t_c))
    if not log_lo > t_0:  # pragma: no cover - I >= 1 > e^{-60} >= T_0
        lo_core = float("-inf")
    else:
        lo_core = log_lo + math.log1p(-math.exp(t_0 - log_lo))
    lo = lo_core - widen - alpha * delta * delta / 2.0
    slack = 16.0 * _U * (abs(hi) + abs(lo) + widen + 1.0)
    return lo - slack, _up(hi + slack)


def _discrete_bounds(x: Arr, p: Arr, y: Arr, q: Arr, alpha: float) -> DivergenceBounds:
    r"""Proven bounds on :math:`D_\alpha(P\|Q)` of the laws themselves (scale 0: no noise).

    :math:`D_\alpha = \frac{1}{\alpha-1}\log\sum_k p_k^\alpha q_k^{1-\alpha}` over the atoms of
    :math:`P` (infinite if one of them is not an atom of :math:`Q`);
    :math:`D_\infty = \log\max_k p_k/q_k`. Log domain, with a rounding slack of 64 ulps of the
    magnitudes per operation.
    """
    z, inv = np.unique(np.concatenate([x, y]), return_inverse=True)
    inv = np.ravel(inv)
    mp = np.bincount(inv[: x.size], weights=p, minlength=z.size)
    mq = np.bincount(inv[x.size :], weights=q, minlength=z.size)
    on = mp > 0.0
    if np.any(mq[on] == 0.0):
        inf = float("inf")
        return DivergenceBounds(inf, inf, int(z.size), 0.0)
    with np.errstate(divide="ignore"):
        lp, lq = np.log(mp[on]), np.log(mq[on])
    # the masses are sums of at most n floats (bincount): relative error <= n u each
    n = x.size + y.size
    dlog = _ULPS * _U * (n + 2.0)
    if math.isinf(alpha):
        v = float(np.max(lp - lq))
        slack = _up(2.0 * dlog + _ULPS * _U * (abs(v) + float(np.max(np.abs(lp) + np.abs(lq)))))
        return DivergenceBounds(max(0.0, v - slack), _up(v + slack), int(z.size), slack)
    terms = alpha * lp + (1.0 - alpha) * lq
    v = logsumexp(terms)
    mag = float(np.max(alpha * np.abs(lp) + (alpha - 1.0) * np.abs(lq)))
    slack = _up((2.0 * alpha - 1.0) * dlog + _ULPS * _U * (mag + z.size + abs(v) + 4.0))
    return DivergenceBounds(max(0.0, (v - slack) / (alpha - 1.0)),
                            _up((v + slack) / (alpha - 1.0)), int(z.size),
                            slack / (alpha - 1.0))


# ---------------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class PairBounds:
    """Bounds of one (prior, pair): both orders at the released and at the refuted scale."""

    label: str
    forward: DivergenceBounds
    reverse: DivergenceBounds
    forward_below: DivergenceBounds | None
    reverse_below: DivergenceBounds | None

    @property
    def upper(self) -> float:
        """Largest proven upper bound at the released scale (both orders)."""
        return max(self.forward.upper, self.reverse.upper)

    @property
    def lower_below(self) -> float:
        """Largest proven lower bound at the refuted scale (both orders), or -inf."""
        vals = [b.lower for b in (self.forward_below, self.reverse_below) if b is not None]
        return max(vals) if vals else float("-inf")


@dataclass(frozen=True)
class MixtureCertificate:
    r"""Outcome of :func:`check_calibration`.

    Attributes
    ----------
    noise : str
    alpha, epsilon : float
    scale : float
        The released scale.
    refuted_scale : float or None
        A scale proven *not* private (some pair has :math:`D^- > \varepsilon` there); with the
        monotonicity of the true divergence every smaller scale fails too.
    upper : float
        Largest proven :math:`D^+` at ``scale`` over pairs and orders.
    lower_below : float
        Largest proven :math:`D^-` at ``refuted_scale`` (``-inf`` without one).
    pairs : tuple of PairBounds
    certified : bool
        ``upper <= epsilon``: the scale is private for every pair, both orders.
    tight : bool
        ``lower_below > epsilon``: the least private scale lies in ``(refuted_scale, scale]``.
    gap : float
        The refinement target used.
    message : str
    """

    noise: str
    alpha: float
    epsilon: float
    scale: float
    refuted_scale: float | None
    upper: float
    lower_below: float
    pairs: tuple[PairBounds, ...]
    certified: bool
    tight: bool
    gap: float
    message: str


LawPair = tuple[str, Any, Any, Any, Any]


def check_calibration(
    pairs: Sequence[LawPair],
    *,
    noise: str,
    alpha: float,
    epsilon: float,
    scale: float,
    refuted_scale: float | None = None,
    gap: float | None = None,
) -> MixtureCertificate:
    r"""Check "``scale`` is :math:`(\alpha,\varepsilon)`-RPP, ``refuted_scale`` is not".

    Parameters
    ----------
    pairs : sequence of (label, x, p, y, q)
        Every (prior, secret pair) with the atoms/probabilities of its two laws.
    noise : {"laplace", "gaussian"}
    alpha : float
        > 1, or ``inf`` (Laplace).
    epsilon : float
        > 0.
    scale : float
        The released scale (>= 0; 0 claims that no noise is needed); certified when every
        :math:`D^+` (both orders) is at most :math:`\varepsilon`.
    refuted_scale : float, optional
        Proven not private when some pair has :math:`D^- > \varepsilon` at it.
    gap : float, optional
        Refinement target for the bounds (default ``epsilon * 1e-3``); refinement also stops
        as soon as a bound settles the comparison with :math:`\varepsilon`.

    Returns
    -------
    MixtureCertificate
    """
    eps = as_scalar("epsilon", epsilon, low=0.0)
    a = as_scalar("alpha", alpha, low=1.0, allow_inf=True)
    b = as_scalar("scale", scale, low=0.0, low_open=False)
    bl = None if refuted_scale is None else as_scalar("refuted_scale", refuted_scale, low=0.0)
    if bl is not None and bl >= b:
        raise InvalidParameterError("refuted_scale", refuted_scale, f"must be < scale ({b!r})")
    g = eps * 1e-3 if gap is None else as_scalar("gap", gap, low=0.0)
    if not pairs:
        raise InvalidParameterError("pairs", pairs, "need at least one pair")
    out: list[PairBounds] = []
    for item in pairs:
        if not isinstance(item, tuple | list) or len(item) != 5:
            raise InvalidTypeError("pairs", item, "(label, x, p, y, q) tuples")
        label, x, p, y, q = item
        kw: dict[str, Any] = {"noise": noise, "alpha": a, "gap": g, "decide": eps}
        fwd = divergence_bounds(x, p, y, q, scale=b, **kw)
        rev = divergence_bounds(y, q, x, p, scale=b, **kw)
        fb = rb = None
        if bl is not None:
            fb = divergence_bounds(x, p, y, q, scale=bl, **kw)
            rb = divergence_bounds(y, q, x, p, scale=bl, **kw)
        out.append(PairBounds(str(label), fwd, rev, fb, rb))
    upper = max(pb.upper for pb in out)
    lower_below = max(pb.lower_below for pb in out)
    certified = upper <= eps
    tight = bl is not None and lower_below > eps
    msg = (
        f"scale {b!r}: D_alpha <= {upper:.10g} "
        + ("<=" if certified else ">")
        + f" epsilon {eps!r}"
    )
    if bl is not None:
        msg += (
            f"; scale {bl!r}: D_alpha >= {lower_below:.10g} "
            + (">" if tight else "<=")
            + " epsilon"
        )
    return MixtureCertificate(
        noise=noise, alpha=a, epsilon=eps, scale=b, refuted_scale=bl, upper=upper,
        lower_below=lower_below, pairs=tuple(out), certified=certified, tight=tight, gap=g,
        message=msg,
    )


# ---------------------------------------------------------------------------------- files
def _num(v: float) -> float | None:
    """JSON-safe float: ``null`` for +infinity (format ``/2``; JSON has no infinity)."""
    return None if math.isinf(v) and v > 0 else float(v)


def write_mixture_certificate(
    path: str | os.PathLike[str],
    pairs: Sequence[LawPair],
    certificate: MixtureCertificate,
    *,
    overwrite: bool = False,
) -> str:
    """Write the laws, α, ε, the scales and the claims as JSON; return the file's sha256.

    An existing file is never replaced unless ``overwrite=True``.
    """
    if not isinstance(certificate, MixtureCertificate):
        raise InvalidTypeError("certificate", certificate, "a MixtureCertificate")
    def law(atoms: Any, probs: Any) -> dict[str, Any]:
        return {
            "atoms": np.asarray(atoms, float).tolist(),
            "probs": np.asarray(probs, float).tolist(),
        }

    laws = [
        {"label": str(label), "p": law(x, p), "q": law(y, q)} for label, x, p, y, q in pairs
    ]
    c = certificate
    content: dict[str, Any] = {
        "format": FORMAT,
        "noise": c.noise,
        "alpha": _num(c.alpha),
        "epsilon": c.epsilon,
        "scale": c.scale,
        "refuted_scale": c.refuted_scale,
        "gap": c.gap,
        "pairs": laws,
        "claim": {
            "upper": _num(c.upper),
            "lower_below": None if math.isinf(c.lower_below) else c.lower_below,
            "certified": c.certified,
            "tight": c.tight,
        },
        "versions": sj.versions(),
    }
    return sj.write_signed(path, content, overwrite=overwrite)


#: Largest number of (prior, pair) entries and of atoms per law a file may hold.
MAX_FILE_PAIRS = 100_000
MAX_FILE_ATOMS = 1_000_000
_TOP = ("format", "noise", "alpha", "epsilon", "scale", "refuted_scale", "gap", "pairs", "claim",
        "versions", "sha256")
_CLAIM = ("upper", "lower_below", "certified", "tight")


def _infinite_or(field: str, v: Any, tag: str, low: float | None = None) -> float:
    """A number (``> low`` when given) or infinity, spelt as the tag does: ``null`` in format
    ``/2``, the string ``"inf"`` in format ``/1``. The other spelling is refused, naming
    ``field``: a file mixing the two was not written by dpopt."""
    if tag == FORMAT_V1:
        if type(v) is str and v == "inf":
            return float("inf")
        if v is None:
            sj.fail(field, f"null, but format {FORMAT_V1!r} spells infinity as the string "
                           "'inf' (null is format /2's spelling)")
    else:
        if v is None:
            return float("inf")
        if type(v) is str and v == "inf":
            sj.fail(field, f"the string 'inf', but format {FORMAT!r} spells infinity as null "
                           "(the string is format /1's spelling)")
    if low is None:
        return sj.number(field, v)
    return sj.number(field, v, low, low_open=True)


def _law_fields(field: str, v: Any) -> tuple[Arr, Arr]:
    law = sj.obj(field, v, ("atoms", "probs"))
    atoms = sj.vector(f"{field}.atoms", law["atoms"], min_len=1)
    if atoms.size > MAX_FILE_ATOMS:
        sj.fail(f"{field}.atoms", f"more than {MAX_FILE_ATOMS} atoms")
    probs = sj.vector(f"{field}.probs", law["probs"], atoms.size)
    if np.any(probs < 0.0) or np.any(probs > 1.0):
        sj.fail(f"{field}.probs", "must lie in [0, 1]")
    if not abs(math.fsum(probs.tolist()) - 1.0) <= 1e-9:
        sj.fail(f"{field}.probs", "must sum to 1")
    return atoms, probs


def _parse_mixture(content: Any) -> dict[str, Any]:
    """Strict structural parse of a decoded mixture certificate (raises FieldError)."""
    top = sj.obj("file", content, _TOP)
    tag = top["format"]
    if type(tag) is not str or tag not in FORMATS:
        sj.fail("format", f"must be {FORMAT!r} (or the previous {FORMAT_V1!r})")
    sha = sj.hex64("sha256", top["sha256"])
    noise = sj.string("noise", top["noise"], choices=NOISES)
    alpha = _infinite_or("alpha", top["alpha"], tag, low=1.0)
    if math.isinf(alpha) and noise != "laplace":
        sj.fail("alpha", "inf needs Laplace noise (a Gaussian is never pure)")
    eps = sj.number("epsilon", top["epsilon"], 0.0, low_open=True)
    scale = sj.number("scale", top["scale"], 0.0)
    refuted = top["refuted_scale"]
    if refuted is not None:
        refuted = sj.number("refuted_scale", refuted, 0.0, low_open=True, high=scale,
                            high_open=True)
    gap = sj.number("gap", top["gap"], 1e-12, high=10.0)
    items = top["pairs"]
    if type(items) is not list:
        sj.fail("pairs", f"must be an array, got {sj.kind_of(items)}")
    if not 1 <= len(items) <= MAX_FILE_PAIRS:
        sj.fail("pairs", f"must hold 1 to {MAX_FILE_PAIRS} entries, has {len(items)}")
    pairs: list[LawPair] = []
    for k, item in enumerate(items):
        e = sj.obj(f"pairs[{k}]", item, ("label", "p", "q"))
        label = sj.string(f"pairs[{k}].label", e["label"], max_len=2000)
        x, p = _law_fields(f"pairs[{k}].p", e["p"])
        y, q = _law_fields(f"pairs[{k}].q", e["q"])
        pairs.append((label, x, p, y, q))
    cl = sj.obj("claim", top["claim"], _CLAIM)
    upper = _infinite_or("claim.upper", cl["upper"], tag)
    lb = cl["lower_below"]
    lower_below = None if lb is None else sj.number("claim.lower_below", lb)
    certified = sj.boolean("claim.certified", cl["certified"])
    tight = sj.boolean("claim.tight", cl["tight"])
    if tight and refuted is None:
        sj.fail("claim.tight", "true, but there is no refuted_scale")
    if certified and not upper <= eps:
        sj.fail("claim.certified", f"true, but the claimed upper {upper!r} exceeds epsilon")
    sj.check_versions(top["versions"])
    sj.check_digest(top, sha)
    return {
        "format": tag, "noise": noise, "alpha": alpha, "epsilon": eps, "scale": scale,
        "refuted_scale": refuted,
        "gap": gap, "pairs": pairs, "upper": upper, "lower_below": lower_below,
        "certified": certified, "tight": tight,
    }


def read_mixture_certificate(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a tight Pufferfish certificate file strictly and check its sha256.

    Every field is type- and range-checked by the reader shared by all certificate kinds
    (:mod:`certificates.strict_json`): ``NaN``/``Infinity``, overflowing literals, strings where
    numbers belong (``"scale": "1.0"``), booleans where numbers belong, missing or unexpected
    fields, laws whose probabilities do not sum to 1. Returns the parsed values (``alpha`` and
    ``claim.upper`` may be ``inf``; ``pairs`` as ``(label, x, p, y, q)`` arrays; ``format``
    the file's tag).

    Files of format ``/2`` (written now) spell an infinite ``alpha`` or ``claim.upper`` as
    ``null``; files of the previous format ``/1`` spelt it as the string ``"inf"`` and are still
    read. A file that uses the other format's spelling is refused, naming the field.

    Raises
    ------
    CertificateError
        Unreadable or malformed file (the message names the field), or a digest mismatch.
    """
    try:
        return _parse_mixture(sj.load_json(path))
    except sj.FieldError as exc:
        raise sj.rejection(path, exc) from None


def verify_mixture_file(path: str | os.PathLike[str]) -> MixtureCertificate:
    """Re-derive every bound from the laws stored in the file and compare with its claims.

    Raises
    ------
    CertificateError
        Malformed content (naming the field), digest mismatch, or the recomputed bounds do not
        support the claims (claimed certified but some :math:`D^+ > \\varepsilon`; claimed
        tight but no :math:`D^- > \\varepsilon` at the refuted scale; or a recomputed bound
        worse than the claimed one beyond 1e-9 relative). Never another exception for a
        malformed file.
    """
    c = read_mixture_certificate(path)
    where = f"certificate {os.fspath(path)!r} rejected"
    try:
        cert = check_calibration(
            c["pairs"], noise=c["noise"], alpha=c["alpha"], epsilon=c["epsilon"],
            scale=c["scale"], refuted_scale=c["refuted_scale"], gap=c["gap"],
        )
    except (DpoptError, ValueError, ArithmeticError) as exc:
        raise CertificateError(f"{where}: the re-check cannot run on this data: {exc}") from None
    problems = []
    if c["certified"] and not cert.certified:
        problems.append(f"claimed private but D_alpha <= {cert.upper!r} > epsilon")
    if c["tight"] and not cert.tight:
        problems.append(f"claimed refuted scale but D_alpha >= {cert.lower_below!r} <= epsilon")
    if cert.upper > c["upper"] * (1 + 1e-9) + 1e-300:
        problems.append(f"recomputed upper {cert.upper!r} > claimed {c['upper']!r}")
    lb = c["lower_below"]
    if lb is not None and cert.lower_below < lb * (1 - 1e-9) - 1e-300:
        problems.append(f"recomputed lower {cert.lower_below!r} < claimed {lb!r}")
    if problems:
        raise CertificateError(f"{where}: " + "; ".join(problems))
    return cert
