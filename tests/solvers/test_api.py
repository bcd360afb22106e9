"""solvers.api owns "auto": the plan, the fallback budget, the tol mapping, option checking."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import solvers.api as api
from certificates.covariance import check
from certificates.errors import InvalidParameterError
from certificates.problem import CovarianceProgram
from dpopt.accounting.budgets import ZCDP
from dpopt.covariance.design import Design, design_covariance
from solvers._types import Solution, SolverStats

CUBE = np.array([[1., 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
W3 = np.array([[2, .5, 0], [.5, 1, .2], [0, .2, .5]])


def test_plan_of_auto_small_and_large() -> None:
    small = api.plan(CovarianceProgram(CUBE, W3, 1.0))
    assert [s.method for s in small][:2] == ["structured", "clarabel"]
    assert small[1].form == "primal"
    rng = np.random.default_rng(0)
    large = api.plan(CovarianceProgram(rng.standard_normal((30, api.AUTO_MAX_DIM + 1)), None,
                                       1.0))
    assert [(s.method, s.form) for s in large] == [("structured", None), ("clarabel", "inverse")]
    assert api.plan(CovarianceProgram(CUBE, W3, 1.0), "structured") == (api.Step("structured"),)
    assert api.plan(CovarianceProgram(CUBE, W3, 1.0), "scs") == (api.Step("scs", "primal"),)


@pytest.mark.parametrize(("method", "options", "name"), [
    ("structured", {"form": "dual"}, "form"),
    ("auto", {"form": "inverse"}, "form"),
    ("structured", {"polish": False}, "polish"),
    ("clarabel", {"max_passes": 5}, "max_passes"),
    ("auto", {"max_pases": 5}, "max_pases"),
    ("structured", {"time_limit": 3.0}, "time_limit"),
])
def test_inapplicable_or_unknown_options_are_rejected_by_name(
        method: str, options: dict[str, Any], name: str) -> None:
    prog = CovarianceProgram(CUBE, W3, 1.0)
    with pytest.raises(InvalidParameterError, match=name):
        api.solve(prog, method, **options)


def test_one_tol_mapping_reaches_every_method(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, float] = {}
    real_structured, real_cvx = api.solve_structured, api.solve_cvx

    def spy_structured(problem: CovarianceProgram, **kw: Any) -> Solution:
        seen["structured"] = kw["tol"]
        return real_structured(problem, **kw)

    def spy_cvx(problem: CovarianceProgram, **kw: Any) -> Solution:
        seen[kw["solver"]] = kw["tol"]
        return real_cvx(problem, **kw)

    monkeypatch.setattr(api, "solve_structured", spy_structured)
    monkeypatch.setattr(api, "solve_cvx", spy_cvx)
    prog = CovarianceProgram(CUBE, W3, 1.0)
    for tol in (1e-3, 1e-7, 1e-12):
        api.solve(prog, "structured", tol=tol)
        api.solve(prog, "clarabel", tol=tol)
        want = max(1e-10, min(1e-8, tol / 100))
        assert seen == {"structured": want, "clarabel": want}
        assert api.method_tolerance("scs", tol) == want


def test_the_solvers_receive_the_native_options_of_the_one_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What Clarabel is handed is exactly the table's row for the target (no second mapping in
    the adapter), and a tol outside (0, 1] is refused naming it."""
    import cvxpy as cp

    handed: list[dict[str, Any]] = []
    real_solve = cp.Problem.solve

    def spy(self: Any, *args: Any, **kw: Any) -> Any:
        handed.append({k: v for k, v in kw.items() if k not in ("solver", "verbose")})
        return real_solve(self, *args, **kw)

    monkeypatch.setattr(cp.Problem, "solve", spy)
    prog = CovarianceProgram(CUBE, W3, 1.0)
    for tol in (1e-4, 1e-12):
        api.solve(prog, "clarabel", tol=tol)
        target = max(1e-10, min(1e-8, tol / 100))
        eps = target / 100  # Clarabel's own margin, stated in the table
        assert handed[-1] == {"tol_gap_abs": eps, "tol_gap_rel": eps, "tol_feas": eps,
                              "max_iter": 500}
        assert api.native_options("structured", target) == {"tol": target}
    assert api.native_options("some-other-backend", 1e-8) == {}
    for bad in (0.0, 2.0, float("nan"), "1e-8"):
        with pytest.raises(InvalidParameterError, match="tol"):
            api.native_options("clarabel", bad)  # type: ignore[arg-type]


def _uncertifiable(seconds: float) -> Any:
    """A structured step that answers isotropic noise (feasible, far from optimal)."""
    import time

    def fake(problem: CovarianceProgram, **kw: Any) -> Solution:
        time.sleep(seconds)
        top = float(np.max(np.sum(CUBE**2, axis=1)))
        return Solution(covariance=top * np.eye(3), value=top * float(np.trace(W3)), dual=None,
                        status="optimal", stats=SolverStats(solver="fake"))
    return fake


def test_fallbacks_run_under_a_stated_multiple_of_the_structured_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "solve_structured", _uncertifiable(0.01))
    prog = CovarianceProgram(CUBE, W3, 1.0)
    runs = list(api.attempts(prog, "auto"))
    first, rest = runs[0], runs[1:]
    assert first.step.method == "structured" and not first.fallback and rest
    budget = min(api.FALLBACK_MAX_SECONDS,
                 max(api.FALLBACK_MIN_SECONDS, api.FALLBACK_TIME_FACTOR * first.seconds))
    spent = 0.0
    for att in rest:
        assert att.fallback and att.time_limit is not None
        assert att.time_limit <= budget - spent + 1e-12
        spent += att.seconds
    # a cap given by the caller lowers the budget
    capped = list(api.attempts(prog, "auto", time_limit=0.3))
    assert all(a.time_limit is None or a.time_limit <= 0.3 for a in capped)


def test_design_certifies_and_keeps_the_fallback_when_structured_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "solve_structured", _uncertifiable(0.0))
    d = design_covariance(CUBE, ZCDP(rho=0.5), weight=W3)
    assert d.certified
    assert d.path.startswith("clarabel (primal form)")
    assert "structured (gap" in d.path and "answer from clarabel" in str(d)
    # the kept answer is the certified one, re-checked independently
    again = check(d.program, d.covariance, d.solution.dual, tol=1e-6)
    assert again.upper <= d.value * (1 + 1e-9)


def test_no_fallback_after_a_certified_structured_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(problem: CovarianceProgram, **kw: Any) -> Solution:
        raise AssertionError("a fallback started")

    monkeypatch.setattr(api, "solve_cvx", forbidden)
    d = design_covariance(CUBE, ZCDP(rho=0.5), weight=W3)
    assert d.certified and d.path == "structured"
    # eta I optimal: the plan ends after the closed form even without a certificate
    prog = CovarianceProgram(CUBE, W3, 1.0, 10.0)
    runs = list(api.attempts(prog, "auto"))
    assert len(runs) == 1 and runs[0].closed_form == "eta I"


def test_path_is_saved_and_loaded(tmp_path: Path) -> None:
    d = design_covariance(CUBE, ZCDP(rho=0.5), weight=W3, noise_floor=5.0)
    assert d.path == "structured, closed form (eta I)"
    f = tmp_path / "d.json"
    d.save(f)
    back = Design.load(f)
    assert back.path == d.path and "answer from structured, closed form" in str(back)


def test_moved_fallback_constants_warn() -> None:
    import dpopt.covariance.design as design_module

    with pytest.warns(DeprecationWarning, match="solvers.api.FALLBACK_TIME_FACTOR"):
        value = design_module.FALLBACK_TIME_FACTOR
    assert value == api.FALLBACK_TIME_FACTOR
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert api.FALLBACK_MAX_SECONDS > 0


def test_best_covariance_is_certified_with_the_strongest_dual(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two attempts: one with a good dual but a 1 % worse covariance, one with the best
    covariance and no dual. Neither certifies alone; the pair does."""
    import dpopt.covariance.design as design_module

    prog = CovarianceProgram(CUBE, W3, 1.0)
    exact = api.solve(prog, "structured")
    worse = Solution(covariance=1.01 * exact.covariance, value=1.01 * exact.value,
                     dual=exact.dual, status="optimal", stats=SolverStats(solver="a"))
    no_dual = Solution(covariance=exact.covariance, value=exact.value, dual=None,
                       status="optimal", stats=SolverStats(solver="b"))

    def fake(problem: CovarianceProgram, method: str, **kw: Any) -> Any:
        yield api.Attempt(api.Step("structured"), worse, "", 0.01, None, False)
        yield api.Attempt(api.Step("clarabel", "primal"), no_dual, "", 0.02, 1.0, True)

    monkeypatch.setattr(design_module, "attempts", fake)
    d = design_covariance(CUBE, ZCDP(rho=0.5), weight=W3)
    assert d.certified
    assert d.path.startswith("clarabel (primal form), with the dual of structured")
    assert d.value <= exact.value * (1 + 1e-9)
    again = check(d.program, d.covariance, d.solution.dual, tol=1e-6)
    assert again.certified and again.lower == pytest.approx(d.certificate.lower, rel=1e-12)
