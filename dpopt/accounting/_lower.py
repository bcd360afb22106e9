r"""Proven lower bounds on the privacy loss of subsampled Gaussian runs (private).

A lower bound on the true ε(δ) (or δ(ε)) of a mechanism needs one pair of neighbouring datasets
and one test. dpopt uses the pair that every sampling scheme realises: in units of the
relation's sensitivity, each of the T steps of a
group with bound q and rate p releases, for the two neighbours,

.. math::
    P_t = (1-p)\,N(0, s^2) + p\,N(1, s^2), \qquad Q_t = N(0, s^2), \qquad s = 1/\sqrt q,

independently across steps (Poisson sampling: the record is in the batch with probability p;
fixed-size batches: all other records share one clipped gradient −C and the replaced one has +C
against −C, so the batch sum moves by the sensitivity 2C exactly when it is drawn, with
probability p = B/N). Discarding outputs and adding noise are post-processing, so the steps of
one group alone, with s rounded up, give a valid bound.

**The sum test.** By the definition of (ε, δ)-DP, every event E has
:math:`P(E) \le e^\varepsilon Q(E) + \delta`; the sum :math:`S = \sum_t x_t` of the outputs is a
post-processing, so each threshold τ gives

.. math::
    \delta(\varepsilon) \ge P(S > \tau) - e^{\varepsilon} Q(S > \tau), \qquad
    \varepsilon(\delta) \ge \log\frac{P(S > \tau) - \delta}{Q(S > \tau)},

with :math:`S \sim N(0, Ts^2)` under Q and :math:`S \sim N(K, Ts^2)`, :math:`K \sim
\mathrm{Bin}(T, p)`, under P — Gaussian tails in log form (``scipy.special.log_ndtr``), no
discretisation. Every τ is a valid bound; the best one on a grid (refined by a bounded scalar
search) is kept. It is close to tight when the noise is large (the per-step likelihood ratio is
then nearly linear in x, so S is nearly sufficient), which is where mesh-based accountants need
the most cells (long runs at small ε).

The second route, the exact likelihood-ratio test of the binned output of the same pair
(composed by FFT with every rounding on the low side; tight where the sum test is not), lives in
:mod:`dpopt.accounting._binned`, which also holds the ±C pair of fixed-size batches; the third,
dp-accounting's optimistic PLD (used when the binned composition would not fit), in
:mod:`dpopt.accounting._dp_accounting`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

__all__ = ["sum_test_delta_lower", "sum_test_epsilon_lower"]

#: Slack on log P and log Q (round-off of the Gaussian tails, the binomial log-pmf and the
#: log-sum-exp; all far below it): log P is lowered and log Q raised by it before use.
_LOG_SLACK = 1e-10
#: Relative shave of the final bound.
_REL = 1e-9


def _log_tails(taus: np.ndarray, q: float, p: float, t: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """(log P(S > τ), log Q(S > τ)) of one group, for every τ; P's mixture keeps the binomial
    terms within 13 standard deviations (dropping terms lowers P, the safe side)."""
    s = math.nextafter(1.0 / math.sqrt(q), math.inf)
    sd = math.nextafter(s * math.sqrt(t), math.inf)
    if p >= 1.0:
        k = np.array([float(t)])
        lb = np.zeros(1)
    else:
        k, lb = _binomial_terms(t, p)
    z = (taus[:, None] - k[None, :]) / sd
    log_p = special.logsumexp(lb[None, :] + special.log_ndtr(-z), axis=1)
    log_q = special.log_ndtr(-taus / sd)
    return log_p - _LOG_SLACK, log_q + _LOG_SLACK


#: Most binomial terms kept one by one; beyond, the counts are grouped into blocks.
_MAX_TERMS = 20001


@lru_cache(maxsize=64)
def _binomial_terms(t: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Counts k and log-weights of K ~ Bin(t, p) within 13 standard deviations of the mean, for
    the mixture ``sum_k w_k Φ̄((τ - k)/sd)``, as lower bounds of it: dropping counts lowers it;
    with more than :data:`_MAX_TERMS` counts, each block of counts [a, b] carries its whole mass
    at its lowest count a (Φ̄((τ - k)/sd) increases with k), mass rounded down."""
    n = float(t)
    if n > t:  # fewer steps (discarding outputs) is the safe side
        n = math.nextafter(n, 0.0)
    mean, spread = n * p, math.sqrt(n * p * (1.0 - p))
    lo = max(math.floor(mean - 13.0 * spread) - 5.0, 0.0)
    hi = min(math.floor(mean + 13.0 * spread) + 5.0, n)
    if hi - lo + 1 <= _MAX_TERMS:
        k = np.arange(lo, hi + 1, dtype=np.float64)
        return k, stats.binom.logpmf(k, n, p)
    edges = np.unique(np.floor(np.linspace(lo, hi + 1, 2049)))
    a, b = edges[:-1], edges[1:] - 1
    # mass of [a, b] from the nearer tail (no cancellation against 1), rounded down
    low_side = stats.binom.cdf(b, n, p) - stats.binom.cdf(a - 1, n, p)
    high_side = stats.binom.sf(a - 1, n, p) - stats.binom.sf(b, n, p)
    mass = np.where(a > mean, high_side, low_side) - 1e-15
    keep = mass > 0.0
    return a[keep], np.log(mass[keep])


def _tau_range(q: float, p: float, t: int) -> tuple[float, float]:
    sd = math.sqrt(t / q)
    return -4.0 * sd, t * p + 40.0 * sd + 10.0 * math.sqrt(t * p + 1.0)


def _best(score: Callable[[np.ndarray], np.ndarray], lo: float, hi: float) -> float:
    """max over τ in [lo, hi] of ``score`` (vectorised): a grid, then a bounded search around the
    best grid point (every τ is valid, so the search only tightens the bound)."""
    grid = np.linspace(lo, hi, 97)
    vals = score(grid)
    i = int(np.argmax(vals))
    best = float(vals[i])
    if not math.isfinite(best):
        return best
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    try:
        res = optimize.minimize_scalar(lambda x: -float(score(np.array([x]))[0]),
                                       bounds=(a, b), method="bounded",
                                       options={"xatol": (b - a) * 1e-6})
        if -res.fun > best:
            best = float(-res.fun)
    except (ValueError, FloatingPointError):  # the grid point stands
        pass
    return best


def sum_test_epsilon_lower(groups: Sequence[tuple[float, float, int]], delta: float) -> float:
    """Largest proven lower bound on ε(δ) from the sum test over any one group (0 if none)."""
    ld = math.log(delta)
    best = 0.0
    for q, p, t in groups:
        def score(taus: np.ndarray, q: float = q, p: float = p, t: int = t) -> np.ndarray:
            log_p, log_q = _log_tails(taus, q, p, t)
            out = np.full(taus.shape, -np.inf)
            ok = log_p > ld
            with np.errstate(all="ignore"):
                out[ok] = (log_p[ok] + np.log(-np.expm1(ld - log_p[ok]))) - log_q[ok]
            return np.where(np.isnan(out), -np.inf, out)

        with np.errstate(all="ignore"):
            got = _best(score, *_tau_range(q, p, t))
        if math.isfinite(got) and got > 0.0:
            best = max(best, got * (1.0 - _REL) - 1e-12)
    return max(best, 0.0)


def sum_test_delta_lower(groups: Sequence[tuple[float, float, int]], epsilon: float) -> float:
    """Largest proven lower bound on δ(ε) from the sum test over any one group (0 if none)."""
    best = 0.0
    for q, p, t in groups:
        def score(taus: np.ndarray, q: float = q, p: float = p, t: int = t) -> np.ndarray:
            log_p, log_q = _log_tails(taus, q, p, t)
            with np.errstate(all="ignore"):
                gap = np.exp(log_p) * -np.expm1(np.minimum(epsilon + log_q - log_p, 0.0))
            return np.where(np.isnan(gap), -np.inf, gap)

        with np.errstate(all="ignore"):
            got = _best(score, *_tau_range(q, p, t))
        if math.isfinite(got) and got > 0.0:
            best = max(best, got * (1.0 - _REL) - 1e-300)
    return min(max(best, 0.0), 1.0)
