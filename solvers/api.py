"""One entry point for the covariance program, and the one owner of ``method="auto"``.

``method`` is ``"auto"``, ``"structured"`` (the column-generation solver of
:mod:`solvers.structured`) or the name of a cvxpy backend from
:func:`solvers.cvx.available_backends` (``"clarabel"``, ``"scs"``, ...).

Everything a caller may want to know about *how* a program is attempted lives here:

* **the attempt plan** (:func:`plan`): ``"auto"`` is the structured solver, then Clarabel as a
  second opinion (the natural form for ``J <= AUTO_MAX_COUNT`` and ``d <= AUTO_MAX_DIM``, then
  SCS; the :math:`N = \\Sigma^{-1}` form otherwise); a named method is that method alone;
* **the time budget** of the fallbacks: together they may use at most
  ``FALLBACK_TIME_FACTOR`` times the structured solve's time (but at least
  ``FALLBACK_MIN_SECONDS`` and at most ``FALLBACK_MAX_SECONDS``), passed to each backend as its
  solver time limit, and no fallback starts once the budget is spent (cvxpy's compilation
  counts against it but cannot be interrupted);
* **the tolerance**: ``tol`` is the relative gap the answer is going to be certified to; each
  method is asked for the same stricter target (:func:`method_tolerance`) so that the
  certificate's rounding and repair fit inside ``tol``, and the one table
  :data:`TOLERANCE_OPTIONS` spells that target in each method's own option names
  (:func:`native_options`; the backends of :mod:`solvers.cvx` take their options from it, as
  :func:`scipy.optimize.minimize` maps its one ``tol`` to each method's options in one place);
* **the options**: each method accepts a known set of keyword options
  (:data:`STRUCTURED_OPTIONS`, :data:`BACKEND_OPTIONS`); an unknown option, or one that does
  not apply to the chosen method (e.g. ``form`` for the structured solver), is rejected by
  name.

:func:`attempts` runs the plan lazily, one :class:`Attempt` at a time, so that a caller that
certifies each answer (``dpopt.design_covariance`` does, with
:func:`certificates.covariance.check`) stops it at the first certified one: the fallbacks then
never start. A structured answer in closed form (``stats.extra["closed_form"]``: the program is
solved exactly, e.g. :math:`\\eta I` optimal) ends the plan as well. :func:`solve` runs the plan
for callers without a certificate and stops at the first answer whose *solver* reports
``"optimal"`` (a claim, not a proof).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from certificates.errors import InvalidParameterError, InvalidTypeError, SolverError
from certificates.problem import CovarianceProgram
from solvers._types import Solution
from solvers.cvx import available_backends, solve_cvx
from solvers.cvx_forms import FORMS
from solvers.dask_passes import PassFailedError
from solvers.structured import solve_structured

__all__ = [
    "AUTO_MAX_COUNT", "AUTO_MAX_DIM", "BACKEND_OPTIONS", "FALLBACK_MAX_SECONDS",
    "FALLBACK_MIN_SECONDS", "FALLBACK_TIME_FACTOR", "STRUCTURED_OPTIONS", "TOLERANCE_OPTIONS",
    "Attempt", "Step", "attempts", "method_tolerance", "methods", "native_options", "plan",
    "solve",
]

#: A fallback uses the natural (block) form for at most this many vectors ...
AUTO_MAX_COUNT = 2000
#: ... and at most this dimension (the block form slows down quickly beyond).
AUTO_MAX_DIM = 8
#: The fallbacks of ``"auto"`` together may take this many times the structured solver's time ...
FALLBACK_TIME_FACTOR = 100.0
#: ... but at least this many seconds (below it a backend cannot even start) ...
FALLBACK_MIN_SECONDS = 0.25
#: ... and at most this many.
FALLBACK_MAX_SECONDS = 60.0

#: Keyword options of the structured solver (:func:`solvers.structured.solve_structured`).
STRUCTURED_OPTIONS = frozenset({
    "max_passes", "chunk_size", "memory_budget_bytes", "working_set", "verbose", "blas_threads",
    "executor",
})
#: Keyword options of the cvxpy backends (:func:`solvers.cvx.solve_cvx`); ``form`` is a
#: parameter of :func:`solve` itself.
BACKEND_OPTIONS = frozenset({"polish", "verbose", "time_limit"})


@dataclass(frozen=True)
class Step:
    """One step of a plan: a method and, for a cvxpy backend, its form."""

    method: str
    form: str | None = None

    @property
    def label(self) -> str:
        return self.method if self.form is None else f"{self.method} ({self.form} form)"


@dataclass(frozen=True)
class Attempt:
    """What one step of the plan produced.

    Attributes
    ----------
    step : Step
    solution : Solution or None
        The answer (not trusted), or None when the step failed.
    error : str
        Why the step failed ("" when it produced a solution).
    seconds : float
        Wall time of the step, compilation included.
    time_limit : float or None
        The solver time limit the step ran under (fallbacks of ``"auto"``).
    fallback : bool
        Whether the step is a fallback of ``"auto"`` (a second opinion after the structured
        solver).
    """

    step: Step
    solution: Solution | None
    error: str
    seconds: float
    time_limit: float | None
    fallback: bool

    @property
    def closed_form(self) -> str | None:
        """The closed form the structured solver answered with (``"eta I"``, ``"rank one"``)."""
        if self.solution is None:
            return None
        form = self.solution.stats.extra.get("closed_form")
        return str(form) if form else None

    @property
    def label(self) -> str:
        """The step's name, with the closed form when there is one."""
        form = self.closed_form
        return self.step.label + (f", closed form ({form})" if form else "")


def methods() -> list[str]:
    """Names accepted by :func:`solve` on this installation."""
    return ["auto", "structured", *available_backends()]


def _method_key(method: object) -> str:
    if not isinstance(method, str):
        raise InvalidTypeError("method", method, "a method name string")
    key = method.lower()
    if key not in ("auto", "structured") and key not in available_backends():
        raise InvalidParameterError("method", method, f"must be one of {methods()}")
    return key


def plan(problem: CovarianceProgram, method: str = "auto",
         form: str | None = None) -> tuple[Step, ...]:
    """The steps :func:`attempts` takes for ``method``.

    ``"auto"``: the structured solver; then Clarabel on the natural form and SCS for small
    programs (``J <= AUTO_MAX_COUNT``, ``d <= AUTO_MAX_DIM``), Clarabel on the
    :math:`N = \\Sigma^{-1}` form otherwise (fallbacks absent from this installation are left
    out). A backend runs on ``form`` (default ``"primal"``).
    """
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    key = _method_key(method)
    if form is not None and key in ("auto", "structured"):
        raise InvalidParameterError(
            "form", form, f"applies to the cvxpy backends only, not to method={method!r} "
            f"(the plan chooses the forms of its fallbacks); backends: {available_backends()}")
    if key == "structured":
        return (Step("structured"),)
    if key != "auto":
        if form is None:
            form = "primal"
        if form not in (*FORMS, "both"):
            raise InvalidParameterError("form", form, f"must be one of {(*FORMS, 'both')}")
        return (Step(key, form),)
    small = problem.count <= AUTO_MAX_COUNT and problem.dim <= AUTO_MAX_DIM
    wanted = ([Step("clarabel", "primal"), Step("scs", "primal")] if small
              else [Step("clarabel", "inverse")])
    have = available_backends()
    return (Step("structured"), *(s for s in wanted if s.method in have))


def method_tolerance(method: str, tol: float) -> float:
    """The solver target for a requested certified gap ``tol``: ``tol / 100`` between 1e-10 and
    1e-8, the same for every method (the one place ``tol`` is mapped; a cvxpy adapter turns the
    target into its solver's gap and feasibility options).

    The factor 100 leaves room for the certificate: the scaling of the returned matrix to
    strict feasibility and the rounding margins of the check. Asking for more than 1e-8 costs
    Newton steps without improving the certified gap, whose rounding floor is near 1e-10 for
    well-conditioned W.
    """
    _method_key(method)
    if not (isinstance(tol, float | int) and not isinstance(tol, bool)) or not 0 <= tol <= 1:
        raise InvalidParameterError("tol", tol, "must be a number in [0, 1]")
    return max(1e-10, min(1e-8, float(tol) / 100.0))


def _structured_tolerance(target: float) -> dict[str, Any]:
    """The structured solver: its certified relative gap is the target itself."""
    return {"tol": float(target)}


def _clarabel_tolerance(target: float) -> dict[str, Any]:
    """Clarabel (interior point): duality gap (absolute and relative) and feasibility
    ``min(target, 1e-8) / 100``, at most 500 iterations."""
    eps = min(float(target), 1e-8) / 100
    return {"tol_gap_abs": eps, "tol_gap_rel": eps, "tol_feas": eps, "max_iter": 500}


def _scs_tolerance(target: float) -> dict[str, Any]:
    """SCS (first order): ``eps_abs = eps_rel = min(target, 1e-7) / 100``, at most 200,000
    iterations."""
    eps = min(float(target), 1e-7) / 100
    return {"eps_abs": eps, "eps_rel": eps, "max_iters": 200_000}


#: The one table from a solver target (:func:`method_tolerance`) to each method's native
#: options. The factor 1/100 of the cvxpy backends is their own accuracy margin: a conic
#: solver's gap and feasibility tolerances are measured on its scaled internal problem, not on
#: the certified gap. A backend missing here (any other installed PSD-capable cvxpy solver)
#: runs at its defaults.
TOLERANCE_OPTIONS: dict[str, Callable[[float], dict[str, Any]]] = {
    "structured": _structured_tolerance,
    "clarabel": _clarabel_tolerance,
    "scs": _scs_tolerance,
}


def native_options(method: str, target: float) -> dict[str, Any]:
    """The options spelling the solver target ``target`` in ``method``'s own names
    (:data:`TOLERANCE_OPTIONS`; ``{}`` for a backend without an entry).

    Examples
    --------
    >>> native_options("clarabel", 1e-8)["tol_gap_rel"]
    1e-10
    """
    if not isinstance(method, str):
        raise InvalidTypeError("method", method, "a method name string")
    if not (isinstance(target, float | int) and not isinstance(target, bool)) or not (
            0 < target <= 1):
        raise InvalidParameterError("tol", target, "must be a number in (0, 1]")
    entry = TOLERANCE_OPTIONS.get(method.lower())
    return entry(float(target)) if entry is not None else {}


def _split_options(key: str, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(structured options, backend options) for method ``key``; rejects by name any option
    that is unknown or does not apply."""
    structured: dict[str, Any] = {}
    backend: dict[str, Any] = {}
    for name, value in options.items():
        in_s, in_b = name in STRUCTURED_OPTIONS, name in BACKEND_OPTIONS
        if not (in_s or in_b):
            raise InvalidParameterError(
                name, value, f"is not an option of any method (structured: "
                f"{sorted(STRUCTURED_OPTIONS)}; cvxpy backends: {sorted(BACKEND_OPTIONS)})")
        if key == "structured" and not in_s:
            raise InvalidParameterError(
                name, value, "applies to the cvxpy backends only, not to the structured solver")
        if key not in ("structured", "auto") and not in_b:
            raise InvalidParameterError(
                name, value, f"applies to the structured solver only, not to {key!r}")
        if name == "time_limit" and key == "auto":
            continue  # caps the fallback budget (see attempts)
        if in_s:
            structured[name] = value
        if in_b:
            backend[name] = value
    return structured, backend


def _run(problem: CovarianceProgram, step: Step, tol: float, options: dict[str, Any],
         time_limit: float | None, fallback: bool) -> Attempt:
    started = time.perf_counter()
    try:
        if step.method == "structured":
            native = native_options("structured", method_tolerance("structured", tol))
            sol = solve_structured(problem, **native, **options)
        else:
            if time_limit is not None:
                options = {**options, "time_limit": time_limit}
            sol = solve_cvx(problem, solver=step.method, form=step.form or "primal",
                            tol=method_tolerance(step.method, tol), **options)
    except PassFailedError:
        raise  # a distributed pass could not complete: no fallback on a partial pass
    except SolverError as exc:
        return Attempt(step, None, str(exc), time.perf_counter() - started, time_limit, fallback)
    except InvalidParameterError as exc:
        if not fallback:  # bad data or options, not a solver's failure
            raise
        return Attempt(step, None, str(exc), time.perf_counter() - started, time_limit, fallback)
    return Attempt(step, sol, "", time.perf_counter() - started, time_limit, fallback)


def attempts(problem: CovarianceProgram, method: str = "auto", form: str | None = None, *,
             tol: float = 1e-6, **options: Any) -> Iterator[Attempt]:
    """Run the plan of ``method`` lazily: one :class:`Attempt` per step.

    Parameters
    ----------
    problem : CovarianceProgram
    method : str, default "auto"
    form : str, optional
        cvxpy form of a backend method (``"primal"``, ``"dual"``, ``"inverse"``, ``"both"``);
        rejected for ``"auto"`` and ``"structured"``.
    tol : float, default 1e-6
        The relative gap the caller will certify (mapped by :func:`method_tolerance`).
    **options
        Method options (:data:`STRUCTURED_OPTIONS`, :data:`BACKEND_OPTIONS`); with ``"auto"``
        each goes to the steps it applies to, and ``time_limit`` caps the fallback budget.

    Yields
    ------
    Attempt
        The caller stops the iteration once satisfied: the remaining steps never start.
        ``"auto"`` ends by itself after a closed-form structured answer, or when the fallback
        budget is spent. A failed structured step raises only for bad input
        (``InvalidParameterError``); a failed fallback is yielded with its ``error``.
    """
    steps = plan(problem, method, form)
    key = _method_key(method)
    structured_opts, backend_opts = _split_options(key, options)
    if key != "auto":
        yield _run(problem, steps[0], tol, structured_opts if key == "structured"
                   else backend_opts, None, False)
        return
    cap = options.get("time_limit")
    if cap is not None and not (isinstance(cap, float | int) and cap > 0):
        raise InvalidParameterError("time_limit", cap, "must be a number of seconds > 0")
    first = _run(problem, steps[0], tol, structured_opts, None, False)
    yield first
    if first.closed_form is not None:
        return  # solved exactly: a second opinion cannot improve on it
    budget = min(FALLBACK_MAX_SECONDS,
                 max(FALLBACK_MIN_SECONDS, FALLBACK_TIME_FACTOR * first.seconds))
    if cap is not None:
        budget = min(budget, float(cap))
    spent = 0.0
    for step in steps[1:]:
        remaining = budget - spent
        if remaining <= 0.0:
            return
        att = _run(problem, step, tol, dict(backend_opts), remaining, True)
        spent += att.seconds
        yield att


def solve(
    problem: CovarianceProgram,
    method: str = "auto",
    form: str | None = None,
    *,
    tol: float = 1e-6,
    **options: Any,
) -> Solution:
    """Solve a covariance program.

    Parameters
    ----------
    problem : CovarianceProgram
    method : str, default "auto"
        See the module docstring and :func:`methods`.
    form : {"primal", "dual", "inverse", "both"}, optional
        cvxpy form of a backend method (default ``"primal"``); rejected for ``"structured"``
        and ``"auto"``.
    tol : float, default 1e-6
        The relative gap the answer is meant to be certified to (:func:`method_tolerance`).
    **options
        Options of the chosen method (e.g. ``max_passes`` for the structured solver,
        ``polish`` / ``verbose`` / ``time_limit`` for cvxpy); unknown or inapplicable ones raise
        :class:`~certificates.errors.InvalidParameterError`.

    Returns
    -------
    Solution
        ``"auto"``: the first answer whose solver reports ``"optimal"``, else the structured
        one (else the first answer). Not trusted: certify it with
        :func:`certificates.covariance.check`.

    Raises
    ------
    SolverError
        No step produced an answer.
    """
    first: Solution | None = None
    errors: list[str] = []
    for att in attempts(problem, method, form, tol=tol, **options):
        if att.solution is None:
            errors.append(f"{att.step.label}: {att.error}")
            continue
        if att.solution.status == "optimal":
            return att.solution
        if first is None:
            first = att.solution
    if first is None:
        raise SolverError("every solver attempt failed: " + " | ".join(errors))
    return first
