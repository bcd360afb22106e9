"""design_run: the optimal budget split over T releases, checked by closed forms, brute force
over splits, and an independent numpy re-check of every design's privacy."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpopt.accounting.budgets import GDP, MIDP, ApproxDP
from dpopt.accounting.schedule import Schedule
from dpopt.covariance.design import design_covariance
from dpopt.covariance.domains import Grid
from dpopt.covariance.run_design import design_run, split_for_scales
from dpopt.covariance.sensitivity import TwoRecordVectors
from dpopt.errors import InvalidParameterError, InvalidTypeError


def maha_sup(vectors: np.ndarray, cov: np.ndarray) -> float:
    return float(np.max(np.einsum("ij,ij->i", vectors, np.linalg.solve(cov, vectors.T).T)))


def denoiser_sets(sigmas: list[float], seed: int = 0) -> list[TwoRecordVectors]:
    rng = np.random.default_rng(seed)
    dom = Grid([0.0, 0.0], [1.0, 1.0], (3, 3))
    return [TwoRecordVectors(dom, rng.uniform(0, 1, 2), s) for s in sigmas]


def test_closed_form_split_on_scaled_cross_polytopes() -> None:
    # set t = a_t {±e_1, ±e_2}: optimal Σ = a_t² I / q, value c_t / q with c_t = 2 a_t²
    a = [1.0, 2.0, 0.5]
    sets = [x * np.array([[1.0, 0], [0, 1], [-1, 0], [0, -1]]) for x in a]
    run = design_run(sets, None, GDP(mu=1.5))
    c = [2 * x * x for x in a]
    expect_q = [2.25 * math.sqrt(ci) / sum(math.sqrt(cj) for cj in c) for ci in c]
    np.testing.assert_allclose(run.bounds, expect_q, rtol=1e-12)
    opt = sum(math.sqrt(ci) for ci in c) ** 2 / 2.25
    assert run.lower <= opt * (1 + 1e-9) and run.value == pytest.approx(opt, rel=1e-6)
    equal = sum(ci / (2.25 / 3) for ci in c)
    assert run.equal_split_value == pytest.approx(equal, rel=1e-6)


def test_denoiser_run_is_private_and_beats_equal_split() -> None:
    sets = denoiser_sets([0.05, 0.2, 0.8, 3.0])
    weights = [w * np.eye(2) for w in (4.0, 2.0, 1.0, 0.25)]
    budget = ApproxDP(2.0, 1e-5)
    run = design_run(sets, weights, budget)
    total = budget.mahalanobis_bound()
    assert sum((Fraction(q) for q in run.bounds), Fraction(0)) <= Fraction(total)
    for s, d, q in zip(sets, run.designs, run.bounds, strict=True):
        assert d.certified and d.bound == q
        assert maha_sup(s.dense(), d.covariance) <= q * (1 + 1e-9)
    assert run.privacy().satisfies(budget)
    assert run.lower <= run.value
    assert run.gap < 1e-5
    assert run.value <= run.equal_split_value * (1 + 1e-9)
    assert run.isotropic_value >= run.equal_split_value * (1 - 1e-9)


def test_split_is_optimal_by_brute_force_over_two_steps() -> None:
    sets = denoiser_sets([0.1, 1.0], seed=3)
    total = 2.0
    run = design_run(sets, None, GDP(mu=math.sqrt(total)), compare=False)
    best = math.inf
    for frac in np.linspace(0.05, 0.95, 19):
        q1 = total * float(frac)
        v = sum(design_covariance(s, GDP(math.sqrt(q)), tol=1e-7).value
                for s, q in zip(sets, (q1, total - q1), strict=True))
        best = min(best, v)
    assert run.value <= best * (1 + 1e-6)
    assert run.lower <= best


def test_noise_floor_split_is_valid_and_bracketed() -> None:
    sets = denoiser_sets([0.1, 0.5, 2.0], seed=1)
    base = design_run(sets, None, GDP(mu=1.0), compare=False)
    eta = 2.0 * max(float(np.linalg.eigvalsh(d.covariance).min()) for d in base.designs)
    run = design_run(sets, None, GDP(mu=1.0), noise_floor=eta, grid_points=5)
    assert sum(run.bounds) <= 1.0
    for s, d in zip(sets, run.designs, strict=True):
        assert float(np.linalg.eigvalsh(d.covariance).min()) >= eta * (1 - 1e-9)
        assert maha_sup(s.dense(), d.covariance) <= d.bound * (1 + 1e-9)
    assert run.lower <= run.value
    assert run.value >= base.value * (1 - 1e-9)  # the floor only adds constraints
    assert run.value <= run.equal_split_value * (1 + 1e-6)


def test_split_for_scales() -> None:
    q = split_for_scales([1.0, 4.0, 9.0], 6.0)
    np.testing.assert_allclose(q, [1.0, 2.0, 3.0], rtol=1e-12)
    assert sum(Fraction(x) for x in q) <= 6
    with pytest.raises(InvalidParameterError):
        split_for_scales([1.0, 0.0], 1.0)


def test_bad_input_is_named() -> None:
    sets = [np.eye(2)]
    with pytest.raises(InvalidParameterError) as info:
        design_run(sets, None, MIDP(0.1))
    assert info.value.name == "budget"
    with pytest.raises(InvalidParameterError):
        design_run(sets, None, Schedule(ApproxDP(1, 1e-5), steps=3))
    with pytest.raises(InvalidParameterError) as info:
        design_run(sets, [np.eye(2), np.eye(2)], GDP(1.0))
    assert info.value.name == "weights"
    with pytest.raises(InvalidParameterError):
        design_run([], None, GDP(1.0))
    with pytest.raises(InvalidTypeError):
        design_run(sets, None, "gdp:mu=1")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError) as info:
        design_run(sets, None, GDP(1.0), noise_floor=-1.0)
    assert info.value.name == "noise_floor"
