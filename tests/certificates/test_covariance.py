"""certificates.covariance.check: intervals, repair, rejections, extended-precision feasibility.

The candidates are closed-form optima with their stationarity duals
(:mod:`tests.certificates.closed_form`): the checker is tested on its own, no solver involved
(its use on solvers' output is tested in ``tests/solvers``).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProgram, FactoredDual
from tests.canonical import F1, F2, F3, CanonicalCase, ChunkedArray
from tests.certificates.closed_form import cube, floor_pair, pair


class _Pair:
    def __init__(self, case: CanonicalCase) -> None:
        self.covariance, self.dual = pair(case)


@pytest.fixture(scope="module")
def f1_solution() -> _Pair:
    return _Pair(F1)


def _mp_strictly_feasible(prob: CovarianceProgram, sigma: NDArray[np.float64]) -> bool:
    """Re-check s_j^T Sigma^{-1} s_j < q and Sigma - eta I > 0 at 50 digits (mpmath)."""
    with mpmath.workdps(50):
        d = sigma.shape[0]
        m = mpmath.matrix([[mpmath.mpf(float(x)) for x in row] for row in sigma])
        shifted = m - mpmath.mpf(float(prob.noise_floor)) * mpmath.eye(d)
        if min(mpmath.eigsy(shifted)[0]) <= 0:
            return False
        q = mpmath.mpf(float(prob.bound))
        for s in prob.dense_vectors():
            v = mpmath.matrix([mpmath.mpf(float(x)) for x in s])
            if (v.T * mpmath.lu_solve(m, v))[0] >= q:
                return False
    return True


def test_interval_contains_optimum(f1_solution) -> None:  # type: ignore[no-untyped-def]
    cert = check(F1.problem(), f1_solution.covariance, f1_solution.dual)
    assert cert.certified
    assert cert.lower <= F1.value <= cert.upper
    assert cert.gap < 1e-6
    assert abs(cert.complementarity) < 1e-7
    assert _mp_strictly_feasible(F1.problem(), cert.repaired_covariance)
    assert "certified" in str(cert)


def test_scaled_down_sigma_is_flagged_and_repaired(f1_solution) -> None:  # type: ignore[no-untyped-def]
    sigma = 0.99 * f1_solution.covariance
    cert = check(F1.problem(), sigma, f1_solution.dual)
    assert cert.primal_residual == pytest.approx(1 / 0.99 - 1, rel=1e-4)
    assert cert.scale == pytest.approx(1 / 0.99, rel=1e-4)
    assert _mp_strictly_feasible(F1.problem(), cert.repaired_covariance)
    assert not _mp_strictly_feasible(F1.problem(), sigma)
    assert cert.upper >= F1.value


def test_scaled_up_sigma_not_certified(f1_solution) -> None:  # type: ignore[no-untyped-def]
    cert = check(F1.problem(), 1.01 * f1_solution.covariance, f1_solution.dual)
    assert not cert.certified
    assert cert.primal_residual < 0
    assert cert.gap == pytest.approx(0.01, rel=1e-2)


@pytest.mark.parametrize("which", ["multiplier", "direction", "support"])
def test_perturbed_dual_not_certified(f1_solution, which: str) -> None:  # type: ignore[no-untyped-def]
    dual: FactoredDual = f1_solution.dual
    lam, u, sup = dual.multipliers.copy(), dual.directions.copy(), dual.support.copy()
    if which == "multiplier":
        lam[0] *= 1.05
    elif which == "direction":
        u[0, 1] += 0.05
    else:
        sup = (sup + 1) % F1.vectors.shape[0]
    bad = FactoredDual(sup, lam, u, dual.floor_factor)
    cert = check(F1.problem(), f1_solution.covariance, bad)
    assert not cert.certified
    assert cert.lower <= F1.value  # still a valid lower bound, only weaker


def test_singular_sigma_is_ridged() -> None:
    """A singular candidate (F2's optimum with one direction removed) is ridged, not rejected,
    and the result is strictly feasible."""
    sigma = np.diag([0.5, 0.5, 0.0])
    _, dual = pair(F2)
    cert = check(F2.problem(), sigma, dual)
    assert "ridged" in cert.message
    assert np.isfinite(cert.upper) and cert.lower <= F2.value <= cert.upper
    assert _mp_strictly_feasible(F2.problem(), cert.repaired_covariance)


def test_floor_repair() -> None:
    prob, sigma, dual, value = floor_pair(F3, 0.8)  # floor binds: Sigma* = 0.8 I
    assert value == pytest.approx(0.8 * 14, rel=1e-15)
    cert = check(prob, np.diag([0.8, 0.79, 0.8]), dual)
    assert cert.floor_residual == pytest.approx(-0.01)
    assert np.linalg.eigvalsh(cert.repaired_covariance)[0] >= 0.8
    assert _mp_strictly_feasible(prob, cert.repaired_covariance)
    good = check(prob, sigma, dual)
    assert good.certified and good.lower <= value <= good.upper


def test_vector_source_matches_array(f1_solution: _Pair) -> None:
    rng = np.random.default_rng(5)
    extra = rng.normal(size=(13, 3))  # slack vectors beside the binding cube
    extra *= 0.5 / np.max(np.linalg.norm(extra, axis=1))
    s = np.concatenate([F1.vectors, extra])
    prob_a = CovarianceProgram(s, F1.weight, 1.0)
    prob_c = CovarianceProgram(ChunkedArray(s), F1.weight, 1.0)
    sol = f1_solution
    ca = check(prob_a, sol.covariance, sol.dual)
    cc = check(prob_c, sol.covariance, sol.dual)
    assert ca.upper == cc.upper and ca.lower == cc.lower
    # the violated vector is found wherever it sits
    s2 = s.copy()
    ratios = [v @ np.linalg.solve(sol.covariance, v) for v in s]
    s2[-1] = 1.5 * s[int(np.argmax(ratios))]
    cbad = check(CovarianceProgram(ChunkedArray(s2), F1.weight, 1.0), sol.covariance, sol.dual)
    assert cbad.primal_residual == pytest.approx(1.25, rel=1e-5)


def test_bad_input(f1_solution) -> None:  # type: ignore[no-untyped-def]
    prob = F1.problem()
    with pytest.raises(InvalidParameterError):
        check(prob, np.eye(2), f1_solution.dual)
    with pytest.raises(InvalidParameterError):
        check(prob, np.full((3, 3), np.nan), f1_solution.dual)
    with pytest.raises(InvalidParameterError):
        check(prob, np.array([[1.0, 2, 0], [0, 1, 0], [0, 0, 1]]), f1_solution.dual)
    with pytest.raises(InvalidTypeError):
        check(prob, f1_solution.covariance, "dual")  # type: ignore[arg-type]
    bad = FactoredDual(np.array([7]), np.array([1.0]), np.ones((1, 3)), np.zeros((3, 0)))
    with pytest.raises(InvalidParameterError):
        check(prob, f1_solution.covariance, bad)
    with pytest.raises(InvalidParameterError):
        check(prob, f1_solution.covariance, f1_solution.dual, tol=-1.0)
    with pytest.raises(InvalidTypeError):
        check("problem", f1_solution.covariance, f1_solution.dual)  # type: ignore[arg-type]


def test_bad_problem_input() -> None:
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(F1.vectors, np.array([[1.0, 2], [0, 1]]), 1.0)  # non-symmetric... shape
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(F1.vectors, -np.eye(3), 1.0)
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(np.array([[np.nan, 1, 1]]), np.eye(3), 1.0)
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(F1.vectors, np.eye(3), 0.0)
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(F1.vectors, np.eye(3), 1.0, -0.1)


@settings(max_examples=15, deadline=None)
@given(c=st.floats(0.3, 3.0), seed=st.integers(0, 10))
def test_any_scaling_gives_valid_interval(c: float, seed: int) -> None:
    """Whatever Sigma (a scaled optimum with noise), [lower, upper] contains the optimum and
    the repaired Sigma is feasible; upper is nondecreasing in c beyond 1."""
    rng = np.random.default_rng(seed)
    sigma = c * F1.covariance  # type: ignore[operator]
    sigma = sigma + 0.05 * np.diag(rng.uniform(0, 1, 3))
    cert = check(F1.problem(), sigma, pair(F1)[1])
    assert cert.lower <= F1.value * (1 + 1e-12) <= cert.upper * (1 + 1e-12)
    r = max(s @ np.linalg.solve(cert.repaired_covariance, s) for s in F1.vectors)
    assert r < F1.bound


def test_cube_closed_form() -> None:
    """Diagonal W, cube sensitivity set: v = (sum_i sqrt W_ii)^2 / q, float and rigorous."""
    from tests.certificates.closed_form import kkt_dual

    prob, sigma, exact = cube(np.array([0.5, 2.0, 3.0, 1.2]), 1.7)
    dual = kkt_dual(prob, sigma)
    for rigorous in (False, True):
        cert = check(prob, sigma, dual, rigorous=rigorous)
        assert cert.certified and cert.lower <= exact <= cert.upper
    # a dual with one multiplier halved still bounds the optimum from below, but loosely
    weak = type(dual)(dual.support, dual.multipliers * np.where(np.arange(dual.support.size) == 0,
                                                                0.5, 1.0),
                      dual.directions, dual.floor_factor)
    loose = check(prob, sigma, weak)
    assert loose.lower <= exact and not loose.certified
