"""Results shared by every solver: the status vocabulary, ``SolverStats`` and ``Solution``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from certificates.problem import FactoredDual

__all__ = ["CVXPY_STATUS_MAP", "STATUSES", "Solution", "SolverStats", "Status", "map_cvxpy_status"]

Status = Literal[
    "optimal", "optimal_inaccurate", "infeasible", "unbounded", "iteration_limit", "solver_error"
]
#: The one status vocabulary; every backend maps its native codes into it (unknown -> solver_error).
STATUSES: tuple[str, ...] = (
    "optimal",
    "optimal_inaccurate",
    "infeasible",
    "unbounded",
    "iteration_limit",
    "solver_error",
)

#: cvxpy's status strings -> our vocabulary (anything else -> ``"solver_error"``).
CVXPY_STATUS_MAP: dict[str, str] = {
    "optimal": "optimal",
    "optimal_inaccurate": "optimal_inaccurate",
    "infeasible": "infeasible",
    "infeasible_inaccurate": "infeasible",
    "unbounded": "unbounded",
    "unbounded_inaccurate": "unbounded",
    "user_limit": "iteration_limit",
}


def map_cvxpy_status(status: object) -> str:
    """Map a cvxpy status string into :data:`STATUSES` (unknown codes -> ``"solver_error"``)."""
    return CVXPY_STATUS_MAP.get(str(status), "solver_error")


@dataclass(frozen=True)
class SolverStats:
    """What a solve cost: solver name and version, setup/solve seconds, iterations, passes."""

    solver: str
    version: str = ""
    setup_time: float = 0.0
    solve_time: float = 0.0
    iterations: int = 0
    passes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Solution:
    """A candidate solution of a covariance program (not trusted until ``certificates`` checks it).

    Attributes
    ----------
    covariance : ndarray, shape (d, d)
        The candidate Sigma as the solver returned it (may be slightly infeasible).
    value : float
        The solver's objective value tr(W Sigma) (or its dual value).
    dual : FactoredDual or None
        The dual certificate in factored form, when the solver produced one.
    status : str
        One of :data:`STATUSES`.
    stats : SolverStats
    raw_duals : dict
        Backend-specific dual variables (e.g. the Z_j blocks and H of the conic dual).
    message : str
        Why the status is what it is (empty when there is nothing to say). Solvers never warn;
        the public function that calls them (``dpopt.design_covariance``) does.
    """

    covariance: NDArray[np.float64]
    value: float
    dual: FactoredDual | None
    status: str
    stats: SolverStats
    raw_duals: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    @property
    def success(self) -> bool:
        return self.status in ("optimal", "optimal_inaccurate")
