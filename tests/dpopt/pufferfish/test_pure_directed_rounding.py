"""The alpha = inf (pure) calibrations hold in exact arithmetic, at offsets and at the float range's
ends.

Two independent references, written here: for point masses the pure loss is exactly
:math:`|x - y|/b`, so the least private double is a closed form in rational arithmetic
(:class:`fractions.Fraction`); for general laws the true :math:`D_\\infty` of the two Laplace
mixtures, both orders, is evaluated by mpmath (40 digits, atoms shifted exactly first) at every
atom and beyond the extreme ones: between consecutive atoms both mixtures are
:math:`a e^{-s} + c e^{s}`, so their ratio is a Moebius function of :math:`e^{2s}`, monotone,
and beyond the extreme atoms it is constant; the supremum is attained at an atom.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certificates.errors import InvalidParameterError
from certificates.rounding import next_down, next_up
from dpopt.pufferfish import (
    Scenario,
    calibrate_exponential,
    calibrate_laplace,
    wasserstein_inf,
    winf_laplace,
)
from tests.dpopt.test_certificate_numerical_edges import LAW_P, LAW_Q

OFFSETS = [0.0, 1e12, 1.7e12, 1e15, 1.7e15, 8e15, 1e16, -1e16, 2.0**53 + 2.0]


def _least_double(x: Fraction) -> float:
    f = float(x)
    return f if Fraction(f) >= x else next_up(f)


@pytest.mark.parametrize("off", OFFSETS)
@pytest.mark.parametrize("eps", [1.0, 0.1, 3.0, 1e-3])
def test_point_masses_get_the_least_private_double(off: float, eps: float) -> None:
    x, y = off + 3.0 * max(1.0, math.ulp(off)), off
    w = abs(Fraction(x) - Fraction(y))
    sc = Scenario.from_laws({"a": ([x], [1.0]), "b": ([y], [1.0])})
    for cal in (calibrate_laplace(sc, math.inf, eps), calibrate_exponential(sc, math.inf, eps),
                winf_laplace(sc, eps)):
        assert cal.scale == _least_double(w / Fraction(eps))
        assert w <= Fraction(cal.scale) * Fraction(eps)  # |x - y| / b <= eps: exactly
        assert w > Fraction(next_down(cal.scale)) * Fraction(eps)  # and nothing less works


def _true_dinf(sc: Scenario, scale: float) -> float:
    """max over pairs and both orders of the mpmath D_inf of the Laplace mixtures."""
    worst = mp.mpf(0)
    with mp.workdps(40):
        for _, _, _, pl, ql in sc.iter_pairs():
            x, p = pl.support[:, 0].tolist(), pl.probabilities.tolist()
            y, q = ql.support[:, 0].tolist(), ql.probabilities.tolist()
            c = min(Fraction(v) for v in [*x, *y])
            b = Fraction(scale)

            def units(vals: list[float], c: Fraction = c, b: Fraction = b) -> list[mp.mpf]:
                fr = [(Fraction(v) - c) / b for v in vals]
                return [mp.mpf(f.numerator) / f.denominator for f in fr]

            xs, ys = units(x), units(y)

            def dens(t: mp.mpf, atoms: list[mp.mpf], w: list[float]) -> mp.mpf:
                return mp.fsum(mp.mpf(wk) * mp.exp(-abs(t - zk)) for wk, zk in zip(w, atoms,
                                                                                   strict=True))

            pts = sorted(set(xs) | set(ys))
            for t in [pts[0] - 1, *pts, pts[-1] + 1]:
                r = mp.log(dens(t, xs, p)) - mp.log(dens(t, ys, q))
                worst = max(worst, abs(r))
    return float(worst)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(off=st.sampled_from(OFFSETS),
       atoms=st.lists(st.integers(-40, 40), min_size=1, max_size=4, unique=True),
       other=st.lists(st.integers(-40, 40), min_size=1, max_size=4, unique=True),
       eps=st.sampled_from([0.25, 1.0, 4.0]))
def test_random_laws_at_offsets_are_private(off: float, atoms: list[int], other: list[int],
                                            eps: float) -> None:
    step = max(1.0, math.ulp(off))  # atoms the offset keeps apart
    x = [off + a * step for a in atoms]
    y = [off + b * step for b in other]
    p = np.linspace(1.0, 2.0, len(x))
    q = np.linspace(2.0, 1.0, len(y))
    sc = Scenario.from_laws({"a": (x, p / p.sum()), "b": (y, q / q.sum())})
    cal = calibrate_laplace(sc, math.inf, eps)
    assert cal.certified
    if cal.scale == 0.0:
        assert sorted(set(x)) == sorted(set(y))
        return
    assert _true_dinf(sc, cal.scale) <= eps * (1 + 1e-12)
    for pair in cal.pairs:  # the certified loss is at least the plan's exact one
        c = pair.coupling
        w = max(abs(Fraction(x[0]) - Fraction(y[0])) for x, y, m in zip(
            sc.law(pair.secrets[0]).support[c.rows], sc.law(pair.secrets[1]).support[c.cols],
            c.mass, strict=True) if m > 0)
        assert w / Fraction(cal.scale) <= Fraction(pair.certificate.log_value) <= Fraction(eps)


def _exact_winf(sc: Scenario) -> Fraction:
    """W_inf of the laws' doubles normalised exactly (1-D: the quantile coupling is optimal)."""
    worst = Fraction(0)
    for _, _, _, pl, ql in sc.iter_pairs():
        xs = sorted(zip(pl.support[:, 0].tolist(), pl.probabilities.tolist(), strict=True))
        ys = sorted(zip(ql.support[:, 0].tolist(), ql.probabilities.tolist(), strict=True))
        tp = sum(Fraction(v) for _, v in xs)
        tq = sum(Fraction(v) for _, v in ys)
        i = j = 0
        ri, rj = Fraction(xs[0][1]) / tp, Fraction(ys[0][1]) / tq
        while True:
            worst = max(worst, abs(Fraction(xs[i][0]) - Fraction(ys[j][0])))
            step = min(ri, rj)
            ri, rj = ri - step, rj - step
            if ri == 0:
                i += 1
                if i == len(xs):
                    break
                ri = Fraction(xs[i][1]) / tp
            if rj == 0:
                j += 1
                if j == len(ys):
                    break
                rj = Fraction(ys[j][1]) / tq
    return worst


@pytest.mark.parametrize("off", [0.0, 1e15, 1.7e15, 8e15])
def test_issue_laws_at_offsets(off: float) -> None:
    """The laws of the issue, at alpha = inf through the coupling route: private in mpmath and
    the scale W_inf / eps proven (the one-ulp shortfall of a plain float compare is gone)."""
    sc = Scenario.from_laws({"a": (np.array(LAW_P[0]) + off, LAW_P[1]),
                             "b": (np.array(LAW_Q[0]) + off, LAW_Q[1])})
    for eps in (1.0, 0.7, 1.3):
        cal = calibrate_laplace(sc, math.inf, eps)
        w = _exact_winf(sc)
        assert w == Fraction(max(wasserstein_inf(sc).values()))
        assert cal.scale == _least_double(w / Fraction(eps))
        assert _true_dinf(sc, cal.scale) <= eps


def test_two_dimensional_pure_scales_are_proven() -> None:
    rng = np.random.default_rng(7)
    off = 1.7e15
    x = np.round(rng.normal(size=(3, 2)) * 50) + off
    y = np.round(rng.normal(size=(3, 2)) * 50) + off
    u = np.full(3, 1 / 3)
    sc = Scenario.from_laws({"a": (x, u), "b": (y, u)})
    for cal, dist in ((calibrate_laplace(sc, math.inf, 0.5), lambda d: sum(abs(v) for v in d)),
                      (calibrate_exponential(sc, math.inf, 0.5, norm=math.inf),
                       lambda d: max(abs(v) for v in d))):
        pair = cal.pairs[0]
        c = pair.coupling
        w = max(dist([Fraction(float(a)) - Fraction(float(b)) for a, b in zip(x[i], y[j],
                                                                              strict=True)])
                for i, j, m in zip(c.rows, c.cols, c.mass, strict=True) if m > 0)
        assert w <= Fraction(cal.scale) * Fraction(0.5)
        assert Fraction(pair.certificate.log_value) >= w / Fraction(cal.scale)


@pytest.mark.parametrize(("x", "y", "eps"), [
    ([0.0], [5e-324], 1.0),          # the smallest subnormal apart
    ([0.0], [5e-324], 2.0),          # its half is not a double: rounded up, not to 0
    ([1e-300], [-1e-300], 1e10),
    ([1.7e308], [1.6e308], 1.0),     # near the overflow threshold
    ([-1.0e308, 0.0], [1.0e308, 0.0], 10.0),
])
def test_float_range_ends(x: list[float], y: list[float], eps: float) -> None:
    sc = Scenario.from_laws({"a": (x, [1 / len(x)] * len(x)), "b": (y, [1 / len(y)] * len(y))})
    w = _exact_winf(sc)
    if w > Fraction(np.finfo(np.float64).max):
        with pytest.raises(InvalidParameterError, match=r"^scenario=.*overflow"):
            calibrate_laplace(sc, math.inf, eps)
        return
    cal = calibrate_laplace(sc, math.inf, eps)
    assert cal.scale > 0.0 and w <= Fraction(cal.scale) * Fraction(eps)


def test_an_overflowing_scale_is_refused_naming_epsilon() -> None:
    sc = Scenario.from_laws({"a": ([1.7e308], [1.0]), "b": ([0.0], [1.0])})
    with pytest.raises(InvalidParameterError, match=r"^epsilon=.*overflow"):
        calibrate_laplace(sc, math.inf, 1e-3)
