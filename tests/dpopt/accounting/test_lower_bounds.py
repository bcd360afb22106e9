"""Proven lower ends of subsampled runs: the sum test, the optimistic PLD, the event trees.

Each bound is compared with an independent computation of the pair it is for: the exact
hockey-stick divergence of T = 1 and T = 2 steps of
((1-p)N(0, s^2) + pN(1, s^2), N(0, s^2)) by quadrature (scipy), and with the upper bounds of
dp-accounting's own accountants (pessimistic PLD, RDP with the scheme's relation).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from dpopt.accounting import _dp_accounting as lib
from dpopt.accounting._lower import sum_test_delta_lower, sum_test_epsilon_lower
from dpopt.accounting.composition import (
    GaussianSteps,
    composed_delta,
    composed_epsilon,
    lower_epsilon,
)


def _loss(x: float, s: float, p: float) -> float:
    """log of the density ratio of (1-p)N(0,s²) + pN(1,s²) to N(0,s²) at x."""
    return math.log1p(p * math.expm1((2.0 * x - 1.0) / (2.0 * s * s)))


def _delta_one(e: float, s: float, p: float) -> float:
    """Exact δ(e) of one step: the loss is increasing in x, so the optimal test is x > x*."""
    if e <= math.log1p(-p):
        return 1.0 - math.exp(e)
    x_star = optimize.brentq(lambda x: _loss(x, s, p) - e, -50.0 * s - 10, 50.0 * s + 10,
                             xtol=1e-14)
    tail_p = (1 - p) * stats.norm.sf(x_star / s) + p * stats.norm.sf((x_star - 1.0) / s)
    return float(max(tail_p - math.exp(e) * stats.norm.sf(x_star / s), 0.0))


def _delta_two(e: float, s: float, p: float) -> float:
    """Exact δ(e) of two steps: ∫ p(x) δ_1(e - L(x)) dx (quadrature)."""
    def integrand(x: float) -> float:
        px = (1 - p) * stats.norm.pdf(x, 0, s) + p * stats.norm.pdf(x, 1, s)
        return px * _delta_one(e - _loss(x, s, p), s, p)

    val, _ = integrate.quad(integrand, -12 * s, 1 + 12 * s, limit=400, epsabs=1e-13)
    return float(val)


CASES = [(0.8, 0.3, 0.5), (1.5, 0.1, 0.2), (0.5, 0.05, 2.0), (3.0, 0.5, 0.1)]


@pytest.mark.parametrize(("s", "p", "eps"), CASES)
def test_the_sum_test_is_exact_for_one_step_and_below_for_two(s: float, p: float,
                                                                eps: float) -> None:
    q = 1.0 / (s * s)
    one = _delta_one(eps, s, p)
    got1 = sum_test_delta_lower([(q, p, 1)], eps)
    assert got1 <= one * (1 + 1e-7) + 1e-15
    assert got1 >= one * (1 - 1e-3)  # one step: S is the output itself
    two = _delta_two(eps, s, p)
    got2 = sum_test_delta_lower([(q, p, 2)], eps)
    assert 0.0 <= got2 <= two * (1 + 1e-7) + 1e-15


@pytest.mark.parametrize(("s", "p", "eps"), CASES)
def test_the_optimistic_pld_is_below_the_exact_divergence(s: float, p: float,
                                                          eps: float) -> None:
    q = 1.0 / (s * s)
    for t, exact in ((1, _delta_one(eps, s, p)), (2, _delta_two(eps, s, p))):
        got = lib.optimistic_delta(((q, p, t),), eps, 1e-4)
        assert got is not None
        assert got <= exact * (1 + 1e-7) + 1e-14
        assert got >= exact * 0.9 - 1e-6  # a bound, but not a vacuous one


def test_the_epsilon_bounds_invert_the_delta_bounds() -> None:
    # ε_lower(δ) must not exceed the exact ε(δ) of one step, found from the exact δ curve
    s, p, delta = 0.8, 0.3, 1e-3
    exact = optimize.brentq(lambda e: _delta_one(e, s, p) - delta, 0.0, 50.0, xtol=1e-12)
    q = 1.0 / (s * s)
    assert sum_test_epsilon_lower([(q, p, 1)], delta) <= exact + 1e-9
    assert sum_test_epsilon_lower([(q, p, 1)], delta) >= exact * (1 - 1e-3)
    got = lib.optimistic_epsilon(((q, p, 1),), delta, 1e-4)
    assert got is not None and got <= exact + 1e-9


@settings(max_examples=8, deadline=None)
@given(sigma=st.floats(0.4, 20.0), rate=st.floats(1e-3, 0.5),
       steps=st.integers(1, 3000), log10_delta=st.floats(-10.0, -3.0),
       scheme=st.sampled_from(["poisson", "without_replacement"]))
def test_lower_ends_are_below_independent_upper_bounds(sigma: float, rate: float, steps: int,
                                                       log10_delta: float, scheme: str) -> None:
    import dp_accounting as dpa
    from dp_accounting.rdp import rdp_privacy_accountant

    delta = 10.0 ** log10_delta
    run = GaussianSteps.from_noise_multiplier(sigma, steps, rate, scheme)
    low, how = lower_epsilon(run, delta, scale=10.0)
    assert low >= 0.0 and not math.isnan(low)
    # dp-accounting's RDP with the scheme's relation is an upper bound of the true ε
    if scheme == "poisson":
        rel = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
        one = dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(sigma))
    else:
        rel = dpa.NeighboringRelation.REPLACE_ONE
        num, den = rate.as_integer_ratio()
        one = dpa.SampledWithoutReplacementDpEvent(den, num, dpa.GaussianDpEvent(sigma / 2))
    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=rel)
    acc.compose(dpa.SelfComposedDpEvent(one, steps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upper = float(acc.get_epsilon(delta))
    assert low <= upper * (1 + 1e-9) + 1e-12, how
    res = composed_epsilon(run, delta, accountants=("rdp",))
    assert res.lower <= res.value and res.lower >= 0.0


def test_every_cell_of_the_sweep_has_a_lower_end() -> None:
    # the two ends of the sweep: long runs at small ε (the sum test) and very large ε at small
    # noise (the binned test; the optimistic PLD where the binned composition does not fit)
    cells = [(105.96, 100000, 0.1), (0.26694, 1000, 100.0)]
    for sigma, steps, eps in cells:
        run = GaussianSteps.from_noise_multiplier(sigma, steps, 0.01, "poisson")
        low, how = lower_epsilon(run, 1e-5, scale=eps)
        assert how in ("sum-test", "binned", "pld-optimistic")
        assert 0.8 * eps < low <= composed_epsilon(run, 1e-5, two_sided=False).value


def test_delta_lower_end_of_a_subsampled_run() -> None:
    run = GaussianSteps.from_noise_multiplier(1.1, 200, 0.02, "poisson")
    res = composed_delta(run, 1.0, discretization=1e-3)
    assert 0.0 < res.lower <= res.value
    assert res.lower_accountant != "none"


def test_laplace_event_trees_get_a_lower_end() -> None:
    import dp_accounting as dpa

    lap = dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(20.0), 4)
    res = composed_epsilon(lap, 1e-5, discretization=1e-3)
    # 4 Laplace releases with scale 20 (sensitivity 1): pure 0.2-DP, and the exact ε(δ) of the
    # composition is at most 0.2
    assert 0.0 < res.lower <= min(res.value, 0.2 + 1e-9)
    assert res.lower_accountant == "pld-optimistic"
    d = composed_delta(lap, 0.05, discretization=1e-3)
    assert 0.0 < d.lower <= d.value
    assert np.isfinite(d.lower)


class _StubPld:
    """A PLD stand-in that records the δ (or ε) it is asked at and answers a fixed value."""

    def __init__(self, answer: float | Exception) -> None:
        self.answer = answer
        self.asked: list[float] = []

    def _reply(self, x: float) -> float:
        self.asked.append(x)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def get_epsilon_for_delta(self, delta: float) -> float:
        return self._reply(delta)

    def get_delta_for_epsilon(self, epsilon: float) -> float:
        return self._reply(epsilon)


@pytest.mark.parametrize("answer", [0.7, 3.0, 1e-6])
def test_optimistic_epsilon_reading_is_moved_to_the_safe_side(answer: float) -> None:
    """The one reading of ε(δ) from an optimistic PLD (groups and event trees): it asks at a δ
    widened by the FFT's round-off (never below the δ asked for) and returns a value below the
    PLD's, by exactly 1e-9 relative and 1e-12 absolute."""
    pld = _StubPld(answer)
    got = lib._epsilon_lower_of(pld, 1e-5)
    assert pld.asked == [min(1e-5 * (1 + lib._PLD_REL) + lib._PLD_ABS, 1.0)]
    assert pld.asked[0] > 1e-5
    assert got == max(answer * (1 - 1e-9) - 1e-12, 0.0)
    assert got is not None and got < answer


@pytest.mark.parametrize("answer", [0.3, 1e-7, 1.0])
def test_optimistic_delta_reading_is_moved_to_the_safe_side(answer: float) -> None:
    pld = _StubPld(answer)
    got = lib._delta_lower_of(pld, 1.5)
    assert pld.asked == [1.5]
    assert got == min(max(answer * (1 - lib._PLD_REL) - lib._PLD_ABS, 0.0), 1.0)
    assert got is not None and got < answer


@pytest.mark.parametrize("answer", [math.nan, math.inf, 0.0, -1.0, RuntimeError("boom")])
def test_optimistic_readings_without_a_finite_answer_give_none(answer: float | Exception) -> None:
    """No finite positive ε (or finite δ), or a failure inside dp-accounting: no lower end."""
    assert lib._epsilon_lower_of(_StubPld(answer), 1e-5) is None
    if not (isinstance(answer, float) and math.isfinite(answer)):
        assert lib._delta_lower_of(_StubPld(answer), 1.0) is None


@pytest.mark.parametrize("sigma, count, epsilon", [(2.0, 1, 0.5), (5.0, 10, 1.0), (1.0, 3, 2.0)])
def test_gaussian_event_tree_lower_delta_against_the_exact_gdp_curve(
        sigma: float, count: int, epsilon: float) -> None:
    """k Gaussian releases of noise multiplier σ are exactly μ-GDP with μ = √k/σ (Dong, Roth &
    Su, "Gaussian Differential Privacy", Corollary 2.13), whose
    δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) (scipy here). The event tree's optimistic lower
    end must lie below it, and close to it."""
    import dp_accounting as dpa

    mu = math.sqrt(count) / sigma
    exact = (stats.norm.cdf(-epsilon / mu + mu / 2)
             - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2))
    event = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(sigma), count)
    low = lib.optimistic_event_delta(event, epsilon, 1e-4)
    assert low is not None
    assert low <= exact
    assert low >= 0.9 * exact
    eps_low = lib.optimistic_event_epsilon(event, exact, 1e-4)
    assert eps_low is not None and 0.9 * epsilon <= eps_low <= epsilon


# ----------------------------------------------------------------------------- progress line


def test_the_calibration_reports_its_steps_to_a_progress_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """progress=True draws dpopt.progress's line (measured time per step, the time so far, no
    time left: the counts do not bound the proving evaluations' cost) on stderr; progress=None
    outside the command line draws nothing. The steps are the search's evaluations weighted by
    their expected cost, so the work done reaches the expected range."""
    from dpopt import progress
    from dpopt.accounting.composition import calibrate_noise

    seen: list[progress.Progress] = []
    original = progress.Progress.finish
    original_draw = progress.Progress._draw

    def finish(self: progress.Progress) -> None:
        seen.append(self)
        original(self)

    def draw(self: progress.Progress, *, force: bool = False) -> None:
        # every step is drawn (the search may end before the line's 0.25 s redraw interval)
        original_draw(self, force=True)

    progress.Progress.finish = finish  # type: ignore[method-assign]
    progress.Progress._draw = draw  # type: ignore[method-assign]
    try:
        calibrate_noise(1.5, 1e-5, 400, 0.02, "poisson", discretization=1e-3, progress=True)
        drawn = capsys.readouterr().err
        calibrate_noise(1.6, 1e-5, 400, 0.02, "poisson", discretization=1e-3)
        quiet = capsys.readouterr().err
    finally:
        progress.Progress.finish = original  # type: ignore[method-assign]
        progress.Progress._draw = original_draw  # type: ignore[method-assign]
    assert "calibrating the noise" in drawn and "so far" in drawn and "left" not in drawn
    assert quiet == ""
    assert all(bar.count_only for bar in seen)
    first = seen[0]
    assert first.done > 0 and first.expected is not None
    assert first.expected[0] <= first.done + first.expected[1]  # a range, not a count
