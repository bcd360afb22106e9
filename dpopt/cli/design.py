"""``dpopt demo``, ``design``, ``verify`` and ``figures`` (private to :mod:`dpopt.cli`).

``design`` builds the optimal-covariance program (the covariance program of the theory page):

    minimise tr(W Σ)  subject to  s_jᵀ Σ⁻¹ s_j <= q for every sensitivity vector s_j,  Σ ⪰ ηI,

where q is the Mahalanobis bound of the budget(s) and the s_j are the two-record vectors of the
ideal denoiser at a query point (or the differences of domain points for a uniform query), then
solves it, certifies it and writes the design with its certificate as JSON.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpopt.cli.common import (
    COMMON,
    UsageError,
    dump_json,
    format_float,
    parse_float_list,
    read_matrix,
    read_points,
)
from dpopt.cli.options import (
    CHECK_PASS_COST,
    ETA_AFTER,
    ETA_MAX_SPREAD,
    PASSES_EXPECTED,
    add_dask_option,
    add_renamed_option,
    announce_large_design,
    less_error,
)
from dpopt.errors import InvalidParameterError
from dpopt.relation import NeighbouringRelation, as_relation

if TYPE_CHECKING:  # numpy is imported where used: `--help` stays light
    import numpy as np
    from numpy.typing import NDArray

    from certificates.problem import VectorSource
    from dpopt.accounting.budgets import PrivacyReport
    from dpopt.cli.common import Context, Subparsers
    from dpopt.covariance.design import Design
    from dpopt.covariance.domains import Box, FinitePoints, Grid
    from dpopt.covariance.sensitivity import BoxTwoRecordSet
    from dpopt.parallel import DaskOption

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
DEMO_QUERY = (0.2, 0.7)
DEMO_SIGMA = 0.5
DEMO_EPSILON = 1.0
DEMO_DELTA = 1e-6
DEMO_OUTPUT = "dpopt-demo.json"

DOMAIN_HELP = (
    "domain (--domain):\n"
    "  grid:lo=0,hi=1,n=5,d=2    n equally spaced values per axis in [lo, hi]^d (n^d points);\n"
    "                            covers records taking those values only (snap real-valued\n"
    "                            records to the grid before releasing)\n"
    "  box:lo=0,hi=1,d=3         the box [lo, hi]^d: covers every record anywhere in it (with\n"
    "                            --query, a design with a certified sup over the whole box)\n"
    "  points.csv | points.npy   one point per row (CSV: every cell a number; add --header if\n"
    "                            the first line is a header)\n"
)


def parse_domain(text: str, *, header: bool = False) -> FinitePoints | Grid | Box:
    """A domain from a spec (``grid:``/``box:``) or a CSV/NPY file of points.

    ``header``: the CSV's first line is a header (skipped); without it every cell of a CSV must
    be a number. Only meaningful for a CSV file.
    """
    from dpopt.covariance import description, domains

    if not text.strip():
        raise UsageError("--domain is empty: give a spec (grid:lo=0,hi=1,n=5,d=2) or a file")
    is_file = Path(text).suffix.lower() in (".csv", ".npy", ".txt") or (
        ":" not in text and Path(text).exists()
    )
    if is_file:
        if header and Path(text).suffix.lower() == ".npy":
            raise UsageError("--header applies to a CSV domain file, not to an .npy file")
        return domains.FinitePoints(read_points(text, what="domain", header=header))
    if header:
        raise UsageError("--header applies to a CSV domain file, not to a domain spec")
    try:
        return description.domain_from_spec(text)
    except InvalidParameterError as exc:  # name the option the user typed, and the key in it
        if exc.name in ("domain", "spec"):
            raise InvalidParameterError("--domain", text, exc.requirement) from None
        why = exc.requirement.replace(f" (in {text!r})", "")
        raise InvalidParameterError("--domain", text, f"{exc.name}={exc.value} {why}") from None


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
        default=None,
        required=not demo,
        metavar="FILE",
        help="where to write the design JSON" + (f" (default {DEMO_OUTPUT})" if demo else ""),
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument(
        "--yes",
        action="store_true",
        help="start a design over more than 1e9 sensitivity vectors (a size and time estimate "
        "is printed first for any design over 1e7)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw the design (noise ellipse against isotropic noise and the binding "
        "sensitivity vectors) to FILE: .png, .svg or .pdf; needs matplotlib",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    add_dask_option(p, "run the structured solver's passes over the sensitivity vectors")


def _save_plot(design: Design, path: Path) -> None:
    """Draw ``design.plot()`` on a backend-free matplotlib Figure and save it to ``path``."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'dpopt[figures]'") from None
    fig = Figure(figsize=(5.5, 6.0), layout="constrained")
    design.plot(fig.add_subplot())
    fig.savefig(path, dpi=100)


def _check_plot_path(path: str, force: bool) -> Path:
    out = _check_output(path, force)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--plot {path}: the file name must end in .png, .svg or .pdf")
    return out


def add_demo_parser(sub: Subparsers) -> None:
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
            "the optimum and the privacy report, and writes the design with its certificate\n"
            "(re-check it with 'dpopt verify'). An explicit -o FILE is never overwritten\n"
            "without --force; the default file, if present, is kept (with a warning)."
        ),
        epilog=(
            "examples:\n"
            "  dpopt demo                     # writes dpopt-demo.json (an existing one is kept)\n"
            "  dpopt demo -o /tmp/d.json --force\n"
            "  dpopt demo --epsilon 0.5 --delta 1e-8 --no-save\n"
        ),
    )
    p.add_argument("--epsilon", type=float, default=DEMO_EPSILON, help="ε (default 1)")
    p.add_argument("--delta", type=float, default=DEMO_DELTA, help="δ (default 1e-6)")
    add_renamed_option(
        p, "--denoiser-sigma", "--sigma", dest="sigma", type=float, default=DEMO_SIGMA,
        metavar="S", help=f"the ideal denoiser's noise level σ > 0 (default {DEMO_SIGMA})",
    )
    p.add_argument("--no-save", action="store_true", help="do not write the design file")
    _problem_options(p, demo=True)
    p.set_defaults(handler=_cmd_demo)


def add_design_parser(sub: Subparsers) -> None:
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
            "two-record vectors of the ideal denoiser at --query with noise level\n"
            "--denoiser-sigma, or with --uniform-query the differences x - y of domain points\n"
            "(a query g(D) = record). The domain and the query must be public (fixed without\n"
            "looking at the records); the output says which records the guarantee covers."
        ),
        epilog=DOMAIN_HELP + "\nbudgets (--budget, repeatable: the strictest wins):\n"
        "  approx:epsilon=1,delta=1e-6   rdp:alpha=8,epsilon=1   zcdp:rho=0.5   gdp:mu=1   "
        "mi:kappa=0.1\n"
        "\nexamples:\n"
        "  dpopt design --domain box:lo=0,hi=1,d=2 --query 0.5,0.5 --denoiser-sigma 0.3 \\\n"
        "        --budget approx:epsilon=1,delta=1e-6 -o design.json  # every record in the box\n"
        "  dpopt design --domain grid:lo=0,hi=1,n=4,d=2 --query 0.5,0.5 --denoiser-sigma 0.3 \\\n"
        "        --budget approx:epsilon=1,delta=1e-6 -o grid.json  # grid values (snap first)\n"
        "  dpopt design --domain points.csv --uniform-query --budget rdp:alpha=8,epsilon=1 \\\n"
        "        --budget approx:epsilon=1,delta=1e-6 --weight W.npy --noise-floor 1e-3 \\\n"
        "        -o d.json\n"
        "  dpopt design --domain big.npy --query 0.5,0.5 --denoiser-sigma 0.3 \\\n"
        "        --budget gdp:mu=1 --dask tcp://scheduler:8786 -o big.json  # passes on Dask\n",
    )
    p.add_argument("--domain", required=True, metavar="SPEC|FILE", help="the record domain")
    p.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="the domain CSV's first line is a header to skip (default --no-header: every "
        "line is a point and a non-numeric cell is an error naming its line and column)",
    )
    p.add_argument("--query", metavar="X1,X2,..", help="query point of the denoiser")
    add_renamed_option(p, "--denoiser-sigma", "--sigma", dest="sigma", type=float, metavar="S",
                       help="the ideal denoiser's noise level σ > 0 (with --query)")
    p.add_argument(
        "--uniform-query",
        action="store_true",
        help="sensitivity set = differences of domain points (instead of --query and "
        "--denoiser-sigma)",
    )
    p.add_argument(
        "--relation",
        choices=[r.value for r in NeighbouringRelation],
        default=NeighbouringRelation.ADD_REMOVE.value,
        help="neighbouring datasets differ by adding/removing one record (add_remove, default) "
        "or by replacing one (replacement: the add/remove set must meet a quarter of the bound)",
    )
    p.add_argument("--adjacency", dest="old_adjacency", default=None, help=argparse.SUPPRESS)
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
    p.add_argument(
        "--rigorous",
        action="store_true",
        help="certify with every rounding error accounted for (exact arithmetic)",
    )
    _problem_options(p, demo=False)
    p.set_defaults(handler=_cmd_design)


def add_verify_parser(sub: Subparsers) -> None:
    """Register ``dpopt verify``."""
    p = sub.add_parser(
        "verify",
        parents=[COMMON],
        help="re-check any certificate file dpopt writes, from scratch (exit 0 holds, 1 not)",
        formatter_class=_F,
        description=(
            "Re-check a certificate file dpopt wrote, trusting nothing it says. The kind is read\n"
            "from the file's \"format\" field and the claim is re-derived from the file's inputs:\n"
            "  covariance design   ('dpopt design', 'dpopt demo'): regenerate the sensitivity\n"
            "      vectors from the description and compare them with the file's; recompute\n"
            "      the budget's Mahalanobis bound q from its specs; recompute the residuals of\n"
            "      Σ, the dual lower bound and the interval, which must lie inside the claim;\n"
            "  tight Pufferfish     ('dpopt calibrate pufferfish --tight --certificate'):\n"
            "      re-prove every Rényi divergence bound from the stored laws, at the released\n"
            "      and at the refuted scale.\n"
            "Every field is read strictly (types, finiteness, ranges, shapes). The sha256\n"
            "digests only detect accidental corruption (anyone editing the file can recompute\n"
            "them); edits are caught by the re-check. Exit status 0 if the certificate holds,\n"
            "1 if it does not (edited, corrupted, malformed or wrong: the reason, naming the\n"
            "field, is printed), 2 if the file cannot be read.\n"
            "\n"
            "With --dask the pass over all J vectors of a covariance design (the bound on\n"
            "max_j s_j^T Σ^-1 s_j) runs as Dask tasks that regenerate their blocks from the\n"
            "description; the checker combines their results and derives every bound here\n"
            "(same verdict, same numbers). The sha256 comparison of the regenerated vectors\n"
            "stays one sequential pass on this machine."
        ),
        epilog=(
            "examples:\n  dpopt verify design.json\n  dpopt verify design.json --json\n"
            "  dpopt verify design.json --rigorous   # interval proven despite rounding\n"
            "  dpopt verify big.json --dask tcp://scheduler:8786   # the pass on a cluster\n"
            "  dpopt verify tight.json               # a tight Pufferfish certificate\n"
        ),
    )
    p.add_argument("file", metavar="FILE", help="certificate JSON file")
    p.add_argument(
        "--rigorous",
        action="store_true",
        help="account for every rounding error (exact arithmetic on the dual support)",
    )
    p.add_argument("--json", action="store_true", help="print the check as JSON")
    add_dask_option(p, "run the verification pass over the regenerated sensitivity vectors")
    p.set_defaults(handler=_cmd_verify)


def add_figures_parser(sub: Subparsers) -> None:
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
        epilog=("examples:\n  dpopt figures --list\n  dpopt figures --list --json\n"
                "  dpopt figures fig1\n  dpopt figures all --force   # replace earlier results\n"
                "  dpopt figures rpp-adult --dask local   # the sweep's cells as Dask tasks\n"),
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="targets to run ('all' for every one)")
    p.add_argument("--list", action="store_true", help="list the targets and exit")
    p.add_argument(
        "--out-dir", default="results", metavar="DIR", help="output folder (default results)"
    )
    p.add_argument("--force", action="store_true",
                   help="replace files an earlier run wrote (default: keep them and report)")
    p.add_argument("--json", action="store_true",
                   help="print the list (with --list) or the written files as JSON")
    add_dask_option(p, "run the sweeps (rpp-*, denoiser-covariance) and the fig1 draws")
    p.set_defaults(handler=_cmd_figures)


# ----------------------------------------------------------------------------- commands


#: Largest number of floats (count x d) of sensitivity vectors stored inside a design file;
#: beyond it the file stores a description and a sha256, and ``verify`` regenerates them.
MAX_STORED_FLOATS = 500_000



def _check_output(path: str, force: bool) -> Path:
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"output path is a directory: {out}")
    if not out.parent.exists():
        raise UsageError(f"output directory does not exist: {out.parent}")
    if out.exists() and not force:
        raise UsageError(f"{out} already exists; use --force to overwrite it")
    return out


def _report(bound: float) -> dict[str, Any]:
    from dpopt.accounting.budgets import privacy_report

    return _report_of(privacy_report(bound))


def _report_of(rep: PrivacyReport) -> dict[str, Any]:
    """The report in the one JSON shape of :mod:`dpopt.accounting.report_json`."""
    from dpopt.accounting.report_json import report_dict

    return report_dict(rep, alphas=(2.0, 8.0, 32.0), deltas=(1e-5, 1e-6, 1e-8), epsilons=())


def _print_report(ctx: Context, rep: dict[str, Any], indent: str = "  ") -> None:
    f = format_float
    ctx.print(
        f"{indent}Mahalanobis sensitivity sup s^T Σ^-1 s <= {f(rep['mahalanobis_bound'])}:  "
        f"zCDP ρ = {f(rep['zcdp_rho'])},  GDP μ = {f(rep['gdp_mu'])}"
    )
    ctx.print(f"{indent}RDP ε_α: "
              + ", ".join(f"α={r['alpha']:g}: {f(r['epsilon'])}" for r in rep["rdp"]))
    ctx.print(
        f"{indent}(ε, δ)-DP: "
        + ", ".join(f"δ={r['delta']:g}: ε={f(r['epsilon'])}" for r in rep["epsilon_for_delta"])
    )


def run_design(
    ctx: Context,
    *,
    meta: dict[str, Any],
    sensitivity: VectorSource | BoxTwoRecordSet,
    budget_specs: list[str],
    weight: NDArray[np.float64] | None,
    noise_floor: float,
    solver: str,
    output: str | None,
    force: bool,
    rigorous: bool = False,
    domain_points: NDArray[np.float64] | None = None,
    header: bool | None = None,
    plot: str | None = None,
    yes: bool = False,
    dask: DaskOption = None,
) -> dict[str, Any]:
    """Design, certify, (optionally) write and draw; return the JSON-ready summary.

    The file's description binds the design: the domain spec, or for a domain file its points
    themselves (``domain_points``), the sensitivity set, the relation and the budget specs; the
    verifier regenerates the vectors from it and recomputes the budget's bound. ``dask``
    (``None``, ``"local"`` or a scheduler address) goes to
    :func:`~dpopt.covariance.design.design_covariance`.
    """
    import numpy as np

    from dpopt.cli.account import parse_budgets
    from dpopt.covariance.continuous import BoxCoverage
    from dpopt.covariance.design import design_covariance

    out_path = _check_output(output, force) if output is not None else None
    plot_path = _check_plot_path(plot, force) if plot is not None else None
    if plot_path is not None and out_path is not None and plot_path.resolve() == out_path.resolve():
        raise UsageError("--plot and the output file must differ")
    budget = parse_budgets(budget_specs, "design")
    relation = as_relation(meta["relation"])
    from dpopt.covariance import sensitivity as sens

    vectors: Any
    if isinstance(sensitivity, sens.BoxTwoRecordSet):
        vectors, dim, count = sensitivity, sensitivity.dim, 0
        stage = (f"solving (records anywhere in the box, d = {dim}: exchange with a certified "
                 "sup over the box)")
    else:
        count, dim = int(sensitivity.count), int(sensitivity.dim)
        announce_large_design(ctx, sensitivity, confirmed=yes)
        if count * dim <= MAX_STORED_FLOATS:
            vectors = np.concatenate([b for _, b in sensitivity.chunks()], axis=0)
        else:
            vectors = sensitivity
        stage = f"design ({count:,} vectors, d = {dim})"
    # the box set runs an exchange, not a fixed number of passes: its line shows the time only
    with ctx.steps(stage, unit="pass",
                   expected=None if count == 0 else PASSES_EXPECTED,
                   tail=None if count == 0 else CHECK_PASS_COST,
                   max_spread=ETA_MAX_SPREAD, eta_after=ETA_AFTER):
        design = design_covariance(
            vectors,
            budget,
            weight=weight,
            noise_floor=noise_floor,
            solver=solver,
            rigorous=rigorous,
            relation=relation,
            dask=dask,
        )
    cert = design.certificate
    if isinstance(design.coverage, BoxCoverage):
        count = int(design.coverage.pairs_x.shape[0])
    summary: dict[str, Any] = {
        **meta,
        "budget": budget.describe(),
        "budget_bound": design.bound,
        "solver": design.solution.stats.solver,
        "path": design.path,
        "count": count,
        "dim": dim,
        "total_error": float(design.value),
        "isotropic_error": float(design.isotropic_value),
        "improvement": float(design.improvement),
        "certified_interval": [float(cert.lower), float(cert.upper)],
        "gap": float(cert.gap),
        "certified": bool(cert.certified),
        "rigorous": bool(cert.rigorous),
        "covariance": design.covariance,
        "privacy": _report_of(design.privacy.report),
        "output": None,
        "sha256": None,
        "plot": None,
        "covers": covers_line(meta, design),
    }
    if plot_path is not None:
        _save_plot(design, plot_path)
        summary["plot"] = str(plot_path)
    if out_path is not None:
        from dpopt.covariance.description import DesignDescription

        desc = DesignDescription(
            command=meta["command"], domain=meta["domain"],
            domain_points=None if domain_points is None else np.asarray(
                domain_points, dtype=np.float64),
            header=header, set=meta["set"],
            query=None if meta["query"] is None else np.asarray(meta["query"], dtype=np.float64),
            sigma=meta["sigma"], relation=relation.value, budget=budget.describe(),
            budget_bound=design.bound, budget_specs=tuple(budget_specs),
            pairs=None if not isinstance(design.coverage, BoxCoverage) else np.hstack(
                [design.coverage.pairs_x, design.coverage.pairs_y]),
        )
        summary["sha256"] = design.save(out_path, description=desc, overwrite=force)
        summary["output"] = str(out_path)
    return summary


def covers_line(meta: dict[str, Any], design: Design) -> str:
    """What the design's guarantee covers, in one sentence (printed and in the JSON)."""
    kind = meta.get("set")
    if design.coverage is not None:
        return (f"every dataset of records anywhere in the box {meta['domain']} "
                f"({meta['relation']}); the certified sup over every pair of records in the box "
                f"is {design.coverage.sup.upper:.10g} <= q")
    if kind == "uniform-query":
        return (f"every query point and every dataset with records in the domain "
                f"{meta['domain']} ({meta['relation']})")
    return (f"datasets whose records take the values of the finite domain {meta['domain']} "
            f"({meta['relation']}) only: snap real-valued records to it first (Grid.snap / "
            "DenoiserMechanism), or design on a box (--domain box:...) to cover every record "
            "in it")


def _print_design(ctx: Context, res: dict[str, Any], title: str) -> None:
    import numpy as np

    f = format_float
    lo, up = res["certified_interval"]
    ctx.print(title)
    what = (f"{res['count']} working pairs in R^{res['dim']}" if res["set"] == "two-record-box"
            else f"{res['count']} vectors in R^{res['dim']}")
    ctx.print(
        f"  sensitivity set: {res['set']} ({what}), "
        f"{res['relation']} relation; budget {res['budget']} -> q = {f(res['budget_bound'])}"
    )
    ctx.print(f"  covers: {res['covers']}")
    ctx.print(f"  total error tr(W Σ):   {res['total_error']:.8g}   (optimal covariance)")
    ctx.print(
        f"  isotropic baseline:    {res['isotropic_error']:.8g}   "
        f"(the optimal design has {less_error(res['improvement'])})"
    )
    state = (
        "CERTIFIED"
        if res["certified"]
        else "NOT certified to tolerance (private, maybe suboptimal)"
    )
    ctx.print(
        f"  certified interval:    optimum in [{lo:.10g}, {up:.10g}], relative gap "
        f"{res['gap']:.2e}  {state}" + (" (rigorous)" if res.get("rigorous") else "")
    )
    if res.get("path"):
        ctx.print(f"  answer from:           {res['path']}")
    cov = np.asarray(res["covariance"])
    rows = ["[" + ", ".join(f"{v: .6g}" for v in row) + "]" for row in cov]
    if cov.shape[0] <= 6:
        ctx.print("  covariance Σ:          " + ("\n" + " " * 25).join(rows))
    ctx.print("  privacy delivered (sensitivity sup of this Σ, safely rounded up):")
    _print_report(ctx, res["privacy"], indent="    ")
    if res.get("plot"):
        ctx.print(f"  drew the design to {res['plot']}")
    if res["output"]:
        ctx.print(
            f"  wrote {res['output']} (content digest {res['sha256'][:16]}...); "
            f"re-check with: dpopt verify {res['output']}"
        )


def _finish(ctx: Context, args: argparse.Namespace, res: dict[str, Any], title: str) -> int:
    if args.json:
        ctx.print(dump_json(res))
    else:
        _print_design(ctx, res, title)
    return 0


def _cmd_demo(args: argparse.Namespace, ctx: Context) -> int:
    import numpy as np

    from dpopt.covariance import sensitivity as sens

    domain = parse_domain(DEMO_GRID)
    meta = {
        "command": "demo",
        "domain": DEMO_GRID,
        "set": "two-record",
        "query": list(DEMO_QUERY),
        "sigma": float(args.sigma),
        "relation": NeighbouringRelation.ADD_REMOVE.value,
    }
    if not (args.sigma > 0 and np.isfinite(args.sigma)):
        raise InvalidParameterError("--denoiser-sigma", args.sigma,
                                        "must be a finite number > 0")
    sensitivity = sens.TwoRecordVectors(domain, np.asarray(DEMO_QUERY), args.sigma)
    spec = f"approx:epsilon={args.epsilon!r},delta={args.delta!r}"
    output: str | None = args.output
    if args.no_save:
        output = None
    elif output is None:  # the default file: keep an earlier run's file instead of failing
        output = DEMO_OUTPUT
        if Path(output).exists() and not args.force:
            ctx.warn(f"{output} exists and is kept (use --force to replace it, or -o FILE)")
            output = None
    res = run_design(
        ctx,
        meta=meta,
        sensitivity=sensitivity,
        budget_specs=[spec],
        weight=None,
        noise_floor=0.0,
        solver=args.solver,
        output=output,
        force=args.force,
        plot=args.plot,
        yes=bool(args.yes),
        dask=args.dask,
    )
    title = (
        f"dpopt demo: ideal denoiser at g = {DEMO_QUERY} on the 5 x 5 grid in [0,1]^2, "
        f"σ = {args.sigma:g}, (ε = {args.epsilon:g}, δ = {args.delta:g})-DP"
    )
    return _finish(ctx, args, res, title)


def _cmd_design(args: argparse.Namespace, ctx: Context) -> int:
    import numpy as np

    from dpopt.covariance import sensitivity as sens
    from dpopt.covariance.domains import FinitePoints

    if args.old_adjacency is not None:
        raise UsageError(
            "--adjacency was renamed --relation; accepted values: "
            + ", ".join(r.value for r in NeighbouringRelation)
        )
    if args.uniform_query and (args.query is not None or args.sigma is not None):
        raise UsageError("--uniform-query excludes --query and --denoiser-sigma")
    if not args.uniform_query and (args.query is None or args.sigma is None):
        raise UsageError("give --query and --denoiser-sigma, or --uniform-query")
    domain = parse_domain(args.domain, header=bool(args.header))
    from_file = isinstance(domain, FinitePoints)
    meta: dict[str, Any] = {
        "command": "design",
        "domain": args.domain if not Path(args.domain).exists() else str(Path(args.domain)),
        "relation": args.relation,
    }
    sensitivity: VectorSource | BoxTwoRecordSet
    if args.uniform_query:
        uq = sens.uniform_query_set(domain)
        if isinstance(uq, sens.EllipsoidDifferences):  # pragma: no cover - no ellipsoid spec
            raise UsageError("ellipsoid domains are not available from the command line")
        sensitivity = uq
        meta.update({"set": "uniform-query", "query": None, "sigma": None})
    else:
        query = parse_float_list("--query", args.query)
        if query.shape[0] != domain.dim:
            raise InvalidParameterError(
                "--query", args.query, f"must have {domain.dim} coordinates like the domain"
            )
        if not (args.sigma > 0 and np.isfinite(args.sigma)):
            raise InvalidParameterError("--denoiser-sigma", args.sigma,
                                        "must be a finite number > 0")
        sensitivity = sens.add_remove_set(domain, query, args.sigma)
        kind = "two-record-box" if isinstance(sensitivity, sens.BoxTwoRecordSet) else "two-record"
        meta.update({"set": kind, "query": query.tolist(), "sigma": float(args.sigma)})
    weight = read_matrix(args.weight) if args.weight is not None else None
    if weight is not None and weight.shape[0] != domain.dim:
        raise InvalidParameterError(
            str(args.weight), weight.shape, f"must be {domain.dim} x {domain.dim}"
        )
    if not (args.noise_floor >= 0 and np.isfinite(args.noise_floor)):
        raise InvalidParameterError("--noise-floor", args.noise_floor, "must be finite and >= 0")
    res = run_design(
        ctx,
        meta=meta,
        sensitivity=sensitivity,
        budget_specs=list(args.budget),
        weight=weight,
        noise_floor=float(args.noise_floor),
        solver=args.solver,
        output=args.output,
        force=args.force,
        rigorous=bool(args.rigorous),
        domain_points=domain.points if isinstance(domain, FinitePoints) else None,
        header=bool(args.header) if from_file else None,
        plot=args.plot,
        yes=bool(args.yes),
        dask=args.dask,
    )
    return _finish(ctx, args, res, f"dpopt design: domain {args.domain}")


def _cmd_verify(args: argparse.Namespace, ctx: Context) -> int:
    import os

    from certificates import errors
    from dpopt import verification

    path = Path(args.file)
    if not path.exists():
        raise UsageError(f"file not found: {path}")
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a certificate file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path} is not readable")
    result: dict[str, Any] = {"command": "verify", "file": str(path), "holds": False}
    try:
        with ctx.stage("re-checking"):
            v = verification.verify(path, rigorous=True if args.rigorous else None,
                                    dask=args.dask)
    except errors.CertificateError as exc:
        result["reason"] = " ".join(str(exc).split())
        if args.json:
            ctx.print(dump_json(result))
        else:
            ctx.print(f"{path}: certificate does NOT hold")
            ctx.print(f"  reason: {result['reason']}")
        return 1
    result.update({"holds": True, "kind": v.kind, "format": v.format, **v.summary})
    if args.json:
        ctx.print(dump_json(result))
        return 0
    ctx.print(f"{path}: {v.kind} certificate holds (re-checked from scratch)")
    for line in v.lines:
        ctx.print(f"  {line}")
    return 0


def _cmd_figures(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.figures import __main__ as registry

    figures: dict[str, tuple[str, str]] = registry.FIGURES
    if args.list or not args.names:
        if args.json:
            ctx.print(dump_json({"command": "figures", "figures": [
                {"name": n, "description": d} for n, (_, d) in figures.items()]}))
            return 0
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
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out-dir {out_dir} is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    from dpopt.parallel import dask_client

    failed: list[str] = []
    kept: list[str] = []
    written: dict[str, list[str]] = {}
    with dask_client(args.dask) as client:
        for name in ctx.progress(names, desc="figures", total=len(names)):
            paths = _run_one_figure(ctx, args, registry, name, out_dir, client, failed, kept)
            if paths is not None:
                written[name] = paths
    if args.json:
        ctx.print(dump_json({"command": "figures", "written": written, "kept": kept,
                             "failed": failed}))
    if failed:
        ctx.warn(f"{len(failed)} figure(s) failed: {', '.join(failed)}")
        return 1
    if kept:
        return 2
    return 0


def _run_one_figure(ctx: Context, args: argparse.Namespace, registry: Any, name: str,
                    out_dir: Path, client: Any, failed: list[str],
                    kept: list[str]) -> list[str] | None:
    """Run one figure into a fresh folder, then move its files into ``out_dir`` (an existing
    file is replaced only with --force); returns the written paths, or None (failed or kept)."""
    import contextlib
    import io
    import shutil
    import tempfile
    import time

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=out_dir) as tmp:
        chatter = io.StringIO()
        try:
            with contextlib.redirect_stdout(chatter):
                registry.run_figure(name, Path(tmp), client=client, progress=ctx.interactive)
        except Exception as exc:  # one broken figure must not stop the others
            ctx.warn(f"{name}: FAILED ({type(exc).__name__}: {exc})")
            failed.append(name)
            return None
        produced = sorted(p for p in Path(tmp).rglob("*") if p.is_file())
        clashes = [out_dir / p.relative_to(tmp) for p in produced
                   if (out_dir / p.relative_to(tmp)).exists()]
        if clashes and not args.force:
            ctx.warn(f"{name}: kept the existing {', '.join(str(c) for c in clashes)} "
                     "(use --force to replace them); nothing of this run was written")
            kept.append(name)
            return None
        told = chatter.getvalue().replace(str(Path(tmp)), str(out_dir)).rstrip()
        if told:  # the figure's own summary, with the final folder (stderr under --json)
            print(told, file=ctx.err if args.json else ctx.out)
        paths = []
        for p in produced:
            target = out_dir / p.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(p), target)
            paths.append(str(target))
    if not args.json:
        ctx.print(f"{name}: {', '.join(paths)} ({time.perf_counter() - t0:.1f} s)")
    return paths
