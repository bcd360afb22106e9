"""The binned likelihood-ratio lower ends (dpopt.accounting._binned) against independent
computations: the exact Gaussian curve in mpmath (no subsampling), the exact hockey-stick
divergence of one and two steps by quadrature, a brute-force composition of the binned pmf in
60-digit arithmetic, and dp-accounting's pessimistic PLD and replace-one RDP as upper walls."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from dpopt.accounting import _binned as binned
from dpopt.accounting.composition import (
    GaussianSteps,
    calibrate_noise,
    composed_epsilon,
    lower_delta,
    lower_epsilon,
)

sys.path.insert(0, str(Path(__file__).parent))
from mp_reference import mp_log_delta


def _pessimistic_epsilon(p: float, sigma: float, steps: int, delta: float,
                         disc: float = 1e-3) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pldm

    one = pldm.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=p,
                                       value_discretization_interval=disc)
    return float(one.self_compose(steps).get_epsilon_for_delta(delta))


def _pair_delta_one(pair: binned.BinnedPair, eps: float) -> float:
    """Exact δ(ε) of one step of a pair whose loss increases in x: P(x > x*) − e^ε Q(x > x*)
    at the x* where the loss crosses ε (scipy's tails, no binning)."""
    def tail(x: float, w: tuple[float, ...], m: tuple[float, ...]) -> float:
        return float(sum(wi * stats.norm.sf((x - mi) / pair.s)
                         for wi, mi in zip(w, m, strict=True)))

    f = lambda x: float(pair.loss(np.array([x]))[0]) - eps  # noqa: E731
    lo, hi = -60.0 * pair.s - 5.0, 60.0 * pair.s + 5.0
    if f(lo) >= 0.0:
        x_star = -np.inf
    elif f(hi) <= 0.0:
        return 0.0
    else:
        x_star = optimize.brentq(f, lo, hi, xtol=1e-13)
    if not np.isfinite(x_star):
        return 1.0 - math.exp(eps)
    return max(tail(x_star, pair.p_weights, pair.p_means)
               - math.exp(eps) * tail(x_star, pair.q_weights, pair.q_means), 0.0)


def _pair_delta_two(pair: binned.BinnedPair, eps: float) -> float:
    """Exact δ(ε) of two steps: ∫ p(x) δ₁(ε − L(x)) dx (quadrature)."""
    def dens(x: float) -> float:
        return float(sum(w * stats.norm.pdf(x, m, pair.s)
                         for w, m in zip(pair.p_weights, pair.p_means, strict=True)))

    def integrand(x: float) -> float:
        return dens(x) * _pair_delta_one(pair, eps - float(pair.loss(np.array([x]))[0]))

    val, _ = integrate.quad(integrand, -10 * pair.s - 1, 10 * pair.s + 1, limit=300,
                            epsabs=1e-12)
    return float(val)


PAIRS = [("remove", 0.3, 0.8, 0.5), ("remove", 0.1, 1.5, 0.2), ("remove", 0.05, 0.5, 2.0),
         ("plus_minus", 0.3, 0.8, 0.3), ("plus_minus", 0.1, 0.4, 1.0)]


def _make(kind: str, p: float, s: float) -> binned.BinnedPair:
    return getattr(binned.BinnedPair, kind)(p, s)


@pytest.mark.parametrize(("kind", "p", "s", "eps"), PAIRS)
def test_one_and_two_steps_are_below_the_exact_divergence_and_close(
        kind: str, p: float, s: float, eps: float) -> None:
    pair = _make(kind, p, s)
    one = _pair_delta_one(pair, eps)
    got1 = binned.binned_delta_lower([(pair, 1)], eps)
    assert got1 is not None and got1 <= one
    assert got1 >= one * (1 - 1e-3) - 1e-9  # a bound, not a vacuous one
    two = _pair_delta_two(pair, eps)
    got2 = binned.binned_delta_lower([(pair, 2)], eps)
    assert got2 is not None and got2 <= two * (1 + 1e-7) + 1e-12  # quadrature's own error
    assert got2 >= two * (1 - 1e-2) - 1e-8


def test_the_fft_composition_matches_a_60_digit_brute_force_within_its_bound() -> None:
    # a coarse pmf (few cells) composed 4 times exactly in mpmath against the FFT power: the
    # difference must be inside the a-priori error bound the composition subtracts
    pair = binned.BinnedPair.remove(0.2, 0.7)
    h, steps = 0.1, 4
    k0, m, _ = binned.pair_pmf(pair, h)
    comp = binned._compose([(pair, steps)], h)
    assert comp is not None
    with mpmath.workdps(60):
        exact = [mpmath.mpf(float(v)) for v in m]
        total = [mpmath.mpf(1)]
        for _ in range(steps):
            nxt = [mpmath.mpf(0)] * (len(total) + len(exact) - 1)
            for i, a in enumerate(total):
                for j, b in enumerate(exact):
                    nxt[i + j] += a * b
            total = nxt
        ref = np.zeros(comp.probs.size)
        for i, v in enumerate(total):
            pos = steps * k0 + i - comp.k_start
            if 0 <= pos < comp.probs.size:
                ref[pos] += float(v)
    assert float(np.linalg.norm(comp.probs - ref)) <= comp.err2
    # δ from the composed pmf against δ from the exact one, at a few ε
    losses = (np.arange(ref.size) + comp.k_start) * h + comp.offset
    for eps in (0.0, 0.5, 1.5, 3.0):
        sel = losses > eps
        exact_delta = float(np.dot(ref[sel], -np.expm1(eps - losses[sel])))
        assert binned._delta_at(comp, eps) <= exact_delta
        assert binned._delta_at(comp, eps) >= exact_delta * (1 - 1e-6) - 1e-12


@pytest.mark.parametrize(("mu", "steps", "eps"), [(0.5, 1, 0.5), (2.0, 4, 3.0), (1.0, 25, 1.0)])
def test_gaussian_steps_against_the_exact_curve_in_mpmath(mu: float, steps: int,
                                                         eps: float) -> None:
    # p = 1: the pair is (N(1, s²), N(0, s²)); T steps compose to one Gaussian of
    # μ = √T / s, whose δ(ε) is the Balle–Wang curve (60-digit mpmath)
    s = math.sqrt(steps) / mu
    pair = binned.BinnedPair.remove(1.0, s)
    got = binned.binned_delta_lower([(pair, steps)], eps)
    exact = float(mpmath.exp(mp_log_delta(eps, mu)))
    assert got is not None and got <= exact
    assert got >= exact * (1 - 2e-3)


def test_the_prv_counterexample_stays_below_the_exact_epsilon() -> None:
    # prv-accountant's lower end was 5.6144 here, above the exact ε (<= 5.60502, from
    # dp-accounting's pessimistic PLD at discretisation 1e-5)
    run = GaussianSteps.from_noise_multiplier(1.0, 90, 0.12109375, "poisson")
    low, how = lower_epsilon(run, 1e-3)
    assert how == "binned"
    assert 5.600 <= low <= 5.60502


@settings(max_examples=6, deadline=None)
@given(sigma=st.floats(0.5, 8.0), rate=st.floats(1e-3, 0.3),
       steps=st.integers(1, 2000), log10_delta=st.floats(-9.0, -3.0))
def test_binned_lower_ends_are_below_the_pessimistic_pld(sigma: float, rate: float,
                                                         steps: int,
                                                         log10_delta: float) -> None:
    delta = 10.0 ** log10_delta
    pair = binned.BinnedPair.remove(rate, sigma)
    low = binned.binned_epsilon_lower([(pair, steps)], delta)
    upper = _pessimistic_epsilon(rate, sigma, steps, delta)
    assert low is None or 0.0 <= low <= upper
    d_low = binned.binned_delta_lower([(pair, steps)], 1.0)
    assert d_low is not None and 0.0 <= d_low <= 1.0 and not math.isnan(d_low)


@settings(max_examples=3, deadline=None)
@given(sigma=st.floats(0.8, 6.0), batch=st.integers(16, 400), steps=st.integers(1, 500),
       log10_delta=st.floats(-9.0, -4.0))
def test_fixed_size_lower_ends_are_below_the_replace_one_rdp(sigma: float, batch: int,
                                                             steps: int,
                                                             log10_delta: float) -> None:
    import dp_accounting as dpa
    from dp_accounting.rdp import rdp_privacy_accountant

    n = 10_000
    delta = 10.0 ** log10_delta
    run = GaussianSteps.from_noise_multiplier(sigma, steps, batch / n, "without_replacement")
    low, how = lower_epsilon(run, delta)
    acc = rdp_privacy_accountant.RdpAccountant(
        neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SelfComposedDpEvent(
        dpa.SampledWithoutReplacementDpEvent(n, batch, dpa.GaussianDpEvent(sigma / 2)), steps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upper = float(acc.get_epsilon(delta))
    assert 0.0 <= low <= upper * (1 + 1e-9), how


def test_the_delta_lower_end_is_below_the_pld_delta() -> None:
    run = GaussianSteps.from_noise_multiplier(0.9, 300, 0.05, "poisson")
    low, how = lower_delta(run, 2.0)
    from dp_accounting.pld import privacy_loss_distribution as pldm

    one = pldm.from_gaussian_mechanism(standard_deviation=0.9, sampling_prob=0.05,
                                       value_discretization_interval=1e-4)
    upper = float(one.self_compose(300).get_delta_for_epsilon(2.0))
    assert how == "binned" and 0.0 < low <= upper
    assert low >= 0.99 * upper


@pytest.mark.parametrize(("p", "steps", "s"), [(0.05, 50, 1.0), (0.5, 4, 3.0), (0.9, 2, 10.0)])
def test_the_remove_pair_is_at_least_as_strong_as_the_plus_minus_pair(p: float, steps: int,
                                                                       s: float) -> None:
    # both are realised by fixed-size batches; lower_epsilon computes the remove pair only,
    # which is right while its lower end is the larger one
    rm = binned.binned_epsilon_lower([(binned.BinnedPair.remove(p, s), steps)], 1e-5)
    pm = binned.binned_epsilon_lower([(binned.BinnedPair.plus_minus(p, s), steps)], 1e-5)
    assert rm is not None and pm is not None and rm >= pm


def test_calibrated_intervals_are_two_sided_with_a_proven_lower_end() -> None:
    cal = calibrate_noise(10.0, 1e-5, 1000, 0.01, "poisson", discretization=1e-3)
    assert cal.lower_accountant in ("binned", "sum-test")
    lo, hi = cal.noise_multiplier_interval
    assert 0.0 < lo <= hi and cal.relative_width < 0.05
    # the refuted σ really misses the target by the pessimistic PLD as well (an upper wall
    # of ε: if the lower end says ε > 10 there, the PLD must say so too)
    assert _pessimistic_epsilon(0.01, lo, 1000, 1e-5, disc=1e-4) > 10.0
    res = composed_epsilon(GaussianSteps.from_noise_multiplier(hi, 1000, 0.01, "poisson"),
                           1e-5, discretization=1e-3)
    assert res.lower <= 10.0 * (1 + 1e-9) and res.lower_accountant in ("binned", "sum-test")
