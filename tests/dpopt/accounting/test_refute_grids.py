"""The calibration's lower end after a try on the coarse binned grid fell short: the next try
starts on the finer grid, bisection steps stay on the coarse one and stop at its first miss,
and the σ it refutes is still refuted by a fresh, independent proof."""

from __future__ import annotations

import math
import warnings

import pytest
from dp_accounting.pld import privacy_loss_distribution as pldm

from dpopt.accounting import _binned
from dpopt.accounting.composition import GaussianSteps, calibrate_noise, lower_epsilon


def test_later_tries_skip_the_coarse_grid_and_still_refute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    eps, delta, steps, p = 100.0, 1e-5, 100_000, 0.01  # a long run: 2^17 points fall short
    calls: list[tuple[int, float]] = []
    real = _binned.binned_epsilon_lower

    def spy(groups, d, *, points):  # type: ignore[no-untyped-def]
        calls.append((points, groups[0][0].s))
        return real(groups, d, points=points)

    monkeypatch.setattr(_binned, "binned_epsilon_lower", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate_noise(eps, delta, steps, p, "poisson", progress=False)
    coarse, fine = _binned.POINTS_TRIED
    assert cal.lower_accountant == "binned" and cal.noise_multiplier_lower < cal.noise_multiplier
    first = calls[0][1]
    assert calls[:2] == [(coarse, first), (fine, first)]  # the first try needed both grids
    assert len(calls) > 2, "one try sufficed: the case no longer exercises the memory"
    assert calls[2][0] == fine and calls[2][1] != first  # the next try opens on the finer grid
    # bisection steps use the coarse grid alone, and a miss there ends them (the coarse grid is
    # known to fall short here): at most one
    assert all(pt == coarse for pt, _ in calls[3:]) and len(calls) <= 4
    monkeypatch.undo()
    # the refuted σ, re-proven from scratch by the public lower bound (default grids) …
    lo = cal.noise_multiplier_lower
    value, how = lower_epsilon(GaussianSteps(1.0 / lo ** 2, steps, p, "poisson"), delta)
    assert value > eps and how in ("binned", "sum-test", "pld-optimistic")
    # … and consistent with dp-accounting's pessimistic PLD, which must refuse it too
    one = pldm.from_gaussian_mechanism(standard_deviation=lo, sampling_prob=p,
                                       pessimistic_estimate=True,
                                       value_discretization_interval=cal.discretization)
    assert float(one.self_compose(steps).get_epsilon_for_delta(delta)) > eps
    assert math.isfinite(value)


@pytest.mark.parametrize(("eps", "steps", "p"), [(1000.0, 1000, 0.01), (30.0, 3000, 0.05),
                                                 (0.1, 10_000, 0.01), (2.0, 1500, 0.02)])
def test_every_refuted_sigma_is_reproven_from_scratch(eps: float, steps: int, p: float) -> None:
    """Whatever the search's tries and bisection steps did, the lower end it returns is proven
    again by the public lower bound on its own (default grids, no memory)."""
    delta = 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate_noise(eps, delta, steps, p, "poisson", progress=False)
    lo = cal.noise_multiplier_lower
    assert 0.0 < lo < cal.noise_multiplier
    value, _ = lower_epsilon(GaussianSteps(1.0 / lo ** 2, steps, p, "poisson"), delta)
    assert value > eps
