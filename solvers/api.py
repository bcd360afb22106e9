"""One entry point for the covariance program: ``solve(problem, method=..., form=...)``.

``method`` is ``"auto"``, ``"structured"`` (the column-generation solver of
:mod:`solvers.structured`) or the name of a cvxpy backend from
:func:`solvers.cvx.available_backends` (``"clarabel"``, ``"scs"``, ...).

``"auto"`` is the structured solver: on the benchmark instances it is 30-1000x faster than
Clarabel at every size and certifies gaps below 1e-8 (``make bench``). Callers that want a second
opinion (``dpopt.design_covariance`` does when a certificate does not close) use Clarabel on the
natural form for small programs (``J <= AUTO_MAX_COUNT`` and ``d <= AUTO_MAX_DIM``) and on the
N = Sigma^-1 form otherwise.
"""

from __future__ import annotations

from typing import Any

from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProgram
from solvers._types import Solution
from solvers.cvx import available_backends, solve_cvx
from solvers.structured import solve_structured

__all__ = ["AUTO_MAX_COUNT", "AUTO_MAX_DIM", "methods", "solve"]

#: A generic fallback uses the natural (block) form for at most this many vectors ...
AUTO_MAX_COUNT = 2000
#: ... and at most this dimension (the theory page: the block form slows down quickly beyond).
AUTO_MAX_DIM = 8


def methods() -> list[str]:
    """Names accepted by :func:`solve` on this installation."""
    return ["auto", "structured", *available_backends()]


def solve(
    problem: CovarianceProgram,
    method: str = "auto",
    form: str = "primal",
    *,
    tol: float = 1e-8,
    **options: Any,
) -> Solution:
    """Solve a covariance program.

    Parameters
    ----------
    problem : CovarianceProgram
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
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    if not isinstance(method, str):
        raise InvalidTypeError("method", method, "a method name string")
    key = method.lower()
    if key in ("auto", "structured"):
        return solve_structured(problem, tol=max(tol, 1e-11), **options)
    if key in available_backends():
        return solve_cvx(problem, solver=key, form=form, tol=tol, **options)
    raise InvalidParameterError("method", method, f"must be one of {methods()}")
