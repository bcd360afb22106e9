#!/usr/bin/env python
"""Benchmark: how close the progress line's time left is to the time that was in fact left.

Runs designs over the two-record vectors of m random points in [0, 1]^d (query (1/2, ..., 1/2),
sigma = sqrt(d / 12), GDP mu = 1; J = m(m - 1)/2 vectors, generated in chunks) and private
sampling runs, each under a :class:`dpopt.progress.Progress` that records, at every report, the
time left it would show (:meth:`~dpopt.progress.Progress.estimate`). At the end the shown times
are divided by the times that were in fact left; printed per run: the smallest and largest
ratio over the reports from the second one on (none before: no rate is measured yet), leaving
out the last 5 % of the run (a ratio of tiny times), with the number of reports that showed a
time left, and beside them the same ratios for the design line's previous settings (certificate
pass 1.5 to 3 solver passes, a time left whatever its range and from the second report on),
computed at the same reports of the same run. Everything is timed in CPU seconds
(``time.process_time``, one BLAS thread), so the load of a shared machine does not enter.

Usage::

    python scripts/bench_progress.py                       # designs 1e6..1e8, three samplers
    python scripts/bench_progress.py --designs 1e7x2 --samplers 20:50:adult:cosine
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dpopt import progress  # noqa: E402
from dpopt.accounting.budgets import GDP  # noqa: E402
from dpopt.cli.options import (  # noqa: E402
    CHECK_PASS_COST,
    ETA_AFTER,
    ETA_MAX_SPREAD,
    PASSES_EXPECTED,
)

CLOCK = time.process_time


#: the design line's settings before the time left waited for support (side by side)
PREVIOUS = {"tail": (1.5, 3.0), "max_spread": None, "eta_after": 0.0}


class Recording(progress.Progress):
    """A hidden display on the CPU clock that logs (time, shown time left) at every report, and
    in ``previous`` what the design line's previous settings (:data:`PREVIOUS`) would have
    shown at the same report of the same run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(clock=CLOCK, enabled=False)
        super().__init__(*args, **kwargs)
        self.log: list[tuple[float, float | None]] = []
        self.previous: list[tuple[float, float | None]] = []

    def advance(self, steps: float = 1.0) -> None:
        super().advance(steps)
        now = self.clock()
        self.log.append((now, self.estimate()))
        kept = (self.tail, self.max_spread, self.eta_after)
        if self.tail is not None:
            self.tail = PREVIOUS["tail"]  # type: ignore[assignment]
        self.max_spread, self.eta_after = None, 0.0
        self.previous.append((now, self.estimate()))
        self.tail, self.max_spread, self.eta_after = kept


def ratios(log: list[tuple[float, float | None]], start: float, end: float) -> list[float]:
    """Shown / true time left at every report with an estimate, the last 5 % left out."""
    return [shown / (end - t) for t, shown in log
            if shown is not None and end - t > 0.05 * (end - start)]


def bench_design(count: float, dim: int) -> dict[str, Any]:
    from dpopt.covariance.design import design_covariance
    from dpopt.covariance.sensitivity import TwoRecordVectors

    m = round((1 + (1 + 8 * count) ** 0.5) / 2)
    pts = np.random.default_rng(0).random((m, dim))
    src = TwoRecordVectors(pts, np.full(dim, 0.5), (dim / 12) ** 0.5)
    logs: list[tuple[float, float | None]] = []
    start = CLOCK()
    with Recording("design", unit="pass", expected=PASSES_EXPECTED,
                   tail=CHECK_PASS_COST, max_spread=ETA_MAX_SPREAD, eta_after=ETA_AFTER) as bar:
        design_covariance(src, GDP(1.0))
    end = CLOCK()
    logs = bar.log
    (_, passes, solve_s), (_, _, check_s) = bar.history[0], bar.history[-1]
    r = ratios(logs, start, end)
    old = ratios(bar.previous, start, end)
    return {"run": f"design J = {src.count:,}, d = {dim}", "cpu s": end - start,
            "old min": min(old, default=float("nan")), "old max": max(old, default=float("nan")),
            "passes": passes, "check / pass": check_s / (solve_s / passes),
            "min": min(r, default=float("nan")), "max": max(r, default=float("nan")),
            "reports": len(r)}


def bench_sampler(spec: str) -> dict[str, Any]:
    from dpopt.covariance.domains import Grid
    from dpopt.diffusion import sampler as smp
    from dpopt.diffusion.data import load_pair

    steps, samples, dataset, schedule = spec.split(":")
    made: list[Recording] = []

    def recording(*args: Any, **kwargs: Any) -> Recording:
        made.append(Recording(*args, **kwargs))
        return made[-1]

    original = progress.Progress
    progress.Progress = recording  # type: ignore[assignment,misc]  # the sampler's own line
    try:
        start = CLOCK()
        smp.sample_private(load_pair(dataset, seed=0).train, Grid([0, 0], [1, 1], (20, 20)),
                           GDP(1.0), samples=int(samples), steps=int(steps), rng=0,
                           schedule=schedule)
    finally:
        progress.Progress = original  # type: ignore[misc]
    log = made[-1].log
    end = log[-1][0]  # the end of the last step (building the record is not a step)
    r = ratios(log, start, end)
    old = ratios(made[-1].previous, start, end)
    return {"run": f"sample {dataset}, {samples} x {steps} steps, {schedule}",
            "old min": min(old, default=float("nan")), "old max": max(old, default=float("nan")),
            "cpu s": end - start, "passes": "", "check / pass": "",
            "min": min(r, default=float("nan")), "max": max(r, default=float("nan")),
            "reports": len(r)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", nargs="*", default=["1e6x2", "1e7x2", "1e7x4", "3e6x10",
                                                      "3e7x2", "1e8x2"],
                    help="COUNTxD: about COUNT vectors in R^D")
    ap.add_argument("--samplers", nargs="*",
                    default=["50:100:heart:cosine", "100:20:heart:cosine",
                             "20:50:adult:cosine", "50:20:mixture:linear", "200:5:heart:cosine"],
                    help="STEPS:SAMPLES:DATASET:SCHEDULE")
    args = ap.parse_args()
    rows = [bench_design(float(c), int(d)) for c, d in (s.split("x") for s in args.designs)]
    rows += [bench_sampler(s) for s in args.samplers]
    print(f"{'run':44s} {'cpu s':>7s} {'passes':>6s} {'check/pass':>10s} "
          f"{'shown/left min':>14s} {'max':>5s} {'shown':>5s} {'before: min':>11s} {'max':>5s}")
    for r in rows:
        check = f"{r['check / pass']:.2f}" if r["check / pass"] != "" else ""
        passes = f"{r['passes']:.2f}" if r["passes"] != "" else ""
        print(f"{r['run']:44s} {r['cpu s']:7.2f} {passes:>6s} {check:>10s} "
              f"{r['min']:14.2f} {r['max']:5.2f} {r['reports']:5d} {r['old min']:11.2f} "
              f"{r['old max']:5.2f}")


if __name__ == "__main__":
    main()
