"""Benchmark: private sampling with the ideal denoiser, releases per CPU second.

The default run of the sampler (d = 2, ``--samples`` x ``--steps`` certified releases on a
20 x 20 public grid, records snapped) through three routes, side by side in one process:

- ``batch``: dpopt's route (the grid corner reduction of the two-record set, each step's K
  designs through ``design_covariance_batch`` with warm starts);
- ``loop``: the same reduced sets, one ``design_covariance`` call per release
  (``solver="structured"``, no warm start);
- ``full-set``: every pair of grid points (79,800 vectors) per release, one
  ``design_covariance`` call each, timed on the first ``--full-releases`` releases only;
- ``verify``: the re-check of the whole run record (``verify_record``, as ``dpopt verify``).

CPU time (``time.process_time``) is reported, since wall time is noisy on a shared machine;
``isotropic`` (no design) is the floor. Saves ``results/bench_sampler.csv``.

Usage: ``python scripts/bench_sampler.py [--samples 100] [--steps 50] [--dataset mixture]``.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import time
import warnings

import numpy as np

from dpopt.accounting.budgets import GDP, ZCDP
from dpopt.covariance.design import design_covariance
from dpopt.covariance.domains import Grid
from dpopt.covariance.sensitivity import add_remove_set
from dpopt.diffusion import load_pair, sample_private
from dpopt.diffusion.sampler import ClampWarning


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--dataset", default="mixture")
    ap.add_argument("--full-releases", type=int, default=20)
    args = ap.parse_args()
    grid = Grid(np.zeros(2), np.ones(2), (20, 20))
    data = load_pair(args.dataset, seed=0, size=2000 if args.dataset == "adult" else None).train
    budget = GDP(mu=100.0)
    rows = []
    runs = {}
    for route, solver, noise in (("batch", "auto", "optimal"), ("loop", "structured", "optimal"),
                                 ("isotropic", "auto", "isotropic")):
        wall = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClampWarning)
            out = sample_private(data, grid, budget, samples=args.samples, steps=args.steps,
                                 rng=0, solver=solver, noise=noise)  # type: ignore[arg-type]
        wall = time.perf_counter() - wall
        runs[route] = out
        rows.append({"route": route, "releases": out.releases, "cpu_s": out.seconds,
                     "wall_s": wall, "releases_per_cpu_s": out.releases / out.seconds,
                     "summed_error": out.errors["released"]})
    # the unreduced set: every pair of grid points, on the batch run's first queries
    rec = runs["batch"].record["releases"][: args.full_releases]
    cpu = time.process_time()
    worst = 0.0
    for r in rec:
        d = design_covariance(add_remove_set(grid, r["query"], r["denoiser_sigma"]),
                              ZCDP(rho=r["q"] / 2.0))
        worst = max(worst, abs(d.value - r["errors"]["released"]) / d.value)
    cpu = time.process_time() - cpu
    rows.append({"route": "full-set", "releases": len(rec), "cpu_s": cpu, "wall_s": math.nan,
                 "releases_per_cpu_s": len(rec) / cpu, "summed_error": math.nan})
    # the re-check of the whole record (what `dpopt verify run.json` does)
    from dpopt.diffusion import verify_record

    cpu = time.process_time()
    ver = verify_record(runs["batch"].record)
    cpu = time.process_time() - cpu
    rows.append({"route": "verify", "releases": ver.releases, "cpu_s": cpu, "wall_s": math.nan,
                 "releases_per_cpu_s": ver.releases / cpu, "summed_error": math.nan})
    base = rows[0]["releases_per_cpu_s"]
    print(f"{args.samples} samples x {args.steps} steps on a 20 x 20 grid ({args.dataset})")
    print(f"{'route':10s} {'releases':>8s} {'CPU s':>8s} {'wall s':>8s} {'rel/CPU s':>10s} "
          f"{'batch / route':>13s}")
    for row in rows:
        print(f"{row['route']:10s} {row['releases']:8d} {row['cpu_s']:8.2f} {row['wall_s']:8.2f} "
              f"{row['releases_per_cpu_s']:10.1f} {base / row['releases_per_cpu_s']:13.2f}")
    print(f"full-set designs agree with the reduced ones to {worst:.1e} (relative value)")
    ratios = runs["batch"].ratios()
    print("summed error over the optimal designs: "
          + ", ".join(f"{k} x{v:.4g}" for k, v in ratios.items() if k != "optimal"))
    out_dir = pathlib.Path("results")
    out_dir.mkdir(exist_ok=True)
    with (out_dir / "bench_sampler.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
