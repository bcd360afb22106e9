"""``dpopt account`` and ``dpopt calibrate`` (private to :mod:`dpopt.cli`).

account
    ``convert``   — a budget (or several: the strictest wins) as a Mahalanobis bound q, and the
    complete guarantee of a Gaussian mechanism with that Mahalanobis sensitivity: RDP
    :math:`\\varepsilon_\\alpha = \\alpha q/2`, zCDP :math:`q/2`, :math:`\\sqrt q`-GDP, the exact
    (ε, δ) curve and mutual information.
    ``compose``   — exact GDP composition :math:`\\mu = \\sqrt{\\sum_i \\mu_i^2}`.
    ``subsample`` — the subsampled-Gaussian CLT (Poisson or uniform sampling); the
    result is an APPROXIMATION, not a guarantee, and is labelled so; the certified ε is printed
    beside it.
    ``dpsgd``     — the smallest certified DP-SGD noise multiplier (PLD / RDP), CLT beside it.
    ``schedule``  — the per-release Mahalanobis bound for a total (ε, δ) over T releases.
calibrate
    ``gaussian``   — σ of the Gaussian mechanism for (ε, δ) (Balle–Wang exact) or for
    any budget spec, given an ℓ2 sensitivity Δ: σ = Δ / √q.
    ``pufferfish`` — Rényi-Pufferfish calibration from a CSV with a secret column and a query
    column, via :mod:`dpopt.pufferfish`.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from dpopt.cli.common import COMMON, UsageError, dump_json, format_float
from dpopt.cli.options import add_renamed_option
from dpopt.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpopt.accounting.budgets import Budget
    from dpopt.cli.common import Context, Subparsers
    from dpopt.relation import SamplingScheme

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


def _number(text: str) -> float:
    """A command-line number (``inf`` and ``nan`` parse here; each option checks its range)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _positive(text: str) -> float:
    x = _number(text)
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return x


def _whole(text: str) -> int:
    x = _number(text)
    if not math.isfinite(x) or x != math.floor(x) or x < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return int(x)


def _rate(text: str) -> float:
    x = _positive(text)
    if x > 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return x


def _probability(text: str) -> float:
    x = _positive(text)
    if x >= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return x


def _nonneg(text: str) -> float:
    x = _number(text)
    if not (x >= 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return x


SAMPLING_HELP = (
    "how batches are drawn: poisson (every record independently with probability p, as "
    "Opacus' Poisson sampling; add/remove neighbours), without_replacement (exactly B records "
    "drawn afresh each step; replace-one neighbours, sensitivity 2C), full_batch (all records "
    "every step). 'shuffling' (one shuffle per epoch) is refused: it has no tight analysis. "
    "Required whenever the sampling rate is below 1 (never implied)"
)


def _sampling(text: str) -> str:
    """A ``--sampling`` value checked by :func:`dpopt.relation.as_sampling` (so the refusal of
    shuffling names the safe schemes); ``uniform`` is the old spelling of without_replacement."""
    import warnings

    from dpopt.relation import as_sampling

    if text == "uniform":
        warnings.warn("--sampling uniform is renamed --sampling without_replacement",
                      DeprecationWarning, stacklevel=2)
        text = "without_replacement"
    from dpopt.errors import DpoptError

    try:
        return as_sampling(text, "sampling").value
    except DpoptError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_sampling(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sampling", type=_sampling, default=None,
                   metavar="{poisson,without_replacement,full_batch}", help=SAMPLING_HELP)


def _scheme(args: argparse.Namespace, rate: float) -> SamplingScheme:
    """The ``--sampling`` scheme: required below rate 1 (the error lists the schemes and the
    data loaders they match); none given at rate 1 is the full batch."""
    from dpopt.relation import required_sampling

    return required_sampling(args.sampling, rate, "--sampling")


def _add_accountant(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--accountant", choices=("auto", "pld", "rdp", "gdp"), default="auto",
        help="which accountant may certify: auto (the tightest that applies), pld (pessimistic "
        "privacy loss distribution), rdp (Rényi DP), gdp (exact, no subsampling only)",
    )
    p.add_argument("--time-budget", type=_positive, default=10.0, metavar="SECONDS",
                   help="stop refining after this long and report the best certified answer "
                   "(default 10)")


def _interval(lo: float, hi: float) -> list[float] | None:
    return [lo, hi] if math.isfinite(lo) and math.isfinite(hi) else None


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


def add_account_parser(sub: Subparsers) -> None:
    """Register ``dpopt account`` and its subcommands."""
    acc = sub.add_parser(
        "account",
        parents=[COMMON],
        help="convert between RDP, zCDP, GDP, (ε, δ) and MI; composition, subsampling, DP-SGD",
        formatter_class=_F,
        description="Privacy accounting for Gaussian mechanisms.",
        epilog=(
            "examples:\n"
            "  dpopt account convert approx:epsilon=1,delta=1e-6\n"
            "  dpopt account convert rdp:alpha=8,epsilon=1 zcdp:rho=0.1 --delta 1e-5 --json\n"
            "  dpopt account compose 0.5 1 2 --delta 1e-5\n"
            "  dpopt account subsample --sampling poisson --rate 0.0042667 --noise-multiplier 1.3 "
            "--steps 3516\n"
            "  dpopt account dpsgd --dataset-size 60000 --batch-size 256 --epochs 60 "
            "--epsilon 3 --delta 1e-5 --sampling poisson\n"
            "  dpopt account schedule --epsilon 3 --delta 1e-5 --steps 1000 --rate 0.01 "
            "--sampling poisson\n"
        ),
    )
    acc.set_defaults(one_blas_thread=True)  # one-dimensional arrays: see cli.main
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
            "  poisson:             μ ≈ p sqrt(T (e^{1/σ²} - 1))\n"
            "  without_replacement:\n"
            "    μ ≈ sqrt(2) p sqrt(T) sqrt(e^{1/s²} Φ(1.5/s) + 3 Φ(-0.5/s) - 2)\n"
            "    with s = σ/2 (replace-one: the clipped sum moves by 2C)\n"
            "This is a central-limit APPROXIMATION, not a guarantee: it understates the privacy\n"
            "loss in the tails. Beside it: the certified ε(δ) and δ(ε) (pessimistic PLD / RDP,\n"
            "with a proven lower bound) and the subsampled mechanism's own RDP curve."
        ),
        epilog=(
            "examples:\n"
            "  dpopt account subsample --sampling poisson --rate 0.0042667 "
            "--noise-multiplier 1.3 --steps 3516\n"
            "  dpopt account subsample --sampling without_replacement --dataset-size 60000 "
            "--batch-size 256 --noise-multiplier 1.1 --epochs 60\n"
        ),
    )
    _add_sampling(subs)
    _add_accountant(subs)
    subs.add_argument("--rate", type=_probability, help="sampling rate p in (0, 1)")
    subs.add_argument("--batch-size", type=int, help="batch size B (with --dataset-size: p = B/N)")
    subs.add_argument("--dataset-size", type=int, help="dataset size N")
    add_renamed_option(subs, "--noise-multiplier", "--sigma", dest="sigma", required=True,
                       type=_positive, metavar="σ",
                       help="DP-SGD noise multiplier σ (noise std / clipping norm)")
    subs.add_argument("--steps", type=_whole, help="number of steps T (a whole number)")
    subs.add_argument("--epochs", type=_positive, help="epochs (T = ⌈epochs / p⌉, a whole number)")
    subs.add_argument(
        "--no-certified", action="store_true",
        help="skip the certified ε(δ) (pessimistic PLD / RDP) printed beside the CLT",
    )
    _report_options(subs)
    subs.set_defaults(handler=_cmd_subsample)

    _add_many_releases_parsers(asub)


def add_calibrate_parser(sub: Subparsers) -> None:
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
            "the exact analytic Gaussian mechanism of Balle and Wang (2018)."
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
            "the scale is found from an optimal-transport coupling of P_i and P_j."
        ),
        epilog=(
            "example (CSV with header 'group,value'):\n"
            "  dpopt calibrate pufferfish data.csv --secret group --query value --alpha 2 "
            "--epsilon 1 --noise laplace\n"
            "  dpopt calibrate pufferfish data.csv --secret group --query value --alpha 2 "
            "--epsilon 1 --tight --certificate tight.json\n"
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
    pf.add_argument(
        "--tight",
        action="store_true",
        help="also compute the least private scale within --tol, proven by two-sided bounds on "
        "the true divergence (1-D query; Laplace or Gaussian)",
    )
    pf.add_argument(
        "--tol", type=_positive, default=0.01, help="relative tolerance of --tight (default 0.01)"
    )
    pf.add_argument(
        "--certificate",
        metavar="FILE",
        help="with --tight: write the JSON certificate there (never overwrites)",
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
    from dpopt.accounting.report_json import report_dict

    return report_dict(rep, alphas=alphas, deltas=deltas, epsilons=epsilons,
                       approximate=approximate)


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


def parse_budgets(specs: list[str], command: str) -> Budget:
    """Parse budget specs with :func:`dpopt.accounting.budgets.parse_budget`; several ->
    ``AllOf``."""
    from dpopt.accounting.budgets import AllOf, parse_budget

    parsed = []
    for spec in specs:
        try:
            parsed.append(parse_budget(spec))
        except InvalidParameterError as exc:  # name the option the user typed
            if exc.name != "spec":
                raise
            option = "budget" if command == "account" else "--budget"
            raise InvalidParameterError(option, spec, exc.requirement) from None
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
    if not math.isfinite(mu * mu):
        raise InvalidParameterError(
            "mus", args.mus, f"compose to μ = {mu:.3g}, whose square overflows double precision: "
            "the guarantee is vacuous (no finite ε at any δ < 1)")
    result = {
        "command": "account compose",
        "mus": list(args.mus),
        "mu": mu,
        "report": report_dict(mu * mu, args),
    }
    return _emit(ctx, args, result, f"Composition of μ = {args.mus}: μ = {format_float(mu)}-GDP")


def _cmd_subsample(args: argparse.Namespace, ctx: Context) -> int:
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
    if args.steps is not None:
        steps = int(args.steps)
    else:  # a whole number of steps: ⌈E / p⌉ in exact arithmetic
        from fractions import Fraction

        if args.rate is not None:
            steps = max(math.ceil(Fraction(args.epochs) / Fraction(rate)), 1)
        else:
            from dpopt.accounting import dpsgd

            size, batch = int(args.dataset_size or 0), int(args.batch_size or 0)
            steps = dpsgd.dpsgd_steps(size, batch, args.epochs)
    from dpopt.accounting import composition as comp
    from dpopt.accounting.dpsgd import _clt_mu, accountants_for
    scheme = _scheme(args, rate)
    if scheme.value == "full_batch":
        raise InvalidParameterError("sampling", args.sampling,
                                    "'full_batch' is not subsampled: use 'account convert' or "
                                    "'account compose'")
    if not math.isfinite(1.0 / (args.sigma * args.sigma)):
        raise InvalidParameterError("noise_multiplier", args.sigma,
                                    "is too small: 1/σ² overflows double precision")
    mu = _clt_mu(rate, args.sigma, steps, scheme.value)
    if not math.isfinite(mu * mu):
        raise InvalidParameterError(
            "noise_multiplier", args.sigma, f"gives a CLT μ = {mu:.3g} whose square overflows "
            "double precision: the CLT approximation is meaningless here")
    result: dict[str, Any] = {
        "command": "account subsample",
        "approximate": True,
        "sampling": scheme.value,
        "relation": str(scheme.relation),
        "sampling_rate": rate,
        "noise_multiplier": float(args.sigma),
        "steps": steps,
        "mu": mu,
        "report": report_dict(mu * mu, args, approximate=True),
    }
    if not args.no_certified:
        from dpopt.accounting.subsampled_rdp import subsampled_gaussian_rdp

        run = comp.GaussianSteps.from_noise_multiplier(args.sigma, steps, rate, scheme)
        accs = accountants_for(args.accountant)
        alphas = [a for a in (args.alpha or DEFAULT_ALPHAS) if a > 1]
        with ctx.stage("certified accounting"):
            eps_rows = []
            for d in (args.delta or DEFAULT_DELTAS):
                r = comp.composed_epsilon(run, d, accountants=accs)
                eps_rows.append({"delta": d, "epsilon": r.value, "accountant": r.accountant,
                                 "certified_interval": r.certified_interval(),
                                 "lower_accountant": r.lower_accountant,
                                 "candidates": r.candidates})
            delta_rows = []
            for e in (args.epsilon or DEFAULT_EPSILONS):
                r = comp.composed_delta(run, e, accountants=accs)
                delta_rows.append({"epsilon": e, "delta": r.value, "accountant": r.accountant,
                                   "certified_interval": r.certified_interval(),
                                   "lower_accountant": r.lower_accountant})
            per_step = subsampled_gaussian_rdp(run.bound, rate, alphas, scheme.value)
            rdp_rows = [{"alpha": a, "epsilon": float(steps * v) if math.isfinite(v) else None}
                        for a, v in zip(alphas, per_step, strict=True)]
        result["certified"] = eps_rows
        result["certified_delta"] = delta_rows
        result["certified_rdp"] = rdp_rows
    rc = _emit(
        ctx,
        args,
        result,
        f"CLT Gaussian standing in for the subsampled mechanism ({scheme.describe()}, "
        f"p={rate:.6g}, σ={args.sigma:g}, T={steps}): μ ≈ {format_float(mu)}",
    )
    if not args.json and "certified" in result:
        f = format_float
        ctx.print(f"Certified ({scheme.describe()}; never optimistic: tightest of pessimistic "
                  "PLD / RDP, with a proven lower bound):")
        for r in result["certified"]:
            iv = r["certified_interval"]
            rng = f"in [{f(iv[0])}, {f(iv[1])}]" if iv else "unbounded"
            ctx.print(f"  δ={r['delta']:g}: ε <= {f(r['epsilon'])}  ({rng}; {r['accountant']}, "
                      f"lower {r['lower_accountant']})")
        for r in result["certified_delta"]:
            iv = r["certified_interval"]
            rng = f"in [{f(iv[0], 4)}, {f(iv[1], 4)}]" if iv else "unbounded"
            ctx.print(f"  ε={r['epsilon']:g}: δ <= {f(r['delta'], 4)}  ({rng}; "
                      f"{r['accountant']}, lower {r['lower_accountant']})")
        ctx.print("  RDP ε_α of the subsampled mechanism (T steps): "
                  + ", ".join(f"α={f(r['alpha'], 4)}: "
                              + (f(r['epsilon']) if r['epsilon'] is not None else "inf")
                              for r in result["certified_rdp"]))
    return rc


def safe_sigma(sensitivity: float, bound: float) -> float:
    """Smallest double σ with (Δ/σ)² <= q exactly (rational check), i.e. σ >= Δ/√q.

    Rounding in ``Δ / sqrt(q)`` may land one ulp low, which would under-noise; the result is
    nudged up until the inequality holds in exact arithmetic.
    """
    from certificates.rounding import div_sqrt_up

    return div_sqrt_up(sensitivity, bound)


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
            tight=args.tight,
            tol=args.tol,
            certificate=args.certificate,
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


# ----------------------------------------------------------------------------- many releases
# ``account dpsgd`` and ``account schedule``: composed, subsampled Gaussian releases certified
# by the tighter of a pessimistic PLD (dp-accounting) and RDP (exact GDP without subsampling).

_MANY_EPILOG = (
    "accountants (the tightest valid upper bound is reported, with its name):\n"
    "  gdp-exact  no subsampling: T releases compose exactly to μ² = Σ q_t (exact curve)\n"
    "  pld        pessimistic privacy loss distribution (Google's dp-accounting), δ >= 1e-12\n"
    "  rdp        Rényi DP of the subsampled Gaussian (Mironov, Talwar & Zhang), any δ\n"
)


def _add_many_releases_parsers(asub: Subparsers) -> None:
    dp = asub.add_parser(
        "dpsgd",
        parents=[COMMON],
        help="the smallest certified DP-SGD noise multiplier for (ε, δ)",
        formatter_class=_F,
        description=(
            "Smallest noise multiplier σ (noise std / clipping norm) such that DP-SGD with\n"
            "batches of B out of N records (Poisson rate p = B/N, or fixed batches without\n"
            "replacement) over T = ⌈E·N/B⌉ steps (or exactly --steps) is certified (ε, δ)-DP.\n"
            "Beside it: the central-limit (CLT) σ, labelled APPROXIMATE, and the certified ε of\n"
            "that σ — how much the CLT understates the privacy loss."
        ),
        epilog=_MANY_EPILOG + "\nexamples:\n"
        "  dpopt account dpsgd --dataset-size 60000 --batch-size 256 --epochs 60 "
        "--epsilon 3 --delta 1e-5 --sampling poisson\n"
        "  dpopt account dpsgd --dataset-size 50000 --batch-size 500 --steps 2000 "
        "--epsilon 1 --delta 1e-5 --sampling without_replacement --json\n",
    )
    dp.add_argument("--dataset-size", type=_whole, required=True, help="N (records)")
    dp.add_argument("--batch-size", type=_whole, required=True, help="B (expected batch size)")
    dp.add_argument("--epochs", type=_positive, help="E > 0: T = ⌈E·N/B⌉ steps")
    dp.add_argument("--steps", type=_whole, help="exact whole number of steps T (instead)")
    dp.add_argument("--epsilon", type=_positive, required=True, help="target ε > 0")
    dp.add_argument("--delta", type=_probability, required=True, help="target δ in (0, 1)")
    _add_sampling(dp)
    _add_accountant(dp)
    dp.add_argument("--discretization", type=_positive, default=1e-4,
                    help="PLD discretisation interval (default 1e-4; larger is faster, looser)")
    dp.add_argument("--json", action="store_true", help="print JSON instead of text")
    dp.set_defaults(handler=_cmd_dpsgd)

    sc = asub.add_parser(
        "schedule",
        parents=[COMMON],
        help="per-release Mahalanobis bound q for a total (ε, δ) over T (subsampled) releases",
        formatter_class=_F,
        description=(
            "The largest per-release Mahalanobis bound q (sup_s s^T Σ^-1 s <= q) such that T\n"
            "releases, each on a subsample of rate p, are certified (ε, δ)-DP in total; feed q\n"
            "to the covariance designer (Python: Schedule(ApproxDP(ε, δ), steps=T,\n"
            "sampling_rate=p, sampling=...) is a budget for design_covariance). Below rate 1\n"
            "--sampling is required."
        ),
        epilog=_MANY_EPILOG + "\nexamples:\n"
        "  dpopt account schedule --epsilon 3 --delta 1e-5 --steps 1000 --rate 0.01 "
        "--sampling poisson\n"
        "  dpopt account schedule --epsilon 1 --delta 1e-6 --steps 50       # exact, no sampling\n",
    )
    sc.add_argument("--epsilon", type=_nonneg, required=True, help="total ε >= 0")
    sc.add_argument("--delta", type=_probability, required=True, help="total δ in (0, 1)")
    sc.add_argument("--steps", type=_whole, required=True, help="number of releases T")
    sc.add_argument("--rate", type=_rate, default=1.0, help="sampling rate p in (0, 1] (1)")
    _add_sampling(sc)
    _add_accountant(sc)
    sc.add_argument("--discretization", type=_positive, default=1e-4,
                    help="PLD discretisation interval (default 1e-4)")
    sc.add_argument("--json", action="store_true", help="print JSON instead of text")
    sc.set_defaults(handler=_cmd_schedule)


def _cmd_dpsgd(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.accounting import dpsgd
    from dpopt.relation import as_sampling

    if (args.steps is None) == (args.epochs is None):
        raise UsageError("give exactly one of --epochs and --steps")
    if args.batch_size <= args.dataset_size:
        _scheme(args, args.batch_size / args.dataset_size)  # named before any work
    with ctx.stage("calibrating the noise multiplier"):
        cal = dpsgd.dpsgd_noise_multiplier(
            dataset_size=args.dataset_size, batch_size=args.batch_size, epochs=args.epochs,
            steps=args.steps, epsilon=args.epsilon, delta=args.delta, sampling=args.sampling,
            discretization=args.discretization, accountant=args.accountant,
            time_budget=args.time_budget,
            progress=None if ctx.interactive else False,  # no bar into logs, pipes or -q
            epsilon_interval=args.json,  # the text shows σ's interval, not the ε one
        )
    scheme = as_sampling(cal.sampling)
    result = {
        "command": "account dpsgd",
        "dataset_size": args.dataset_size,
        "batch_size": args.batch_size,
        "steps": cal.steps,
        "sampling": scheme.value,
        "relation": str(scheme.relation),
        "sampling_rate": cal.sampling_rate,
        "epsilon": cal.epsilon,
        "delta": cal.delta,
        "noise_multiplier": cal.noise_multiplier,
        "certified_interval": _interval(cal.noise_multiplier_lower, cal.noise_multiplier),
        "relative_width": cal.relative_width,
        "accountant": cal.accountant,
        "lower_accountant": cal.lower_accountant,
        "certified_epsilon": cal.certified_epsilon,
        "certified_epsilon_interval": _interval(cal.epsilon_lower, cal.certified_epsilon),
        "note": cal.note,
        "clt": {
            "approximate": True,
            "noise_multiplier": cal.clt_noise_multiplier,
            "epsilon_claimed_at_certified_sigma": cal.clt_epsilon_at_certified,
            "certified_epsilon_at_clt_sigma": cal.epsilon_at_clt_sigma,
            "understatement": cal.clt_understatement,
        },
    }
    if args.json:
        ctx.print(dump_json(result))
        return 0
    f = format_float
    ctx.print(
        f"DP-SGD: N={args.dataset_size}, B={args.batch_size}, T={cal.steps} steps, "
        f"{scheme.describe()}, p={cal.sampling_rate:.6g}, "
        f"target (ε, δ) = ({cal.epsilon:g}, {cal.delta:g})"
    )
    ctx.print(f"  noise multiplier σ     {cal.noise_multiplier:.6g}   "
              f"(certified by {cal.accountant}: ε <= {f(cal.certified_epsilon)})")
    ctx.print(f"  certified interval     [{cal.noise_multiplier_lower:.6g}, "
              f"{cal.noise_multiplier:.6g}]   (the exact smallest σ lies in it; width "
              f"{100 * cal.relative_width:.2g}%, lower end by {cal.lower_accountant})")
    if cal.note:
        ctx.print(f"  note: {cal.note}")
    if cal.sampling_rate < 1.0:
        ctx.print(f"  CLT σ [APPROXIMATE]    {cal.clt_noise_multiplier:.6g}   (certified ε of this "
                  f"σ: {f(cal.epsilon_at_clt_sigma)}; {dpsgd._excess(cal.clt_understatement)})")
        ctx.print(f"  CLT ε at the certified σ [APPROXIMATE]  {f(cal.clt_epsilon_at_certified)}")
    return 0


def _cmd_schedule(args: argparse.Namespace, ctx: Context) -> int:
    from dpopt.accounting import composition as comp
    from dpopt.accounting.dpsgd import accountants_for

    scheme = _scheme(args, args.rate)
    if scheme.value == "full_batch" and args.rate != 1.0:
        raise InvalidParameterError("rate", args.rate, "must be 1 with --sampling full_batch")
    accs = accountants_for(args.accountant)
    with ctx.stage("searching the per-release bound"):
        cal = comp.calibrate_noise(args.epsilon, args.delta, args.steps, args.rate, scheme,
                                   discretization=args.discretization, accountants=accs,
                                   time_budget=args.time_budget,
                                   progress=None if ctx.interactive else False)
        run = comp.GaussianSteps(cal.bound, args.steps, args.rate, scheme)
        # on the grid the search finished on (its PLD is cached); the ε interval's lower end
        # only where it is printed
        check = comp.composed_epsilon(run, args.delta, discretization=cal.discretization,
                                      accountants=cal.checking_accountants(accs),
                                      two_sided=args.json)
    q = cal.bound
    result = {
        "command": "account schedule",
        "epsilon": args.epsilon,
        "delta": args.delta,
        "steps": args.steps,
        "sampling_rate": args.rate,
        "sampling": scheme.value,
        "relation": str(scheme.relation),
        "mahalanobis_bound": q,
        "mahalanobis_bound_interval": (None if cal.refuted_bound is None
                                       else [q, cal.refuted_bound]),
        "noise_multiplier": cal.noise_multiplier,
        "noise_std_per_sensitivity": 1.0 / math.sqrt(q),
        "certified_interval": _interval(cal.noise_multiplier_lower, cal.noise_multiplier),
        "accountant": cal.accountant,
        "certified_epsilon": check.value,
        "certified_epsilon_interval": check.certified_interval(),
        "candidates": check.candidates,
        "note": cal.note,
    }
    if args.json:
        ctx.print(dump_json(result))
        return 0
    ctx.print(f"({args.epsilon:g}, {args.delta:g})-DP over {args.steps} releases, "
              + scheme.describe()
              + ("" if args.rate == 1.0 else f", sampling rate {args.rate:g}") + ":")
    rel = "add/remove" if scheme.relation.value == "add_remove" else "replace-one"
    ctx.print(f"  per-release Mahalanobis bound q   {format_float(q)}   (over the "
              f"{rel} relation; noise std / sensitivity 1/√q = "
              f"{1.0 / math.sqrt(q):.6g})")
    ctx.print(f"  noise multiplier per clipping norm C   {cal.noise_multiplier:.6g}   "
              f"(interval [{cal.noise_multiplier_lower:.6g}, {cal.noise_multiplier:.6g}])")
    ctx.print(f"  certified by {cal.accountant}: ε <= {format_float(check.value)}")
    if cal.note:
        ctx.print(f"  note: {cal.note}")
    return 0
