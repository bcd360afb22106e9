"""The small in-memory path by projected Newton priced at every step
(:func:`solvers.restricted.priced_newton`): random small programs (d 2..12, J 10..2,000, W = I
and SPD W, floors inactive) against Clarabel at tight tolerance and against the column
generation it replaced; every answer certified by the independent check."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import solvers.structured as structured
from certificates.covariance import check
from certificates.problem import CovarianceProgram
from solvers._types import Solution
from solvers.cvx import solve_cvx
from solvers.restricted import priced_newton
from solvers.structured import solve_structured

FloatArray = NDArray[np.float64]


def _program(seed: int, d: int, count: int, weighted: bool) -> tuple[FloatArray, FloatArray]:
    """Two-record-like vectors (differences of random points, rescaled rows) and W."""
    rng = np.random.default_rng(seed)
    pts = rng.random((count + 1, d))
    s = (pts[1:] - pts[:-1]) * rng.uniform(0.2, 3.0, (count, 1))
    if weighted:
        a = rng.standard_normal((d, d))
        w = a @ a.T + 0.5 * np.eye(d)
    else:
        w = np.eye(d)
    return s, w


def _priced(problem: CovarianceProgram, tol: float = 1e-9) -> Solution:
    return solve_structured(problem, tol=tol)


def _column_generation(problem: CovarianceProgram, tol: float,
                       monkeypatch: pytest.MonkeyPatch) -> Solution:
    with monkeypatch.context() as m:
        m.setattr(structured, "_PRICED_NEWTON_MAX", 0)
        return solve_structured(problem, tol=tol)


def _used_priced(sol: Solution) -> bool:
    return any("priced Newton" in line for line in sol.stats.extra["log"])


def _max_ratio(s: FloatArray, sigma: FloatArray) -> float:
    z = np.linalg.solve(np.linalg.cholesky(sigma), s.T)
    return float(np.max(np.sum(z * z, axis=0)))


@pytest.mark.parametrize(("seed", "d", "count", "weighted"), [
    (0, 3, 10, False), (1, 5, 60, True), (2, 8, 150, False), (3, 10, 300, True),
    (4, 12, 200, False),
])
def test_priced_path_agrees_with_clarabel(seed: int, d: int, count: int, weighted: bool) -> None:
    s, w = _program(seed, d, count, weighted)
    q = 1.5
    problem = CovarianceProgram(s, w, q)
    ours = _priced(problem)
    assert _used_priced(ours)
    ref = solve_cvx(problem, solver="clarabel", form="inverse" if d > 5 else "primal", tol=1e-10)
    assert ours.status == "optimal"
    assert ours.value == pytest.approx(ref.value, rel=1e-6)
    # Clarabel's covariance is not below ours (ours is optimal to 1e-9 and feasible)
    assert ours.value <= ref.value * (1 + 1e-7)
    assert _max_ratio(s, ours.covariance) <= q * (1 + 1e-12)
    cert = check(problem, ours.covariance, ours.dual, tol=1e-8)
    assert cert.certified


@pytest.mark.parametrize(("seed", "d", "count", "weighted"), [
    (10, 4, 2000, False), (11, 10, 1035, False), (12, 12, 1500, True), (13, 6, 40, True),
])
def test_priced_path_agrees_with_column_generation(seed: int, d: int, count: int,
                                                   weighted: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    s, w = _program(seed, d, count, weighted)
    problem = CovarianceProgram(s, w, 1.0)
    ours = _priced(problem)
    old = _column_generation(problem, 1e-9, monkeypatch)
    assert _used_priced(ours) and not _used_priced(old)
    assert ours.value == pytest.approx(old.value, rel=2e-9)
    # both certified lower ends bound the other's value
    assert ours.stats.extra["lower"] <= old.value * (1 + 1e-12)
    assert old.stats.extra["lower"] <= ours.value * (1 + 1e-12)
    assert check(problem, ours.covariance, ours.dual, tol=1e-8).certified


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), d=st.integers(2, 12), count=st.integers(10, 400),
       weighted=st.booleans(), q=st.floats(0.1, 10.0))
def test_priced_path_property(seed: int, d: int, count: int, weighted: bool, q: float,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Over instance shapes: the answer is certified, feasible, and equals column generation's."""
    s, w = _program(seed, d, count, weighted)
    problem = CovarianceProgram(s, w, q)
    ours = _priced(problem)
    assert ours.status == "optimal"
    assert _max_ratio(s, ours.covariance) <= q * (1 + 1e-12)
    old = _column_generation(problem, 1e-9, monkeypatch)
    assert ours.value == pytest.approx(old.value, rel=2e-9)
    assert check(problem, ours.covariance, ours.dual, tol=1e-8).certified


def test_inactive_floor_equals_the_priced_design() -> None:
    """A floor below the optimum's lambda_min (the general path, eta > 0) changes nothing."""
    s, w = _program(21, 6, 300, True)
    base = _priced(CovarianceProgram(s, w, 1.0))
    assert _used_priced(base)
    eta = 0.5 * float(np.linalg.eigvalsh(base.covariance)[0])
    floored = solve_structured(CovarianceProgram(s, w, 1.0, eta), tol=1e-9)
    assert floored.value == pytest.approx(base.value, rel=2e-9)
    assert floored.stats.extra["floor_rank"] == 0


def test_kernel_stops_at_the_kkt_point_over_all_vectors() -> None:
    """priced_newton's answer is a KKT point of the whole reduced dual: q_j <= (1 + tol) T for
    every vector, q_j = T on the support (complementary slackness), recomputed here."""
    rng = np.random.default_rng(5)
    y = rng.standard_normal((500, 7))
    mu = np.zeros(500)
    mu[:30] = 1.0
    out = priced_newton(y, mu, 1e-10, 14)
    assert out is not None
    weights, point, qmax, steps = out
    assert abs(weights.sum() - 1.0) < 1e-12 and np.all(weights >= 0)
    a_mat = (y.T * weights) @ y
    ev, ve = np.linalg.eigh(a_mat)
    t = float(np.sum(np.sqrt(ev)))
    q = np.einsum("ij,ij->i", y @ ve * ev**-0.25, y @ ve * ev**-0.25)
    assert point.root_trace == pytest.approx(t, rel=1e-12)
    assert float(q.max()) == pytest.approx(qmax, rel=1e-10)
    assert q.max() <= t * (1 + 1e-9)
    on = weights > 1e-9
    np.testing.assert_allclose(q[on], t, rtol=1e-8)
    assert steps >= 1


def test_kernel_refuses_a_start_that_does_not_span() -> None:
    y = np.random.default_rng(6).standard_normal((50, 4))
    mu = np.zeros(50)
    mu[:3] = 1.0  # three vectors in dimension 4
    assert priced_newton(y, mu, 1e-9, 8) is None


@pytest.mark.parametrize(("d", "priced"), [(2, False), (3, True), (25, True), (26, False)])
def test_route_by_dimension(d: int, priced: bool) -> None:
    """The priced route serves 3 <= d <= 25 (the plane keeps its closed forms, larger d column
    generation); every route certifies the same program."""
    s, w = _program(30 + d, d, 3 * d + 5, False)
    problem = CovarianceProgram(s, w, 1.0)
    sol = _priced(problem)
    assert _used_priced(sol) == priced
    assert check(problem, sol.covariance, sol.dual, tol=1e-8).certified
