"""Rényi log-moments of shifted Laplace/Gaussian noise vs closed forms (Mironov) and mpmath."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting.renyi import (
    gaussian_log_moment,
    gaussian_log_moment_mv,
    kl_gaussian,
    kl_laplace,
    laplace_log_moment,
    renyi_gaussian,
    renyi_gaussian_mv,
    renyi_laplace,
)
from dpopt.errors import DpoptError, InvalidParameterError, InvalidTypeError

REL = 1e-9


@pytest.mark.parametrize(
    ("alpha", "shift", "scale", "expected"),
    [
        (2.0, 1.0, 1.0, 0.619123629999),
        (3.0, 1.0, 1.0, 0.746828141069),
        (2.0, 0.5, 1.0, 0.200303896174),
        (10.0, 1.0, 1.0, 0.928682902097),
        (1.5, 2.0, 0.7, 2.28397650806),
        (32.0, 1.0, 1.0, 0.978148425045),
    ],
)
def test_laplace_math_values(alpha: float, shift: float, scale: float, expected: float) -> None:
    assert renyi_laplace(alpha, shift, scale) == pytest.approx(expected, rel=REL)
    assert renyi_laplace(alpha, -shift, scale) == pytest.approx(expected, rel=REL)


def test_laplace_log_moment_math_values() -> None:
    assert np.exp(laplace_log_moment(2.0, 1.0)) == pytest.approx(1.85729964672, rel=REL)
    assert laplace_log_moment(1.5, 2.0 / 0.7) == pytest.approx(1.14198825403, rel=REL)
    # the naive formula overflows here
    assert laplace_log_moment(100.0, 10.0) == pytest.approx(989.311865361, rel=REL)
    big = laplace_log_moment(1e6, 1e3)
    assert np.isfinite(big)


@pytest.mark.parametrize(
    ("alpha", "shift", "sigma", "expected"),
    [(2.0, 1.0, 1.0, 1.0), (3.0, 1.0, 2.0, 0.375), (10.0, 0.5, 1.0, 1.25)],
)
def test_gaussian_math_values(alpha: float, shift: float, sigma: float, expected: float) -> None:
    assert renyi_gaussian(alpha, shift, sigma) == pytest.approx(expected, rel=1e-15)
    t = shift / sigma
    assert gaussian_log_moment(alpha, t) == pytest.approx((alpha - 1) * expected, rel=1e-15)


def _mp_laplace_log_moment(a: float, t: float) -> mpmath.mpf:
    """log INT f(u)^a f(u-t)^(1-a) du for the unit Laplace density, by mpmath quadrature."""
    a_, t_ = mpmath.mpf(a), mpmath.mpf(t)

    def integrand(u: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(-a_ * abs(u) - (1 - a_) * abs(u - t_)) / 2

    val = mpmath.quad(integrand, [-mpmath.inf, 0, t_, mpmath.inf]) if t > 0 else mpmath.mpf(1)
    return mpmath.log(val)


def test_laplace_vs_mpmath_quadrature() -> None:
    rng = np.random.default_rng(0)
    alphas = np.concatenate([[1.0001, 1.5, 2.0, 7.0, 40.0], 1 + rng.exponential(3.0, 5)])
    ts = np.concatenate([[1e-6, 0.01, 1.0, 5.0, 0.3], rng.exponential(1.0, 5)])
    got = laplace_log_moment(alphas, ts)
    assert isinstance(got, np.ndarray) and got.shape == (10,)
    with mpmath.workdps(30):
        for a, t, g in zip(alphas, ts, got, strict=True):
            ref = _mp_laplace_log_moment(float(a), float(t))
            assert abs(g - float(ref)) <= REL * abs(float(ref)), (a, t, g, ref)


def test_laplace_small_t_relative_precision() -> None:
    # log M ~ a(a-1) t^2 / 2 (1 - t/3): full relative precision although M - 1 is tiny
    a, t = 5.0, np.array([1e-12, 1e-8, 1e-5])
    with mpmath.workdps(40):
        ref = [
            float(
                mpmath.log(
                    (
                        a * mpmath.exp((a - 1) * mpmath.mpf(x))
                        + (a - 1) * mpmath.exp(-a * mpmath.mpf(x))
                    )
                    / (2 * a - 1)
                )
            )
            for x in t
        ]
    np.testing.assert_allclose(laplace_log_moment(a, t), ref, rtol=1e-12)
    np.testing.assert_allclose(kl_laplace(t, 1.0), t**2 / 2 - t**3 / 6, rtol=1e-10)


def test_gaussian_vs_mpmath_quadrature() -> None:
    for a, z, s in [(2.0, 1.0, 1.0), (1.3, 0.7, 0.5), (6.0, 0.4, 2.0)]:
        with mpmath.workdps(30):
            a_, z_, s_ = mpmath.mpf(a), mpmath.mpf(z), mpmath.mpf(s)

            def integrand(u: mpmath.mpf, a_=a_, z_=z_, s_=s_) -> mpmath.mpf:
                return mpmath.npdf(u, z_, s_) ** a_ * mpmath.npdf(u, 0, s_) ** (1 - a_)

            centre = a_ * z_
            ref = mpmath.log(mpmath.quad(integrand, [-mpmath.inf, centre, mpmath.inf])) / (a_ - 1)
        assert renyi_gaussian(a, z, s) == pytest.approx(float(ref), rel=1e-12)


def test_limits_and_special_orders() -> None:
    assert renyi_laplace(np.inf, -3.0, 2.0) == 1.5
    np.testing.assert_array_equal(renyi_gaussian(np.inf, [0.0, 1.0], 1.0), [0.0, np.inf])
    # a -> inf gives t, a -> 1 gives KL
    assert renyi_laplace(1e9, 1.0, 1.0) == pytest.approx(1.0, rel=1e-8)
    assert renyi_laplace(1 + 1e-12, 1.0, 1.0) == pytest.approx(kl_laplace(1.0, 1.0), rel=1e-9)
    assert kl_laplace(2.0, 1.0) == pytest.approx(2 + np.exp(-2.0) - 1, rel=1e-15)
    assert kl_gaussian(1.0, 2.0) == 0.125
    assert laplace_log_moment(3.0, 0.0) == 0.0


def test_broadcasting_shapes() -> None:
    alphas = np.array([2.0, 4.0, 8.0])[:, None]
    shifts = np.array([0.1, 0.5, 1.0, 2.0])
    out = renyi_laplace(alphas, shifts, 1.0)
    assert isinstance(out, np.ndarray) and out.shape == (3, 4)
    for i, a in enumerate(alphas[:, 0]):
        for j, z in enumerate(shifts):
            assert out[i, j] == renyi_laplace(float(a), float(z), 1.0)
    assert isinstance(renyi_laplace(2.0, 1.0, 1.0), float)
    assert np.asarray(renyi_gaussian([2.0, np.inf], 0.0, 1.0)).tolist() == [0.0, 0.0]


def test_multivariate_gaussian() -> None:
    rng = np.random.default_rng(1)
    a_mat = rng.normal(size=(4, 4))
    cov = a_mat @ a_mat.T + 0.5 * np.eye(4)
    z = rng.normal(size=(3, 5, 4))
    got = gaussian_log_moment_mv(2.5, z, cov)
    quad = np.einsum("...i,ij,...j->...", z, np.linalg.inv(cov), z)
    np.testing.assert_allclose(got, 2.5 * 1.5 * quad / 2, rtol=1e-10)
    assert np.shape(got) == (3, 5)
    # broadcast alpha against the batch
    got2 = gaussian_log_moment_mv(np.array([2.0, 3.0, 4.0])[:, None], z, cov)
    assert np.shape(got2) == (3, 5)
    np.testing.assert_allclose(renyi_gaussian_mv(3.0, z, cov), 1.5 * quad, rtol=1e-10)
    # 1-D reduces to the scalar formula
    assert gaussian_log_moment_mv(3.0, [0.5], [[4.0]]) == pytest.approx(
        gaussian_log_moment(3.0, 0.25), rel=1e-15
    )


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(1.01, 200.0),
    t1=st.floats(0.0, 50.0),
    t2=st.floats(0.0, 50.0),
)
def test_laplace_monotone_and_bounded(a: float, t1: float, t2: float) -> None:
    lo, hi = sorted((t1, t2))
    m_lo, m_hi = laplace_log_moment(a, lo), laplace_log_moment(a, hi)
    assert m_lo <= m_hi
    # M^Lap <= e^{(a-1)t} (likelihood-ratio bound) and D_a <= D_inf = t
    assert m_hi <= (a - 1) * hi * (1 + 1e-12) + 1e-300
    assert renyi_laplace(a, hi, 1.0) <= hi * (1 + 1e-12) + 1e-300


@settings(max_examples=30, deadline=None)
@given(t=st.floats(0.01, 20.0), a1=st.floats(1.01, 50.0), a2=st.floats(1.01, 50.0))
def test_renyi_nondecreasing_in_order(t: float, a1: float, a2: float) -> None:
    lo, hi = sorted((a1, a2))
    assert renyi_laplace(lo, t, 1.0) <= renyi_laplace(hi, t, 1.0) * (1 + 1e-12)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: laplace_log_moment(1.0, 1.0), "alpha"),
        (lambda: laplace_log_moment(0.5, 1.0), "alpha"),
        (lambda: laplace_log_moment(np.inf, 1.0), "alpha"),
        (lambda: laplace_log_moment(np.nan, 1.0), "alpha"),
        (lambda: laplace_log_moment(2.0, -1.0), "t"),
        (lambda: laplace_log_moment(2.0, np.inf), "t"),
        (lambda: gaussian_log_moment(2.0, np.nan), "t"),
        (lambda: renyi_laplace(2.0, 1.0, 0.0), "scale"),
        (lambda: renyi_gaussian(2.0, 1.0, -1.0), "sigma"),
        (lambda: renyi_gaussian(2.0, np.nan, 1.0), "shift"),
        (lambda: renyi_laplace([2.0, 3.0], [1.0, 2.0, 3.0], 1.0), "alpha"),
        (lambda: gaussian_log_moment_mv(2.0, [1.0, 2.0], np.eye(3)), "shift"),
        (lambda: gaussian_log_moment_mv(2.0, [1.0, 2.0], [[1.0, 2.0], [2.0, 1.0]]), "covariance"),
    ],
)
def test_bad_values(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert name in str(info.value)


def test_bad_types() -> None:
    with pytest.raises(InvalidTypeError):
        renyi_laplace("2", 1.0, 1.0)
    with pytest.raises(DpoptError):
        kl_gaussian(1.0, None)
