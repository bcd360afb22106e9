"""``python -m dpopt.figures NAME [NAME ...] | all | --list [--dask local|ADDRESS]`` — write
reproduction figures.

The registry maps a figure name to ``"module:function"``; the function takes the output folder
and returns the written paths. Entries are imported lazily, so one broken figure cannot stop the
others (or ``--list``). To add a figure, add one line to :data:`FIGURES`. A function that also
accepts ``client`` (a ``distributed.Client``) runs its sweep or draws as Dask tasks when given
one, and one that accepts ``progress`` draws its bars on a terminal only (:func:`run_figure`).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - Dask is optional
    from distributed import Client

#: name -> ("module:function", one-line description)
FIGURES: dict[str, tuple[str, str]] = {
    "fig1": (
        "dpopt.figures.fig1:fig1_figure",
        "the cube figure: naive / exact sensitivity ratio for K = [0,1]^d",
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
    "sampler": (
        "dpopt.figures.sampler:sampler_figure",
        "private sampling with the ideal denoiser: samples, per-step noise, quality vs ε",
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


def uses_dask(name: str) -> bool:
    """Whether the figure registered under ``name`` runs its work as Dask tasks given a client."""
    return "client" in inspect.signature(resolve(name)).parameters


def run_figure(name: str, out_dir: str | Path, *, client: Client | None = None,
               progress: bool | None = None) -> list[Path]:
    """Run the figure registered under ``name`` into ``out_dir``; return the written paths.

    ``client`` (a ``distributed.Client`` or None) and ``progress`` (False: no bars; otherwise
    bars on a terminal only) are passed to the figure's function when it accepts them; a figure
    with nothing worth distributing runs in this process.
    """
    fn = resolve(name)
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {}
    if client is not None and "client" in params:
        kwargs["client"] = client
    if progress is not None and "progress" in params:
        kwargs["progress"] = progress
    return fn(Path(out_dir), **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m dpopt.figures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="figure names, or 'all'")
    parser.add_argument("--list", action="store_true", help="list the registered figures")
    parser.add_argument("--out-dir", default="results", help="output folder (default: results)")
    parser.add_argument(
        "--dask", metavar="local|ADDRESS", default=None,
        help="run the sweeps and draws as Dask tasks: 'local' starts a LocalCluster on this "
        "machine for the run, an address such as tcp://host:8786 uses a running scheduler "
        "(same results; needs pip install -e '.[distributed]' from a clone)")
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
    from dpopt.errors import DpoptError
    from dpopt.parallel import dask_client

    failed: list[str] = []
    iterator: Iterable[str] = names
    if len(names) > 1:
        from tqdm import tqdm

        iterator = tqdm(names, desc="figures", unit="fig", disable=None)  # None: terminal only
    try:
        with dask_client(args.dask) as client:
            for name in iterator:
                t0 = time.perf_counter()
                try:
                    paths = run_figure(name, args.out_dir, client=client)
                except Exception as exc:  # report and continue with the other figures
                    print(f"{name}: FAILED ({type(exc).__name__}: {exc})", file=sys.stderr)
                    failed.append(name)
                    continue
                shown = ", ".join(str(p) for p in paths)
                print(f"{name}: {shown} ({time.perf_counter() - t0:.1f} s)")
    except DpoptError as exc:  # a bad --dask value or Dask not installed
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
