"""Tight calibration: the returned scale is private and (1 - tol) * scale is not, by references
independent of the bounds (closed forms, mpmath and scipy quadrature of the true divergence)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from certificates.renyi_mixture import verify_mixture_file
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.pufferfish import Scenario, audit, calibrate_tight
from dpopt.pufferfish.calibration import calibrate_gaussian, calibrate_laplace

R1 = Scenario.from_laws(
    {"s1": ([0, 1, 2], [0.5, 0.3, 0.2]), "s2": ([0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2])}
)


def mp_worst(scenario: Scenario, noise: str, scale: float, alpha: float) -> float:
    """max over pairs and orders of D_alpha by mpmath quadrature (20 digits, atom breakpoints)."""
    worst = 0.0
    with mp.workdps(20):
        for _, _, _, pl, ql in scenario.iter_pairs():
            for (x, p), (y, q) in [
                ((pl.support[:, 0], pl.probabilities), (ql.support[:, 0], ql.probabilities)),
                ((ql.support[:, 0], ql.probabilities), (pl.support[:, 0], pl.probabilities)),
            ]:
                xs = [mp.mpf(float(v)) / scale for v in x]
                ys = [mp.mpf(float(v)) / scale for v in y]
                a = mp.mpf(alpha)

                def f(u):
                    if noise == "laplace":
                        return mp.exp(-abs(u)) / 2
                    return mp.exp(-u * u / 2) / mp.sqrt(2 * mp.pi)

                def g(t, xs=xs, ys=ys, p=p, q=q, a=a, f=f):
                    pt = mp.fsum(float(w) * f(t - v) for w, v in zip(p, xs, strict=True))
                    qt = mp.fsum(float(w) * f(t - v) for w, v in zip(q, ys, strict=True))
                    return pt**a * qt ** (1 - a)

                pts = sorted(set(xs) | set(ys))
                if noise == "gaussian":
                    lo = min(pts) - (a - 1) * (max(pts) - min(pts)) - 10
                    hi = max(pts) + (a - 1) * (max(pts) - min(pts)) + 10
                    pts = sorted(set(pts) | set(mp.linspace(lo, hi, 24)))
                val = mp.log(mp.quad(g, [-mp.inf, *pts, mp.inf])) / (a - 1)
                worst = max(worst, float(val))
    return worst


def laplace_point_mass(alpha: float, t: float) -> float:
    a = alpha
    return ((a - 1) * t + math.log(a / (2 * a - 1) + (a - 1) / (2 * a - 1) * math.exp(-(2 * a - 1) * t))) / (a - 1)  # noqa: E501


# --------------------------------------------------------------------------- known least scales
@pytest.mark.parametrize(
    ("noise", "alpha", "eps", "true_min"),
    [
        # numerically least scales of the reference scenario (quadrature + bisection)
        ("laplace", 2.0, 1.0, 0.40521198),
        ("gaussian", 2.0, 1.0, 0.71249087),
        ("laplace", 5.0, 0.5, 1.14239006),
        ("gaussian", 5.0, 0.5, 1.95572861),
    ],
)
def test_r1_least_scale_is_bracketed(noise: str, alpha: float, eps: float, true_min: float) -> None:
    cal = calibrate_tight(R1, alpha, eps, noise)
    assert cal.tight and cal.certificate is not None and cal.certificate.certified
    assert cal.refuted_scale == pytest.approx(0.99 * cal.scale, rel=1e-12)
    assert cal.refuted_scale < true_min * (1 - 1e-7)
    assert true_min * (1 - 1e-7) <= cal.scale <= true_min / 0.99
    assert cal.scale < cal.alpha_w_scale and cal.gain > 1
    # independent high-precision evaluation on both sides
    assert mp_worst(R1, noise, cal.scale, alpha) <= eps
    assert mp_worst(R1, noise, cal.refuted_scale, alpha) > eps


@pytest.mark.parametrize("alpha", [1.5, 3.0, 20.0])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_point_masses_closed_forms(alpha: float, eps: float) -> None:
    sc = Scenario.from_laws({"a": ([0.0], [1.0]), "b": ([1.7], [1.0])})
    lap = calibrate_tight(sc, alpha, eps, "laplace")
    b_star = 1.7 / brentq(lambda t: laplace_point_mass(alpha, t) - eps, 1e-9, 1e3, xtol=1e-15)
    assert lap.refuted_scale < b_star <= lap.scale * (1 + 1e-12)
    gau = calibrate_tight(sc, alpha, eps, "gaussian")
    s_star = math.sqrt(alpha * 1.7**2 / (2 * eps))
    assert gau.refuted_scale < s_star <= gau.scale * (1 + 1e-12)


def test_pure_pufferfish_alpha_inf() -> None:
    sc = Scenario.from_laws({"a": ([0.0], [1.0]), "b": ([2.0], [1.0])})
    cal = calibrate_tight(sc, np.inf, 0.5)
    assert cal.refuted_scale < 4.0 <= cal.scale <= 4.0 / 0.99
    # mixtures: D_inf = max log-ratio at the atoms, by direct double sums
    x, p = np.array([0.0, 1.0, 2.0]), np.array([0.5, 0.3, 0.2])
    y, q = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.2, 0.3, 0.3, 0.2])

    def dinf(b: float) -> float:
        t = np.concatenate([x, y])
        fp = (p * np.exp(-np.abs(t[:, None] - x) / b)).sum(1)
        fq = (q * np.exp(-np.abs(t[:, None] - y) / b)).sum(1)
        return float(np.max(np.abs(np.log(fp) - np.log(fq))))

    cal = calibrate_tight(R1, np.inf, 1.0)
    assert dinf(cal.scale) <= 1.0 < dinf(cal.refuted_scale)
    assert cal.scale <= calibrate_laplace(R1, np.inf, 1.0).scale


# --------------------------------------------------------------------------- random scenarios
@settings(max_examples=12)
@given(
    data=st.data(),
    alpha=st.sampled_from([1.2, 2.0, 6.0]),
    eps=st.sampled_from([0.3, 1.0, 3.0]),
    noise=st.sampled_from(["laplace", "gaussian"]),
)
def test_random_scenarios_feasible_and_tight(data, alpha: float, eps: float, noise: str) -> None:
    def law():
        k = data.draw(st.integers(1, 4))
        atoms = data.draw(st.lists(st.integers(-4, 4), min_size=k, max_size=k, unique=True))
        w = np.array(data.draw(st.lists(st.floats(0.05, 1.0), min_size=k, max_size=k)))
        return np.array(atoms, float), w / w.sum()

    laws = {"a": law(), "b": law(), "c": law()}
    sc = Scenario.from_laws(laws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate_tight(sc, alpha, eps, noise)
    if cal.scale == 0.0:
        return
    assert cal.certificate is not None and cal.certificate.certified
    assert audit(sc, noise, cal.scale, alpha).max_divergence <= eps * (1 + 1e-9)
    assert cal.scale <= cal.alpha_w_scale * (1 + cal.tol)
    if cal.tight:
        assert audit(sc, noise, cal.refuted_scale, alpha).max_divergence > eps


@pytest.mark.parametrize("seed", [11, pytest.param(12, marks=pytest.mark.slow)])
def test_random_scenario_mpmath(seed: int) -> None:
    rng = np.random.default_rng(seed)
    laws = {
        s: (rng.choice(np.arange(-3.0, 4.0), size=3, replace=False), rng.dirichlet(np.ones(3)))
        for s in "ab"
    }
    sc = Scenario.from_laws(laws)
    for noise in ("laplace", "gaussian"):
        cal = calibrate_tight(sc, 3.0, 0.8, noise)
        assert cal.tight
        assert mp_worst(sc, noise, cal.scale, 3.0) <= 0.8
        assert mp_worst(sc, noise, cal.refuted_scale, 3.0) > 0.8


def test_several_priors_and_pairs_binding() -> None:
    sc = Scenario(
        {
            "t1": {"a": ([0, 1], [0.5, 0.5]), "b": ([0, 2], [0.5, 0.5]), "c": ([0, 1], [0.5, 0.5])},
            "t2": {"a": ([0, 3], [0.9, 0.1]), "b": ([1], [1.0]), "c": ([0, 1], [0.2, 0.8])},
        }
    )
    cal = calibrate_tight(sc, 2.0, 1.0, "laplace")
    assert cal.tight
    worst = audit(sc, "laplace", cal.scale, 2.0)
    assert worst.max_divergence <= 1.0 < audit(sc, "laplace", cal.refuted_scale, 2.0).max_divergence
    # identical laws (t1: a vs c) are skipped, never binding; the binding pair is one that
    # the independent audit finds not private at the refuted scale
    assert cal.binding_pair != ("t1", "a", "c")
    refuted = audit(sc, "laplace", cal.refuted_scale, 2.0)
    binding = [pa for pa in refuted.pairs if (pa.prior, *pa.secrets) == cal.binding_pair]
    assert len(binding) == 1 and binding[0].worst > 1.0


def test_equal_laws_need_no_noise() -> None:
    sc = Scenario.from_laws({"a": ([0, 1], [0.5, 0.5]), "b": ([1, 0], [0.5, 0.5])})
    cal = calibrate_tight(sc, 2.0, 1.0)
    assert cal.scale == 0.0 and cal.tight and "equal laws" in cal.message
    assert cal.certificate is not None and cal.certificate.certified


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("alpha", [2.0, 8.0, np.inf])
def test_flat_divergence_needs_no_noise(noise: str, alpha: float) -> None:
    # same atoms, nearby weights: D_alpha of the laws themselves is below eps, so scale 0 (no
    # noise) is private: an exact answer with a sentence, not ~1e-12 with a flatness warning
    if noise == "gaussian" and np.isinf(alpha):
        return
    p, q = np.array([0.5, 0.5]), np.array([0.52, 0.48])
    sc = Scenario.from_laws({"a": ([0, 1], p), "b": ([0, 1], q)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = calibrate_tight(sc, alpha, 1.0, noise)
    assert cal.scale == 0.0 and cal.tight and not cal.noise_needed
    assert cal.refuted_scale is None
    assert "no noise is needed" in cal.message
    assert cal.certificate is not None and cal.certificate.certified
    # independent: the divergence of the laws themselves (exact rationals), both orders
    from fractions import Fraction as F

    fp, fq = [F(float(v)) for v in p], [F(float(v)) for v in q]
    if np.isinf(alpha):
        worst = max(max(a / b for a, b in zip(fp, fq, strict=True)),
                    max(b / a for a, b in zip(fp, fq, strict=True)))
        assert math.log(worst) <= 1.0
    else:
        k = int(alpha)
        for u, v in ((fp, fq), (fq, fp)):
            s_ = sum(a**k / b ** (k - 1) for a, b in zip(u, v, strict=True))
            assert math.log(s_) / (alpha - 1) <= 1.0


def test_laws_just_above_epsilon_need_noise() -> None:
    # D_2 of the laws themselves just above eps: scale 0 is refused, a positive scale returned
    p = np.array([0.5, 0.5])
    q = np.array([0.9, 0.1])
    d2 = max(np.log(np.sum(p**2 / q)), np.log(np.sum(q**2 / p)))
    sc = Scenario.from_laws({"a": ([0, 1], p), "b": ([0, 1], q)})
    cal = calibrate_tight(sc, 2.0, 0.98 * d2)
    assert cal.scale > 0.0 and cal.noise_needed and cal.tight


# --------------------------------------------------------------------------- UCI scenarios
UCI_FAST = ["student-mat-sex-G3", "student-por-romantic-G3"]
UCI_ALL = [
    "adult-sex-hours", "adult-income-age", "heart-disease-chol", "heart-disease-thalach",
    *UCI_FAST,
]  # fmt: skip


def _uci(key: str, noise: str, alpha: float, eps: float) -> None:
    from dpopt.experiments.rpp import SCENARIOS, build_scenario

    sc = build_scenario(SCENARIOS[key])
    cal = calibrate_tight(sc, alpha, eps, noise)
    assert cal.tight
    assert audit(sc, noise, cal.scale, alpha).max_divergence <= eps
    assert audit(sc, noise, cal.refuted_scale, alpha).max_divergence > eps
    start = (calibrate_laplace if noise == "laplace" else calibrate_gaussian)(sc, alpha, eps)
    assert cal.alpha_w_scale == start.scale and cal.scale <= start.scale


@pytest.mark.parametrize("key", UCI_FAST)
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_uci_student_scenarios(key: str, noise: str) -> None:
    _uci(key, noise, 2.0, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("key", UCI_ALL)
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize(("alpha", "eps"), [(2.0, 1.0), (1.1, 0.1), (50.0, 5.0)])
def test_uci_all_scenarios(key: str, noise: str, alpha: float, eps: float) -> None:
    _uci(key, noise, alpha, eps)


# --------------------------------------------------------------------------- certificate, errors
def test_certificate_file_verifies(tmp_path: Path) -> None:
    cal = calibrate_tight(R1, 2.0, 1.0, "gaussian")
    path = tmp_path / "tight.json"
    digest = cal.write_certificate(path)
    assert len(digest) == 64
    cert = verify_mixture_file(path)
    assert cert.certified and cert.tight and cert.scale == cal.scale


@pytest.mark.parametrize(
    ("args", "kw", "exc", "needle"),
    [
        ((R1, 2.0, 1.0), {"noise": "cauchy"}, InvalidParameterError, "noise"),
        ((R1, 1.0, 1.0), {}, InvalidParameterError, "alpha"),
        ((R1, np.inf, 1.0), {"noise": "gaussian"}, InvalidParameterError, "alpha"),
        ((R1, 2.0, 0.0), {}, InvalidParameterError, "epsilon"),
        ((R1, 2.0, 1.0), {"tol": 0.0}, InvalidParameterError, "tol"),
        ((R1, 2.0, 1.0), {"tol": 0.7}, InvalidParameterError, "tol"),
        (("R1", 2.0, 1.0), {}, InvalidTypeError, "scenario"),
    ],
)
def test_bad_input(args, kw, exc, needle) -> None:
    with pytest.raises(exc, match=needle):
        calibrate_tight(*args, **kw)


def test_two_dimensional_scenario_rejected() -> None:
    sc = Scenario.from_laws({"a": ([[0, 0]], [1.0]), "b": ([[1, 0]], [1.0])})
    with pytest.raises(InvalidParameterError, match="1-D"):
        calibrate_tight(sc, 2.0, 1.0)
