"""Deprecated: the program type is :class:`certificates.problem.CovarianceProgram` (re-exported
as ``dpopt.CovarianceProgram``), its cvxpy forms are :mod:`dpopt.covariance.program`, and a
program is solved with :func:`solvers.api.solve` and checked with
:func:`certificates.covariance.check`. This alias goes in dpopt 0.6.

The :class:`CovarianceProgram` here is the new program type with the earlier methods
(``solve``, ``check``, ``isotropic``, ``primal``, ``dual``, ``primal_inverse`` and the
``problem`` attribute), each a thin call of its new home that warns ``DeprecationWarning``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates._deprecated import warn_module, warn_moved

warn_module(__name__, "dpopt.covariance.program", __file__)

from certificates.problem import CovarianceProgram as _Program  # noqa: E402
from dpopt.covariance.program import isotropic_baseline  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from certificates.covariance import CovarianceCertificate
    from certificates.problem import FactoredDual
    from solvers._types import Solution
    from solvers.cvx_forms import CvxForm

__all__ = ["CovarianceProgram", "isotropic_baseline"]


class CovarianceProgram(_Program):
    """Deprecated: :class:`certificates.problem.CovarianceProgram` with its earlier methods."""

    @property
    def problem(self) -> _Program:
        """Deprecated: the program is its own data now."""
        warn_moved("CovarianceProgram.problem", "the program itself")
        return self

    def solve(self, method: str = "auto", form: str = "primal", *, tol: float = 1e-8,
              **options: object) -> Solution:
        """Deprecated: :func:`solvers.api.solve` ``(program, method=..., form=..., tol=...)``."""
        from solvers.api import solve

        warn_moved("CovarianceProgram.solve", "solvers.api.solve(program, ...)")
        return solve(self, method=method, form=form, tol=tol, **options)

    def check(self, covariance: ArrayLike, dual: FactoredDual | None, *, tol: float = 1e-6,
              rigorous: bool = False) -> CovarianceCertificate:
        """Deprecated: :func:`certificates.covariance.check` ``(program, covariance, dual)``."""
        from certificates.covariance import check

        warn_moved("CovarianceProgram.check", "certificates.covariance.check(program, ...)")
        return check(self, covariance, dual, tol=tol, rigorous=rigorous)

    def isotropic(self) -> tuple[float, NDArray[np.float64]]:
        """Deprecated: :func:`dpopt.covariance.program.isotropic_baseline` ``(program)``."""
        warn_moved("CovarianceProgram.isotropic",
                   "dpopt.covariance.program.isotropic_baseline(program)")
        return isotropic_baseline(self)

    def primal(self) -> CvxForm:
        """Deprecated: :func:`dpopt.covariance.program.primal_form` ``(program)``."""
        from dpopt.covariance.program import primal_form

        warn_moved("CovarianceProgram.primal", "dpopt.covariance.program.primal_form(program)")
        return primal_form(self)

    def dual(self) -> CvxForm:
        """Deprecated: :func:`dpopt.covariance.program.dual_form` ``(program)``."""
        from dpopt.covariance.program import dual_form

        warn_moved("CovarianceProgram.dual", "dpopt.covariance.program.dual_form(program)")
        return dual_form(self)

    def primal_inverse(self) -> CvxForm:
        """Deprecated: :func:`dpopt.covariance.program.inverse_form` ``(program)``."""
        from dpopt.covariance.program import inverse_form

        warn_moved("CovarianceProgram.primal_inverse",
                   "dpopt.covariance.program.inverse_form(program)")
        return inverse_form(self)
