"""Regression: the tight Pufferfish bounds at large orders and tiny scales, warnings as errors.

On the packaged UCI scenarios, Gaussian noise at a scale of 1e-6 (the atoms ~1e8 standard
deviations apart) and orders up to 1e8 used to give ``invalid value`` RuntimeWarnings: pieces
split below the doubles' resolution at |t| ~ 1e8 had zero width (0/0 in a chord's slope), and a
steep tangent made the computed ends of a normal-CDF interval coincide (log 0, then inf - inf).
Both produced NaN; the NaN reached the final check and the bounds raised "please report" instead
of answering. Now every step is finite: an empty piece contributes nothing, a piece is not split
below the doubles' resolution, and the normal-CDF interval is rounded outwards (upper bound) and
inwards (lower bound) around its exact width.

The bounds returned must be ordered and finite, and the lower one must lie below an independent
upper bound computed here in mpmath: for any coupling pi of P and Q,
D_alpha <= log(sum pi_ij exp(alpha (alpha - 1) (x_i - y_j)^2 / (2 sigma^2))) / (alpha - 1)
(joint convexity; Ding, Yang, Zhang, "alpha-Wasserstein Mechanism for Renyi Pufferfish
Privacy"), with the comonotone coupling of the two laws taken in exact rationals.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from certificates.renyi_mixture import divergence_bounds
from dpopt.experiments.rpp import SCENARIOS, scenario_laws

CASES = [
    ("adult-sex-hours", 2.0, 1e-6),
    ("adult-sex-hours", 1e8, 1e-3),
    pytest.param("adult-income-age", 1e8, 1e-6, marks=pytest.mark.slow),
    pytest.param("heart-disease-chol", 1e5, 1e-6, marks=pytest.mark.slow),
    ("student-por-romantic-G3", 1e8, 1e-6),
]


def _coupling_upper(x: np.ndarray, p: np.ndarray, y: np.ndarray, q: np.ndarray, alpha: float,
                    sigma: float) -> mp.mpf:
    """The alpha-Wasserstein bound of the comonotone coupling (exact masses, mpmath cost)."""
    tp, tq = sum(Fraction(v) for v in p), sum(Fraction(v) for v in q)
    i = j = 0
    ri, rj = Fraction(p[0]) / tp, Fraction(q[0]) / tq
    a, s = mp.mpf(alpha), mp.mpf(sigma)
    terms = []
    with mp.workdps(40):
        while i < len(x) and j < len(y):
            m = min(ri, rj)
            if m > 0:
                d = mp.mpf(float(x[i])) - mp.mpf(float(y[j]))
                terms.append(mp.log(mp.mpf(m.numerator) / m.denominator)
                             + a * (a - 1) * d * d / (2 * s * s))
            ri, rj = ri - m, rj - m
            if ri == 0:
                i += 1
                ri = Fraction(p[i]) / tp if i < len(x) else Fraction(0)
            if rj == 0:
                j += 1
                rj = Fraction(q[j]) / tq if j < len(y) else Fraction(0)
        top = max(terms)
        return (top + mp.log(mp.fsum(mp.exp(t - top) for t in terms))) / (a - 1)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("key", "alpha", "sigma"), CASES)
def test_tiny_gaussian_scales_at_large_orders(key: str, alpha: float, sigma: float) -> None:
    (x, p), (y, q) = scenario_laws(SCENARIOS[key])
    b = divergence_bounds(x, p, y, q, noise="gaussian", scale=sigma, alpha=alpha, gap=1e-3)
    assert math.isfinite(b.lower) and math.isfinite(b.upper) and 0.0 <= b.lower <= b.upper
    assert b.lower <= _coupling_upper(x, p, y, q, alpha, sigma) * (1 + mp.mpf(1e-12))
