"""Robustness of the solvers and of the default design path: scale invariance, exact trivial
cases, named errors instead of raw crashes, silent solvers, the auto policy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import AccuracyWarning, InvalidParameterError, SolverError
from certificates.problem import CovarianceProgram
from dpopt.accounting.budgets import ZCDP
from dpopt.covariance import design as design_module
from dpopt.covariance.design import design_covariance
from solvers.api import solve
from solvers.structured import solve_structured


def test_single_vector_with_floor_is_exact() -> None:
    # one vector s = (1, ..., 1), q = 2 rho = 1, eta = 1e-5: Sigma = eta I + (10 - eta) vv^T,
    # value d eta + 10 - eta = 10 + 9e-5 (closed form)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = design_covariance(np.ones((1, 10)), ZCDP(rho=0.5), noise_floor=1e-5)
    exact = 10 + 9e-5
    assert d.certified
    assert d.certificate.lower <= exact * (1 + 1e-15)
    assert d.value == pytest.approx(exact, rel=1e-8)
    assert d.solution.stats.extra.get("closed_form") == "rank one"


@pytest.mark.parametrize("factor", [1.0, 1.5, 1e3])
def test_eta_identity_optimal_is_exact(factor: float) -> None:
    rng = np.random.default_rng(3)
    s = rng.standard_normal((40, 5))
    w = np.diag([1.0, 2.0, 3.0, 4.0, 5.0])
    eta = factor * float(np.max(np.sum(s * s, axis=1)))  # q = 1: the isotropic level and above
    d = design_covariance(s, ZCDP(rho=0.5), weight=w, noise_floor=eta)
    assert d.certified
    assert d.value == pytest.approx(eta * 15.0, rel=1e-10)
    assert d.certificate.lower <= eta * 15.0 * (1 + 1e-15)


@pytest.mark.parametrize("exponent", [-95, -40, 0, 40, 95])
def test_scale_invariance(exponent: int) -> None:
    rng = np.random.default_rng(4)
    s = rng.standard_normal((60, 4))
    w = np.diag([1.0, 3.0, 0.5, 2.0])
    ref = solve_structured(CovarianceProgram(s, w, 1.0))
    c = 10.0**exponent
    sol = solve_structured(CovarianceProgram(s * c, w, 1.0))
    assert sol.status == "optimal"
    assert sol.value == pytest.approx(ref.value * c * c, rel=1e-9)
    cert = check(CovarianceProgram(s * c, w, 1.0), sol.covariance, sol.dual, tol=1e-7)
    assert cert.certified, cert.message


def test_huge_vectors_at_the_isotropic_floor() -> None:
    rng = np.random.default_rng(5)
    s = rng.standard_normal((30, 4)) * 1e20
    eta = float(np.max(np.sum(s * s, axis=1)))
    d = design_covariance(s, ZCDP(rho=0.5), noise_floor=eta)
    assert d.certified
    assert d.value == pytest.approx(4 * eta, rel=1e-10)


def test_out_of_range_scales_raise_named_errors() -> None:
    s = np.random.default_rng(6).standard_normal((30, 4))
    with pytest.raises(InvalidParameterError, match="bound"):
        design_covariance(s, ZCDP(rho=5e-301))
    with pytest.raises(InvalidParameterError, match="noise_floor"):
        design_covariance(s, ZCDP(rho=0.5), noise_floor=1e308)


def test_clarabel_dual_form_on_large_vectors_does_not_crash() -> None:
    s = np.random.default_rng(0).standard_normal((30, 4)) * 1e10
    ref = solve_structured(CovarianceProgram(s, None, 1.0))
    try:
        sol = solve(CovarianceProgram(s, None, 1.0), method="clarabel", form="dual")
    except SolverError:
        return  # a named failure is acceptable; a raw panic / IndexError is not
    assert sol.value == pytest.approx(ref.value, rel=1e-5)


def test_direction_carried_by_one_vector_joins_the_span() -> None:
    # 20,000 vectors in a 3-dim subspace, one of them with a 1e-4 component off it: the Gram
    # eigenvalue of that direction is below the relative threshold of the summed Gram matrix
    rng = np.random.default_rng(1)
    s = np.zeros((20000, 6))
    s[:, :3] = rng.standard_normal((20000, 3))
    s[5, 3] = 1e-4 * np.linalg.norm(s[5])
    problem = CovarianceProgram(s, None, 1.0)
    sol = solve_structured(problem)
    assert sol.stats.extra["rank"] == 4
    cert = check(problem, sol.covariance, sol.dual, tol=1e-7)
    assert cert.certified, cert.message


def test_solvers_are_silent_and_report_status() -> None:
    rng = np.random.default_rng(8)
    s = rng.random((200, 6)) - 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sol = solve_structured(CovarianceProgram(s, None, 1.0), max_passes=4)
    assert sol.status != "optimal"
    assert "max_passes" in sol.message


def test_design_warns_once_when_not_certified(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    s = rng.random((200, 6)) - 0.5
    real = design_module.attempts

    def few_passes(problem: CovarianceProgram, method: str, **kw: object) -> object:
        return real(problem, "structured", tol=1e-12, max_passes=4)

    monkeypatch.setattr(design_module, "attempts", few_passes)
    with pytest.warns(AccuracyWarning) as record:
        d = design_covariance(s, ZCDP(rho=0.5), tol=1e-12)
    assert len([r for r in record if issubclass(r.category, AccuracyWarning)]) == 1
    assert not d.certified


def test_auto_keeps_the_best_certified_value() -> None:
    from certificates.covariance import CovarianceCertificate

    def cert(upper: float, certified: bool) -> CovarianceCertificate:
        return CovarianceCertificate(
            lower=1.0, upper=upper, gap=0.0, primal_residual=0.0, floor_residual=0.0,
            dual_residual=0.0, complementarity=0.0, repaired_covariance=np.eye(1), scale=1.0,
            dual_value=1.0, w_min=1.0, mahalanobis_sup=1.0, attained_sup=1.0, argmax=0,
            certified=certified, rigorous=False, tol=1e-6, message="")

    better = design_module._better
    assert better(cert(80.0, False), None)
    assert better(cert(61.7, False), cert(80.0, False))  # smaller value, neither certified
    assert not better(cert(61.7, False), cert(80.0, True))  # certified beats uncertified
    assert better(cert(79.0, True), cert(80.0, True))
