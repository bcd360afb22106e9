"""Independent high-precision references for the Gaussian (ε, δ) curve (mpmath, 50+ digits).

Two independent forms of δ(ε; μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ):

* :func:`mp_log_delta_direct` evaluates the definition with ``mpmath.ncdf`` at a working
  precision raised by the number of digits the subtraction cancels;
* :func:`mp_log_delta_asymptotic` uses the Mills-ratio expansion
  Φ(−t) = φ(t) Σ_k (−1)^k (2k−1)!! / t^(2k+1) with e^ε φ(b) = φ(a), so that
  δ = φ(a) [M(|a|) − M(|b|)], each difference |a|^(−n) − |b|^(−n) written without cancellation
  as μ Σ_j |b|^j |a|^(n−1−j) / (|a||b|)^n (since |b| − |a| = μ). Valid for |a| >= 1e6.

Nothing here imports dpopt.
"""

from __future__ import annotations

import math

import mpmath

DPS = 60
ASYMPTOTIC_FROM = mpmath.mpf(10) ** 6


def _digits_cancelled(a: mpmath.mpf, b: mpmath.mpf, m: mpmath.mpf) -> int:
    # Φ(a) / δ is about |b| / μ for a < 0 (and 1/μ for tiny μ): that many digits cancel
    ratio = (abs(b) + 1) / m
    return max(0, int(mpmath.ceil(mpmath.log10(ratio)))) + 5


def _mills(t: mpmath.mpf, terms: int = 12) -> mpmath.mpf:
    """Mills ratio Φ(−t)/φ(t) for t >= 1e6 by its asymptotic series (error < t^-25)."""
    total = mpmath.mpf(0)
    double_fact = mpmath.mpf(1)
    for k in range(terms):
        if k > 0:
            double_fact *= 2 * k - 1
        total += (-1) ** k * double_fact / t ** (2 * k + 1)
    return total


def mp_log_delta_direct(eps: float, mu: float, dps: int = DPS) -> mpmath.mpf:
    """log δ(ε; μ) from the definition, at ``dps`` digits plus the cancelled digits.

    ``mpmath.ncdf`` cannot take arguments beyond about 1e6 in size (its series test overflows),
    so there e^ε Φ(b) = φ(a)·Mills(|b|) (as e^ε φ(b) = φ(a)) and Φ(−a) = φ(a)·Mills(a).
    """
    with mpmath.workdps(dps):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        a = m / 2 - e / m
        b = -m / 2 - e / m
        extra = _digits_cancelled(a, b, m)
    with mpmath.workdps(dps + extra):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        a = m / 2 - e / m
        b = -m / 2 - e / m
        if -b >= ASYMPTOTIC_FROM:
            tail_b = mpmath.npdf(a) * _mills(-b)
        else:
            tail_b = mpmath.exp(e) * mpmath.ncdf(b)
        if a > 0:
            # δ = 1 − [Φ(−a) + e^ε Φ(b)]: log1p of two positive terms keeps δ ≈ 1 precise
            tail_a = mpmath.npdf(a) * _mills(a) if a >= ASYMPTOTIC_FROM else mpmath.ncdf(-a)
            return +mpmath.log1p(-(tail_a + tail_b))
        return +mpmath.log(mpmath.ncdf(a) - tail_b)


def mp_log_delta_asymptotic(eps: float, mu: float, dps: int = DPS, terms: int = 12) -> mpmath.mpf:
    """log δ(ε; μ) from the Mills-ratio expansion (requires a = μ/2 − ε/μ <= −1e6)."""
    with mpmath.workdps(dps + 10):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        a = m / 2 - e / m
        if a > -ASYMPTOTIC_FROM:
            raise ValueError("the asymptotic form needs a <= -1e6")
        ta = -a
        tb = ta + m  # |b| = |a| + μ exactly
        total = mpmath.mpf(0)
        double_fact = mpmath.mpf(1)
        for k in range(terms):
            n = 2 * k + 1
            if k > 0:
                double_fact *= 2 * k - 1
            # |a|^-n - |b|^-n = μ Σ_j |b|^j |a|^(n-1-j) / (|a||b|)^n, all terms positive
            inner = mpmath.fsum(tb**j * ta ** (n - 1 - j) for j in range(n))
            total += (-1) ** k * double_fact * m * inner / (ta * tb) ** n
        log_phi_a = -(a * a) / 2 - mpmath.log(2 * mpmath.pi) / 2
        return +(log_phi_a + mpmath.log(total))


def mp_log_delta(eps: float, mu: float, dps: int = DPS) -> mpmath.mpf:
    """log δ(ε; μ) at ``dps`` digits: the asymptotic form far in the tail, else the definition.

    ``mu = 0`` gives ``-inf``.
    """
    if mu == 0.0:
        return mpmath.ninf
    with mpmath.workdps(dps):
        a = mpmath.mpf(mu) / 2 - mpmath.mpf(eps) / mpmath.mpf(mu)
    if a <= -ASYMPTOTIC_FROM:
        return mp_log_delta_asymptotic(eps, mu, dps)
    return mp_log_delta_direct(eps, mu, dps)


def to_float(x: mpmath.mpf) -> float:
    """An mpf as a float (``-inf`` below the double range)."""
    if x < -mpmath.mpf(1.7976931348623157e308):
        return -math.inf
    return float(x)
