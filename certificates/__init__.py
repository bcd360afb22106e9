"""Independent checks of dpopt's results, with numpy/scipy (and exact arithmetic) only.

Imports nothing from ``dpopt`` or ``solvers`` and never trusts a solver's status string.
"""

from certificates.problem import ArrayVectors, CovarianceProblem, FactoredDual, VectorSource

__all__ = ["ArrayVectors", "CovarianceProblem", "FactoredDual", "VectorSource"]
