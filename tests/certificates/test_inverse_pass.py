"""The verification pass by an inverse of Sigma (well-conditioned Sigma, small d): its bound is a
bound on the exact maximum (mpmath), as tight as the Cholesky solves' bound."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.problem import ArrayVectors
from certificates.rigorous import (
    _small_inverse,
    certified_min_eigenvalue,
    ratio_chunk,
    ratio_upper_bound,
)


def _exact_max(sigma: np.ndarray, s: np.ndarray) -> mpmath.mpf:
    with mpmath.workdps(50):
        m = mpmath.matrix(sigma.tolist())
        return max((mpmath.matrix(v.tolist()).T * mpmath.lu_solve(m, mpmath.matrix(v.tolist())))[0]
                   for v in s)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 12), count=st.integers(1, 60),
       ridge=st.sampled_from([1e-2, 1.0, 10.0]))
def test_inverse_pass_bounds_the_exact_maximum(seed: int, d: int, count: int,
                                               ridge: float) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    sigma = a @ a.T / d + ridge * np.eye(d)
    sigma = 0.5 * (sigma + sigma.T)
    s = rng.normal(size=(count, d)) * rng.uniform(0.1, 10.0)
    chol = np.asarray(np.linalg.cholesky(sigma), dtype=np.float64)
    lam_low = certified_min_eigenvalue(sigma)
    inverse = _small_inverse(sigma, chol, lam_low)
    cond = float(np.abs(sigma).sum(axis=1).max()) / lam_low
    assert (inverse is not None) == (cond <= 1e4)
    bound, est, _ = ratio_upper_bound(ArrayVectors(s), sigma, chol, lam_low, chunk=7)
    true = _exact_max(sigma, s)
    assert bound >= true
    assert bound <= float(true) * (1 + 1e-11)
    assert est == pytest.approx(float(true), rel=1e-12)
    # the same chunk by Cholesky solves (the path of an ill-conditioned Sigma or a chunk map)
    _, _, by_chol, _, _ = ratio_chunk(s, 0, sigma, chol, lam_low)
    assert by_chol >= true
    assert bound == pytest.approx(by_chol, rel=1e-12)


def test_ill_conditioned_sigma_keeps_the_cholesky_solves() -> None:
    rng = np.random.default_rng(4)
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    sigma = (q * np.geomspace(1e-6, 1.0, 6)) @ q.T
    sigma = 0.5 * (sigma + sigma.T)
    chol = np.asarray(np.linalg.cholesky(sigma), dtype=np.float64)
    lam_low = certified_min_eigenvalue(sigma)
    assert _small_inverse(sigma, chol, lam_low) is None
    s = rng.normal(size=(30, 6))
    bound, _, _ = ratio_upper_bound(ArrayVectors(s), sigma, chol, lam_low)
    true = _exact_max(sigma, s)
    assert true <= bound <= float(true) * (1 + 1e-9)
