"""solvers.stacked.solve_on_support: many programs on one working set at once.

References: cvxpy + Clarabel at tight tolerance on every solved program, the certificate of
``certificates.covariance.check`` and an own float recomputation of every constraint.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.problem import CovarianceProgram
from solvers.stacked import solve_on_support
from solvers.structured import solve_structured


def _stack(seed: int, n: int, d: int, m: int) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                        NDArray[np.float64]]:
    """A drifting trajectory of two-record-like sets, a random SPD W and one bound each."""
    rng = np.random.default_rng(seed)
    points = rng.random((m, d))
    i0, i1 = np.triu_indices(m, 1)
    base = points[i0] - points[i1]
    vecs = np.stack([base * (1.0 + 0.05 * np.sin(0.3 * t + np.arange(d))) for t in range(n)])
    a = rng.standard_normal((d, d))
    return vecs, a @ a.T + 0.3 * np.eye(d), rng.uniform(0.5, 2.0, size=n)


def _own_max(s: NDArray[np.float64], sigma: NDArray[np.float64]) -> float:
    z = np.linalg.solve(np.linalg.cholesky(sigma), s.T)
    return float(np.max(np.sum(z * z, axis=0)))


@pytest.mark.parametrize("seed,d", [(0, 2), (1, 3), (2, 4), (3, 6)])
def test_solved_programs_match_clarabel_and_are_certified(seed: int, d: int) -> None:
    from solvers.cvx import solve_cvx

    vecs, w, q = _stack(seed, 6, d, 9)
    first = solve_structured(CovarianceProgram(vecs[0], w, float(q[0])), tol=1e-9)
    assert first.dual is not None
    res = solve_on_support(vecs, w, q, first.dual.support, first.dual.multipliers, 1e-9)
    assert res.solved[0]  # its own support solves the program it came from
    for i in np.flatnonzero(res.solved):
        sol = res.solutions[i]
        assert sol is not None and sol.dual is not None
        prog = CovarianceProgram(vecs[i], w, float(q[i]))
        ref = solve_cvx(prog, solver="clarabel", form="primal", tol=1e-10)
        assert sol.value == pytest.approx(ref.value, rel=1e-6)
        cert = check(prog, sol.covariance, sol.dual, tol=1e-7)
        assert cert.certified
        assert cert.lower <= ref.value * (1 + 1e-7)
        assert _own_max(vecs[i], sol.covariance) <= q[i] * (1 + 1e-9)
    for i in np.flatnonzero(~res.solved):
        assert res.solutions[i] is None


def test_a_support_that_is_not_optimal_leaves_the_program_unsolved() -> None:
    """Rows of another order: the support names other vectors; nothing wrong is returned."""
    vecs, w, q = _stack(5, 3, 3, 10)
    first = solve_structured(CovarianceProgram(vecs[0], w, float(q[0])), tol=1e-9)
    assert first.dual is not None
    rng = np.random.default_rng(0)
    shuffled = np.stack([vecs[0], vecs[1][rng.permutation(vecs.shape[1])], vecs[2]])
    res = solve_on_support(shuffled, w, q, first.dual.support, first.dual.multipliers, 1e-9)
    for i in range(3):
        sol = res.solutions[i]
        if sol is None:
            continue
        assert sol.dual is not None
        cert = check(CovarianceProgram(shuffled[i], w, float(q[i])), sol.covariance, sol.dual,
                     tol=1e-7)
        assert cert.certified  # whatever is returned closes its gap


def test_too_small_a_support_solves_nothing() -> None:
    vecs, w, q = _stack(6, 2, 3, 6)
    res = solve_on_support(vecs, w, q, np.array([0, 1]), np.ones(2), 1e-9)
    assert not np.any(res.solved) and res.solutions == [None, None]
    res = solve_on_support(vecs, w, q, np.array([0, 1, 2]), np.zeros(3), 1e-9)
    assert not np.any(res.solved)


@pytest.mark.parametrize("seed,d", [(7, 2), (8, 3), (9, 5)])
def test_column_generation_on_the_stack_reaches_the_optimum(seed: int, d: int) -> None:
    """A working set that is not the optimal support (d vectors of the first program's, other
    programs of a strong drift): the stack adds each program's violated vectors until its gap
    closes, and every answer matches Clarabel."""
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(seed)
    points = rng.random((10, d))
    i0, i1 = np.triu_indices(10, 1)
    base = points[i0] - points[i1]
    vecs = np.stack([base * (1.0 + 0.6 * rng.random(d)) for _ in range(5)])
    w = np.eye(d)
    q = np.ones(5)
    first = solve_structured(CovarianceProgram(vecs[0], w, 1.0), tol=1e-9)
    assert first.dual is not None
    res = solve_on_support(vecs, w, q, first.dual.support[:d], first.dual.multipliers[:d], 1e-9)
    assert np.all(res.solved)
    for i in range(5):
        sol = res.solutions[i]
        assert sol is not None and sol.dual is not None
        assert sol.stats.extra["working_set"] > d  # vectors were added
        ref = solve_cvx(CovarianceProgram(vecs[i], w, 1.0), solver="clarabel", form="primal",
                        tol=1e-10)
        assert sol.value == pytest.approx(ref.value, rel=1e-6)
        assert check(CovarianceProgram(vecs[i], w, 1.0), sol.covariance, sol.dual,
                     tol=1e-7).certified


def test_each_program_from_its_own_support() -> None:
    """Working sets given per program (rows padded with -1): a program started on its own
    optimal support is solved and certified; one whose set holds fewer than d rows, or only
    padding, is left unsolved (nothing is returned for it)."""
    vecs, w, q = _stack(5, 5, 3, 9)
    sols = [solve_structured(CovarianceProgram(vecs[i], w, float(q[i])), tol=1e-9)
            for i in range(5)]
    width = max(s.dual.support.size for s in sols if s.dual is not None) + 2
    support = np.full((5, width), -1, dtype=np.intp)
    weights = np.zeros((5, width))
    for i, s in enumerate(sols):
        assert s.dual is not None
        k = s.dual.support.size
        support[i, 1:k + 1], weights[i, 1:k + 1] = s.dual.support, s.dual.multipliers
    support[3, 3:] = -1  # two rows: fewer than d = 3
    support[4] = -1
    res = solve_on_support(vecs, w, q, support, weights, 1e-9)
    assert res.solved.tolist() == [True, True, True, False, False]
    assert res.solutions[3] is None and res.solutions[4] is None
    for i in range(3):
        sol = res.solutions[i]
        assert sol is not None and sol.dual is not None
        prog = CovarianceProgram(vecs[i], w, float(q[i]))
        assert sol.value == pytest.approx(sols[i].value, rel=1e-8)
        assert check(prog, sol.covariance, sol.dual, tol=1e-7).certified
