"""Independent references for the true Rényi divergence of two noisy discrete laws (1-D).

Written without dpopt: D_α(P*N ‖ Q*N) = log ∫ p(t)^α q(t)^{1-α} dt / (α - 1) for the mixtures
p(t) = Σ p_k f(t - x_k), q(t) = Σ q_l f(t - y_l) with Laplace or Gaussian noise f.

- :func:`renyi_mpmath`: mpmath tanh-sinh quadrature at 20 digits, the interval split at every
  atom, at the Gaussian integrand centres α x_k - (α-1) y_l and on a grid of one noise scale;
  no underflow (mpmath's exponent range), so atoms of mass 1e-300 count. For small laws.
- :func:`renyi_quadpack`: double precision, the log integrand by log-sum-exp normalised by its
  maximum, scipy's QUADPACK on the same pieces with relative tolerance 1e-12; for large laws.
  Cross-checked against :func:`renyi_mpmath` in the tests.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
from scipy.integrate import quad
from scipy.special import logsumexp


def _breaks(x, y, mech, scale, alpha, max_points=400):
    atoms = np.union1d(x, y)
    pts = set(atoms.tolist())
    if mech == "gaussian":
        cx = alpha * np.asarray(x)[:, None] - (alpha - 1) * np.asarray(y)[None, :]
        cy = alpha * np.asarray(y)[:, None] - (alpha - 1) * np.asarray(x)[None, :]
        pts |= set(cx.ravel().tolist()) | set(cy.ravel().tolist())
    lo, hi = min(pts), max(pts)
    n_grid = int(min(max_points, (hi - lo) / scale + 1))
    pts |= set(np.linspace(lo, hi, max(n_grid, 2)).tolist())
    return sorted(pts)


def renyi_mpmath(x, p, y, q, mech, scale, alpha, dps=20):
    """D_α(P*N ‖ Q*N) by mpmath quadrature (use for laws with a few atoms)."""
    with mpmath.workdps(dps):
        a = mpmath.mpf(alpha)
        b = mpmath.mpf(scale)
        xs = [mpmath.mpf(float(v)) for v in x]
        ys = [mpmath.mpf(float(v)) for v in y]
        ps = [mpmath.mpf(float(v)) for v in p]
        qs = [mpmath.mpf(float(v)) for v in q]
        tp, tq = mpmath.fsum(ps), mpmath.fsum(qs)
        ps = [v / tp for v in ps]
        qs = [v / tq for v in qs]

        if mech == "gaussian":
            def f(u):
                return mpmath.exp(-(u / b) ** 2 / 2) / (b * mpmath.sqrt(2 * mpmath.pi))
        else:
            def f(u):
                return mpmath.exp(-abs(u) / b) / (2 * b)

        def integrand(t):
            pt = mpmath.fsum(w * f(t - v) for w, v in zip(ps, xs, strict=True))
            qt = mpmath.fsum(w * f(t - v) for w, v in zip(qs, ys, strict=True))
            return pt**a * qt ** (1 - a)

        pts = [mpmath.mpf(v) for v in _breaks(x, y, mech, scale, alpha, 16)]
        total = mpmath.quad(integrand, [-mpmath.inf, *pts, mpmath.inf])
        return float(mpmath.log(total) / (a - 1))


def renyi_quadpack(x, p, y, q, mech, scale, alpha):
    """D_α(P*N ‖ Q*N) in double precision, log domain, QUADPACK per piece."""
    x = np.asarray(x, float) / scale
    y = np.asarray(y, float) / scale
    lp = np.log(np.asarray(p, float) / np.sum(p))
    lq = np.log(np.asarray(q, float) / np.sum(q))
    gauss = mech == "gaussian"
    log_norm = -0.5 * math.log(2 * math.pi) if gauss else -math.log(2.0)

    def logh(t):
        t = np.atleast_1d(np.asarray(t, float))
        ux, uy = t[:, None] - x[None, :], t[:, None] - y[None, :]
        ex = -0.5 * ux * ux if gauss else -np.abs(ux)
        ey = -0.5 * uy * uy if gauss else -np.abs(uy)
        return (alpha * logsumexp(lp + ex, axis=1) + (1 - alpha) * logsumexp(lq + ey, axis=1)
                + log_norm)

    pts = np.array(_breaks(x, y, mech, 1.0, alpha))
    dense = np.linspace(pts[0], pts[-1], 20001)
    top = float(max(np.max(logh(pts)), np.max(logh(dense))))
    pieces = [(-np.inf, pts[0]), *itertools.pairwise(pts), (pts[-1], np.inf)]
    total = 0.0
    for lo, hi in pieces:
        val, _ = quad(lambda t: math.exp(float(logh(t)[0]) - top), lo, hi,
                      epsabs=1e-300, epsrel=1e-12, limit=500)
        total += val
    return float((math.log(total) + top) / (alpha - 1))


def true_divergence(x, p, y, q, mech, scale, alpha, prefer_mpmath=None):
    """max of both orders; mpmath when the laws are small (or when asked)."""
    small = len(x) + len(y) <= 8 if prefer_mpmath is None else prefer_mpmath
    fn = renyi_mpmath if small else renyi_quadpack
    return max(fn(x, p, y, q, mech, scale, alpha), fn(y, q, x, p, mech, scale, alpha))
