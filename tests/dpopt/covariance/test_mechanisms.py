"""Noise-releasing mechanisms: shapes, validation, reproducibility and the noise law."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpopt.covariance.mechanisms import GaussianMechanism, LaplaceMechanism, as_generator
from dpopt.errors import InvalidParameterError, InvalidTypeError

COV = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])


def test_gaussian_shapes_and_scalar() -> None:
    mech = GaussianMechanism(COV)
    assert mech.dim == 3
    assert mech.release([1.0, 2.0, 3.0], rng=1).shape == (3,)
    assert mech.release(np.zeros((5, 4, 3)), rng=1).shape == (5, 4, 3)
    assert mech.noise(7, rng=0).shape == (7, 3)
    one = GaussianMechanism.isotropic(2.0)
    out = one.release(1.5, rng=3)
    assert isinstance(out, float) and out != 1.5


def test_gaussian_reproducible_and_fresh() -> None:
    mech = GaussianMechanism(COV)
    a = mech.release(np.zeros(3), rng=42)
    b = mech.release(np.zeros(3), rng=np.random.default_rng(42))
    c = mech.release(np.zeros(3), rng=np.random.SeedSequence(42))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    # OS-seeded default: two draws differ (probability of equality is 0)
    assert not np.array_equal(mech.release(np.zeros(3)), mech.release(np.zeros(3)))


def test_gaussian_empirical_covariance_matches() -> None:
    n = 200_000
    mech = GaussianMechanism(COV)
    x = mech.release(np.tile([1.0, -1.0, 0.5], (n, 1)), rng=123)
    emp_mean = x.mean(axis=0)
    emp_cov = np.cov(x, rowvar=False)
    # standard error of a covariance entry ~ sqrt((S_ii S_jj + S_ij^2)/n) <= 2/sqrt(n) ~ 4.5e-3
    np.testing.assert_allclose(emp_cov, COV, atol=0.03)
    np.testing.assert_allclose(emp_mean, [1.0, -1.0, 0.5], atol=0.02)
    # whitened noise is standard normal: KS test per coordinate
    white = np.linalg.solve(np.linalg.cholesky(COV), (x - [1.0, -1.0, 0.5]).T).T
    for i in range(3):
        assert stats.kstest(white[:, i], "norm").pvalue > 1e-4


def test_gaussian_singular_covariance_noise_stays_in_range() -> None:
    v = np.array([1.0, 2.0, -1.0])
    cov = np.outer(v, v) * 0.7  # rank one
    z = GaussianMechanism(cov).noise(2000, rng=5)
    # every noise vector is parallel to v (up to sqrt(rounding) of the zero eigenvalues)
    resid = z - np.outer(z @ v / (v @ v), v)
    assert np.max(np.abs(resid)) < 1e-6 * np.max(np.abs(z))
    np.testing.assert_allclose(np.var(z @ v / (v @ v)), 0.7, rtol=0.1)


@pytest.mark.parametrize(
    "bad",
    [
        [[1.0, 2.0], [0.0, 1.0]],  # not symmetric
        [[1.0, 0.0], [0.0, -1.0]],  # not PSD
        [[np.nan, 0.0], [0.0, 1.0]],
        [1.0, 2.0],  # not a matrix
        np.ones((2, 3)),
    ],
)
def test_gaussian_rejects_bad_covariance(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="covariance"):
        GaussianMechanism(bad)  # type: ignore[arg-type]


def test_gaussian_rejects_bad_value() -> None:
    mech = GaussianMechanism(COV)
    with pytest.raises(InvalidParameterError, match="value"):
        mech.release([1.0, 2.0])
    with pytest.raises(InvalidParameterError, match="value"):
        mech.release(1.0)
    with pytest.raises(InvalidParameterError, match="value"):
        mech.release([1.0, np.inf, 2.0])
    with pytest.raises(InvalidParameterError, match="sigma"):
        GaussianMechanism.isotropic(0.0)
    with pytest.raises(InvalidParameterError, match="dim"):
        GaussianMechanism.isotropic(1.0, dim=0)


def test_laplace_shapes_and_law() -> None:
    mech = LaplaceMechanism(0.7)
    assert mech.dim is None
    assert isinstance(mech.release(2.0, rng=0), float)
    x = mech.release(np.zeros(100_000), rng=9)
    assert x.shape == (100_000,)
    assert stats.kstest(x, stats.laplace(scale=0.7).cdf).pvalue > 1e-4
    np.testing.assert_allclose(np.mean(np.abs(x)), 0.7, rtol=0.02)  # E|L| = b


def test_laplace_vector_scale() -> None:
    b = np.array([0.5, 2.0])
    mech = LaplaceMechanism(b)
    assert mech.dim == 2
    x = mech.release(np.zeros((50_000, 2)), rng=11)
    np.testing.assert_allclose(np.mean(np.abs(x), axis=0), b, rtol=0.03)
    with pytest.raises(InvalidParameterError, match="value"):
        mech.release([1.0, 2.0, 3.0])
    a1 = mech.release([1.0, 2.0], rng=4)
    a2 = mech.release([1.0, 2.0], rng=4)
    np.testing.assert_array_equal(a1, a2)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf, [1.0, 0.0], np.ones((2, 2))])
def test_laplace_rejects_bad_scale(bad: object) -> None:
    with pytest.raises((InvalidParameterError, InvalidTypeError), match="scale"):
        LaplaceMechanism(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1.5, "seed", True, -3, np.random.RandomState(0)])
def test_as_generator_rejects(bad: object) -> None:
    with pytest.raises((InvalidTypeError, InvalidParameterError), match="rng"):
        as_generator(bad)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    scale=st.floats(min_value=1e-3, max_value=1e3),
)
def test_scaling_round_trip(seed: int, scale: float) -> None:
    """Noise scales linearly: sigma*xi for Gaussian, b*L for Laplace, same seed."""
    g1 = GaussianMechanism.isotropic(1.0, dim=2).noise(3, rng=seed)
    gs = GaussianMechanism.isotropic(scale, dim=2).noise(3, rng=seed)
    np.testing.assert_allclose(gs, scale * g1, rtol=1e-12)
    l1 = np.asarray(LaplaceMechanism(1.0).release(np.zeros(4), rng=seed))
    ls = np.asarray(LaplaceMechanism(scale).release(np.zeros(4), rng=seed))
    np.testing.assert_allclose(ls, scale * l1, rtol=1e-12)
