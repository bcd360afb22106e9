r"""The noise floor eliminated exactly when the weight is the identity.

With :math:`W = I` (normalised units, :math:`q = 1`) the reduced dual of
:math:`\min\operatorname{tr}\Sigma` s.t. :math:`s_j^\top\Sigma^{-1}s_j \le 1`,
:math:`\Sigma \succeq \eta I` maximises :math:`2\operatorname{tr}(M + \eta P)^{1/2} - \sum_j\mu_j
- \operatorname{tr}P` over :math:`\mu \ge 0`, :math:`P \succeq 0`, with
:math:`M = \sum_j\mu_js_js_j^\top`. For fixed :math:`\mu` the best :math:`P` is diagonal in the
eigenbasis of :math:`M` (Lidskii: :math:`\lambda^\uparrow(M) + \lambda^\downarrow(P)` is
majorised by :math:`\lambda(M + P)`, and :math:`\sum\sqrt{\cdot}` is Schur-concave) and
water-fills the eigenvalues below :math:`\eta^2`: :math:`p_i = (\eta^2 - m_i)_+/\eta`. What is
left is a concave spectral function of :math:`\mu` alone,

.. math::

    g(\mu) = \sum_i \varphi(m_i) - \sum_j \mu_j,\qquad
    \varphi(m) = \begin{cases} 2\sqrt m & m \ge \eta^2\\ \eta + m/\eta & m < \eta^2\end{cases}

(:math:`\varphi` is concave and :math:`C^1`), with no PSD block and no barrier. For every
:math:`\mu \ge 0`: :math:`g(\mu)` is a lower bound on the optimum (weak duality), and
:math:`\Sigma_\mu = V\operatorname{diag}(\max(\sqrt{m_i}, \eta))V^\top \succeq \eta I` has
:math:`s_j^\top\Sigma_\mu^{-1}s_j = q_j = \partial g/\partial\mu_j + 1`, so
:math:`\max(1, \max_j q_j)\,\Sigma_\mu` is feasible and :math:`\max(1, r)\operatorname{tr}
\Sigma_\mu / g(\mu) - 1` is a certified relative gap. The dual certificate is explicit:
:math:`\lambda_j = \mu_j`, :math:`u_j = \Sigma_\mu^{-1}s_j`, and
:math:`H = V\operatorname{diag}((1 - m_i/\eta^2)_+)V^\top` (so
:math:`W - H - \sum_j\lambda_ju_ju_j^\top = 0`). This is the clamped eigenspace of the optimal
covariance eliminated in closed form (the covariance program of the theory page, with the
noise floor as the ball of radius :math:`\sqrt{q\eta}` added to the
sensitivity set).

:func:`floored_solve` maximises :math:`g` over a working set by projected Newton (Bertsekas),
with the Daleckii–Krein Hessian of the spectral function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from solvers.restricted import (
    _DIRECT_FLOPS,
    _cho,
    _cho_solve,
    _syrk,
    _triu,
    newton_cg_kernel,
    step_accepted,
)

__all__ = ["FlooredPoint", "floored_evaluate", "floored_solve", "restricted_gap"]

FloatArray = NDArray[np.float64]


@dataclass
class FlooredPoint:
    """The spectral data of :math:`M(\\mu)` and the bounds it carries."""

    mu: FloatArray  # weights (unnormalised)
    eigvals: FloatArray  # m_i, ascending
    eigvecs: FloatArray  # V
    lower: float  # g(mu)
    trace_sigma: float  # tr Sigma_mu = sum max(sqrt m_i, eta)
    scores: FloatArray  # q_j of the working-set atoms

    def inverse_factor(self, eta: float) -> FloatArray:
        """B with :math:`BB^\\top = \\Sigma_\\mu^{-1}`
        (:math:`= V\\operatorname{diag}(\\varphi'(m))V^\\top`)."""
        return np.asarray(self.eigvecs * np.sqrt(_dphi(self.eigvals, eta)), dtype=np.float64)

    def dual(self, support_vectors: FloatArray, eta: float) -> tuple[FloatArray, FloatArray]:
        """The dual directions :math:`u_j = \\Sigma_\\mu^{-1}s_j` of ``support_vectors`` (rows)
        and the floor factor :math:`G` with :math:`GG^\\top = H =
        V\\operatorname{diag}((1 - m_i/\\eta^2)_+)V^\\top` (columns on the clamped eigenvalues);
        with :math:`\\lambda_j = \\mu_j`, :math:`I - H - \\sum_j\\lambda_ju_ju_j^\\top = 0`."""
        u = ((support_vectors @ self.eigvecs) * _dphi(self.eigvals, eta)) @ self.eigvecs.T
        clamped = self.eigvals < eta * eta
        m = np.clip(self.eigvals[clamped], 0.0, None)
        g = self.eigvecs[:, clamped] * np.sqrt(1.0 - m / (eta * eta))
        return np.asarray(u, dtype=np.float64), np.asarray(g, dtype=np.float64)

    def covariance(self, eta: float) -> FloatArray:
        """:math:`\\Sigma_\\mu = V\\operatorname{diag}(\\max(\\sqrt{m_i}, \\eta))V^\\top`."""
        root = np.maximum(np.sqrt(np.clip(self.eigvals, 0.0, None)), eta)
        sigma = (self.eigvecs * root) @ self.eigvecs.T
        return np.asarray(0.5 * (sigma + sigma.T), dtype=np.float64)


def _phi(m: FloatArray, eta: float) -> FloatArray:
    m = np.clip(m, 0.0, None)
    return np.where(m >= eta * eta, 2.0 * np.sqrt(m), eta + m / eta)


def _dphi(m: FloatArray, eta: float) -> FloatArray:
    m = np.clip(m, 0.0, None)
    return 1.0 / np.maximum(np.sqrt(m), eta)


def _gamma(m: FloatArray, eta: float) -> FloatArray:
    r"""Divided differences :math:`\Gamma_{ab} = -(\varphi'(m_a) - \varphi'(m_b))/(m_a - m_b)`
    (:math:`-\varphi''` on the diagonal), evaluated without cancellation."""
    m = np.clip(m, 0.0, None)
    r = np.sqrt(m)
    free = m > eta * eta
    ra, rb = r[:, None], r[None, :]
    both = 1.0 / np.maximum(ra * rb * (ra + rb), 1e-300)
    gam = np.where(free[:, None] & free[None, :], both, 0.0)
    # one clamped (m_c <= eta^2), one free (m_f > eta^2): (1/eta - 1/r_f) / (m_f - m_c)
    mf, mc = m[None, :], m[:, None]
    rf = r[None, :]
    base = eta * np.maximum(rf, 1e-300)
    denom = np.broadcast_to(mf - mc, gam.shape)
    ratio = np.ones_like(gam)  # (m_f - eta^2) / (m_f - m_c) in [0, 1]; 1 in the limit
    np.divide(np.broadcast_to(mf - eta * eta, gam.shape), denom, out=ratio, where=denom > 0)
    mixed = np.minimum(ratio, 1.0) / (base * (rf + eta))
    cross = (~free)[:, None] & free[None, :]
    gam = np.where(cross, mixed, gam)
    gam = np.where(cross.T, mixed.T, gam)
    return gam


def floored_evaluate(atoms: FloatArray, mu: FloatArray, eta: float) -> FlooredPoint:
    mmat = (atoms.T * mu) @ atoms
    m, v = np.linalg.eigh(0.5 * (mmat + mmat.T))
    z = atoms @ v
    q = np.einsum("ij,ij->i", z * _dphi(m, eta), z)
    lower = float(np.sum(_phi(m, eta)) - np.sum(mu))
    trace = float(np.sum(np.maximum(np.sqrt(np.clip(m, 0.0, None)), eta)))
    return FlooredPoint(mu, m, v, lower, trace, q)


def _value(atoms: FloatArray, mu: FloatArray, eta: float) -> float:
    mmat = (atoms.T * mu) @ atoms
    m = np.asarray(np.linalg.eigvalsh(0.5 * (mmat + mmat.T)), dtype=np.float64)
    return float(np.sum(_phi(m, eta)) - np.sum(mu))


def restricted_gap(point: FlooredPoint) -> float:
    """The restricted gap
    :math:`\\max(1, \\max_j q_j)\\operatorname{tr}\\Sigma_\\mu / g(\\mu) - 1`."""
    top = max(1.0, float(point.scores.max()) if point.scores.size else 1.0)
    return top * point.trace_sigma / point.lower - 1.0 if point.lower > 0 else np.inf


def floored_solve(atoms: FloatArray, mu: FloatArray, eta: float, tol: float,
                  max_iter: int) -> tuple[FlooredPoint, int]:
    """Projected Newton for :math:`\\max_{\\mu \\ge 0} g(\\mu)` on the working set ``atoms``.

    Stops when the restricted gap (:func:`restricted_gap`) is at most ``tol`` or no step
    improves ``g``. Returns the last point and the number of Newton iterations.
    """
    mu = np.asarray(mu, dtype=np.float64).copy()
    point = floored_evaluate(atoms, mu, eta)
    it = 0
    while it < max_iter:
        it += 1
        if restricted_gap(point) <= tol:
            break
        grad = point.scores - 1.0
        k = mu.size
        total = max(float(mu.sum()), 1e-300)
        residual = float(np.max(np.where(mu > 0, np.abs(grad), np.maximum(grad, 0.0))))
        eps = min(1e-4, residual) * total / k
        active = (mu <= eps) & (grad <= 0)
        idx = np.flatnonzero(~active)
        z = atoms[idx] @ point.eigvecs
        p = z.shape[1]
        gam = _gamma(point.eigvals, eta)
        step = np.zeros(k)
        # directions of zero curvature (atoms inside the clamped eigenspace, where g is linear)
        # are regularised so that no step more than doubles the total weight
        ridge = float(np.max(np.abs(grad[idx]))) / total if idx.size else 0.0
        if idx.size**2 * p * (p + 1) / 2 > _DIRECT_FLOPS:
            rtol = min(0.1, float(np.sqrt(max(float(grad.max()), 1e-16))))
            step[idx] = newton_cg_kernel(z, gam, grad[idx], rtol, ridge)
        else:
            i0, i1, _ = _triu(p)
            w = np.sqrt(np.where(i0 == i1, 0.5 * gam[i0, i1], gam[i0, i1]))
            rows = z[:, i0] * z[:, i1] * w
            hess = 2.0 * _syrk(rows)
            tau = max(1e-12 * max(float(np.max(np.diag(hess))), 1e-300), ridge) + 1e-300
            hess[np.diag_indices_from(hess)] += tau
            step[idx] = _cho_solve(_cho(hess, tau), grad[idx])
        step[active] = -mu[active]
        f0 = point.lower
        alpha = 1.0
        accepted = False
        for _ in range(60):
            trial = mu + alpha * step
            clipped = bool(np.any(trial < 0))
            mu_new = np.maximum(trial, 0.0)
            predicted = float(grad @ (mu_new - mu))
            f_new = _value(atoms, mu_new, eta)
            # near the optimum the increase (~predicted / 2) drowns in the rounding of g: an
            # unprojected Newton step is then taken as it stands (quadratic convergence region)
            if mu_new.sum() > 0 and step_accepted(f_new, f0, predicted, clipped=clipped):
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            break
        mu = mu_new
        point = floored_evaluate(atoms, mu, eta)
        if point.lower <= f0 * (1 + 1e-15) and (alpha < 1e-6 or it >= 8 + max_iter // 4):
            break
    return point, it
