"""Composed and subsampled Gaussian releases: checked against exact GDP composition, mpmath,
quadrature of the hockey-stick divergence, and an independent accountant (prv-accountant)."""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting import gdp
from dpopt.accounting.composition import (
    GaussianSteps,
    composed_delta,
    composed_epsilon,
    largest_bound,
    smallest_noise_multiplier,
)
from dpopt.accounting.subsampled_rdp import (
    DEFAULT_ORDERS,
    rdp_epsilon_from_curve,
    subsampled_gaussian_rdp,
)
from dpopt.errors import DpoptError, InfeasibleError, InvalidParameterError, InvalidTypeError

# ----------------------------------------------------------------------------- references


def exact_gdp_epsilon(mu: float, delta: float) -> float:
    """ε on the Balle-Wang curve of mu-GDP, root-found in mpmath (independent of dpopt)."""
    mp.mp.dps = 40
    m = mp.mpf(mu)

    def f(e: mp.mpf) -> mp.mpf:
        return mp.ncdf(m / 2 - e / m) - mp.e**e * mp.ncdf(-m / 2 - e / m) - mp.mpf(delta)

    if f(0) <= 0:
        return 0.0
    return float(mp.findroot(f, (mp.mpf(0), mp.mpf(50)), solver="bisect"))


def mp_rdp_poisson(p: float, q: float, alpha: int) -> float:
    """Mironov-Talwar-Zhang binomial sum for integer alpha, at 50 digits."""
    mp.mp.dps = 50
    pp, qq = mp.mpf(p), mp.mpf(q)
    a = mp.fsum(
        mp.binomial(alpha, k) * (1 - pp) ** (alpha - k) * pp**k * mp.e ** ((k * k - k) * qq / 2)
        for k in range(alpha + 1)
    )
    return float(mp.log(a) / (alpha - 1))


def exact_delta_one_step(p: float, sigma: float, eps: float) -> float:
    """Exact δ(ε) of ONE Poisson-subsampled Gaussian step (add/remove), both directions, in
    closed form at 40 digits: the hockey-stick divergence between P = (1-p)N(0,σ²) + pN(1,σ²)
    and Q = N(0,σ²) is an integral over a half-line where the likelihood ratio exceeds e^ε."""
    mp.mp.dps = 40
    s, pp, ee = mp.mpf(sigma), mp.mpf(p), mp.e ** mp.mpf(eps)

    def tail0(x: mp.mpf) -> mp.mpf:  # P(N(0,σ²) >= x)
        return mp.ncdf(-x / s)

    def tail1(x: mp.mpf) -> mp.mpf:  # P(N(1,σ²) >= x)
        return mp.ncdf(-(x - 1) / s)

    # P - e^ε Q >= 0  iff  p exp((2x-1)/(2σ²)) >= e^ε - 1 + p
    x1 = s**2 * mp.log((ee - 1 + pp) / pp) + mp.mpf(1) / 2
    d1 = (1 - pp - ee) * tail0(x1) + pp * tail1(x1)
    # Q - e^ε P >= 0  iff  e^ε p exp((2x-1)/(2σ²)) <= 1 - e^ε (1-p)   (needs the right side > 0)
    c = 1 - ee * (1 - pp)
    d2 = mp.mpf(0)
    if c > 0:
        x2 = s**2 * mp.log(c / (ee * pp)) + mp.mpf(1) / 2
        d2 = c * (1 - tail0(x2)) - ee * pp * (1 - tail1(x2))
    return float(max(d1, d2))


# ----------------------------------------------------------------------------- no subsampling


@pytest.mark.parametrize(
    ("bounds", "delta"),
    [((0.01,) * 100, 1e-5), ((0.5, 0.2, 1.3), 1e-6), ((2.0,), 1e-9), ((0.04, 0.09), 1e-3)],
)
def test_no_subsampling_matches_exact_gdp_composition(bounds: tuple[float, ...],
                                                     delta: float) -> None:
    run = [GaussianSteps(q) for q in bounds]
    mu = math.sqrt(math.fsum(bounds))
    ref = exact_gdp_epsilon(mu, delta)
    res = composed_epsilon(run, delta)
    assert res.accountant == "gdp-exact"
    assert ref <= res.value <= ref * (1 + 1e-9) + 1e-12
    # the PLD is pessimistic and close; RDP is a valid but looser bound
    assert ref * (1 - 1e-9) <= res.candidates["pld"] <= ref * (1 + 2e-3) + 1e-3
    assert res.candidates["rdp"] >= ref
    # δ(ε) agrees with the closed form delta_for_epsilon(ε; μ)
    d = composed_delta(run, 1.0)
    exact_d = float(gdp.delta_for_epsilon(1.0, mu))
    assert exact_d <= d.value <= exact_d * (1 + 1e-9) + 1e-300
    assert d.candidates["pld"] >= exact_d * (1 - 1e-9)


def test_self_composition_equals_heterogeneous_list() -> None:
    a = composed_epsilon(GaussianSteps(0.05, steps=20), 1e-5).value
    b = composed_epsilon([GaussianSteps(0.05)] * 20, 1e-5).value
    assert a == pytest.approx(b, rel=1e-12)


# ----------------------------------------------------------------------------- RDP


@settings(max_examples=25)
@given(
    p=st.floats(1e-4, 0.9),
    q=st.floats(0.01, 4.0),
    alpha=st.integers(2, 40),
)
def test_integer_order_rdp_matches_mpmath(p: float, q: float, alpha: int) -> None:
    ours = float(subsampled_gaussian_rdp(q, p, [float(alpha)], "poisson")[0])
    ref = mp_rdp_poisson(p, q, alpha)
    assert ours >= ref * (1 - 1e-13)
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-15)


@settings(max_examples=5)
@given(p=st.floats(1e-3, 0.5), sigma=st.floats(0.8, 5.0), a=st.floats(1.05, 12.0))
def test_fractional_orders_are_upper_bounds_of_the_true_divergence(p: float, sigma: float,
                                                                   a: float) -> None:
    """Our fractional-order value (log-convex interpolation) is never below the Rényi divergence
    of the sampled Gaussian computed by quadrature (both directions, mpmath)."""
    mp.mp.dps = 20
    s, pp, al = mp.mpf(sigma), mp.mpf(p), mp.mpf(a)

    def ratio(z: mp.mpf) -> mp.mpf:  # mixture density / N(0, σ²) density
        return (1 - pp) + pp * mp.e ** ((2 * z - 1) / (2 * s**2))

    fwd = mp.quad(lambda z: mp.npdf(z, 0, s) * ratio(z) ** al, [-mp.inf, 0, 1, mp.inf])
    bwd = mp.quad(lambda z: mp.npdf(z, 0, s) * ratio(z) ** (1 - al), [-mp.inf, 0, 1, mp.inf])
    true = float(max(mp.log(fwd), mp.log(bwd)) / (al - 1))
    ours = float(subsampled_gaussian_rdp(1.0 / sigma**2, p, [a], "poisson")[0])
    assert ours >= true * (1 - 1e-9)


def test_rdp_without_subsampling_is_exact_line() -> None:
    out = subsampled_gaussian_rdp(0.3, 1.0, [1.5, 2.0, 10.0])
    np.testing.assert_allclose(out, [0.225, 0.3, 1.5], rtol=1e-9)


# ----------------------------------------------------------------------------- subsampling


@pytest.mark.parametrize(("p", "sigma", "eps"), [(0.1, 1.0, 0.5), (0.01, 0.7, 1.0),
                                                  (0.3, 2.0, 0.1)])
def test_one_subsampled_step_never_below_exact_divergence(p: float, sigma: float,
                                                          eps: float) -> None:
    run = GaussianSteps.from_noise_multiplier(sigma, 1, p, "poisson")
    exact = exact_delta_one_step(p, sigma, eps)
    res = composed_delta(run, eps)
    assert res.value >= exact * (1 - 1e-9)
    assert res.candidates["pld"] >= exact * (1 - 1e-9)
    assert res.candidates["rdp"] >= exact * (1 - 1e-9)
    assert res.candidates["pld"] <= exact * 1.05 + 1e-6  # and the PLD is tight


@pytest.mark.parametrize(("p", "sigma", "steps", "delta"),
                         [(0.01, 1.0, 1000, 1e-5), (0.05, 1.5, 200, 1e-6), (0.2, 3.0, 50, 1e-5)])
def test_poisson_against_prv_accountant(p: float, sigma: float, steps: int,
                                        delta: float) -> None:
    prv = pytest.importorskip("prv_accountant")
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    acc = prv.PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(sampling_probability=p, noise_multiplier=sigma),
        max_self_compositions=steps, eps_error=0.01, delta_error=delta / 1000,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lower, _estimate, upper = acc.compute_epsilon(delta=delta, num_self_compositions=steps)
    res = composed_epsilon(GaussianSteps.from_noise_multiplier(sigma, steps, p, "poisson"), delta)
    assert res.accountant == "pld"
    assert res.value >= lower  # never optimistic against prv's certified lower end
    assert res.value <= upper + 1e-3  # and as tight as prv's upper end
    assert res.candidates["rdp"] >= res.value


def test_heterogeneous_sequence_is_between_its_parts() -> None:
    a = GaussianSteps.from_noise_multiplier(1.0, 100, 0.02, "poisson")
    b = GaussianSteps.from_noise_multiplier(2.0, 100, 0.05, "poisson")
    ea = composed_epsilon(a, 1e-5, discretization=1e-3).value
    eab = composed_epsilon([a, b], 1e-5, discretization=1e-3).value
    eaa = composed_epsilon([a, a], 1e-5, discretization=1e-3).value
    assert ea < eab
    assert eab < eaa or b.bound < a.bound


@settings(max_examples=10)
@given(steps=st.integers(1, 60), extra=st.integers(1, 60), p=st.floats(0.01, 1.0))
def test_epsilon_increases_with_steps(steps: int, extra: int, p: float) -> None:
    one = composed_epsilon(GaussianSteps(0.5, steps, p, "poisson"), 1e-5,
                           accountants=("gdp-exact", "rdp"))
    more = composed_epsilon(GaussianSteps(0.5, steps + extra, p, "poisson"), 1e-5,
                            accountants=("gdp-exact", "rdp"))
    assert more.value >= one.value


def test_without_replacement_uses_the_symmetrised_pld_and_beats_no_subsampling() -> None:
    run = GaussianSteps.from_noise_multiplier(1.1, 100, 0.01, "without_replacement")
    res = composed_epsilon(run, 1e-5)
    assert res.accountant == "pld" and res.candidates["pld"] < res.candidates["rdp"]
    full = composed_epsilon(GaussianSteps.from_noise_multiplier(1.1, 100), 1e-5).value
    assert 0 < res.value < full
    # the bound without amplification is offered, and equals the unsubsampled run's at that q
    same_q = composed_epsilon(GaussianSteps(run.bound, 100), 1e-5).value
    assert res.candidates["gdp-exact"] == pytest.approx(same_q, rel=1e-12)
    # below the PLD's δ range, RDP answers
    tiny = composed_epsilon(run, 1e-200)
    assert tiny.accountant == "rdp" and math.isinf(tiny.candidates["pld"])


def test_tiny_delta_falls_back_to_rdp() -> None:
    run = GaussianSteps.from_noise_multiplier(1.0, 100, 0.01, "poisson")
    res = composed_epsilon(run, 1e-200)
    assert res.accountant == "rdp" and math.isfinite(res.value)
    assert math.isinf(res.candidates["pld"])


# ----------------------------------------------------------------------------- inverse


def test_largest_bound_without_subsampling_is_exact() -> None:
    from dpopt.accounting.budgets import ApproxDP

    q, how = largest_bound(1.0, 1e-6, 25)
    assert how == "gdp-exact"
    total = ApproxDP(1.0, 1e-6).mahalanobis_bound()
    assert q * 25 == pytest.approx(total, rel=1e-12)
    assert exact_gdp_epsilon(math.sqrt(25 * q), 1e-6) <= 1.0


def test_largest_bound_subsampled_is_certified_and_nearly_largest() -> None:
    rtol = 1e-3
    q, how = largest_bound(2.0, 1e-5, 200, 0.02, "poisson", rtol=rtol, discretization=1e-3)
    assert how in ("pld", "rdp")
    ok = composed_epsilon(GaussianSteps(q, 200, 0.02, "poisson"), 1e-5, discretization=1e-3)
    assert ok.value <= 2.0
    worse = composed_epsilon(GaussianSteps(q * (1 + 4 * rtol), 200, 0.02, "poisson"), 1e-5,
                             discretization=1e-3)
    assert worse.value > 2.0
    sigma, _ = smallest_noise_multiplier(2.0, 1e-5, 200, 0.02, "poisson", rtol=rtol,
                                         discretization=1e-3)
    assert sigma**2 * q >= 1.0


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"bound": 1.0, "steps": 0}, "steps"),
        ({"bound": 1.0, "steps": 2.5}, "steps"),
        ({"bound": 1.0, "steps": -3}, "steps"),
        ({"bound": 1.0, "sampling_rate": 0.0}, "sampling_rate"),
        ({"bound": 1.0, "sampling_rate": 1.5}, "sampling_rate"),
        ({"bound": 1.0, "sampling_rate": float("nan")}, "sampling_rate"),
        ({"bound": 0.0}, "bound"),
        ({"bound": float("inf")}, "bound"),
        ({"bound": 1.0, "sampling": "bernoulli"}, "sampling"),
    ],
)
def test_bad_steps_and_rates_are_named(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        GaussianSteps(**kwargs)
    assert info.value.name == name


def test_bool_steps_is_a_type_error() -> None:
    with pytest.raises(InvalidTypeError):
        GaussianSteps(1.0, steps=True)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, 2.0, float("nan")])
def test_bad_delta_is_named(delta: float) -> None:
    with pytest.raises(InvalidParameterError) as info:
        composed_epsilon(GaussianSteps(1.0), delta)
    assert info.value.name == "delta"


def test_mixed_relations_and_bad_accountants_are_refused() -> None:
    a = GaussianSteps(1.0, 1, 0.1, "poisson")
    b = GaussianSteps(1.0, 1, 0.1, "without_replacement")
    with pytest.raises(InvalidParameterError):
        composed_epsilon([a, b], 1e-5)
    with pytest.raises(InvalidParameterError):
        composed_epsilon(a, 1e-5, accountants=("moments",))
    with pytest.raises(InvalidTypeError):
        composed_epsilon("steps", 1e-5)


def test_unreachable_target_is_named() -> None:
    with pytest.raises(InfeasibleError, match="epsilon"):
        largest_bound(0.0, 1e-300, 10, 0.5, "poisson", accountants=("rdp",))


def test_library_failures_never_escape_as_raw_tracebacks() -> None:
    from dpopt.accounting import _dp_accounting as lib

    with pytest.raises(DpoptError):
        lib._call("a test", lambda: 1 / 0)


def test_default_orders_are_valid() -> None:
    assert all(a > 1 for a in DEFAULT_ORDERS)
    eps, order = rdp_epsilon_from_curve([2.0, 4.0], [0.0, 0.0], 1e-5)
    assert eps >= 0 and order in (2.0, 4.0)


def test_tiny_noise_skips_the_pld_instead_of_exhausting_memory() -> None:
    run = GaussianSteps(bound=1e4, steps=3, sampling_rate=1e-4, sampling="poisson")
    res = composed_epsilon(run, 1e-5)
    assert math.isinf(res.candidates["pld"]) and res.accountant in ("rdp", "gdp-exact")
    assert composed_delta(run, 1.0).candidates["pld"] == 1.0


@settings(max_examples=5)
@given(
    eps=st.floats(0.05, 8.0),
    log10_delta=st.floats(-300.0, -2.0),
    steps=st.integers(1, 400),
    p=st.one_of(st.just(1.0), st.floats(1e-3, 1.0)),
)
def test_inverse_round_trip_is_certified(eps: float, log10_delta: float, steps: int,
                                         p: float) -> None:
    names = ("gdp-exact", "rdp")  # the fast accountants (the PLD is covered above)
    delta = 10.0**log10_delta
    try:
        q, _ = largest_bound(eps, delta, steps, p, "poisson", rtol=1e-3, accountants=names)
    except InfeasibleError:
        return
    run = GaussianSteps(q, steps, p, "poisson")
    assert composed_epsilon(run, delta, accountants=names).value <= eps
    if q < 1e4:
        bigger = GaussianSteps(q * 1.004, steps, p, "poisson")
        assert composed_epsilon(bigger, delta, accountants=names).value > eps * (1 - 1e-12)
