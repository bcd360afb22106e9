"""α-Wasserstein calibration: R1–R3, limits, baselines, monotonicity, routes, d > 1."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import binom

from dpopt.accounting.renyi import renyi_laplace
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.pufferfish import (
    ExponentialCost,
    GaussianCost,
    LaplaceCost,
    Scenario,
    calibrate,
    calibrate_exponential,
    calibrate_gaussian,
    calibrate_laplace,
    make_cost,
    rpp_winf_gaussian,
    rpp_winf_laplace,
    wasserstein_inf,
    winf_laplace,
)

R1 = Scenario.from_laws(
    {"s1": ([0, 1, 2], [0.5, 0.3, 0.2]), "s2": ([0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2])}
)
_K = np.arange(11)
R2 = Scenario.from_laws({"p3": (_K, binom.pmf(_K, 10, 0.3)), "p5": (_K, binom.pmf(_K, 10, 0.5))})
R3 = Scenario.from_laws({"x": ([0.0], [1.0]), "y": ([1.0], [1.0])})

# (a, eps): b_exact, b_paper, b_crude, W_inf/eps, b_WinfRPP, sigma_W, sigma_Winf
R1_TABLE = {
    (2, 0.5): (1.02814612, 3.36799655, 1.68399827, 2, 1.15037592, 1.29768959, 1.41421356),
    (2, 1.0): (0.646254278, 1.74410431, 0.872052154, 1, 0.715333491, 0.933837327, 1),
    (5, 0.5): (1.43783448, 2.27717456, 1.82173965, 2, 1.54714418, 2.13409211, 2.23606798),
    (5, 1.0): (0.832077536, 1.18498191, 0.947985528, 1, 0.871885122, 1.53946868, 1.58113883),
}
R2_TABLE = {
    (2, 0.5): (2.33956107, 8.06197505, 4.03098753, 6, 3.45112776, 2.91908527, 4.24264069),
    (2, 1.0): (1.46340621, 4.06191388, 2.03095694, 3, 2.14600047, 2.10193226, 3),
    (5, 0.5): (3.22319725, 5.15717076, 4.12573661, 6, 4.64143255, 4.89417834, 6.70820393),
    (5, 1.0): (1.88188053, 2.66863034, 2.13490427, 3, 2.61565537, 3.73456964, 4.74341649),
}


def _row(sc: Scenario, a: float, e: float) -> list[float]:
    return [
        calibrate_laplace(sc, a, e).scale,
        calibrate_laplace(sc, a, e, form="paper").scale,
        calibrate_laplace(sc, a, e, form="ratio").scale,
        winf_laplace(sc, e).scale,
        rpp_winf_laplace(sc, a, e).scale,
        calibrate_gaussian(sc, a, e).scale,
        rpp_winf_gaussian(sc, a, e).scale,
    ]


@pytest.mark.parametrize(("sc", "table"), [(R1, R1_TABLE), (R2, R2_TABLE)], ids=["R1", "R2"])
def test_reproduces_math_tables(sc: Scenario, table: dict) -> None:
    for (a, e), expected in table.items():
        got = _row(sc, a, e)
        np.testing.assert_allclose(got, expected, rtol=5e-9, err_msg=f"a={a}, eps={e}")


def test_r1_gaussian_closed_form() -> None:
    # 0.2 + 0.8 exp(a(a-1)/(2 s^2)) = e^{(a-1) eps}
    for a, e in [(2, 0.5), (3, 1.0), (7, 2.0)]:
        s = np.sqrt(a * (a - 1) / (2 * np.log((np.exp((a - 1) * e) - 0.2) / 0.8)))
        assert calibrate_gaussian(R1, a, e).scale == pytest.approx(s, rel=1e-11)


def test_r1_alpha_sweep_and_limits() -> None:
    # a = 1.001/1.1/2/5/100, eps = 1
    alphas = [1.001, 1.1, 2, 5, 100]
    b_exact = [0.469449, 0.493687, 0.646254, 0.832078, 0.990879]
    b_paper = [800.900, 8.90601, 1.74410, 1.18498, 1.00783]
    sigma = [0.632811, 0.667309, 0.933837, 1.53947, 7.06311]
    for a, be, bp, sg in zip(alphas, b_exact, b_paper, sigma, strict=True):
        assert calibrate_laplace(R1, a, 1.0).scale == pytest.approx(be, rel=2e-6)
        assert calibrate_laplace(R1, a, 1.0, form="paper").scale == pytest.approx(bp, rel=3e-6)
        assert calibrate_gaussian(R1, a, 1.0).scale == pytest.approx(sg, rel=2e-6)
    # a -> 1 limits: b = 0.469193, sigma = W_2 / sqrt 2 = 0.632456
    assert calibrate_laplace(R1, 1 + 1e-6, 1.0).scale == pytest.approx(0.469193, rel=1e-5)
    assert calibrate_gaussian(R1, 1 + 1e-6, 1.0).scale == pytest.approx(0.632456, rel=1e-5)


R3_LAPLACE = {
    (2, 0.5): 1.15037592,
    (2, 1.0): 0.715333491,
    (5, 0.5): 1.547144182,
    (5, 1.0): 0.8718851224,
    (10, 1.0): 0.9334304489,
    (1.5, 0.25): 1.533299341,
}


@pytest.mark.parametrize(("ae", "b_rdp"), list(R3_LAPLACE.items()))
def test_deterministic_reduces_to_rdp(ae: tuple[float, float], b_rdp: float) -> None:
    a, e = ae
    b = calibrate_laplace(R3, a, e).scale
    assert b == pytest.approx(b_rdp, rel=1e-9)
    assert renyi_laplace(a, 1.0, b) <= e  # the RDP condition, by dpopt.accounting.renyi
    assert calibrate_laplace(R3, a, e, form="paper").scale == pytest.approx(a / ((a - 1) * e))
    assert calibrate_gaussian(R3, a, e).scale == pytest.approx(np.sqrt(a / (2 * e)), rel=1e-10)
    # independent inversion of the closed form (Mironov)
    d = brentq(
        lambda bb: np.log(a / (2 * a - 1) * np.exp((a - 1) / bb) + (a - 1) / (2 * a - 1)
                          * np.exp(-a / bb)) / (a - 1) - e, 0.05, 50, xtol=1e-15,
    )
    assert b == pytest.approx(d, rel=1e-9)


@pytest.mark.parametrize("sc", [R1, R2], ids=["R1", "R2"])
def test_alpha_infinity_is_winf_over_eps(sc: Scenario) -> None:
    w = max(wasserstein_inf(sc).values())
    for e in (0.5, 1.0, 3.0):
        cal = calibrate_laplace(sc, np.inf, e)
        assert cal.scale == pytest.approx(w / e, rel=1e-14)
        assert cal.scale >= w / e
        assert cal.certified and cal.pairs[0].certificate.aggregate == "max"
        assert calibrate_exponential(sc, np.inf, e).scale == pytest.approx(w / e, rel=1e-14)
    # every cost tends to W_inf / eps as a grows
    for form in ("exact", "ratio", "paper"):
        assert calibrate_laplace(sc, 1e5, 1.0, form=form).scale == pytest.approx(w, rel=2e-3)


@settings(max_examples=12, deadline=None)
@given(
    st.lists(st.integers(-4, 4), min_size=1, max_size=5),
    st.lists(st.integers(-4, 4), min_size=1, max_size=5),
    st.integers(0, 2**31 - 1),
    st.sampled_from([1.5, 2.0, 4.0, 10.0]),
    st.sampled_from([0.25, 0.5, 1.0, 2.0]),
)
def test_property_orderings_and_monotonicity(xs, ys, seed, a, e) -> None:
    rng = np.random.default_rng(seed)
    p, q = rng.random(len(xs)) + 0.05, rng.random(len(ys)) + 0.05
    sc = Scenario.from_laws({"a": (xs, p / p.sum()), "b": (ys, q / q.sum())})
    if max(wasserstein_inf(sc).values()) == 0:
        assert calibrate_laplace(sc, a, e).scale == 0.0
        return
    b = calibrate_laplace(sc, a, e).scale
    s = calibrate_gaussian(sc, a, e).scale
    # exact <= ratio <= paper; exact-cost scales never exceed the W_inf baselines
    assert b <= calibrate_laplace(sc, a, e, form="ratio").scale * (1 + 1e-10)
    assert calibrate_laplace(sc, a, e, form="ratio").scale <= (
        calibrate_laplace(sc, a, e, form="paper").scale * (1 + 1e-10)
    )
    assert b <= rpp_winf_laplace(sc, a, e).scale * (1 + 1e-10)
    assert b <= winf_laplace(sc, e).scale * (1 + 1e-10)
    assert s <= rpp_winf_gaussian(sc, a, e).scale * (1 + 1e-10)
    # nonincreasing in eps, nondecreasing in alpha (exact costs)
    assert calibrate_laplace(sc, a, 1.5 * e).scale <= b * (1 + 1e-10)
    assert calibrate_gaussian(sc, a, 1.5 * e).scale <= s * (1 + 1e-10)
    assert calibrate_laplace(sc, 1.5 * a, e).scale >= b * (1 - 1e-10)
    assert calibrate_gaussian(sc, 1.5 * a, e).scale >= s * (1 - 1e-10)


def test_routes_agree_quantile_emd_lp() -> None:
    rng = np.random.default_rng(11)
    sc = Scenario.from_laws(
        {
            "a": (rng.normal(size=5), rng.dirichlet(np.ones(5))),
            "b": (rng.normal(size=4) + 0.7, rng.dirichlet(np.ones(4))),
            "c": (rng.normal(size=3) - 0.3, rng.dirichlet(np.ones(3))),
        }
    )
    for cost in (LaplaceCost(3.0), GaussianCost(2.0), LaplaceCost(2.0, form="paper")):
        scales = [calibrate(sc, cost, 0.8, method=m).scale for m in ("quantile", "emd")]
        assert scales[1] == pytest.approx(scales[0], rel=1e-10)
    two = Scenario.from_laws({s: sc.law(s) for s in ("a", "b")})
    q, lp = (calibrate(two, GaussianCost(2.0), 0.8, method=m).scale for m in ("quantile", "lp"))
    assert lp == pytest.approx(q, rel=1e-7)
    cal = calibrate(R1, LaplaceCost(2.0), 1.0, method="lp")
    gap = cal.pairs[0].certificate.gap
    assert gap is not None and abs(gap) < 1e-6


def test_result_object() -> None:
    sc = Scenario.from_laws(
        {"a": ([0, 1], [0.5, 0.5]), "b": ([0, 2], [0.5, 0.5]), "c": ([0], [1.0])}
    )
    cal = calibrate_laplace(sc, 2.0, 1.0)
    assert cal.certified and cal.mechanism == "laplace" and cal.cost == "laplace-exact"
    assert len(cal.pairs) == 3
    assert cal.binding_pair[1:] in (("a", "b"), ("b", "c"))
    assert cal.scale == max(pc.scale for pc in cal.pairs)
    for pc in cal.pairs:
        assert pc.certificate.certified and pc.certificate.log_value <= 1.0
    alone = calibrate_laplace(Scenario.from_laws({"b": sc.law("b"), "c": sc.law("c")}), 2.0, 1.0)
    assert cal.scale == pytest.approx(alone.scale, rel=1e-12)


def test_identical_laws_need_no_noise() -> None:
    sc = Scenario.from_laws({"a": ([0, 1], [0.5, 0.5]), "b": ([1, 0], [0.5, 0.5])})
    assert calibrate_laplace(sc, 2.0, 1.0).scale == 0.0
    assert calibrate_gaussian(sc, 2.0, 1.0).scale == 0.0


def test_priors_take_the_maximum() -> None:
    laws = {"t1": R1.laws["prior"], "t2": R3.laws["prior"]}
    sc = Scenario({"t1": {"u": laws["t1"]["s1"], "v": laws["t1"]["s2"]},
                   "t2": {"u": laws["t2"]["x"], "v": laws["t2"]["y"]}})
    cal = calibrate_laplace(sc, 2.0, 1.0)
    assert cal.scale == pytest.approx(0.715333491, rel=1e-9)  # R3 binds (deterministic)
    assert cal.binding_pair[0] == "t2"


def _embed(sc: Scenario, dim: int) -> Scenario:
    laws = {}
    for s, law in sc.laws["prior"].items():
        pad = np.zeros((law.size, dim))
        pad[:, :1] = law.support
        pad[:, 1:] = 0.25  # a constant extra coordinate does not change any shift
        laws[s] = (pad, law.probabilities)
    return Scenario.from_laws(laws)


def test_two_dimensional_routes_reduce_to_one_dimension() -> None:
    sc2 = _embed(R1, 2)
    for a, e in [(2, 1.0), (5, 0.5)]:
        b1, b2 = R1_TABLE[(a, e)][0], calibrate_laplace(sc2, a, e).scale
        assert b2 == pytest.approx(b1, rel=5e-9)
        assert calibrate_gaussian(sc2, a, e).scale == pytest.approx(R1_TABLE[(a, e)][5], rel=5e-9)
        assert calibrate_gaussian(sc2, a, e, method="lp").scale == pytest.approx(
            R1_TABLE[(a, e)][5], rel=1e-6
        )
        ratio_1d = calibrate_laplace(R1, a, e, form="ratio").scale
        assert calibrate_exponential(sc2, a, e, norm=2).scale == pytest.approx(ratio_1d, rel=5e-9)


def test_two_dimensional_gaussian_with_covariance() -> None:
    rng = np.random.default_rng(2)
    sc = Scenario.from_laws(
        {"a": (rng.normal(size=(4, 2)), rng.dirichlet(np.ones(4))),
         "b": (rng.normal(size=(5, 2)) + np.array([1.0, 0.0]), rng.dirichlet(np.ones(5)))}
    )
    base = calibrate_gaussian(sc, 3.0, 1.0).scale
    # S = c I scales sigma by 1/sqrt(c)
    assert calibrate_gaussian(sc, 3.0, 1.0, covariance=4 * np.eye(2)).scale == pytest.approx(
        base / 2, rel=1e-9
    )
    assert base <= rpp_winf_gaussian(sc, 3.0, 1.0).scale
    lap = calibrate_laplace(sc, 3.0, 1.0)
    assert lap.certified and lap.scale <= rpp_winf_laplace(sc, 3.0, 1.0).scale
    assert calibrate_laplace(sc, 3.0, 1.0, method="lp").scale == pytest.approx(lap.scale, rel=1e-6)
    # anisotropic covariance: whitening the data gives the same sigma with identity covariance
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    chol = np.linalg.cholesky(cov)
    white = Scenario.from_laws(
        {s: (np.linalg.solve(chol, law.support.T).T, law.probabilities)
         for s, law in sc.laws["prior"].items()}
    )
    assert calibrate_gaussian(sc, 3.0, 1.0, covariance=cov).scale == pytest.approx(
        calibrate_gaussian(white, 3.0, 1.0).scale, rel=1e-8
    )


def test_make_cost_and_names() -> None:
    assert make_cost("laplace", 2.0, form="ratio").name == "laplace-ratio"
    assert make_cost("gaussian", 2.0).name == "gaussian"
    assert make_cost("exponential", np.inf).name == "exponential-pure"
    assert ExponentialCost(2.0, form="paper").name == "exponential-paper"


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: calibrate_laplace(R1, 1.0, 1.0), "alpha"),
        (lambda: calibrate_laplace(R1, 0.5, 1.0), "alpha"),
        (lambda: calibrate_laplace(R1, 2.0, 0.0), "epsilon"),
        (lambda: calibrate_laplace(R1, 2.0, -1.0), "epsilon"),
        (lambda: calibrate_laplace(R1, 2.0, np.nan), "epsilon"),
        (lambda: calibrate_gaussian(R1, np.inf, 1.0), "alpha"),
        (lambda: calibrate_laplace(R1, 2.0, 1.0, form="loose"), "form"),
        (lambda: calibrate_laplace(R1, 2.0, 1.0, method="sinkhorn"), "method"),
        (lambda: calibrate_laplace(_embed(R1, 2), 2.0, 1.0, method="quantile"), "method"),
        (lambda: make_cost("cauchy", 2.0), "mechanism"),
        (lambda: calibrate_gaussian(_embed(R1, 2), 2.0, 1.0, covariance=np.eye(3)), "covariance"),
        (lambda: calibrate_gaussian(R1, 2.0, 1.0, covariance=[[-1.0]]), "covariance"),
    ],
)
def test_bad_inputs(call, name) -> None:
    with pytest.raises(InvalidParameterError) as err:
        call()
    assert err.value.name == name


def test_bad_types() -> None:
    with pytest.raises(InvalidTypeError):
        calibrate({"a": 1}, LaplaceCost(2.0), 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        calibrate(R1, "laplace", 1.0)  # type: ignore[arg-type]


def test_large_support_is_certified() -> None:
    rng = np.random.default_rng(0)
    n = 10_000
    sc = Scenario.from_laws(
        {"a": (rng.normal(size=n), rng.dirichlet(np.ones(n))),
         "b": (rng.normal(size=n) + 0.5, rng.dirichlet(np.ones(n)))}
    )
    cal = calibrate_laplace(sc, 2.0, 1.0)
    assert cal.certified
    # Jensen lower bound (point masses at the means) <= b <= RPP W_inf baseline
    means = [float(law.mean[0]) for law in sc.laws["prior"].values()]
    jensen = calibrate_laplace(Scenario.from_laws({"a": ([means[0]], [1.0]),
                                                   "b": ([means[1]], [1.0])}), 2.0, 1.0).scale
    assert jensen <= cal.scale <= rpp_winf_laplace(sc, 2.0, 1.0).scale


def test_pure_two_dimensional_is_bottleneck_over_eps() -> None:
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    u = np.full(4, 0.25)
    sc = Scenario.from_laws({"a": (x, u), "b": (y, u)})
    # uniform laws of equal size: W_inf is attained by a permutation (Birkhoff); brute force
    w_l1 = min(
        max(np.abs(x[i] - y[j]).sum() for i, j in enumerate(perm))
        for perm in itertools.permutations(range(4))
    )
    w_l2 = min(
        max(np.linalg.norm(x[i] - y[j]) for i, j in enumerate(perm))
        for perm in itertools.permutations(range(4))
    )
    assert calibrate_laplace(sc, np.inf, 0.5).scale == pytest.approx(w_l1 / 0.5, rel=1e-12)
    assert calibrate_exponential(sc, np.inf, 0.5).scale == pytest.approx(w_l2 / 0.5, rel=1e-12)
    assert rpp_winf_gaussian(sc, 2.0, 0.5).scale == pytest.approx(w_l2 * np.sqrt(2.0), rel=1e-9)


@pytest.mark.parametrize("e", [1e-3, 1e-7, 1e-11])
def test_small_epsilon_keeps_relative_precision(e: float) -> None:
    # R1 Gaussian: 0.2 + 0.8 exp(a(a-1)/(2 s^2)) = e^{(a-1) eps}, solved without cancellation
    a = 3.0
    s = np.sqrt(a * (a - 1) / (2 * np.log1p(np.expm1((a - 1) * e) / 0.8)))
    cal = calibrate_gaussian(R1, a, e)
    assert cal.scale == pytest.approx(s, rel=1e-9)
    assert cal.scale >= s * (1 - 1e-14)
    assert cal.pairs[0].certificate.margin > 0
    # small shifts: Laplace moment ~ Gaussian one (log M = a(a-1) t^2/2 + O(t^3))
    assert calibrate_laplace(R1, a, e).scale == pytest.approx(s, rel=0.05)
