"""dpopt.covariance.batch.design_covariance_batch: many certified designs in one call."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import InvalidParameterError, InvalidTypeError
from dpopt.accounting.budgets import GDP, ZCDP, ApproxDP
from dpopt.covariance.batch import design_covariance_batch
from dpopt.covariance.design import design_covariance


def _trajectory(n: int, d: int, m: int, seed: int = 0) -> list[np.ndarray]:
    """Two-record-like vectors of a drifting query: consecutive problems are close."""
    rng = np.random.default_rng(seed)
    points = rng.random((m, d))
    i0, i1 = np.triu_indices(m, 1)
    base = points[i0] - points[i1]
    out = []
    for t in range(n):
        stretch = 1.0 + 0.3 * np.sin(0.2 * t + np.arange(d))
        out.append(base * stretch)
    return out


def test_batch_matches_a_loop_and_every_item_is_certified() -> None:
    sets = _trajectory(6, 3, 12)
    budgets = [ZCDP(rho=0.2 + 0.1 * i) for i in range(6)]
    batch = design_covariance_batch(sets, budgets, tol=1e-7)
    assert len(batch) == len(sets)
    for vec, bud, des in zip(sets, budgets, batch, strict=True):
        ref = design_covariance(vec, bud, tol=1e-7)
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=2e-7)
        # re-check the returned covariance and dual from scratch
        cert = check(des.program, des.covariance, des.solution.dual, tol=1e-7)
        assert cert.certified
        assert cert.mahalanobis_sup <= des.program.bound
        assert cert.lower <= ref.value * (1 + 1e-12)


def test_every_batch_design_names_its_path_and_budget() -> None:
    """Each design says which path answered (the structured solve, warm or cold), in
    ``path`` and in ``str(design)``, and keeps the budget it was made for."""
    sets = _trajectory(3, 2, 8, 4)
    budget = ZCDP(rho=0.5)
    warm = design_covariance_batch(sets, budget)
    cold = design_covariance_batch(sets, budget, warm_start=False)
    assert warm[0].path == "structured (batch item 0, cold start)"
    for j, des in enumerate(warm[1:], start=1):
        one = re.fullmatch(rf"structured \(batch item {j}, warm start from item {j - 1}\)",
                           des.path)
        stacked = re.fullmatch(rf"structured, stacked \(batch item {j}, on the support of "
                               r"item (\d+)\)", des.path)
        assert one or (stacked and int(stacked.group(1)) < j), des.path
    assert [d.path for d in cold] == [f"structured (batch item {i}, cold start)"
                                      for i in range(3)]
    for des in warm:
        assert f"answer from {des.path}" in str(des)
        assert des.budget is budget


def test_one_shared_budget_and_a_3d_array() -> None:
    sets = np.stack(_trajectory(3, 2, 10))
    batch = design_covariance_batch(sets, GDP(mu=1.0))
    assert [d.bound for d in batch] == [batch[0].bound] * 3
    assert all(d.certified for d in batch)


def test_bad_batches_are_refused_by_name() -> None:
    sets = _trajectory(2, 2, 6)
    with pytest.raises(InvalidParameterError, match="budgets"):
        design_covariance_batch(sets, [ZCDP(rho=1.0)] * 3)
    with pytest.raises(InvalidParameterError, match="sensitivities"):
        design_covariance_batch([], ZCDP(rho=1.0))
    with pytest.raises(InvalidParameterError, match="sensitivities"):
        design_covariance_batch(np.zeros((4, 2)), ZCDP(rho=1.0))
    with pytest.raises(InvalidTypeError, match="sensitivities"):
        design_covariance_batch(3.0, ZCDP(rho=1.0))  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="budgets"):
        design_covariance_batch(sets, 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="warm_start"):
        design_covariance_batch(sets, ZCDP(rho=1.0), warm_start=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="delta"):
        design_covariance_batch(sets, [ApproxDP(epsilon=1.0, delta=2.0)] * 2)


def _max_ratio(s: np.ndarray, sigma: np.ndarray) -> float:
    """max_j s_j^T Sigma^{-1} s_j by a plain Cholesky solve (own recomputation)."""
    c = np.linalg.cholesky(sigma)
    z = np.linalg.solve(c, s.T)
    return float(np.max(np.sum(z * z, axis=0)))


@pytest.mark.parametrize("seed", range(3))
def test_random_batches_against_clarabel(seed: int) -> None:
    """Random trajectories (d = 2..4, random SPD W, one budget each) against cvxpy + Clarabel at
    tight tolerance on every item; each item's covariance re-checked by an own solve."""
    from certificates.problem import CovarianceProgram
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    sets = _trajectory(4, d, int(rng.integers(6, 11)), seed)
    a = rng.standard_normal((d, d))
    w = a @ a.T + 0.5 * np.eye(d)
    budgets = [ZCDP(rho=float(r)) for r in rng.uniform(0.2, 2.0, size=4)]
    batch = design_covariance_batch(sets, budgets, weight=w, tol=1e-8)
    for vec, bud, des in zip(sets, budgets, batch, strict=True):
        q = bud.mahalanobis_bound()
        ref = solve_cvx(CovarianceProgram(vec, w, q), solver="clarabel", form="primal", tol=1e-10)
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-6)
        assert des.certificate.lower <= ref.value * (1 + 1e-7)
        assert _max_ratio(vec, des.covariance) <= q


@pytest.mark.parametrize("seed,d", [(11, 2), (12, 3), (13, 5)])
def test_stacked_waves_against_clarabel(seed: int, d: int) -> None:
    """A longer trajectory (items solved stacked on a neighbour's support, and on their own)
    against cvxpy + Clarabel at tight tolerance, every item re-checked by an own solve."""
    from certificates.problem import CovarianceProgram
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(seed)
    sets = _trajectory(10, d, 8, seed)
    a = rng.standard_normal((d, d))
    w = a @ a.T + 0.5 * np.eye(d)
    budgets = [ZCDP(rho=float(r)) for r in rng.uniform(0.3, 1.0, size=10)]
    batch = design_covariance_batch(sets, budgets, weight=w, tol=1e-8)
    assert any("stacked" in des.path for des in batch)
    for vec, bud, des in zip(sets, budgets, batch, strict=True):
        q = bud.mahalanobis_bound()
        ref = solve_cvx(CovarianceProgram(vec, w, q), solver="clarabel", form="primal",
                        tol=1e-10)
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-6)
        assert des.certificate.lower <= ref.value * (1 + 1e-7)
        assert _max_ratio(vec, des.covariance) <= q
        assert des.privacy.mahalanobis_bound <= des.bound


def test_warm_batch_equals_cold_batch_with_a_floor_and_replacement() -> None:
    sets = _trajectory(5, 3, 9, 7)
    for eta, relation in [(0.0, "replacement"), (0.05, "add_remove")]:
        warm = design_covariance_batch(sets, ZCDP(rho=0.5), noise_floor=eta, tol=1e-8,
                                       relation=relation)
        cold = design_covariance_batch(sets, ZCDP(rho=0.5), noise_floor=eta, tol=1e-8,
                                       relation=relation, warm_start=False)
        for vec, a, b in zip(sets, warm, cold, strict=True):
            assert a.certified and b.certified
            assert a.value == pytest.approx(b.value, rel=2e-8)
            assert a.relation.value == relation
            assert np.linalg.eigvalsh(a.covariance)[0] >= eta
            assert _max_ratio(vec, a.covariance) <= a.program.bound
            assert a.privacy.mahalanobis_bound <= a.bound


def test_an_item_the_fast_path_cannot_certify_goes_through_design_covariance(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dpopt.covariance.batch as batch_module
    from certificates.errors import SolverError

    sets = _trajectory(3, 2, 8, 1)

    def failing(*args: object, **kwargs: object) -> None:
        raise SolverError("forced failure")

    monkeypatch.setattr(batch_module, "solve_structured", failing)
    batch = design_covariance_batch(sets, ZCDP(rho=0.5))
    for j, (vec, des) in enumerate(zip(sets, batch, strict=True)):
        ref = design_covariance(vec, ZCDP(rho=0.5))
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-8)
        # the design says which route produced it: the fallback, and which step of it (item
        # 0 always; a later item may be solved stacked on the support the fallback found)
        if j == 0 or "stacked" not in des.path:
            assert des.path.startswith(ref.path)
            assert "design_covariance designed it" in des.path and "failed" in des.path
    assert "design_covariance designed it" in batch[0].path
    # with the stacked route solving nothing either, every item takes the fallback
    from solvers.stacked import StackedResult

    def nothing(vectors: np.ndarray, *args: object, **kwargs: object) -> StackedResult:
        return StackedResult(np.zeros(len(vectors), dtype=bool), [None] * len(vectors), 0)

    monkeypatch.setattr(batch_module, "solve_on_support", nothing)
    for vec, des in zip(sets, design_covariance_batch(sets, ZCDP(rho=0.5)), strict=True):
        assert des.certified and "design_covariance designed it" in des.path
        assert des.value == pytest.approx(design_covariance(vec, ZCDP(rho=0.5)).value,
                                          rel=1e-12)


def test_bad_items_are_named() -> None:
    sets = _trajectory(3, 2, 6)
    sets[1] = np.full((4, 2), np.nan)
    with pytest.raises(InvalidParameterError, match=r"sensitivities\[1\]"):
        design_covariance_batch(sets, ZCDP(rho=1.0))


def test_vector_sources_and_pruned_sets_as_items() -> None:
    """Items may be sources (generated once into arrays when small) or pruned sets, as
    design_covariance takes them; the answers agree with it."""
    from dpopt.covariance import add_remove_set
    from dpopt.covariance.domains import Grid
    from dpopt.covariance.pruning import prune

    grid = Grid(np.zeros(2), np.ones(2), (6, 6))
    sources = [add_remove_set(grid, (0.2 + 0.05 * t, 0.6), 0.3) for t in range(3)]
    items: list[object] = [sources[0], prune(sources[1]), sources[2]]
    batch = design_covariance_batch(items, ZCDP(rho=0.5))  # type: ignore[arg-type]
    for item, des in zip(items, batch, strict=True):
        ref = design_covariance(item, ZCDP(rho=0.5))  # type: ignore[arg-type]
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-7)
        # the design describes the caller's set, and its certificate holds for it
        assert type(des.program.vectors) is type(ref.program.vectors)
        cert = check(des.program, des.covariance, des.solution.dual, tol=1e-6)
        assert cert.certified and cert.mahalanobis_sup <= des.program.bound


def test_small_sources_of_one_size_are_solved_stacked_and_stay_sources() -> None:
    """Sources of one size (a drifting query on one grid) are generated for the stack; every
    design still describes its source, and its certificate holds for it."""
    from dpopt.covariance import add_remove_set
    from dpopt.covariance.domains import Grid

    grid = Grid(np.zeros(2), np.ones(2), (6, 6))
    sources = [add_remove_set(grid, (0.2 + 0.01 * t, 0.6 - 0.01 * t), 0.3) for t in range(6)]
    batch = design_covariance_batch(sources, ZCDP(rho=0.5))
    assert any("stacked" in des.path for des in batch)
    for src, des in zip(sources, batch, strict=True):
        ref = design_covariance(src, ZCDP(rho=0.5))
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-7)
        assert des.program.vectors is src
        cert = check(des.program, des.covariance, des.solution.dual, tol=1e-6)
        assert cert.certified and cert.mahalanobis_sup <= des.program.bound


def test_sets_of_different_sizes_and_unmaterialised_sources(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A set of another size starts cold; a source above SMALL_VECTORS stays a source (the
    general chunked path, its norm range checked as design_covariance checks it)."""
    import dpopt.covariance.batch as batch_module
    from dpopt.covariance import add_remove_set
    from dpopt.covariance.domains import Grid

    monkeypatch.setattr(batch_module, "SMALL_VECTORS", 10)
    grid = Grid(np.zeros(2), np.ones(2), (5, 5))
    items: list[object] = [add_remove_set(grid, (0.3, 0.6), 0.3), _trajectory(1, 2, 7)[0],
                           _trajectory(1, 2, 9)[0], add_remove_set(grid, (0.35, 0.6), 0.3)]
    batch = design_covariance_batch(items, ZCDP(rho=0.5))  # type: ignore[arg-type]
    assert not isinstance(batch[0].program.vectors, np.ndarray)
    for item, des in zip(items, batch, strict=True):
        ref = design_covariance(item, ZCDP(rho=0.5))  # type: ignore[arg-type]
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-7)


@pytest.mark.parametrize("case", ["rank-deficient", "tiny", "huge", "parallel"])
def test_awkward_trajectories_equal_a_loop(case: str) -> None:
    """Sets on a line (the stack leaves them to the general path), norms near the ends of the
    accepted range, and repeated or parallel vectors: every design certified and equal to
    design_covariance's, whichever route answered."""
    rng = np.random.default_rng(3)
    pts = rng.random((10, 3))
    i0, i1 = np.triu_indices(10, 1)
    base = pts[i0] - pts[i1]
    if case == "rank-deficient":
        base = rng.standard_normal((30, 1)) @ np.array([[1.0, 2.0, -1.0]])
    elif case == "tiny":
        base = base * 1e-90
    elif case == "huge":
        base = base * 1e90
    else:
        base = np.concatenate([base, base, 2.0 * base[:5], -base[5:9]])
    sets = [base * (1.0 + 0.01 * t) for t in range(5)]
    batch = design_covariance_batch(sets, ZCDP(rho=0.5))
    for vec, des in zip(sets, batch, strict=True):
        ref = design_covariance(vec, ZCDP(rho=0.5))
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=1e-8)
        assert des.privacy.mahalanobis_bound <= des.bound
        if case != "rank-deficient":
            assert _max_ratio(vec, des.covariance) <= des.program.bound * (1 + 1e-12)


def test_a_stacked_design_saves_and_verifies(tmp_path: Path) -> None:
    """A design solved on the stack writes a certificate file that re-verifies from scratch,
    naming the route in the file (``produced_by``) and after loading."""
    from dpopt.covariance.design import Design

    sets = _trajectory(5, 2, 10, 21)
    designs = design_covariance_batch(sets, ZCDP(rho=0.5))
    stacked = [d for d in designs if "stacked" in d.path]
    assert stacked
    path = tmp_path / "stacked.json"
    stacked[0].save(path)
    loaded = Design.load(path)
    assert loaded.certified and loaded.path == stacked[0].path
    assert loaded.value == pytest.approx(stacked[0].value, rel=1e-12)
