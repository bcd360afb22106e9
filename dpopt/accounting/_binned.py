r"""Proven lower bounds from a binned output: the exact composition of a coarsened pair (private).

**Why binning gives a lower bound.** Let (P, Q) be a pair of output laws that the mechanism
realises for two neighbouring datasets (see :mod:`dpopt.accounting._lower`). Mapping each output
x to the index of the bin that contains it is post-processing, so by data processing every
hockey-stick divergence of the binned pair :math:`(P_b, Q_b)_b` — and of its T-fold product,
which is the binned output of the T independent steps — is at most the mechanism's:

.. math::
    \delta_{\text{binned}}(\varepsilon) = \sum_{b_1..b_T} \Big(\prod_t P_{b_t}\Big)
    \Big(1 - e^{\varepsilon - \sum_t \ell_{b_t}}\Big)_+ \le \delta(\varepsilon),
    \qquad \ell_b = \log\frac{P_b}{Q_b}.

Lowering any :math:`\ell_b` or any mass :math:`P_b` only lowers the left side (the summand is
non-negative and increasing in both), so it stays a lower bound when each bin's loss is replaced
by a grid point :math:`k h \le \ell_b` and its mass by a lower bound of :math:`P_b`. This is the
optimistic ("privacy buckets") rounding of Meiser & Mohammadi, "Tight on Budget? Tight Bounds
for r-Fold Approximate Differential Privacy", applied to a pair of discrete laws, so nothing in
it depends on how the bins were chosen.

**Why these bins.** The bins are the level sets of the privacy loss L(x) = log dP/dQ (x)
between the levels :math:`(k - 1/2) h + c`: each bin's loss :math:`\ell_b` is an average of L
over the bin, so it sits within :math:`O(h^2)` of the grid point :math:`kh + c` at its centre.
The offset c puts a grid point at the loss of the lowest bin (for the remove pair the floor
:math:`\log(1-p)` of the loss, where much of P's mass sits when p is small), and while a bin of
material mass is below its grid point the edges around it move up (which raises the loss of
both bins beside an edge). Rounding each bin down to its grid point then costs :math:`O(h^2)`
per step instead of the up to h (h/2 on average) of rounding the loss itself down, which is
what makes long runs affordable: the bias of T steps is about :math:`T h^2`, not
:math:`T h`. A grid kh + c composes to the grid Kh + Tc, so the offset costs nothing.

**The composition** is one FFT power :math:`\mathrm{irfft}(\prod_g \mathrm{rfft}(m_g)^{T_g})`
on a window of the sum's support chosen by a Chernoff bound, mass outside it at most η (it is
aliased into the window by the circular convolution, so 2η is taken off δ: η twice, for the
bound's own round-off), and the
floating-point error of the FFTs is bounded a priori (Higham, "Accuracy and Stability of
Numerical Algorithms", Thm. 24.2, with a safety factor of 10) and subtracted, with the error of
the powers (:func:`_fft_error`).

Every probability is evaluated in log form (``scipy.special.log_ndtr``) with an explicit error
allowance (:data:`_ULPS` units in the last place of every tail, propagated through the
subtractions), so each bin's loss and mass are lowered by more than their round-off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import fft, special

__all__ = ["BinnedPair", "binned_delta_lower", "binned_epsilon_lower", "pair_pmf"]

_U = 2.0 ** -53
#: Units in the last place allowed for every ``log_ndtr`` value (scipy's are accurate to a few).
_ULPS = 16.0
#: Mass allowed outside the composition window (aliased into it; subtracted from δ).
_ETA = 1e-18
#: Points of the composition window by default (about 0.1-0.3 s of CPU for one lower end).
POINTS = 2 ** 17
#: The grids tried in turn by :func:`dpopt.accounting.composition.lower_epsilon`, the finer one
#: only when the coarser fell short and its one-step pmfs had at most RETRY_BINS cells (the
#: finer grid has about four times as many; its cost, about 0.2-0.35 s of CPU then, follows
#: them): decided from sizes, so the answer does not depend on the machine's load.
POINTS_TRIED = (2 ** 17, 2 ** 19)
RETRY_BINS = 15_000
#: Most FFT points of one composition (about 0.1 s of CPU).
MAX_POINTS = 2 ** 21
#: Bins cover P's components within this many standard deviations; the mass beyond lies in the
#: two end bins (below 1e-33 of P's mass: their losses are only rounded down further).
_SPAN = 12.0
#: Points of the x grid the loss levels are read from.
_XGRID = 200_001
#: Rounds of moving the edges up, and by how much of a bin's deficit.
_ROUNDS = 12
_PUSH = 1.2
#: Most steps of one composition (the powers' round-off grows like the number of steps).
MAX_STEPS = 10_000_000
#: Relative shave of the final bounds (the δ sum's own round-off is far below it).
_REL = 1e-9

ArrayF = NDArray[np.float64]


@dataclass(frozen=True)
class BinnedPair:
    r"""A pair of Gaussian location mixtures with one standard deviation s:
    :math:`P = \sum_i a_i N(\mu_i, s^2)`, :math:`Q = \sum_j b_j N(\nu_j, s^2)` (weights exact
    binary fractions or rounded within one ulp)."""

    p_weights: tuple[float, ...]
    p_means: tuple[float, ...]
    q_weights: tuple[float, ...]
    q_means: tuple[float, ...]
    s: float

    @staticmethod
    def remove(p: float, s: float) -> BinnedPair:
        """((1-p) N(0, s²) + p N(1, s²), N(0, s²)): one step of the remove direction."""
        if p >= 1.0:
            return BinnedPair((1.0,), (1.0,), (1.0,), (0.0,), s)
        return BinnedPair((1.0 - p, p), (0.0, 1.0), (1.0,), (0.0,), s)

    @staticmethod
    def plus_minus(p: float, s: float) -> BinnedPair:
        """((1-p) N(0, s²) + p N(1/2, s²), (1-p) N(0, s²) + p N(-1/2, s²)): the replaced record
        at +C against −C, every other record at 0, in units of the sensitivity 2C."""
        return BinnedPair((1.0 - p, p), (0.0, 0.5), (1.0 - p, p), (0.0, -0.5), s)

    def loss(self, x: ArrayF) -> ArrayF:
        """log dP/dQ at x."""
        return _log_density(x, self.p_weights, self.p_means, self.s) - _log_density(
            x, self.q_weights, self.q_means, self.s)


def _log_density(x: ArrayF, w: Sequence[float], m: Sequence[float], s: float) -> ArrayF:
    out = np.full(np.shape(x), -np.inf)
    for wi, mi in zip(w, m, strict=True):
        if wi > 0.0:
            out = np.logaddexp(out, math.log(wi) - 0.5 * ((x - mi) / s) ** 2)
    return out


def _err(v: ArrayF) -> ArrayF:
    """Allowance on a computed log-probability v."""
    return _ULPS * _U * (1.0 + np.abs(v))


def _log_interval(za: ArrayF, zb: ArrayF) -> tuple[ArrayF, ArrayF]:
    """log(Φ(zb) − Φ(za)) for za < zb (``-inf`` where it underflows) and its allowance,
    from the tail on the side away from the centre (no cancellation against 1)."""
    right = za > 0.0
    hi = np.where(right, special.log_ndtr(-za), special.log_ndtr(zb))   # the larger tail
    lo = np.where(right, special.log_ndtr(-zb), special.log_ndtr(za))   # the smaller tail
    with np.errstate(all="ignore"):
        d = lo - hi                                   # <= 0
        frac = -np.expm1(d)                           # 1 - e^d in (0, 1]
        out = hi + np.log(frac)
        e_d = _err(hi) + _err(lo)
        # d(log(1 - e^d))/dd = -e^d / (1 - e^d): the allowance on d, magnified
        mag = np.where(frac > 0.0, np.exp(d) / frac, np.inf)
        err = _err(hi) + np.where(mag > 0.0, e_d * mag, 0.0) + 4.0 * _U * (1.0 + np.abs(out))
    out = np.where(np.isfinite(out) & (frac > 0.0), out, -np.inf)
    return out, np.where(np.isfinite(err), err, np.inf)


def _log_mix_mass(edges: ArrayF, w: Sequence[float], m: Sequence[float], s: float
                  ) -> tuple[ArrayF, ArrayF]:
    """Per-bin log mass of a mixture between consecutive ``edges`` (±inf allowed) and its
    allowance (the worst component's plus the log-sum-exp's own round-off)."""
    logs, errs = [], []
    for wi, mi in zip(w, m, strict=True):
        if wi <= 0.0:
            continue
        z = (edges - mi) / s
        # the standardisation rounds: widen by a few ulps of z in the allowance
        v, e = _log_interval(z[:-1], z[1:])
        # each finite z rounds by a few ulps; d log(mass)/dz at an end is φ(z)/mass, which is
        # at most |z| + 1 for a tail and 1/width for a narrow bin
        az = np.where(np.isfinite(z), np.abs(z), 0.0)
        ez = 4.0 * _U * (az[:-1] + az[1:] + 1.0)
        with np.errstate(all="ignore"):
            width = np.maximum(z[1:] - z[:-1], 1e-300)
            e = e + ez * (az[:-1] + az[1:] + 2.0 + 1.0 / width)
        lw = math.log(wi)
        logs.append(lw + v)
        # log(w) within an ulp of its value, w itself within half an ulp
        errs.append(e + 2.0 * _U * (2.0 + abs(lw)))
    out = logs[0]
    for more in logs[1:]:
        out = np.logaddexp(out, more)
    err = np.max(np.stack(errs), axis=0) + 4.0 * _U * (1.0 + np.abs(out))
    return out, err


@lru_cache(maxsize=4)  # 3.2 MB a pair
def _grid(pair: BinnedPair) -> tuple[ArrayF, ArrayF]:
    """The loss on a fine x grid over the range where P has mass (made non-decreasing); one
    pair's grid serves every composition grid h and the window's size (cached, read-only)."""
    s = pair.s
    x_lo, x_hi = min(pair.p_means) - _SPAN * s, max(pair.p_means) + _SPAN * s
    xs = np.linspace(x_lo, x_hi, _XGRID)
    ls = np.maximum.accumulate(pair.loss(xs))
    xs.setflags(write=False)
    ls.setflags(write=False)
    return xs, ls


@lru_cache(maxsize=64)
def _loss_moments(pair: BinnedPair) -> tuple[float, float, float]:
    """(mean, variance, span) of the loss under P from the x grid by the trapezoid rule (a
    size for the window, not a bound; cached per pair)."""
    xs, ls = _grid(pair)
    dens = np.exp(_log_density(xs, pair.p_weights, pair.p_means, pair.s))
    dens /= float(np.sum(dens))
    mu = float(np.dot(dens, ls))
    return mu, float(np.dot(dens, (ls - mu) ** 2)), float(ls[-1] - ls[0])


def _levels(ls: ArrayF, h: float, c: float) -> ArrayF:
    """The levels (k - 1/2) h + c strictly inside the loss's range."""
    k_lo = math.floor((ls[0] - c) / h + 0.5)
    k_hi = math.ceil((ls[-1] - c) / h + 0.5)
    levels = (np.arange(k_lo, k_hi + 1, dtype=np.float64) - 0.5) * h + c
    return levels[(levels > ls[0]) & (levels < ls[-1])]


def _bins(pair: BinnedPair, xs: ArrayF, ls: ArrayF, levels: ArrayF
          ) -> tuple[ArrayF, ArrayF, ArrayF]:
    """(lower bound of each bin's loss, log of P's mass, its allowance) for the bins between
    the x at which the loss crosses ``levels`` (read off the grid by linear interpolation: any
    edges give a valid bound, these only make it tight) and the end bins out to ±∞."""
    edges = np.concatenate(([-np.inf], np.interp(levels, ls, xs), [np.inf]))
    lp, ep = _log_mix_mass(edges, pair.p_weights, pair.p_means, pair.s)
    lq, eq = _log_mix_mass(edges, pair.q_weights, pair.q_means, pair.s)
    with np.errstate(all="ignore"):
        loss = (lp - ep) - (lq + eq)
        loss = loss - 4.0 * _U * (np.abs(lp) + np.abs(lq) + 1.0)  # the subtractions' rounding
    loss = np.where(np.isfinite(lq) & (lq > -np.inf), loss, np.inf)
    loss = np.where(np.isfinite(lp) & np.isfinite(ep), loss, np.nan)
    return loss, lp, ep


def pair_pmf(pair: BinnedPair, h: float) -> tuple[int, ArrayF, float]:
    """(k0, m, c): a sub-probability m on the loss grid (k0 + i) h + c, i = 0.., that bounds one
    step's binned pair: each bin's mass rounded down, its loss rounded down to the grid.

    The levels start at (k - 1/2) h; each bin's loss then sits near kh, above or below. While
    a bin of material mass is below its grid point, the two edges around it move up (which
    raises the loss of both bins beside an edge) by twice its deficit; a few rounds put every
    material bin at or just above its grid point."""
    return _pair_pmf(pair, h)


@lru_cache(maxsize=32)
def _pair_pmf(pair: BinnedPair, h: float) -> tuple[int, ArrayF, float]:
    xs, ls = _grid(pair)
    # the grid kh + c: c first puts a grid point at the loss of the lowest bin (for the remove
    # pair the floor log(1 - p) of the loss, where much of P's mass sits), a little below it
    c = float(ls[0] - math.floor(ls[0] / h) * h)
    for _ in range(4):
        loss, lp, _ = _bins(pair, xs, ls, _levels(ls, h, c))
        first = int(np.argmax(np.isfinite(loss) & np.isfinite(lp)))
        dev0 = float(loss[first] - c - math.floor((loss[first] - c) / h) * h)
        if not math.isfinite(dev0) or dev0 < 1e-3 * h:
            break
        c += dev0 - 1e-6 * h
    c = float(c - math.floor(c / h) * h)
    levels = _levels(ls, h, c)
    for _ in range(_ROUNDS):
        loss, lp, ep = _bins(pair, xs, ls, levels)
        with np.errstate(all="ignore"):
            dev = loss - c - np.round((loss - c) / h) * h
            mass = np.where(np.isfinite(lp), np.exp(lp), 0.0)
        material = np.isfinite(dev) & (mass > 1e-12 * float(np.max(mass)))
        short = np.where(material & (dev < 0.0), -dev, 0.0)
        if not np.any(short > 0.0) or levels.size == 0:
            break
        levels = np.maximum.accumulate(
            levels + np.where(np.maximum(short[:-1], short[1:]) > 0.0,
                              _PUSH * np.maximum(short[:-1], short[1:]) + 1e-9 * h, 0.0))
    ok = ~np.isnan(loss) & (lp - ep > -745.0)
    loss, lp, ep = loss[ok], lp[ok], ep[ok]
    finite = np.isfinite(loss)
    if not np.all(finite):
        # a bin with no Q-mass in floating point: its loss is only known to be large; place it
        # at the largest finite bin's loss (lowering a loss is safe)
        top = float(np.max(loss[finite])) if np.any(finite) else 0.0
        loss = np.where(finite, loss, top)
    k = np.floor((loss - c) / h)
    # the exact k h + c must not exceed the loss: compare with a few ulps of room
    def over(k: ArrayF) -> ArrayF:
        return np.asarray(k * h + c + 4.0 * _U * (np.abs(k * h) + abs(c)) > loss)

    k = np.where(over(k), k - 1.0, k)
    k = np.where(over(k), k - 1.0, k)
    mass = np.exp(lp - ep) * (1.0 - 4.0 * _U)
    ki = k.astype(np.int64)
    k0 = int(ki.min())
    m = np.asarray(np.bincount(ki - k0, weights=mass), dtype=np.float64) * (1.0 - 1e-12)
    m.setflags(write=False)
    return k0, m, c


@dataclass(frozen=True)
class _Composed:
    """The composed sub-probability on the grid (k_start + i) h and its error allowances."""

    k_start: int
    probs: ArrayF
    h: float
    err2: float      # bound on the l2 norm of the floating-point error of ``probs``
    eta: float       # mass aliased into the window
    offset: float    # Σ T_g c_g, rounded down: the loss at index i is (k_start + i) h + offset


def _window(parts: Sequence[tuple[int, ArrayF, int]], eta: float) -> tuple[int, int]:
    """[A, B] (offsets from Σ T k0) holding all but ``eta`` of the composed mass, by Chernoff:
    mass(S ≥ B) ≤ exp(Σ T log M(λ) − λ B) for λ > 0 (and the mirror for λ < 0)."""
    mean = sum(t * float(np.dot(np.arange(m.size), m) / max(m.sum(), 1e-300))
               for _, m, t in parts)
    var = 0.0
    for _, m, t in parts:
        i = np.arange(m.size)
        tot = max(float(m.sum()), 1e-300)
        mu = float(np.dot(i, m)) / tot
        var += t * float(np.dot((i - mu) ** 2, m)) / tot
    sd = math.sqrt(max(var, 1.0))
    full = sum(t * (m.size - 1) for _, m, t in parts)
    lo_b, hi_b = 0.0, float(full)
    log_tail = math.log(2.0 / eta)
    for z in np.geomspace(0.5, 60.0, 12):
        for sign in (1.0, -1.0):
            lam = sign * z / sd
            log_m = 0.0
            for _, m, t in parts:
                i = np.arange(m.size)
                with np.errstate(all="ignore"):
                    lm = special.logsumexp(lam * i, b=m)
                log_m += t * float(lm)
            if not math.isfinite(log_m):
                continue
            bound = (log_m + log_tail) / lam
            if sign > 0:
                hi_b = min(hi_b, math.ceil(bound))
            else:
                lo_b = max(lo_b, math.floor(bound))
    del mean
    return int(max(lo_b, 0)), int(min(max(hi_b, lo_b), full))


def _fft_error(length: int, parts: Sequence[tuple[int, ArrayF, int]]) -> float:
    r"""A priori bound on the l2 norm of the error of irfft(∏ rfft(m_g)^{T_g}).

    A length-n FFT computed in floating point has :math:`\|\hat y - y\|_2 \le \kappa \|y\|_2`,
    :math:`\kappa = \log_2 n \cdot \eta/(1 - \log_2 n\cdot\eta)`, :math:`\eta = \mu +
    \gamma_4(\sqrt2 + \mu)` (Higham, Thm. 24.2; μ the twiddle factors' error); we take
    κ = 10 · 7u · ⌈log₂ n⌉. With unnormalised transforms ‖X‖₂ = √n‖x‖₂ and |X_k| ≤ ‖m‖₁ ≤ 1, so
    a power X^T moves by at most T|E_k|(1 + ‖E‖_∞)^{T-1}; the powers and products themselves
    round by at most 8u per multiplication level (T_total u in all, with a factor 8); the
    inverse transform divides by √n and adds κ‖y‖₂ ≤ κ."""
    kappa = 10.0 * 7.0 * _U * math.ceil(math.log2(max(length, 2)))
    total_t = sum(t for _, _, t in parts)
    e_inf = max(kappa * math.sqrt(length) * float(np.linalg.norm(m)) for _, m, _ in parts)
    grow = math.exp(min(total_t * e_inf, 700.0))
    err = grow * kappa * sum(t * float(np.linalg.norm(m)) for _, m, t in parts)
    err += 8.0 * _U * (total_t + len(parts)) + kappa
    return 2.0 * err  # the half spectrum of rfft against the full one: a factor 2 of room


def _compose(groups: Sequence[tuple[BinnedPair, int]], h: float) -> _Composed | None:
    """The composition, or ``None`` when it does not fit (too many points or steps, or a
    degenerate pair): a missing lower end is valid, a wrong one is not."""
    if sum(int(t) for _, t in groups) > MAX_STEPS or not math.isfinite(h) or h <= 0.0:
        return None
    try:
        with np.errstate(all="ignore"):
            return _compose_fft(groups, h)
    except (ArithmeticError, ValueError, MemoryError):
        return None


def _compose_fft(groups: Sequence[tuple[BinnedPair, int]], h: float) -> _Composed | None:
    parts = []
    offset = 0.0
    for pair, t in groups:
        k0, m, c = pair_pmf(pair, h)
        parts.append((k0, m, int(t)))
        offset = math.nextafter(offset + math.nextafter(int(t) * c, -math.inf), -math.inf)
    a, b = _window(parts, _ETA)
    if b < a or b - a + 1 > MAX_POINTS:
        return None
    length = fft.next_fast_len(b - a + 1, real=True)
    if length > MAX_POINTS:
        return None
    spec = np.ones(length // 2 + 1, dtype=np.complex128)
    for _, m, t in parts:
        spec = spec * fft.rfft(m, length) ** t
    y = fft.irfft(spec, length)
    base = sum(t * k0 for k0, _, t in parts)
    # composed index base + c sits at position c mod length; read the window [a, a + length)
    probs = np.roll(y, -a)
    probs = np.maximum(probs, 0.0)  # the true masses are >= 0: clipping only reduces the error
    return _Composed(base + a, probs, h, _fft_error(length, parts), _ETA, offset)


def _delta_at(c: _Composed, epsilon: float) -> float:
    """Lower bound on δ(ε) from the composed sub-probability."""
    k = np.arange(c.probs.size, dtype=np.float64) + float(c.k_start)
    losses = np.nextafter(np.nextafter(k * c.h, -np.inf) + c.offset, -np.inf)
    sel = losses > epsilon
    if not np.any(sel):
        return 0.0
    w = -np.expm1(epsilon - losses[sel])
    raw = float(np.dot(c.probs[sel], w))
    slack = float(np.linalg.norm(w)) * c.err2 + 2.0 * c.eta  # η twice: the Chernoff bound rounds
    return max(raw * (1.0 - _REL) - slack, 0.0)


def _step_for(groups: Sequence[tuple[BinnedPair, int]], points: float) -> float:
    """Grid step so that the composition window has about ``points`` points: the window spans
    about 30 standard deviations of the composed loss plus a few single-step spans (the loss's
    variance under P from the x grid by the trapezoid rule: a size, not a bound)."""
    var = 0.0
    span1 = 0.0
    for pair, t in groups:
        _, var1, span = _loss_moments(pair)
        var += t * var1
        span1 = max(span1, span)
    width = 30.0 * math.sqrt(var) + 2.0 * span1 / max(min(t for _, t in groups), 1) + 1e-3
    return max(width / points, 1e-7)


def _curve(c: _Composed) -> tuple[ArrayF, ArrayF, ArrayF, ArrayF]:
    """(l_j, S_j, A_j, δ(l_j)) of the composed sub-probability, by suffix sums: on
    [l_j, l_{j+1}), δ(ε) = S_j − e^{ε − l_j} A_j with S_j = Σ_{i>j} m_i and A_j = Σ_{i>j} m_i
    e^{l_j − l_i} = e^{−h}(m_{j+1} + A_{j+1}) (a first-order recursion, no overflow). A locator
    only: every answer is then checked by :func:`_delta_at`."""
    from scipy import signal

    k = np.arange(c.probs.size, dtype=np.float64) + float(c.k_start)
    losses = k * c.h + c.offset
    tail = np.concatenate((np.cumsum(c.probs[::-1])[::-1][1:], [0.0]))
    decay = math.exp(-c.h)
    a_rev = signal.lfilter([decay], [1.0, -decay], c.probs[1:][::-1])
    a = np.concatenate((np.asarray(a_rev)[::-1], [0.0]))
    return losses, tail, a, tail - a


def _composed_for(groups: Sequence[tuple[BinnedPair, int]], points: float) -> _Composed | None:
    """The composition on a grid of about ``points`` points (``None`` when it does not fit)."""
    try:
        with np.errstate(all="ignore"):
            h = _step_for(groups, points)
    except (ArithmeticError, ValueError):
        return None
    return _compose(groups, h)


def pmf_cells(groups: Sequence[tuple[BinnedPair, int]], points: float) -> int:
    """Cells of the one-step pmfs on the grid for ``points`` (cached: cheap after a bound)."""
    try:
        with np.errstate(all="ignore"):
            h = _step_for(groups, points)
            return sum(int(pair_pmf(pair, h)[1].size) for pair, _ in groups)
    except (ArithmeticError, ValueError):
        return 0


def binned_delta_lower(groups: Sequence[tuple[BinnedPair, int]], epsilon: float,
                       points: float = POINTS) -> float | None:
    """Proven lower bound on δ(ε) of the composition (``None`` when it does not fit)."""
    c = _composed_for(groups, points)
    if c is None:
        return None
    return min(_delta_at(c, epsilon), 1.0)


def binned_epsilon_lower(groups: Sequence[tuple[BinnedPair, int]], delta: float,
                         points: float = POINTS) -> float | None:
    """Proven lower bound on ε(δ) of the composition: an ε whose proven lower δ exceeds δ
    (``None`` when it does not fit; 0 when it fits but shows no positive ε). The curve's suffix
    sums locate the root; the answer is an ε at which :func:`_delta_at` (with every allowance)
    is above δ, stepped down until it is."""
    c = _composed_for(groups, points)
    if c is None:
        return None
    if not _delta_at(c, 0.0) > delta:
        return 0.0
    losses, tail, a, curve = _curve(c)
    # the allowance at its largest (‖w‖₂ at most the square root of the cells above ε)
    slack = math.sqrt(c.probs.size) * c.err2 + 2.0 * c.eta
    target = delta * (1.0 + 1e-6) + slack
    above = np.nonzero(curve > target)[0]
    if above.size == 0:
        return 0.0
    j = int(above[-1])
    eps = float(losses[j])
    if a[j] > 0.0 and tail[j] > target:
        eps += max(min(math.log((tail[j] - target) / a[j]), c.h), 0.0)
    step = 0.5 * c.h
    for _ in range(40):
        if not eps > 0.0:
            return 0.0
        if _delta_at(c, eps) > delta:
            return eps * (1.0 - _REL)
        eps -= step
        step *= 2.0
    return 0.0
