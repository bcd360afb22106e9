"""Benchmark: the vectorised accounting inverses against per-element calls and dp-accounting.

For N random (ε, δ) budgets (ε log-uniform in [1e-2, 10], δ log-uniform in [1e-15, 1e-2]) it
times, side by side in one run:

- ``vectorised``: one call of dpopt's function on the whole array (safeguarded Newton on arrays);
- ``scalar loop``: a Python loop calling the same function on one element at a time (the pattern
  of the earlier per-element implementation), on a sub-sample;
- ``dp-accounting``: the same quantities from Google's dp-accounting scalar calls, when it is
  installed (``gaussian_mechanism.get_sigma_gaussian`` for σ, μ = 1/σ and q = 1/σ²;
  ``gaussian_mechanism.get_epsilon_gaussian`` for ε), on a sub-sample. Skipped when it is not
  importable.

It then re-checks a sample of every vectorised answer against an independent 60-digit mpmath
root of δ(ε; μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) and prints the largest relative distance
(and whether any answer is on the unsafe side). Rates are points per second, medians of
``--repeat`` runs; the machine may be shared, so only ratios measured in the same run mean much.

Usage: ``python scripts/bench_accounting.py [--n 100000] [--loop-n 300] [--check 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mpmath
import numpy as np

from dpopt.accounting import gdp

try:
    from dpopt.accounting.budgets import approx_dp_bound
except ImportError:  # an older dpopt without the vectorised bound
    approx_dp_bound = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "dpopt" / "accounting"))
from mp_reference import mp_log_delta


def _rate(call: Callable[[], Any], points: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return points / statistics.median(times)


def _dp_accounting() -> dict[str, Callable[[float, float], float]] | None:
    try:
        from dp_accounting import gaussian_mechanism as gm
    except ImportError:
        return None

    return {
        "mu_for": lambda e, d: 1.0 / gm.get_sigma_gaussian(e, d),
        "gaussian_sigma": gm.get_sigma_gaussian,
        "epsilon_for_delta": lambda d, mu: gm.get_epsilon_gaussian(1.0 / mu, d),
        "approx_dp_bound": lambda e, d: gm.get_sigma_gaussian(e, d) ** -2,
    }


def _mp_mu_root(eps: float, delta: float, start: float) -> mpmath.mpf:
    target = mpmath.log(mpmath.mpf(delta))
    with mpmath.workdps(60):
        return mpmath.findroot(
            lambda y: mp_log_delta(eps, mpmath.exp(y)) - target,
            (mpmath.log(start), mpmath.log(start) + mpmath.mpf("1e-6")),
            solver="secant",
            tol=mpmath.mpf(10) ** -50,
        )


def _mp_eps_root(delta: float, mu: float, start: float) -> mpmath.mpf:
    target = mpmath.log(mpmath.mpf(delta))
    with mpmath.workdps(60):
        return mpmath.findroot(
            lambda e: mp_log_delta(e, mu) - target,
            (mpmath.mpf(start), mpmath.mpf(start) * (1 + mpmath.mpf("1e-6"))),
            solver="secant",
            tol=mpmath.mpf(10) ** -50,
        )


def _accuracy(eps: np.ndarray, delta: np.ndarray, check: int) -> dict[str, tuple[float, bool]]:
    """Largest relative distance to the mpmath root, and whether every answer was safe."""
    e, d = eps[:check], delta[:check]
    mu = np.asarray(gdp.mu_for(e, d))
    sigma = np.asarray(gdp.gaussian_sigma(e, d))
    mu_ref = [
        mpmath.exp(_mp_mu_root(float(a), float(b), float(m)))
        for a, b, m in zip(e, d, mu, strict=True)
    ]
    out: dict[str, tuple[float, bool]] = {}
    dist = [abs(float((m - r) / r)) for m, r in zip(mu, mu_ref, strict=True)]
    out["mu_for"] = (max(dist), all(m <= r for m, r in zip(mu, mu_ref, strict=True)))
    dist = [abs(float((1 / s - r) / r)) for s, r in zip(sigma, mu_ref, strict=True)]
    out["gaussian_sigma"] = (
        max(dist),
        all(1 / mpmath.mpf(s) <= r for s, r in zip(sigma, mu_ref, strict=True)),
    )
    if approx_dp_bound is not None:
        q = np.asarray(approx_dp_bound(e, d))
        dist = [abs(float((qi - r * r) / (r * r))) for qi, r in zip(q, mu_ref, strict=True)]
        out["approx_dp_bound"] = (
            max(dist),
            all(qi <= r * r for qi, r in zip(q, mu_ref, strict=True)),
        )
    mus = 10 ** np.linspace(-1.5, 1.0, e.size)
    eps_back = np.asarray(gdp.epsilon_for_delta(d, mus))
    refs = [
        _mp_eps_root(float(b), float(m), float(x)) for b, m, x in zip(d, mus, eps_back, strict=True)
    ]
    dist = [abs(float((x - r) / r)) for x, r in zip(eps_back, refs, strict=True)]
    out["epsilon_for_delta"] = (max(dist), all(x >= r for x, r in zip(eps_back, refs, strict=True)))
    # forward curve: relative error of log delta
    ld = np.asarray(gdp.log_delta_for_epsilon(e, mus))
    dist = [
        abs(float((x - mp_log_delta(float(a), float(m))) / mp_log_delta(float(a), float(m))))
        for x, a, m in zip(ld, e, mus, strict=True)
    ]
    out["log_delta_for_epsilon"] = (max(dist), True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="points for the vectorised calls")
    parser.add_argument("--loop-n", type=int, default=300, help="points for the per-element loops")
    parser.add_argument("--check", type=int, default=100, help="points re-checked with mpmath")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    eps = 10 ** rng.uniform(-2, 1, args.n)
    delta = 10 ** rng.uniform(-15, -2, args.n)
    mus = np.asarray(gdp.mu_for(eps, delta))
    k = args.loop_n
    peers = _dp_accounting()

    cases: dict[str, tuple[Callable[[], Any], Callable[[int], Any]]] = {
        "mu_for": (
            lambda: gdp.mu_for(eps, delta),
            lambda i: gdp.mu_for(float(eps[i]), float(delta[i])),
        ),
        "gaussian_sigma": (
            lambda: gdp.gaussian_sigma(eps, delta),
            lambda i: gdp.gaussian_sigma(float(eps[i]), float(delta[i])),
        ),
        "epsilon_for_delta": (
            lambda: gdp.epsilon_for_delta(delta, mus),
            lambda i: gdp.epsilon_for_delta(float(delta[i]), float(mus[i])),
        ),
    }
    if approx_dp_bound is not None:
        bound = approx_dp_bound
        cases["approx_dp_bound"] = (
            lambda: bound(eps, delta),
            lambda i: bound(float(eps[i]), float(delta[i])),
        )
    forward = _rate(lambda: gdp.delta_for_epsilon(eps, mus), args.n, args.repeat)

    print(f"accounting inverses, N = {args.n} vectorised, {k} per-element (points/s)")
    header = f"{'function':<22}{'vectorised':>12}{'scalar loop':>13}{'ratio':>8}"
    header += f"{'dp-accounting':>15}{'ratio':>9}" if peers else "   (dp-accounting not installed)"
    print(header)
    for name, (vec, one) in cases.items():
        v = _rate(vec, args.n, args.repeat)
        s = _rate(lambda one=one: [one(i) for i in range(k)], k, 1)
        line = f"{name:<22}{v:>12.3g}{s:>13.3g}{v / s:>8.0f}"
        if peers:
            peer = peers[name]
            first, second = (delta, mus) if name == "epsilon_for_delta" else (eps, delta)
            p = _rate(
                lambda peer=peer, first=first, second=second: [
                    peer(float(first[i]), float(second[i])) for i in range(k)
                ],
                k,
                1,
            )
            line += f"{p:>15.3g}{v / p:>9.0f}"
        print(line)
    print(f"{'delta_for_epsilon':<22}{forward:>12.3g}   (forward formula, for scale)")

    if args.check > 0:
        print(f"\nmax relative distance to the 60-digit mpmath root ({args.check} points)")
        for name, (dist, safe) in _accuracy(eps, delta, args.check).items():
            print(f"{name:<22}{dist:>12.2e}   {'all on the safe side' if safe else 'UNSAFE'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
