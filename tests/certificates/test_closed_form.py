"""certificates.closed_form on its own: valid for every program, exact in the closed-form cases.

No solver is imported: the optima are closed forms, evaluated independently with mpmath.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.closed_form import closed_form_lower_bound
from certificates.covariance import check
from certificates.problem import CovarianceProgram, FactoredDual

mpmath.mp.dps = 50


def _rotated(d: int, cond: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = (q * np.geomspace(1.0, cond, d)) @ q.T
    return 0.5 * (w + w.T)


def _mp(a: np.ndarray) -> mpmath.matrix:
    return mpmath.matrix(np.asarray(a, dtype=np.float64).tolist())


@settings(max_examples=60)
@given(seed=st.integers(0, 10**6), d=st.integers(1, 6), log_cond=st.floats(0, 12),
       eta=st.floats(0, 3), q=st.floats(0.1, 4))
def test_never_above_a_feasible_value(seed: int, d: int, log_cond: float, eta: float,
                                      q: float) -> None:
    """Sigma = eta I + X + (1 + t) ss^T / q is feasible (Sigma >= ss^T/q); the bound is below."""
    rng = np.random.default_rng(seed)
    w = _rotated(d, 10.0**log_cond, seed)
    s = rng.standard_normal(d) * rng.uniform(0.1, 3)
    x = rng.standard_normal((d, d)) * rng.uniform(0, 1)
    sigma = eta * np.eye(d) + x @ x.T + (1 + rng.uniform(0, 1)) * np.outer(s, s) / q
    value = mpmath.fsum(_mp(w)[i, j] * _mp(sigma)[j, i] for i in range(d) for j in range(d))
    lb = closed_form_lower_bound(w, q, eta, s[None, :])
    assert lb <= value * (1 + 1e-12)


@pytest.mark.parametrize("cond", [1.0, 1e6, 1e12])
@pytest.mark.parametrize("seed", range(3))
def test_eigenvector_with_floor_is_exact(cond: float, seed: int) -> None:
    """s an eigenvector of W (up to the rounding of the stored W): the third bound equals the
    optimum eta tr W + w (|s|^2/q - eta) evaluated in 50 digits on the stored data."""
    d = 4
    w = _rotated(d, cond, seed)
    _, vec = np.linalg.eigh(w)
    s = 2.0 * vec[:, 1]
    q, eta = 1.5, 0.5
    lb = closed_form_lower_bound(w, q, eta, s[None, :])
    wm, sm = _mp(w), _mp(s[:, None])
    inv = (sm.T * mpmath.lu_solve(wm, sm))[0]
    n2 = (sm.T * sm)[0]
    exact = eta * sum(wm[i, i] for i in range(d)) + (n2**2 / q - eta * n2) / inv
    assert lb <= exact
    assert float((exact - lb) / exact) <= 4e-16


def test_floor_bound_proves_eta_identity_at_condition_1e12() -> None:
    """eta I optimal, W of condition 1e12, a dual whose H = W only to rounding: the residual
    bound alone cannot certify; with the closed-form bound the gap is the repair margin."""
    d = 5
    w = _rotated(d, 1e12, 7)
    rng = np.random.default_rng(7)
    s = rng.standard_normal((9, d))
    eta = 1.2 * float(np.max(np.sum(s**2, axis=1)))
    ev, vec = np.linalg.eigh(w)
    g = vec * np.sqrt(np.clip(ev, 0, None))
    dual = FactoredDual(np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros((0, d)), g)
    prob = CovarianceProgram(s, w, 1.0, eta)
    for rigorous in (False, True):
        cert = check(prob, eta * (1 + 1e-13) * np.eye(d), dual, tol=1e-11, rigorous=rigorous)
        assert cert.certified, cert.message
        exact = mpmath.mpf(eta) * mpmath.fsum(mpmath.mpf(float(x)) for x in np.diag(w))
        assert cert.lower <= exact <= cert.upper
        assert cert.gap <= 3e-12  # the repair margins of the check (1e-12 each)
        assert "closed-form" in cert.message


def test_line_without_floor_is_exact() -> None:
    """All vectors on one line, no floor: the infimum s^T W s / q is the bound."""
    d = 3
    w = _rotated(d, 1e12, 3)
    v = np.array([0.3, -1.1, 0.7])
    s = np.outer([0.5, -2.0, 1.0], v)
    q = 0.8
    lb = closed_form_lower_bound(w, q, 0.0, s[1:2])
    exact = (_mp(s[1][None, :]) * _mp(w) * _mp(s[1][:, None]))[0] / q
    assert lb <= exact
    assert float((exact - lb) / exact) <= 4e-16


def test_screen_skips_when_far_below() -> None:
    w = np.eye(3)
    s = np.array([[1.0, 0.0, 0.0]])
    assert closed_form_lower_bound(w, 1.0, 0.0, s) == 1.0
    assert closed_form_lower_bound(w, 1.0, 0.0, s, above=5.0) == 0.0
