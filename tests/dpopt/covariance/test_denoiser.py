"""The ideal denoiser against brute force, mpmath and finite differences."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.covariance.denoiser import (
    deletion_shifts,
    log_responsibilities,
    mean_from_noise_prediction,
    noise_prediction,
    posterior_mean,
    query_from_forward,
    query_jacobian,
    responsibilities,
    theorem1_coefficients,
    two_record_vector,
)
from dpopt.errors import InvalidParameterError, InvalidTypeError


def _mp_mean(x: np.ndarray, g: np.ndarray, sigma: float) -> np.ndarray:
    """Posterior mean in 40-digit arithmetic (independent reference)."""
    mp.mp.dps = 40
    two_s2 = 2 * mp.mpf(sigma) ** 2
    sq = [
        mp.fsum((mp.mpf(float(a)) - mp.mpf(float(b))) ** 2 for a, b in zip(xi, g, strict=True))
        for xi in x
    ]
    w = [mp.e ** (-q / two_s2) for q in sq]
    tot = mp.fsum(w)
    return np.array(
        [
            float(mp.fsum(wi * mp.mpf(float(xi[c])) for wi, xi in zip(w, x, strict=True)) / tot)
            for c in range(x.shape[1])
        ]
    )


def test_responsibilities_two_points_closed_form() -> None:
    r = responsibilities([[0.0], [1.0]], [0.0], 1.0)
    np.testing.assert_allclose(r, [1 / (1 + np.exp(-0.5)), 1 / (1 + np.exp(0.5))], rtol=1e-14)
    assert r.sum() == pytest.approx(1.0)


def test_posterior_mean_matches_mpmath() -> None:
    rng = np.random.default_rng(1)
    for _ in range(5):
        x = rng.normal(size=(6, 3))
        g = rng.normal(size=3)
        np.testing.assert_allclose(posterior_mean(x, g, 0.6), _mp_mean(x, g, 0.6), rtol=1e-12)


def test_far_records_do_not_underflow() -> None:
    # plain weights exp(-|g-x|^2/(2 sigma^2)) are all 0.0 in double precision here
    x = np.array([[1000.0, 0.0], [1001.0, 0.0], [0.0, 50.0]])
    g = np.array([0.0, 0.0])
    lr = log_responsibilities(x, g, 0.1)
    assert np.all(np.isfinite(lr[:2])) or np.isneginf(lr).any()
    m = posterior_mean(x, g, 0.1)
    assert np.all(np.isfinite(m))
    np.testing.assert_allclose(m, [0.0, 50.0], atol=1e-12)  # the nearest record wins
    m2 = posterior_mean(x[:2], g, 0.1)
    np.testing.assert_allclose(m2, [1000.0, 0.0], atol=1e-9)


def test_forward_map_and_noise_predictor() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5, 2))
    gt = rng.normal(size=2)
    a = 0.3
    g, s = query_from_forward(gt, a)
    np.testing.assert_allclose(g, gt / np.sqrt(a))
    assert s == pytest.approx(np.sqrt(0.7 / 0.3))
    # posterior of x0 given G_t directly: weights exp(-|G_t - sqrt(a) x_i|^2 / (2 (1-a)))
    lw = -np.sum((gt - np.sqrt(a) * x) ** 2, axis=1) / (2 * (1 - a))
    r = np.exp(lw - lw.max())
    r /= r.sum()
    np.testing.assert_allclose(responsibilities(x, g, s), r, rtol=1e-12)
    eps = noise_prediction(x, gt, a)
    np.testing.assert_allclose(eps, (gt - np.sqrt(a) * (r @ x)) / np.sqrt(1 - a), rtol=1e-12)
    np.testing.assert_allclose(mean_from_noise_prediction(eps, gt, a), r @ x, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 8),
    d=st.integers(1, 3),
    sigma=st.floats(0.2, 3.0),
    seed=st.integers(0, 10_000),
)
def test_deletion_shift_both_forms_equal_direct(n: int, d: int, sigma: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    g = rng.normal(size=d)
    m = posterior_mean(x, g, sigma)
    direct = np.array([m - posterior_mean(np.delete(x, k, 0), g, sigma) for k in range(n)])
    scale = max(1.0, float(np.abs(x).max()))
    np.testing.assert_allclose(deletion_shifts(x, g, sigma), direct, atol=1e-12 * scale)
    np.testing.assert_allclose(
        deletion_shifts(x, g, sigma, form="leave_one_out"), direct, atol=1e-12 * scale
    )


def test_deletion_shift_dominant_record_stable() -> None:
    # r_k -> 1: 1 - r_k cancels in plain arithmetic; the log form keeps it
    x = np.array([[0.0], [5.0], [6.0]])
    s = deletion_shifts(x, [0.0], 0.5)
    direct = posterior_mean(x, [0.0], 0.5) - posterior_mean(x[1:], [0.0], 0.5)
    np.testing.assert_allclose(s[0], direct, rtol=1e-10)


def test_jacobian_matches_finite_differences() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = rng.normal(size=(7, 3))
        g = rng.normal(size=3)
        sigma = 0.8
        jac = query_jacobian(x, g, sigma)
        h = 1e-6
        fd = np.empty((3, 3))
        for c in range(3):
            e = np.zeros(3)
            e[c] = h
            fd[:, c] = (posterior_mean(x, g + e, sigma) - posterior_mean(x, g - e, sigma)) / (2 * h)
        np.testing.assert_allclose(jac, fd, atol=1e-8)
        assert np.linalg.eigvalsh(jac).min() >= -1e-12


def test_two_record_vector_is_two_point_deletion_shift() -> None:
    rng = np.random.default_rng(4)
    for _ in range(10):
        x, y, g = rng.normal(size=(3, 2))
        t = two_record_vector(x, y, g, 0.7)
        np.testing.assert_allclose(t, posterior_mean(np.stack([x, y]), g, 0.7) - y, atol=1e-14)
        np.testing.assert_allclose(t, deletion_shifts(np.stack([x, y]), g, 0.7)[0], atol=1e-14)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0, 10.0])
def test_corollary1_limit_along_g_gamma(gamma: float) -> None:
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(2, 3))
    sigma = 0.9
    g = x + gamma * (x - y)
    expected = (x - y) / (1 + np.exp(-(2 * gamma + 1) * np.sum((x - y) ** 2) / (2 * sigma**2)))
    np.testing.assert_allclose(two_record_vector(x, y, g, sigma), expected, rtol=1e-13)


def test_theorem1_coefficients_reconstruct_shift() -> None:
    rng = np.random.default_rng(6)
    for n in (2, 3, 6):
        x = rng.normal(size=(n, 2))
        g = rng.normal(size=2)
        shifts = deletion_shifts(x, g, 0.5)
        for k in range(n):
            c = theorem1_coefficients(x, g, 0.5, k)
            recon = sum(c[i] * two_record_vector(x[k], x[i], g, 0.5) for i in range(n) if i != k)
            np.testing.assert_allclose(recon, shifts[k], atol=1e-13)
            assert np.all(c >= 0) and c.sum() <= 1 + 1e-12
            if n == 2:
                assert c.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: posterior_mean([[0.0, 1.0]], [0.0, 0.0], 0.0), "sigma"),
        (lambda: posterior_mean([[0.0, 1.0]], [0.0, 0.0], -1.0), "sigma"),
        (lambda: posterior_mean([[0.0, 1.0]], [0.0, 0.0, 0.0], 1.0), "query"),
        (lambda: posterior_mean([[np.nan, 1.0]], [0.0, 0.0], 1.0), "data"),
        (lambda: posterior_mean(np.zeros((0, 2)), [0.0, 0.0], 1.0), "data"),
        (lambda: deletion_shifts([[0.0, 1.0]], [0.0, 0.0], 1.0), "data"),
        (lambda: query_from_forward([1.0], 1.0), "alpha_bar"),
        (lambda: query_from_forward([1.0], 0.0), "alpha_bar"),
        (lambda: query_from_forward([np.inf], 0.5), "noisy"),
        (lambda: deletion_shifts([[0.0], [1.0]], [0.0], 1.0, form="x"), "form"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_names_parameter(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError) as err:
        call()
    assert err.value.name == name


def test_bad_type() -> None:
    with pytest.raises(InvalidTypeError):
        posterior_mean("abc", [0.0], 1.0)
