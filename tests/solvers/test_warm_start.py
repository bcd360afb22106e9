"""Warm starts, the in-memory path and the small closed forms of the structured solver.

References are independent of the code under test: cvxpy + Clarabel at tight tolerance, the
general (chunked, executor) path of the same solver on the same data, an own float
recomputation of the constraint values, and ``certificates.covariance.check``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.errors import InvalidTypeError
from certificates.problem import CovarianceProgram
from solvers.structured import WarmStart, blas_limits, solve_structured


class _Chunked:
    """A VectorSource over an array that is not an array (forces the general path)."""

    def __init__(self, array: NDArray[np.float64]) -> None:
        self.array_ = array

    @property
    def count(self) -> int:
        return int(self.array_.shape[0])

    @property
    def dim(self) -> int:
        return int(self.array_.shape[1])

    def chunks(self, size: int = 65536) -> Iterator[tuple[int, NDArray[np.float64]]]:
        for start in range(0, self.count, size):
            yield start, self.array_[start:start + size]

    def take(self, indices: NDArray[np.intp]) -> NDArray[np.float64]:
        return self.array_[np.asarray(indices, dtype=np.intp)]


def _trajectory(n: int, d: int, m: int, seed: int) -> list[NDArray[np.float64]]:
    """Pair differences of m fixed points under a slowly drifting linear map."""
    rng = np.random.default_rng(seed)
    x = rng.random((m, d))
    i, k = np.triu_indices(m, 1)
    base = x[i] - x[k]
    drift = rng.standard_normal((d, d)) * 0.05
    return [base @ (np.eye(d) + t * drift) for t in range(n)]


def _max_ratio(s: NDArray[np.float64], sigma: NDArray[np.float64]) -> float:
    """max_j s_j^T Sigma^{-1} s_j by a plain Cholesky solve (own recomputation)."""
    c = np.linalg.cholesky(sigma)
    z = np.linalg.solve(c, s.T)
    return float(np.max(np.sum(z * z, axis=0)))


@pytest.mark.parametrize("seed", range(3))
def test_in_memory_path_agrees_with_clarabel_and_the_general_path(seed: int) -> None:
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    s = _trajectory(1, d, int(rng.integers(8, 14)), seed)[0]
    a = rng.standard_normal((d, d))
    w = a @ a.T + 0.3 * np.eye(d)
    q = float(rng.uniform(0.5, 2.0))
    problem = CovarianceProgram(s, w, q)
    ours = solve_structured(problem, tol=1e-9)
    assert "(in memory)" in " ".join(ours.stats.extra["log"]) or ours.stats.extra["log"] == []
    general = solve_structured(CovarianceProgram(_Chunked(s), w, q), tol=1e-9)
    ref = solve_cvx(problem, solver="clarabel", form="primal", tol=1e-10)
    assert ours.status == general.status == "optimal"
    assert ours.value == pytest.approx(general.value, rel=1e-8)
    assert ours.value == pytest.approx(ref.value, rel=1e-6)
    assert _max_ratio(s, ours.covariance) <= q * (1 + 1e-12)
    cert = check(problem, ours.covariance, ours.dual, tol=1e-8)
    assert cert.certified


@pytest.mark.parametrize(("d", "weighted"), [(2, False), (3, True), (6, False)])
def test_warm_started_answers_equal_cold_ones(d: int, weighted: bool) -> None:
    sets = _trajectory(8, d, 14, 10 + d)
    rng = np.random.default_rng(d)
    w = None
    if weighted:
        a = rng.standard_normal((d, d))
        w = a @ a.T + np.eye(d)
    warm: WarmStart | None = None
    newton_warm = newton_cold = 0
    for s in sets:
        problem = CovarianceProgram(s, w, 1.0)
        cold = solve_structured(problem, tol=1e-9)
        hot = solve_structured(problem, tol=1e-9, warm_start=warm)
        assert hot.status == "optimal"
        assert hot.value == pytest.approx(cold.value, rel=2e-9)
        assert _max_ratio(s, hot.covariance) <= 1.0 + 1e-12
        assert hot.stats.extra["lower"] <= cold.value * (1 + 1e-12)
        assert check(problem, hot.covariance, hot.dual, tol=1e-8).certified
        newton_warm += hot.stats.iterations
        newton_cold += cold.stats.iterations
        warm = WarmStart.from_solution(hot)
    if d > 2:
        assert newton_warm < newton_cold  # the point of a warm start (a count, not a timing)
    else:  # in the plane every restricted solve is a closed form (one step), warm or cold
        assert newton_warm <= 2 * len(sets) and newton_cold <= 2 * len(sets)


def test_warm_start_on_the_general_and_floor_paths() -> None:
    """Warm starts feed the chunked path and both floor paths too; answers equal cold ones."""
    sets = _trajectory(4, 3, 10, 3)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 3))
    w = a @ a.T + np.eye(3)
    for weight, eta in [(None, 0.0), (None, 0.05), (w, 0.05)]:
        warm: WarmStart | None = None
        for s in sets:
            problem = CovarianceProgram(_Chunked(s), weight, 1.0, eta)
            cold = solve_structured(problem, tol=1e-9)
            hot = solve_structured(problem, tol=1e-9, warm_start=warm)
            assert hot.value == pytest.approx(cold.value, rel=2e-8)
            assert np.linalg.eigvalsh(hot.covariance)[0] >= eta
            assert _max_ratio(s, hot.covariance) <= 1.0 + 1e-12
            warm = WarmStart.from_solution(hot)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), size=st.integers(0, 12))
def test_any_warm_start_gives_the_cold_answer(seed: int, size: int) -> None:
    """Garbage in the warm start (out-of-range or repeated indices, zero, negative or
    non-finite weights, parallel vectors) changes where the solver starts, never the answer."""
    rng = np.random.default_rng(seed)
    s = _trajectory(1, 3, 9, seed % 1000)[0]
    s = np.concatenate([s, 2.0 * s[:3]])  # parallel vectors
    problem = CovarianceProgram(s, None, 1.0)
    idx = rng.integers(-3, s.shape[0] + 3, size=size)
    weights = rng.choice([0.0, -1.0, np.inf, np.nan, 1.0, 0.3, 5.0], size=size)
    warm = WarmStart(idx.astype(np.intp), weights.astype(np.float64))
    cold = solve_structured(problem, tol=1e-9)
    hot = solve_structured(problem, tol=1e-9, warm_start=warm)
    assert hot.status == "optimal"
    assert hot.value == pytest.approx(cold.value, rel=2e-9)
    assert _max_ratio(s, hot.covariance) <= 1.0 + 1e-12


def test_warm_start_type_and_shape_mismatch() -> None:
    s = _trajectory(1, 2, 6, 0)[0]
    problem = CovarianceProgram(s, None, 1.0)
    with pytest.raises(InvalidTypeError, match="warm_start"):
        solve_structured(problem, warm_start=([0], [1.0]))  # type: ignore[arg-type]
    odd = WarmStart(np.array([0, 1], dtype=np.intp), np.array([1.0]))
    assert solve_structured(problem, warm_start=odd).value == pytest.approx(
        solve_structured(problem).value, rel=1e-9)


def test_blas_limits_is_reentrant_and_restores() -> None:
    from threadpoolctl import threadpool_info

    before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    with blas_limits(1):
        inside = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        with blas_limits(1):
            pass
    after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert all(n == 1 for n in inside)
    assert after == before


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_two_atoms_in_the_plane_against_a_fine_grid(seed: int) -> None:
    """The closed-form restricted optimum of two atoms in d = 2 against a grid search of
    T^2 = tr A + 2 sqrt(det A) over mu_1 = cos^2(theta), and its KKT conditions q_i = T."""
    import solvers.restricted as restricted

    rng = np.random.default_rng(seed)
    y = rng.standard_normal((2, 2)) * rng.uniform(0.1, 10.0, size=(2, 1))
    state = restricted.Restricted(atoms=y, mu=np.array([0.5, 0.5]), floor_atoms=np.zeros((2, 0)),
                                  floor_weights=np.zeros((0, 0)),
                                  floor_rotation=np.zeros((0, 0)))
    point, _ = restricted.inner_solve(state, 1e-12, 200)
    theta = np.linspace(0.0, np.pi / 2, 20001)
    m1 = np.cos(theta) ** 2
    a, b = y[0] @ y[0], y[1] @ y[1]
    c = abs(y[0, 0] * y[1, 1] - y[0, 1] * y[1, 0])
    grid_best = float(np.max(m1 * a + (1 - m1) * b + 2 * np.sqrt(m1 * (1 - m1)) * c))
    assert point.root_trace**2 >= grid_best * (1 - 1e-12)
    assert point.root_trace**2 <= grid_best * (1 + 1e-6)
    # KKT: no score above T, and T attained by every atom of non-negligible weight (nearly
    # parallel atoms leave the shorter one a weight of order 1e-10, at the boundary)
    assert np.all(point.scores / point.root_trace <= 1.0 + 1e-9)
    weighty = state.mu > 1e-6
    np.testing.assert_allclose(point.scores[weighty] / point.root_trace, 1.0, rtol=1e-9)


def _with_and_without_closed_forms(y: NDArray[np.float64], monkeypatch: pytest.MonkeyPatch,
                                   ) -> tuple[float, float, int]:
    """T of the restricted optimum of the atoms ``y`` (uniform start) with the closed forms,
    T by projected Newton alone (the closed forms switched off), and the steps of the first."""
    import solvers.restricted as restricted

    k, p = y.shape

    def state() -> restricted.Restricted:
        return restricted.Restricted(atoms=y, mu=np.full(k, 1.0 / k),
                                     floor_atoms=np.zeros((p, 0)), floor_weights=np.zeros((0, 0)),
                                     floor_rotation=np.zeros((0, 0)))

    fast, its = restricted.inner_solve(state(), 1e-12, 200)
    with monkeypatch.context() as m:
        m.setattr(restricted, "_closed_form", lambda atoms: None)
        ref, _ = restricted.inner_solve(state(), 1e-12, 200)
    return fast.root_trace, ref.root_trace, its


@pytest.mark.parametrize("p", [2, 3])
def test_all_atoms_active_closed_form_equals_newton(
        p: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly p(p+1)/2 atoms, all active: the linear-algebra optimum equals projected Newton's
    (run with the closed forms switched off) wherever it applies."""
    rng = np.random.default_rng(p)
    k = p * (p + 1) // 2
    applied = 0
    # a tight frame of k unit directions (sum u u^T = (k/p) I: 3 at 120 degrees in the plane,
    # the 6 axes of the icosahedron in space): with equal weights every atom is active, and
    # stays so under small perturbations (strict complementarity)
    if p == 2:
        ang = np.array([0.0, 2.0, 4.0]) * np.pi / 3
        frame = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    else:
        g = (1.0 + np.sqrt(5.0)) / 2
        frame = np.array([[0, 1, g], [0, 1, -g], [1, g, 0], [1, -g, 0], [g, 0, 1], [-g, 0, 1]])
        frame = frame / np.linalg.norm(frame, axis=1, keepdims=True)
    for trial in range(60):
        rot, _ = np.linalg.qr(rng.standard_normal((p, p)))
        noise = (0.02 if trial % 2 else 0.5) * rng.standard_normal((k, p))
        y = (frame @ rot.T + noise) * rng.uniform(0.1, 10.0)

        fast, ref, its = _with_and_without_closed_forms(y, monkeypatch)
        assert fast == pytest.approx(ref, rel=1e-12)
        applied += its == 1
    assert applied >= 1  # the closed form was exercised


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(3, 40))
def test_best_pair_in_the_plane_against_clarabel(seed: int, k: int) -> None:
    """d = 2, k atoms: whenever the vectorised pair enumeration claims an optimum (KKT excess
    below 1e-12), T^2 is the restricted program's optimal value min tr(Sigma) s.t.
    y^T Sigma^-1 y <= 1 as Clarabel finds it; and inner_solve (which tries it first) always
    reaches that value, through Newton when three atoms carry the optimum."""
    import solvers.restricted as restricted
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(seed)
    y = rng.standard_normal((k, 2)) * rng.uniform(0.1, 10.0, size=(k, 1))
    ref = solve_cvx(CovarianceProgram(y, None, 1.0), solver="clarabel", form="primal",
                    tol=1e-10).value
    mu, excess = restricted._best_pair_in_the_plane(y)
    assert mu is not None
    state = restricted.Restricted(atoms=y, mu=np.full(k, 1.0 / k), floor_atoms=np.zeros((2, 0)),
                                  floor_weights=np.zeros((0, 0)),
                                  floor_rotation=np.zeros((0, 0)))
    point, its = restricted.inner_solve(state, 1e-12, 200)
    assert point.root_trace**2 == pytest.approx(ref, rel=1e-7)
    if excess <= 1e-12:
        a = (y.T * mu) @ y
        t2 = float(np.trace(a) + 2.0 * np.sqrt(max(np.linalg.det(a), 0.0)))
        assert t2 == pytest.approx(ref, rel=1e-7)
        assert its == 1  # accepted by the same KKT test as Newton's, no Newton step


def test_plane_closed_forms_equal_newton(monkeypatch: pytest.MonkeyPatch) -> None:
    """d = 2: optima on two atoms (every pair at once) and on three (the closest pairs with
    their most violated atoms) in closed form, equal to projected Newton with the closed forms
    switched off; nearly every random working set is solved without a Newton step."""
    closed = 0
    for seed in range(60):
        rng = np.random.default_rng(1000 + seed)
        k = int(rng.integers(3, 60))
        y = rng.standard_normal((k, 2)) * rng.uniform(0.1, 10.0, size=(k, 1))

        fast, ref, its = _with_and_without_closed_forms(y, monkeypatch)
        assert fast == pytest.approx(ref, rel=1e-11)
        closed += its == 1
    assert closed >= 55
