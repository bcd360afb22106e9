"""One entry point for the covariance program: ``solve(problem, method=..., form=...)``.

``method`` is ``"auto"``, ``"structured"`` (the column-generation solver of
:mod:`solvers.structured`, MATH.md §11) or the name of a cvxpy backend from
:func:`solvers.cvx.available_backends` (``"clarabel"``, ``"scs"``, ...). ``"auto"`` uses Clarabel
on the primal form for small programs (``J <= AUTO_MAX_COUNT`` and ``d <= AUTO_MAX_DIM``) and the
structured solver otherwise (falling back to Clarabel on the N = Sigma^-1 form when the structured
solver is not available).
"""

from __future__ import annotations

from typing import Any

from certificates._errors import InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProblem
from solvers._types import Solution
from solvers.cvx import available_backends, solve_cvx

__all__ = ["AUTO_MAX_COUNT", "AUTO_MAX_DIM", "methods", "solve"]

#: "auto" uses the cvxpy primal for at most this many vectors ...
AUTO_MAX_COUNT = 2000
#: ... and at most this dimension (MATH.md §11.7: the block form slows down quickly beyond).
AUTO_MAX_DIM = 8


def _structured() -> Any:
    try:
        from solvers.structured import solve_structured
    except ImportError:
        return None
    return solve_structured


def methods() -> list[str]:
    """Names accepted by :func:`solve` on this installation."""
    out = ["auto"]
    if _structured() is not None:
        out.append("structured")
    return out + available_backends()


def solve(
    problem: CovarianceProblem,
    method: str = "auto",
    form: str = "primal",
    *,
    tol: float = 1e-8,
    **options: Any,
) -> Solution:
    """Solve a covariance program.

    Parameters
    ----------
    problem : CovarianceProblem
    method : str, default "auto"
        See the module docstring and :func:`methods`.
    form : {"primal", "dual", "inverse", "both"}
        cvxpy form (ignored by the structured solver).
    tol : float
        Requested relative accuracy.
    **options
        Passed to the chosen solver (e.g. ``max_passes`` for the structured solver,
        ``polish`` / ``verbose`` for cvxpy).

    Returns
    -------
    Solution
        Not trusted: certify it with :func:`certificates.covariance.check`.
    """
    if not isinstance(problem, CovarianceProblem):
        raise InvalidTypeError("problem", problem, "a CovarianceProblem")
    if not isinstance(method, str):
        raise InvalidTypeError("method", method, "a method name string")
    key = method.lower()
    if key == "auto":
        small = problem.count <= AUTO_MAX_COUNT and problem.dim <= AUTO_MAX_DIM
        struct = _structured()
        if small or struct is None:
            return solve_cvx(problem, solver="clarabel", form=form if small else "inverse",
                             tol=tol, **options)
        return struct(problem, tol=max(tol, 1e-11), **options)  # type: ignore[no-any-return]
    if key == "structured":
        struct = _structured()
        if struct is None:
            raise InvalidParameterError("method", method, "solvers.structured is not available")
        return struct(problem, tol=max(tol, 1e-11), **options)  # type: ignore[no-any-return]
    if key in available_backends():
        return solve_cvx(problem, solver=key, form=form, tol=tol, **options)
    raise InvalidParameterError("method", method, f"must be one of {methods()}")
