"""The fast paths of the exact Gaussian curve and its vectorised inverses, against mpmath.

The forward curve picks, element by element, a Gauss–Legendre rule by the interval's relative
length and an evaluation of the integrand (``erfcx`` below 8, the asymptotic series with a number
of terms that depends on the point, node by node across 8); the inverses work on blocks of
arrays, test ε = 0 with a closed form first, and ``approx_dp_bound`` re-uses the inverse's own
check where the square root of the returned bound gives back μ. Every expected value here comes
from an independent 60-digit mpmath evaluation (or the library's own scalar calls, for the
consistency of blocks), so each test fails if a path is wrong.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting import analytic_gaussian as bw
from dpopt.accounting.budgets import ApproxDP, approx_dp_bound
from dpopt.accounting.gdp import (
    epsilon_for_delta,
    epsilon_for_log_delta,
    gaussian_sigma,
    log_delta_for_epsilon,
    mu_for,
)

sys.path.insert(0, str(Path(__file__).parent))
from mp_reference import mp_log_delta

MARGIN = 1e-12  # the library's rounding margin on log delta, relative to (1 + |log delta|)
SQRT2 = math.sqrt(2.0)

# x = -a / sqrt 2 on both sides of every switch of the integrand's evaluation (8, 12, 24, 64,
# 1000) and of the closed form (1e8); r = h / max(x, 1) on both sides of every rule's limit
XS = [0.3, 2.0, 7.99, 8.01, 11.99, 12.01, 23.9, 24.1, 63.9, 64.1, 999.0, 1001.0, 9.9e7, 1.01e8]
RS = [1e-9, 1.9e-4, 2.1e-4, 4.9e-3, 5.1e-3, 0.024, 0.026, 0.119, 0.121, 0.299, 0.301, 0.99]


def _budget(x: float, r: float) -> tuple[float, float]:
    """(ε, μ) with a = μ/2 - ε/μ = -x sqrt 2 and h = μ / sqrt 2 = r max(x, 1) (to rounding)."""
    mu = r * max(x, 1.0) * SQRT2
    return mu * (mu / 2.0 + x * SQRT2), mu


@pytest.mark.parametrize("x", XS)
def test_forward_curve_at_every_switch(x: float) -> None:
    pairs = [_budget(x, r) for r in RS]
    eps = np.array([p[0] for p in pairs])
    mus = np.array([p[1] for p in pairs])
    got = np.asarray(log_delta_for_epsilon(eps, mus))
    for e, m, g in zip(eps, mus, got, strict=True):
        ref = mp_log_delta(float(e), float(m))
        # three orders of magnitude inside the margin the inverses rely on
        assert abs(mpmath.mpf(float(g)) - ref) <= 1e-3 * MARGIN * (1 + abs(ref)), (x, e, m)


def test_inverses_at_every_switch_are_safe() -> None:
    pairs = [_budget(x, r) for x in XS[:-2] for r in RS[1::2]]
    eps = np.array([p[0] for p in pairs])
    mus = np.array([p[1] for p in pairs])
    log_d = np.asarray(log_delta_for_epsilon(eps, mus))
    mu_back = np.asarray(bw.max_mu(eps, log_d))
    eps_back, bad = bw.min_epsilon_mu(mus, log_d)
    assert not bad.any()
    for i in range(0, eps.size, 3):  # a third of them: each costs two mpmath evaluations
        target = float(log_d[i])
        assert mp_log_delta(float(eps[i]), float(mu_back[i])) <= target
        assert mp_log_delta(float(eps_back[i]), float(mus[i])) <= target
        # tight: the answers are within 1e-9 of the inputs that produced the target
        assert mu_back[i] == pytest.approx(mus[i], rel=1e-9)
        assert eps_back[i] == pytest.approx(eps[i], rel=1e-9, abs=1e-300)


def test_blocks_agree_with_other_splits_and_scalar_calls() -> None:
    rng = np.random.default_rng(17)
    n = 2 * bw._BLOCK + 1234  # three blocks, the last one partial
    eps = 10 ** rng.uniform(-3, math.log10(500.0), n)
    delta = 10 ** rng.uniform(-300, -1, n)
    mus = np.asarray(mu_for(eps, delta))
    cut = [0, 5000, bw._BLOCK + 17, n]  # blocks that straddle the library's own
    pieces = np.concatenate(
        [np.asarray(mu_for(eps[a:b], delta[a:b])) for a, b in itertools.pairwise(cut)]
    )
    np.testing.assert_allclose(mus, pieces, rtol=1e-14, atol=0.0)
    grid = np.asarray(mu_for(eps.reshape(2, -1), delta.reshape(2, -1)))  # n is even
    assert grid.shape == (2, n // 2)
    np.testing.assert_allclose(grid, mus.reshape(2, -1), rtol=1e-14, atol=0.0)
    back = np.asarray(epsilon_for_delta(delta, mus))
    sig = np.asarray(gaussian_sigma(eps, delta))
    q = np.asarray(approx_dp_bound(eps, delta))
    for i in rng.choice(n, 12, replace=False):
        e, d = float(eps[i]), float(delta[i])
        assert mus[i] == pytest.approx(mu_for(e, d), rel=1e-14)
        assert back[i] == pytest.approx(epsilon_for_delta(d, float(mus[i])), rel=1e-14)
        assert sig[i] == pytest.approx(gaussian_sigma(e, d), rel=1e-14)
        assert q[i] == pytest.approx(ApproxDP(e, d).mahalanobis_bound(), rel=1e-14)
        # and safe against mpmath, in every block
        assert mp_log_delta(e, float(mus[i])) <= math.log(d)
        assert mp_log_delta(float(back[i]), float(mus[i])) <= math.log(d)


@pytest.mark.parametrize("mu", [1e-300, 1e-20, 0.01, 1.0, 5.0])
def test_zero_epsilon_exactly_when_it_suffices(mu: float) -> None:
    # delta(0; mu) = erf(mu / (2 sqrt 2)), from mpmath
    with mpmath.workdps(60):
        log_d0 = mpmath.log(mpmath.erf(mpmath.mpf(mu) / (2 * mpmath.sqrt(2))))
    above = float(log_d0 + mpmath.mpf("1e-6"))  # epsilon = 0 meets this target
    below = float(log_d0 - mpmath.mpf("1e-6"))  # epsilon = 0 does not
    got = np.asarray(epsilon_for_log_delta(np.array([above, below, above]), mu))
    assert got[0] == 0.0 and got[2] == 0.0
    assert got[1] > 0.0 and mp_log_delta(float(got[1]), mu) <= below
    assert epsilon_for_log_delta(above, mu) == 0.0
    if above < 0.0 and math.exp(above) > 0.0:
        assert epsilon_for_delta(math.exp(above), mu) == 0.0


def test_bound_reuses_the_check_only_where_it_applies() -> None:
    # mu inside (1e-137, 1e150): sqrt_up(q) gives back mu and the inverse's check is re-used;
    # outside (mu ~ 1e-150 or ~ 1.4e150) it is re-checked: every answer admitted and safe
    eps = np.array([0.0, 1e-10, 1.0, 1e300, 5e299, 0.0, 3.0, 1e-3])
    delta = np.array([1e-150, 1e-5, 1e-300, 0.5, 0.9, 1e-5, 1e-150, 0.01])
    q = np.asarray(approx_dp_bound(eps, delta))
    for e, d, qi in zip(eps, delta, q, strict=True):
        assert ApproxDP(float(e), float(d)).admits(float(qi))
        with mpmath.workdps(80):
            mu_eff = mpmath.sqrt(mpmath.mpf(float(qi)))
        assert mp_log_delta(float(e), float(mu_eff)) <= math.log(d)
    assert q[0] < 1e-290 and q[3] > 1e299  # both ends of the exact range were exercised


@settings(max_examples=20, deadline=None)
@given(
    log10_eps=st.lists(st.floats(-6.0, 3.0), min_size=1, max_size=40),
    log10_delta=st.floats(-300.0, -1.0),
)
def test_bound_arrays_equal_scalar_bounds_and_are_admitted(
    log10_eps: list[float], log10_delta: float
) -> None:
    eps = 10.0 ** np.array(log10_eps)
    d = 10.0**log10_delta
    q = np.asarray(approx_dp_bound(eps, d))
    for e, qi in zip(eps, q, strict=True):
        budget = ApproxDP(float(e), d)
        assert budget.admits(float(qi))
        assert qi == pytest.approx(budget.mahalanobis_bound(), rel=1e-14)


@pytest.mark.parametrize("low", [t[0] for t in bw._ASYM_TERMS])
def test_asymptotic_integrand_with_its_terms(low: float) -> None:
    # g(u) = 2/sqrt(pi) - 2u erfcx(u) at the low end of each class (where its terms matter
    # most) and a bit above, to within 2 ulps: no cancellation in the series form
    u = np.array([low, low * 1.001, low * 1.3])
    got = bw._neg_erfcx_prime(u)
    for ui, gi in zip(u, got, strict=True):
        with mpmath.workdps(60):
            x = mpmath.mpf(float(ui))
            ref = 2 / mpmath.sqrt(mpmath.pi) - 2 * x * mpmath.erfc(x) * mpmath.exp(x * x)
        assert abs(mpmath.mpf(float(gi)) / ref - 1) <= 2 * 2.0**-52, (ui, float(gi / ref - 1))


def test_subnormal_bound_is_not_lost() -> None:
    # (0, 1e-162)-DP admits mu = sqrt(5e-324) (mpmath) but not sqrt(1e-323): the largest
    # double bound is the smallest subnormal, where fl(mu²) rounding down used to give 0
    target = math.log(1e-162)
    with mpmath.workdps(80):
        assert mp_log_delta(0.0, float(mpmath.sqrt(mpmath.mpf(5e-324)))) <= target
        assert mp_log_delta(0.0, float(mpmath.sqrt(mpmath.mpf(1e-323)))) > target
    assert approx_dp_bound(0.0, 1e-162) == 5e-324
    assert ApproxDP(0.0, 1e-162).mahalanobis_bound() == 5e-324
    np.testing.assert_array_equal(approx_dp_bound([0.0, 0.0], [1e-162, 1e-162]), [5e-324] * 2)


def test_round_trip_through_mu_stays_at_the_budget() -> None:
    # mu_for steps 4 ulps below its root and epsilon_for_delta 1 ulp above its own, so the
    # epsilon recomputed from a budget's mu is the budget's epsilon up to the forward formula's
    # rounding noise (a few ulps here), and tight
    rng = np.random.default_rng(23)
    eps = 10 ** rng.uniform(-1, 1, 500)
    delta = 10 ** rng.uniform(-12, -3, 500)
    back = np.asarray(epsilon_for_delta(delta, np.asarray(mu_for(eps, delta))))
    assert np.all(back <= eps * (1 + 32 * 2.0**-52))
    assert np.all(back >= eps * (1 - 1e-9))
    assert epsilon_for_delta(1e-6, mu_for(1.0, 1e-6)) <= 1.0
