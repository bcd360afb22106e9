#!/usr/bin/env python
r"""Benchmark: the structured solver's passes on a Dask ``LocalCluster`` against in process.

Instance family (as in ``scripts/bench_covariance.py``): m random points in [0, 1]^d, two-record
vectors for the query g = (1/2, ..., 1/2) and sigma = sqrt(d/12)
(``dpopt.covariance.sensitivity.TwoRecordVectors``, J = m(m - 1)/2), W = I, q = 1, eta = 0,
certified to a relative gap of 1e-8. For every size the same instance is solved

* in process (``solve_structured``, one BLAS thread), and
* with ``solvers.dask_passes.DaskPasses`` on a fresh ``LocalCluster`` of ``--workers``
  single-threaded worker processes (the cluster start-up is not timed; the first solve's upload of
  the source description is).

Reported per size: wall time of each path and their ratio, passes and pass-equivalents (wall time
over the median pass time), whether the two covariances are equal bit for bit, the certified gap,
the peak resident memory of each worker process during the solve (``ru_maxrss``, a fresh cluster
per size so it is that size's peak) and the measured pass throughput (vectors per second per
worker), from which the time of a larger instance on N workers is extrapolated. Sizes whose
in-process solve would exceed ``--inprocess-max`` vectors are run on Dask only, and the
in-process time is extrapolated from the pass throughput measured at the largest in-process size
(labelled "extrapolated"). Results are printed and saved as CSV under ``results/``.

With ``--verify`` the independent certificate check of the Dask solution is also timed in
process and with its verification pass on the cluster (``check(..., chunk_map=...)``).

Usage::

    python scripts/bench_scale.py                      # J = 1e6, 1e7, 1e8 (long on 2 cores)
    python scripts/bench_scale.py --sizes 1e6 1e7      # the quick rows
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from certificates.problem import CovarianceProgram  # noqa: E402
from dpopt.covariance.sensitivity import TwoRecordVectors  # noqa: E402
from solvers.structured import solve_structured  # noqa: E402


def points_for(count: float) -> int:
    """Smallest m with m(m-1)/2 >= count."""
    return math.ceil((1.0 + math.sqrt(1.0 + 8.0 * count)) / 2.0)


def instance(m: int, d: int, seed: int = 0) -> CovarianceProgram:
    rng = np.random.default_rng(1000 * seed + 7 * d + m)
    src = TwoRecordVectors(rng.random((m, d)), np.full(d, 0.5), math.sqrt(d / 12.0))
    return CovarianceProgram(src, bound=1.0)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _warm() -> float:
    import dpopt.covariance.sensitivity  # noqa: F401
    import solvers.dask_passes  # noqa: F401

    return _peak_rss_mib()


def _default_chunk(d: int) -> int:
    # the solver's default chunk (memory_budget_bytes = 256 MiB)
    return int(max(256, min(262144, 256 * 2**20 // (8 * 3 * (2 * d + 1)))))


class RssSampler:
    """Samples the resident memory of some processes (by pid) every ``period`` seconds in a
    background thread and keeps each one's maximum (MiB). Sampling from outside the processes
    leaves the workers' event loops and the solve undisturbed."""

    def __init__(self, pids: dict[str, int], period: float = 0.5) -> None:
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = dict.fromkeys(pids, 0.0)
        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        for name, proc in self.procs.items():
            try:
                rss = proc.memory_info().rss / 2**20
            except Exception:  # a worker that died mid-run: keep what was seen
                continue
            self.peak[name] = max(self.peak[name], rss)

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def __enter__(self) -> RssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def bare_pass(executor: Any, problem: CovarianceProgram) -> float:
    """Wall time of one bare score pass (the solver's chunk and keep) with a fixed matrix."""
    d = problem.dim
    bmat = np.random.default_rng(3).standard_normal((d, d))
    t0 = time.perf_counter()
    executor.score(problem.source, bmat, _default_chunk(d), 2 * d, 0.0)
    return time.perf_counter() - t0


def run_inprocess(problem: CovarianceProgram, tol: float) -> dict[str, Any]:
    """The certified solve in this process, its peak resident memory sampled during the solve."""
    c0 = time.process_time()
    with RssSampler({"self": os.getpid()}) as mem:
        t0 = time.perf_counter()
        sol = solve_structured(problem, tol=tol)
        wall = time.perf_counter() - t0
    return {"sol": sol, "wall": wall, "cpu": time.process_time() - c0,
            "rss_peak": mem.peak["self"]}


def time_checks(problem: CovarianceProgram, sol: Any, ex: Any) -> dict[str, Any]:
    """The independent certificate check of the solution, in process and with its verification
    pass as Dask tasks (``chunk_map``), one after the other; the two certificates must agree."""
    from certificates.covariance import check

    t0 = time.perf_counter()
    ref = check(problem, sol.covariance, sol.dual, tol=1e-6)
    t_in = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = check(problem, sol.covariance, sol.dual, tol=1e-6, chunk_map=ex.map_chunks)
    t_dk = time.perf_counter() - t0
    same = (got.lower, got.upper, got.mahalanobis_sup, got.argmax) == (
        ref.lower, ref.upper, ref.mahalanobis_sup, ref.argmax)
    return {"check_in": t_in, "check_dk": t_dk, "check_same": same}


def run_dask(problem: CovarianceProgram, workers: int, tol: float,
             reps: int, verify: bool = False) -> dict[str, Any]:
    """Solve on a fresh LocalCluster (worker memory sampled during the solve); then ``reps``
    interleaved bare passes (in process, then on Dask, same B) for a side-by-side pass-time ratio
    that the machine's load affects alike."""
    from dpopt.parallel import local_cluster
    from solvers.dask_passes import DaskPasses
    from solvers.passes import IN_PROCESS

    with local_cluster(workers) as c:
        base = c.run(_warm)
        pids = c.run(os.getpid)
        ex = DaskPasses(c)
        cpu0 = time.process_time() + sum(c.run(time.process_time).values())
        with RssSampler(pids) as mem:
            t0 = time.perf_counter()
            sol = solve_structured(problem, tol=tol, executor=ex)
            wall = time.perf_counter() - t0
        cpu = time.process_time() + sum(c.run(time.process_time).values()) - cpu0
        maxrss = c.run(_peak_rss_mib)
        pass_median = float(np.median(ex.pass_seconds))
        t_in, t_dk = [], []
        for _ in range(reps):
            t_in.append(bare_pass(IN_PROCESS, problem))
            t_dk.append(bare_pass(ex, problem))
        checks = time_checks(problem, sol, ex) if verify else {}
        ex.close()
    return {**checks, "sol": sol, "wall": wall, "cpu": cpu, "pass_median": pass_median,
            "bare_in": float(np.median(t_in)) if reps else math.nan,
            "bare_dk": float(np.median(t_dk)) if reps else math.nan,
            "rss_base": max(base.values()),
            "rss_sampled": [mem.peak[w] for w in sorted(mem.peak)],
            "rss_peak": [maxrss[w] for w in sorted(maxrss)]}


def run_passes_only(problem: CovarianceProgram, workers: int, reps: int) -> dict[str, Any]:
    """No solve: ``reps`` interleaved single passes (in process, then on Dask, same B) on a fresh
    LocalCluster, with the workers' peak memory. For sizes whose full solves do not fit the
    time available; the solve times are then extrapolated from these pass times."""
    from dpopt.parallel import local_cluster
    from solvers.dask_passes import DaskPasses
    from solvers.passes import IN_PROCESS

    with local_cluster(workers) as c:
        base = c.run(_warm)
        ex = DaskPasses(c)
        t_in, t_dk, c_in = [], [], []
        for _ in range(reps):
            c0 = time.process_time()
            t_in.append(bare_pass(IN_PROCESS, problem))
            c_in.append(time.process_time() - c0)
            t_dk.append(bare_pass(ex, problem))
        peak = c.run(_peak_rss_mib)
        ex.close()
    return {"t_in": float(np.median(t_in)), "t_dk": float(np.median(t_dk)),
            "cpu_in": float(np.median(c_in)),
            "rss_base": max(base.values()), "rss_peak": [peak[w] for w in sorted(peak)]}


FIELDS = ["J", "m", "path", "wall_s", "cpu_s", "passes", "pass_equivalents", "bare_pass_s",
          "pass_median_s", "gap", "ratio", "cpu_ratio", "pass_ratio", "same", "rss_base_mib",
          "rss_peak_mib", "note"]


def _mib(values: Any) -> str:
    if isinstance(values, list):
        return "/".join(f"{v:.0f}" for v in values)
    return f"{values:.0f}" if isinstance(values, float | int) else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7, 1e8])
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--inprocess-max", type=float, default=2e8,
                        help="largest J also solved in process (larger: extrapolated)")
    parser.add_argument("--solve-max", type=float, default=2e8,
                        help="largest J solved; larger sizes: single passes only, solve times "
                        "extrapolated from them")
    parser.add_argument("--reps", type=int, default=3,
                        help="interleaved bare passes per path for the pass-time ratio "
                        "(1 above J = 2e7)")
    parser.add_argument("--verify", action="store_true",
                        help="also time the certificate check of the Dask solution, in process "
                        "and with its verification pass on the cluster")
    parser.add_argument("--target", type=float, default=1e10, help="J of the extrapolated row")
    parser.add_argument("--target-workers", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench_scale.csv"))
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fh = out.open("w", newline="", encoding="utf-8")
    writer = csv.DictWriter(fh, fieldnames=FIELDS)
    writer.writeheader()
    rows: list[dict[str, Any]] = []
    inproc_rate: float | None = None  # vectors / s of one in-process pass
    inproc_cpu_rate: float | None = None
    print(f"d = {args.dim}, tol = {args.tol:g}, {args.workers} Dask workers x 1 thread; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", flush=True)
    print(f"{'J':>12} {'m':>6} {'path':>10} {'wall s':>9} {'cpu s':>8} {'passes':>6} "
          f"{'pass-eq':>7} {'bare s':>8} {'pass s':>8} {'gap':>9} {'wall r':>6} {'cpu r':>6} "
          f"{'pass r':>6} {'same':>5} {'peak RSS MiB':>14}", flush=True)

    def emit(r: dict[str, Any]) -> None:
        def f(key: str, fmt: str) -> str:
            v = r.get(key, "")
            return format(v, fmt) if isinstance(v, float | int) and v == v else ""

        r = dict.fromkeys(FIELDS, "") | r
        print(f"{r['J']:>12,} {r['m']:>6} {r['path']:>10} {f('wall_s', '.2f'):>9} "
              f"{f('cpu_s', '.2f'):>8} {r['passes']:>6} {f('pass_equivalents', '.1f'):>7} "
              f"{f('bare_pass_s', '.3f'):>8} {f('pass_median_s', '.3f'):>8} {f('gap', '.2e'):>9} "
              f"{f('ratio', '.2f'):>6} {f('cpu_ratio', '.2f'):>6} {f('pass_ratio', '.2f'):>6} "
              f"{r['same']:>5} {_mib(r['rss_peak_mib']):>14} "
              f"load {os.getloadavg()[0]:.1f} {r['note']}", flush=True)
        rows.append(r)
        writer.writerow(r | {"rss_peak_mib": _mib(r["rss_peak_mib"])})
        fh.flush()

    last_passes, last_newton = 15, 0.0
    for size in args.sizes:
        m = points_for(size)
        prob = instance(m, args.dim)
        n = prob.count
        reps = args.reps if n <= 2e7 else 1
        if n > args.solve_max:
            po = run_passes_only(prob, args.workers, reps)
            note = (f"single passes measured side by side; solves EXTRAPOLATED as "
                    f"{last_passes} passes + {last_newton:.1f} s Newton")
            for path, t_pass in (("in-process", po["t_in"]), ("dask", po["t_dk"])):
                emit({"J": n, "m": m, "path": path, "wall_s": last_passes * t_pass + last_newton,
                      "passes": last_passes, "bare_pass_s": t_pass,
                      "ratio": t_pass / po["t_in"],
                      "pass_ratio": "" if path == "in-process" else po["t_dk"] / po["t_in"],
                      "rss_base_mib": po["rss_base"] if path == "dask" else "",
                      "rss_peak_mib": po["rss_peak"] if path == "dask" else "",
                      "note": note})
            continue
        ref = None
        inp: dict[str, Any] = {}
        if n <= args.inprocess_max:
            inp = run_inprocess(prob, args.tol)
            ref = inp["sol"]
            med = float(ref.stats.extra["pass_median_seconds"])
            inproc_rate = n / med
            inproc_cpu_rate = n * ref.stats.passes / inp["cpu"]
            print(f"  in-process solve: {inp['wall']:.1f} s, {ref.stats.passes} passes, gap "
                  f"{ref.stats.extra['gap']:.2e}; now the Dask solve", flush=True)
        dk = run_dask(prob, args.workers, args.tol, reps, args.verify)
        if args.verify:
            print(f"  certificate check at J = {n:,}: {dk['check_in']:.2f} s in process, "
                  f"{dk['check_dk']:.2f} s with the pass on {args.workers} Dask workers "
                  f"(ratio {dk['check_dk'] / dk['check_in']:.2f}); same certificate: "
                  f"{dk['check_same']}", flush=True)
        sol = dk["sol"]
        t_in, cpu_in = inp.get("wall", math.nan), inp.get("cpu", math.nan)
        label_in = "measured"
        if ref is None and inproc_rate is not None and inproc_cpu_rate is not None:
            # extrapolated in-process solve: the same passes at the measured in-process pass rate
            newton = float(sol.stats.extra["newton_seconds"])
            t_in = sol.stats.passes * n / inproc_rate + newton
            cpu_in = sol.stats.passes * n / inproc_cpu_rate
            label_in = "extrapolated"
        if ref is not None:
            emit({"J": n, "m": m, "path": "in-process", "wall_s": t_in, "cpu_s": cpu_in,
                  "passes": ref.stats.passes, "pass_equivalents": t_in / dk["bare_in"],
                  "bare_pass_s": dk["bare_in"],
                  "pass_median_s": float(ref.stats.extra["pass_median_seconds"]),
                  "gap": ref.stats.extra["gap"], "ratio": 1.0, "cpu_ratio": 1.0,
                  "rss_peak_mib": inp["rss_peak"], "note": "peak RSS sampled every 0.5 s"})
        same = "" if ref is None else str(bool(np.array_equal(ref.covariance, sol.covariance)))
        emit({"J": n, "m": m, "path": "dask", "wall_s": dk["wall"], "cpu_s": dk["cpu"],
              "passes": sol.stats.passes, "pass_equivalents": dk["wall"] / dk["bare_dk"],
              "bare_pass_s": dk["bare_dk"], "pass_median_s": dk["pass_median"],
              "gap": sol.stats.extra["gap"], "ratio": dk["wall"] / t_in,
              "cpu_ratio": dk["cpu"] / cpu_in, "pass_ratio": dk["bare_dk"] / dk["bare_in"],
              "same": same, "rss_base_mib": dk["rss_base"], "rss_peak_mib": dk["rss_peak"],
              "note": ("per worker, ru_maxrss; sampled peaks "
                       f"{_mib(dk['rss_sampled'])} MiB")
              + ("" if label_in == "measured"
                 else "; wall r, cpu r vs EXTRAPOLATED in-process")})
        last_passes = sol.stats.passes
        last_newton = float(sol.stats.extra["newton_seconds"])
    dask_rows = [r for r in rows if r["path"] == "dask"]
    if dask_rows:
        big = dask_rows[-1]
        per_worker = big["J"] / (big["bare_pass_s"] * args.workers)  # vectors/s/worker
        passes = big["passes"]
        newton = (big["wall_s"] - passes * big["pass_median_s"]
                  if isinstance(big["pass_median_s"], float) else 0.0)
        est = passes * args.target / (per_worker * args.target_workers) + max(newton, 0.0)
        print(f"\nmeasured pass throughput at J = {big['J']:,}: {per_worker:.3g} vectors/s per "
              f"worker (d = {args.dim}); extrapolated J = {args.target:.0e} on "
              f"{args.target_workers} such workers, {passes} passes: {est / 3600:.2f} h "
              f"({est / passes:.0f} s per pass) -- EXTRAPOLATION, not measured", flush=True)
        writer.writerow(dict.fromkeys(FIELDS, "") | {
            "J": int(args.target), "m": points_for(args.target),
            "path": f"dask x{args.target_workers}", "wall_s": est, "passes": passes,
            "bare_pass_s": est / passes,
            "note": "EXTRAPOLATED from the measured per-worker pass throughput"})
    fh.close()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
