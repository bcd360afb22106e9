"""``dpopt account`` and ``dpopt calibrate`` (private to :mod:`dpopt.cli`).

account
    ``convert``   — a budget (or several: the strictest wins) as a Mahalanobis bound q, and the
    complete guarantee of a Gaussian mechanism with that Mahalanobis sensitivity: RDP
    :math:`\\varepsilon_\\alpha = \\alpha q/2`, zCDP :math:`q/2`, :math:`\\sqrt q`-GDP, the exact
    (ε, δ) curve and mutual information (MATH.md §4.1–4.4, §5.4).
    ``compose``   — exact GDP composition :math:`\\mu = \\sqrt{\\sum_i \\mu_i^2}` (MATH.md §5.2).
    ``subsample`` — the subsampled-Gaussian CLT (Poisson or uniform sampling, MATH.md §5.3); the
    result is an APPROXIMATION, not a guarantee, and is labelled so.
calibrate
    ``gaussian``   — σ of the Gaussian mechanism for (ε, δ) (Balle–Wang exact, MATH.md §4.2) or for
    any budget spec, given an ℓ2 sensitivity Δ: σ = Δ / √q.
    ``pufferfish`` — Rényi-Pufferfish calibration from a CSV with a secret column and a query
    column (MATH.md §2–3), via :mod:`dpopt.pufferfish`.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from dpopt.cli.common import COMMON, UsageError, dump_json, format_float
from dpopt.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpopt.cli.common import Context

__all__ = ["add_account_parser", "add_calibrate_parser"]

_F = argparse.RawDescriptionHelpFormatter

DEFAULT_ALPHAS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
DEFAULT_DELTAS = (1e-5, 1e-6, 1e-8)
DEFAULT_EPSILONS = (0.5, 1.0, 2.0, 4.0)

BUDGET_HELP = (
    "budget specs (several --budget / arguments, or joined with '&': the strictest wins):\n"
    "  approx:epsilon=1,delta=1e-6     (ε, δ)-DP, exact Gaussian curve (Balle-Wang); alias dp\n"
    "  rdp:alpha=8,epsilon=1           Rényi DP of order alpha ('rdp:alpha=2;8,epsilon=.5;1'\n"
    "                                  for several orders: quote it in a shell)\n"
    "  zcdp:rho=0.5                    zero-concentrated DP\n"
    "  gdp:mu=1                        Gaussian DP\n"
    "  midp:kappa=0.1                  mutual-information DP (nats, binary records); alias mi\n"
)


# ----------------------------------------------------------------------------- argument parsers


def _positive(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return x


def _probability(text: str) -> float:
    x = _positive(text)
    if x >= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return x


def _nonneg(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (x >= 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return x


def _report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--delta",
        type=_probability,
        action="append",
        metavar="D",
        help=f"report ε(δ) at this δ (repeatable; default {', '.join(map(str, DEFAULT_DELTAS))})",
    )
    p.add_argument(
        "--epsilon",
        type=_nonneg,
        action="append",
        metavar="E",
        help=f"report δ(ε) at this ε (repeatable; default {', '.join(map(str, DEFAULT_EPSILONS))})",
    )
    p.add_argument(
        "--alpha",
        type=_positive,
        action="append",
        metavar="A",
        help="report RDP ε_α at this order α > 1 (repeatable; default "
        f"{', '.join(map(str, DEFAULT_ALPHAS))})",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def add_account_parser(sub: Any) -> None:
    """Register ``dpopt account`` and its subcommands."""
    acc = sub.add_parser(
        "account",
        parents=[COMMON],
        help="convert between RDP, zCDP, GDP, (ε, δ) and MI; GDP composition and subsampling",
        formatter_class=_F,
        description="Privacy accounting for Gaussian mechanisms.",
        epilog=(
            "examples:\n"
            "  dpopt account convert approx:epsilon=1,delta=1e-6\n"
            "  dpopt account convert rdp:alpha=8,epsilon=1 zcdp:rho=0.1 --delta 1e-5 --json\n"
            "  dpopt account compose 0.5 1 2 --delta 1e-5\n"
            "  dpopt account subsample --sampling poisson --rate 0.0042667 --sigma 1.3 "
            "--steps 3516\n"
        ),
    )
    asub = acc.add_subparsers(dest="account_command", metavar="SUBCOMMAND")
    asub.required = True

    conv = asub.add_parser(
        "convert",
        parents=[COMMON],
        help="a budget as a Mahalanobis bound and every equivalent guarantee",
        formatter_class=_F,
        description=(
            "Turn one or more budgets into the Mahalanobis bound q a Gaussian mechanism must\n"
            "meet (sup over sensitivity vectors s of s^T Σ^-1 s <= q), then report everything a\n"
            "Gaussian mechanism with that sensitivity guarantees: RDP ε_α = α q / 2,\n"
            "zCDP ρ = q/2, GDP μ = sqrt(q), the exact (ε, δ) curve and the mutual information."
        ),
        epilog=BUDGET_HELP + "\nexamples:\n"
        "  dpopt account convert gdp:mu=1 --delta 1e-5            # ε(1e-5) = 4.37718\n"
        "  dpopt account convert approx:epsilon=1,delta=1e-6 rdp:alpha=8,epsilon=1\n",
    )
    conv.add_argument("budgets", nargs="+", metavar="BUDGET", help="budget spec(s), see below")
    _report_options(conv)
    conv.set_defaults(handler=_cmd_convert)

    comp = asub.add_parser(
        "compose",
        parents=[COMMON],
        help="exact composition of GDP mechanisms: μ = sqrt(Σ μ_i²)",
        formatter_class=_F,
        description=(
            "Compose μ_i-GDP mechanisms (exact, Dong-Roth-Su): the result is sqrt(Σ μ_i²)-GDP;\n"
            "then report its guarantees as 'convert' does."
        ),
        epilog="example:\n  dpopt account compose 0.5 1 2          # μ = 2.29129\n",
    )
    comp.add_argument("mus", nargs="+", type=_nonneg, metavar="MU", help="the μ_i (>= 0)")
    _report_options(comp)
    comp.set_defaults(handler=_cmd_compose)

    subs = asub.add_parser(
        "subsample",
        parents=[COMMON],
        help="subsampled Gaussian mechanism via the GDP central limit theorem (approximate)",
        formatter_class=_F,
        description=(
            "T steps of a Gaussian mechanism with noise multiplier σ on a subsample of rate p:\n"
            "  poisson: μ ≈ p sqrt(T (e^{1/σ²} - 1))\n"
            "  uniform: μ ≈ sqrt(2) p sqrt(T) sqrt(e^{1/σ²} Φ(1.5/σ) + 3 Φ(-0.5/σ) - 2)\n"
            "This is a central-limit APPROXIMATION, not a guarantee: it understates the privacy\n"
            "loss in the tails (MATH.md §5.3). Use an RDP or PLD accountant for guarantees."
        ),
        epilog=(
            "examples:\n"
            "  dpopt account subsample --rate 0.0042667 --sigma 1.3 --steps 3516\n"
            "  dpopt account subsample --dataset-size 60000 --batch-size 256 --sigma 1.1 "
            "--epochs 60\n"
        ),
    )
    subs.add_argument(
        "--sampling",
        choices=("poisson", "uniform"),
        default="poisson",
        help="Poisson sampling or uniform sampling without replacement (default poisson)",
    )
    subs.add_argument("--rate", type=_probability, help="sampling rate p in (0, 1)")
    subs.add_argument("--batch-size", type=int, help="batch size B (with --dataset-size: p = B/N)")
    subs.add_argument("--dataset-size", type=int, help="dataset size N")
    subs.add_argument("--sigma", type=_positive, required=True, help="noise multiplier σ")
    subs.add_argument("--steps", type=_positive, help="number of steps T")
    subs.add_argument("--epochs", type=_positive, help="epochs (T = epochs / p)")
    _report_options(subs)
    subs.set_defaults(handler=_cmd_subsample)


def add_calibrate_parser(sub: Any) -> None:
    """Register ``dpopt calibrate`` and its subcommands."""
    cal = sub.add_parser(
        "calibrate",
        parents=[COMMON],
        help="noise scale for a budget: Gaussian σ, or Pufferfish calibration from a CSV",
        formatter_class=_F,
        description="Calibrate the noise of a mechanism to a privacy budget.",
        epilog=(
            "examples:\n"
            "  dpopt calibrate gaussian --epsilon 1 --delta 1e-5 --sensitivity 1\n"
            "  dpopt calibrate pufferfish data.csv --secret group --query value --alpha 2 "
            "--epsilon 1\n"
        ),
    )
    csub = cal.add_subparsers(dest="calibrate_command", metavar="SUBCOMMAND")
    csub.required = True

    g = csub.add_parser(
        "gaussian",
        parents=[COMMON],
        help="σ of the Gaussian mechanism for (ε, δ) or a budget spec",
        formatter_class=_F,
        description=(
            "Smallest σ such that adding N(0, σ² I) to a query of ℓ2 sensitivity Δ meets the\n"
            "budget: σ = Δ / sqrt(q) with q the budget's Mahalanobis bound. For (ε, δ) this is\n"
            "the exact analytic Gaussian mechanism of Balle & Wang (2018), MATH.md §4.2."
        ),
        epilog=BUDGET_HELP + "\nexamples:\n"
        "  dpopt calibrate gaussian --epsilon 1 --delta 1e-5 --sensitivity 1    # σ = 3.73063\n"
        "  dpopt calibrate gaussian --budget rdp:alpha=8,epsilon=1 --sensitivity 2 --json\n",
    )
    g.add_argument("--epsilon", type=_nonneg, help="ε >= 0 (with --delta)")
    g.add_argument("--delta", type=_probability, help="δ in (0, 1) (with --epsilon)")
    g.add_argument(
        "--budget", action="append", metavar="SPEC", help="budget spec (repeatable) instead"
    )
    g.add_argument(
        "--sensitivity", type=_positive, default=1.0, help="ℓ2 sensitivity Δ > 0 (default 1)"
    )
    g.add_argument("--json", action="store_true", help="print JSON instead of text")
    g.set_defaults(handler=_cmd_calibrate_gaussian)

    pf = csub.add_parser(
        "pufferfish",
        parents=[COMMON],
        help="Rényi-Pufferfish noise scale from a CSV with a secret and a query column",
        formatter_class=_F,
        description=(
            "Calibrate additive noise for (α, ε)-Rényi Pufferfish privacy. The CSV rows are\n"
            "samples (x = query value, s = secret); each secret value s_i defines the conditional\n"
            "law P_i of the query. Every pair of secrets must satisfy D_α(P_i*N || P_j*N) <= ε;\n"
            "the scale is found from an optimal-transport coupling of P_i and P_j (MATH.md §2-3)."
        ),
        epilog=(
            "example (CSV with header 'group,value'):\n"
            "  dpopt calibrate pufferfish data.csv --secret group --query value --alpha 2 "
            "--epsilon 1 --noise laplace\n"
        ),
    )
    pf.add_argument("data", metavar="CSV", help="CSV file with a header row")
    pf.add_argument("--secret", required=True, metavar="COL", help="column holding the secret")
    pf.add_argument(
        "--query",
        required=True,
        metavar="COL[,COL..]",
        help="column(s) holding the query value (several: a vector query)",
    )
    pf.add_argument(
        "--prior", metavar="COL", help="column indexing the priors θ (default: one prior)"
    )
    pf.add_argument("--alpha", type=_positive, required=True, help="Rényi order α > 1")
    pf.add_argument("--epsilon", type=_positive, required=True, help="ε > 0")
    pf.add_argument(
        "--noise", choices=("laplace", "gaussian"), default="laplace", help="noise family"
    )
    pf.add_argument(
        "--cost-form",
        choices=("exact", "ratio", "paper"),
        default="exact",
        help="Laplace cost: exact Rényi moment (default, tightest), likelihood-ratio bound, or "
        "the paper's form (reproduction only)",
    )
    pf.add_argument("--json", action="store_true", help="print JSON instead of text")
    pf.set_defaults(handler=_cmd_calibrate_pufferfish)


# ----------------------------------------------------------------------------- reports


def report_dict(
    bound: float,
    args: argparse.Namespace,
    *,
    approximate: bool = False,
) -> dict[str, Any]:
    """Everything a Gaussian mechanism with Mahalanobis sensitivity ``bound`` guarantees."""
    from dpopt.accounting.budgets import privacy_report

    rep = privacy_report(bound)
    alphas = [a for a in (args.alpha or DEFAULT_ALPHAS)]
    for a in alphas:
        if a <= 1:
            raise InvalidParameterError("alpha", a, "must be > 1")
    deltas = list(args.delta or DEFAULT_DELTAS)
    epsilons = list(args.epsilon or DEFAULT_EPSILONS)
    out: dict[str, Any] = {
        "approximate": approximate,
        "mahalanobis_bound": float(bound),
        "zcdp_rho": float(rep.zcdp_rho),
        "gdp_mu": float(rep.gdp_mu),
        "rdp": [{"alpha": a, "epsilon": float(rep.rdp_epsilon(a))} for a in alphas],
        "epsilon_for_delta": [{"delta": d, "epsilon": float(rep.epsilon(d))} for d in deltas],
        "delta_for_epsilon": [{"epsilon": e, "delta": float(rep.delta(e))} for e in epsilons],
        "mi_nats": float(rep.mi_nats),
    }
    return out


def render_report(ctx: Context, rep: dict[str, Any], title: str) -> None:
    """Print a report dict as aligned text."""
    f = format_float
    label = (
        "  [APPROXIMATE: central-limit approximation, not a guarantee]"
        if rep["approximate"]
        else ""
    )
    ctx.print(f"{title}{label}")
    ctx.print(f"  Mahalanobis bound q   {f(rep['mahalanobis_bound'])}   (sup_s s^T Σ^-1 s <= q)")
    ctx.print(f"  zCDP ρ                {f(rep['zcdp_rho'])}")
    ctx.print(f"  GDP μ                 {f(rep['gdp_mu'])}")
    ctx.print(
        "  RDP ε_α               "
        + ", ".join(f"α={f(r['alpha'], 4)}: {f(r['epsilon'])}" for r in rep["rdp"])
    )
    ctx.print(
        "  (ε, δ): ε(δ)          "
        + ", ".join(f"δ={r['delta']:g}: ε={f(r['epsilon'])}" for r in rep["epsilon_for_delta"])
    )
    ctx.print(
        "  (ε, δ): δ(ε)          "
        + ", ".join(f"ε={r['epsilon']:g}: δ={f(r['delta'], 4)}" for r in rep["delta_for_epsilon"])
    )
    ctx.print(f"  mutual information    {f(rep['mi_nats'])} nats (binary records)")


def _emit(ctx: Context, args: argparse.Namespace, result: dict[str, Any], title: str) -> int:
    if args.json:
        ctx.print(dump_json(result))
    else:
        render_report(ctx, result["report"], title)
    return 0


# ----------------------------------------------------------------------------- commands


def parse_budgets(specs: list[str], command: str) -> Any:
    """Parse budget specs with :func:`dpopt.accounting.budgets.parse_budget`; several ->
    ``AllOf``."""
    from dpopt.accounting.budgets import AllOf, parse_budget

    parsed = [parse_budget(s) for s in specs]
    return parsed[0] if len(parsed) == 1 else AllOf(*parsed)


def _cmd_convert(args: argparse.Namespace, ctx: Context) -> int:
    budget = parse_budgets(args.budgets, "account")
    bound = float(budget.mahalanobis_bound())
    result = {
        "command": "account convert",
        "budgets": list(args.budgets),
        "budget": budget.describe(),
        "report": report_dict(bound, args),
    }
    return _emit(ctx, args, result, f"Budget {budget.describe()}")


def _cmd_compose(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.accounting import gdp
    mu = float(gdp.compose(*args.mus))
    if mu == 0.0:
        raise InvalidParameterError("mus", args.mus, "at least one μ must be > 0")
    result = {
        "command": "account compose",
        "mus": list(args.mus),
        "mu": mu,
        "report": report_dict(mu * mu, args),
    }
    return _emit(ctx, args, result, f"Composition of μ = {args.mus}: μ = {format_float(mu)}-GDP")


def _cmd_subsample(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.accounting import gdp
    if args.rate is not None:
        if args.batch_size is not None or args.dataset_size is not None:
            raise UsageError("give either --rate or --batch-size with --dataset-size, not both")
        rate = float(args.rate)
    else:
        if args.batch_size is None or args.dataset_size is None:
            raise UsageError("give --rate, or --batch-size together with --dataset-size")
        if not 0 < args.batch_size < args.dataset_size:
            raise InvalidParameterError(
                "batch_size", args.batch_size, f"must be in (0, dataset_size={args.dataset_size})"
            )
        rate = args.batch_size / args.dataset_size
    if (args.steps is None) == (args.epochs is None):
        raise UsageError("give exactly one of --steps and --epochs")
    steps = float(args.steps) if args.steps is not None else float(args.epochs) / rate
    fn = gdp.clt_mu_poisson if args.sampling == "poisson" else gdp.clt_mu_uniform
    mu = float(fn(rate, args.sigma, steps))
    result = {
        "command": "account subsample",
        "approximate": True,
        "sampling": args.sampling,
        "rate": rate,
        "sigma": float(args.sigma),
        "steps": steps,
        "mu": mu,
        "report": report_dict(mu * mu, args, approximate=True),
    }
    return _emit(
        ctx,
        args,
        result,
        f"Subsampled Gaussian ({args.sampling}, p={rate:.6g}, σ={args.sigma:g}, T={steps:.6g}): "
        f"μ ≈ {format_float(mu)}",
    )


def safe_sigma(sensitivity: float, bound: float) -> float:
    """Smallest double σ with (Δ/σ)² <= q exactly (rational check), i.e. σ >= Δ/√q.

    Rounding in ``Δ / sqrt(q)`` may land one ulp low, which would under-noise; the result is
    nudged up until the inequality holds in exact arithmetic.
    """
    from fractions import Fraction

    sigma = sensitivity / math.sqrt(bound)
    while Fraction(sensitivity) ** 2 > Fraction(bound) * Fraction(sigma) ** 2:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def _cmd_calibrate_gaussian(args: argparse.Namespace, ctx: Context) -> int:
    have_ed = args.epsilon is not None or args.delta is not None
    if have_ed and args.budget:
        raise UsageError("give either --epsilon/--delta or --budget, not both")
    if args.budget:
        budget = parse_budgets(args.budget, "calibrate")
        bound = float(budget.mahalanobis_bound())
        sigma = safe_sigma(args.sensitivity, bound)
        source: dict[str, Any] = {"budgets": list(args.budget)}
    else:
        if args.epsilon is None or args.delta is None:
            raise UsageError("give --epsilon and --delta (or --budget SPEC)")
        from dpopt.accounting import gdp
        sigma = float(gdp.gaussian_sigma(args.epsilon, args.delta, args.sensitivity))
        bound = (args.sensitivity / sigma) ** 2
        source = {"epsilon": args.epsilon, "delta": args.delta}
    result = {
        "command": "calibrate gaussian",
        **source,
        "sensitivity": float(args.sensitivity),
        "sigma": sigma,
        "mahalanobis_bound": bound,
    }
    if args.json:
        ctx.print(dump_json(result))
    else:
        what = ", ".join(args.budget) if args.budget else f"ε={args.epsilon:g}, δ={args.delta:g}"
        ctx.print(f"Gaussian mechanism for {what}, ℓ2 sensitivity Δ = {args.sensitivity:g}:")
        ctx.print(
            f"  σ = {sigma:.10g}   (noise N(0, σ² I); Mahalanobis bound q = (Δ/σ)² = "
            f"{format_float(bound)})"
        )
    return 0


def _cmd_calibrate_pufferfish(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.cli.pufferfish import calibrate_csv

    if args.alpha <= 1:
        raise InvalidParameterError("alpha", args.alpha, "must be > 1")
    query = [c.strip() for c in args.query.split(",") if c.strip()]
    if not query:
        raise UsageError("--query needs at least one column name")
    with ctx.stage("calibrating"):
        result = calibrate_csv(
            args.data,
            secret=args.secret,
            query=query,
            prior=args.prior,
            alpha=args.alpha,
            epsilon=args.epsilon,
            noise=args.noise,
            form=args.cost_form,
        )
    lines = result.pop("lines")
    result = {"command": "calibrate pufferfish", "data": str(args.data), **result}
    if args.json:
        ctx.print(dump_json(result))
    else:
        ctx.print(
            f"Rényi-Pufferfish calibration (α={args.alpha:g}, ε={args.epsilon:g}, "
            f"{args.noise} noise), secret '{args.secret}', query '{args.query}':"
        )
        for line in lines:
            ctx.print(f"  {line}")
    return 0 if result["certified"] else 1
