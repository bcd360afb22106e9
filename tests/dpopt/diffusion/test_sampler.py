"""The private sampler: every release re-checked by brute force, the composition by exact GDP
arithmetic, the updates against their closed forms, the record's re-check against tampering."""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from dpopt.accounting.budgets import GDP, MIDP, ZCDP, ApproxDP
from dpopt.covariance.domains import Box, FinitePoints, Grid
from dpopt.diffusion.record import load_record, save_record, verify_record
from dpopt.diffusion.sampler import (
    ClampWarning,
    budget_spec,
    sample_nonprivate,
    sample_private,
    split_budget,
    step_update,
)
from dpopt.diffusion.schedules import cosine_schedule
from dpopt.errors import InvalidParameterError, InvalidTypeError

GRID = Grid([0.0, 0.0], [1.0, 1.0], (5, 5))


def _data(n: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal([0.3, 0.6], 0.15, (n, 2)), 0.0, 1.0)


@pytest.fixture(scope="module")
def run() -> object:
    return sample_private(_data(), GRID, ApproxDP(3.0, 1e-5), samples=3, steps=6, rng=7)


def brute_force_sup(points: np.ndarray, g: np.ndarray, sigma: float, cov: np.ndarray) -> float:
    """max over every ordered pair of grid points of t_g(x, y)^T Sigma^-1 t_g(x, y)."""
    p = np.linalg.inv(cov)
    best = 0.0
    for x, y in itertools.permutations(points, 2):
        z = (np.sum((g - y) ** 2) - np.sum((g - x) ** 2)) / (2.0 * sigma**2)
        t = expit(z) * (x - y)
        best = max(best, float(t @ p @ t))
    return best


def test_random_releases_pass_an_independent_brute_force(run: object) -> None:
    rec = run.record  # type: ignore[attr-defined]
    rng = np.random.default_rng(1)
    picks = rng.choice(len(rec["releases"]), size=6, replace=False)
    for i in picks:
        r = rec["releases"][int(i)]
        sup = brute_force_sup(GRID.points, np.array(r["query"]), r["denoiser_sigma"],
                              np.array(r["covariance"]))
        assert sup <= r["q"] * (1.0 + 1e-9)
        assert sup >= 0.99 * r["q"]  # the design spends its share (it is optimal, not loose)


def test_composition_against_exact_gdp_arithmetic(run: object) -> None:
    rec = run.record  # type: ignore[attr-defined]
    total = sum((Fraction(r["q"]) for r in rec["releases"]), Fraction(0))
    budget_q = ApproxDP(3.0, 1e-5).mahalanobis_bound()
    assert total <= Fraction(budget_q)
    assert float(total) == pytest.approx(budget_q, rel=1e-12)  # the split spends it all
    mu = math.sqrt(float(total))
    assert rec["totals"]["gdp_mu"] == pytest.approx(mu, rel=1e-12)
    # delta(eps) of mu-GDP (Dong, Roth and Su, Cor. 2.13), written out here
    delta = norm.cdf(-3.0 / mu + mu / 2) - math.exp(3.0) * norm.cdf(-3.0 / mu - mu / 2)
    assert delta <= 1e-5 * (1 + 1e-9)
    eps = rec["totals"]["epsilon"]["1e-05"]
    d_at = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert d_at == pytest.approx(1e-5, rel=1e-6)


def test_verify_holds_and_catches_tampering(run: object, tmp_path: object) -> None:
    rec = run.record  # type: ignore[attr-defined]
    path = tmp_path / "run.json"  # type: ignore[operator]
    save_record(rec, path)
    v = verify_record(path)
    assert v.holds and v.releases == 18 and v.worst_ratio <= 1.0
    assert verify_record(load_record(path), full=True).holds
    bad = copy.deepcopy(rec)
    bad["releases"][4]["covariance"] = (0.8 * np.array(bad["releases"][4]["covariance"])).tolist()
    assert any("exceeds q" in r for r in verify_record(bad).reasons)
    bad = copy.deepcopy(rec)
    bad["releases"][3]["release"][1] += 1e-3  # the next query no longer follows
    assert any("query" in r for r in verify_record(bad).reasons)
    bad = copy.deepcopy(rec)
    bad["budget"]["spec"] = "approx:epsilon=1.0,delta=1e-05"  # a smaller budget
    assert any("composition" in r for r in verify_record(bad).reasons)
    bad = copy.deepcopy(rec)
    bad["split"]["per_step_bound"][0] *= 2
    assert not verify_record(bad).holds


def test_previous_record_format_still_verified(run: object, tmp_path: object) -> None:
    """Records of format /1 spelt a release's denoiser noise level ``sigma``: still verified
    (and still bound to the schedule); the new format with the old key is not."""
    rec = run.record  # type: ignore[attr-defined]
    assert rec["format"] == "dpopt-diffusion-run/2"
    assert all("denoiser_sigma" in r and "sigma" not in r for r in rec["releases"])
    old = copy.deepcopy(rec)
    old["format"] = "dpopt-diffusion-run/1"
    for r in old["releases"]:
        r["sigma"] = r.pop("denoiser_sigma")
    path = tmp_path / "old.json"  # type: ignore[operator]
    save_record(old, path)
    assert verify_record(load_record(path)).holds
    old["releases"][2]["sigma"] *= 1.01
    assert any("sigma does not match" in r for r in verify_record(old).reasons)
    mixed = copy.deepcopy(old)
    mixed["format"] = "dpopt-diffusion-run/2"
    assert any("denoiser_sigma does not match" in r for r in verify_record(mixed).reasons)


def test_baselines_are_ordered_and_recomputed(run: object) -> None:
    errors = run.errors  # type: ignore[attr-defined]
    assert errors["released"] <= errors["isotropic_exact"] * (1 + 1e-9)
    assert errors["isotropic_exact"] <= errors["isotropic_diameter"] * (1 + 1e-12)
    assert errors["released"] <= errors["uniform_query"] * (1 + 1e-9)
    rec = run.record  # type: ignore[attr-defined]
    diam2 = 2.0  # the unit square
    want = sum(diam2 * 2.0 / r["q"] for r in rec["releases"])  # tr(I) = 2
    assert errors["isotropic_diameter"] == pytest.approx(want, rel=1e-12)
    for r in rec["releases"]:
        assert r["errors"]["released"] == pytest.approx(np.trace(r["covariance"]), rel=1e-12)


def test_noiseless_limit_matches_the_exact_sampler() -> None:
    data = _data(10, seed=2)
    grid = Grid([0.0, 0.0], [1.0, 1.0], (11, 11))
    data = grid.snap(data).records
    ref = sample_nonprivate(data, samples=2, steps=8, rng=3)
    out = sample_private(data, grid, GDP(mu=1e7), samples=2, steps=8, rng=3)
    np.testing.assert_allclose(out.samples, ref, atol=1e-3)
    # the exact ideal denoiser memorises: its last step returns (almost) a record
    dist = np.min(np.linalg.norm(ref[:, None, :] - data[None, :, :], axis=2), axis=1)
    assert np.all(dist < 1e-3)


def test_ddim_and_ddpm_updates_closed_form() -> None:
    rng = np.random.default_rng(4)
    a, a1 = 0.3, 0.6
    g, x0, z = rng.standard_normal(2), rng.standard_normal(2), rng.standard_normal(2)
    eps = (g - math.sqrt(a) * x0) / math.sqrt(1 - a)
    np.testing.assert_allclose(step_update(g, x0, a, a1, "ddim"),
                               math.sqrt(a1) * x0 + math.sqrt(1 - a1) * eps, rtol=1e-14)
    # Ho, Jain and Abbeel, eq. (7): posterior q(x_{t-1} | x_t, x_0)
    alpha = a / a1
    beta = 1 - alpha
    mean = (math.sqrt(a1) * beta / (1 - a)) * x0 + (math.sqrt(alpha) * (1 - a1) / (1 - a)) * g
    var = (1 - a1) / (1 - a) * beta
    np.testing.assert_allclose(step_update(g, x0, a, a1, "ddpm", z), mean + math.sqrt(var) * z,
                               rtol=1e-14)
    # the last move (a' = 1) returns the denoised value
    np.testing.assert_allclose(step_update(g, x0, a, 1.0, "ddim"), x0, rtol=1e-14)
    np.testing.assert_allclose(step_update(g, x0, a, 1.0, "ddpm", z), x0, rtol=1e-14)
    with pytest.raises(InvalidParameterError, match="sampler"):
        step_update(g, x0, a, a1, "euler")


def test_noise_prediction_form_has_the_same_error() -> None:
    kw = dict(samples=3, steps=4, rng=5)
    x0 = sample_private(_data(), GRID, ZCDP(rho=2.0), **kw)  # type: ignore[arg-type]
    ep = sample_private(_data(), GRID, ZCDP(rho=2.0), prediction="eps", **kw)  # type: ignore[arg-type]
    # the first step queries coincide (same start points): the eps design, carried to x0 by
    # the (1 - a)/a = sigma^2 factor, is the x0 design
    for a, b in zip(x0.record["releases"][:3], ep.record["releases"][:3], strict=True):
        assert a["query"] == b["query"]
        cov_eps = np.array(b["covariance"]) * b["denoiser_sigma"] ** 2
        np.testing.assert_allclose(cov_eps, a["covariance"], rtol=1e-5)
        assert b["errors"]["released"] == pytest.approx(a["errors"]["released"], rel=1e-5)
    assert verify_record(ep.record).holds


def test_ddpm_and_isotropic_runs_verify() -> None:
    out = sample_private(_data(), GRID, GDP(mu=2.0), samples=2, steps=4, rng=6, sampler="ddpm",
                         noise="isotropic", schedule="linear")
    assert verify_record(out.record).holds
    assert out.errors["released"] == pytest.approx(out.errors["isotropic_exact"], rel=1e-12)
    bad = copy.deepcopy(out.record)
    bad["releases"][0]["ancestral_noise"][0] += 0.5  # the public noise drives the next query
    assert any("query" in r for r in verify_record(bad).reasons)
    bad = copy.deepcopy(out.record)
    bad["schedule"]["alpha_bar"][1] *= 1.01  # another schedule: other sigma_t and queries
    assert not verify_record(bad).holds


def test_finite_points_domain() -> None:
    pts = FinitePoints([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]])
    out = sample_private(_data(), pts, GDP(mu=1.0), samples=2, steps=3, rng=0)
    assert verify_record(out.record).holds


def test_split_rules() -> None:
    b = GDP(mu=1.5)
    q, rule = split_budget(b, 4, 5)
    assert rule == "equal" and np.all(q == q[0])
    assert 4 * sum(Fraction(float(v)) for v in q) <= Fraction(b.mahalanobis_bound())
    q, rule = split_budget(b, 2, 3, [1.0, 2.0, 3.0])
    assert rule == "user"
    np.testing.assert_allclose(q / q[0], [1, 2, 3], rtol=1e-12)
    sched = cosine_schedule(4)
    q, rule = split_budget(b, 2, 4, "propagated", schedule=sched)
    a, a1 = sched.alpha_bar, sched.next_alpha_bar
    c = np.sqrt(a1) - np.sqrt(1 - a1) * np.sqrt(a) / np.sqrt(1 - a)  # DDIM, written out
    assert rule == "propagated" and c[-1] == 1.0
    np.testing.assert_allclose(q / q[-1], c / c[-1], rtol=1e-12)
    qd, _ = split_budget(b, 2, 4, "propagated", schedule=sched, sampler="ddpm")
    cd = np.sqrt(a1) * (1 - a / a1) / (1 - a)
    np.testing.assert_allclose(qd / qd[-1], cd / cd[-1], rtol=1e-12)
    q1, rule = split_budget(b, 2, 4, "pilot", domain=GRID)
    q2, _ = split_budget(b, 2, 4, "pilot", domain=GRID)
    assert rule == "pilot" and np.array_equal(q1, q2)  # public and deterministic
    assert 2 * sum(Fraction(float(v)) for v in q1) <= Fraction(b.mahalanobis_bound())
    out = sample_private(_data(), GRID, b, samples=2, steps=4, split="pilot", rng=1)
    assert out.record["split"]["per_step_bound"] == [float(v) for v in q1]
    assert verify_record(out.record).holds


def test_bad_inputs_name_the_parameter() -> None:
    with pytest.raises(InvalidParameterError, match="samples"):
        sample_private(_data(), GRID, GDP(mu=1.0), samples=0)
    with pytest.raises(InvalidParameterError, match="sampler"):
        sample_private(_data(), GRID, GDP(mu=1.0), sampler="euler")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="budget"):
        sample_private(_data(), GRID, MIDP(0.1), samples=1, steps=1)
    with pytest.raises(InvalidTypeError, match="budget"):
        sample_private(_data(), GRID, 1.0, samples=1, steps=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="prediction"):
        sample_private(_data(), Box(np.zeros(2), np.ones(2)), GDP(mu=1.0), samples=1, steps=1,
                       prediction="eps")
    from dpopt.covariance.domains import Ball

    with pytest.raises(InvalidParameterError, match="bounding box"):
        sample_private(_data(), Ball([0.5, 0.5], 0.5), GDP(mu=1.0), samples=1, steps=1)
    with pytest.raises(InvalidParameterError, match="rule"):
        split_budget(GDP(mu=1.0), 1, 3, [1.0, -1.0, 1.0])
    with pytest.raises(InvalidParameterError, match="data"):
        sample_private(np.zeros((3, 3)), GRID, GDP(mu=1.0), samples=1, steps=1)
    with pytest.raises(InvalidParameterError, match="weight"):
        sample_private(_data(), GRID, GDP(mu=1.0), samples=1, steps=1, weight=-np.eye(2))


def test_clamped_records_are_reported_but_not_recorded() -> None:
    data = np.vstack([_data(), [[2.0, 0.5], [-1.0, -1.0]]])
    with pytest.warns(ClampWarning, match="2 of 42 records"):
        out = sample_private(data, GRID, GDP(mu=1.0), samples=1, steps=2, rng=0)
    assert out.moved >= 2
    text = str(out.record)
    assert "42" not in text.replace(".", " ").split() and "clamp" not in text


def test_budget_spec_round_trip() -> None:
    from dpopt.accounting.budgets import RDP, AllOf, parse_budget

    for b in (ApproxDP(1.0, 1e-6), GDP(mu=0.3), ZCDP(rho=0.1), RDP([2.0, 4.0], [0.5, 1.0]),
              AllOf(GDP(mu=1.0), ZCDP(rho=0.2))):
        spec = budget_spec(b)
        assert spec is not None
        assert parse_budget(spec).mahalanobis_bound() == b.mahalanobis_bound()


def test_dpopt_verify_dispatches_run_records(run: object, tmp_path: object) -> None:
    from dpopt.cli.main import main
    from dpopt.verification import verify

    path = tmp_path / "run.json"  # type: ignore[operator]
    save_record(run.record, path)  # type: ignore[attr-defined]
    v = verify(path)
    assert v.kind == "private sampling run" and v.summary["holds"] is True
    assert main(["verify", str(path), "-q"]) == 0
    bad = copy.deepcopy(run.record)  # type: ignore[attr-defined]
    bad["releases"][0]["covariance"] = (0.5 * np.array(bad["releases"][0]["covariance"])).tolist()
    bad_path = tmp_path / "bad.json"  # type: ignore[operator]
    save_record(bad, bad_path)
    assert main(["verify", str(bad_path), "-q"]) == 1


def test_box_route_every_pair_in_the_box() -> None:
    box = Box(np.zeros(2), np.ones(2))
    out = sample_private(_data(), box, GDP(mu=5.0), samples=2, steps=2, rng=3)
    v = verify_record(out.record)
    assert v.holds and out.record["domain"]["kind"] == "box"
    # an independent probe: a fine grid of record pairs plus random pairs anywhere in the box
    rng = np.random.default_rng(0)
    axis = np.linspace(0.0, 1.0, 15)
    grid = np.array([[a, b] for a in axis for b in axis])
    for r in out.record["releases"]:
        g, sig, p = np.array(r["query"]), r["denoiser_sigma"], np.linalg.inv(r["covariance"])
        xs = np.vstack([np.repeat(grid, len(grid), axis=0), rng.uniform(0, 1, (20000, 2))])
        ys = np.vstack([np.tile(grid, (len(grid), 1)), rng.uniform(0, 1, (20000, 2))])
        z = (np.sum((g - ys) ** 2, 1) - np.sum((g - xs) ** 2, 1)) / (2 * sig**2)
        t = expit(z)[:, None] * (xs - ys)
        assert float(np.max(np.einsum("ij,jk,ik->i", t, p, t))) <= r["q"] * (1 + 1e-9)


@pytest.mark.slow
def test_default_run_every_release_verified() -> None:
    """The default target: 100 samples x 50 steps on the 20 x 20 grid, re-checked in full."""
    grid = Grid(np.zeros(2), np.ones(2), (20, 20))
    out = sample_private(_data(300), grid, ApproxDP(1.0, 1e-5), samples=100, steps=50, rng=0)
    v = verify_record(out.record)
    assert v.holds and v.releases == 5000 and v.worst_ratio <= 1.0
