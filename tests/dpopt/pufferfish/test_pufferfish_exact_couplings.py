"""Issue 12 (Pufferfish part): exact couplings, every route, every scale re-checked against the
true Rényi divergence computed independently (tests/dpopt/pufferfish/renyi_reference.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import binom, poisson

from dpopt.pufferfish import (
    GaussianCost,
    LaplaceCost,
    RenyiCost,
    Scenario,
    calibrate,
    rpp_winf_gaussian,
    rpp_winf_laplace,
    wasserstein_inf,
    winf_laplace,
)
from tests.dpopt.pufferfish.renyi_reference import renyi_mpmath, renyi_quadpack, true_divergence

#: worst D_alpha / epsilon seen per family (printed at the end of the module with -s)
WORST: dict[str, list[float]] = {}


def _record(family: str, ratio: float) -> None:
    WORST.setdefault(family, []).append(ratio)


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    for fam, vals in sorted(WORST.items()):
        print(f"\n[{fam}] cases {len(vals)}, worst D/eps {max(vals):.6f}")


def _check_true(sc: Scenario, mech: str, scale: float, alpha: float, eps: float,
                family: str, prefer_mpmath: bool | None = None) -> float:
    worst = 0.0
    for _, _, _, pl, ql in sc.iter_pairs():
        d = true_divergence(pl.support[:, 0], pl.probabilities, ql.support[:, 0],
                            ql.probabilities, mech, scale, alpha, prefer_mpmath)
        worst = max(worst, d)
    _record(family, worst / eps)
    assert worst <= eps * (1 + 1e-9), (worst, eps, scale)
    return worst


# ------------------------------------------------------------------ the reference itself
def test_reference_quadpack_matches_mpmath_and_known_values() -> None:
    # the MATH tables' fixed-scale divergences for R1 (mpmath-confirmed there)
    x, p, y, q = [0, 1, 2], [0.5, 0.3, 0.2], [0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2]
    assert renyi_quadpack(x, p, y, q, "laplace", 1.0, 2.0) == pytest.approx(0.2229446638, 1e-9)
    assert renyi_quadpack(y, q, x, p, "gaussian", 1.0, 5.0) == pytest.approx(2.1235021535, 1e-9)
    assert renyi_mpmath(x, p, y, q, "laplace", 1.0, 2.0) == pytest.approx(0.2229446638, 1e-9)
    # a tiny far atom: both references agree
    a, b = ([0.0, 10.0], [0.5, 0.5]), ([1.0, 11.0, 300.0], [0.5, 0.5 - 1e-13, 1e-13])
    assert renyi_quadpack(*b, *a, "laplace", 5.0, 3.0) == pytest.approx(
        renyi_mpmath(*b, *a, "laplace", 5.0, 3.0), rel=1e-9)


# ------------------------------------------------------------------ reproduced failures
FAR = Scenario.from_laws({"a": ([0, 10], [0.5, 0.5]),
                          "b": ([1, 11, 300], [0.5, 0.5 - 1e-13, 1e-13])})
DELTA = Scenario.from_laws({"a": ([0.0], [1.0]), "b": ([0.0, 100.0], [1 - 1e-13, 1e-13])})


def test_tiny_far_atom_is_not_dropped_laplace() -> None:
    cal = calibrate(FAR, LaplaceCost(2.0), 1.0)
    assert cal.certified and cal.scale > 5.0  # was 0.7153 (true D there: 345.8)
    _check_true(FAR, "laplace", cal.scale, 2.0, 1.0, "regression", prefer_mpmath=True)
    old = true_divergence([0, 10], [0.5, 0.5], [1, 11, 300], [0.5, 0.5 - 1e-13, 1e-13],
                          "laplace", 0.7153334908745834, 2.0)
    assert old == pytest.approx(345.8257849, rel=1e-8)  # the old answer was far from private


def test_tiny_far_atom_is_not_dropped_gaussian() -> None:
    cal = calibrate(FAR, GaussianCost(2.0), 1.0)
    assert cal.certified and cal.scale > 10.0  # was 1.0 (true D there: 84,041)
    _check_true(FAR, "gaussian", cal.scale, 2.0, 1.0, "regression", prefer_mpmath=False)


@pytest.mark.parametrize("cost", [LaplaceCost(2.0), GaussianCost(2.0), LaplaceCost(np.inf)],
                         ids=["laplace", "gaussian", "pure"])
def test_point_mass_vs_tiny_far_atom(cost: RenyiCost) -> None:
    cal = calibrate(DELTA, cost, 1.0)
    assert cal.scale > 0.0  # all three were 0.0
    if cost.is_pure:
        assert cal.scale == 100.0  # W_inf / eps, W_inf = 100
        assert winf_laplace(DELTA, 1.0).scale == 100.0
    else:
        mech = cost.mechanism
        _check_true(DELTA, mech, cal.scale, 2.0, 1.0, "regression", prefer_mpmath=False)
    assert wasserstein_inf(DELTA)[("prior", "a", "b")] == 100.0


K100 = np.arange(101)
BINOM = Scenario.from_laws({"p1": (K100, binom.pmf(K100, 100, 0.1)),
                            "p2": (K100, binom.pmf(K100, 100, 0.2))})


def test_binomial_round_off_no_longer_inflates_winf() -> None:
    cal = calibrate(BINOM, LaplaceCost(50.0), 4.0)
    assert cal.certified and cal.scale < 3.6  # was 12.47 from ~1e-16 round-off pieces
    _check_true(BINOM, "laplace", cal.scale, 50.0, 4.0, "regression")
    # the W_inf baselines see the same exact coupling
    w = wasserstein_inf(BINOM)[("prior", "p1", "p2")]
    assert w < 40
    assert rpp_winf_laplace(BINOM, 50.0, 4.0).scale >= cal.scale


@pytest.mark.parametrize("method", [
    "quantile",
    pytest.param("emd", marks=pytest.mark.slow),
    pytest.param("lp", marks=pytest.mark.slow),
])
def test_binomial_priors_every_route(method: str) -> None:
    # (emd / lp take ~15 s each: the LP is re-solved at every root-finding step)
    # raised "CertificateError ... please report" on the LP route (marginals off by 1.06e-12)
    cal = calibrate(BINOM, LaplaceCost(2.0), 1.0, method=method)
    ref = calibrate(BINOM, LaplaceCost(2.0), 1.0, method="quantile").scale
    assert cal.certified
    assert ref <= cal.scale <= ref * (1 + 1e-6)  # the quantile coupling is optimal here
    for pc in cal.pairs:
        assert pc.certificate.certified and pc.certificate.margin >= 0
    if method == "lp":
        _check_true(BINOM, "laplace", cal.scale, 2.0, 1.0, "regression")


@pytest.mark.parametrize("method", ["quantile", "emd", "lp"])
def test_atom_of_mass_1e8_every_route(method: str) -> None:
    sc = Scenario.from_laws({"a": ([0, 1, 5], [0.5, 0.5 - 1e-8, 1e-8]),
                             "b": ([0, 2, 40], [0.5, 0.5 - 1e-8, 1e-8])})
    for cost, mech in ((GaussianCost(2.0), "gaussian"), (LaplaceCost(3.0), "laplace")):
        cal = calibrate(sc, cost, 1.0, method=method)
        ref = calibrate(sc, cost, 1.0, method="quantile").scale
        assert cal.certified and ref <= cal.scale <= ref * (1 + 1e-6)
        if method == "lp":
            _check_true(sc, mech, cal.scale, cost.alpha, 1.0, "regression")


@pytest.mark.slow
def test_poisson_priors_lp_routes_with_tails() -> None:
    k = np.arange(40)
    sc = Scenario({
        "low": {"s": (k, poisson.pmf(k, 3.0)), "t": (k, poisson.pmf(k, 5.0))},
        "high": {"s": (k, poisson.pmf(k, 6.0)), "t": (k, poisson.pmf(k, 9.0))},
    })
    ref = calibrate(sc, GaussianCost(4.0), 0.5).scale
    cal = calibrate(sc, GaussianCost(4.0), 0.5, method="emd")
    assert cal.certified and ref <= cal.scale <= ref * (1 + 1e-6)
    _check_true(sc, "gaussian", ref, 4.0, 0.5, "regression")
    # HiGHS (absolute tolerances ~1e-7) does not see tails of mass 1e-37: the repaired plan is
    # an exact coupling (certified, private) but not always optimal -- known limitation
    lp = calibrate(sc, GaussianCost(4.0), 0.5, method="lp")
    assert lp.certified and lp.scale >= ref * (1 - 1e-9)
    _check_true(sc, "gaussian", lp.scale, 4.0, 0.5, "regression")


@pytest.mark.parametrize("shift", [1e-170, 1e-300, 1e150])
def test_gaussian_distance_without_underflow(shift: float) -> None:
    sc = Scenario.from_laws({"a": ([0.0], [1.0]), "b": ([shift], [1.0])})
    a, e = 3.0, 0.5
    cal = calibrate(sc, GaussianCost(a), e)
    # deterministic data: sigma = shift * sqrt(alpha / (2 eps)) (Mironov's Gaussian RDP)
    assert cal.scale == pytest.approx(shift * math.sqrt(a / (2 * e)), rel=1e-9)
    assert cal.scale >= shift * math.sqrt(a / (2 * e)) * (1 - 1e-15)
    assert rpp_winf_gaussian(sc, a, e).scale == pytest.approx(cal.scale, rel=1e-9)
    # 2-D with a covariance: same, through the Cholesky solve
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    sc2 = Scenario.from_laws({"a": ([[0.0, 0.0]], [1.0]), "b": ([[shift, -shift]], [1.0])})
    z = np.array([shift, -shift]) / shift
    maha = shift * math.sqrt(z @ np.linalg.solve(cov, z))
    cal2 = calibrate(sc2, GaussianCost(a, covariance=cov), e)
    assert cal2.scale == pytest.approx(maha * math.sqrt(a / (2 * e)), rel=1e-9)


# ------------------------------------------------------------------ custom costs: convexity
@dataclass(frozen=True)
class _SqrtCost(RenyiCost):
    """A (made-up) cost concave in the shift: log C = (alpha - 1) sqrt(|z| / b)."""

    mechanism: ClassVar[str] = "custom"

    def distance(self, diff):
        return np.sum(np.abs(diff), axis=-1)

    def profile(self, t):
        return (self.alpha - 1.0) * np.sqrt(np.asarray(t, dtype=float))


@dataclass(frozen=True)
class _MyLaplace(LaplaceCost):
    """A subclass of a built-in cost: no longer trusted as convex, checked numerically."""


def test_nonconvex_custom_cost_is_not_given_the_quantile_coupling() -> None:
    sc = Scenario.from_laws({"a": ([0.0, 1.0], [0.5, 0.5]), "b": ([1.0, 2.0], [0.5, 0.5])})
    cost = _SqrtCost(2.0)
    auto = calibrate(sc, cost, 1.0)
    forced = calibrate(sc, cost, 1.0, method="quantile")
    assert auto.method == "emd" and auto.certified
    # the LP pairs (0 -> 2, 1 -> 1): C(2) + C(0) < 2 C(1) for a concave cost, so less noise
    assert auto.scale < forced.scale * 0.99
    # closed form: 0.5 e^{sqrt(2/b)} + 0.5 = e^1  ->  b = 2 / log(2e - 1)^2
    assert auto.scale == pytest.approx(2.0 / math.log(2 * math.e - 1) ** 2, rel=1e-9)


def test_convex_custom_cost_is_verified_on_the_grid() -> None:
    sc = Scenario.from_laws({"a": ([0, 1, 2], [0.5, 0.3, 0.2]),
                             "b": ([0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2])})
    mine = calibrate(sc, _MyLaplace(2.0), 1.0)
    assert mine.method == "quantile"
    assert mine.scale == pytest.approx(calibrate(sc, LaplaceCost(2.0), 1.0).scale, rel=1e-12)


# ------------------------------------------------------------------ adversarial families
ALPHAS = st.sampled_from([1.5, 2.0, 8.0, 50.0])
EPS = st.sampled_from([0.1, 1.0, 4.0])
MECH = st.sampled_from(["laplace", "gaussian"])


def _cost(mech: str, a: float) -> RenyiCost:
    return LaplaceCost(a) if mech == "laplace" else GaussianCost(a)


def _run(family: str, x, p, y, q, mech: str, a: float, e: float, method: str = "auto") -> None:
    sc = Scenario.from_laws({"s": (x, p), "t": (y, q)})
    cal = calibrate(sc, _cost(mech, a), e, method=method)
    assert cal.certified
    for pc in cal.pairs:
        assert pc.certificate.log_value <= pc.certificate.threshold
    if cal.scale == 0.0:
        assert sc.law("s").same_as(sc.law("t"))
        return
    _check_true(sc, mech, cal.scale, a, e, family)
    # never more noise than the W_inf baseline of the same (exact) cost; not asserted for the
    # cvxpy/HiGHS route, whose repaired plans can be suboptimal on tails below its tolerances
    base = (rpp_winf_laplace if mech == "laplace" else rpp_winf_gaussian)(sc, a, e).scale
    if method != "lp":
        assert cal.scale <= base * (1 + 1e-9)


_SLOW = settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))


@_SLOW
@given(st.floats(1e-15, 1e-9), st.floats(20.0, 500.0), st.floats(-3.0, 3.0), MECH, ALPHAS, EPS)
def test_family_tiny_far_atoms(tiny, far, shift, mech, a, e) -> None:
    x, p = [0.0, 1.0, 2.0], [0.3, 0.4, 0.3]
    y, q = [shift, 1.0 + shift, far], [0.3, 0.7 - tiny, tiny]
    _run("tiny far atoms", x, p, y, q, mech, a, e)


@_SLOW
@given(st.lists(st.integers(-3, 3), min_size=2, max_size=6),
       st.lists(st.integers(-3, 3), min_size=2, max_size=6), MECH, ALPHAS, EPS,
       st.integers(0, 2**31 - 1))
def test_family_duplicates(xs, ys, mech, a, e, seed) -> None:
    rng = np.random.default_rng(seed)
    p, q = rng.random(len(xs)) + 0.01, rng.random(len(ys)) + 0.01
    _run("duplicates", np.array(xs, float), p / p.sum(), np.array(ys, float), q / q.sum(),
         mech, a, e)


@_SLOW
@given(st.floats(1e-3, 1e6), st.integers(0, 2**31 - 1), MECH, ALPHAS, EPS)
def test_family_huge_ranges(span, seed, mech, a, e) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-span, span, 4), rng.uniform(-span, span, 3)
    p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(3))
    _run("huge ranges", x, p, y, q, mech, a, e)


@_SLOW
@given(st.integers(250, 300), st.integers(0, 2**31 - 1), MECH, ALPHAS, EPS)
def test_family_masses_near_1e300(expo, seed, mech, a, e) -> None:
    rng = np.random.default_rng(seed)
    tiny = 10.0 ** (-expo)
    x, y = np.array([0.0, 1.0, 5.0]), np.array([0.5, 2.0, 8.0])
    p = np.array([0.6, 0.4 - tiny, tiny])
    q = np.array([0.5, 0.5 - tiny * rng.random(), 0.0])
    q[2] = 1.0 - q[0] - q[1]
    _run("masses near 1e-300", x, p, y, q, mech, a, e)


@pytest.mark.slow  # minutes: LP re-solves at every root-finding step
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(30, 120), st.floats(0.05, 0.5), st.floats(0.05, 0.5), MECH, ALPHAS, EPS,
       st.booleans())
def test_family_binomial_poisson(n, t1, t2, mech, a, e, use_poisson) -> None:
    k = np.arange(n + 1)
    if use_poisson:
        p, q = poisson.pmf(k, t1 * n / 4), poisson.pmf(k, t2 * n / 4)
        p, q = p / p.sum(), q / q.sum()
    else:
        p, q = binom.pmf(k, n, t1), binom.pmf(k, n, t2)
    keep_p, keep_q = p > 0, q > 0
    _run("binomial/poisson", k[keep_p], p[keep_p], k[keep_q], q[keep_q], mech, a, e)


@pytest.mark.slow  # minutes: LP re-solves at every root-finding step
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**31 - 1), st.sampled_from(["emd", "lp"]), MECH, ALPHAS)
def test_family_lp_routes_tiny_tails(seed, method, mech, a) -> None:
    rng = np.random.default_rng(seed)
    k = np.arange(25)
    t1, t2 = rng.uniform(0.1, 0.5, 2)
    p, q = binom.pmf(k, 24, t1), binom.pmf(k, 24, t2)
    p[-1] = max(p[-1], 1e-12)  # a tail atom far below the LP tolerances
    p = p / p.sum()
    _run("lp routes", k, p, k, q, mech, a, 1.0, method=method)
