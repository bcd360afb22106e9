"""Coupling certificates: marginals, exact repair, log-domain threshold, dual potentials."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.coupling import check_coupling, round_to_marginals
from certificates.errors import InvalidParameterError

# R1: quantile pieces and the exact Laplace moment at alpha=2, b=0.646254278
P = np.array([0.5, 0.3, 0.2])
Q = np.array([0.2, 0.3, 0.3, 0.2])
X = np.array([0.0, 1.0, 2.0])
Y = np.array([0.0, 1.0, 2.0, 3.0])
ROWS = np.array([0, 0, 1, 2])
COLS = np.array([0, 1, 2, 3])
MASS = np.array([0.2, 0.3, 0.3, 0.2])


def lap_log_moment(a: float, t: np.ndarray) -> np.ndarray:
    # stable form (Mironov) (independent of dpopt.accounting.renyi)
    return (a - 1) * t + np.log(a / (2 * a - 1) + (a - 1) / (2 * a - 1) * np.exp(-(2 * a - 1) * t))


def r1_cost(b: float, a: float = 2.0) -> np.ndarray:
    return lap_log_moment(a, np.abs(X[:, None] - Y[None, :]) / b)


def test_r1_certified_at_calibrated_scale_and_fails_below() -> None:
    b = 0.646254278 * (1 + 1e-8)
    cert = check_coupling(P, Q, ROWS, COLS, MASS, r1_cost(b), 1.0)
    assert cert.certified and not cert.repaired
    assert cert.marginal_error == 0.0
    # closed form: 0.2 + 0.8 M(1/b) with log M = a-1 ... equals e^{(a-1) eps} at the root
    assert cert.log_value == pytest.approx(1.0, abs=1e-7)
    low = check_coupling(P, Q, ROWS, COLS, MASS, r1_cost(0.64), 1.0)
    assert not low.certified and "fails" in low.message


def test_callable_cost_matches_matrix() -> None:
    mat = r1_cost(0.9)
    a = check_coupling(P, Q, ROWS, COLS, MASS, mat, 1.0)
    b = check_coupling(P, Q, ROWS, COLS, MASS, lambda i, j: mat[i, j], 1.0)
    assert a.log_value == b.log_value


def test_small_marginal_error_is_charged_at_the_largest_cost_it_meets() -> None:
    mass = MASS + np.array([3e-11, -1e-11, 2e-11, 0.0])
    cost = r1_cost(1.0)
    cert = check_coupling(P, Q, ROWS, COLS, mass, cost, 1.0)
    assert cert.repaired and cert.certified
    exact = check_coupling(P, Q, ROWS, COLS, MASS, cost, 1.0)
    # independent bound: V <= sum (w/W)(C - 1)^+ + E (Cmax - 1)^+ + 1, E >= 4e-11 (excess)
    assert cert.residual_mass >= 3e-11
    assert cert.residual_log_cost <= float(np.max(cost)) + 1e-15
    assert cert.log_value >= exact.log_value  # never below the exact coupling's value


def test_residual_meeting_a_far_atom_is_charged() -> None:
    # issue 12: a plan ignoring an atom of mass 1e-13 at 300 was treated as exact
    p, q = np.array([0.5, 0.5]), np.array([0.5, 0.5 - 1e-13, 1e-13])
    x, y = np.array([0.0, 10.0]), np.array([1.0, 11.0, 300.0])
    b = 0.7153334908745834

    def cost(i, j):
        return lap_log_moment(2.0, np.abs(x[i] - y[j]) / b)

    old = check_coupling(p, q, [0, 1], [0, 1], [0.5, 0.5], cost, 1.0)
    assert not old.certified and old.log_value > 300  # ~ log(1e-13) + 289/b
    # the exact coupling (with the far piece) is scored, and fails at that b, too
    full = check_coupling(p, q, [0, 1, 1], [0, 1, 2], [0.5, 0.5 - 1e-13, 1e-13], cost, 1.0)
    assert not full.certified and full.log_value > 300
    # with alpha, a sliver-level relative deviation is priced by the perturbation bound
    pert = check_coupling(P, Q, ROWS, COLS, MASS * (1 + 1e-15), r1_cost(1.0), 1.0, alpha=2.0)
    assert pert.relative_deviation < 1e-14


def test_perturbation_penalty_formula() -> None:
    from certificates.coupling import perturbation_penalty

    a, d = 3.0, 1e-7
    assert perturbation_penalty(a, d) == pytest.approx(a * np.log1p(d) - (a - 1) * np.log1p(-d))
    assert perturbation_penalty(a, d) >= a * np.log1p(d) - (a - 1) * np.log1p(-d)
    assert perturbation_penalty(np.inf, d) == pytest.approx(np.log1p(d) - np.log1p(-d))
    assert perturbation_penalty(a, 0.0) == 0.0 and perturbation_penalty(a, 1.0) == np.inf


def test_exact_masses_are_checked_exactly() -> None:
    from fractions import Fraction

    from certificates.coupling import ExactMasses

    # exact numerators over any integer denominator; a one-unit error is not a coupling
    p = q = np.array([0.5, 0.5])
    ok = ExactMasses((1, 1), 2)
    cert = check_coupling(p, q, [0, 1], [0, 1], [0.5, 0.5], np.zeros((2, 2)), 1e-300, exact=ok)
    assert cert.certified and cert.marginal_error == 0.0
    bad = ExactMasses((10**30 + 1, 10**30), 2 * 10**30)
    cert = check_coupling(p, q, [0, 1], [0, 1], [0.5, 0.5], np.zeros((2, 2)), 0.0, exact=bad,
                          marginal_tol=0.0)
    assert not cert.certified
    assert Fraction(bad.numerators[0], bad.denominator) != Fraction(1, 2)


def test_large_marginal_error_fails() -> None:
    mass = MASS.copy()
    mass[0] += 1e-6
    cert = check_coupling(P, Q, ROWS, COLS, mass, r1_cost(1.0), 1.0)
    assert not cert.certified and "not a coupling" in cert.message


def test_independent_coupling_is_valid_but_worse() -> None:
    ii, jj = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    prod = np.outer(P, Q)
    cost = r1_cost(1.0)
    ind = check_coupling(P, Q, ii.ravel(), jj.ravel(), prod.ravel(), cost, 1.0)
    opt = check_coupling(P, Q, ROWS, COLS, MASS, cost, 1.0)
    assert ind.log_value > opt.log_value


def test_potentials_give_gap() -> None:
    cost = r1_cost(1.0)
    shift = 0.5
    scaled = np.exp(cost - shift)
    # optimal potentials by the dual LP (scipy)
    from scipy.optimize import linprog

    n, m = cost.shape
    a_ub = np.zeros((n * m, n + m))
    for i in range(n):
        for j in range(m):
            a_ub[i * m + j, i] = 1
            a_ub[i * m + j, n + j] = 1
    res = linprog(-np.concatenate([P, Q]), A_ub=a_ub, b_ub=scaled.ravel(), bounds=(None, None))
    u, v = res.x[:n], res.x[n:]
    cert = check_coupling(P, Q, ROWS, COLS, MASS, cost, 1.0, potentials=(u, v, shift))
    assert cert.gap is not None and abs(cert.gap) < 1e-9
    # infeasible potentials are repaired, so the bound stays below the optimum
    bad = check_coupling(P, Q, ROWS, COLS, MASS, cost, 1.0, potentials=(u + 1.0, v, shift))
    assert bad.gap is not None and bad.gap >= -1e-12
    # a suboptimal plan shows a positive gap
    ii, jj = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    ind = check_coupling(
        P, Q, ii.ravel(), jj.ravel(), np.outer(P, Q).ravel(), cost, 1.0, potentials=(u, v, shift)
    )
    assert ind.gap is not None and ind.gap > 0.01


def test_max_aggregate_for_pure_case() -> None:
    dist = np.abs(X[:, None] - Y[None, :])
    ok = check_coupling(P, Q, ROWS, COLS, MASS, dist / 1.0, 1.0, aggregate="max")
    assert ok.certified and ok.log_value == 1.0
    bad = check_coupling(P, Q, ROWS, COLS, MASS, dist / 0.99, 1.0, aggregate="max")
    assert not bad.certified


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_property_rounding_gives_exact_marginals(n, m, seed) -> None:
    rng = np.random.default_rng(seed)
    p = rng.random(n) + 0.1
    p /= p.sum()
    q = rng.random(m) + 0.1
    q /= q.sum()
    plan = np.outer(p, q) * (1 + 1e-3 * rng.standard_normal((n, m)))
    ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    r, c, w = round_to_marginals(p, q, ii.ravel(), jj.ravel(), np.maximum(plan.ravel(), 0))
    assert np.all(w >= 0)
    np.testing.assert_allclose(np.bincount(r, weights=w, minlength=n), p, atol=1e-15)
    np.testing.assert_allclose(np.bincount(c, weights=w, minlength=m), q, atol=1e-15)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"mass": np.array([0.2, 0.3, 0.3, -0.2])}, "mass"),
        ({"rows": np.array([0, 0, 1, 5])}, "rows"),
        ({"rows": np.array([0.0, 0, 1, 2])}, "rows"),
        ({"mass": np.array([0.2, 0.3, 0.3])}, "mass"),
        ({"q": np.array([0.2, 0.3, 0.3, 0.3])}, "q"),
        ({"aggregate": "median"}, "aggregate"),
        ({"threshold": np.nan}, "threshold"),
    ],
)
def test_bad_inputs(kwargs, name) -> None:
    args: dict[str, Any] = {"p": P, "q": Q, "rows": ROWS, "cols": COLS, "mass": MASS}
    args["threshold"] = 1.0
    extra = {k: kwargs.pop(k) for k in list(kwargs) if k == "aggregate"}
    args.update(kwargs)
    with pytest.raises(InvalidParameterError) as err:
        check_coupling(
            args["p"], args["q"], args["rows"], args["cols"], args["mass"], r1_cost(1.0),
            args["threshold"], **extra,
        )
    assert err.value.name == name


def test_log_average_relative_precision_against_mpmath() -> None:
    import mpmath as mp

    from certificates.coupling import log_average

    mp.mp.dps = 40
    w = np.array([0.2, 0.3, 0.5])
    cases = ([1e-12, 3e-12, 0.0], [0.5, -2.0, 1.0], [5.0, 300.0, 1.0])
    for c in map(np.array, cases):
        ref = mp.log(mp.fsum(mp.mpf(wi) * mp.exp(mp.mpf(ci)) for wi, ci in zip(w, c, strict=True)))
        assert log_average(c, w) == pytest.approx(float(ref), rel=1e-14, abs=0)
