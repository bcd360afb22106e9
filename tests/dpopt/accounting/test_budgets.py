"""Privacy budgets, their Mahalanobis bounds, the parser and the reverse privacy report."""

from __future__ import annotations

import dataclasses
import json
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting.budgets import (
    GDP,
    MIDP,
    RDP,
    ZCDP,
    AllOf,
    ApproxDP,
    Budget,
    PrivacyReport,
    mi_binary,
    mi_binary_inverse,
    parse_budget,
    privacy_report,
)
from dpopt.accounting.gdp import delta_for_epsilon, epsilon_for_delta, mu_for
from dpopt.errors import InvalidParameterError, InvalidTypeError

# ---------------------------------------------------------------- reference values

PSI = [
    (1e-4, 1.249984375e-5),
    (0.01, 0.00124844009607),
    (0.1, 0.01234627673612),
    (0.5, 0.05887828223340),
    (1.0, 0.11142148218474),
    (2.0, 0.20134547158481),
    (4.0, 0.33683082034683),
    (8.0, 0.50007213606684),
    (16.0, 0.63272019373687),
    (32.0, 0.68653581946199),
    (64.0, 0.69305364548292),
]
PSI_INV = [
    (0.001, 0.008008005347),
    (0.01, 0.08080546483),
    (0.1, 0.8865867397),
    (0.3, 3.380033745),
    (0.5, 7.997502475),
    (0.69, 37.49546188),
]


def test_mi_binary_math_values() -> None:
    q = np.array([p[0] for p in PSI])
    got = mi_binary(q)
    # 1e-4 is given to 10 digits (its exact value is 1.24998437526e-5)
    np.testing.assert_allclose(got, [p[1] for p in PSI], rtol=3e-10)
    np.testing.assert_allclose(np.asarray(got)[1:], [p[1] for p in PSI[1:]], rtol=1e-12)
    assert mi_binary(0.0) == 0.0
    assert mi_binary(1e-7) == pytest.approx(1e-7 / 8 - 1e-14 / 64, rel=1e-14)


def test_mi_binary_vs_mpmath() -> None:
    for q in [3e-3, 0.7, 5.0, 150.0]:
        with mpmath.workdps(30):
            rq = mpmath.sqrt(q)

            def f(z: mpmath.mpf, q: float = q, rq: mpmath.mpf = rq) -> mpmath.mpf:
                return mpmath.log1p(mpmath.exp(-q / 2 - rq * z)) * mpmath.npdf(z)

            ref = mpmath.log(2) - mpmath.quad(f, [-mpmath.inf, -rq / 2, mpmath.inf])
        assert mi_binary(q) == pytest.approx(float(ref), rel=1e-12)


def test_mi_binary_inverse_math_values() -> None:
    kappa = np.array([p[0] for p in PSI_INV])
    got = np.asarray(mi_binary_inverse(kappa))
    np.testing.assert_allclose(got, [p[1] for p in PSI_INV], rtol=1e-9)
    # safe side: psi(q) <= kappa
    assert np.all(np.asarray(mi_binary(got)) <= kappa)


# ---------------------------------------------------------------- budgets -> bound

BALLE_WANG_Q = [
    (1.0, 1e-5, 0.0718514046548),
    (0.5, 1e-5, 0.020223842997),
    (1.0, 1e-6, 0.0560289638253),
    (2.0, 1e-5, 0.251554096909),
    (0.1, 1e-3, 0.0033012778463),
    (5.0, 1e-10, 0.609610300836),
    (8.0, 1e-12, 1.20162886649),
    (1.0, 1e-20, 0.0128017606826),
    (0.2, 0.1, 0.189196066933),
]


@pytest.mark.parametrize(("eps", "delta", "q"), BALLE_WANG_Q)
def test_approx_dp_bound(eps: float, delta: float, q: float) -> None:
    budget = ApproxDP(epsilon=eps, delta=delta)
    got = budget.mahalanobis_bound()
    assert got == pytest.approx(q, rel=1e-9)
    # never under-noises: the exact delta at this bound (50 digits) is <= the target
    with mpmath.workdps(50):
        m = mpmath.sqrt(mpmath.mpf(got))
        d = mpmath.ncdf(m / 2 - eps / m) - mpmath.exp(eps) * mpmath.ncdf(-m / 2 - eps / m)
        assert d <= mpmath.mpf(delta)
    assert got == pytest.approx(mu_for(eps, delta) ** 2, rel=1e-12)


def test_simple_bounds() -> None:
    assert RDP(8, 1).mahalanobis_bound() == 0.25
    assert RDP([2, 4, 8], [1, 1.5, 2]).mahalanobis_bound() == 0.5
    assert RDP([2, 4, 8], 1.0).mahalanobis_bound() == 0.25
    assert RDP(3.0, 0.1).mahalanobis_bound() <= 2 * 0.1 / 3  # exact rational 1/15, rounded down
    assert ZCDP(0.5).mahalanobis_bound() == 1.0
    assert GDP(1.0).mahalanobis_bound() == 1.0
    from fractions import Fraction

    for mu in [0.1, 0.3, 1.7, 2.9]:
        assert Fraction(GDP(mu).mahalanobis_bound()) <= Fraction(mu) ** 2
    q = MIDP(0.1).mahalanobis_bound()
    assert q == pytest.approx(0.8865867397, rel=1e-9)
    assert MIDP(0.1, relation="add_remove").mahalanobis_bound() == pytest.approx(q / 4, rel=1e-15)
    both = AllOf(GDP(1.0), ZCDP(0.3), ApproxDP(1.0, 1e-5))
    assert both.mahalanobis_bound() == pytest.approx(0.0718514046548, rel=1e-9)
    assert "zCDP" in both.describe() and "GDP" in str(both)


def test_budgets_are_immutable_and_hashable() -> None:
    budgets: list[Budget] = [
        RDP([2, 4], [1, 2]),
        ZCDP(0.5),
        GDP(1.0),
        ApproxDP(1.0, 1e-6),
        MIDP(0.1),
        AllOf(GDP(1.0), ZCDP(0.2)),
    ]
    for b in budgets:
        assert isinstance(b, Budget)
        hash(b)
        assert isinstance(b.describe(), str) and b.describe()
        field = dataclasses.fields(b)[0].name  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(b, field, 3.0)
    assert RDP(2, 1) == RDP([2.0], [1.0])
    with pytest.raises(TypeError):
        Budget()  # type: ignore[abstract]


# ---------------------------------------------------------------- parser


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("rdp:alpha=8,epsilon=1", RDP(8, 1)),
        ("rdp:alpha=2;4;8,epsilon=1;1.5;2", RDP([2, 4, 8], [1, 1.5, 2])),
        ("zcdp:rho=0.5", ZCDP(0.5)),
        ("gdp:mu=1", GDP(1.0)),
        ("approx:epsilon=1,delta=1e-6", ApproxDP(1.0, 1e-6)),
        ("dp:epsilon=1, delta=1e-6", ApproxDP(1.0, 1e-6)),
        ("midp:kappa=0.1", MIDP(0.1)),
        ("MIDP:kappa=0.1,relation=add_remove", MIDP(0.1, "add_remove")),
        (" gdp:mu=1 & zcdp:rho=0.3", AllOf(GDP(1.0), ZCDP(0.3))),
    ],
)
def test_parse_budget(spec: str, expected: Budget) -> None:
    assert parse_budget(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "gdp",
        "gdp:",
        "gdp:mu",
        "gdp:mu=",
        "gdp:mu=abc",
        "gdp:mu=nan",
        "gdp:mu=inf",
        "gdp:mu=-1",
        "gdp:mu=1,mu=2",
        "gdp:sigma=1",
        "foo:mu=1",
        "approx:epsilon=1",
        "approx:epsilon=1,delta=2",
        "rdp:alpha=1,epsilon=1",
        "rdp:alpha=2;3,epsilon=1;2;3",
        "midp:kappa=0.8",
        "midp:kappa=0.1,relation=sideways",
        "midp:kappa=0.1,relation=add-remove",
        "midp:kappa=0.1,adjacency=add_remove",
        "gdp:mu=1&",
    ],
)
def test_parse_budget_malformed(spec: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        parse_budget(spec)
    assert info.value.name == "spec"
    assert repr(spec)[:40] in str(info.value) or spec == ""


def test_approx_dp_underflow_is_infeasible() -> None:
    from dpopt.errors import InfeasibleError

    with pytest.raises(InfeasibleError):
        ApproxDP(0.0, 1e-300).mahalanobis_bound()


def test_parse_budget_type() -> None:
    with pytest.raises(InvalidTypeError):
        parse_budget(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- report


def test_report_fields() -> None:
    rep = privacy_report(1.0)
    assert isinstance(rep, PrivacyReport)
    assert rep.zcdp_rho == 0.5 and rep.gdp_mu == 1.0
    np.testing.assert_array_equal(rep.rdp_epsilon([2, 4, 10]), [1.0, 2.0, 5.0])
    assert rep.epsilon(1e-5) == pytest.approx(4.37717809568, rel=1e-9)
    assert rep.delta(1.0) == pytest.approx(0.126936737506644, rel=1e-12)
    assert rep.log_delta(20.0) == pytest.approx(math.log(2.664707e-86), rel=1e-8)
    assert rep.mi_nats == pytest.approx(0.11142148218474, rel=3e-11)
    # the report evaluates at sqrt(q) rounded up: never below the exact-mu answer
    ref = np.asarray(epsilon_for_delta([1e-5, 1e-6], 1.0))
    assert np.all(np.asarray(rep.epsilon([1e-5, 1e-6])) >= ref)
    np.testing.assert_allclose(rep.epsilon([1e-5, 1e-6]), ref, rtol=1e-14)
    np.testing.assert_allclose(rep.delta([0.5, 2.0]), delta_for_epsilon([0.5, 2.0], 1.0), rtol=0)
    d = rep.to_dict()
    json.dumps(d)
    assert d["mahalanobis_bound"] == 1.0
    eps_at = {r["delta"]: r["epsilon"] for r in d["epsilon_for_delta"]}
    assert eps_at[1e-5] == pytest.approx(4.37717809568, rel=1e-9)
    assert set(eps_at) == {1e-5, 1e-6, 1e-9}
    assert d["schema"] == "dpopt.privacy-report/1"
    assert "zCDP" in rep.describe()
    zero = privacy_report(0.0)
    assert zero.epsilon(1e-9) == 0.0 and zero.delta(0.0) == 0.0 and zero.mi_nats == 0.0


def test_report_satisfies() -> None:
    rep = privacy_report(0.07)
    assert rep.satisfies(ApproxDP(1.0, 1e-5))
    assert not rep.satisfies(ApproxDP(1.0, 1e-6))
    assert rep.satisfies(AllOf(ZCDP(0.035), GDP(0.27)))
    assert not rep.satisfies(AllOf(ZCDP(0.035), GDP(0.26)))
    with pytest.raises(InvalidTypeError):
        rep.satisfies(0.5)  # type: ignore[arg-type]


def test_gdp_mu_rounds_up() -> None:
    from fractions import Fraction

    for q in [2.0, 0.1, 3.3, 7e-5]:
        mu = privacy_report(q).gdp_mu
        assert Fraction(mu) ** 2 >= Fraction(q)


# ---------------------------------------------------------------- properties

bounds = st.floats(1e-4, 200.0)


@settings(max_examples=25, deadline=None)
@given(q=bounds, log10_delta=st.floats(-30.0, -2.0), alpha=st.floats(1.1, 100.0))
def test_round_trip_bound_report_budget(q: float, log10_delta: float, alpha: float) -> None:
    rep = privacy_report(q)
    delta = 10.0**log10_delta
    eps = rep.epsilon(delta)
    budgets: list[Budget] = [
        GDP(rep.gdp_mu),
        ZCDP(rep.zcdp_rho),
        RDP(alpha, rep.rdp_epsilon(alpha)),
        AllOf(GDP(rep.gdp_mu), RDP([alpha, 2 * alpha], rep.rdp_epsilon([alpha, 2 * alpha]))),
    ]
    if eps > 0:
        budgets.append(ApproxDP(float(eps), delta))
    for b in budgets:
        assert rep.satisfies(b), b
        assert b.mahalanobis_bound() == pytest.approx(q, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(q=st.floats(1e-3, 30.0))
def test_round_trip_midp(q: float) -> None:
    rep = privacy_report(q)
    kappa = rep.mi_nats
    assert kappa >= mi_binary(q)  # reported leakage is rounded up
    budget = MIDP(kappa)
    assert rep.satisfies(budget)
    assert budget.mahalanobis_bound() == pytest.approx(q, rel=1e-7)
    # and from the exact psi (no rounding up) the bound is never above q
    assert MIDP(float(mi_binary(q))).mahalanobis_bound() <= q


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.01, 50.0), log10_delta=st.floats(-300.0, -1.0))
def test_round_trip_budget_report(eps: float, log10_delta: float) -> None:
    delta = 10.0**log10_delta
    budget = ApproxDP(eps, delta)
    rep = privacy_report(budget.mahalanobis_bound())
    assert rep.satisfies(budget)
    assert rep.delta(eps) <= delta
    got = rep.epsilon(delta)
    assert got <= eps * (1 + 1e-12)
    assert got == pytest.approx(eps, rel=1e-8)


def test_bound_of_every_budget_is_admitted() -> None:
    budgets: list[Budget] = [
        RDP([1.5, 3.0, 7.0], [0.1, 0.7, 1.3]),
        ZCDP(0.123),
        GDP(0.77),
        ApproxDP(0.3, 1e-9),
        ApproxDP(0.0, 0.2),
        MIDP(0.05),
        MIDP(0.6, "add_remove"),
        AllOf(GDP(0.5), ApproxDP(1.0, 1e-6)),
    ]
    for b in budgets:
        q = b.mahalanobis_bound()
        assert b.admits(q) and privacy_report(q).satisfies(b), b
        assert not b.admits(q * (1 + 1e-6)), b


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.01, 5.0), b=st.floats(0.01, 5.0), c=st.floats(0.01, 5.0))
def test_allof_is_min_and_associative(a: float, b: float, c: float) -> None:
    x, y, z = GDP(a), ZCDP(b), RDP(4.0, c)
    flat = AllOf(x, y, z).mahalanobis_bound()
    assert (
        flat
        == AllOf(AllOf(x, y), z).mahalanobis_bound()
        == AllOf(x, AllOf(y, z)).mahalanobis_bound()
    )
    assert flat == min(x.mahalanobis_bound(), y.mahalanobis_bound(), z.mahalanobis_bound())


@settings(max_examples=20, deadline=None)
@given(e1=st.floats(0.0, 20.0), e2=st.floats(0.0, 20.0), log10_delta=st.floats(-20.0, -1.0))
def test_approx_bound_monotone(e1: float, e2: float, log10_delta: float) -> None:
    lo, hi = sorted((e1, e2))
    d = 10.0**log10_delta
    assert ApproxDP(lo, d).mahalanobis_bound() <= ApproxDP(hi, d).mahalanobis_bound()
    assert ApproxDP(hi, d / 10).mahalanobis_bound() <= ApproxDP(hi, d).mahalanobis_bound()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: RDP(1.0, 1.0), "alpha"),
        (lambda: RDP(np.inf, 1.0), "alpha"),
        (lambda: RDP(2.0, 0.0), "epsilon"),
        (lambda: RDP(2.0, np.nan), "epsilon"),
        (lambda: RDP([2.0, 3.0], [1.0, 2.0, 3.0]), "alpha, epsilon"),
        (lambda: RDP([[2.0, 3.0]], [1.0, 2.0]), "alpha"),
        (lambda: ZCDP(0.0), "rho"),
        (lambda: ZCDP(-1.0), "rho"),
        (lambda: GDP(np.nan), "mu"),
        (lambda: GDP(np.inf), "mu"),
        (lambda: ApproxDP(-1.0, 1e-5), "epsilon"),
        (lambda: ApproxDP(1.0, 0.0), "delta"),
        (lambda: ApproxDP(1.0, 1.0), "delta"),
        (lambda: MIDP(0.0), "kappa"),
        (lambda: MIDP(0.7), "kappa"),
        (lambda: MIDP(0.1, "sideways"), "relation"),  # type: ignore[arg-type]
        (lambda: MIDP(0.1, "replace"), "relation"),  # type: ignore[arg-type]
        (lambda: AllOf(), "budgets"),
        (lambda: privacy_report(-1.0), "bound"),
        (lambda: privacy_report(np.nan), "bound"),
        (lambda: privacy_report(1.0).epsilon(0.0), "delta"),
        (lambda: privacy_report(1.0).delta(-1.0), "epsilon"),
        (lambda: privacy_report(1.0).rdp_epsilon(0.5), "alpha"),
        (lambda: mi_binary_inverse(0.7), "kappa"),
    ],
)
def test_bad_values(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert info.value.name == name


@pytest.mark.parametrize(
    "call",
    [
        lambda: ApproxDP("1", 1e-5),  # type: ignore[arg-type]
        lambda: GDP(None),  # type: ignore[arg-type]
        lambda: RDP("2", 1.0),
        lambda: AllOf(GDP(1.0), 0.5),  # type: ignore[arg-type]
        lambda: MIDP(0.1, 3),  # type: ignore[arg-type]
        lambda: privacy_report("1"),
    ],
)
def test_bad_types(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidTypeError):
        call()
