"""``dpopt design-run`` (private to :mod:`dpopt.cli`): optimal noise for a whole run of releases.

The ideal denoiser is queried at T noise levels of a deterministic sampling trajectory (each step
its own query g_t and noise level σ_t, hence its own sensitivity set); the whole run must meet one
budget. Under Gaussian DP the T releases with Mahalanobis bounds q_t compose exactly to one
Gaussian with bound Σ q_t, so the command splits the budget optimally over the steps
(:func:`dpopt.covariance.run_design.design_run`) and compares with the equal split and with
isotropic noise.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from dpopt.cli.common import COMMON, UsageError, dump_json, format_float

if TYPE_CHECKING:
    from dpopt.cli.common import Context, Subparsers

__all__ = ["add_design_run_parser"]

_F = argparse.RawDescriptionHelpFormatter


def add_design_run_parser(sub: Subparsers) -> None:
    """Register ``dpopt design-run``."""
    from dpopt.cli.account import BUDGET_HELP, _nonneg, _positive, _probability, _whole
    from dpopt.cli.options import add_dask_option

    p = sub.add_parser(
        "design-run",
        parents=[COMMON],
        help="optimal noise for T denoiser releases of a sampling run under one budget",
        formatter_class=_F,
        description=(
            "Release the ideal denoiser at T steps of a deterministic diffusion sampler (noise\n"
            "levels geometric from --sigma-max to --sigma-min, queries along the trajectory of a\n"
            "dataset of --data-size random domain points) under ONE budget for the whole run.\n"
            "T Gaussian releases with Mahalanobis bounds q_t compose exactly to Σ q_t (Gaussian\n"
            "DP), and each step's optimal error is c_t / q_t, so the optimal split is\n"
            "q_t ∝ sqrt(c_t). Each step's covariance is designed and certified; the total error\n"
            "(the final sample's expected squared error) is compared with the equal split and\n"
            "with isotropic noise."
        ),
        epilog=BUDGET_HELP + "\nexamples:\n"
        "  dpopt design-run --steps 8 --epsilon 1 --delta 1e-5\n"
        "  dpopt design-run --steps 12 --budget gdp:mu=0.5 --domain grid:lo=0,hi=1,n=6,d=2 "
        "--json\n",
    )
    p.add_argument("--steps", type=_whole, default=8, help="number of releases T (default 8)")
    p.add_argument("--domain", default="grid:lo=0,hi=1,n=5,d=2",
                   help="data domain spec (default grid:lo=0,hi=1,n=5,d=2)")
    p.add_argument("--data-size", type=_whole, default=10,
                   help="records of the dataset driving the trajectory (default 10)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--sigma-max", type=_positive, default=2.0, help="first noise level (2)")
    p.add_argument("--sigma-min", type=_positive, default=0.05, help="last noise level (0.05)")
    p.add_argument("--epsilon", type=_nonneg, help="total ε (with --delta)")
    p.add_argument("--delta", type=_probability, help="total δ in (0, 1) (with --epsilon)")
    p.add_argument("--budget", action="append", metavar="SPEC",
                   help="budget spec for the whole run (repeatable; instead of --epsilon/--delta)")
    p.add_argument("--noise-floor", type=_nonneg, default=0.0, help="η: Σ_t ⪰ η I (default 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_dask_option(p, "run every step's solver passes over the sensitivity vectors")
    p.set_defaults(handler=_cmd_design_run)


def _cmd_design_run(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.accounting import budgets
    from dpopt.cli.account import parse_budgets
    from dpopt.cli.design import parse_domain
    from dpopt.covariance import run_design as rd
    from dpopt.diffusion.trajectory import diffusion_run

    have_ed = args.epsilon is not None or args.delta is not None
    if have_ed and args.budget:
        raise UsageError("give either --epsilon/--delta or --budget, not both")
    if args.budget:
        budget = parse_budgets(args.budget, "design-run")
    else:
        if args.epsilon is None or args.delta is None:
            raise UsageError("give --epsilon and --delta (or --budget SPEC)")
        budget = budgets.ApproxDP(args.epsilon, args.delta)
    if args.sigma_min > args.sigma_max:
        raise UsageError("--sigma-min must be <= --sigma-max")
    domain = parse_domain(args.domain)
    if not hasattr(domain, "points"):
        raise UsageError("--domain must be finite here (a grid or a file of points; the "
                         "guarantee then covers records snapped to it)")
    import numpy as np  # here, not at the top: `--help` stays light

    pts = np.asarray(domain.points)
    rng = np.random.default_rng(args.seed)
    data = pts[rng.choice(pts.shape[0], min(args.data_size, pts.shape[0]), replace=False)]
    example = diffusion_run(domain, data, args.steps, sigma_max=args.sigma_max,
                            sigma_min=args.sigma_min, seed=args.seed)
    with ctx.stage(f"designing {args.steps} releases"):
        run = rd.design_run(example.sets, example.weights, budget,
                            noise_floor=args.noise_floor, dask=args.dask)
    steps = []
    for t in range(args.steps):
        eq = run.equal_split_designs[t] if run.equal_split_designs else None
        steps.append({
            "sigma": float(example.sigmas[t]),
            "weight": float(example.weights[t][0, 0]),
            "query": [float(v) for v in example.queries[t]],
            "bound": run.bounds[t],
            "error": run.designs[t].value,
            "equal_split_error": None if eq is None else eq.value,
            "isotropic_equal_split_error": None if eq is None else eq.isotropic_value,
        })
    result = {
        "command": "design-run",
        "budget": budget.describe(),
        "total_bound": run.total_bound,
        "total_error": run.value,
        "certified_lower": run.lower,
        "equal_split_error": run.equal_split_value,
        "isotropic_error": run.isotropic_value,
        "gain_over_equal_split": run.gain_over_equal_split,
        "gain_over_isotropic": run.gain_over_isotropic,
        "steps": steps,
    }
    if args.json:
        ctx.print(dump_json(result))
        return 0
    f = format_float
    ctx.print(f"{args.steps} denoiser releases under {budget.describe()} for the whole run "
              f"(Σ q_t <= Q = {f(run.total_bound)}):")
    ctx.print("   t   σ_t       W_t=c_t²I   q_t (optimal)  error     q (equal)   error     "
              "isotropic")
    eq_q = run.total_bound / args.steps
    for t, s in enumerate(steps):
        ctx.print(
            f"  {t + 1:2d}   {s['sigma']:<8.4g}  {s['weight']:<10.4g}  {s['bound']:<13.5g}  "
            f"{s['error']:<8.4g}  {eq_q:<10.5g}  {s['equal_split_error'] or math.nan:<8.4g}  "
            f"{s['isotropic_equal_split_error'] or math.nan:<8.4g}"
        )
    ctx.print(f"  total error: optimal split {f(run.value)} (certified optimum in "
              f"[{f(run.lower)}, {f(run.value)}])")
    if run.equal_split_value is not None and run.isotropic_value is not None:
        ctx.print(f"               equal split   {f(run.equal_split_value)} "
                  f"(x{run.gain_over_equal_split:.3f} more)")
        ctx.print(f"               isotropic     {f(run.isotropic_value)} "
                  f"(x{run.gain_over_isotropic:.3f} more; equal split)")
    return 0
