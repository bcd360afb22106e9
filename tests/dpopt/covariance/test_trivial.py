"""Closed-form instances: found before any iterative solve, certified exactly, no fallback."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from dpopt.accounting.budgets import ZCDP
from dpopt.covariance.design import design_covariance

mpmath.mp.dps = 40


def _rotated(d: int, cond: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = (q * np.geomspace(1.0, cond, d)) @ q.T
    return 0.5 * (w + w.T)


@pytest.mark.parametrize("rigorous", [False, True])
@pytest.mark.parametrize("cond", [1.0, 1e6, 1e12])
@pytest.mark.parametrize("seed", range(4))
def test_eta_identity_is_certified_exactly(seed: int, cond: float, rigorous: bool) -> None:
    rng = np.random.default_rng(seed)
    d = 3
    s = rng.standard_normal((5, d))
    w = _rotated(d, cond, seed)
    eta = 1.5 * float(np.max(np.sum(s**2, axis=1)))
    des = design_covariance(s, ZCDP(rho=0.5), weight=w, noise_floor=eta, rigorous=rigorous)
    assert des.certified and des.path == "structured, closed form (eta I)"
    exact = mpmath.mpf(eta) * mpmath.fsum(mpmath.mpf(float(x)) for x in np.diag(w))
    assert des.certificate.lower <= exact <= des.value
    assert des.certificate.gap <= 3e-12


@pytest.mark.parametrize("cond", [1.0, 1e6, 1e12])
@pytest.mark.parametrize("seed", range(3))
def test_line_without_floor_any_weight(seed: int, cond: float) -> None:
    rng = np.random.default_rng(seed)
    d = 4
    v = rng.standard_normal(d)
    s = np.outer(rng.standard_normal(6), v)
    w = _rotated(d, cond, seed + 10)
    des = design_covariance(s, ZCDP(rho=0.5), weight=w)
    assert des.certified and des.path == "structured, closed form (rank one)"
    top = s[int(np.argmax(np.sum(s**2, axis=1)))]
    wm = mpmath.matrix(w.tolist())
    tm = mpmath.matrix(top.tolist())
    exact = (tm.T * wm * tm)[0]  # q = 2 rho = 1
    assert des.certificate.lower <= exact <= des.value
    assert des.certificate.gap <= 1e-9  # the ridge off the line (the infimum is not attained)


@pytest.mark.parametrize("cond", [1.0, 1e6, 1e12])
def test_eigenvector_with_floor(cond: float) -> None:
    d = 4
    w = _rotated(d, cond, 5)
    _, vec = np.linalg.eigh(w)
    s = np.outer([1.0, -3.0, 2.0], vec[:, 2])
    eta = 0.5
    des = design_covariance(s, ZCDP(rho=0.5), weight=w, noise_floor=eta)
    assert des.certified and "closed form" in des.path
    assert des.certificate.gap <= 3e-12
