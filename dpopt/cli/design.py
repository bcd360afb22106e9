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

from dpopt.cli.common import (
    COMMON,
    UsageError,
    dump_json,
    format_float,
    parse_float_list,
    parse_spec,
    read_matrix,
    read_points,
    spec_float,
    spec_int,
)
from dpopt.errors import InvalidParameterError
from dpopt.relation import NeighbouringRelation, as_relation, replacement_sup

if TYPE_CHECKING:
    from certificates.problem import VectorSource
    from dpopt.accounting.budgets import PrivacyReport
    from dpopt.cli.common import Context

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
    "  grid:lo=0,hi=1,n=5,d=2    n equally spaced values per axis in [lo, hi]^d (n^d points)\n"
    "  box:lo=0,hi=1,d=3         the box [lo, hi]^d (uniform query only: its vertices)\n"
    "  points.csv | points.npy   one point per row (CSV: header optional, no missing values)\n"
)


def parse_domain(text: str) -> Any:
    """A domain from a spec (``grid:``/``box:``) or a CSV/NPY file of points."""
    from dpopt.covariance import domains
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
        epilog=(
            "examples:\n  dpopt verify design.json\n  dpopt verify design.json --json\n"
            "  dpopt verify design.json --rigorous   # interval proven despite rounding\n"
        ),
    )
    p.add_argument("file", metavar="FILE", help="design JSON file")
    p.add_argument(
        "--rigorous",
        action="store_true",
        help="account for every rounding error (exact arithmetic on the dual support)",
    )
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


#: Largest number of floats (count x d) of sensitivity vectors stored inside a design file;
#: beyond it the file stores a description and a sha256, and ``verify`` regenerates them.
MAX_STORED_FLOATS = 500_000

#: Tag of the JSON metadata the CLI puts in the certificate's vectors description.
META_TAG = "dpopt-cli-design/1"


def sensitivity_from_meta(meta: dict[str, Any]) -> Any:
    """Rebuild the sensitivity set a design file describes (domain spec, query, sigma)."""
    from dpopt.covariance import sensitivity as sens

    domain = parse_domain(str(meta["domain"]))
    if meta["set"] == "uniform-query":
        return sens.uniform_query_set(domain)
    if meta["set"] == "two-record":
        return sens.add_remove_set(domain, np.asarray(meta["query"], float), float(meta["sigma"]))
    raise UsageError(f"unknown sensitivity set {meta['set']!r} in the design file")


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
    bound = rep.bound
    return {
        "mahalanobis_bound": float(bound),
        "zcdp_rho": float(rep.zcdp_rho),
        "gdp_mu": float(rep.gdp_mu),
        "rdp": {f"{a:g}": float(rep.rdp_epsilon(a)) for a in (2.0, 8.0, 32.0)},
        "epsilon_for_delta": {f"{d:g}": float(rep.epsilon(d)) for d in (1e-5, 1e-6, 1e-8)},
    }


def _print_report(ctx: Context, rep: dict[str, Any], indent: str = "  ") -> None:
    f = format_float
    ctx.print(
        f"{indent}Mahalanobis sensitivity sup s^T Σ^-1 s <= {f(rep['mahalanobis_bound'])}:  "
        f"zCDP ρ = {f(rep['zcdp_rho'])},  GDP μ = {f(rep['gdp_mu'])}"
    )
    ctx.print(f"{indent}RDP ε_α: " + ", ".join(f"α={a}: {f(v)}" for a, v in rep["rdp"].items()))
    ctx.print(
        f"{indent}(ε, δ)-DP: "
        + ", ".join(f"δ={d}: ε={f(v)}" for d, v in rep["epsilon_for_delta"].items())
    )


def run_design(
    ctx: Context,
    *,
    meta: dict[str, Any],
    sensitivity: Any,
    budget_specs: list[str],
    weight: Any,
    noise_floor: float,
    solver: str,
    output: str | None,
    force: bool,
    rigorous: bool = False,
) -> dict[str, Any]:
    """Design, certify and (optionally) write; return the JSON-ready summary."""
    import json

    from dpopt.cli.account import parse_budgets
    from dpopt.covariance.design import design_covariance

    out_path = _check_output(output, force) if output is not None else None
    budget = parse_budgets(budget_specs, "design")
    relation = as_relation(meta["relation"])
    count, dim = int(sensitivity.count), int(sensitivity.dim)
    if count * dim <= MAX_STORED_FLOATS:
        vectors: Any = np.concatenate([b for _, b in sensitivity.chunks()], axis=0)
    else:
        vectors = sensitivity
    with ctx.stage(f"solving ({count} sensitivity vectors, d = {dim})"):
        design = design_covariance(
            vectors,
            budget,
            weight=weight,
            noise_floor=noise_floor,
            solver=solver,
            rigorous=rigorous,
            relation=relation,
        )
    cert = design.certificate
    summary: dict[str, Any] = {
        **meta,
        "budget": budget.describe(),
        "budget_bound": design.bound,
        "solver": design.solution.stats.solver,
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
    }
    if out_path is not None:
        file_meta = {
            "tag": META_TAG,
            **meta,
            "budget": budget.describe(),
            "budget_bound": design.bound,
            "budget_specs": list(budget_specs),
        }
        summary["sha256"] = design.save(
            out_path, description=json.dumps(file_meta, sort_keys=True), overwrite=force
        )
        summary["output"] = str(out_path)
    return summary


def _print_design(ctx: Context, res: dict[str, Any], title: str) -> None:
    f = format_float
    lo, up = res["certified_interval"]
    ctx.print(title)
    ctx.print(
        f"  sensitivity set: {res['set']} ({res['count']} vectors in R^{res['dim']}), "
        f"{res['relation']} relation; budget {res['budget']} -> q = {f(res['budget_bound'])}"
    )
    ctx.print(f"  total error tr(W Σ):   {res['total_error']:.8g}   (optimal covariance)")
    ctx.print(
        f"  isotropic baseline:    {res['isotropic_error']:.8g}   "
        f"(the optimal design has {res['improvement']:.4g}x less error)"
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
    cov = np.asarray(res["covariance"])
    rows = ["[" + ", ".join(f"{v: .6g}" for v in row) + "]" for row in cov]
    if cov.shape[0] <= 6:
        ctx.print("  covariance Σ:          " + ("\n" + " " * 25).join(rows))
    ctx.print("  privacy delivered (sensitivity sup of this Σ, safely rounded up):")
    _print_report(ctx, res["privacy"], indent="    ")
    if res["output"]:
        ctx.print(
            f"  wrote {res['output']} (sha256 {res['sha256'][:16]}...); "
            f"re-check with: dpopt verify {res['output']}"
        )


def _finish(ctx: Context, args: argparse.Namespace, res: dict[str, Any], title: str) -> int:
    if args.json:
        ctx.print(dump_json(res))
    else:
        _print_design(ctx, res, title)
    return 0


def _cmd_demo(args: argparse.Namespace, ctx: Context) -> int:
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
        raise InvalidParameterError("sigma", args.sigma, "must be a finite number > 0")
    sensitivity = sens.add_remove_set(domain, np.asarray(DEMO_QUERY), args.sigma)
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
    )
    title = (
        f"dpopt demo: ideal denoiser at g = {DEMO_QUERY} on the 5 x 5 grid in [0,1]^2, "
        f"σ = {args.sigma:g}, (ε = {args.epsilon:g}, δ = {args.delta:g})-DP"
    )
    return _finish(ctx, args, res, title)


def _cmd_design(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.covariance import sensitivity as sens

    if args.old_adjacency is not None:
        raise UsageError(
            "--adjacency was renamed --relation; accepted values: "
            + ", ".join(r.value for r in NeighbouringRelation)
        )
    if args.uniform_query and (args.query is not None or args.sigma is not None):
        raise UsageError("--uniform-query excludes --query and --sigma")
    if not args.uniform_query and (args.query is None or args.sigma is None):
        raise UsageError("give --query and --sigma, or --uniform-query")
    domain = parse_domain(args.domain)
    meta: dict[str, Any] = {
        "command": "design",
        "domain": args.domain if not Path(args.domain).exists() else str(Path(args.domain)),
        "relation": args.relation,
    }
    sensitivity: VectorSource
    if args.uniform_query:
        sensitivity = sens.uniform_query_set(domain)
        meta.update({"set": "uniform-query", "query": None, "sigma": None})
    else:
        query = parse_float_list("query", args.query)
        if query.shape[0] != domain.dim:
            raise InvalidParameterError(
                "query", args.query, f"must have {domain.dim} coordinates like the domain"
            )
        if not (args.sigma > 0 and np.isfinite(args.sigma)):
            raise InvalidParameterError("sigma", args.sigma, "must be a finite number > 0")
        sensitivity = sens.add_remove_set(domain, query, args.sigma)
        meta.update({"set": "two-record", "query": query.tolist(), "sigma": float(args.sigma)})
    weight = read_matrix(args.weight) if args.weight is not None else None
    if weight is not None and weight.shape[0] != domain.dim:
        raise InvalidParameterError(
            str(args.weight), weight.shape, f"must be {domain.dim} x {domain.dim}"
        )
    if not (args.noise_floor >= 0 and np.isfinite(args.noise_floor)):
        raise InvalidParameterError("noise_floor", args.noise_floor, "must be finite and >= 0")
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
    )
    return _finish(ctx, args, res, f"dpopt design: domain {args.domain}")


def _cmd_verify(args: argparse.Namespace, ctx: Context) -> int:
    import json

    from certificates import errors, io
    path = Path(args.file)
    if not path.exists():
        raise UsageError(f"file not found: {path}")
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a design file")
    try:
        with open(path, encoding="utf-8") as fh:
            content = json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not a JSON file ({exc})") from None
    if not isinstance(content, dict) or content.get("format") != io.FORMAT:
        raise UsageError(f"{path} is not a dpopt design file (format {io.FORMAT!r})")
    meta: dict[str, Any] = {}
    desc = (content.get("problem") or {}).get("vectors_description")
    if isinstance(desc, str):
        try:
            parsed = json.loads(desc)
            if isinstance(parsed, dict) and parsed.get("tag") == META_TAG:
                meta = parsed
        except json.JSONDecodeError:
            meta = {}
    result: dict[str, Any] = {"file": str(path), "holds": False}
    try:
        source = None
        if (content.get("problem") or {}).get("vectors") is None:
            if not meta:
                raise errors.CertificateError(
                    "the file does not store its sensitivity vectors and has no description "
                    "dpopt can regenerate them from"
                )
            with ctx.stage("regenerating sensitivity vectors"):
                source = sensitivity_from_meta(meta)
        with ctx.stage("re-checking"):
            cert = io.verify_file(path, source=source, rigorous=True if args.rigorous else None)
    except errors.CertificateError as exc:
        result["reason"] = " ".join(str(exc).split())
        if args.json:
            ctx.print(dump_json(result))
        else:
            ctx.print(f"{path}: certificate does NOT hold")
            ctx.print(f"  reason: {result['reason']}")
        return 1
    stored_bound = float(content["problem"]["bound"])
    guaranteed = replacement_sup(stored_bound, meta.get("relation", "add_remove"))
    result.update(
        {
            "holds": True,
            "certified": bool(cert.certified),
            "rigorous": bool(cert.rigorous),
            "interval": [float(cert.lower), float(cert.upper)],
            "gap": float(cert.gap),
            "primal_residual": float(cert.primal_residual),
            "bound": stored_bound,
            "design": {k: v for k, v in meta.items() if k != "tag"},
            "privacy": _report(guaranteed),
        }
    )
    if args.json:
        ctx.print(dump_json(result))
        return 0
    f = format_float
    ctx.print(f"{path}: certificate holds (re-checked from scratch)")
    if meta:
        what = meta.get("set", "?")
        extra = (
            f" at query {meta.get('query')} with σ = {meta.get('sigma')}"
            if what == "two-record"
            else ""
        )
        ctx.print(
            f"  design: {what} sensitivity set of domain {meta.get('domain')}{extra}, "
            f"{meta.get('relation')} relation, budget {meta.get('budget')}"
        )
    ctx.print(
        f"  Σ is strictly feasible: max_j s_j^T Σ^-1 s_j = {f(stored_bound)} x "
        f"(1 + {cert.primal_residual:.3g}) <= q = {f(stored_bound)}"
    )
    kind = "rigorous" if cert.rigorous else "floating-point"
    ctx.print(
        f"  optimal value in [{cert.lower:.10g}, {cert.upper:.10g}] ({kind}), relative gap "
        f"{cert.gap:.2e}" + ("" if cert.certified else "  (gap above the file's tolerance)")
    )
    ctx.print("  privacy guaranteed for the sensitivity set the file describes:")
    _print_report(ctx, result["privacy"], indent="    ")
    return 0


def _cmd_figures(args: argparse.Namespace, ctx: Context) -> int:
    import time

    from dpopt.figures import __main__ as registry
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
