"""Property tests of the Gaussian (ε, δ) curve and its vectorised inverses against mpmath.

Extreme budgets: ε from 1e-300 to 1e300 (and 0), δ from 1e-300 to 0.999, μ from 1e-200 to 1e200.
Every answer is re-checked with an independent 60-digit mpmath evaluation of
δ(ε; μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (or its Mills-ratio asymptotic form far in the tail):
safe (never on the optimistic side), tight (within the documented margin, or the next double
fails), and named errors only where mpmath confirms the answer is outside the double range.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dpopt.accounting.budgets import BoundOverflowError, approx_dp_bound
from dpopt.accounting.gdp import (
    delta_for_epsilon,
    epsilon_for_delta,
    gaussian_sigma,
    log_delta_for_epsilon,
    mu_for,
)
from dpopt.errors import InfeasibleError

sys.path.insert(0, str(Path(__file__).parent))
from mp_reference import mp_log_delta, to_float

DBL_MAX = float(np.finfo(np.float64).max)
TINY = 5e-324
MARGIN = 1e-12  # the library's rounding margin on log delta, relative to (1 + |log delta|)
N = 60  # examples per property (each costs a few mpmath evaluations)


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda x: float(10.0**x))


EPS = st.one_of(st.just(0.0), log_uniform(1e-300, 1e300))
DELTA = log_uniform(1e-300, 0.999)
MU = log_uniform(1e-200, 1e200)


ULPS = 16 * 2.0**-52  # the answer is stepped a few ulps to the safe side after the root-find


def _up(x: float) -> float:
    """16 ulps (relative) toward larger values, at least the next double."""
    return max(float(np.nextafter(x, np.inf)), x * (1 + ULPS))


def _down(x: float) -> float:
    """16 ulps (relative) toward smaller values, at least the previous double."""
    return min(float(np.nextafter(x, 0.0)), x * (1 - ULPS))


def _tight(ref_at_answer: mpmath.mpf, target: float, ref_at_next: mpmath.mpf) -> bool:
    """Within twice the margin of the target, or 16 ulps further on the unsafe side fails."""
    gap = mpmath.mpf(target) - ref_at_answer
    return bool(gap <= 2 * MARGIN * (1 + abs(target)) or ref_at_next > target)


@settings(max_examples=2 * N)
@given(eps=EPS, mu=MU)
def test_forward_curve_matches_mpmath(eps: float, mu: float) -> None:
    got = log_delta_for_epsilon(eps, mu)
    ref = mp_log_delta(eps, mu)
    if ref < -DBL_MAX:
        assert got == -math.inf
        return
    assert math.isfinite(got)
    # an order of magnitude inside the margin the inverses rely on
    assert abs(mpmath.mpf(got) - ref) <= 0.1 * MARGIN * (1 + abs(ref))


@settings(max_examples=N)
@given(eps=EPS, delta=DELTA)
def test_mu_for_is_safe_and_tight(eps: float, delta: float) -> None:
    target = math.log(delta)
    try:
        mu = mu_for(eps, delta)
    except InfeasibleError:
        assert mp_log_delta(eps, TINY) > target  # even the smallest positive mu is too much
        return
    assert mu > 0.0 and math.isfinite(mu)
    assert mp_log_delta(eps, mu) <= target
    assert _tight(mp_log_delta(eps, mu), target, mp_log_delta(eps, _up(mu)))


@settings(max_examples=N)
@given(delta=DELTA, mu=MU)
def test_epsilon_for_delta_is_safe_and_tight(delta: float, mu: float) -> None:
    target = math.log(delta)
    try:
        eps = epsilon_for_delta(delta, mu)
    except InfeasibleError:
        assert mp_log_delta(DBL_MAX, mu) > target  # even the largest epsilon is not enough
        return
    assert eps >= 0.0 and math.isfinite(eps)
    assert mp_log_delta(eps, mu) <= target
    if eps > 0.0:
        assert _tight(mp_log_delta(eps, mu), target, mp_log_delta(_down(eps), mu))


@settings(max_examples=N)
@given(eps=EPS, delta=DELTA, sens=log_uniform(1e-10, 1e10))
def test_gaussian_sigma_is_safe(eps: float, delta: float, sens: float) -> None:
    target = math.log(delta)
    try:
        sigma = gaussian_sigma(eps, delta, sens)
    except InfeasibleError:
        # mpmath confirms: even the largest double as sigma (or the smallest mu) fails
        with mpmath.workdps(60):
            mu_at_max = mpmath.mpf(sens) / mpmath.mpf(DBL_MAX)
        assert mp_log_delta(eps, float(mu_at_max)) > target or mp_log_delta(eps, TINY) > target
        return
    with mpmath.workdps(80):
        mu_eff = mpmath.mpf(sens) / mpmath.mpf(sigma)  # exact enough: 80 digits
    assert mp_log_delta(eps, mu_eff) <= target  # type: ignore[arg-type]


@settings(max_examples=N)
@given(eps=EPS, delta=DELTA)
def test_approx_dp_bound_is_safe(eps: float, delta: float) -> None:
    target = math.log(delta)
    try:
        q = approx_dp_bound(eps, delta)
    except BoundOverflowError:
        assert mp_log_delta(eps, math.sqrt(DBL_MAX)) <= target  # the bound really exceeds
        return
    except InfeasibleError:
        with mpmath.workdps(60):
            mu_min = mpmath.sqrt(mpmath.mpf(TINY))
        assert mp_log_delta(eps, mu_min) > target  # type: ignore[arg-type]
        return
    assert 0.0 < q <= DBL_MAX
    with mpmath.workdps(60):
        mu_q = mpmath.sqrt(mpmath.mpf(q))
    assert mp_log_delta(eps, mu_q) <= target  # type: ignore[arg-type]


# ------------------------------------------------------------------ monotonicity and round trips

REL = 1e-12  # the inverses are monotone up to the noise of the forward formula


@settings(max_examples=N)
@given(e1=log_uniform(1e-6, 1e3), e2=log_uniform(1e-6, 1e3), delta=log_uniform(1e-200, 0.5))
def test_mu_for_increases_with_epsilon(e1: float, e2: float, delta: float) -> None:
    lo, hi = min(e1, e2), max(e1, e2)
    assert mu_for(lo, delta) <= mu_for(hi, delta) * (1 + REL)


@settings(max_examples=N)
@given(eps=log_uniform(1e-6, 1e3), d1=log_uniform(1e-200, 0.5), d2=log_uniform(1e-200, 0.5))
def test_mu_for_increases_with_delta(eps: float, d1: float, d2: float) -> None:
    lo, hi = min(d1, d2), max(d1, d2)
    assert mu_for(eps, lo) <= mu_for(eps, hi) * (1 + REL)


@settings(max_examples=N)
@given(d1=log_uniform(1e-200, 0.5), d2=log_uniform(1e-200, 0.5), mu=log_uniform(1e-3, 1e3))
def test_epsilon_decreases_with_delta(d1: float, d2: float, mu: float) -> None:
    lo, hi = min(d1, d2), max(d1, d2)
    assert epsilon_for_delta(hi, mu) <= epsilon_for_delta(lo, mu) * (1 + REL) + 1e-300


@settings(max_examples=N)
@given(delta=log_uniform(1e-200, 0.5), m1=log_uniform(1e-3, 1e3), m2=log_uniform(1e-3, 1e3))
def test_epsilon_increases_with_mu(delta: float, m1: float, m2: float) -> None:
    lo, hi = min(m1, m2), max(m1, m2)
    assert epsilon_for_delta(delta, lo) <= epsilon_for_delta(delta, hi) * (1 + REL) + 1e-300


@settings(max_examples=N)
@given(eps=log_uniform(1e-3, 1e3), mu=log_uniform(1e-3, 1e3))
def test_round_trip_mu_delta_mu_is_never_optimistic(eps: float, mu: float) -> None:
    delta = delta_for_epsilon(eps, mu)
    assume(1e-300 < delta < 0.999)
    back = mu_for(eps, delta)
    # never optimistic: the recovered mu meets the computed delta by mpmath ...
    assert mp_log_delta(eps, back) <= math.log(delta)
    # ... and loses at most the margin (d log delta / d log mu >= |log delta| / 2 here)
    slope = to_float(mp_log_delta(eps, mu * (1 + 1e-6)) - mp_log_delta(eps, mu)) / 1e-6
    if slope > 1e-3:
        assert back >= mu * (1 - 4 * MARGIN * (1 + abs(math.log(delta))) / slope - 1e-14)


# ------------------------------------------------------------------ whole arrays in one call


def test_vectorised_answers_on_mixed_extremes_are_safe() -> None:
    rng = np.random.default_rng(2026)
    n = 120
    eps = 10 ** rng.uniform(-300, 300, n)
    eps[::7] = 0.0
    delta = 10 ** rng.uniform(-300, math.log10(0.999), n)
    # keep the elements mpmath says are representable, in one array call
    mus = np.asarray(mu_for(eps[eps < 1e150], delta[eps < 1e150]))
    for e, d, m in zip(eps[eps < 1e150], delta[eps < 1e150], mus, strict=True):
        assert mp_log_delta(float(e), float(m)) <= math.log(d)
    mu_grid = 10 ** rng.uniform(-200, 150, n)
    eps_back = np.asarray(epsilon_for_delta(delta, mu_grid))
    for d, m, e in zip(delta, mu_grid, eps_back, strict=True):
        assert mp_log_delta(float(e), float(m)) <= math.log(d)
        if e > 0:
            at_e = mp_log_delta(float(e), float(m))
            assert _tight(at_e, math.log(d), mp_log_delta(_down(float(e)), float(m)))


@pytest.mark.parametrize("eps", [1e-300, 1e-8, 1.0, 1e8, 1e300])
def test_mu_for_across_delta_decades(eps: float) -> None:
    deltas = np.logspace(-300, math.log10(0.999), 40)
    try:
        mus = np.asarray(mu_for(eps, deltas))
    except InfeasibleError:
        mus = np.array([mu_for(eps, d) if mp_log_delta(eps, TINY) <= math.log(d) else 0.0
                        for d in deltas])
    assert np.all(np.diff(mus) >= -REL * mus[1:])
    for d, m in zip(deltas, mus, strict=True):
        if m > 0:
            assert mp_log_delta(eps, float(m)) <= math.log(d)
