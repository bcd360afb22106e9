"""certificates.rigorous: exact PSD proofs, exact dual bound, error-bounded ratio pass."""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.covariance import check
from certificates.problem import ArrayVectors, CovarianceProgram, FactoredDual
from certificates.rigorous import (
    ExactArray,
    certified_min_eigenvalue,
    certify_psd,
    exact_dual_bound,
    exact_trace_product,
    ratio_upper_bound,
)
from certificates.rounding import round_down, round_up
from tests.canonical import CANONICAL, F1
from tests.certificates.closed_form import cube, kkt_dual, pair

#: The canonical cases with a nonsingular closed-form optimum (the rank-deficient one needs a
#: solver's lifted dual: ``tests/solvers/test_checker_on_solvers.py``).
CLOSED = tuple(c for c in CANONICAL if c.name != "F4_rankdef")


def test_certify_psd_exact_boundaries() -> None:
    assert certify_psd(np.eye(3))
    assert not certify_psd(np.array([[1.0, 1.0], [1.0, 1.0]]))  # singular: not proven PD
    assert certify_psd(np.array([[2.0, 1.0], [1.0, 2.0]]), 0.999)  # eigenvalues 1, 3
    assert not certify_psd(np.array([[2.0, 1.0], [1.0, 2.0]]), 1.0)
    # a 1-ulp perturbation below the boundary is seen exactly
    a = np.array([[1.0, 0.5], [0.5, 0.25 + 2.0**-40]])
    assert certify_psd(a)
    a[1, 1] = 0.25
    assert not certify_psd(a)


def test_round_helpers() -> None:
    x = Fraction(1, 3)
    assert Fraction(round_down(x)) <= x <= Fraction(round_up(x))
    assert round_up(x) == np.nextafter(round_down(x), 1.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(2, 6))
def test_certified_min_eigenvalue_below_truth(seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    m = a @ a.T + 0.01 * np.eye(d)
    low = certified_min_eigenvalue(m)
    with mpmath.workdps(40):
        true = min(mpmath.eigsy(mpmath.matrix(m.tolist()))[0])
    assert 0 < low <= true
    assert low >= 0.5 * float(true)


def test_exact_dual_bound_against_fractions() -> None:
    rng = np.random.default_rng(3)
    d, k = 3, 4
    s = rng.normal(size=(k, d))
    u = rng.normal(size=(k, d))
    lam = rng.uniform(0.1, 1.0, size=k)
    g = rng.normal(size=(d, 2))
    w = np.array(F1.weight)
    dual = FactoredDual(np.arange(k), lam, u, g)
    low, dval, e_norm = exact_dual_bound(s, w, 0.7, 0.2, dual, 0.25)
    fr = np.vectorize(Fraction, otypes=[object])
    sf, uf, lf, gf, wf = fr(s), fr(u), fr(lam), fr(g), fr(w)
    h = gf @ gf.T
    e = wf - h - sum(lf[i] * np.outer(uf[i], uf[i]) for i in range(k))
    dd = Fraction(0.2) * sum(h[i, i] for i in range(d)) + sum(
        lf[i] * (2 * sum(uf[i] * sf[i]) - Fraction(0.7)) for i in range(k)
    )
    e2 = sum(x * x for x in e.ravel())
    assert Fraction(dval) <= dd < Fraction(dval) + Fraction(abs(dval)) * 2**-50
    assert Fraction(e_norm) ** 2 >= e2
    assert e_norm <= np.sqrt(float(e2)) * (1 + 1e-15)
    assert Fraction(low) <= dd / (1 + Fraction(e_norm) / Fraction(0.25))


def test_exact_trace_product_rounds_up() -> None:
    w = np.array([[0.1, 0.2], [0.2, 0.3]])
    s = np.array([[1 / 3, 0.7], [0.7, 1 / 7]])
    exact = Fraction(0)
    for a, b in zip(w.ravel(), s.ravel(), strict=True):
        exact += Fraction(a) * Fraction(b)
    up = exact_trace_product(w, s)
    assert Fraction(up) >= exact and up == round_up(exact)


def test_exact_array_arithmetic() -> None:
    a = ExactArray.of(np.array([0.5, 0.1]))
    b = ExactArray.of(np.array([3.0, 1e-300]))
    assert (a * b).sum() == Fraction(0.5) * 3 + Fraction(0.1) * Fraction(1e-300)
    assert (a - b).sum() == Fraction(0.5) + Fraction(0.1) - 3 - Fraction(1e-300)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ratio_upper_bound_vs_mpmath(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = 4
    a = rng.normal(size=(d, d))
    sigma = a @ a.T + 1e-3 * np.eye(d)  # condition number ~1e3-1e5
    s = rng.normal(size=(50, d))
    chol = np.asarray(np.linalg.cholesky(sigma), dtype=np.float64)
    lam_low = certified_min_eigenvalue(sigma)
    bound, est, arg = ratio_upper_bound(ArrayVectors(s), sigma, chol, lam_low, chunk=7)
    with mpmath.workdps(50):
        m = mpmath.matrix(sigma.tolist())
        vals = [(mpmath.matrix(v.tolist()).T * mpmath.lu_solve(m, mpmath.matrix(v.tolist())))[0]
                for v in s]
        true = max(vals)
    assert bound >= true
    assert bound <= float(true) * (1 + 1e-9)
    assert arg == int(np.argmax([float(v) for v in vals]))
    assert est == pytest.approx(float(true), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_ratio_upper_bound_tight_for_singular_optimum_with_ridge(seed: int) -> None:
    """Vectors in a subspace, Sigma ridged by 1e-12 off it (condition ~1e12): the residual bound
    stays within 1e-9 of the mpmath value (a bound through Sigma >= (1-eps)LL^T loses ~1e-4)."""
    rng = np.random.default_rng(seed)
    d, r = 6, 3
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    span, comp = basis[:, :r], basis[:, r:]
    a = rng.normal(size=(r, r))
    sigma = span @ (a @ a.T + 0.1 * np.eye(r)) @ span.T + 1e-12 * comp @ comp.T
    sigma = 0.5 * (sigma + sigma.T)
    s = rng.normal(size=(40, r)) @ span.T
    chol = np.asarray(np.linalg.cholesky(sigma), dtype=np.float64)
    lam_low = certified_min_eigenvalue(sigma)
    assert lam_low > 0
    bound, _, _ = ratio_upper_bound(ArrayVectors(s), sigma, chol, lam_low)
    with mpmath.workdps(60):
        m = mpmath.matrix(sigma.tolist())
        true = max((mpmath.matrix(v.tolist()).T * mpmath.lu_solve(m, mpmath.matrix(v.tolist())))[0]
                   for v in s)
    assert bound >= true
    assert bound <= float(true) * (1 + 1e-9)


def _cube_case(w_diag: list[float], q: float) -> tuple[CovarianceProgram, mpmath.mpf]:
    d = len(w_diag)
    s = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
    prob = CovarianceProgram(s, np.diag(w_diag), q)
    with mpmath.workdps(50):
        exact = sum(mpmath.sqrt(mpmath.mpf(x)) for x in w_diag) ** 2 / mpmath.mpf(q)
    return prob, exact


def _mp_value(case_name: str) -> mpmath.mpf:
    with mpmath.workdps(50):
        r2 = mpmath.sqrt(2)
        return {
            "F1": (r2 + 1 + mpmath.sqrt(mpmath.mpf("0.5"))) ** 2,
            "F1_half": 2 * (r2 + 1 + mpmath.sqrt(mpmath.mpf("0.5"))) ** 2,
            "F2": mpmath.mpf("1.5"),
            "F3": mpmath.mpf(7),
            "F4_rankdef": (r2 + 1) ** 2 / 2,
        }[case_name]


@pytest.mark.parametrize("case", CLOSED, ids=[c.name for c in CLOSED])
def test_rigorous_interval_contains_mp_optimum(case) -> None:  # type: ignore[no-untyped-def]
    sigma, dual = pair(case)
    fl = check(case.problem(), sigma, dual)
    rg = check(case.problem(), sigma, dual, rigorous=True)
    exact = _mp_value(case.name)
    assert rg.rigorous and rg.certified
    assert mpmath.mpf(rg.lower) <= exact <= mpmath.mpf(rg.upper)
    assert (fl.lower - rg.lower) / fl.lower < 1e-9  # loses < 1e-9 relative to the float bound
    assert rg.upper == pytest.approx(fl.upper, rel=1e-9)


@pytest.mark.parametrize(("w_diag", "q"), [([0.5, 2.0], 1.0), ([1.0, 3.0, 0.2], 0.4),
                                           ([2.0, 0.7, 1.3, 5.0], 2.5)])
def test_rigorous_cube_closed_form(w_diag: list[float], q: float) -> None:
    prob, exact = _cube_case(w_diag, q)
    _, sigma, _ = cube(np.array(w_diag), q)
    rg = check(prob, sigma, kkt_dual(prob, sigma), rigorous=True)
    assert rg.certified
    assert mpmath.mpf(rg.lower) <= exact <= mpmath.mpf(rg.upper)
