"""Proven Rényi-divergence bounds of noisy mixtures against closed forms, mpmath and scipy quad."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.errors import CertificateError, InvalidParameterError
from certificates.renyi_mixture import (
    check_calibration,
    divergence_bounds,
    verify_mixture_file,
    write_mixture_certificate,
)
from certificates.strict_json import digest
from tests.mixture_files import MIXED_SPELLINGS, PAIRS, mixed_spelling_file, to_v1


def laplace_point_mass(alpha: float, t: float) -> float:
    """Mironov's closed form of D_alpha(Lap(0, 1) || Lap(t, 1)), in log-stable form."""
    if math.isinf(alpha):
        return abs(t)
    t = abs(t)
    a = alpha
    return ((a - 1) * t + math.log(a / (2 * a - 1) + (a - 1) / (2 * a - 1) * math.exp(-(2 * a - 1) * t))) / (a - 1)  # noqa: E501


def mp_divergence(x, p, y, q, noise: str, scale: float, alpha: float, dps: int = 25) -> float:
    """Independent D_alpha by mpmath quadrature, breakpoints at every atom (and a 1-scale grid)."""
    with mp.workdps(dps):
        xs = [mp.mpf(v) / scale for v in x]
        ys = [mp.mpf(v) / scale for v in y]
        ps = [mp.mpf(v) for v in p]
        qs = [mp.mpf(v) for v in q]
        a = mp.mpf(alpha)
        if noise == "laplace":
            def f(u):
                return mp.exp(-abs(u)) / 2
        else:
            def f(u):
                return mp.exp(-u * u / 2) / mp.sqrt(2 * mp.pi)

        def integrand(t):
            pt = mp.fsum(w * f(t - v) for w, v in zip(ps, xs, strict=True))
            qt = mp.fsum(w * f(t - v) for w, v in zip(qs, ys, strict=True))
            return pt**a * qt ** (1 - a)

        pts = sorted(set(xs) | set(ys))
        if noise == "gaussian":
            centres = [a * u - (a - 1) * v for u in xs for v in ys]
            lo = min(min(pts), min(centres)) - 10
            hi = max(max(pts), max(centres)) + 10
            pts = sorted(set(pts) | {mp.mpf(v) for v in np.arange(float(lo), float(hi), 2.5)})
        total = mp.quad(integrand, [-mp.inf, *pts, mp.inf])
        return float(mp.log(total) / (a - 1))


# --------------------------------------------------------------------------- closed forms
@settings(max_examples=40)
@given(
    t=st.floats(0.0, 30.0),
    scale=st.floats(0.05, 20.0),
    alpha=st.floats(1.01, 60.0),
)
def test_laplace_point_masses_closed_form(t: float, scale: float, alpha: float) -> None:
    b = divergence_bounds([0.0], [1.0], [t * scale], [1.0], noise="laplace", scale=scale,
                          alpha=alpha, gap=1e-6)
    exact = laplace_point_mass(alpha, t)
    assert b.lower <= exact * (1 + 1e-12) + 1e-14
    assert exact <= b.upper * (1 + 1e-12) + 1e-14
    assert b.upper - b.lower <= 2e-6  # the requested gap, up to the refinement's last step


@settings(max_examples=40)
@given(
    z=st.floats(0.0, 8.0),
    scale=st.floats(0.05, 20.0),
    alpha=st.floats(1.01, 60.0),
)
def test_gaussian_point_masses_closed_form(z: float, scale: float, alpha: float) -> None:
    b = divergence_bounds([0.0], [1.0], [z * scale], [1.0], noise="gaussian", scale=scale,
                          alpha=alpha, gap=1e-5)
    exact = alpha * z * z / 2
    assert b.lower <= exact * (1 + 1e-12) + 1e-12
    assert exact <= b.upper * (1 + 1e-12) + 1e-12
    assert b.upper - b.lower <= 1e-5 + 1e-8


@pytest.mark.parametrize("t", [0.0, 0.3, 2.0, 50.0])
def test_laplace_pure_point_masses(t: float) -> None:
    b = divergence_bounds([0.0], [1.0], [t], [1.0], noise="laplace", scale=1.0, alpha=np.inf)
    assert b.lower <= t <= b.upper
    assert b.upper - b.lower < 1e-9


# --------------------------------------------------------------------------- mpmath references
def random_law(rng: np.random.Generator, k: int, spread: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.round(rng.uniform(-spread, spread, k), 3)
    p = rng.dirichlet(np.ones(k))
    p = p / p.sum()
    return x, p


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_bounds_contain_mpmath(seed: int, noise: str) -> None:
    rng = np.random.default_rng(seed)
    x, p = random_law(rng, int(rng.integers(1, 5)), 2.0)
    y, q = random_law(rng, int(rng.integers(1, 5)), 2.0)
    alpha = float(rng.choice([1.3, 2.0, 4.0, 9.0] if noise == "laplace" else [1.3, 2.0, 4.0]))
    scale = float(rng.uniform(0.4, 2.0))
    ref = mp_divergence(x, p, y, q, noise, scale, alpha)
    b = divergence_bounds(x, p, y, q, noise=noise, scale=scale, alpha=alpha, gap=1e-6)
    assert b.lower <= ref + 1e-12 * (1 + ref)
    assert ref <= b.upper + 1e-12 * (1 + ref)
    assert b.upper - b.lower <= 1e-6 + 1e-8


def test_laplace_pure_matches_brute_force_ratio() -> None:
    rng = np.random.default_rng(7)
    x, p = random_law(rng, 4, 3.0)
    y, q = random_law(rng, 5, 3.0)
    b = divergence_bounds(x, p, y, q, noise="laplace", scale=0.7, alpha=np.inf)
    t = np.concatenate([np.linspace(-20, 20, 40001), x, y])
    dens_p = (p[None, :] * np.exp(-np.abs(t[:, None] - x[None, :]) / 0.7)).sum(1)
    dens_q = (q[None, :] * np.exp(-np.abs(t[:, None] - y[None, :]) / 0.7)).sum(1)
    brute = float(np.max(np.log(dens_p) - np.log(dens_q)))
    assert b.lower <= brute + 1e-12 <= b.upper + 2e-12
    assert b.upper - brute < 1e-9  # the sup is attained at an atom


# --------------------------------------------------------------------------- adversarial laws
def cluster_reference(alpha: float, masses, t_shift: float, noise: str) -> float:
    """Far-separated clusters, one atom of P and one of Q each at shift t (units of scale)."""
    terms = []
    for pw, qw in masses:
        if noise == "laplace":
            log_m = (alpha - 1) * laplace_point_mass(alpha, t_shift)
        else:
            log_m = alpha * (alpha - 1) * t_shift**2 / 2
        terms.append(alpha * math.log(pw) + (1 - alpha) * math.log(qw) + log_m)
    return float(np.logaddexp.reduce(terms)) / (alpha - 1)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("far", [1e3, 1e6])
@pytest.mark.parametrize("tiny", [1e-12, 1e-200])
def test_tiny_far_atoms_and_huge_ranges(noise: str, far: float, tiny: float) -> None:
    alpha = 3.0
    x = [0.0, far]
    p = [1 - tiny, tiny]
    y = [0.5, far + 0.5]
    q = [1 - 2 * tiny, 2 * tiny]
    b = divergence_bounds(x, p, y, q, noise=noise, scale=1.0, alpha=alpha, gap=1e-6)
    ref = cluster_reference(alpha, [(1 - tiny, 1 - 2 * tiny), (tiny, 2 * tiny)], 0.5, noise)
    assert b.lower <= ref + 1e-12 <= b.upper + 2e-12
    # the reverse order puts the far atom's weight ratio the other way
    r = divergence_bounds(y, q, x, p, noise=noise, scale=1.0, alpha=alpha, gap=1e-6)
    ref_r = cluster_reference(alpha, [(1 - 2 * tiny, 1 - tiny), (2 * tiny, tiny)], 0.5, noise)
    assert r.lower <= ref_r + 1e-12 <= r.upper + 2e-12


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_far_atom_only_in_one_law(noise: str) -> None:
    # P has a tiny atom 40 scales away from every atom of Q: the divergence is dominated by it
    d = 1e-9
    x, p = [0.0, 40.0], [1 - d, d]
    y, q = [0.0], [1.0]
    b = divergence_bounds(x, p, y, q, noise=noise, scale=1.0, alpha=2.0, gap=1e-6)
    # closed forms of int p^2 / q, expanding p^2 = sum of three products of noise densities
    with mp.workdps(50):
        dd = mp.mpf(d)
        if noise == "laplace":
            # int e^{-|t-40|}^2 e^{|t|} / 2 = e^{-80}/2 + (e^{40} - e^{-80})/6 + e^{40}/2
            cross = mp.e**-80 + (mp.e**40 - mp.e**-80) / 3 + mp.e**40
            integral = ((1 - dd) ** 2 * 2 + 4 * dd * (1 - dd) + dd**2 * cross) / 2
        else:  # int phi(t - z)^2 / phi(t) dt = e^{z^2}
            integral = (1 - dd) ** 2 + 2 * dd * (1 - dd) + dd**2 * mp.e**1600
        ref = float(mp.log(integral))
    assert b.lower <= ref * (1 + 1e-12) and ref <= b.upper * (1 + 1e-12)
    assert b.upper - b.lower <= 2e-6  # the requested gap, up to the refinement's last step


def test_duplicates_are_merged() -> None:
    x, p = [0.0, 1.0, 1.0, 2.0], [0.25, 0.25, 0.25, 0.25]
    xm, pm = [0.0, 1.0, 2.0], [0.25, 0.5, 0.25]
    y, q = [0.5, 0.5], [0.5, 0.5]
    for noise in ("laplace", "gaussian"):
        a = divergence_bounds(x, p, y, q, noise=noise, scale=0.8, alpha=2.5, gap=1e-7)
        b = divergence_bounds(xm, pm, [0.5], [1.0], noise=noise, scale=0.8, alpha=2.5, gap=1e-7)
        assert max(a.lower, b.lower) <= min(a.upper, b.upper) + 1e-12


# --------------------------------------------------------------------------- input errors
@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"noise": "cauchy"}, "noise"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": 0.5}, "alpha"),
        ({"alpha": np.inf, "noise": "gaussian"}, "alpha"),
        ({"scale": -1.0}, "scale"),
        ({"scale": 1e-310}, "scale"),
        ({"gap": 0.0}, "gap"),
    ],
)
def test_bad_parameters(kw: dict, needle: str) -> None:
    args = {"noise": "laplace", "scale": 1.0, "alpha": 2.0, **kw}
    with pytest.raises(InvalidParameterError, match=needle):
        divergence_bounds([0.0, 1e300], [0.5, 0.5], [1.0], [1.0], **args)


def test_bad_laws() -> None:
    with pytest.raises(InvalidParameterError, match="P probabilities"):
        divergence_bounds([0.0], [0.5], [1.0], [1.0], noise="laplace", scale=1.0, alpha=2.0)
    with pytest.raises(InvalidParameterError, match="Q atoms"):
        divergence_bounds([0.0], [1.0], [np.nan], [1.0], noise="laplace", scale=1.0, alpha=2.0)
    with pytest.raises(InvalidParameterError, match="P probabilities"):
        divergence_bounds([0.0, 1.0], [1.0], [1.0], [1.0], noise="laplace", scale=1, alpha=2)


# --------------------------------------------------------------------------- certificate files


def test_check_calibration_r1() -> None:
    # true least Laplace scale of R1 at alpha = 2, eps = 1 is 0.40521198 (quadrature)
    ok = check_calibration(PAIRS, noise="laplace", alpha=2.0, epsilon=1.0, scale=0.41,
                           refuted_scale=0.40)
    assert ok.certified and ok.tight
    bad = check_calibration(PAIRS, noise="laplace", alpha=2.0, epsilon=1.0, scale=0.40)
    assert not bad.certified and not bad.tight
    with pytest.raises(InvalidParameterError, match="refuted_scale"):
        check_calibration(PAIRS, noise="laplace", alpha=2.0, epsilon=1.0, scale=0.4,
                          refuted_scale=0.5)


def test_certificate_file_round_trip_and_tampering(tmp_path: Path) -> None:
    cert = check_calibration(PAIRS, noise="gaussian", alpha=2.0, epsilon=1.0, scale=0.72,
                             refuted_scale=0.70)
    assert cert.certified and cert.tight
    path = tmp_path / "c.json"
    write_mixture_certificate(path, PAIRS, cert)
    again = verify_mixture_file(path)
    assert again.certified and again.tight
    with pytest.raises(InvalidParameterError, match="exists"):
        write_mixture_certificate(path, PAIRS, cert)

    content = json.loads(path.read_text())
    # an edited digit without a new hash
    edited = dict(content, scale=0.705)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(edited))
    with pytest.raises(CertificateError, match="sha256"):
        verify_mixture_file(bad)
    # an edited scale *with* a recomputed hash: the re-derived bound exposes it
    edited["sha256"] = digest(edited)
    bad.write_text(json.dumps(edited))
    with pytest.raises(CertificateError, match="rejected"):
        verify_mixture_file(bad)
    # an edited law (more mass on a far atom) with a recomputed hash
    forged = json.loads(path.read_text())
    forged["pairs"][0]["p"]["atoms"] = [0.0, 1.0, 4.0]
    forged["sha256"] = digest(forged)
    bad.write_text(json.dumps(forged))
    with pytest.raises(CertificateError, match="rejected"):
        verify_mixture_file(bad)
    bad.write_text("{not json")
    with pytest.raises(CertificateError, match="not valid JSON"):
        verify_mixture_file(bad)


@pytest.mark.parametrize(
    ("a", "b"),
    [(-1.0, 1.0), (-40.0, -39.99), (-1e8, -1e8 + 1e-6), (5.0, 5.0000001), (-1e-20, 1e-20),
     (-3.0, -2.0), (10.0, 12.0), (-38.0, 38.0), (0.0, 1e-300)],
)
def test_normal_cdf_difference_bounds(a: float, b: float) -> None:
    from certificates.renyi_mixture import _log_diff_ndtr

    m, h = 0.5 * (a + b), 0.5 * (b - a)  # the interval [m - h, m + h] of these exact doubles
    low, high = _log_diff_ndtr(np.array([m]), np.array([h]))
    with mp.workdps(400):  # enough digits for a difference of 1e-300 near 1/2
        ref = mp.log(mp.ncdf(mp.mpf(m) + mp.mpf(h)) - mp.ncdf(mp.mpf(m) - mp.mpf(h)))
    assert float(low[0]) <= ref <= float(high[0])
    assert float(high[0]) - float(low[0]) <= 1e-6 * (1 + abs(float(ref)))


@pytest.mark.parametrize(("m", "h"), [(-1.5e13, 1e-4), (1.5e13, 3e-3), (-1e10, 1e-9),
                                      (2e16, 0.5), (-3e15, 1e-300)])
def test_normal_cdf_difference_bounds_where_the_ends_round(m: float, h: float) -> None:
    """A centre far larger than the half-width: m +- h round (or coincide) in floats; the bounds
    must still hold for the exact interval, and stay finite (no NaN from an empty interval)."""
    from certificates.renyi_mixture import _log_diff_ndtr

    with np.errstate(all="raise"):
        low, high = _log_diff_ndtr(np.array([m]), np.array([h]))
    assert math.isfinite(float(high[0])) and not math.isnan(float(low[0]))
    with mp.workdps(400):  # the ratio of the two tails differs from 1 by ~ 2 |m| h
        mm, hh = -abs(mp.mpf(m)), mp.mpf(h)  # the mirror image in the left tail
        lb = mp.log(mp.ncdf(mm + hh))
        ref = lb + mp.log(1 - mp.exp(mp.log(mp.ncdf(mm - hh)) - lb))
    assert float(low[0]) <= ref <= float(high[0])


# ------------------------------------------------ file format /2: infinity is null, /1 still read
def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-finite number {name} in a file")

    return json.loads(text, parse_constant=refuse)


def _infinite_strings(obj: object) -> list[object]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _infinite_strings(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _infinite_strings(v)]
    return [obj] if isinstance(obj, str) and obj.lower() in ("inf", "infinity", "nan") else []


def test_pure_certificate_writes_null_and_round_trips(tmp_path: Path) -> None:
    from certificates.renyi_mixture import FORMAT, read_mixture_certificate

    # alpha = inf (pure), and an upper that is infinite: at scale 0 the laws' own D_inf is
    # infinite because an atom of P is not one of Q
    for scale, refuted in ((1.0, 0.5), (0.0, None)):
        cert = check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0,
                                 scale=scale, refuted_scale=refuted)
        path = tmp_path / f"pure{scale}.json"
        write_mixture_certificate(path, PAIRS, cert)
        content = _strict(path.read_text())
        assert content["format"] == FORMAT == "dpopt-renyi-mixture-certificate/2"
        assert content["alpha"] is None
        assert _infinite_strings(content) == []
        assert (content["claim"]["upper"] is None) == math.isinf(cert.upper)
        back = read_mixture_certificate(path)
        assert math.isinf(back["alpha"]) and back["upper"] == cert.upper
        again = verify_mixture_file(path)
        assert again.certified == cert.certified == (scale > 0) and math.isinf(again.alpha)
        # the same file as format /1 wrote it: still read, verified and schema-valid
        old = to_v1(content)
        assert old["alpha"] == "inf"
        old_path = tmp_path / f"old{scale}.json"
        old_path.write_text(json.dumps(old))
        assert read_mixture_certificate(old_path)["format"] == "dpopt-renyi-mixture-certificate/1"
        assert verify_mixture_file(old_path).upper == again.upper
    assert math.isinf(check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0,
                                        scale=0.0).upper)  # the second case really is infinite


@pytest.mark.parametrize(("tag", "field", "value", "needle"),
                         [*MIXED_SPELLINGS, ("/3", "alpha", None, "format: must be")])
def test_a_file_mixing_the_two_spellings_is_refused(tmp_path: Path, tag: str, field: str,
                                                    value: object, needle: str) -> None:
    bad = mixed_spelling_file(tmp_path, tag, field, value)
    with pytest.raises(CertificateError, match=re.escape(needle)):
        verify_mixture_file(bad)
