"""design_covariance_batch in stacked waves: random batches against cvxpy + Clarabel and against
the single-design path, adversarial items, per-item errors.

Every design is re-checked by ``certificates`` alone (``certificates.covariance.check`` on the
returned covariance and dual) and by an own float recomputation of its constraints.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.errors import InvalidParameterError
from certificates.problem import CovarianceProgram
from dpopt.accounting.budgets import ZCDP
from dpopt.covariance.batch import design_covariance_batch
from dpopt.covariance.design import Design, design_covariance
from dpopt.relation import add_remove_bound, as_relation

FloatArray = NDArray[np.float64]


def _trajectory(n: int, d: int, m: int, seed: int, drift: float = 0.05) -> list[FloatArray]:
    """Differences of m random points under a slowly drifting linear query (rows keep their
    record pairs from one item to the next, as a sampler's releases do)."""
    rng = np.random.default_rng(seed)
    points = rng.random((m, d))
    i0, i1 = np.triu_indices(m, 1)
    base = points[i0] - points[i1]
    turn = rng.standard_normal((d, d))
    return [base @ (np.eye(d) + drift * np.sin(0.4 * t) * turn) for t in range(n)]


def _spd(rng: np.random.Generator, d: int, cond: float) -> FloatArray:
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.geomspace(1.0, cond, d)) @ q.T


def _own_max(s: FloatArray, sigma: FloatArray) -> float:
    """max_j s_j^T Sigma^-1 s_j by a plain Cholesky solve."""
    z = np.linalg.solve(np.linalg.cholesky(sigma), s.T)
    return float(np.max(np.sum(z * z, axis=0)))


def _rechecked(des: Design, vec: FloatArray, tol: float) -> None:
    """The design's certificate re-derived by certificates alone, its constraints recomputed."""
    cert = check(des.program, des.covariance, des.solution.dual, tol=tol)
    assert cert.certified, cert.message
    assert cert.mahalanobis_sup <= des.program.bound
    assert cert.lower <= des.value * (1 + 1e-12)
    assert _own_max(vec, des.covariance) <= des.program.bound * (1 + 1e-12)
    assert des.privacy.mahalanobis_bound <= des.bound


@pytest.mark.parametrize("seed,d,shared,relation,w_cond", [
    (1, 2, True, "add_remove", 1.0),
    (2, 5, False, "replacement", 30.0),
    (3, 8, False, "add_remove", 1.0),
    (4, 12, True, "replacement", 10.0),
])
def test_random_batches_against_clarabel_and_the_single_path(
        seed: int, d: int, shared: bool, relation: str, w_cond: float) -> None:
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(seed)
    n, m = 6, max(9, d + 3)  # the differences of m points span R^d when m > d
    sets = _trajectory(n, d, m, seed)
    w = None if w_cond == 1.0 else _spd(rng, d, w_cond)
    budgets = (ZCDP(rho=0.5) if shared
               else [ZCDP(rho=float(r)) for r in rng.uniform(0.2, 2.0, size=n)])
    tol = 1e-7
    batch = design_covariance_batch(sets, budgets, weight=w, tol=tol, relation=relation)
    assert any("stacked" in des.path for des in batch)  # the stacked route is exercised
    rel = as_relation(relation)
    for i, (vec, des) in enumerate(zip(sets, batch, strict=True)):
        bud = budgets if shared else budgets[i]
        single = design_covariance(vec, bud, weight=w, tol=tol, relation=relation)
        q = add_remove_bound(bud.mahalanobis_bound(), rel)  # type: ignore[union-attr]
        ref = solve_cvx(CovarianceProgram(vec, w, q), solver="clarabel", form="inverse",
                        tol=1e-10)
        assert des.certified and des.relation is rel
        assert des.value == pytest.approx(ref.value, rel=1e-6)
        assert des.value == pytest.approx(single.value, rel=3e-7)
        assert des.certificate.lower <= ref.value * (1 + 1e-7)
        assert des.program.bound == pytest.approx(q, rel=1e-15)
        _rechecked(des, vec, tol)


def test_adversarial_items_get_their_own_answers_and_spoil_nothing() -> None:
    """A degenerate query (vectors on a line), an item with one vector, duplicated items and a
    near-copy of an item in a trajectory: each is answered and certified as
    design_covariance answers it, and the ordinary items are still solved stacked."""
    rng = np.random.default_rng(7)
    d = 4
    sets = _trajectory(12, d, 10, 7)
    line = rng.standard_normal((sets[0].shape[0], 1)) @ rng.standard_normal((1, d))
    sets[3] = line
    sets[5] = sets[5][:1]
    sets[7] = sets[6].copy()
    sets[8] = sets[6].copy()
    sets[9] = sets[9] * (1 + 1e-13)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stray RuntimeWarning from the stacked arithmetic
        batch = design_covariance_batch(sets, ZCDP(rho=0.5))
    for i, (vec, des) in enumerate(zip(sets, batch, strict=True)):
        ref = design_covariance(vec, ZCDP(rho=0.5))
        assert des.certified, i
        assert des.value == pytest.approx(ref.value, rel=1e-7), i
        assert f"batch item {i}" in des.path
        cert = check(des.program, des.covariance, des.solution.dual, tol=1e-6)
        assert cert.certified and cert.mahalanobis_sup <= des.program.bound
    assert batch[7].value == pytest.approx(batch[6].value, rel=1e-9)
    ordinary = [i for i in range(12) if i not in (0, 3, 5)]
    assert sum("stacked" in batch[i].path for i in ordinary) >= len(ordinary) - 2


def test_an_ill_conditioned_weight() -> None:
    """W of condition 1e6 shared by a batch: every item certified (the stacked check hands
    such programs to check's whitened bounds), equal to design_covariance's answer."""
    rng = np.random.default_rng(11)
    d = 5
    sets = _trajectory(8, d, 9, 11)
    w = _spd(rng, d, 1e6)
    batch = design_covariance_batch(sets, ZCDP(rho=0.5), weight=w, tol=1e-6)
    for vec, des in zip(sets, batch, strict=True):
        ref = design_covariance(vec, ZCDP(rho=0.5), weight=w, tol=1e-6)
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=2e-6)
        _rechecked(des, vec, 1e-6)


@pytest.mark.parametrize("bad,match", [
    (np.zeros((36, 3)), "all zero"),
    (np.full((36, 3), np.inf), "sensitivities\\[4\\]"),
])
def test_a_bad_item_is_refused_by_its_index(bad: FloatArray, match: str) -> None:
    sets = _trajectory(6, 3, 9, 2)
    sets[4] = bad
    with pytest.raises(InvalidParameterError, match=match) as info:
        design_covariance_batch(sets, ZCDP(rho=0.5))
    assert "sensitivities[4]" in info.value.name


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(2, 6), n=st.integers(3, 9),
       drift=st.floats(0.0, 0.3), rho=st.floats(0.1, 3.0))
def test_property_the_batch_equals_a_loop(seed: int, d: int, n: int, drift: float,
                                          rho: float) -> None:
    """Any trajectory: every item certified by certificates alone and equal to a loop over
    design_covariance, whichever route (stacked or alone) answered it."""
    sets = _trajectory(n, d, 8, seed, drift)
    batch = design_covariance_batch(sets, ZCDP(rho=rho), tol=1e-7)
    for vec, des in zip(sets, batch, strict=True):
        single = design_covariance(vec, ZCDP(rho=rho), tol=1e-7)
        assert des.value == pytest.approx(single.value, rel=3e-7)
        _rechecked(des, vec, 1e-7)
