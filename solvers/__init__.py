"""Solvers for dpopt's programs: conic backends via cvxpy, a structure-exploiting covariance
solver, and optimal-transport couplings. Knows nothing about privacy budgets or datasets."""

from solvers._types import STATUSES, Solution, SolverStats, Status

__all__ = ["STATUSES", "Solution", "SolverStats", "Status"]
