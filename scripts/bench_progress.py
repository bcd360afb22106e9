#!/usr/bin/env python
"""Benchmark: how close the progress line's time left is to the time that was in fact left.

Runs designs over the two-record vectors of m random points in [0, 1]^d (query (1/2, ..., 1/2),
sigma = sqrt(d / 12), GDP mu = 1; J = m(m - 1)/2 vectors, generated in chunks), private
sampling runs (GDP mu = 1 on the 20 x 20 grid of the unit square, or the box itself) and noise
calibrations (``calibrate_noise``, two-sided, rate 0.01, delta = 1e-5, Poisson sampling), each
under a :class:`dpopt.progress.Progress` that records, at every report, the time left it would
show (:meth:`~dpopt.progress.Progress.estimate`; nothing while a delayed line is still hidden).
At the end the shown times are divided by the times that were in fact left; printed per run:
the smallest and largest ratio over the reports that showed a time left, leaving out the last
5 % of the run (a ratio of tiny times), with the number of reports that showed one out of
those in that span, and "met" when every shown time is within [0.5, 2] of the time left.
Beside them, the same ratios for the previous estimator, computed at the same reports of the
same run: for designs the design line's settings before the time left waited for support
(certificate pass 1.5 to 3 solver passes, a time left whatever its range and from the second
report on), for samplers the mean time per step so far (before ``uneven=True``), for the
calibrations the time left from their cost-weighted evaluations (before
``count_only=True``). Everything is timed in CPU seconds (``time.process_time``, one BLAS
thread), so the load of a shared machine does not enter.

Usage::

    python scripts/bench_progress.py          # designs 1e6..1e7, samplers, calibrations
    python scripts/bench_progress.py --designs 1e7x2 --samplers 20:50:adult:cosine:box \\
        --calibrations 10:10000
    python scripts/bench_progress.py --profile 100:20:heart:cosine   # cost along the schedule
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


def previous_settings(bar: progress.Progress) -> dict[str, Any]:
    """What the previous estimator changes on ``bar`` (as opened): a design line's settings
    before the time left waited for support, a sampler's mean time per step, a calibration's
    time left from its cost-weighted evaluations (it shows the count only now)."""
    if bar.count_only:
        return {"count_only": False}
    if bar.uneven:
        return {"uneven": False, "max_spread": None}
    if bar.tail is not None:
        return dict(PREVIOUS)
    return {}


class Recording(progress.Progress):
    """A hidden display on the CPU clock that logs (time, shown time left) at every report, and
    in ``previous`` what the previous estimator (:func:`previous_settings`) would have shown at
    the same report of the same run. While a delayed line (``delay``) is still hidden, nothing
    counts as shown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(clock=CLOCK, enabled=False)
        super().__init__(*args, **kwargs)
        self.log: list[tuple[float, float | None]] = []
        self.previous: list[tuple[float, float | None]] = []
        self.changes = previous_settings(self)

    def __enter__(self) -> Recording:
        super().__enter__()
        return self

    def advance(self, steps: float = 1.0) -> None:
        super().advance(steps)
        now = self.clock()
        hidden = now - self._started < self.delay
        self.log.append((now, None if hidden else self.estimate()))
        # the certificate's phase has no tail: the previous settings gave it none either
        changes = {name: value for name, value in self.changes.items()
                   if name != "tail" or self.tail is not None}
        kept = {name: getattr(self, name) for name in changes}
        for name, value in changes.items():
            setattr(self, name, value)
        self.previous.append((now, None if hidden else self.estimate()))
        for name, value in kept.items():
            setattr(self, name, value)


def ratios(log: list[tuple[float, float | None]], start: float, end: float) -> list[float]:
    """Shown / true time left at every report with an estimate, the last 5 % left out."""
    return [shown / (end - t) for t, shown in log
            if shown is not None and end - t > 0.05 * (end - start)]


def span(log: list[tuple[float, float | None]], start: float, end: float) -> int:
    """The reports in the span the ratios are taken over (shown or not)."""
    return sum(1 for t, _ in log if end - t > 0.05 * (end - start))


def summary(run: str, log: list[tuple[float, float | None]],
            previous: list[tuple[float, float | None]], start: float, end: float,
            **extra: Any) -> dict[str, Any]:
    """One row: the ratios of the new and the previous estimator, and whether every time shown
    was within [0.5, 2] of the time left."""
    new, old = ratios(log, start, end), ratios(previous, start, end)
    nan = float("nan")
    return {"run": run, "cpu s": end - start, "passes": "", "check / pass": "",
            "min": min(new, default=nan), "max": max(new, default=nan), "reports": len(new),
            "span": span(log, start, end), "met": all(0.5 <= r <= 2.0 for r in new),
            "old min": min(old, default=nan), "old max": max(old, default=nan),
            "old reports": len(old), "old met": all(0.5 <= r <= 2.0 for r in old), **extra}


class patched_progress:
    """Within the block, dpopt's own lines (a sampler's, a calibration's) are
    :class:`Recording` lines, collected in ``made``."""

    def __init__(self) -> None:
        self.made: list[Recording] = []
        self._original = progress.Progress

    def __enter__(self) -> patched_progress:
        def recording(*args: Any, **kwargs: Any) -> Recording:
            self.made.append(Recording(*args, **kwargs))
            return self.made[-1]

        progress.Progress = recording  # type: ignore[assignment,misc]
        return self

    def __exit__(self, *exc: object) -> None:
        progress.Progress = self._original  # type: ignore[misc]


def bench_design(count: float, dim: int) -> dict[str, Any]:
    from dpopt.covariance.design import design_covariance
    from dpopt.covariance.sensitivity import TwoRecordVectors

    m = round((1 + (1 + 8 * count) ** 0.5) / 2)
    pts = np.random.default_rng(0).random((m, dim))
    src = TwoRecordVectors(pts, np.full(dim, 0.5), (dim / 12) ** 0.5)
    start = CLOCK()
    with Recording("design", unit="pass", expected=PASSES_EXPECTED,
                   tail=CHECK_PASS_COST, max_spread=ETA_MAX_SPREAD, eta_after=ETA_AFTER) as bar:
        design_covariance(src, GDP(1.0))
    end = CLOCK()
    (_, passes, solve_s), (_, _, check_s) = bar.history[0], bar.history[-1]
    return summary(f"design J = {src.count:,}, d = {dim}", bar.log, bar.previous, start, end,
                   passes=passes, **{"check / pass": check_s / (solve_s / passes)})


def bench_sampler(spec: str) -> dict[str, Any]:
    from dpopt.covariance.domains import Box, Grid
    from dpopt.diffusion import sampler as smp
    from dpopt.diffusion.data import load_pair

    steps, samples, dataset, schedule, *rest = spec.split(":")
    box = rest == ["box"]
    lo, hi = np.zeros(2), np.ones(2)
    domain = Box(lo, hi) if box else Grid(lo, hi, (20, 20))
    data = load_pair(dataset, seed=0).train
    with patched_progress() as lines:
        start = CLOCK()
        smp.sample_private(data, domain, GDP(1.0), samples=int(samples), steps=int(steps),
                           rng=0, schedule=schedule)
    bar = lines.made[-1]
    end = bar.log[-1][0]  # the end of the last step (building the record is not a step)
    where = ", box" if box else ""
    return summary(f"sample {dataset}, {samples} x {steps} steps, {schedule}{where}", bar.log,
                   bar.previous, start, end)


def bench_calibration(spec: str) -> dict[str, Any]:
    import warnings

    from dpopt.accounting import _dp_accounting
    from dpopt.accounting.composition import calibrate_noise

    _dp_accounting._library()  # imported before the clock starts, as the calibration does
    epsilon, steps = float(spec.split(":")[0]), int(spec.split(":")[1])
    with patched_progress() as lines, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = CLOCK()
        calibrate_noise(epsilon, 1e-5, steps, 0.01, "poisson", progress=None)
        end = CLOCK()
    bar = lines.made[-1]
    return summary(f"calibrate eps = {epsilon:g}, T = {steps:,}", bar.log, bar.previous,
                   start, end)


def profile_sampler(spec: str) -> None:
    """Print what a sampling run's steps cost along its schedule, by tenths of the run: the
    denoiser's sigma, CPU seconds per step (all of it, and its designs'), and what drives the
    designs' cost (sets solved alone, and the projected-Newton iterations of the stacked solves
    on a shared support, :func:`solvers.stacked.solve_on_support`)."""
    from dpopt.covariance import batch
    from dpopt.covariance.domains import Grid
    from dpopt.diffusion import sampler as smp
    from dpopt.diffusion.data import load_pair
    from dpopt.diffusion.schedules import as_schedule

    steps, samples, dataset, schedule = spec.split(":")[:4]
    step: dict[str, float] = {}
    rows: list[dict[str, float]] = []
    stacked, alone, step_noise = batch.solve_on_support, batch._design_one, smp._step_noise

    def counted_stacked(*args: Any, **kwargs: Any) -> Any:
        out = stacked(*args, **kwargs)
        step["iterations"] = step.get("iterations", 0.0) + float(out.iterations)
        return out

    def counted_alone(*args: Any, **kwargs: Any) -> Any:
        step["alone"] = step.get("alone", 0.0) + 1.0
        return alone(*args, **kwargs)

    def timed_noise(*args: Any, **kwargs: Any) -> Any:
        t0 = CLOCK()
        out = step_noise(*args, **kwargs)
        step["designs"] = CLOCK() - t0
        return out

    with patched_progress() as lines:
        batch.solve_on_support, batch._design_one = counted_stacked, counted_alone
        smp._step_noise = timed_noise  # type: ignore[assignment]
        original = Recording.advance

        def advance(self: Recording, steps: float = 1.0) -> None:
            original(self, steps)
            rows.append(dict(step))
            step.clear()

        Recording.advance = advance  # type: ignore[method-assign]
        try:
            smp.sample_private(load_pair(dataset, seed=0).train,
                               Grid(np.zeros(2), np.ones(2), (20, 20)), GDP(1.0),
                               samples=int(samples), steps=int(steps), rng=0, schedule=schedule)
        finally:
            Recording.advance = original  # type: ignore[method-assign]
            batch.solve_on_support, batch._design_one = stacked, alone
            smp._step_noise = step_noise  # type: ignore[assignment]
    times = np.diff([lines.made[-1]._opened] + [t for t, _ in lines.made[-1].log])
    sigma = as_schedule(schedule, int(steps)).sigma
    print(f"sample {dataset}, {samples} x {steps} steps, {schedule}: cost along the schedule "
          "(CPU seconds per step, by tenths of the run)")
    print(f"{'steps':>9s} {'sigma':>15s} {'s/step':>7s} {'designs':>7s} {'alone':>6s} "
          f"{'stacked Newton':>14s}")
    for part in np.array_split(np.arange(int(steps)), 10):
        if not part.size:
            continue

        def mean(key: str, part: Any = part) -> float:
            return float(np.mean([rows[i].get(key, 0.0) for i in part]))

        print(f"{part[0]:4d}-{part[-1]:<4d} {sigma[part[0]]:7.2f}-{sigma[part[-1]]:<7.2f} "
              f"{float(np.mean(times[part])):7.3f} {mean('designs'):7.3f} {mean('alone'):6.1f} "
              f"{mean('iterations'):14.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", nargs="*", default=["1e6x2", "3e6x2", "3e6x10", "1e7x2",
                                                      "1e7x4"],
                    help="COUNTxD: about COUNT vectors in R^D")
    ap.add_argument("--samplers", nargs="*",
                    default=["50:100:heart:cosine", "100:20:heart:cosine",
                             "20:50:adult:cosine", "50:20:mixture:linear", "200:5:heart:cosine",
                             "60:30:adult:cosine", "10:5:adult:cosine:box"],
                    help="STEPS:SAMPLES:DATASET:SCHEDULE[:box] (default domain: the 20 x 20 "
                         "grid)")
    ap.add_argument("--calibrations", nargs="*",
                    default=["1:1000", "10:10000", "100:10000", "1000:100000"],
                    help="EPSILON:STEPS of a two-sided calibrate_noise (rate 0.01, delta 1e-5)")
    ap.add_argument("--profile", metavar="SPEC",
                    help="only print what the steps of one sampling run cost along its "
                         "schedule (STEPS:SAMPLES:DATASET:SCHEDULE)")
    args = ap.parse_args()
    if args.profile:
        profile_sampler(args.profile)
        return
    rows = [bench_design(float(c), int(d)) for c, d in (s.split("x") for s in args.designs)]
    rows += [bench_sampler(s) for s in args.samplers]
    rows += [bench_calibration(s) for s in args.calibrations]
    print(f"{'run':46s} {'cpu s':>6s} {'passes':>6s} {'chk/pass':>8s} {'shown/left min':>14s} "
          f"{'max':>5s} {'shown':>7s} {'target':>7s} {'before: min':>11s} {'max':>5s} "
          f"{'shown':>5s} {'target':>7s}")
    for r in rows:
        check = f"{r['check / pass']:.2f}" if r["check / pass"] != "" else ""
        passes = f"{r['passes']:.2f}" if r["passes"] != "" else ""
        shown = f"{r['reports']}/{r['span']}"
        print(f"{r['run']:46s} {r['cpu s']:6.2f} {passes:>6s} {check:>8s} "
              f"{r['min']:14.2f} {r['max']:5.2f} {shown:>7s} "
              f"{'met' if r['met'] else 'missed':>7s} {r['old min']:11.2f} "
              f"{r['old max']:5.2f} {r['old reports']:5d} "
              f"{'met' if r['old met'] else 'missed':>7s}")
    missed = [r["run"] for r in rows if not r["met"]]
    print(f"\nevery time left shown within [0.5, 2] of the time left: "
          f"{'target met' if not missed else 'target missed'} "
          f"({len(rows) - len(missed)} of {len(rows)} runs"
          + (f"; missed: {', '.join(missed)})" if missed else ")"))


if __name__ == "__main__":
    main()
