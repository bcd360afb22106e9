"""The shared reductions: the span reduction and its lift, the top-k reduction of a pass, the
column-generation loop.

References: the original program's constraints evaluated directly on the lifted covariance, the
residual identity of the lift recomputed with dense numpy, ``certificates.covariance.check`` on a
reduced solve lifted back (a second solver, Clarabel, solves the reduced program), and a
brute-force sort (``sorted`` by score, then index) for every top-k selection.
"""

from __future__ import annotations

import importlib
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.covariance import check
from certificates.errors import InvalidParameterError, SolverError
from certificates.problem import ArrayVectors, CovarianceProgram, FactoredDual
from solvers.passes import score_pass
from solvers.reductions import SpanReduction, TopK, column_generation, top_k


def _rank_deficient(seed: int, j: int = 12, d: int = 5, r: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((j, r)) @ rng.standard_normal((r, d))
    a = rng.standard_normal((d, d))
    weight = a @ a.T + 0.5 * np.eye(d)
    return vectors, weight


# ------------------------------------------------------------------------------------------------
# span reduction and lift
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_span_bases_are_orthonormal_and_hold_the_vectors(seed: int) -> None:
    vectors, _ = _rank_deficient(seed)
    red = SpanReduction.of_vectors(vectors)
    assert (red.rank, red.dim, red.deficient) == (3, 5, True)
    full = np.concatenate([red.basis, red.complement], axis=1)
    assert np.allclose(full.T @ full, np.eye(5), atol=1e-12)
    assert np.max(np.abs(vectors @ red.complement)) <= 1e-12 * np.max(np.abs(vectors))
    # the Gram route finds the same span (equal projectors)
    gram_red = SpanReduction.of_gram(vectors.T @ vectors, 1e-13)
    assert gram_red.rank == 3
    assert np.allclose(gram_red.basis @ gram_red.basis.T, red.basis @ red.basis.T, atol=1e-10)


def test_full_rank_gram_keeps_the_identity_basis() -> None:
    rng = np.random.default_rng(1)
    s = rng.standard_normal((20, 4))
    red = SpanReduction.of_gram(s.T @ s, 1e-13)
    assert not red.deficient and np.array_equal(red.basis, np.eye(4))
    vec, w = red.apply(s, np.diag([1.0, 2.0, 3.0, 4.0]))
    assert np.array_equal(vec, s) and np.array_equal(w, np.diag([1.0, 2.0, 3.0, 4.0]))


@pytest.mark.parametrize("seed", range(4))
def test_lifted_covariance_satisfies_the_original_constraints(seed: int) -> None:
    vectors, weight = _rank_deficient(seed)
    q = 1.5
    red = SpanReduction.of_vectors(vectors)
    vec_r, w_r = red.apply(vectors, weight)
    # any feasible reduced covariance: the uniform-weight M of the reduced vectors, scaled so that
    # the largest reduced score is q
    sigma_r = vec_r.T @ vec_r / vectors.shape[0]
    scores_r = np.einsum("ij,jk,ik->i", vec_r, np.linalg.inv(sigma_r), vec_r)
    sigma_r *= float(np.max(scores_r)) / q
    cost_r = float(np.sum(w_r * sigma_r))
    tau = red.ridge(weight, cost_r, 1e-6)
    sigma = red.lift_covariance(sigma_r, tau)
    assert np.allclose(sigma, sigma.T, rtol=0, atol=0)
    assert np.linalg.eigvalsh(sigma)[0] > 0
    # the original constraints, evaluated directly on the lifted covariance
    scores = np.einsum("ij,jk,ik->i", vectors, np.linalg.inv(sigma), vectors)
    assert np.max(scores) <= q * (1 + 1e-8)
    # its cost is the reduced cost plus the ridge's requested relative cost
    assert np.isclose(float(np.trace(weight @ sigma)), cost_r * (1 + 1e-6), rtol=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_the_dual_lift_carries_the_reduced_residual(seed: int) -> None:
    vectors, weight = _rank_deficient(seed)
    red = SpanReduction.of_vectors(vectors)
    _, w_r = red.apply(vectors, weight)
    rng = np.random.default_rng(100 + seed)
    lam = rng.random(6)
    u_r = rng.standard_normal((6, red.rank))
    u, g = red.lift_dual(weight, u_r)
    # W - H - sum lam u u^T = (B + CK) (W_r - sum lam u_r u_r^T) (B + CK)^T, K = C^T W B W_r^-1
    b, c = red.basis, red.complement
    lift = b + c @ (c.T @ weight @ b @ np.linalg.inv(w_r))
    resid_r = w_r - (u_r.T * lam) @ u_r
    resid = weight - g @ g.T - (u.T * lam) @ u
    assert np.allclose(resid, lift @ resid_r @ lift.T, atol=1e-10)
    assert np.linalg.eigvalsh(g @ g.T)[0] >= -1e-12  # H is PSD by construction
    assert g.shape == (5, 2)  # the Schur complement on the 2-dimensional complement


def test_a_reduced_solve_by_a_second_solver_lifts_to_a_certificate() -> None:
    pytest.importorskip("clarabel")
    from solvers.cvx import solve_cvx

    vectors, weight = _rank_deficient(7)
    q = 2.0
    red = SpanReduction.of_vectors(vectors)
    vec_r, w_r = red.apply(vectors, weight)
    reduced = solve_cvx(CovarianceProgram(vec_r, w_r, q), solver="clarabel", form="primal")
    assert reduced.dual is not None
    tau = red.ridge(weight, reduced.value, 1e-9)
    sigma = red.lift_covariance(reduced.covariance, tau)
    rdual = reduced.dual
    u, g = red.lift_dual(weight, rdual.directions, 1e-13)
    floor_r, _ = red.lift_dual(weight, rdual.floor_factor.T)  # a reduced H lifts like the u_j
    lifted = FactoredDual(support=rdual.support, multipliers=rdual.multipliers, directions=u,
                          floor_factor=np.concatenate([g, floor_r.T], axis=1))
    cert = check(CovarianceProgram(vectors, weight, q), sigma, lifted, tol=1e-6)
    assert cert.certified, cert.message
    # the lifted interval holds the reduced solver's value (the two programs have one value)
    assert cert.lower <= reduced.value * (1 + 1e-7) and cert.upper >= reduced.value * (1 - 1e-7)


# ------------------------------------------------------------------------------------------------
# top-k
# ------------------------------------------------------------------------------------------------
def _brute(q: np.ndarray, keep: int, threshold: float, index: np.ndarray) -> list[int]:
    order = sorted((p for p in range(q.size) if q[p] > threshold),
                   key=lambda p: (-q[p], index[p]))
    return order[:keep]


_scores = st.lists(st.integers(0, 6), min_size=0, max_size=60).map(
    lambda xs: np.asarray(xs, dtype=np.float64) / 4.0)  # small integers: many exact ties


@settings(max_examples=150, deadline=None)
@given(q=_scores, keep=st.integers(0, 12), threshold=st.sampled_from([-np.inf, 0.0, 0.5, 1.0]),
       seed=st.integers(0, 2**16))
def test_top_k_equals_a_brute_force_sort(q: np.ndarray, keep: int, threshold: float,
                                         seed: int) -> None:
    assert top_k(q, keep, threshold).tolist() == _brute(q, keep, threshold, np.arange(q.size))
    index = np.random.default_rng(seed).permutation(q.size) * 3 + 1  # distinct, unsorted
    assert top_k(q, keep, threshold, index).tolist() == _brute(q, keep, threshold, index)


@settings(max_examples=100, deadline=None)
@given(q=_scores.filter(lambda a: a.size > 0), keep=st.integers(0, 12),
       threshold=st.sampled_from([-np.inf, 0.25, 1.0]), cuts=st.lists(st.integers(1, 59)),
       seed=st.integers(0, 2**16))
def test_streamed_and_merged_selections_equal_the_whole(q: np.ndarray, keep: int,
                                                        threshold: float, cuts: list[int],
                                                        seed: int) -> None:
    vecs = np.column_stack([np.arange(q.size, dtype=float), q])
    bounds = sorted({0, q.size, *(c for c in cuts if c < q.size)})
    want = _brute(q, keep, threshold, np.arange(q.size))
    first_max = int(np.argmax(q))
    # chunks in order (the in-process pass)
    streamed = TopK(keep, 2, threshold)
    for a, b in itertools.pairwise(bounds):
        streamed.add(a, q[a:b], vecs[a:b])
    # chunk reductions merged in a shuffled order (the distributed pass)
    merged = TopK(keep, 2, threshold)
    pieces = list(itertools.pairwise(bounds))
    for i in np.random.default_rng(seed).permutation(len(pieces)):
        a, b = pieces[i]
        sel = top_k(q[a:b], keep, threshold)
        arg = int(np.argmax(q[a:b]))
        merged.merge(float(q[a + arg]), a + arg, a + sel, q[a:b][sel], vecs[a:b][sel])
    for top in (streamed, merged):
        qmax, argmax, idx, qs, vs = top.result()
        assert (qmax, argmax) == (float(q[first_max]), first_max)
        assert idx.tolist() == want
        assert np.array_equal(qs, q[want]) and np.array_equal(vs, vecs[want])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_scores_are_refused(bad: float) -> None:
    q = np.array([1.0, 2.0, bad, 0.5])
    with pytest.raises(SolverError, match="non-finite constraint value"):
        top_k(q, 2)
    with pytest.raises(SolverError, match="non-finite"):
        TopK(2, 1).add(0, q, np.zeros((4, 1)))
    with pytest.raises(SolverError, match="non-finite"):
        TopK(2, 1).merge(bad, 3, np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros((0, 1)))
    with pytest.raises(InvalidParameterError, match="keep"):
        top_k(np.ones(3), -1)


def test_a_pass_with_a_nan_working_factor_is_refused() -> None:
    s = np.random.default_rng(3).standard_normal((50, 3))
    bmat = np.eye(3)
    bmat[1, 1] = np.nan
    with pytest.raises(SolverError, match="non-finite"):
        score_pass(ArrayVectors(s), bmat, 16, 4, 0.0)
    with pytest.raises(SolverError, match="non-finite"):
        TopK(2, 3).result()  # an empty pass proves nothing


def test_score_pass_is_the_brute_force_selection_for_any_chunk_size() -> None:
    rng = np.random.default_rng(5)
    s = np.round(rng.standard_normal((300, 2)), 1)  # rounded: many tied scores
    bmat = np.array([[1.0, 0.0], [0.0, 0.5]])
    z = s @ bmat
    q = np.einsum("ij,ij->i", z, z)
    want = _brute(q, 7, 0.3, np.arange(q.size))
    for chunk in (1, 7, 64, 300):
        res = score_pass(ArrayVectors(s), bmat, chunk, 7, 0.3)
        assert res.top_idx.tolist() == want
        assert (res.qmax, res.argmax) == (float(np.max(q)), int(np.argmax(q)))
        assert np.array_equal(res.top_vecs, s[want])


# ------------------------------------------------------------------------------------------------
# the column-generation loop
# ------------------------------------------------------------------------------------------------
class _Scripted:
    """A model whose gaps and growth follow a script; it records what the loop asked."""

    def __init__(self, gaps: list[float], grows: list[bool], passes: int = 100,
                 fail_at: int | None = None) -> None:
        self.gaps, self.grows = list(gaps), list(grows)
        self.left = passes
        self.fail_at = fail_at
        self.calls: list[tuple[str, float, bool]] = []

    def passes_left(self) -> bool:
        return self.left > 0

    def solve(self, inner_tol: float) -> int | None:
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            return None
        return len(self.calls)

    def price(self, point: int, inner_tol: float, certified: bool) -> float:
        self.left -= 1
        self.calls.append(("price", inner_tol, certified))
        return self.gaps.pop(0)

    def switch(self, point: int) -> bool:
        return False

    def grow(self, point: int, inner_tol: float, gap: float) -> bool:
        return self.grows.pop(0)


def test_the_loop_tightens_then_stops_at_the_certified_gap() -> None:
    tol = 1e-8
    model = _Scripted(gaps=[1e-1, 1e-4, 1e-6, 1e-6, 5e-9], grows=[True, True, False, True])
    assert column_generation(model, tol, warm=False, pooled=False) == "optimal"
    tols = [c[1] for c in model.calls]
    # inner tolerance 1 % of the last gap (at most 1e-3), tight (tol / 10) after a loose solve
    # that added nothing
    assert tols == pytest.approx([1e-3, 1e-3, 1e-6, 1e-9, 1e-8], rel=1e-12)
    assert all(c[2] for c in model.calls)  # no pool: every pricing is a certifying pass


def test_the_loop_reports_stall_limit_and_stop() -> None:
    assert column_generation(_Scripted([1e-2, 1e-2], [False, False]), 1e-8, warm=True,
                             pooled=False) == "stalled"  # warm: the first solve is tight
    assert column_generation(_Scripted([1e-2] * 3, [True] * 3, passes=3), 1e-8, warm=False,
                             pooled=False) == "limit"
    assert column_generation(_Scripted([1e-2] * 3, [True] * 3, fail_at=2), 1e-8, warm=False,
                             pooled=False) == "stopped"


def test_pool_rounds_end_in_a_certifying_pass() -> None:
    tol = 1e-6
    # pool rounds until the pool's gap is below tol / 2, then a full pass that certifies
    model = _Scripted(gaps=[1e-2, 1e-7, 1e-7], grows=[True])
    assert column_generation(model, tol, warm=False, pooled=True) == "optimal"
    assert [c[2] for c in model.calls] == [False, False, True]
    # an exhausted pool (nothing to add at a tight solve) also calls for a full pass
    model = _Scripted(gaps=[1e-3, 1e-8], grows=[False])
    assert column_generation(model, tol, warm=True, pooled=True) == "optimal"
    assert [c[2] for c in model.calls] == [False, True]


# ------------------------------------------------------------------------------------------------
# the old import paths
# ------------------------------------------------------------------------------------------------
def test_the_old_span_reduction_path_warns_and_forwards() -> None:
    forms = importlib.import_module("solvers.cvx_forms")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DeprecationWarning)
        old_cls = forms.SpanReduction
        old_fn = forms.span_reduction
    assert old_cls is SpanReduction
    assert [w.category for w in seen] == [DeprecationWarning] * 2
    assert "solvers.reductions" in str(seen[0].message)
    red = old_fn(np.array([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]))
    assert red.rank == 1 and red.complement.shape == (3, 2)
