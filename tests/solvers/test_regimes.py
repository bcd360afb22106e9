"""The structured solver in its hard regimes, each at the 1e-8 target gap.

* weights W with condition number 1e9 and 1e12 (rotated and diagonal), with and without a
  binding noise floor;
* noise floors binding at the 10 %, 50 % and 90 % quantiles of the eta = 0 optimum's spectrum;
* the Newton-CG path of the restricted solve (forced on a small instance) against the direct
  Cholesky path;
* the candidate pool (J much larger than the pool) against a solve without it.

Every answer is re-checked independently of the solver: the certificate is re-derived from the
returned covariance and dual by :func:`certificates.covariance.check` (rigorous mode on a
sample), feasibility by an eigen-decomposition here, and values are compared with an
independent cvxpy + Clarabel solve of the N = Sigma^-1 form where Clarabel is accurate.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numpy.typing import NDArray

import solvers.restricted as restricted
import solvers.structured as structured
from certificates.covariance import check
from certificates.problem import CovarianceProgram
from solvers.structured import solve_structured

FloatArray = NDArray[np.float64]


def _vectors(seed: int, count: int, d: int) -> FloatArray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((count, d)) * rng.uniform(0.2, 2.0, (count, 1))


def _weight(seed: int, d: int, cond: float, rotated: bool) -> FloatArray:
    rng = np.random.default_rng(1000 + seed)
    spectrum = np.geomspace(1.0, 1.0 / cond, d)
    if not rotated:
        return np.diag(rng.permutation(spectrum))
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = (q * spectrum) @ q.T
    return 0.5 * (w + w.T)


def _feasible(vectors: FloatArray, cov: FloatArray, bound: float, eta: float) -> None:
    """Independent feasibility check (eigen-decomposition of the returned matrix)."""
    ev, vec = np.linalg.eigh(cov)
    assert ev[0] > 0
    z = (vectors @ vec) / np.sqrt(ev)
    assert float(np.max(np.sum(z * z, axis=1))) <= bound * (1 + 1e-9)
    if eta > 0:
        assert ev[0] >= eta * (1 - 1e-12)


def _certified(problem: CovarianceProgram, sol: object, tol: float, rigorous: bool) -> None:
    cert = check(problem, sol.covariance, sol.dual, tol=tol, rigorous=rigorous)  # type: ignore[attr-defined]
    assert cert.certified, cert.message
    assert cert.gap <= tol


def _floor_at(problem: CovarianceProgram, quantile: float) -> float:
    base = solve_structured(problem)
    return float(np.quantile(np.linalg.eigvalsh(base.covariance), quantile))


def _clarabel_inverse_value(vectors: FloatArray, weight: FloatArray, bound: float,
                            eta: float) -> float | None:
    """Reference optimum by the N = Sigma^-1 form (written here, independent of solvers/)."""
    import cvxpy as cp

    d = vectors.shape[1]
    c = float(np.max(np.linalg.norm(vectors, axis=1)))
    s = vectors / c
    w_top = float(np.linalg.eigvalsh(weight)[-1])
    ev, evec = np.linalg.eigh(weight / w_top)
    root = (evec * np.sqrt(np.clip(ev, 0, None))) @ evec.T
    n = cp.Variable((d, d), symmetric=True)
    x = cp.Variable((d, d), symmetric=True)
    cons = [cp.sum(cp.multiply(s @ n, s), axis=1) <= bound,
            cp.bmat([[x, root], [root, n]]) >> 0]
    if eta > 0:
        cons.append(n << (c * c / eta) * np.eye(d))
    prob = cp.Problem(cp.Minimize(cp.trace(x)), cons)
    try:
        with warnings.catch_warnings():  # an inaccurate solve is refused by its status below
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver="CLARABEL", tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
    except cp.error.SolverError:
        return None
    if prob.status != "optimal" or prob.value is None:
        return None
    return float(prob.value) * w_top * c * c


@pytest.mark.parametrize("cond", [1e9, 1e12])
@pytest.mark.parametrize("rotated", [True, False])
@pytest.mark.parametrize("floor", [None, 0.3])
def test_ill_conditioned_weight_certified(cond: float, rotated: bool, floor: float | None) -> None:
    """Certified to 1e-8 in float mode, except where the stored matrix cannot carry it: a
    rotated W of condition 1e12 has weak eigen-directions known only to ~u cond(W) relative,
    and the check's whitening inherits that (asserted at 0.1 u cond(W)); rigorous mode pays
    the dual residual against lambda_min(W) (asserted at 100 u cond(W))."""
    d, count, bound = 8, 300, 1.3
    unit = 2.0**-53
    vectors = _vectors(int(np.log10(cond)) + 3 * rotated, count, d)
    weight = _weight(int(np.log10(cond)), d, cond, rotated)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound)
    eta = 0.0 if floor is None else _floor_at(problem, floor)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound, noise_floor=eta)
    sol = solve_structured(problem, tol=1e-8)
    assert sol.status == "optimal", sol.message
    _feasible(vectors, sol.covariance, bound, eta)
    limit = 1e-8 if not rotated or cond <= 1e9 else 0.1 * unit * cond
    _certified(problem, sol, limit, rigorous=False)
    if rotated and floor is not None:
        _certified(problem, sol, max(1e-8, 100 * unit * cond), rigorous=True)


@pytest.mark.parametrize("quantile", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("seed", [0, 1])
def test_binding_floor_at_quantile(quantile: float, seed: int) -> None:
    d, count, bound = 7, 120, 0.8
    vectors = _vectors(20 + seed, count, d)
    weight = _weight(seed, d, 50.0, rotated=True)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound)
    eta = _floor_at(problem, quantile)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound, noise_floor=eta)
    sol = solve_structured(problem, tol=1e-8)
    assert sol.status == "optimal", sol.message
    assert np.sum(np.linalg.eigvalsh(sol.covariance) <= eta * (1 + 1e-6)) >= 1  # it binds
    _feasible(vectors, sol.covariance, bound, eta)
    _certified(problem, sol, 1e-8, rigorous=seed == 0)
    ref = _clarabel_inverse_value(vectors, weight, bound, eta)
    if ref is not None:  # Clarabel to ~1e-9: the certified interval must contain its value
        lower = sol.stats.extra["lower"]
        assert lower <= ref * (1 + 1e-7)
        assert sol.value <= ref * (1 + 1e-7)


def test_newton_cg_path_matches_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    vectors = _vectors(5, 2000, 14)
    weight = _weight(5, 14, 30.0, rotated=True)
    problem = CovarianceProgram(vectors, weight=weight, bound=1.0)
    direct = solve_structured(problem, tol=1e-9)
    monkeypatch.setattr(restricted, "_DIRECT_FLOPS", 0.0)  # every Newton step by CG
    by_cg = solve_structured(problem, tol=1e-9)
    for sol in (direct, by_cg):
        assert sol.status == "optimal", sol.message
        _feasible(vectors, sol.covariance, 1.0, 0.0)
        _certified(problem, sol, 1e-9, rigorous=False)
    # both certified intervals contain the optimum: they must overlap
    assert by_cg.stats.extra["lower"] <= direct.value
    assert direct.stats.extra["lower"] <= by_cg.value


def test_candidate_pool_matches_full_pricing(monkeypatch: pytest.MonkeyPatch) -> None:
    vectors = _vectors(7, 30000, 10)
    problem = CovarianceProgram(vectors, weight=np.eye(10), bound=1.0)
    monkeypatch.setattr(structured, "_POOL_MIN", 512)
    pooled = solve_structured(problem, tol=1e-9)
    assert any(line.startswith("pool") for line in pooled.stats.extra["log"])
    monkeypatch.setattr(structured, "_POOL_BYTES", 0)  # no pool: every pricing is a pass
    full = solve_structured(problem, tol=1e-9)
    for sol in (pooled, full):
        assert sol.status == "optimal", sol.message
        _feasible(vectors, sol.covariance, 1.0, 0.0)
        _certified(problem, sol, 1e-9, rigorous=False)
    assert pooled.stats.extra["lower"] <= full.value
    assert full.stats.extra["lower"] <= pooled.value
    assert pooled.stats.passes < full.stats.passes


@pytest.mark.parametrize("quantile", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("rank_deficient", [False, True])
def test_identity_weight_floor_eliminated(quantile: float, rank_deficient: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """W = I with a binding floor: the closed-form elimination of the floor block
    (solvers.floored) against the floor-block path, both certified, and Clarabel."""
    d, count, bound = 9, 150, 1.1
    vectors = _vectors(40 + int(10 * quantile), count, d)
    if rank_deficient:  # the vectors span 5 of the 9 dimensions: the rest sits on the floor
        vectors = vectors[:, :5] @ np.random.default_rng(3).standard_normal((5, d))
    weight = np.eye(d)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound)
    eta = _floor_at(problem, quantile) if not rank_deficient else 0.05
    problem = CovarianceProgram(vectors, weight=weight, bound=bound, noise_floor=eta)
    fast = solve_structured(problem, tol=1e-8)
    assert ("closed_form" in fast.stats.extra
            or any("floor eliminated" in line for line in fast.stats.extra["log"]))
    monkeypatch.setattr(structured, "_FLOORED_MIN", np.inf)  # the floor-block path
    block = solve_structured(problem, tol=1e-8)
    assert not any("floor eliminated" in line for line in block.stats.extra["log"])
    assert fast.status == "optimal", fast.message
    for sol in (fast, block):  # the floor-block path is the reference, at a looser tolerance
        _feasible(vectors, sol.covariance, bound, eta)
        _certified(problem, sol, 1e-8 if sol is fast else 1e-6, rigorous=False)
    _certified(problem, fast, 1e-6, rigorous=True)
    assert fast.stats.extra["lower"] <= block.value
    assert block.stats.extra["lower"] <= fast.value
    ref = _clarabel_inverse_value(vectors, weight, bound, eta)
    if ref is not None:
        assert fast.stats.extra["lower"] <= ref * (1 + 1e-7)
        assert fast.value <= ref * (1 + 1e-7)


def test_floored_dual_identity_and_weak_duality() -> None:
    """For any weights mu >= 0: g(mu) is at most the optimum (against an independent Clarabel
    solve), Sigma_mu >= eta I, and the explicit dual satisfies I - H - sum mu u u^T = 0."""
    from solvers.floored import floored_evaluate

    rng = np.random.default_rng(11)
    d, count, eta = 6, 40, 0.3
    vectors = rng.standard_normal((count, d))
    ref = _clarabel_inverse_value(vectors, np.eye(d), 1.0, eta)
    assert ref is not None
    for _ in range(20):
        mu = rng.exponential(size=count) * rng.uniform(0.01, 2.0) * (rng.random(count) < 0.6)
        point = floored_evaluate(vectors, mu, eta)
        assert point.lower <= ref * (1 + 1e-9)
        assert np.linalg.eigvalsh(point.covariance(eta))[0] >= eta * (1 - 1e-12)
        inv = point.inverse_factor(eta) @ point.inverse_factor(eta).T
        np.testing.assert_allclose(inv @ point.covariance(eta), np.eye(d), atol=1e-9)
        u = vectors @ inv
        clamped = point.eigvals < eta * eta
        g = point.eigvecs[:, clamped] * np.sqrt(1 - np.clip(point.eigvals[clamped], 0, None)
                                                / eta**2)
        resid = np.eye(d) - g @ g.T - (u.T * mu) @ u
        assert np.max(np.abs(resid)) <= 1e-9 * max(1.0, float(np.max(np.abs((u.T * mu) @ u))))
        # the dual value of (mu, u, H) is g(mu)
        dual = eta * float(np.trace(g @ g.T)) + float(np.sum(mu * (2 * np.sum(u * vectors, 1) - 1)))
        assert dual == pytest.approx(point.lower, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("d", "floor"), [
    (26, None), (26, 0.2),
    pytest.param(40, None, marks=pytest.mark.slow), pytest.param(40, 0.2, marks=pytest.mark.slow),
])
def test_high_dimension_against_clarabel(d: int, floor: float | None) -> None:
    """d = 26 and 40 (Newton on a working set of hundreds of atoms) against Clarabel's N-form
    (at d = 40 Clarabel takes most of a minute: marked slow)."""
    count, bound = 10 * d, 1.0
    vectors = _vectors(77, count, d)
    weight = _weight(77, d, 20.0, rotated=True) if floor is None else np.eye(d)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound)
    eta = 0.0 if floor is None else _floor_at(problem, floor)
    problem = CovarianceProgram(vectors, weight=weight, bound=bound, noise_floor=eta)
    sol = solve_structured(problem, tol=1e-9)
    assert sol.status == "optimal", sol.message
    _feasible(vectors, sol.covariance, bound, eta)
    _certified(problem, sol, 1e-8, rigorous=False)
    ref = _clarabel_inverse_value(vectors, weight, bound, eta)
    assert ref is not None
    assert sol.stats.extra["lower"] <= ref * (1 + 1e-7)
    assert sol.value <= ref * (1 + 1e-7)
