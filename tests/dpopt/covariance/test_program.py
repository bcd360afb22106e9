"""dpopt.covariance.program: cvxpy views of the covariance program and the solver dispatcher."""

from __future__ import annotations

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import InvalidParameterError, InvalidTypeError
from dpopt.covariance.program import (
    CovarianceProgram,
    dual_form,
    inverse_form,
    isotropic_baseline,
    primal_form,
)
from solvers.api import methods, solve
from tests.canonical import F1, F3, F4_RANKDEF


@pytest.fixture(scope="module")
def prog() -> CovarianceProgram:
    return CovarianceProgram(F1.vectors, weight=F1.weight, bound=1.0)


def test_cvxpy_views_reach_the_optimum(prog: CovarianceProgram) -> None:
    for view in (primal_form(prog), dual_form(prog), inverse_form(prog)):
        view.problem.solve(solver="CLARABEL")
        assert view.problem.value == pytest.approx(F1.value, rel=1e-6)
    primal = primal_form(prog)
    primal.problem.solve(solver="CLARABEL")
    sigma = primal.variables["covariance"].value
    assert F1.covariance is not None
    assert np.allclose(np.asarray(sigma), F1.covariance, atol=1e-3)
    # the J block constraints' duals are the conic Z_j blocks (PSD, (d+1) x (d+1))
    z = primal.constraints["blocks"][0].dual_value
    assert z.shape == (4, 4) and np.linalg.eigvalsh(z)[0] > -1e-7


def test_floor_views() -> None:
    prog = CovarianceProgram(F3.vectors, weight=F3.weight, bound=2.0, noise_floor=0.8)
    for view in (primal_form(prog), dual_form(prog), inverse_form(prog)):
        view.problem.solve(solver="CLARABEL")
        assert view.problem.value == pytest.approx(0.8 * 14, rel=1e-6)


def test_solve_and_check(prog: CovarianceProgram) -> None:
    sol = solve(prog)
    cert = check(prog, sol.covariance, sol.dual)
    assert cert.certified and cert.lower <= F1.value <= cert.upper


def test_dispatcher_methods() -> None:
    names = methods()
    assert names[0] == "auto" and "clarabel" in names
    for m in names:
        sol = solve(F4_RANKDEF.problem(), method=m)
        assert sol.value == pytest.approx(F4_RANKDEF.value, rel=1e-5), m
    with pytest.raises(InvalidParameterError):
        solve(F1.problem(), method="magic")
    with pytest.raises(InvalidTypeError):
        solve(F1.vectors, method="auto")  # type: ignore[arg-type]


def test_isotropic_baseline() -> None:
    value, cov = isotropic_baseline(F1.problem())
    assert value == pytest.approx(10.5, rel=1e-12)  # F1 isotropic baseline c tr W
    assert value >= 10.5 and np.allclose(cov, 3.0 * np.eye(3))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"weight": np.array([[1.0, 2.0, 0], [0, 1, 0], [0, 0, 1]])}, "weight"),
        ({"weight": -np.eye(3)}, "weight"),
        ({"weight": np.eye(2)}, "weight"),
        ({"bound": 0.0}, "bound"),
        ({"bound": float("nan")}, "bound"),
        ({"noise_floor": -1.0}, "noise_floor"),
    ],
)
def test_bad_input(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        CovarianceProgram(F1.vectors, **kwargs)  # type: ignore[arg-type]


def test_bad_vectors() -> None:
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(np.array([[np.nan, 1.0]]))
    with pytest.raises(InvalidParameterError):
        CovarianceProgram(np.ones((2, 2, 2)))
