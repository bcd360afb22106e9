"""Fixed-size batches, attacked by brute force: for small datasets (N records, batches of B drawn
without replacement, one-dimensional clipped gradients in [-1, 1], C = 1), the exact
distribution of the released noisy batch sum is a finite Gaussian mixture, so the true hockey-
stick divergence between two neighbouring datasets (one record replaced) is an integral that
quadrature computes. Over adversarial and random datasets, one and two steps, it never exceeds
the δ(ε) dpopt certifies for the scheme."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpopt.accounting.composition import GaussianSteps, composed_delta


def _batch_sums(grads: np.ndarray, b: int) -> np.ndarray:
    """The sum of every size-b subset (each equally likely)."""
    return np.array([grads[list(c)].sum() for c in itertools.combinations(range(grads.size), b)])


def _true_delta(d1: np.ndarray, d2: np.ndarray, b: int, sigma: float, steps: int,
                eps: float) -> float:
    """H_{e^eps}(M(D1)^T || M(D2)^T) by quadrature; M releases the batch sum plus N(0, σ²)."""
    m1, m2 = _batch_sums(d1, b), _batch_sums(d2, b)
    lo = min(m1.min(), m2.min()) - 9 * sigma
    hi = max(m1.max(), m2.max()) + 9 * sigma
    x = np.linspace(lo, hi, 4001 if steps == 1 else 1201)
    h = x[1] - x[0]
    p = norm.pdf((x[:, None] - m1[None, :]) / sigma).mean(axis=1) / sigma
    q = norm.pdf((x[:, None] - m2[None, :]) / sigma).mean(axis=1) / sigma
    if steps == 2:
        p, q = np.outer(p, p), np.outer(q, q)
        cell = h * h
    else:
        cell = h
    return float(np.sum(np.clip(p - math.exp(eps) * q, 0.0, None)) * cell)


def _certified(n: int, b: int, sigma: float, steps: int, eps: float) -> float:
    run = GaussianSteps.from_noise_multiplier(sigma, steps, b / n, "without_replacement")
    return composed_delta(run, eps, two_sided=False).value


_ADVERSARIAL = [  # (others, replaced record, its replacement)
    ([-1.0, -1.0, -1.0], 1.0, -1.0),
    ([0.0, 0.0, 0.0], 1.0, -1.0),
    ([1.0, -1.0, 0.5], 1.0, -1.0),
    ([-1.0, -1.0, -1.0], 1.0, 0.0),
    ([1.0, 1.0, -1.0], -1.0, 1.0),
]


@pytest.mark.parametrize(("others", "x", "y"), _ADVERSARIAL)
@pytest.mark.parametrize("steps", [1, 2])
def test_adversarial_neighbours_stay_within_the_certificate(others: list[float], x: float,
                                                           y: float, steps: int) -> None:
    b, sigma = 2, 1.5
    d1, d2 = np.array([*others, x]), np.array([*others, y])
    for eps in (0.0, 0.3, 1.0):
        cert = _certified(d1.size, b, sigma, steps, eps)
        assert _true_delta(d1, d2, b, sigma, steps, eps) <= cert * (1 + 1e-6) + 1e-9


@settings(max_examples=8, deadline=None)
@given(grads=st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=5),
       y=st.floats(-1.0, 1.0), b=st.integers(1, 3), sigma=st.floats(0.8, 3.0),
       eps=st.floats(0.0, 2.0))
def test_random_neighbours_stay_within_the_certificate(grads: list[float], y: float, b: int,
                                                      sigma: float, eps: float) -> None:
    d1 = np.array(grads)
    b = min(b, d1.size - 1)
    d2 = d1.copy()
    d2[-1] = y
    cert = _certified(d1.size, b, sigma, 1, eps)
    assert _true_delta(d1, d2, b, sigma, 1, eps) <= cert * (1 + 1e-6) + 1e-9


def test_the_brute_force_catches_the_wrong_relation() -> None:
    """The check can fail: accounting the same batches as Poisson add/remove steps with
    sensitivity C (the error dpopt once made) is exceeded by the true divergence, while the
    certificate is attained at one step by the worst pair."""
    d1, d2 = np.array([-1.0, -1.0, -1.0, 1.0]), np.array([-1.0, -1.0, -1.0, -1.0])
    wrong = GaussianSteps.from_noise_multiplier(1.5, 1, 0.5, "poisson")
    true = _true_delta(d1, d2, 2, 1.5, 1, 0.3)
    assert true > 3.0 * composed_delta(wrong, 0.3, two_sided=False).value
    assert true == pytest.approx(_certified(4, 2, 1.5, 1, 0.3), rel=1e-4)
