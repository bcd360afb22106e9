"""An independent reference for fixed-size batches without replacement (replace-one), written
from the formulas in numpy/scipy (no dp-accounting): the privacy profiles of the two
Poisson-subsampled Gaussian pairs in closed form, their pointwise maximum (the profile of Dong,
Roth & Su's C_p(G_{1/sigma}), "Gaussian Differential Privacy", Theorem 4.2), its privacy-loss
masses on a fine grid, and the T-fold composition by FFT convolution of those masses."""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import fftconvolve
from scipy.stats import norm

__all__ = ["add_profile", "reference_epsilon", "remove_profile"]


def remove_profile(eps: np.ndarray, sigma: float, p: float) -> np.ndarray:
    """δ(ε) of P = (1-p)N(0, σ²) + pN(1, σ²) against Q = N(0, σ²), closed form: the loss
    log((1-p) + p exp((2x-1)/(2σ²))) is increasing in x, so {L > ε} = {x > x_ε}."""
    out = np.empty_like(eps)
    low = eps <= math.log1p(-p)
    out[low] = -np.expm1(eps[low])
    e = eps[~low]
    x = sigma**2 * np.log((np.exp(e) - (1 - p)) / p) + 0.5
    out[~low] = ((1 - p) * norm.sf(x / sigma) + p * norm.sf((x - 1) / sigma)
                 - np.exp(e) * norm.sf(x / sigma))
    return np.clip(out, 0.0, 1.0)


def add_profile(eps: np.ndarray, sigma: float, p: float) -> np.ndarray:
    """δ(ε) of Q against P (the reverse pair): the loss -log((1-p) + p exp((2x-1)/(2σ²))) is
    decreasing in x and below -log(1-p)."""
    out = np.zeros_like(eps)
    ok = eps < -math.log1p(-p)
    e = eps[ok]
    x = sigma**2 * np.log((np.exp(-e) - (1 - p)) / p) + 0.5
    out[ok] = norm.cdf(x / sigma) - np.exp(e) * ((1 - p) * norm.cdf(x / sigma)
                                                 + p * norm.cdf((x - 1) / sigma))
    return np.clip(out, 0.0, 1.0)


def reference_epsilon(sigma: float, p: float, steps: int, delta: float,
                       h: float = 2e-4) -> float:
    """ε(δ) of the T-fold composition of the pair realising max(δ_remove, δ_add): loss masses
    from the profile's second differences on a grid of step h (δ(ε) = Σ_l m_l (1 - e^{ε-l})_+
    is piecewise linear in e^ε between atoms), composed by (FFT) convolution."""
    top = -math.log1p(-p) + 1.0 / sigma**2 + 12.0 / sigma
    grid = np.arange(-math.ceil(top / h), math.ceil(top / h) + 1) * h
    prof = np.maximum(remove_profile(grid, sigma, p), add_profile(grid, sigma, p))
    prof = np.minimum.accumulate(prof)
    # δ(ε) = E[(1 - e^{ε - L})_+]: with v = e^ε, -dδ/dv = E[e^{-L} 1{L > ε}]; masses of e^{-L}
    v = np.exp(grid)
    slope = -np.diff(prof) / np.diff(v)             # E[e^{-L} 1{L > ε}] between grid points
    w = np.append(-np.diff(slope), slope[-1])       # e^{-l} m_l at grid[1:]
    mass = np.clip(w * np.exp(grid[1:]), 0.0, None)
    atom_inf = max(1.0 - mass.sum(), 0.0)
    losses = grid[1:]
    dist, values, inf_mass = mass, losses, atom_inf
    for _ in range(steps - 1):
        dist = np.clip(fftconvolve(dist, mass), 0.0, None)
        values = np.arange(dist.size) * h + (values[0] + losses[0])
        inf_mass = 1.0 - (1.0 - inf_mass) * (1.0 - atom_inf)
    def delta_at(e: float) -> float:
        keep = values > e
        return inf_mass + float(np.sum(dist[keep] * -np.expm1(e - values[keep])))
    lo, hi = 0.0, float(values[-1])
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return hi
