"""Certificates at the numerical edges: large offsets (timestamps, IDs), values near the ends of
the float range, tampered tight certificates.

The reference here is written for this file and shares nothing with the code under test: the
atoms are shifted *exactly* (``fractions.Fraction``) by their smallest value before anything is
divided by the scale, then D_α of the two noisy mixtures is integrated by mpmath (tanh-sinh,
30 digits) in units of the scale, the line split at every atom (and, for Gaussian noise, at the
integrand's centres). For α = ∞ (Laplace) the supremum of p/q is taken over the atoms and a fine
grid between and beyond them.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certificates.errors import CertificateError
from certificates.renyi_mixture import (
    check_calibration,
    divergence_bounds,
    verify_mixture_file,
)
from certificates.strict_json import digest
from dpopt.cli.main import main
from dpopt.pufferfish import Scenario, calibrate, calibrate_tight, make_cost

LAW_P = ([0.0, 1.0, 3.0], [0.5, 0.3, 0.2])
LAW_Q = ([0.0, 2.0, 3.0, 5.0], [0.2, 0.3, 0.3, 0.2])


# ----------------------------------------------------------------------------- the reference
def _mp_frac(f: Fraction) -> mp.mpf:
    return mp.mpf(f.numerator) / mp.mpf(f.denominator)


def reference(x: list[float], p: list[float], y: list[float], q: list[float], noise: str,
              scale: float, alpha: float) -> float:
    """D_α(P*N ‖ Q*N) by mpmath, after an exact shift (see the module docstring)."""
    with mp.workdps(30):
        c = min(Fraction(v) for v in [*x, *y])
        b = Fraction(scale)
        xs = [_mp_frac((Fraction(v) - c) / b) for v in x]
        ys = [_mp_frac((Fraction(v) - c) / b) for v in y]
        ps = [mp.mpf(v) for v in p]
        qs = [mp.mpf(v) for v in q]
        if noise == "gaussian":
            def f(u: mp.mpf) -> mp.mpf:
                return mp.exp(-u * u / 2) / mp.sqrt(2 * mp.pi)
        else:
            def f(u: mp.mpf) -> mp.mpf:
                return mp.exp(-abs(u)) / 2

        def dens(t: mp.mpf, atoms: list, w: list) -> mp.mpf:
            return mp.fsum(wk * f(t - zk) for wk, zk in zip(w, atoms, strict=True))

        pts = sorted(set(xs) | set(ys))
        if math.isinf(alpha):
            lo, hi = pts[0] - 5, pts[-1] + 5
            grid = set(pts) | {lo + (hi - lo) * k / 400 for k in range(401)}
            return float(max(mp.log(dens(t, xs, ps) / dens(t, ys, qs)) for t in grid))
        a = mp.mpf(alpha)
        if noise == "gaussian":
            pts = sorted(set(pts) | {a * u - (a - 1) * v for u in xs for v in ys}
                         | {a * v - (a - 1) * u for u in xs for v in ys})

        def integrand(t: mp.mpf) -> mp.mpf:
            return dens(t, xs, ps) ** a * dens(t, ys, qs) ** (1 - a)

        total = mp.quad(integrand, [-mp.inf, *pts, mp.inf])
        return float(mp.log(total) / (a - 1))


def _contains(b: object, ref: float) -> bool:
    tol = 1e-9 * (1.0 + abs(ref))  # the reference's own quadrature error
    return b.lower - tol <= ref <= b.upper + tol  # type: ignore[attr-defined]


def test_reference_shift_matters() -> None:
    """The reference itself: at offset 1e15 it gives the same D as at 0 (it shifts exactly)."""
    x, p = LAW_P
    y, q = LAW_Q
    d0 = reference(x, p, y, q, "laplace", 0.86, 2.0)
    d1 = reference([v + 1e15 for v in x], p, [v + 1e15 for v in y], q, "laplace", 0.86, 2.0)
    assert d0 == pytest.approx(d1, rel=1e-12)


# ----------------------------------------------------------------------------- offsets
_SLOW = pytest.mark.slow
OFFSETS = [0.0, 1.7e12, 1.7e15, 1e16, -1e16,
           *(pytest.param(v, marks=_SLOW) for v in (1e12, 8e15, 123456789012345.0, 2.0**53 + 2.0))]
CASES = [("laplace", 2.0, 0.86102), ("laplace", math.inf, 1.84447), ("gaussian", 2.0, 1.2),
         ("laplace", 8.0, 0.5)]


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize(("noise", "alpha", "scale"), CASES)
def test_bounds_contain_the_truth_at_offsets(offset: float, noise: str, alpha: float,
                                             scale: float) -> None:
    x = [v + offset for v in LAW_P[0]]
    y = [v + offset for v in LAW_Q[0]]
    for a, pa, b, qb in ((x, LAW_P[1], y, LAW_Q[1]), (y, LAW_Q[1], x, LAW_P[1])):
        bounds = divergence_bounds(a, pa, b, qb, noise=noise, scale=scale, alpha=alpha,
                                   gap=1e-6)
        ref = reference(a, pa, b, qb, noise, scale, alpha)
        assert _contains(bounds, ref), (offset, bounds, ref)
        assert bounds.upper - bounds.lower < 1e-4


def test_issue_reproduction_is_fixed() -> None:
    """At offset 1e15 the tight calibration used to certify b = 1.84447 (true D_inf = 1.017 > 1):
    the released scale must now be private by the reference and equal the offset-free one."""
    off = 1e15
    sc0 = Scenario.from_laws({"a": LAW_P, "b": LAW_Q})
    sc = Scenario.from_laws({"a": (np.array(LAW_P[0]) + off, LAW_P[1]),
                             "b": (np.array(LAW_Q[0]) + off, LAW_Q[1])})
    for alpha in (math.inf, 2.0):
        c, c0 = calibrate_tight(sc, alpha, 1.0), calibrate_tight(sc0, alpha, 1.0)
        assert c.scale == c0.scale and c.tight
        xs, ys = list(np.array(LAW_P[0]) + off), list(np.array(LAW_Q[0]) + off)
        worst = max(reference(xs, LAW_P[1], ys, LAW_Q[1], "laplace", c.scale, alpha),
                    reference(ys, LAW_Q[1], xs, LAW_P[1], "laplace", c.scale, alpha))
        assert worst <= 1.0
        assert c.refuted_scale is not None
        below = max(reference(xs, LAW_P[1], ys, LAW_Q[1], "laplace", c.refuted_scale, alpha),
                    reference(ys, LAW_Q[1], xs, LAW_P[1], "laplace", c.refuted_scale, alpha))
        assert below > 1.0  # the "least" claim holds too


@pytest.mark.parametrize(
    ("x", "y", "scale"),
    [
        # near the top of the float range: spacing of doubles there is ~2e292
        ([1.7e308, 1.7e308 + 2**971, 1.7e308 + 3 * 2**971], [1.7e308, 1.7e308 + 2 * 2**971],
         2.0**971),
        ([-1.7e308, -1.7e308 + 2**971], [-1.7e308 + 2**971, -1.7e308 + 3 * 2**971], 2.0**972),
        # tiny and subnormal values
        ([1e-300, 3e-300, 4e-300], [2e-300, 4e-300], 1e-300),
        ([5e-324, 2.5e-323], [1e-323, 2.5e-323], 1e-323),
    ],
)
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_float_range_ends(x: list[float], y: list[float], scale: float, noise: str) -> None:
    p = [1.0 / len(x)] * len(x)
    q = [1.0 / len(y)] * len(y)
    bounds = divergence_bounds(x, p, y, q, noise=noise, scale=scale, alpha=2.0, gap=1e-6)
    assert _contains(bounds, reference(x, p, y, q, noise, scale, 2.0))


def test_span_beyond_the_float_range_is_refused() -> None:
    from certificates.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="double range"):
        divergence_bounds([-1.7e308], [1.0], [1.7e308], [1.0], noise="laplace", scale=1e300,
                          alpha=2.0)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offset=st.sampled_from([0.0, 1.7e12, 1.7e15, 9e15, -3e15]),
    atoms=st.lists(st.integers(0, 40), min_size=2, max_size=4, unique=True),
    other=st.lists(st.integers(0, 40), min_size=2, max_size=4, unique=True),
    scale=st.floats(0.5, 20.0),
    noise=st.sampled_from(["laplace", "gaussian"]),
)
def test_random_laws_at_offsets(offset: float, atoms: list[int], other: list[int], scale: float,
                                noise: str) -> None:
    x = [float(offset + v) for v in atoms]
    y = [float(offset + v) for v in other]
    p = [1.0 / len(x)] * len(x)
    q = [1.0 / len(y)] * len(y)
    bounds = divergence_bounds(x, p, y, q, noise=noise, scale=scale, alpha=3.0, gap=1e-5)
    assert _contains(bounds, reference(x, p, y, q, noise, scale, 3.0))


# ----------------------------------------------------------------------------- scale 0
def test_scale_zero_is_the_divergence_of_the_laws() -> None:
    x, p = [0.0, 1.0, 2.0], [0.5, 0.3, 0.2]
    q = [0.45, 0.35, 0.2]
    exact = math.log(sum(a**2 / b for a, b in zip(p, q, strict=True)))  # alpha = 2
    b = divergence_bounds(x, p, x, q, noise="laplace", scale=0.0, alpha=2.0)
    assert b.lower <= exact <= b.upper and b.upper - b.lower < 1e-12
    dinf = max(math.log(a / b) for a, b in zip(p, q, strict=True))
    b = divergence_bounds(x, p, x, q, noise="laplace", scale=0.0, alpha=math.inf)
    assert b.lower <= dinf <= b.upper
    b = divergence_bounds(x, p, [0.0, 1.0], [0.5, 0.5], noise="gaussian", scale=0.0, alpha=2.0)
    assert b.lower == b.upper == math.inf  # an atom of P outside Q's support


# ----------------------------------------------------------------------------- tampered files
def _tight_file(tmp: Path, noise: str, alpha: float, name: str) -> tuple[Path, dict]:
    sc = Scenario.from_laws({"a": LAW_P, "b": LAW_Q})
    path = tmp / f"{name}.json"
    calibrate_tight(sc, alpha, 1.0, noise).write_certificate(path)
    return path, json.loads(path.read_text())


@pytest.mark.parametrize(
    ("noise", "alpha"), [("laplace", 2.0), ("laplace", math.inf), ("gaussian", 2.0),
                         ("laplace", 8.0), pytest.param("gaussian", 4.0, marks=_SLOW),
                         pytest.param("gaussian", 1.5, marks=_SLOW)],
)
def test_tampered_offset_and_lowered_scale_rejected(tmp_path: Path, noise: str,
                                                    alpha: float) -> None:
    """Add 1e15 to every atom of a stored tight certificate, recompute its digest and lower the
    scale: a false guarantee (the reference shows D > ε) that must be rejected, also by
    ``dpopt verify``; the offset alone (a true claim) is still accepted."""
    _, content = _tight_file(tmp_path, noise, alpha, "orig")
    for pair in content["pairs"]:
        for side in ("p", "q"):
            pair[side]["atoms"] = [v + 1e15 for v in pair[side]["atoms"]]
    shifted = dict(content, sha256=None)
    shifted["sha256"] = digest(shifted)
    ok = tmp_path / "shifted.json"
    ok.write_text(json.dumps(shifted))
    assert verify_mixture_file(ok).certified  # same laws up to a shift: still true
    for factor in (0.97, 0.9):
        forged = dict(content, scale=content["scale"] * factor)
        forged["refuted_scale"] = forged["scale"] * 0.99
        forged["sha256"] = digest(forged)
        bad = tmp_path / f"forged-{factor}.json"
        bad.write_text(json.dumps(forged))
        pair = forged["pairs"][0]
        x, p, y, q = (pair["p"]["atoms"], pair["p"]["probs"], pair["q"]["atoms"],
                      pair["q"]["probs"])
        truth = max(reference(x, p, y, q, noise, forged["scale"], alpha),
                    reference(y, q, x, p, noise, forged["scale"], alpha))
        assert truth > 1.0  # the forged claim is false ...
        with pytest.raises(CertificateError, match="rejected"):
            verify_mixture_file(bad)  # ... and rejected
        assert main(["verify", str(bad)]) == 1


# ----------------------------------------------------------------------------- couplings
def _laplace_log_moment(alpha: mp.mpf, t: mp.mpf) -> mp.mpf:
    """log ∫ Lap(u)^α Lap(u - t)^(1-α) du in closed form (Mironov, "Rényi Differential
    Privacy"), t >= 0 in units of the scale."""
    return mp.log(alpha / (2 * alpha - 1) * mp.exp((alpha - 1) * t)
                  + (alpha - 1) / (2 * alpha - 1) * mp.exp(-alpha * t))


@pytest.mark.parametrize("offset", [0.0, 1.7e12, 1.7e15, 8e15, -1e16, 1e300])
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_coupling_certificates_at_offsets(offset: float, noise: str) -> None:
    """The coupling route differences the atoms before scaling; its certified condition
    log Σ π_ij C(x_i - y_j) <= (α-1)ε re-evaluated with exact differences in mpmath."""
    spread = 1.0 if abs(offset) < 1e299 else 1e285
    sc = Scenario.from_laws({"a": (np.array(LAW_P[0]) * spread + offset, LAW_P[1]),
                             "b": (np.array(LAW_Q[0]) * spread + offset, LAW_Q[1])})
    alpha, eps = 2.0, 1.0
    cal = calibrate(sc, make_cost(noise, alpha), eps)
    assert cal.certified
    with mp.workdps(40):
        a = mp.mpf(alpha)
        laws = {(t, si, sj): (pl, ql) for t, si, sj, pl, ql in sc.iter_pairs()}
        assert len(cal.pairs) == len(laws)
        for pair in cal.pairs:
            law_p, law_q = laws[(pair.prior, *pair.secrets)]
            xs, ys = law_p.support[:, 0], law_q.support[:, 0]
            cert = pair.certificate
            terms = []
            for i, j, w in zip(cert.rows, cert.cols, cert.mass, strict=True):
                t = abs(_mp_frac((Fraction(float(xs[i])) - Fraction(float(ys[j])))
                                 / Fraction(cal.scale)))
                lc = (_laplace_log_moment(a, t) if noise == "laplace"
                      else a * (a - 1) * t * t / 2)
                terms.append(mp.mpf(float(w)) * mp.exp(lc))
            value = mp.log(mp.fsum(terms))
            assert value <= (a - 1) * eps * (1 + mp.mpf(1e-12))


def test_check_calibration_refuses_nothing_silently_at_offsets() -> None:
    """check_calibration at 8e15 agrees with the offset-free laws (the same laws, shifted)."""
    pairs0 = [("r", *LAW_P, *LAW_Q)]
    off = 8e15
    pairs = [("r", list(np.array(LAW_P[0]) + off), LAW_P[1], list(np.array(LAW_Q[0]) + off),
              LAW_Q[1])]
    for noise, alpha, scale in CASES:
        c0 = check_calibration(pairs0, noise=noise, alpha=alpha, epsilon=1.0, scale=scale)
        c1 = check_calibration(pairs, noise=noise, alpha=alpha, epsilon=1.0, scale=scale)
        assert c0.certified == c1.certified
        assert c1.upper == pytest.approx(c0.upper, rel=1e-9)
