"""``dpopt sample`` (private to :mod:`dpopt.cli`): private samples from the ideal denoiser.

Every step of a DDIM/DDPM sampler releases the ideal denoiser at its certified optimal covariance
(:func:`dpopt.diffusion.sampler.sample_private`); the run record written with ``-o`` is
re-checked by ``dpopt verify``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dpopt.cli.common import COMMON, UsageError, dump_json, write_text_safely

if TYPE_CHECKING:
    from dpopt.cli.common import Context, Subparsers

__all__ = ["add_sample_parser"]

_F = argparse.RawDescriptionHelpFormatter
#: the deltas at which a run's epsilon is reported (``privacy.epsilon_for_delta``)
RUN_DELTAS = (1e-5, 1e-6, 1e-8)
DEFAULT_DOMAIN = "grid:lo=0,hi=1,n=20,d=2"


def add_sample_parser(sub: Subparsers) -> None:
    """Register ``dpopt sample``."""
    from dpopt.cli.account import BUDGET_HELP, _whole

    p = sub.add_parser(
        "sample",
        parents=[COMMON],
        help="private samples from your data: every diffusion step at its optimal covariance",
        formatter_class=_F,
        description=(
            "Draw private samples with a diffusion sampler whose denoiser is the ideal one\n"
            "(the posterior mean over your records). Each of the samples x steps denoiser\n"
            "releases gets the certified least-error Gaussian covariance for its own query on\n"
            "the PUBLIC domain, within a share q_t of the budget fixed before the data are\n"
            "read; the whole run is sqrt(sum q_t)-GDP (adaptive composition of Gaussian\n"
            "mechanisms). Records off the domain are snapped onto it (a warning says how many;\n"
            "the count is not written into the record). The run record (-o) lists every\n"
            "release and is re-checked from the file alone by 'dpopt verify'.\n"
            "\n"
            "Datasets (--dataset) are rescaled to the unit square by public bounds: adult =\n"
            "age and hours-per-week in [0, 100]; heart = age in [0, 100] and maximum heart\n"
            "rate in [50, 220]; mixture = a synthetic 2-D Gaussian mixture."
        ),
        epilog=BUDGET_HELP + "\nexamples:\n"
        "  dpopt sample --dataset heart --budget approx:epsilon=1,delta=1e-5 -o run.json\n"
        "  dpopt sample --data records.csv --header --domain grid:lo=0,hi=1,n=20,d=2 \\\n"
        "        --budget gdp:mu=2 --steps 50 --samples 100 -o run.json --plot samples.png\n"
        "  dpopt verify run.json\n",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="FILE", help="private records, one per row (.csv/.npy)")
    src.add_argument("--dataset", choices=("adult", "heart", "mixture"),
                     help="a shipped dataset (two columns, rescaled to the unit square)")
    p.add_argument("--header", action="store_true", help="the CSV data file has a header line")
    p.add_argument("--domain", default=DEFAULT_DOMAIN, metavar="SPEC|FILE",
                   help=f"the public domain: a grid spec or a file of points "
                   f"(default {DEFAULT_DOMAIN})")
    p.add_argument("--budget", required=True, metavar="SPEC",
                   help="budget of the whole run (approx, gdp, zcdp, rdp; '&' joins several)")
    p.add_argument("--steps", type=_whole, default=50, help="denoiser releases per sample "
                   "(default 50)")
    p.add_argument("--samples", type=_whole, default=100, help="samples to draw (default 100)")
    p.add_argument("--schedule", choices=("cosine", "linear"), default="cosine")
    p.add_argument("--sampler", choices=("ddim", "ddpm"), default="ddim")
    p.add_argument("--prediction", choices=("x0", "eps"), default="x0",
                   help="release the posterior mean (x0) or the noise prediction (eps)")
    p.add_argument("--noise", choices=("optimal", "isotropic"), default="optimal",
                   help="optimal covariance (default) or the isotropic baseline")
    p.add_argument("--split", default="equal", metavar="RULE",
                   help="budget split over the steps: equal (default), propagated (more to the "
                   "late steps, from the schedule), pilot (public pilot runs on the domain), "
                   "or T comma-separated weights")
    p.add_argument("--seed", type=int, default=None,
                   help="seed (default: from the operating system, right for real data)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="run record JSON")
    p.add_argument("--samples-out", metavar="FILE", help="also write the samples as CSV "
                   "(data, not a certificate: the run record is what dpopt verify reads)")
    p.add_argument("--plot", metavar="FILE", help="draw the samples and the per-step error "
                   "(.png/.svg/.pdf; needs matplotlib)")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=_cmd_sample)


def _split(text: str, steps: int) -> Any:
    """The rule of ``--split``: a name, or ``steps`` finite positive weights."""
    import math

    key = text.strip().lower()
    if key in ("equal", "pilot", "propagated"):
        return key
    try:
        weights = [float(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(
            f"--split must be equal, propagated, pilot or comma-separated weights: {text!r}"
        ) from None
    if len(weights) != steps:
        raise UsageError(f"--split {text!r}: {len(weights)} weights for --steps {steps} "
                         f"(one weight per step)")
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise UsageError(f"--split {text!r}: the weights must be finite and > 0")
    return weights


def _cmd_sample(args: argparse.Namespace, ctx: Context) -> int:
    import json
    from pathlib import Path

    from dpopt.cli.account import parse_budgets
    from dpopt.cli.common import read_points
    from dpopt.cli.design import parse_domain
    from dpopt.diffusion.data import load_pair
    from dpopt.diffusion.sampler import sample_private

    for path in (args.output, args.samples_out, args.plot):
        if path and Path(path).exists() and not args.force:
            raise UsageError(f"output file exists: {path} (use --force to overwrite)")
    if args.dataset and args.header:
        raise UsageError("--header applies to a CSV --data file")
    domain = parse_domain(args.domain)
    rule = _split(args.split, args.steps)
    budget = parse_budgets([args.budget], "sample")
    if args.dataset:
        data = load_pair(args.dataset, seed=0).train
        what = f"dataset {args.dataset}"
    else:
        data = read_points(args.data, what="data", header=args.header)
        what = f"data file {args.data}"
    if data.shape[1] != domain.dim:
        given = f"--data {args.data}" if args.data else f"--dataset {args.dataset}"
        raise UsageError(f"{given} has {data.shape[1]} columns, but the domain --domain "
                         f"{args.domain} is {domain.dim}-dimensional")
    out = sample_private(
        data, domain, budget, samples=args.samples, steps=args.steps, schedule=args.schedule,
        sampler=args.sampler, prediction=args.prediction, noise=args.noise,
        split=rule, rng=args.seed, progress=ctx.interactive,
    )
    write_text_safely(args.output, json.dumps(out.record, allow_nan=False,
                                              separators=(",", ":")) + "\n", force=args.force)
    if args.samples_out:
        lines = "\n".join(",".join(repr(float(v)) for v in row) for row in out.samples)
        write_text_safely(args.samples_out, lines + "\n", force=args.force)
    if args.plot:
        from dpopt.figures.sampler import plot_run

        plot_run(out, args.plot)
    rep = out.privacy
    summary = {
        "command": "sample",
        "source": what, "releases": out.releases, "cpu_seconds": out.seconds,
        "releases_per_second": out.releases / out.seconds if out.seconds > 0 else None,
        "summed_error": out.errors, "baseline_over_released": out.ratios(),
        "output": args.output,
        # the run's guarantee (its GDP mu and its epsilon at each delta), in the one report
        "privacy": rep.to_dict(deltas=RUN_DELTAS),
    }
    if args.json:
        ctx.print(dump_json(summary))
        return 0
    ctx.print(f"{out.releases} certified releases ({args.samples} samples x {args.steps} steps, "
              f"{args.sampler}, {args.noise} noise) from {what} in {out.seconds:.1f} s CPU "
              f"({summary['releases_per_second']:.0f} releases/s)")
    ctx.print(f"guarantee of the run: {rep.gdp_mu:.6g}-GDP (add/remove), i.e. "
              + ", ".join(f"eps = {float(rep.epsilon(d)):.4g} at delta = {d:g}"
                          for d in (1e-5, 1e-8)))
    ctx.print("summed error sum tr(W Sigma_t): released "
              f"{out.errors['released']:.6g}; baselines at the same q_t: "
              + ", ".join(f"{k} x{v:.3g}" for k, v in out.ratios().items() if k != "optimal"))
    ctx.print(f"run record: {args.output}  (re-check: dpopt verify {args.output})")
    far = _far_fraction(out.samples, domain)
    if far > 0.5:
        ctx.warn(f"{100 * far:.0f}% of the samples lie more than one domain diameter outside "
                 "the domain: at this budget the privacy noise swamps the denoiser and the "
                 "samples carry no information (raise the budget or use fewer steps/samples)")
    return 0


def _far_fraction(samples: Any, domain: Any) -> float:
    """Fraction of samples farther than one diameter from the domain's bounding box."""
    import numpy as np  # here, not at the top: `--help` stays light

    pts = getattr(domain, "points", None)
    lo = np.min(pts, axis=0) if pts is not None else np.asarray(domain.lower)
    hi = np.max(pts, axis=0) if pts is not None else np.asarray(domain.upper)
    gap = np.linalg.norm(np.maximum(0.0, np.maximum(lo - samples, samples - hi)), axis=1)
    return float(np.mean(gap > float(np.linalg.norm(hi - lo))))
