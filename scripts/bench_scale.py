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


def run_dask(problem: CovarianceProgram, workers: int, tol: float,
             reps: int) -> dict[str, Any]:
    """Solve on a fresh LocalCluster; then ``reps`` interleaved single passes (in process, then
    on Dask, same B) for a side-by-side pass-time ratio that the machine's load affects alike."""
    from dpopt.parallel import local_cluster
    from solvers.dask_passes import DaskPasses
    from solvers.passes import IN_PROCESS

    with local_cluster(workers) as c:
        base = c.run(_warm)
        ex = DaskPasses(c)
        cpu0 = time.process_time() + sum(c.run(time.process_time).values())
        t0 = time.perf_counter()
        sol = solve_structured(problem, tol=tol, executor=ex)
        wall = time.perf_counter() - t0
        cpu = time.process_time() + sum(c.run(time.process_time).values()) - cpu0
        peak = c.run(_peak_rss_mib)
        pass_median = float(np.median(ex.pass_seconds))
        d = problem.dim
        bmat = np.random.default_rng(3).standard_normal((d, d))
        chunk = _default_chunk(d)
        t_in, t_dk = [], []
        for _ in range(reps):
            t_in.append(IN_PROCESS.score(problem.source, bmat, chunk, 2 * d, 0.0).seconds)
            t_dk.append(ex.score(problem.source, bmat, chunk, 2 * d, 0.0).seconds)
        ex.close()
    return {"sol": sol, "wall": wall, "cpu": cpu, "pass_median": pass_median,
            "pass_ratio": float(np.median(t_dk) / np.median(t_in)) if reps else math.nan,
            "rss_base": max(base.values()), "rss_peak": max(peak.values())}


def run_passes_only(problem: CovarianceProgram, workers: int, reps: int) -> dict[str, Any]:
    """No solve: ``reps`` interleaved single passes (in process, then on Dask, same B) on a fresh
    LocalCluster, with the workers' peak memory. For sizes whose full solves do not fit the
    time available; the solve times are then extrapolated from these pass times."""
    from dpopt.parallel import local_cluster
    from solvers.dask_passes import DaskPasses
    from solvers.passes import IN_PROCESS

    d = problem.dim
    bmat = np.random.default_rng(3).standard_normal((d, d))
    chunk = _default_chunk(d)
    with local_cluster(workers) as c:
        base = c.run(_warm)
        ex = DaskPasses(c)
        t_in, t_dk, c_in = [], [], []
        for _ in range(reps):
            c0 = time.process_time()
            t_in.append(IN_PROCESS.score(problem.source, bmat, chunk, 2 * d, 0.0).seconds)
            c_in.append(time.process_time() - c0)
            t_dk.append(ex.score(problem.source, bmat, chunk, 2 * d, 0.0).seconds)
        peak = c.run(_peak_rss_mib)
        ex.close()
    return {"t_in": float(np.median(t_in)), "t_dk": float(np.median(t_dk)),
            "cpu_in": float(np.median(c_in)),
            "rss_base": max(base.values()), "rss_peak": max(peak.values())}


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
                        help="interleaved single passes per path for the pass-time ratio")
    parser.add_argument("--target", type=float, default=1e10, help="J of the extrapolated row")
    parser.add_argument("--target-workers", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench_scale.csv"))
    args = parser.parse_args(argv)

    rows: list[dict[str, Any]] = []
    inproc_rate: float | None = None  # vectors / s of one in-process pass
    inproc_cpu_rate: float | None = None
    print(f"d = {args.dim}, tol = {args.tol:g}, {args.workers} Dask workers x 1 thread; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    print(f"{'J':>12} {'m':>6} {'path':>10} {'wall s':>9} {'cpu s':>8} {'passes':>6} "
          f"{'pass-eq':>7} {'pass s':>8} {'gap':>9} {'wall r':>6} {'cpu r':>6} {'pass r':>6} "
          f"{'same':>5} {'worker MiB':>14}", flush=True)

    def show(r: dict[str, Any]) -> None:
        def f(key: str, fmt: str) -> str:
            v = r.get(key, "")
            return format(v, fmt) if isinstance(v, float | int) and v == v else ""

        rss = (f"{r['worker_rss_base_mib']:.0f}->{r['worker_rss_peak_mib']:.0f}"
               if r.get("worker_rss_peak_mib") != "" else "")
        print(f"{r['J']:>12,} {r['m']:>6} {r['path']:>10} {f('wall_s', '.2f'):>9} "
              f"{f('cpu_s', '.2f'):>8} {r['passes']:>6} {f('pass_equivalents', '.1f'):>7} "
              f"{f('pass_median_s', '.3f'):>8} {f('gap', '.2e'):>9} {f('ratio', '.2f'):>6} "
              f"{f('cpu_ratio', '.2f'):>6} {f('pass_ratio', '.2f'):>6} {r['same']:>5} "
              f"{rss:>14} {r['note']}", flush=True)

    last_passes, last_newton = 15, 0.0
    for size in args.sizes:
        m = points_for(size)
        prob = instance(m, args.dim)
        n = prob.count
        if n > args.solve_max:
            po = run_passes_only(prob, args.workers, max(1, min(args.reps, 1)))
            note = (f"single passes measured side by side; solves EXTRAPOLATED as "
                    f"{last_passes} passes + {last_newton:.1f} s Newton")
            for path, t_pass in (("in-process", po["t_in"]), ("dask", po["t_dk"])):
                row = {"J": n, "m": m, "path": path,
                       "wall_s": last_passes * t_pass + last_newton, "cpu_s": "",
                       "passes": last_passes, "pass_equivalents": "", "pass_median_s": t_pass,
                       "gap": "", "ratio": t_pass / po["t_in"], "cpu_ratio": "",
                       "pass_ratio": "" if path == "in-process" else po["t_dk"] / po["t_in"],
                       "same": "",
                       "worker_rss_base_mib": po["rss_base"] if path == "dask" else "",
                       "worker_rss_peak_mib": po["rss_peak"] if path == "dask" else "",
                       "note": note}
                rows.append(row)
                show(row)
            continue
        ref = None
        t_in = cpu_in = math.nan
        label_in = "measured"
        if n <= args.inprocess_max:
            c0 = time.process_time()
            t0 = time.perf_counter()
            ref = solve_structured(prob, tol=args.tol)
            t_in = time.perf_counter() - t0
            cpu_in = time.process_time() - c0
            med = float(ref.stats.extra["pass_median_seconds"])
            inproc_rate = n / med
            inproc_cpu_rate = n * ref.stats.passes / cpu_in
            row = {"J": n, "m": m, "path": "in-process", "wall_s": t_in, "cpu_s": cpu_in,
                   "passes": ref.stats.passes, "pass_equivalents": t_in / med,
                   "pass_median_s": med, "gap": ref.stats.extra["gap"], "ratio": 1.0,
                   "cpu_ratio": 1.0, "pass_ratio": "", "same": "", "worker_rss_base_mib": "",
                   "worker_rss_peak_mib": "", "note": ""}
            rows.append(row)
            show(row)
        reps = args.reps if ref is not None else min(args.reps, 1)
        dk = run_dask(prob, args.workers, args.tol, reps)
        sol = dk["sol"]
        if ref is None and inproc_rate is not None and inproc_cpu_rate is not None:
            # extrapolated in-process solve: the same passes at the measured in-process pass rate
            newton = float(sol.stats.extra["newton_seconds"])
            t_in = sol.stats.passes * n / inproc_rate + newton
            cpu_in = sol.stats.passes * n / inproc_cpu_rate
            label_in = "extrapolated"
        same = "" if ref is None else str(bool(np.array_equal(ref.covariance, sol.covariance)))
        row = {"J": n, "m": m, "path": "dask", "wall_s": dk["wall"], "cpu_s": dk["cpu"],
               "passes": sol.stats.passes, "pass_equivalents": dk["wall"] / dk["pass_median"],
               "pass_median_s": dk["pass_median"], "gap": sol.stats.extra["gap"],
               "ratio": dk["wall"] / t_in, "cpu_ratio": dk["cpu"] / cpu_in,
               "pass_ratio": dk["pass_ratio"], "same": same,
               "worker_rss_base_mib": dk["rss_base"], "worker_rss_peak_mib": dk["rss_peak"],
               "note": "" if label_in == "measured"
               else "(wall r, cpu r vs EXTRAPOLATED in-process; pass r measured side by side)"}
        rows.append(row)
        show(row)
        last_passes = sol.stats.passes
        last_newton = float(sol.stats.extra["newton_seconds"])
    dask_rows = [r for r in rows if r["path"] == "dask"]
    fields = list(rows[0])
    if dask_rows:
        big = dask_rows[-1]
        per_worker = big["J"] / (big["pass_median_s"] * args.workers)  # vectors/s/worker
        newton = big["wall_s"] - big["passes"] * big["pass_median_s"]
        passes = big["passes"]
        est = passes * args.target / (per_worker * args.target_workers) + max(newton, 0.0)
        print(f"\nmeasured pass throughput at J = {big['J']:,}: {per_worker:.3g} vectors/s per "
              f"worker (d = {args.dim}); extrapolated J = {args.target:.0e} on "
              f"{args.target_workers} such workers, {passes} passes: {est / 3600:.2f} h "
              f"({est / passes:.0f} s per pass) -- EXTRAPOLATION, not measured", flush=True)
        extra = dict.fromkeys(fields, "")
        extra |= {"J": int(args.target), "m": points_for(args.target),
                  "path": f"dask x{args.target_workers}", "wall_s": est, "passes": passes,
                  "pass_median_s": est / passes,
                  "note": "EXTRAPOLATED from the measured per-worker pass throughput"}
        rows.append(extra)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
