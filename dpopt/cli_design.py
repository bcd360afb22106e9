"""``dpopt demo``, ``design``, ``verify`` and ``figures`` (private to :mod:`dpopt.cli`).

``design`` builds the optimal-covariance program of seed 002 Theorem 3 (MATH.md §6):

    minimise tr(W Σ)  subject to  s_jᵀ Σ⁻¹ s_j <= q for every sensitivity vector s_j,  Σ ⪰ ηI,

where q is the Mahalanobis bound of the budget(s) and the s_j are the two-record vectors of the
ideal denoiser at a query point (or the differences of domain points for a uniform query), then
solves it, certifies it and writes the design with its certificate as JSON.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from certificates._errors import InvalidParameterError
from dpopt.cli_io import (
    COMMON,
    UsageError,
    parse_float_list,
    parse_spec,
    read_matrix,
    read_points,
    spec_float,
    spec_int,
)

if TYPE_CHECKING:
    from dpopt.cli import Context

__all__ = [
    "DEMO_DELTA",
    "DEMO_EPSILON",
    "DEMO_GRID",
    "DEMO_QUERY",
    "DEMO_SIGMA",
    "add_demo_parser",
    "add_design_parser",
    "add_figures_parser",
    "add_verify_parser",
    "parse_domain",
]

_F = argparse.RawDescriptionHelpFormatter

#: The demo's built-in problem: a 5 x 5 grid in [0, 1]^2, the ideal denoiser at its centre.
DEMO_GRID = "grid:lo=0,hi=1,n=5,d=2"
DEMO_QUERY = (0.5, 0.5)
DEMO_SIGMA = 0.3
DEMO_EPSILON = 1.0
DEMO_DELTA = 1e-6
DEMO_OUTPUT = "dpopt-demo.json"

DOMAIN_HELP = (
    "domain (--domain):\n"
    "  grid:lo=0,hi=1,n=5,d=2    n equally spaced values per axis in [lo, hi]^d (n^d points)\n"
    "  box:lo=0,hi=1,d=3         the box [lo, hi]^d (uniform query only: its vertices)\n"
    "  points.csv | points.npy   one point per row (CSV: header optional, no missing values)\n"
)


def parse_domain(text: str) -> Any:
    """A domain from a spec (``grid:``/``box:``) or a CSV/NPY file of points."""
    domains = _need("dpopt.domains", "design")
    if ":" not in text or Path(text).suffix.lower() in (".csv", ".npy", ".txt"):
        if Path(text).suffix.lower() in (".csv", ".npy", ".txt") or Path(text).exists():
            return domains.FinitePoints(read_points(text, what="domain"))
    kind, params = parse_spec(text, what="domain")
    allowed = {"grid": {"lo", "hi", "n", "d"}, "box": {"lo", "hi", "d"}}
    if kind not in allowed:
        raise InvalidParameterError(
            "domain", text, "must be grid:lo=..,hi=..,n=..,d=.., box:lo=..,hi=..,d=.. or a file"
        )
    unknown = set(params) - allowed[kind]
    if unknown:
        raise InvalidParameterError(
            "domain", text, f"unknown key(s) {', '.join(sorted(unknown))} for {kind}"
        )
    lo = spec_float(params, "lo", text, 0.0)
    hi = spec_float(params, "hi", text, 1.0)
    d = spec_int(params, "d", text, 2)
    if not hi > lo:
        raise InvalidParameterError("domain", text, "needs hi > lo")
    if kind == "grid":
        n = spec_int(params, "n", text, 5, low=2)
        return domains.Grid(np.full(d, lo), np.full(d, hi), (n,) * d)
    return domains.Box(np.full(d, lo), np.full(d, hi))


def _need(module: str, command: str) -> Any:
    from dpopt.cli import need

    return need(module, command)


# ----------------------------------------------------------------------------- parsers


def _problem_options(p: argparse.ArgumentParser, *, demo: bool) -> None:
    p.add_argument(
        "--solver",
        default="auto",
        metavar="NAME",
        help="solver method (default auto: the structure-exploiting solver; or a cvxpy backend "
        "such as clarabel, scs)",
    )
    p.add_argument(
        "-o",
        "--output",
        default=DEMO_OUTPUT if demo else None,
        required=not demo,
        metavar="FILE",
        help="where to write the design JSON" + (f" (default {DEMO_OUTPUT})" if demo else ""),
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")


def add_demo_parser(sub: Any) -> None:
    """Register ``dpopt demo``."""
    p = sub.add_parser(
        "demo",
        parents=[COMMON],
        help="the main job on a built-in example: certified optimal noise for a denoiser",
        formatter_class=_F,
        description=(
            "Design the optimal Gaussian noise covariance for releasing the ideal denoiser\n"
            f"(posterior mean) at the query {DEMO_QUERY} over the 5 x 5 grid in [0, 1]^2 with\n"
            f"noise level σ = {DEMO_SIGMA}, under (ε = {DEMO_EPSILON:g}, δ = {DEMO_DELTA:g})-DP "
            "(add/remove one record).\n"
            "Prints its total error next to the isotropic baseline, the certified interval for\n"
            "the optimum and the privacy report, and writes the design with its certificate."
        ),
        epilog=(
            "examples:\n"
            "  dpopt demo                       # writes dpopt-demo.json (refuses to overwrite)\n"
            "  dpopt demo -o /tmp/d.json --force\n"
            "  dpopt demo --epsilon 0.5 --delta 1e-8 --no-save\n"
        ),
    )
    p.add_argument("--epsilon", type=float, default=DEMO_EPSILON, help="ε (default 1)")
    p.add_argument("--delta", type=float, default=DEMO_DELTA, help="δ (default 1e-6)")
    p.add_argument(
        "--sigma",
        type=float,
        default=DEMO_SIGMA,
        help=f"denoiser noise level (default {DEMO_SIGMA})",
    )
    p.add_argument("--no-save", action="store_true", help="do not write the design file")
    _problem_options(p, demo=True)
    p.set_defaults(handler=_cmd_demo)


def add_design_parser(sub: Any) -> None:
    """Register ``dpopt design``."""
    p = sub.add_parser(
        "design",
        parents=[COMMON],
        help="optimal noise covariance for your domain, query and budget(s), with a certificate",
        formatter_class=_F,
        description=(
            "Solve  min tr(W Σ)  s.t.  s_j^T Σ^-1 s_j <= q (all sensitivity vectors s_j),\n"
            "Σ ⪰ η I,  with q the Mahalanobis bound of the budget(s); certify the result and\n"
            "write it as JSON (re-checkable with 'dpopt verify'). Sensitivity vectors: the\n"
            "two-record vectors of the ideal denoiser at --query with noise level --sigma, or\n"
            "with --uniform-query the differences x - y of domain points (a query g(D) = record)."
        ),
        epilog=DOMAIN_HELP + "\nbudgets (--budget, repeatable: the strictest wins):\n"
        "  approx:epsilon=1,delta=1e-6   rdp:alpha=8,epsilon=1   zcdp:rho=0.5   gdp:mu=1   "
        "mi:kappa=0.1\n"
        "\nexamples:\n"
        "  dpopt design --domain grid:lo=0,hi=1,n=4,d=2 --query 0.5,0.5 --sigma 0.3 \\\n"
        "        --budget approx:epsilon=1,delta=1e-6 -o design.json\n"
        "  dpopt design --domain points.csv --uniform-query --budget rdp:alpha=8,epsilon=1 \\\n"
        "        --budget approx:epsilon=1,delta=1e-6 --weight W.npy --noise-floor 1e-3 \\\n"
        "        -o d.json\n",
    )
    p.add_argument("--domain", required=True, metavar="SPEC|FILE", help="the record domain")
    p.add_argument("--query", metavar="X1,X2,..", help="query point of the denoiser")
    p.add_argument("--sigma", type=float, metavar="S", help="denoiser noise level σ > 0")
    p.add_argument(
        "--uniform-query",
        action="store_true",
        help="sensitivity set = differences of domain points (instead of --query/--sigma)",
    )
    p.add_argument(
        "--adjacency",
        choices=("add-remove", "replace"),
        default="add-remove",
        help="neighbouring datasets differ by adding/removing one record (default) or by "
        "replacing one",
    )
    p.add_argument(
        "--budget",
        action="append",
        required=True,
        metavar="SPEC",
        help="privacy budget spec (repeatable)",
    )
    p.add_argument("--weight", metavar="FILE", help="weight matrix W (CSV/NPY, d x d, SPD)")
    p.add_argument(
        "--noise-floor", type=float, default=0.0, metavar="ETA", help="η >= 0 (default 0)"
    )
    _problem_options(p, demo=False)
    p.set_defaults(handler=_cmd_design)


def add_verify_parser(sub: Any) -> None:
    """Register ``dpopt verify``."""
    p = sub.add_parser(
        "verify",
        parents=[COMMON],
        help="re-check a design/certificate file from scratch (exit 0 holds, 1 does not)",
        formatter_class=_F,
        description=(
            "Re-check a design file written by 'dpopt design' or 'dpopt demo' with numpy/scipy\n"
            "only, trusting nothing it says: recompute the sensitivity residuals of Σ, the dual\n"
            "lower bound and the certified interval. Exit status 0 if the certificate holds,\n"
            "1 if it does not (tampered or wrong), 2 if the file cannot be read."
        ),
        epilog="examples:\n  dpopt verify design.json\n  dpopt verify design.json --json\n",
    )
    p.add_argument("file", metavar="FILE", help="design JSON file")
    p.add_argument("--json", action="store_true", help="print the check as JSON")
    p.set_defaults(handler=_cmd_verify)


def add_figures_parser(sub: Any) -> None:
    """Register ``dpopt figures``."""
    p = sub.add_parser(
        "figures",
        parents=[COMMON],
        help="list or run the paper-reproduction targets",
        formatter_class=_F,
        description=(
            "List the reproduction targets, or run some (or all) of them; each writes its\n"
            "figure(s) under --out-dir. Exit status 1 if any target failed (the others still run)."
        ),
        epilog=("examples:\n  dpopt figures --list\n  dpopt figures fig1\n  dpopt figures all\n"),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="targets to run ('all' for every one)")
    p.add_argument("--list", action="store_true", help="list the targets and exit")
    p.add_argument(
        "--out-dir", default="results", metavar="DIR", help="output folder (default results)"
    )
    p.set_defaults(handler=_cmd_figures)


# ----------------------------------------------------------------------------- commands


def _cmd_demo(args: argparse.Namespace, ctx: Context) -> int:
    raise UsageError("'dpopt demo' is not available yet in this build")


def _cmd_design(args: argparse.Namespace, ctx: Context) -> int:
    domain = parse_domain(args.domain)
    if args.uniform_query and (args.query is not None or args.sigma is not None):
        raise UsageError("--uniform-query excludes --query and --sigma")
    if not args.uniform_query and (args.query is None or args.sigma is None):
        raise UsageError("give --query and --sigma, or --uniform-query")
    if args.query is not None:
        parse_float_list("query", args.query)
    if args.weight is not None:
        read_matrix(args.weight)
    raise UsageError(f"'dpopt design' is not available yet in this build ({domain!r})")


def _cmd_verify(args: argparse.Namespace, ctx: Context) -> int:
    raise UsageError("'dpopt verify' is not available yet in this build")


def _cmd_figures(args: argparse.Namespace, ctx: Context) -> int:
    import time

    registry = _need("dpopt.figures.__main__", "figures")
    figures: dict[str, tuple[str, str]] = registry.FIGURES
    if args.list or not args.names:
        width = max((len(n) for n in figures), default=4) + 2
        for name, (_, desc) in figures.items():
            ctx.print(f"{name:{width}s}{desc}")
        if not args.list:
            ctx.print("\nrun: dpopt figures NAME [NAME ...] | all   (writes under --out-dir)")
        return 0
    names = list(figures) if args.names == ["all"] else list(dict.fromkeys(args.names))
    unknown = [n for n in names if n not in figures]
    if unknown:
        raise UsageError(
            f"unknown figure(s): {', '.join(unknown)} (available: {', '.join(figures)})"
        )
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    for name in ctx.progress(names, desc="figures", total=len(names)):
        t0 = time.perf_counter()
        try:
            paths = registry.resolve(name)(out_dir)
        except Exception as exc:  # one broken figure must not stop the others
            ctx.warn(f"{name}: FAILED ({type(exc).__name__}: {exc})")
            failed.append(name)
            continue
        shown = ", ".join(str(p) for p in paths)
        ctx.print(f"{name}: {shown} ({time.perf_counter() - t0:.1f} s)")
    if failed:
        ctx.warn(f"{len(failed)} figure(s) failed: {', '.join(failed)}")
        return 1
    return 0
