r"""The optimal-covariance program as validated data with cvxpy views (seed 002 Theorem 3).

.. math::

    v_\eta(q) = \min_\Sigma \operatorname{tr}(W\Sigma)\quad\text{s.t.}\quad
    \begin{bmatrix}\Sigma & s_j\\ s_j^\top & q\end{bmatrix}\succeq 0\ (j = 1..J),\qquad
    \Sigma \succeq \eta I

(MATH.md §6.1). :class:`CovarianceProgram` wraps the plain data
:class:`certificates.problem.CovarianceProblem` and offers the cvxpy problems (``primal``, the
paper's ``dual`` of §6.2 and the :math:`N = \Sigma^{-1}` form ``primal_inverse`` of §11.7) for
people who want the cvxpy objects, plus :meth:`~CovarianceProgram.solve` and
:meth:`~CovarianceProgram.check`.

Examples
--------
>>> import numpy as np
>>> s = np.array([[1., 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
>>> w = np.array([[2, .5, 0], [.5, 1, .2], [0, .2, .5]])
>>> prog = CovarianceProgram(s, weight=w, bound=1.0)
>>> form = prog.primal()
>>> _ = form.problem.solve(solver="CLARABEL")
>>> round(float(form.problem.value), 6)  # (sqrt 2 + 1 + sqrt .5)^2, MATH.md F1
9.742641
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.problem import CovarianceProblem, FactoredDual
from solvers._types import Solution
from solvers.api import solve
from solvers.cvx_forms import CvxForm, build_dual, build_inverse, build_primal

__all__ = ["CovarianceProgram", "isotropic_baseline"]


def isotropic_baseline(problem: CovarianceProblem) -> tuple[float, NDArray[np.float64]]:
    r"""The isotropic design :math:`cI`, :math:`c = \max(\max_j|s_j|^2/q,\ \eta)`, and its value
    :math:`c\operatorname{tr}W` (MATH.md §6: 10.5 for F1). It is feasible: :math:`s^\top s/c\le q`.
    """
    c = max(problem.max_sq_norm() / problem.bound, problem.noise_floor)
    c = float(np.nextafter(c, np.inf))  # safe side of the rounding
    w = np.asarray(problem.weight)
    return c * float(np.trace(w)), c * np.eye(problem.dim)


@dataclass(frozen=True)
class CovarianceProgram:
    """Validated data of the covariance program, with cvxpy views.

    Parameters
    ----------
    vectors : array_like, shape (J, d), or VectorSource
        Sensitivity vectors.
    weight : array_like, shape (d, d), optional
        W, symmetric positive definite (identity by default).
    bound : float
        The Mahalanobis bound q > 0 (``budget.mahalanobis_bound()``).
    noise_floor : float, default 0
        eta >= 0.
    """

    vectors: Any
    weight: Any = None
    bound: float = 1.0
    noise_floor: float = 0.0
    problem: CovarianceProblem = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        prob = CovarianceProblem(self.vectors, self.weight, self.bound, self.noise_floor)
        object.__setattr__(self, "problem", prob)
        object.__setattr__(self, "vectors", prob.vectors)
        object.__setattr__(self, "weight", prob.weight)
        object.__setattr__(self, "bound", prob.bound)
        object.__setattr__(self, "noise_floor", prob.noise_floor)

    @classmethod
    def from_problem(cls, problem: CovarianceProblem) -> CovarianceProgram:
        """Wrap an existing :class:`CovarianceProblem`."""
        return cls(problem.vectors, problem.weight, problem.bound, problem.noise_floor)

    @property
    def dim(self) -> int:
        return self.problem.dim

    @property
    def count(self) -> int:
        return self.problem.count

    def _data(self) -> tuple[NDArray[np.float64], NDArray[np.float64], float, float]:
        return (self.problem.dense_vectors(), np.asarray(self.problem.weight),
                float(self.bound), float(self.noise_floor))

    def primal(self) -> CvxForm:
        """The primal (P) as a cvxpy problem; ``.variables["covariance"]`` is Sigma."""
        return build_primal(*self._data())

    def dual(self) -> CvxForm:
        """The paper's conic dual (D) with blocks Z_j and H (MATH.md §6.2)."""
        return build_dual(*self._data())

    def primal_inverse(self) -> CvxForm:
        """The N = Sigma^{-1} form (MATH.md §11.7); ``.variables["precision"]`` is N."""
        return build_inverse(*self._data())

    def solve(self, method: str = "auto", form: str = "primal", *, tol: float = 1e-8,
              **options: Any) -> Solution:
        """Solve with :func:`solvers.api.solve` (the result is not trusted until checked)."""
        return solve(self.problem, method=method, form=form, tol=tol, **options)

    def check(self, covariance: Any, dual: FactoredDual | None, *, tol: float = 1e-6,
              rigorous: bool = False) -> CovarianceCertificate:
        """Certify a candidate with :func:`certificates.covariance.check`."""
        return check(self.problem, covariance, dual, tol=tol, rigorous=rigorous)

    def isotropic(self) -> tuple[float, NDArray[np.float64]]:
        """The isotropic baseline (value, covariance); see :func:`isotropic_baseline`."""
        return isotropic_baseline(self.problem)
