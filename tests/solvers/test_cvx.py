"""cvxpy backends: canonical optima on every installed backend and form, random instances."""

from __future__ import annotations

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import InvalidParameterError, SolverError
from certificates.problem import CovarianceProgram
from solvers._types import STATUSES
from solvers.cvx import available_backends, get_backend, solve_cvx
from solvers.cvx_forms import build_inverse, build_primal
from solvers.reductions import SpanReduction
from tests.canonical import F1, F4_RANKDEF, CanonicalCase

BACKENDS = available_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["primal", "dual", "inverse"])
def test_canonical_value(canonical_case: CanonicalCase, backend: str, form: str) -> None:
    sol = solve_cvx(canonical_case.problem(), solver=backend, form=form)
    assert sol.status in STATUSES and sol.success
    assert sol.value == pytest.approx(canonical_case.value, rel=1e-6)
    assert sol.stats.solver == backend
    cert = check(canonical_case.problem(), sol.covariance, sol.dual)
    # the certified interval always contains the known optimum
    assert cert.lower <= canonical_case.value * (1 + 1e-12)
    assert cert.upper >= canonical_case.value * (1 - 1e-12)
    assert cert.certified, cert.message
    assert cert.gap < 1e-8


@pytest.mark.parametrize("backend", BACKENDS)
def test_canonical_covariance_scs_tight(canonical_case: CanonicalCase, backend: str) -> None:
    sol = solve_cvx(canonical_case.problem(), solver=backend, form="primal")
    # F1 has a flat optimal face in Sigma for interior-point accuracy: compare loosely
    assert canonical_case.covariance is not None
    assert np.allclose(sol.covariance, canonical_case.covariance, atol=2e-3)


def test_polish_off_still_valid() -> None:
    """Without polishing the solver's own duals give a valid (looser) interval."""
    for form in ("primal", "dual", "inverse"):
        sol = solve_cvx(F1.problem(), form=form, polish=False)
        cert = check(F1.problem(), sol.covariance, sol.dual)
        assert cert.lower <= F1.value <= cert.upper
        assert cert.gap < 1e-3


def test_both_forms_agree() -> None:
    sol = solve_cvx(F1.problem(), form="both")
    assert sol.stats.extra["primal_value"] == pytest.approx(F1.value, rel=1e-8)
    assert sol.stats.extra["dual_value"] == pytest.approx(F1.value, rel=1e-8)


def _random(seed: int, eta: float) -> CovarianceProgram:
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 7))
    j = int(rng.integers(5, 41))
    a = rng.normal(size=(d, d))
    w = a @ a.T + 0.2 * np.eye(d)
    s = rng.normal(size=(j, d))
    return CovarianceProgram(s, w, float(rng.uniform(0.3, 3.0)), eta)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("eta", [0.0, 0.3])
def test_random_primal_equals_dual(seed: int, eta: float) -> None:
    prob = _random(seed, eta)
    p = solve_cvx(prob, form="primal")
    dd = solve_cvx(prob, form="dual")
    inv = solve_cvx(prob, form="inverse")
    assert p.value == pytest.approx(dd.value, rel=1e-6)
    assert p.value == pytest.approx(inv.value, rel=1e-6)
    assert dd.stats.extra["objective"] == pytest.approx(p.value, rel=1e-6)
    for sol in (p, dd, inv):
        cert = check(prob, sol.covariance, sol.dual)
        assert cert.certified, cert.message
        assert cert.gap < 1e-7
        assert abs(cert.complementarity) < 1e-6  # the duality gap ~ 0 at the optimum


def test_rank_deficient_with_floor() -> None:
    """eta > 0 on a rank-deficient set: solved in full space; the floor binds off the span."""
    prob = CovarianceProgram(F4_RANKDEF.vectors, F4_RANKDEF.weight, 2.0, 0.1)
    p = solve_cvx(prob, form="primal")
    dd = solve_cvx(prob, form="dual")
    assert p.value == pytest.approx(dd.value, rel=1e-6)
    assert p.value > F4_RANKDEF.value
    cert = check(prob, p.covariance, p.dual)
    assert cert.certified, cert.message
    assert np.linalg.eigvalsh(cert.repaired_covariance)[0] >= 0.1


def test_span_reduction() -> None:
    red = SpanReduction.of_vectors(F4_RANKDEF.vectors)
    assert red.rank == 2 and red.deficient
    assert np.allclose(red.basis.T @ red.complement, 0)


def test_builders_expose_handles() -> None:
    form = build_primal(F1.vectors, F1.weight, 1.0, 0.0)
    assert len(form.constraints["blocks"]) == 4 and form.constraints["floor"] is None
    form = build_inverse(F1.vectors, F1.weight, 1.0, 0.5)
    assert form.constraints["cap"] is not None


def test_status_map_unknown() -> None:
    b = get_backend("clarabel")
    assert b.map_status("optimal") == "optimal"
    assert b.map_status("weird") == "solver_error"
    assert b.map_status("user_limit") == "iteration_limit"


def test_bad_solver_and_form() -> None:
    with pytest.raises(InvalidParameterError):
        get_backend("nope")
    with pytest.raises(InvalidParameterError):
        solve_cvx(F1.problem(), form="bogus")


def test_solver_failure_raises() -> None:
    """An iteration cap of 1 leaves no usable values or a failure: must not pass silently."""
    b = get_backend("scs")

    class OneIter(type(b)):  # type: ignore[misc]
        def options(self, tol: float) -> dict[str, object]:
            return {"max_iters": 1}

    from solvers import cvx as mod

    old = mod.BACKENDS["scs"]
    mod.BACKENDS["scs"] = OneIter
    try:
        try:
            sol = solve_cvx(F1.problem(), solver="scs")
        except SolverError:
            return
        cert = check(F1.problem(), sol.covariance, sol.dual)
        assert sol.status != "optimal" or not cert.certified
    finally:
        mod.BACKENDS["scs"] = old
