"""Schedule budgets (feeding the covariance designer) and DP-SGD calibration."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting.budgets import GDP, MIDP, RDP, ZCDP, AllOf, ApproxDP
from dpopt.accounting.composition import GaussianSteps, composed_epsilon
from dpopt.accounting.dpsgd import dpsgd_noise_multiplier, dpsgd_steps
from dpopt.accounting.schedule import Schedule
from dpopt.errors import InvalidParameterError, InvalidTypeError


def balle_wang_delta(mu: float, eps: float) -> float:
    mp.mp.dps = 40
    m, e = mp.mpf(mu), mp.mpf(eps)
    return float(mp.ncdf(m / 2 - e / m) - mp.e**e * mp.ncdf(-m / 2 - e / m))


# ----------------------------------------------------------------------------- Schedule


@pytest.mark.parametrize("steps", [1, 7, 100, 5000])
def test_unsampled_schedule_is_exact_composition(steps: int) -> None:
    s = Schedule(ApproxDP(epsilon=1.0, delta=1e-6), steps=steps)
    q = s.mahalanobis_bound()
    # T releases with bound q are one Gaussian with μ² = T q: its δ(1) is at most 1e-6 ...
    assert balle_wang_delta(math.sqrt(steps * q), 1.0) <= 1e-6
    # ... and q is the largest such bound (within float rounding)
    assert balle_wang_delta(math.sqrt(steps * q * (1 + 1e-9)), 1.0) > 1e-6 * (1 - 1e-6)
    assert s.admits(q)


def test_gdp_zcdp_rdp_targets_without_sampling_are_exact() -> None:
    assert Fraction(Schedule(GDP(1.0), steps=10).mahalanobis_bound()) * 10 <= 1
    assert Schedule(GDP(1.0), steps=10).mahalanobis_bound() == pytest.approx(0.1, rel=1e-15)
    assert Schedule(ZCDP(0.5), steps=4).mahalanobis_bound() == pytest.approx(0.25, rel=1e-15)
    # RDP at α: α T q / 2 <= ε
    assert Schedule(RDP(8.0, 2.0), steps=5).mahalanobis_bound() == pytest.approx(0.1, rel=1e-15)


def test_subsampled_schedule_is_certified_and_nearly_largest() -> None:
    s = Schedule(ApproxDP(2.0, 1e-5), steps=100, sampling_rate=0.05, sampling="poisson",
                 discretization=1e-3)
    q = s.mahalanobis_bound()
    assert s.admits(q)
    assert not s.admits(q * (1 + 5 * s.rtol))
    eps = composed_epsilon(GaussianSteps(q, 100, 0.05, "poisson"), 1e-5, discretization=1e-3).value
    assert eps <= 2.0
    # subsampling buys a larger per-release bound than no subsampling
    assert q > Schedule(ApproxDP(2.0, 1e-5), steps=100).mahalanobis_bound()


def test_subsampled_rdp_target() -> None:
    s = Schedule(RDP([4.0, 16.0], [0.5, 1.0]), steps=50, sampling_rate=0.1, sampling="poisson")
    q = s.mahalanobis_bound()
    assert s.admits(q) and not s.admits(q * 1.01)


def test_schedule_composes_with_allof_and_feeds_the_designer() -> None:
    from dpopt.covariance.design import design_covariance

    sched = Schedule(ApproxDP(3.0, 1e-5), steps=50)
    both = AllOf(sched, RDP(8.0, 0.4))
    q = both.mahalanobis_bound()
    assert q == min(sched.mahalanobis_bound(), RDP(8.0, 0.4).mahalanobis_bound())
    s = np.array([[1.0, 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
    d = design_covariance(s, both)
    assert d.certified and d.bound == q
    maha = np.einsum("ij,ij->i", s, np.linalg.solve(d.covariance, s.T).T)
    assert maha.max() <= q * (1 + 1e-9)
    assert both.admits(q)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"target": ApproxDP(1, 1e-5), "steps": 0}, "steps"),
        ({"target": ApproxDP(1, 1e-5), "steps": 2.5}, "steps"),
        ({"target": ApproxDP(1, 1e-5), "steps": 10, "sampling_rate": 0.0}, "sampling_rate"),
        ({"target": ApproxDP(1, 1e-5), "steps": 10, "sampling_rate": 1.01}, "sampling_rate"),
        ({"target": GDP(1.0), "steps": 10, "sampling_rate": 0.1, "sampling": "poisson"},
         "target"),
        ({"target": ApproxDP(1, 1e-5), "steps": 10, "sampling_rate": 0.1}, "sampling"),
        ({"target": MIDP(0.1), "steps": 10}, "target"),
        ({"target": ApproxDP(1, 1e-5), "steps": 10, "sampling": "shuffle"}, "sampling"),
    ],
)
def test_schedule_bad_input_is_named(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        Schedule(**kwargs)
    assert info.value.name == name


def test_schedule_needs_a_budget() -> None:
    with pytest.raises(InvalidTypeError):
        Schedule("approx:epsilon=1", steps=3)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- DP-SGD


@settings(max_examples=60)
@given(n=st.integers(1, 10**7), b=st.integers(1, 10**4), e=st.integers(1, 500))
def test_dpsgd_steps_is_the_integer_ceiling(n: int, b: int, e: int) -> None:
    b = min(b, n)
    assert dpsgd_steps(n, b, e) == -(-e * n // b)


def test_dpsgd_steps_issue_example() -> None:
    assert dpsgd_steps(60000, 256, 60) == 14063  # not 14062.5
    assert dpsgd_steps(60000, 256, 0.5) == 118
    assert isinstance(dpsgd_steps(100, 7, 1.5), int)


def test_dpsgd_calibration_is_certified_near_optimal_and_beats_the_clt() -> None:
    cal = dpsgd_noise_multiplier(dataset_size=2000, batch_size=40, steps=300, epsilon=2.0,
                                 delta=1e-5, discretization=1e-3, sampling="poisson")
    assert cal.steps == 300 and cal.sampling_rate == 0.02
    run = GaussianSteps.from_noise_multiplier(cal.noise_multiplier, 300, 0.02, "poisson")
    assert composed_epsilon(run, 1e-5, discretization=1e-3).value <= 2.0
    less = GaussianSteps.from_noise_multiplier(cal.noise_multiplier * 0.99, 300, 0.02,
                                               "poisson")
    assert composed_epsilon(less, 1e-5, discretization=1e-3).value > 2.0
    # the CLT picks less noise and claims less ε: it understates the loss
    assert cal.clt_noise_multiplier < cal.noise_multiplier
    assert cal.clt_epsilon_at_certified < 2.0 < cal.epsilon_at_clt_sigma
    assert cal.clt_understatement > 0
    assert "APPROXIMATE" in cal.describe()


def test_dpsgd_full_batch_is_exact() -> None:
    cal = dpsgd_noise_multiplier(dataset_size=100, batch_size=100, epochs=3, epsilon=1.0,
                                 delta=1e-6, sampling="full_batch")
    assert cal.accountant == "gdp-exact" and cal.steps == 3
    # σ for 3 exact compositions: μ = sqrt(3)/σ on the Balle-Wang curve
    assert balle_wang_delta(math.sqrt(3) / cal.noise_multiplier, 1.0) <= 1e-6


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"dataset_size": 100, "batch_size": 200, "steps": 10}, "batch_size"),
        ({"dataset_size": 0, "batch_size": 1, "steps": 10}, "dataset_size"),
        ({"dataset_size": 100, "batch_size": 10, "steps": 0}, "steps"),
        ({"dataset_size": 100, "batch_size": 10, "steps": 1.5}, "steps"),
        ({"dataset_size": 100, "batch_size": 10, "epochs": -1.0}, "epochs"),
        ({"dataset_size": 100, "batch_size": 10}, "epochs/steps"),
        ({"dataset_size": 100, "batch_size": 10, "steps": 5, "delta": 1.0}, "delta"),
        ({"dataset_size": 100, "batch_size": 10, "steps": 5, "epsilon": 0.0}, "epsilon"),
        ({"dataset_size": 100, "batch_size": 10, "steps": 5}, "sampling"),
    ],
)
def test_dpsgd_bad_input_is_named(kwargs: dict, name: str) -> None:
    args = {"epsilon": 1.0, "delta": 1e-5, **kwargs}
    with pytest.raises(InvalidParameterError) as info:
        dpsgd_noise_multiplier(**args)
    assert info.value.name == name
