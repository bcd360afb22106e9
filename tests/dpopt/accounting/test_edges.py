"""Regression tests for accounting at the edges of the double range (issue 12).

Every expected value comes from an independent computation: mpmath at 60+ digits (the definition
with raised precision, or the Mills-ratio asymptotic form far in the tail), exact rationals, or
the closed forms of the budgets.
"""

from __future__ import annotations

import math
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from dpopt.accounting.budgets import (
    GDP,
    MIDP,
    RDP,
    ZCDP,
    AllOf,
    ApproxDP,
    BoundOverflowError,
    approx_dp_bound,
    mi_binary,
    privacy_report,
)
from dpopt.accounting.gdp import (
    compose,
    epsilon_for_delta,
    epsilon_for_log_delta,
    gaussian_sigma,
    log_delta_for_epsilon,
    mu_for,
    mu_for_log_delta,
    rdp_to_dp_improved,
    rdp_to_dp_mironov,
)
from dpopt.errors import InfeasibleError, InvalidParameterError, InvalidTypeError

sys.path.insert(0, str(Path(__file__).parent))
from mp_reference import (
    mp_log_delta,
    mp_log_delta_asymptotic,
    mp_log_delta_direct,
)

DBL_MAX = float(np.finfo(np.float64).max)
TINY = 5e-324


def _next_up(x: float) -> float:
    return float(np.nextafter(x, np.inf))


def _next_down(x: float) -> float:
    return float(np.nextafter(x, 0.0))


# ------------------------------------------------------------------ the reference itself


@pytest.mark.parametrize(("eps", "mu"), [(1e7, 1.0), (1e3, 1e-4), (5.0, 1e-6), (1e10, 3.0)])
def test_the_two_mpmath_forms_agree(eps: float, mu: float) -> None:
    direct = mp_log_delta_direct(eps, mu)
    asym = mp_log_delta_asymptotic(eps, mu)
    assert abs((direct - asym) / direct) < mpmath.mpf(10) ** -40


# ------------------------------------------------------------------ log delta far below the range


def test_log_delta_does_not_underflow_to_minus_inf() -> None:
    # the erfcx difference used to underflow below log delta ~ -2e215
    got = log_delta_for_epsilon(1.0, 1.457e-108)
    ref = mp_log_delta(1.0, 1.457e-108)
    assert math.isfinite(got)
    assert abs((got - ref) / ref) < 1e-13
    # a^2/2 close to the overflow threshold stays finite (log delta ~ -5e307)
    got = log_delta_for_epsilon(1e154, 1.0)
    ref = mp_log_delta(1e154, 1.0)
    assert math.isfinite(got) and abs((got - ref) / ref) < 1e-13
    # -inf only when the true value is below the most negative double
    assert log_delta_for_epsilon(1.0, 1e-160) == -math.inf
    assert mp_log_delta(1.0, 1e-160) < -DBL_MAX


def test_mu_for_log_delta_never_accepts_an_underflowed_delta() -> None:
    mu = mu_for_log_delta(1.0, -1e300)
    assert mp_log_delta(1.0, mu) <= -1e300  # safe
    assert mp_log_delta(1.0, mu * (1 + 1e-11)) > -1e300  # and tight
    # the previously accepted answer is far on the unsafe side
    assert mp_log_delta(1.0, 1.457e-108) > -1e300


def test_subnormal_mu_keeps_its_precision() -> None:
    for mu in (5e-324, 1e-320, 3e-310):
        got = log_delta_for_epsilon(0.0, mu)
        ref = mp_log_delta(0.0, mu)
        assert abs(got - ref) < 1e-13 * abs(ref)
    with pytest.raises(InfeasibleError):
        mu_for_log_delta(0.0, -1000.0)  # mu ~ e^-1000 is below every positive double
    mu = mu_for_log_delta(0.0, -740.0)  # subnormal but representable
    assert 0.0 < mu < 1e-310 and mp_log_delta(0.0, mu) <= -740.0


# ------------------------------------------------------------------ representable answers


def test_epsilon_for_huge_mu_is_found() -> None:
    eps = epsilon_for_delta(1e-5, 1e20)  # used to raise SolverError (search capped at 2^80)
    target = math.log(1e-5)
    assert mp_log_delta(eps, 1e20) <= target
    assert mp_log_delta(_next_down(eps), 1e20) > target or eps < 5e39 * (1 + 1e-15)
    assert eps == pytest.approx(5e39, rel=1e-15)


def test_sigma_near_the_top_of_the_range_is_found() -> None:
    sigma = gaussian_sigma(0.0, 1e-300)  # was "beyond the double range"
    assert mp_log_delta(0.0, mpmath.mpf(1) / mpmath.mpf(sigma)) <= math.log(1e-300)
    # delta(0; mu) = 2 Phi(mu/2) - 1 ~ mu / sqrt(2 pi): sigma ~ 1e300 / sqrt(2 pi), up to the
    # safety margin 1e-12 (1 + |log delta|) ~ 7e-10 (relative, as d log delta / d log mu = 1)
    assert sigma == pytest.approx(1e300 / math.sqrt(2 * math.pi), rel=1e-9)
    with pytest.raises(InfeasibleError):
        gaussian_sigma(0.0, 1e-300, 1e10)  # sigma ~ 4e309 is not a double


def test_epsilon_beyond_the_range_is_refused() -> None:
    with pytest.raises(InfeasibleError):
        epsilon_for_delta(1e-300, 1e200)  # eps ~ mu^2 / 2 = 5e399
    with pytest.raises(InfeasibleError):
        epsilon_for_log_delta(-1e300, 1e200)


# ------------------------------------------------------------------ budgets


def test_budget_bounds_beyond_the_range_raise_named_errors() -> None:
    cases = [
        (lambda: GDP(1e200).mahalanobis_bound(), BoundOverflowError, "mu"),
        (lambda: RDP(1.0000001, 1e308).mahalanobis_bound(), BoundOverflowError, "epsilon"),
        (lambda: ZCDP(1e308).mahalanobis_bound(), BoundOverflowError, "rho"),
        (lambda: ApproxDP(1e308, 0.5).mahalanobis_bound(), BoundOverflowError, "epsilon"),
    ]
    for call, kind, name in cases:
        with pytest.raises(kind) as info:
            call()
        assert isinstance(info.value, InvalidParameterError)
        assert info.value.name == name
    for call2 in (
        lambda: GDP(1e-200).mahalanobis_bound(),
        lambda: RDP(1e300, 1e-300).mahalanobis_bound(),
        lambda: ApproxDP(0.0, 1e-200).mahalanobis_bound(),
    ):
        with pytest.raises(InfeasibleError):
            call2()


def test_budget_bounds_at_the_edge_are_exact_and_safe() -> None:
    # the largest finite bounds: 2 rho exactly, mu^2 rounded down
    assert ZCDP(DBL_MAX / 2).mahalanobis_bound() == DBL_MAX
    mu = 1.3e154
    q = GDP(mu).mahalanobis_bound()
    assert math.isfinite(q) and Fraction(q) <= Fraction(mu) ** 2 < Fraction(_next_up(q))
    q = GDP(1e-160).mahalanobis_bound()  # subnormal q, still positive
    assert 0.0 < q and Fraction(q) <= Fraction(1e-160) ** 2 < Fraction(_next_up(q))
    q = RDP(3.0, 1e308).mahalanobis_bound()
    assert Fraction(q) <= Fraction(2) * Fraction(1e308) / 3 < Fraction(_next_up(q))


def test_all_of_skips_vacuous_members() -> None:
    assert AllOf(ZCDP(1e308), GDP(1.0)).mahalanobis_bound() == 1.0
    with pytest.raises(BoundOverflowError):
        AllOf(ZCDP(1e308), GDP(1e200)).mahalanobis_bound()
    with pytest.raises(InfeasibleError):
        AllOf(ZCDP(1e308), GDP(1e-200)).mahalanobis_bound()


def test_approx_dp_bound_matches_the_budget() -> None:
    eps = np.array([0.0, 1e-3, 1.0, 8.0, 1e3])
    delta = np.array([1e-3, 1e-9, 1e-5, 1e-12, 1e-100])
    q = np.asarray(approx_dp_bound(eps, delta))
    for e, d, qi in zip(eps, delta, q, strict=True):
        budget = ApproxDP(float(e), float(d))
        assert budget.mahalanobis_bound() == pytest.approx(qi, rel=1e-14)
        assert budget.admits(float(qi))
        assert mp_log_delta(float(e), mpmath.sqrt(mpmath.mpf(float(qi)))) <= math.log(d)


def test_privacy_report_at_the_top_of_the_range() -> None:
    rep = privacy_report(1e308)
    with pytest.raises(InvalidParameterError) as info:
        rep.rdp_epsilon(10)
    assert info.value.name == "alpha"
    assert rep.rdp_epsilon(1.5) == 7.5e307
    summary = rep.to_dict()
    rdp = {row["alpha"]: row["epsilon"] for row in summary["rdp"]}
    assert rdp[2.0] is None and rdp[1.5] == 7.5e307
    assert rep.mi_nats <= float(np.nextafter(math.log(2.0), np.inf))
    # rho = q/2 rounded up even for a subnormal q
    tiny = privacy_report(TINY)
    assert Fraction(tiny.zcdp_rho) * 2 >= Fraction(TINY)


def test_cli_reports_edge_budgets_as_user_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.cli.main import main

    specs = ("gdp:mu=1e200", "zcdp:rho=1e308", "gdp:mu=1e-200", "rdp:alpha=1.0000001,epsilon=1e308")
    for spec in specs:
        assert main(["account", "convert", spec]) == 2, spec
        err = capsys.readouterr().err
        assert "internal error" not in err and spec.split(":")[1].split("=")[0] in err


# ------------------------------------------------------------------ user RDP curves


def test_user_rdp_curves_are_validated() -> None:
    with pytest.raises(InvalidParameterError, match="nan"):
        rdp_to_dp_improved(1e-5, rdp=lambda a: float("nan"))
    with pytest.raises(InvalidTypeError):
        rdp_to_dp_improved(1e-5, rdp=lambda a: "x")
    with pytest.raises(InvalidParameterError, match="ZeroDivisionError"):
        rdp_to_dp_mironov(1e-5, rdp=lambda a: 1 / 0)
    with pytest.raises(InvalidParameterError, match="infinite"):
        rdp_to_dp_improved(1e-5, rdp=lambda a: math.inf)
    with pytest.raises(InvalidParameterError, match="epsilon >= 0"):
        rdp_to_dp_improved(1e-5, rdp=lambda a: -1.0)
    # a valid curve, numpy scalars included: the Gaussian one matches its closed-form bound
    got = rdp_to_dp_improved(1e-5, rdp=lambda a: np.float64(a / 2.0))
    assert got == pytest.approx(float(rdp_to_dp_improved(1e-5, bound=1.0)), rel=1e-9)


# ------------------------------------------------------------------ composition and MI


def test_compose_rounds_up_exactly() -> None:
    rng = np.random.default_rng(12)
    for _ in range(300):
        k = int(rng.integers(2, 6))
        mus = [float(v) for v in 10 ** rng.uniform(-3, 3, k)]
        r = compose(*mus)
        exact = sum((Fraction(m) ** 2 for m in mus), Fraction(0))
        assert Fraction(r) ** 2 >= exact > Fraction(_next_down(r)) ** 2
    assert compose(3.0, 4.0) == 5.0
    assert compose(1e-300, 1e-300) > 0.0
    with pytest.raises(InvalidParameterError):
        compose(1.5e308, 1.5e308)


def test_mi_binary_large_q_no_warning_and_below_log2() -> None:
    qs = np.array([10.0, 63.9, 64.1, 100.0, 200.0, 400.0, 1e3, 1e6, 1e300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        psi = np.asarray(mi_binary(qs))
    assert np.all(psi <= math.log(2.0)) and np.all(np.diff(psi) >= 0)
    # against mpmath: log 2 - psi(q) = E sp(-q/2 - sqrt(q) Z) at 40 digits
    with mpmath.workdps(40):
        for q, p in zip(qs[:6], psi[:6], strict=True):
            qq = mpmath.mpf(float(q))
            z0 = -mpmath.sqrt(qq) / 2

            def f(z: mpmath.mpf, qq: mpmath.mpf = qq) -> mpmath.mpf:
                return mpmath.log1p(mpmath.exp(-qq / 2 - mpmath.sqrt(qq) * z)) * mpmath.npdf(z)

            ref = mpmath.log(2) - mpmath.quad(f, [-mpmath.inf, z0 - 20, z0, z0 + 20, mpmath.inf])
            assert abs(p - ref) <= 1e-14 * ref
    # MI-DP close to log 2 is still invertible and consistent
    budget = MIDP(math.log(2.0) * (1 - 1e-9))
    q = budget.mahalanobis_bound()
    assert math.isfinite(q) and budget.admits(q)


# ------------------------------------------------------------------ vectorisation


def test_vectorised_inverses_equal_elementwise_calls() -> None:
    rng = np.random.default_rng(13)
    eps = 10 ** rng.uniform(-3, 2, 64)
    delta = 10 ** rng.uniform(-30, -1, 64)
    mus = np.asarray(mu_for(eps, delta))
    sig = np.asarray(gaussian_sigma(eps, delta, 2.0))
    eps_back = np.asarray(epsilon_for_delta(delta, mus))
    q = np.asarray(approx_dp_bound(eps, delta))
    # numpy's SIMD exp/log may round differently inside an array than for a scalar: equal up to
    # a few ulps (each value is separately checked on the safe side by the property tests)
    for i in range(eps.size):
        e, d = float(eps[i]), float(delta[i])
        assert mus[i] == pytest.approx(mu_for(e, d), rel=1e-14)
        assert sig[i] == pytest.approx(gaussian_sigma(e, d, 2.0), rel=1e-14)
        assert eps_back[i] == pytest.approx(epsilon_for_delta(d, float(mus[i])), rel=1e-14)
        assert q[i] == pytest.approx(ApproxDP(e, d).mahalanobis_bound(), rel=1e-14)
        assert ApproxDP(e, d).admits(float(q[i]))
    assert mus.shape == sig.shape == eps_back.shape == q.shape == (64,)
    grid = np.asarray(mu_for(eps[:4, None], delta[None, :5]))
    assert grid.shape == (4, 5)
