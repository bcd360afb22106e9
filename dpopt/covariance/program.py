r"""The optimal-covariance program and its cvxpy views.

The covariance program (derived on the theory page, "The covariance program")

.. math::

    v_\eta(q) = \min_\Sigma \operatorname{tr}(W\Sigma)\quad\text{s.t.}\quad
    \begin{bmatrix}\Sigma & s_j\\ s_j^\top & q\end{bmatrix}\succeq 0\ (j = 1..J),\qquad
    \Sigma \succeq \eta I

is one data type, :class:`CovarianceProgram` (defined in :mod:`certificates.problem`, the lowest
layer, so that the solvers and the certificate checks read the same object). This module adds
what only the modelling layer needs: the cvxpy problems — :func:`primal_form` (natural form),
:func:`dual_form` (the conic dual with blocks :math:`Z_j`, :math:`H`) and :func:`inverse_form`
(the :math:`N = \Sigma^{-1}` form) — and the isotropic baseline.

Examples
--------
>>> import numpy as np
>>> s = np.array([[1., 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
>>> w = np.array([[2, .5, 0], [.5, 1, .2], [0, .2, .5]])
>>> prog = CovarianceProgram(s, weight=w, bound=1.0)
>>> form = primal_form(prog)
>>> _ = form.problem.solve(solver="CLARABEL")
>>> round(float(form.problem.value), 6)  # (sqrt 2 + 1 + sqrt .5)^2
9.742641
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from certificates.problem import CovarianceProgram
from solvers.cvx_forms import CvxForm, build_dual, build_inverse, build_primal

__all__ = ["CovarianceProgram", "dual_form", "inverse_form", "isotropic_baseline", "primal_form"]


def isotropic_baseline(program: CovarianceProgram) -> tuple[float, NDArray[np.float64]]:
    r"""The isotropic design :math:`cI`, :math:`c = \max(\max_j|s_j|^2/q,\ \eta)`, and its value
    :math:`c\operatorname{tr}W`. It is feasible: :math:`s^\top s/c\le q`.

    Returns
    -------
    value : float
        :math:`c \operatorname{tr} W`.
    covariance : ndarray, shape (d, d)
        :math:`c I`.
    """
    c = max(program.max_sq_norm() / program.bound, program.noise_floor)
    c = float(np.nextafter(c, np.inf))  # safe side of the rounding
    w = np.asarray(program.weight)
    return c * float(np.trace(w)), c * np.eye(program.dim)


def _data(program: CovarianceProgram) -> tuple[NDArray[np.float64], NDArray[np.float64], float,
                                                  float]:
    return (program.dense_vectors(), np.asarray(program.weight), float(program.bound),
            float(program.noise_floor))


def primal_form(program: CovarianceProgram) -> CvxForm:
    """The primal as a cvxpy problem; ``.variables["covariance"]`` is :math:`\\Sigma` and
    ``.constraints["blocks"]`` the J block constraints (their duals are the :math:`Z_j`)."""
    return build_primal(*_data(program))


def dual_form(program: CovarianceProgram) -> CvxForm:
    """The conic dual with blocks :math:`Z_j` and :math:`H` as a cvxpy problem."""
    return build_dual(*_data(program))


def inverse_form(program: CovarianceProgram) -> CvxForm:
    """The :math:`N = \\Sigma^{-1}` form as a cvxpy problem; ``.variables["precision"]`` is N."""
    return build_inverse(*_data(program))
