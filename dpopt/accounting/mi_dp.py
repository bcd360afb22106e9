r"""Mutual information of a Gaussian mechanism on a binary record.

As in the optimal Gaussian covariance for the ideal denoiser (its mutual-information section):
for a record :math:`B` uniform on two values whose query difference has Mahalanobis norm
:math:`s^\top\Sigma^{-1}s = q`, the mutual information between :math:`B` and the output is

.. math:: \psi(q) = \log 2 - \mathbb E\,\log\big(1 + e^{-q/2 - \sqrt q Z}\big),
          \quad Z \sim N(0, 1)   \text{ (nats)},

increasing from :math:`\psi(0) = 0` (slope 1/8) to :math:`\log 2`. Pairing :math:`z` with
:math:`-z` gives the even integrand

.. math:: g(z) = \log 4 - \mathrm{sp}(c + d) - \mathrm{sp}(c - d)
          = -\log\big(1 + [4e^c\sinh^2(d/2) + 2(e^c - 1) + (e^{2c} - 1)]/4\big),

:math:`c = -q/2`, :math:`d = \sqrt q z`, :math:`\mathrm{sp} = \log(1 + e^x)`, and
:math:`\psi(q) = \int_0^\infty g(z)\varphi(z)\,dz`. The second form has no cancellation for small
``d`` (used when ``d <= 1``); adaptive quadrature is split at the bend :math:`z = \sqrt q/2` and at
:math:`d = 1`, and truncated at ``z = 40``. For ``q > 64`` the small loss :math:`\log 2 - \psi`
is integrated on its own in log form. Agrees with mpmath to ~1e-14 relative (small q: series
:math:`q/8 - q^2/64 + q^3/384`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import integrate, optimize

from certificates.roots import BracketError, bracket_increasing
from dpopt.accounting.analytic_gaussian import shrink_until
from dpopt.errors import SolverError

__all__ = ["mi_binary_inverse_scalar", "mi_binary_scalar"]

_LOG4 = math.log(4.0)
_LOG2 = math.log(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


_LARGE_Q = 64.0


def _log_half_loss(q: float) -> float:
    r"""log C(q), :math:`C(q) = \mathbb E\,\mathrm{sp}(-q/2 + \sqrt q Z) = \log 2 - \psi(q)`.

    With :math:`z_0 = \sqrt q/2` (where the argument of sp changes sign) and :math:`z = z_0 + t`,
    :math:`C = \varphi(z_0)\int \mathrm{sp}(\sqrt q\,t)\,e^{-z_0 t - t^2/2}\,dt`; the integrand
    decays at rate about :math:`z_0` on both sides of 0, so the integral is taken over
    :math:`|t| \le 60/z_0` and combined in log form (no underflow for any finite q).
    """
    rq = math.sqrt(q)
    z0 = rq / 2.0
    width = min(40.0, 60.0 / z0)

    def integrand(t: float) -> float:
        return _softplus(rq * t) * math.exp(-z0 * t - t * t / 2.0)

    total = 0.0
    for lo, hi in ((-width, 0.0), (0.0, width)):
        val, _ = integrate.quad(integrand, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)
        total += val
    return -0.5 * z0 * z0 - 0.5 * math.log(2.0 * math.pi) + math.log(total)


def mi_binary_scalar(q: float) -> float:
    """:math:`\\psi(q)` in nats for one ``q >= 0`` (see the module docstring), below log 2.

    For ``q > 64`` it is computed as :math:`\\log 2 - C(q)` with the small loss :math:`C(q)`
    integrated directly in log form (no cancellation, no integration warning), and never
    exceeds the double nearest below log 2.
    """
    if q == 0.0:
        return 0.0
    if q > _LARGE_Q:
        return max(min(_LOG2 - math.exp(_log_half_loss(q)), _LOG2), 0.0)
    if q < 1e-5:
        # series (error < q^4/1e3 relative to q/8): q/8 - q^2/64 + q^3/384
        return q / 8.0 - q * q / 64.0 + q**3 / 384.0
    c = -q / 2.0
    rq = math.sqrt(q)
    ec = math.exp(c)
    const = 2.0 * math.expm1(c) + math.expm1(2.0 * c)

    def g(z: float) -> float:
        d = rq * z
        if d <= 1.0:
            sh = math.sinh(d / 2.0)
            return -math.log1p((4.0 * ec * sh * sh + const) / 4.0)
        return _LOG4 - _softplus(c + d) - _softplus(c - d)

    def integrand(z: float) -> float:
        return g(z) * math.exp(-z * z / 2.0) * _INV_SQRT_2PI

    cuts = sorted({0.0, rq / 2.0, 1.0 / rq})
    cuts = [x for x in cuts if x < 40.0] + [40.0]
    total = 0.0
    for lo, hi in itertools.pairwise(cuts):
        val, _ = integrate.quad(integrand, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)
        total += val
    return total  # phi(z) < 1e-347 beyond z = 40: the tail is exactly 0 in double precision


def mi_binary_inverse_scalar(kappa: float) -> float:
    r"""Largest ``q`` with :math:`\psi(q) \le \kappa(1 - 10^{-11})` for ``0 < kappa < log 2``.

    Brent in ``log q`` on a doubling bracket around :math:`8\kappa` (since
    :math:`\psi(q)\approx q/8`), then moved to the safe side. Ill-conditioned as
    ``kappa -> log 2`` (ψ is flat there).
    """
    goal = kappa * (1.0 - 1e-11)

    def f(x: float) -> float:
        return math.log(mi_binary_scalar(math.exp(x))) - math.log(goal)

    try:
        lo, hi = bracket_increasing(f, math.log(8.0 * kappa), step=0.5, max_steps=60)
    except BracketError:
        raise SolverError(f"mutual information {kappa!r} too close to log 2 to invert") from None
    root = float(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps))
    return shrink_until(math.exp(root), lambda v: mi_binary_scalar(v) <= goal)
