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
    run = design_run(sets, None, GDP(mu=1.0), noise_floor=eta)
    assert sum(run.bounds) <= 1.0
    for s, d in zip(sets, run.designs, strict=True):
        assert float(np.linalg.eigvalsh(d.covariance).min()) >= eta * (1 - 1e-9)
        assert maha_sup(s.dense(), d.covariance) <= d.bound * (1 + 1e-9)
    assert run.lower <= run.value
    assert run.value >= base.value * (1 - 1e-9)  # the floor only adds constraints
    assert run.value <= run.equal_split_value * (1 + 1e-6)


def _joint_optimum(sets: list[np.ndarray], weights: list[np.ndarray], total: float,
                   eta: float) -> tuple[float, np.ndarray]:
    """One convex program over every release and the split (cvxpy + Clarabel): the LMIs
    [[Sigma_t, s], [s^T, q_t]] >= 0 are jointly convex in (Sigma_t, q_t)."""
    import cvxpy as cp

    qs = cp.Variable(len(sets))
    cons = [cp.sum(qs) == total]
    obj = 0
    for t, (s, w) in enumerate(zip(sets, weights, strict=True)):
        d = s.shape[1]
        sig = cp.Variable((d, d), PSD=True)
        cons.append(sig >> eta * np.eye(d))
        for v in s:
            col = v.reshape(-1, 1)
            cons.append(cp.bmat([[sig, col], [col.T, cp.reshape(qs[t], (1, 1), order="C")]]) >> 0)
        obj = obj + cp.trace(w @ sig)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12,
               max_iter=500)
    return float(prob.value), np.asarray(qs.value)


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate:UserWarning")
@pytest.mark.parametrize("joint_start", [True, False])
@pytest.mark.parametrize("seed", [0, 3, 6])
def test_floor_split_matches_one_joint_convex_program(seed: int, joint_start: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Random runs with a binding floor (the median eigenvalue of the floor-free designs):
    the split is optimal to 1e-6 and the certified interval holds the joint optimum, both from
    the joint program's split and by the marginal-value iteration alone."""
    import dpopt.covariance.run_design as run_module

    if not joint_start:
        monkeypatch.setattr(run_module, "_joint_start", lambda *args: None)
    rng = np.random.default_rng(seed)
    t_count, d = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    sets = [rng.standard_normal((int(rng.integers(d + 1, 8)), d)) * rng.uniform(0.3, 3)
            for _ in range(t_count)]
    weights = []
    for _ in range(t_count):
        a = rng.standard_normal((d, d))
        weights.append(a @ a.T + 0.3 * np.eye(d))
    total = float(rng.uniform(0.5, 4))
    budget = GDP(mu=math.sqrt(total))
    base = design_run(sets, weights, budget, compare=False)
    eta = float(np.median(np.concatenate([np.linalg.eigvalsh(x.covariance)
                                          for x in base.designs])))
    run = design_run(sets, weights, budget, noise_floor=eta, compare=False)
    assert (run.rounds == 1) if joint_start else (run.rounds > 1)
    joint, joint_q = _joint_optimum(sets, weights, total, eta)
    assert run.lower <= joint * (1 + 1e-8) and run.value >= joint * (1 - 1e-8)
    assert run.value / joint - 1 <= 1e-6
    assert run.gap <= 1e-6
    np.testing.assert_allclose(run.bounds, joint_q, rtol=2e-3, atol=1e-4)
    # the marginal values are equal across releases off their floor points
    caps = [float(np.max(np.sum(s**2, axis=1))) / eta for s in sets]
    off = [b for b, q, c in zip(run.marginal_values or (), run.bounds, caps, strict=True)
           if q < c * (1 - 1e-6)]
    assert len(off) >= 1 and (max(off) - min(off)) <= 2e-2 * max(off)
    for s, des in zip(sets, run.designs, strict=True):
        assert float(np.linalg.eigvalsh(des.covariance).min()) >= eta * (1 - 1e-12)
        assert maha_sup(s, des.covariance) <= des.bound * (1 + 1e-9)


def test_grid_points_is_deprecated() -> None:
    sets = [np.eye(2), 2 * np.eye(2)]
    with pytest.warns(DeprecationWarning, match="grid_points"):
        design_run(sets, None, GDP(1.0), grid_points=5, compare=False)


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


@pytest.mark.parametrize("seed", range(3))
def test_dual_cut_bounds_the_value_at_every_bound(seed: int) -> None:
    """A design's dual at q gives v(q') >= a - b q' at other bounds q' (checked against the
    certified designs there), tight at q, and b is the slope -dv/dq (central difference)."""
    from certificates.covariance import dual_cut
    from dpopt.accounting.budgets import ZCDP

    rng = np.random.default_rng(seed)
    s = rng.standard_normal((8, 3))
    a_mat = rng.standard_normal((3, 3))
    w = a_mat @ a_mat.T + 0.5 * np.eye(3)
    base = design_covariance(s, ZCDP(rho=0.5), weight=w)
    eta = float(np.median(np.linalg.eigvalsh(base.covariance)))
    q = 1.0
    d = design_covariance(s, ZCDP(rho=q / 2), weight=w, noise_floor=eta, tol=1e-9)
    a, b = dual_cut(d.program, d.solution.dual)
    assert a - b * q == pytest.approx(d.certificate.lower, rel=1e-7)
    for q2 in (0.3, 0.7, 1.5, 4.0):
        other = design_covariance(s, ZCDP(rho=q2 / 2), weight=w, noise_floor=eta)
        assert a - b * q2 <= other.value * (1 + 1e-12)
    h = 1e-4
    up = design_covariance(s, ZCDP(rho=(q + h) / 2), weight=w, noise_floor=eta, tol=1e-10)
    down = design_covariance(s, ZCDP(rho=(q - h) / 2), weight=w, noise_floor=eta, tol=1e-10)
    assert b == pytest.approx(-(up.value - down.value) / (2 * h), rel=1e-3)


def test_joint_split_declines_large_runs() -> None:
    from solvers.run_split import JOINT_MAX_COUNT, JOINT_MAX_DIM, joint_split

    big = [np.ones((JOINT_MAX_COUNT + 1, 2))]
    assert joint_split(big, [np.eye(2)], 1.0, 0.1) is None
    wide = [np.ones((3, JOINT_MAX_DIM + 1))]
    assert joint_split(wide, [np.eye(JOINT_MAX_DIM + 1)], 1.0, 0.1) is None


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate:UserWarning")
@pytest.mark.parametrize("joint_start", [True, False])
def test_floor_split_under_replacement(joint_start: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the replacement relation each release meets a quarter of its share on the
    add/remove sets: the run equals the joint program with total Q / 4."""
    import dpopt.covariance.run_design as run_module

    if not joint_start:
        monkeypatch.setattr(run_module, "_joint_start", lambda *args: None)
    rng = np.random.default_rng(4)
    sets = [rng.standard_normal((5, 2)) * a for a in (0.5, 1.0, 2.0)]
    weights = [np.eye(2), np.diag([2.0, 0.5]), np.array([[1.0, 0.3], [0.3, 0.7]])]
    total = 2.0
    base = design_run(sets, weights, GDP(mu=math.sqrt(total)), compare=False,
                      relation="replacement")
    eta = float(np.median(np.concatenate([np.linalg.eigvalsh(x.covariance)
                                          for x in base.designs])))
    run = design_run(sets, weights, GDP(mu=math.sqrt(total)), noise_floor=eta, compare=False,
                     relation="replacement")
    joint, joint_q = _joint_optimum(sets, weights, total / 4, eta)
    assert run.lower <= joint * (1 + 1e-8) and run.value / joint - 1 <= 1e-6
    assert run.gap <= 1e-6
    np.testing.assert_allclose(np.array(run.bounds) / 4, joint_q, rtol=2e-3, atol=1e-4)
