"""Solvers for dpopt's programs. Knows nothing about privacy budgets or datasets.

- :func:`solve` dispatches a :class:`certificates.CovarianceProgram` to a method: ``"structured"``
  (:func:`solve_structured`, the structure-exploiting solver), a cvxpy backend (``"clarabel"``,
  ``"scs"``, any installed PSD-capable solver: :func:`available_backends`), or ``"auto"``
  (:mod:`solvers.api` owns its plan, fallback budget, tolerance mapping and option checks;
  :func:`solvers.api.attempts` runs the plan one step at a time for a caller that certifies).
- Optimal-transport couplings for Pufferfish calibration: :func:`quantile_coupling` (1-D, exact
  for convex costs), :func:`emd_coupling` (POT), :func:`lp_coupling` (cvxpy, with potentials).

Every result is a candidate until :mod:`certificates` accepts it.
"""

from solvers._types import STATUSES, Solution, SolverStats, Status

_LAZY = {
    **{n: "solvers.api" for n in ("methods", "solve")},
    **{n: "solvers.cvx" for n in ("available_backends", "get_backend", "solve_cvx")},
    **{n: "solvers.cvx_forms" for n in ("build_dual", "build_inverse", "build_primal")},
    "solve_structured": "solvers.structured",
    **{n: "solvers.transport" for n in (
        "Coupling", "bottleneck_coupling", "emd_coupling", "lp_coupling", "quantile_coupling",
    )},
}

__all__ = ["STATUSES", "Solution", "SolverStats", "Status", *sorted(_LAZY)]


def __getattr__(name: str) -> object:
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'solvers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
