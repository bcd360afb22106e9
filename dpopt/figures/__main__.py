"""``python -m dpopt.figures NAME [NAME ...] | all | --list`` — write reproduction figures.

The registry maps a figure name to ``"module:function"``; the function takes the output folder
and returns the written paths. Entries are imported lazily, so one broken figure cannot stop the
others (or ``--list``). To add a figure, add one line to :data:`FIGURES`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

#: name -> ("module:function", one-line description)
FIGURES: dict[str, tuple[str, str]] = {
    "fig1": (
        "dpopt.figures.fig1:fig1_figure",
        "Fig. 1 of the optimal-covariance paper: naive / exact sensitivity ratio for K = [0,1]^d",
    ),
    "rpp-adult": (
        "dpopt.figures.rpp:rpp_adult",
        "α-W Rényi Pufferfish vs W∞ on Adult (sex→hours, income→age): CSV + PNG per scenario",
    ),
    "rpp-heart": (
        "dpopt.figures.rpp:rpp_heart",
        "α-W Rényi Pufferfish vs W∞ on Heart Disease (disease→chol, disease→thalach)",
    ),
    "rpp-student": (
        "dpopt.figures.rpp:rpp_student",
        "α-W Rényi Pufferfish vs W∞ on Student Performance (sex→G3 mat, romantic→G3 por)",
    ),
    "rpp-tightness": (
        "dpopt.figures.rpp:rpp_tightness",
        "certified α-W scale vs true minimal scale (quadrature) vs W∞, ε = 1, α = 2",
    ),
    "denoiser-covariance": (
        "dpopt.figures.denoiser:denoiser_covariance_figure",
        "ideal denoiser: optimal vs isotropic covariance, total variance vs ε",
    ),
    "dpsgd": (
        "dpopt.figures.dpsgd:dpsgd_figure",
        "ε vs steps of a DP-SGD schedule (CLT, RDP, PLD) and the run-design gain (T releases)",
    ),
}


def resolve(name: str) -> Callable[..., list[Path]]:
    """Import and return the function registered under ``name``."""
    target, _ = FIGURES[name]
    module, _, func = target.partition(":")
    fn: Callable[..., list[Path]] = getattr(importlib.import_module(module), func)
    return fn


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m dpopt.figures", description=__doc__)
    parser.add_argument("names", nargs="*", help="figure names, or 'all'")
    parser.add_argument("--list", action="store_true", help="list the registered figures")
    parser.add_argument("--out-dir", default="results", help="output folder (default: results)")
    args = parser.parse_args(argv)
    if args.list or not args.names:
        for name, (_, desc) in FIGURES.items():
            print(f"{name:12s} {desc}")
        return 0
    names = list(FIGURES) if args.names == ["all"] else list(args.names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        print(f"unknown figure(s): {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    failed: list[str] = []
    iterator: Iterable[str] = names
    if len(names) > 1:
        from tqdm import tqdm

        iterator = tqdm(names, desc="figures", unit="fig", disable=None)  # None: terminal only
    for name in iterator:
        t0 = time.perf_counter()
        try:
            paths = resolve(name)(Path(args.out_dir))
        except Exception as exc:  # report and continue with the other figures
            print(f"{name}: FAILED ({type(exc).__name__}: {exc})", file=sys.stderr)
            failed.append(name)
            continue
        shown = ", ".join(str(p) for p in paths)
        print(f"{name}: {shown} ({time.perf_counter() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
