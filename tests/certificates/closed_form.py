r"""Closed-form primal/dual pairs for the checker's tests (numpy and scipy only, no solver).

For a program whose optimum :math:`\Sigma^*` is known in closed form (the canonical cases of
:mod:`tests.canonical`, the uniform-query cube with a diagonal weight, a binding noise floor),
the factored dual follows from the stationarity condition of the Lagrangian (the KKT conditions
of the covariance program, Boyd and Vandenberghe, *Convex Optimization*, §5.5.3):

.. math::

    W = H + \sum_{j \in B} \lambda_j u_j u_j^\top,\qquad u_j = \Sigma^{*-1}s_j,\qquad
    \lambda_j \ge 0,

with :math:`B` the binding constraints (:math:`s_j^\top\Sigma^{*-1}s_j = q`) and :math:`H`
the multiplier of the floor. :math:`\lambda` solves this linear system by non-negative least
squares; the tests then hand the pair to :func:`certificates.covariance.check` exactly as a
solver's output would be.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray
from scipy.optimize import nnls

from certificates.problem import CovarianceProgram, FactoredDual
from tests.canonical import CanonicalCase

__all__ = ["cube", "floor_pair", "kkt_dual", "pair"]


def kkt_dual(program: CovarianceProgram, sigma: NDArray[np.float64],
             floor: NDArray[np.float64] | None = None) -> FactoredDual:
    """The factored dual of the optimum ``sigma`` from stationarity (see the module text).

    ``floor``: the multiplier H of the floor constraint (then ``G = H^{1/2}``); ``None``: 0.
    """
    s = program.dense_vectors()
    w = np.asarray(program.weight)
    d = w.shape[0]
    inv = np.linalg.inv(sigma)
    ratios = np.einsum("ij,jk,ik->i", s, inv, s)
    binding = np.flatnonzero(ratios >= program.bound * (1 - 1e-9))
    u = s[binding] @ inv
    h = np.zeros((d, d)) if floor is None else floor
    rows = np.triu_indices(d)
    system = np.stack([np.outer(v, v)[rows] for v in u], axis=1) if binding.size else None
    lam = (nnls(system, (w - h)[rows])[0] if system is not None else np.zeros(0))
    g = np.zeros((d, 0)) if floor is None else np.real(sla.sqrtm(floor))
    return FactoredDual(binding.astype(np.intp), lam, u, g)


def pair(case: CanonicalCase) -> tuple[NDArray[np.float64], FactoredDual]:
    """``(Sigma*, dual)`` of a canonical case with a unique, nonsingular optimum."""
    if case.covariance is None or np.linalg.matrix_rank(case.covariance) < case.covariance.shape[0]:
        raise ValueError(f"{case.name} has no nonsingular closed-form optimum")
    sigma = np.array(case.covariance, dtype=np.float64)
    return sigma, kkt_dual(case.problem(), sigma)


def cube(weights: NDArray[np.float64], bound: float) -> tuple[
        CovarianceProgram, NDArray[np.float64], float]:
    r"""The uniform-query cube :math:`\{-1, 1\}^d` with ``W = diag(weights)``: program,
    :math:`\Sigma^* = \operatorname{diag}(\sum_k\sqrt{w_k}/(q\sqrt{w_i}))` and the value
    :math:`(\sum_i\sqrt{w_i})^2/q`."""
    d = weights.shape[0]
    s = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
    root = np.sqrt(weights)
    sigma = np.diag(float(np.sum(root)) / (bound * root))
    return CovarianceProgram(s, np.diag(weights), bound), sigma, float(np.sum(root)) ** 2 / bound


def floor_pair(case: CanonicalCase, eta: float) -> tuple[
        CovarianceProgram, NDArray[np.float64], FactoredDual, float]:
    r"""A floor so high that it binds alone: :math:`\Sigma^* = \eta I` when
    :math:`\max_j |s_j|^2/\eta < q`; then every constraint is slack, :math:`H = W` and the
    value is :math:`\eta\operatorname{tr}W`."""
    prog = CovarianceProgram(case.vectors, case.weight, case.bound, eta)
    if not float(np.max(np.sum(case.vectors**2, axis=1))) / eta < case.bound:
        raise ValueError("the floor does not bind alone")
    sigma = eta * np.eye(case.weight.shape[0])
    return prog, sigma, kkt_dual(prog, sigma, floor=case.weight), eta * float(np.trace(case.weight))
