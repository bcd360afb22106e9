"""Benchmark: the vectorised accounting inverses against the forward curve, loops and dp-accounting.

For N random (ε, δ) budgets over two ranges,

- ``typical``: ε log-uniform in [1e-2, 10], δ log-uniform in [1e-15, 1e-2];
- ``extreme``: ε log-uniform in [1e-3, 500], δ log-uniform in [1e-300, 1e-1];

it times, side by side in one run and with one BLAS thread, each inverse on the whole array
(``mu_for``, ``gaussian_sigma``, ``epsilon_for_delta`` at the μ of those budgets, and
``approx_dp_bound``, the vectorised ``ApproxDP(ε, δ).mahalanobis_bound()``) and prints

- its throughput in points per second, by the wall clock and by the process's own CPU time (the
  machine may be shared: the CPU-time figure is the less load-dependent one);
- its ratio to the forward formula ``delta_for_epsilon`` on the same points (a load-independent
  measure of the cost of inverting: an inverse costs at least one forward evaluation);
- its ratio to a Python loop calling the same function per element, and to Google's
  dp-accounting scalar calls where it has the same quantity
  (``gaussian_mechanism.get_sigma_gaussian`` for σ, μ = 1/σ and q = 1/σ²;
  ``get_epsilon_gaussian`` for ε), on a sub-sample, when dp-accounting is installed;
- the target status: at least 1e5 points/s (wall clock) in both ranges, met or missed.

It then re-checks a sample of every vectorised answer (both ranges) against an independent
60-digit mpmath root of δ(ε; μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) and prints the largest
relative distance and whether every answer is on the safe side. Rates are the best of
``--repeat`` runs; the load average is printed before and after.

Usage: ``python scripts/bench_accounting.py [--n 100000] [--loop-n 300] [--check 100]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import mpmath  # noqa: E402
import numpy as np  # noqa: E402

from dpopt.accounting import gdp  # noqa: E402
from dpopt.accounting.budgets import approx_dp_bound  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "dpopt" / "accounting"))
from mp_reference import mp_log_delta  # noqa: E402

TARGET = 1e5  # points per second, wall clock, every range
RANGES = {
    "typical": (-2.0, 1.0, -15.0, -2.0),
    "extreme": (-3.0, float(np.log10(500.0)), -300.0, -1.0),
}
NAMES = ("mu_for", "gaussian_sigma", "epsilon_for_delta", "approx_dp_bound")


def _rates(call: Callable[[], Any], points: int, repeat: int) -> tuple[float, float]:
    """(wall-clock, CPU-time) points per second, the best of ``repeat`` runs each."""
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return points / min(wall), points / max(min(cpu), 1e-9)


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


def _mp_root(func: Callable[[mpmath.mpf], mpmath.mpf], start: mpmath.mpf) -> mpmath.mpf:
    with mpmath.workdps(60):
        return mpmath.findroot(
            func,
            (start, start * (1 + mpmath.mpf("1e-6"))),
            solver="secant",
            tol=mpmath.mpf(10) ** -50,
        )


def _mu_equation(eps: float, target: mpmath.mpf) -> Callable[[mpmath.mpf], mpmath.mpf]:
    return lambda y: mp_log_delta(eps, mpmath.exp(y)) - target


def _eps_equation(mu: float, target: mpmath.mpf) -> Callable[[mpmath.mpf], mpmath.mpf]:
    return lambda x: mp_log_delta(x, mu) - target


def _accuracy(eps: np.ndarray, delta: np.ndarray) -> dict[str, tuple[float, bool]]:
    """Largest relative distance to the mpmath root, and whether every answer was safe."""
    mu = np.asarray(gdp.mu_for(eps, delta))
    sigma = np.asarray(gdp.gaussian_sigma(eps, delta))
    q = np.asarray(approx_dp_bound(eps, delta))
    eps_back = np.asarray(gdp.epsilon_for_delta(delta, mu))
    out: dict[str, tuple[float, bool]] = {name: (0.0, True) for name in NAMES}

    def add(name: str, got: mpmath.mpf, ref: mpmath.mpf, safe: bool) -> None:
        dist, ok = out[name]
        out[name] = (max(dist, abs(float((got - ref) / ref))), ok and safe)

    for i in range(eps.size):
        e, d, m = float(eps[i]), float(delta[i]), float(mu[i])
        target = mpmath.log(mpmath.mpf(d))
        with mpmath.workdps(60):
            root = mpmath.exp(_mp_root(_mu_equation(e, target), mpmath.log(mpmath.mpf(m))))
            add("mu_for", mpmath.mpf(m), root, mpmath.mpf(m) <= root)
            inv_sigma = 1 / mpmath.mpf(float(sigma[i]))
            add("gaussian_sigma", inv_sigma, root, inv_sigma <= root)
            qi = mpmath.mpf(float(q[i]))
            add("approx_dp_bound", qi, root * root, qi <= root * root)
            if eps_back[i] > 0.0:
                got = mpmath.mpf(float(eps_back[i]))
                ref = _mp_root(_eps_equation(m, target), got)
                add("epsilon_for_delta", got, ref, got >= ref)
    return out


def _bench_range(
    label: str,
    eps: np.ndarray,
    delta: np.ndarray,
    mus: np.ndarray,
    bounds: tuple[float, float, float, float],
    peers: dict[str, Callable[[float, float], float]] | None,
    args: argparse.Namespace,
) -> dict[str, tuple[float, float, float]]:
    """Print one range's table; return each inverse's (wall, CPU) rates and CPU ratio to fwd."""
    k = args.loop_n
    walls: dict[str, tuple[float, float, float]] = {}
    vector: dict[str, Callable[[], Any]] = {
        "mu_for": lambda: gdp.mu_for(eps, delta),
        "gaussian_sigma": lambda: gdp.gaussian_sigma(eps, delta),
        "epsilon_for_delta": lambda: gdp.epsilon_for_delta(delta, mus),
        "approx_dp_bound": lambda: approx_dp_bound(eps, delta),
    }
    single: dict[str, Callable[[int], Any]] = {
        "mu_for": lambda i: gdp.mu_for(float(eps[i]), float(delta[i])),
        "gaussian_sigma": lambda i: gdp.gaussian_sigma(float(eps[i]), float(delta[i])),
        "epsilon_for_delta": lambda i: gdp.epsilon_for_delta(float(delta[i]), float(mus[i])),
        "approx_dp_bound": lambda i: approx_dp_bound(float(eps[i]), float(delta[i])),
    }
    fwd_wall, fwd_cpu = _rates(lambda: gdp.delta_for_epsilon(eps, mus), args.n, args.repeat)
    e_lo, e_hi, d_lo, d_hi = bounds
    print(
        f"\n{label}: eps in [{10**e_lo:.0e}, {10**e_hi:.0f}], delta in "
        f"[{10**d_lo:.0e}, {10**d_hi:.0e}] (points/s)"
    )
    head = f"{'function':<19}{'wall':>9}{'cpu':>9}{'/fwd':>7}{'loop':>8}{'×loop':>7}"
    head += f"{'dp-acc.':>9}{'×dp-acc.':>9}" if peers else "  (dp-accounting not installed)"
    print(head + f"{'target':>9}")
    for name in NAMES:
        wall, cpu = _rates(vector[name], args.n, args.repeat)
        one = single[name]
        loop = _rates(lambda one=one: [one(i) for i in range(k)], k, 1)[0]
        line = f"{name:<19}{wall:>9.3g}{cpu:>9.3g}{cpu / fwd_cpu:>7.2f}{loop:>8.3g}"
        line += f"{wall / loop:>7.0f}"
        if peers:
            peer = peers[name]
            first, second = (delta, mus) if name == "epsilon_for_delta" else (eps, delta)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p = _rates(
                        lambda peer=peer, first=first, second=second: [
                            peer(float(first[i]), float(second[i])) for i in range(k)
                        ],
                        k,
                        1,
                    )[0]
                line += f"{p:>9.3g}{wall / p:>9.0f}"
            except Exception as exc:  # dp-accounting's own failure on this range
                line += f"{'fails':>9}{'':>9}"
                print(f"  (dp-accounting {name}: {type(exc).__name__}: {exc})")
        walls[name] = (wall, cpu, cpu / fwd_cpu)
        line += f"{'met' if wall >= TARGET else 'MISSED':>9}"
        print(line)
    print(
        f"{'delta_for_epsilon':<19}{fwd_wall:>9.3g}{fwd_cpu:>9.3g}{1.0:>7.2f}"
        "   (the forward formula on the same points)"
    )

    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="points for the vectorised calls")
    parser.add_argument("--loop-n", type=int, default=300, help="points for the per-element loops")
    parser.add_argument("--check", type=int, default=100, help="points re-checked with mpmath")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    peers = _dp_accounting()
    k = args.loop_n
    load0 = os.getloadavg()
    print(
        f"accounting inverses: N = {args.n} points per call, {k} per-element calls, one BLAS "
        f"thread; load average {load0[0]:.1f} (1 min), {os.cpu_count()} CPUs"
    )
    status: dict[str, tuple[float, float, float]] = {}
    samples = {}
    for label, (e_lo, e_hi, d_lo, d_hi) in RANGES.items():
        eps = 10 ** rng.uniform(e_lo, e_hi, args.n)
        delta = 10 ** rng.uniform(d_lo, d_hi, args.n)
        mus = np.asarray(gdp.mu_for(eps, delta))
        samples[label] = (eps[: args.check], delta[: args.check])
        rates = _bench_range(label, eps, delta, mus, RANGES[label], peers, args)
        for name, row in rates.items():
            old = status.get(name, (np.inf, np.inf, np.inf))
            status[name] = (min(old[0], row[0]), min(old[1], row[1]), min(old[2], row[2]))

    load1 = os.getloadavg()
    print(
        f"\ntarget >= {TARGET:.0e} points/s (wall clock, both ranges); load average "
        f"{load0[0]:.1f} -> {load1[0]:.1f} on {os.cpu_count()} CPUs"
    )
    for name in NAMES:
        wall, cpu, ratio = status[name]
        verdict = "met" if wall >= TARGET else "MISSED"
        print(
            f"  {name:<19}{verdict:<8}slowest range {wall:.3g} points/s wall clock, "
            f"{cpu:.3g} by CPU time, {ratio:.2f}x the forward formula's rate"
        )

    if args.check > 0:
        for label, (e, d) in samples.items():
            print(f"\n{label}: max relative distance to the 60-digit mpmath root ({e.size} points)")
            for name, (dist, safe) in _accuracy(e, d).items():
                print(f"{name:<19}{dist:>12.2e}   {'all on the safe side' if safe else 'UNSAFE'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
