"""Audit by quadrature: R1 divergences, mpmath, and calibrated scales really are private."""

from __future__ import annotations

import itertools

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting.renyi import renyi_gaussian, renyi_laplace
from dpopt.errors import InvalidParameterError
from dpopt.pufferfish import (
    Scenario,
    audit,
    calibrate_exponential,
    calibrate_gaussian,
    calibrate_laplace,
    minimal_scale_1d,
    mixture_renyi_divergence,
)

R1 = Scenario.from_laws(
    {"s1": ([0, 1, 2], [0.5, 0.3, 0.2]), "s2": ([0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2])}
)


@pytest.mark.parametrize(
    ("mech", "a", "fwd", "rev"),
    [
        ("laplace", 2.0, 0.2229446638, 0.2881463432),
        ("laplace", 5.0, 0.3754985049, 0.6000098876),
        ("gaussian", 2.0, 0.2790051842, 0.5248671941),
        ("gaussian", 5.0, 0.4608747038, 2.1235021535),
    ],
)
def test_r1_fixed_scale_divergences(mech: str, a: float, fwd: float, rev: float) -> None:
    res = audit(R1, mech, 1.0, a)
    assert res.pairs[0].forward == pytest.approx(fwd, abs=2e-10)
    assert res.pairs[0].reverse == pytest.approx(rev, abs=2e-10)
    assert res.max_divergence == pytest.approx(max(fwd, rev), abs=2e-10)
    assert res.passed is None


# true D at (b_exact, sigma_W) for (a, eps)
R1_TRUE = {
    (2, 0.5): (0.277211, 0.336968),
    (2, 1.0): (0.520601, 0.590988),
    (5, 0.5): (0.362920, 0.415228),
    (5, 1.0): (0.769567, 0.826779),
}


@pytest.mark.parametrize(("ae", "true_d"), list(R1_TRUE.items()))
def test_r1_true_divergence_at_calibrated_scales(ae, true_d) -> None:
    a, e = ae
    lap = audit(R1, "laplace", calibrate_laplace(R1, a, e).scale, a, e)
    gau = audit(R1, "gaussian", calibrate_gaussian(R1, a, e).scale, a, e)
    assert lap.max_divergence == pytest.approx(true_d[0], abs=1e-6)
    assert gau.max_divergence == pytest.approx(true_d[1], abs=1e-6)
    assert lap.passed and gau.passed


@pytest.mark.parametrize("a", [1.5, 3.0, 20.0])
def test_point_masses_match_closed_forms(a: float) -> None:
    for shift, scale in [(1.0, 1.0), (0.3, 2.0), (4.0, 0.5)]:
        d_lap = mixture_renyi_divergence([0.0], [1.0], [shift], [1.0], "laplace", scale, a)
        d_gau = mixture_renyi_divergence([0.0], [1.0], [shift], [1.0], "gaussian", scale, a)
        assert d_lap == pytest.approx(renyi_laplace(a, shift, scale), rel=1e-9)
        assert d_gau == pytest.approx(renyi_gaussian(a, shift, scale), rel=1e-9)


def test_against_mpmath_quadrature() -> None:
    mp.mp.dps = 30
    x, p = [0.0, 0.7, 2.5], [0.2, 0.5, 0.3]
    y, q = [0.4, 3.0], [0.6, 0.4]
    a, b = mp.mpf(3), mp.mpf("0.8")

    def dens(t, atoms, w):
        terms = zip(atoms, w, strict=True)
        return mp.fsum(wi * mp.exp(-abs(t - xi) / b) / (2 * b) for xi, wi in terms)

    def integrand(t):
        return dens(t, x, p) ** a * dens(t, y, q) ** (1 - a)

    pts = [-mp.inf, *sorted({*x, *y}), mp.inf]
    ref = mp.log(mp.quad(integrand, pts)) / (a - 1)
    got = mixture_renyi_divergence(x, p, y, q, "laplace", 0.8, 3.0)
    assert got == pytest.approx(float(ref), abs=1e-10)


@pytest.mark.parametrize(
    ("mech", "a", "e", "expected"),
    [
        ("laplace", 2.0, 1.0, 0.40521198),
        ("gaussian", 2.0, 1.0, 0.71249087),
        ("laplace", 5.0, 0.5, 1.14239006),
        ("gaussian", 5.0, 0.5, 1.95572861),
    ],
)
def test_true_minimal_scales_r1(mech: str, a: float, e: float, expected: float) -> None:
    # true minimal scales (quadrature); the result carries a 1e-6 safety margin
    s = minimal_scale_1d(R1, mech, a, e)
    assert s == pytest.approx(expected * (1 + 1e-6), rel=5e-8)
    assert audit(R1, mech, s, a, e).passed
    cal = calibrate_gaussian if mech == "gaussian" else calibrate_laplace
    assert s <= cal(R1, a, e).scale


def test_divergence_nonincreasing_in_scale() -> None:
    ds = [audit(R1, "laplace", s, 3.0).max_divergence for s in (0.5, 0.8, 1.3, 2.0)]
    assert all(d1 >= d2 for d1, d2 in itertools.pairwise(ds))


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.integers(-3, 3), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(-3, 3), min_size=1, max_size=4, unique=True),
    st.integers(0, 2**31 - 1),
    st.sampled_from([1.5, 2.0, 4.0, 8.0]),
    st.sampled_from([0.25, 0.5, 1.0, 2.0]),
)
def test_property_calibrated_scales_pass_the_audit(xs, ys, seed, a, e) -> None:
    rng = np.random.default_rng(seed)
    p, q = rng.random(len(xs)) + 0.05, rng.random(len(ys)) + 0.05
    sc = Scenario.from_laws({"u": (xs, p / p.sum()), "v": (ys, q / q.sum())})
    checks = [
        ("laplace", calibrate_laplace(sc, a, e).scale),
        ("laplace", calibrate_laplace(sc, a, e, form="paper").scale),
        ("gaussian", calibrate_gaussian(sc, a, e).scale),
        ("exponential", calibrate_exponential(sc, a, e).scale),
    ]
    for mech, scale in checks:
        if scale == 0.0:
            continue
        res = audit(sc, mech, scale, a, e)
        assert res.passed, (mech, scale, res.max_divergence)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"mechanism": "cauchy"}, "mechanism"),
        ({"scale": 0.0}, "scale"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": np.inf}, "alpha"),
        ({"epsilon": -1.0}, "epsilon"),
    ],
)
def test_bad_inputs(kwargs, name) -> None:
    args = {"mechanism": "laplace", "scale": 1.0, "alpha": 2.0, "epsilon": None} | kwargs
    with pytest.raises(InvalidParameterError) as err:
        audit(R1, args["mechanism"], args["scale"], args["alpha"], args["epsilon"])
    assert err.value.name == name


def test_audit_needs_one_dimension() -> None:
    sc = Scenario.from_laws({"u": ([[0, 0]], [1.0]), "v": ([[1, 0]], [1.0])})
    with pytest.raises(InvalidParameterError, match="1-D"):
        audit(sc, "laplace", 1.0, 2.0)
