"""Solver contracts: what every covariance solver and every coupling solver must do.

A contract class states the canonical cases (optima known in closed form, :mod:`tests.canonical`),
the inputs that must be refused by name, and the status vocabulary
(:data:`solvers._types.STATUSES`); each solver family subclasses it once, in the manner of
dp-accounting's accountant test base classes. A solver's output is judged by the independent
checkers (:func:`certificates.covariance.check`, :mod:`certificates.coupling`), never by its
own status.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.errors import DpoptError, InvalidParameterError
from certificates.problem import CovarianceProgram
from solvers._types import STATUSES, Solution
from solvers.api import solve
from tests.canonical import CANONICAL, F1, F3, F4_RANKDEF, CanonicalCase

_IDS = [c.name for c in CANONICAL]


class CovarianceSolverContract:
    """The contract of a covariance solver; subclasses set :attr:`method` (and options)."""

    method: str = ""
    options: ClassVar[dict[str, Any]] = {}

    def solve(self, program: Any, **kw: Any) -> Solution:
        return solve(program, method=self.method, **{**self.options, **kw})

    @pytest.mark.parametrize("case", CANONICAL, ids=_IDS)
    def test_canonical_optimum_is_certified(self, case: CanonicalCase) -> None:
        sol = self.solve(case.problem())
        assert sol.status in STATUSES and sol.dual is not None
        cert = check(case.problem(), sol.covariance, sol.dual, tol=1e-6)
        assert cert.certified, cert.message
        assert cert.lower <= case.value * (1 + 1e-9) and case.value <= cert.upper * (1 + 1e-9)
        if case.covariance is not None and np.linalg.matrix_rank(case.covariance) == 3:
            scale = float(np.max(np.abs(case.covariance)))
            np.testing.assert_allclose(cert.repaired_covariance, case.covariance, rtol=1e-4,
                                       atol=1e-6 * scale)

    def test_binding_floor(self) -> None:
        prog = CovarianceProgram(F3.vectors, F3.weight, 2.0, 0.8)  # Sigma* = 0.8 I, value 11.2
        sol = self.solve(prog)
        cert = check(prog, sol.covariance, sol.dual)
        assert cert.certified and cert.lower <= 0.8 * 14 * (1 + 1e-9) <= cert.upper * (1 + 2e-9)

    def test_status_and_stats(self) -> None:
        sol = self.solve(F1.problem())
        assert sol.status in STATUSES
        assert isinstance(sol.stats.solver, str) and sol.stats.solver
        assert np.isfinite(sol.value)

    @pytest.mark.parametrize("bad", ["program", None, np.eye(3)])
    def test_refuses_what_is_not_a_program(self, bad: object) -> None:
        with pytest.raises(DpoptError):
            self.solve(bad)

    @pytest.mark.xfail(strict=True, reason="solvers.api.solve does not validate tol yet: the "
                       "plan and tol mapping belong in solvers.api (issue 24, item 2)")
    def test_refuses_a_bad_tolerance_by_name(self) -> None:
        with pytest.raises(InvalidParameterError, match="tol"):
            self.solve(F1.problem(), tol=-1.0)


class TestStructuredContract(CovarianceSolverContract):
    method = "structured"


class TestClarabelContract(CovarianceSolverContract):
    method = "clarabel"


class TestAutoContract(CovarianceSolverContract):
    method = "auto"


# ----------------------------------------------------------------------------- transport


def _laws() -> tuple[NDArray[np.float64], ...]:
    """Two 1-D laws whose optimal plan for every strictly convex cost h(x - y) is the comonotone
    one, here the identity pairing i -> i (both supports sorted, equal masses)."""
    x = np.array([0.0, 1.0, 2.5, 4.0])
    y = np.array([0.5, 1.25, 3.0, 3.5])
    p = np.full(4, 0.25)
    return x, p, y, p.copy()


class CouplingSolverContract:
    """The contract of a coupling solver: the canonical plan, exact marginals, refusals."""

    def couple(self, x: NDArray[np.float64], p: NDArray[np.float64], y: NDArray[np.float64],
               q: NDArray[np.float64]) -> Any:
        raise NotImplementedError

    def test_canonical_plan_is_the_comonotone_one(self) -> None:
        x, p, y, q = _laws()
        c = self.couple(x, p, y, q)
        assert c.status in STATUSES
        plan = np.zeros(c.shape)
        plan[c.rows, c.cols] = c.mass
        np.testing.assert_allclose(plan, np.diag(p), atol=1e-12)

    def test_marginals_are_exact(self) -> None:
        x, p, y, q = _laws()
        c = self.couple(x, p, y, q)
        plan = np.zeros(c.shape)
        plan[c.rows, c.cols] = c.mass
        np.testing.assert_allclose(plan.sum(axis=1), p, rtol=1e-15)
        np.testing.assert_allclose(plan.sum(axis=0), q, rtol=1e-15)

    def test_refuses_a_negative_mass_by_name(self) -> None:
        x, p, y, q = _laws()
        with pytest.raises(InvalidParameterError):
            self.couple(x, -p, y, q)


class TestQuantileContract(CouplingSolverContract):
    def couple(self, x: Any, p: Any, y: Any, q: Any) -> Any:
        from solvers.transport import quantile_coupling

        return quantile_coupling(x, p, y, q)


def _log_cost(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray((x[:, None] - y[None, :]) ** 2, dtype=np.float64)


class TestEmdContract(CouplingSolverContract):
    def couple(self, x: Any, p: Any, y: Any, q: Any) -> Any:
        pytest.importorskip("ot")
        from solvers.transport import emd_coupling

        return emd_coupling(p, q, _log_cost(np.asarray(x), np.asarray(y)))


class TestLpContract(CouplingSolverContract):
    def couple(self, x: Any, p: Any, y: Any, q: Any) -> Any:
        from solvers.transport import lp_coupling

        return lp_coupling(p, q, _log_cost(np.asarray(x), np.asarray(y)))


# ----------------------------------------------------------------------------- the checker on
# solvers' output (the certificates package is tested on its own in tests/certificates)


def test_singular_optimum_from_a_solver_is_ridged_and_certified() -> None:
    from solvers.cvx import solve_cvx

    assert F4_RANKDEF.covariance is not None
    sol = solve_cvx(F4_RANKDEF.problem())
    cert = check(F4_RANKDEF.problem(), F4_RANKDEF.covariance, sol.dual)
    assert "ridged" in cert.message and cert.certified


def test_structured_duals_certify_rigorously_against_clarabel() -> None:
    from solvers.cvx import solve_cvx
    from solvers.structured import solve_structured

    for eta in (0.0, 0.5):
        prob = CovarianceProgram(F1.vectors, F1.weight, 1.0, eta)
        sol = solve_structured(prob)
        cert = check(prob, sol.covariance, sol.dual, rigorous=True)
        assert cert.certified, cert.message
        ref = solve_cvx(prob)
        assert cert.lower <= ref.value * (1 + 1e-9) and ref.value <= cert.upper * (1 + 1e-9)


def test_rigorous_check_of_a_random_instance_with_a_floor() -> None:
    from solvers.cvx import solve_cvx

    rng = np.random.default_rng(11)
    d, j = 5, 30
    a = rng.normal(size=(d, d))
    w = a @ a.T + 0.2 * np.eye(d)
    prob = CovarianceProgram(rng.normal(size=(j, d)), w, 1.3, 0.4)
    sol = solve_cvx(prob)
    fl = check(prob, sol.covariance, sol.dual)
    rg = check(prob, sol.covariance, sol.dual, rigorous=True)
    assert rg.certified and fl.certified
    assert (fl.lower - rg.lower) / fl.lower < 1e-9
    assert np.linalg.eigvalsh(rg.repaired_covariance)[0] >= 0.4
