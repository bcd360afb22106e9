r"""Normalisation of the covariance program, shared by every solver.

With :math:`c` the RMS norm of the vectors and :math:`\omega = \lambda_{\max}(W)`, the program
in the caller's units is the normalised one (vectors :math:`s/c`, weight :math:`W/\omega`, bound
1, floor :math:`\eta q/c^2`) after the substitution :math:`\Sigma = (c^2/q)\,\Sigma'`; its value is
:math:`\omega (c^2/q)` times the normalised value, and a factored dual
:math:`(\lambda', u', G')` of the normalised program maps to
:math:`\lambda = \lambda'\omega c^2/q^2`, :math:`u = u' q/c`, :math:`G = \sqrt\omega\,G'` (the
dual value scales like the primal one). Solving in these units keeps every intermediate near 1,
so a solver behaves the same for norms from 1e-100 to 1e100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certificates.errors import InvalidParameterError
from certificates.problem import FactoredDual, check_norm_range

__all__ = ["Normalisation"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Normalisation:
    """The scales ``data`` (c), ``bound`` (q) and ``weight`` (omega) of one program."""

    data: float
    bound: float
    weight: float

    @classmethod
    def of(
        cls, mean_sq_norm: float, bound: float, weight: FloatArray, noise_floor: float = 0.0
    ) -> Normalisation:
        """Scales from the mean squared norm of the vectors, q and W; raises
        :class:`InvalidParameterError` (naming ``noise_floor`` or ``bound``) when the optimum or
        its certificate cannot be represented in double precision at this scale."""
        if not mean_sq_norm > 0:
            check_norm_range(0.0)  # raises: all vectors are zero, no noise is needed
        omega = float(np.linalg.eigvalsh(0.5 * weight + 0.5 * weight.T)[-1])
        trace = float(np.sum(np.diag(weight) / omega))
        if not noise_floor * omega * trace * 4.0 < 1e300:  # the value is at least eta tr(W)
            raise InvalidParameterError(
                "noise_floor", noise_floor,
                f"the cost eta tr(W) of the floor alone overflows double range (tr W = "
                f"{trace * omega:.3g}); express the query in other units",
            )
        norm = cls(float(math.sqrt(mean_sq_norm)), float(bound), omega)
        checks = (norm.covariance_scale, norm.covariance_scale * omega,
                  omega * (mean_sq_norm / bound) / bound)
        if not all(math.isfinite(x) and 1e-300 < x < 1e300 for x in checks):
            raise InvalidParameterError(
                "bound", bound,
                f"with vectors of RMS norm {norm.data:.3g} and |W| = {omega:.3g} the optimal "
                "covariance or its dual certificate leaves double range; express the query in "
                "other units",
            )
        return norm

    @property
    def covariance_scale(self) -> float:
        """Sigma = covariance_scale * Sigma' (= c^2 / q)."""
        return self.data * self.data / self.bound

    @property
    def value_scale(self) -> float:
        """tr(W Sigma) = value_scale * tr(W' Sigma') (= omega c^2 / q)."""
        return self.weight * self.covariance_scale

    def dual(self, dual: FactoredDual) -> FactoredDual:
        """The factored dual of the normalised program in the caller's units."""
        return self.dual_of(dual.support, dual.multipliers, dual.directions, dual.floor_factor)

    def dual_of(self, support: NDArray[np.intp], multipliers: FloatArray,
                directions: FloatArray, floor_factor: FloatArray) -> FactoredDual:
        r"""The factored dual in the caller's units from the parts of the normalised one
        (:math:`\lambda = \omega (c/q)^2 \lambda'`, :math:`u = u' q / c`,
        :math:`G = \sqrt\omega\, G'`): one :class:`FactoredDual`, validated once, in the
        units it is returned in."""
        ratio = self.data / self.bound
        return FactoredDual(
            support=support,
            multipliers=multipliers * (self.weight * ratio * ratio),
            directions=directions / ratio,
            floor_factor=floor_factor * math.sqrt(self.weight),
        )
