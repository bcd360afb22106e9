r"""Figures and tables of the α-Wasserstein Rényi Pufferfish experiments on the UCI datasets.

One PNG and one CSV per scenario of :data:`dpopt.experiments.rpp.SCENARIOS`, written under
``results/rpp/``; each figure carries its scenario as title. Panels:

(a) Laplace scale against ε at α = 2: α-W with the exact, likelihood-ratio and paper costs
    against the W∞ baselines (W∞/ε and the W∞-RPP calibration) and the tight scale (the least
    private scale, proven within 1 %, :func:`dpopt.pufferfish.calibrate_tight`; a band shows
    the 1 % bracket: proven private at its top, proven not private at its bottom);
(b) Laplace scale against α at ε = 1 (the α → 1 behaviour: exact cost shrinks, paper cost
    blows up);
(c) Gaussian σ against ε at α = 2 and α = 10, α-W and tight (with its bracket) against the
    W∞ baseline :math:`\sqrt{\alpha W_\infty^2/(2ε)}`;
(d) noise power ratio :math:`\sigma^2 / (2 b_{exact}^2)` against ε for each α, and the same
    ratio of the tight scales, :math:`\sigma_{tight}^2 / (2 b_{tight}^2)` (Gaussian better
    below 1).

Each dataset group also writes ``noise-power-<dataset>.csv``
(:func:`dpopt.experiments.rpp.noise_power_claims`): how often the Gaussian needs less noise
power than Laplace, against the paper's Laplace cost, the exact one and tight against tight.

Panel (b) also draws the tight scale against α (and at α = ∞ as a horizontal line).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpopt.experiments.rpp import (
    ALPHAS,
    EPSILONS,
    SCENARIOS,
    RPPScenarioSpec,
    noise_power_claims,
    read_sweep_table,
    rpp_sweep,
    summary_ratios,
    tightness,
    with_current_columns,
    write_table,
)

if TYPE_CHECKING:  # pragma: no cover - Dask is optional; matplotlib is imported when drawing
    from distributed import Client
    from matplotlib.figure import Figure

__all__ = [
    "DATASET_GROUPS",
    "plot_rpp_scenario",
    "rpp_adult",
    "rpp_figures",
    "rpp_heart",
    "rpp_scenario_figure",
    "rpp_student",
    "rpp_tightness",
]

#: Figure groups: one registry entry per dataset.
DATASET_GROUPS: tuple[str, ...] = ("adult", "heart", "student")


def _at(table: pd.DataFrame, *, alpha: float | None = None, epsilon: float | None = None
        ) -> pd.DataFrame:
    out = table
    if alpha is not None:
        out = out[np.isclose(out["alpha"], alpha) | ((out["alpha"] == alpha) & np.isinf(alpha))]
    if epsilon is not None:
        out = out[np.isclose(out["epsilon"], epsilon)]
    return out


def _nearest(values: Iterable[float], target: float) -> float:
    arr = np.array([v for v in values if np.isfinite(v)], dtype=float)
    return float(arr[np.argmin(np.abs(np.log(arr) - np.log(target)))])


def _tight_curve(ax: Any, x: pd.Series, tight: pd.Series, refuted: pd.Series | None,
                 style: str, label: str, **kwargs: Any) -> None:
    """The tight scale as a line, and its 1 % bracket as a band: at the line the scale is
    proven private, at the band's lower edge proven not private; the least private scale lies
    in between."""
    ok = np.isfinite(tight.to_numpy(dtype=float))
    if ok.sum() < 1:
        return
    (line,) = ax.plot(x[ok], tight[ok], style, label=label, **kwargs)
    if refuted is not None:
        low = refuted.to_numpy(dtype=float)
        band = ok & np.isfinite(low)
        if band.any():
            ax.fill_between(np.asarray(x)[band], low[band], np.asarray(tight)[band],
                            color=line.get_color(), alpha=0.3, lw=0)


def _col(frame: pd.DataFrame, name: str) -> pd.Series | None:
    return frame[name] if name in frame.columns else None


def plot_rpp_scenario(spec: RPPScenarioSpec, table: pd.DataFrame, path: Path) -> Path:
    """Draw the four-panel figure of one scenario from its sweep table and save it as PNG."""
    fig = rpp_scenario_figure(spec, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def rpp_scenario_figure(spec: RPPScenarioSpec, table: pd.DataFrame) -> Figure:
    r"""The four-panel figure of one scenario (:func:`plot_rpp_scenario` saves it).

    With the tight columns of ``rpp_sweep(..., tight="all")`` every panel carries the tight
    scales: (a)-(c) the least private scale at every grid point as a line with its 1 % bracket
    as a band (in (c) at both α = 2 and α = 10), (d) the tight-against-tight noise-power ratio
    for every finite α with its band :math:`[\sigma_r^2/2b_t^2, \sigma_t^2/2b_r^2]`
    (:math:`t`: proven private, :math:`r`: proven not private), which holds the ratio of the
    two true least scales.
    """
    from matplotlib.figure import Figure

    table = with_current_columns(table)  # a table of an earlier release names noise_std sigma
    fig = Figure(figsize=(11, 8.5), layout="constrained")
    axes = fig.subplots(2, 2)
    alpha_a = _nearest(table["alpha"], 2.0)
    eps_b = _nearest(table["epsilon"], 1.0)
    w_inf = float(table["w_inf"].iloc[0])

    ax = axes[0, 0]
    sub = _at(table, alpha=alpha_a).sort_values("epsilon")
    for col, label, style in [
        ("b_exact", "α-W, exact Rényi cost", "-o"),
        ("b_lr", "α-W, likelihood-ratio cost", "-s"),
        ("b_paper", "α-W, paper cost exp(α|z|/b)", "-^"),
        ("b_winf_rpp", "W∞-RPP (Pierquin et al.)", "--"),
        ("b_winf", "W∞/ε (Song et al.)", ":"),
    ]:
        if col in sub.columns:
            ax.plot(sub["epsilon"], sub[col], style, label=label, ms=4)
    if "b_tight" in sub.columns:
        _tight_curve(ax, sub["epsilon"], sub["b_tight"], _col(sub, "b_tight_refuted"), "-D",
                     "tight: least private scale, within 1 % (band: the bracket)", ms=4)
    ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="Laplace scale b",
           title=f"(a) Laplace, α = {alpha_a:g}")
    ax.legend(fontsize=8)

    ax = axes[0, 1]
    sub = _at(table, epsilon=eps_b)
    fin = sub[np.isfinite(sub["alpha"])].sort_values("alpha")
    for col, label, style in [
        ("b_exact", "α-W, exact cost", "-o"),
        ("b_paper", "α-W, paper cost", "-^"),
        ("b_winf_rpp", "W∞-RPP", "--"),
    ]:
        if col in fin.columns:
            ax.plot(fin["alpha"], fin[col], style, label=label, ms=4)
    if "b_tight" in fin.columns:
        _tight_curve(ax, fin["alpha"], fin["b_tight"], _col(fin, "b_tight_refuted"), "-D",
                     "tight, within 1 % (band: the bracket)", ms=4)
    ax.axhline(w_inf / eps_b, color="k", ls=":", label="W∞/ε (α = ∞)")
    pure = sub[np.isinf(sub["alpha"])]
    if "b_tight" in sub.columns and not pure.empty and np.isfinite(pure["b_tight"]).all():
        ax.axhline(float(pure["b_tight"].iloc[0]), color="k", ls="-.", lw=0.8,
                   label="tight, α = ∞")
    ax.set(xscale="log", yscale="log", xlabel="α", ylabel="Laplace scale b",
           title=f"(b) Laplace vs α, ε = {eps_b:g}")
    ax.legend(fontsize=8)

    ax = axes[1, 0]
    finite_alphas = sorted(a for a in table["alpha"].unique() if np.isfinite(a))
    shown = [a for a in (alpha_a, _nearest(finite_alphas, 10.0)) if a in finite_alphas]
    for alpha in dict.fromkeys(shown):
        sub = _at(table, alpha=alpha).sort_values("epsilon")
        (line,) = ax.plot(sub["epsilon"], sub["noise_std"], "-o", ms=4, label=f"α-W, α = {alpha:g}")
        ax.plot(sub["epsilon"], sub["sigma_winf"], "--", color=line.get_color(),
                label=f"W∞ baseline, α = {alpha:g}")
        if "sigma_tight" in sub.columns:
            _tight_curve(ax, sub["epsilon"], sub["sigma_tight"],
                         _col(sub, "sigma_tight_refuted"), ":D",
                         f"tight, within 1 % (band), α = {alpha:g}", color=line.get_color(),
                         ms=3)
    ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="Gaussian σ",
           title="(c) Gaussian noise")
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    has_tight = {"b_tight", "sigma_tight"} <= set(table.columns)
    for alpha in finite_alphas:
        sub = _at(table, alpha=alpha).sort_values("epsilon")
        (line,) = ax.plot(sub["epsilon"], sub["power_gauss"] / sub["power_laplace"], "-o",
                          ms=3, label=f"α = {alpha:g}, α-W exact costs")
        if has_tight:
            ratio = sub["sigma_tight"] ** 2 / (2.0 * sub["b_tight"] ** 2)
            ok = np.isfinite(ratio.to_numpy(dtype=float))
            if ok.any():
                ax.plot(sub["epsilon"][ok], ratio[ok], "--", color=line.get_color(), lw=1,
                        label=f"α = {alpha:g}, tight vs tight (band: the brackets)")
            if {"b_tight_refuted", "sigma_tight_refuted"} <= set(sub.columns):
                low = (sub["sigma_tight_refuted"] ** 2 / (2.0 * sub["b_tight"] ** 2)).to_numpy(
                    dtype=float)
                high = (sub["sigma_tight"] ** 2 / (2.0 * sub["b_tight_refuted"] ** 2)).to_numpy(
                    dtype=float)
                band = np.isfinite(low) & np.isfinite(high)
                if band.any():
                    ax.fill_between(sub["epsilon"].to_numpy(dtype=float)[band], low[band],
                                    high[band], color=line.get_color(), alpha=0.25, lw=0)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="σ² / (2 b²)",
           title="(d) noise power, Gaussian / Laplace (below 1: Gaussian less)")
    ax.legend(fontsize=6, ncol=2)

    fig.suptitle(f"{spec.title}  (W∞ = {w_inf:g})")
    return fig


def rpp_figures(
    dataset: str,
    out_dir: str | Path = "results",
    *,
    epsilons: Sequence[float] = EPSILONS,
    alphas: Sequence[float] = ALPHAS,
    progress: bool | None = True,
    client: Client | None = None,
) -> list[Path]:
    """Run the sweep for every scenario of ``dataset`` and write its CSV and PNG.

    ``client`` (a ``distributed.Client``) runs every (ε, α) cell of the sweeps as a Dask task
    (identical tables); ``progress`` draws a bar per scenario, on a terminal only. Returns the
    written paths (``results/rpp/<scenario>.csv`` and ``.png``).
    """
    if dataset not in DATASET_GROUPS:
        from dpopt.errors import InvalidParameterError

        raise InvalidParameterError("dataset", dataset, f"must be one of {DATASET_GROUPS}")
    out = Path(out_dir) / "rpp"
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for spec in SCENARIOS.values():
        if spec.dataset != dataset:
            continue
        table = rpp_sweep(spec, epsilons=epsilons, alphas=alphas, progress=progress,
                          tight="all", client=client)
        csv = write_table(table, out / f"{spec.key}.csv")
        written += [csv, plot_rpp_scenario(spec, table, out / f"{spec.key}.png")]
    return written


def _group(dataset: str, out_dir: str | Path, client: Any,
           progress: bool | None) -> list[Path]:
    paths = rpp_figures(dataset, out_dir, client=client, progress=progress)
    tables = [read_sweep_table(p) for p in paths if p.suffix == ".csv"]
    summary = Path(out_dir) / "rpp" / f"summary-{dataset}.csv"
    write_table(summary_ratios(tables, epsilon=1.0, alpha=2.0), summary)
    claims = Path(out_dir) / "rpp" / f"noise-power-{dataset}.csv"
    write_table(noise_power_claims(tables), claims)
    return [*paths, summary, claims]


def rpp_adult(out_dir: str | Path = "results", *, client: Client | None = None,
             progress: bool | None = True) -> list[Path]:
    """Registry entry ``rpp-adult``: the Adult scenarios (figures, tables, ε = 1, α = 2 summary).
    ``client``: the sweeps' cells as Dask tasks; ``progress``: bars on a terminal only."""
    return _group("adult", out_dir, client, progress)


def rpp_heart(out_dir: str | Path = "results", *, client: Client | None = None,
             progress: bool | None = True) -> list[Path]:
    """Registry entry ``rpp-heart``: the Heart Disease scenarios.
    ``client``: the sweeps' cells as Dask tasks; ``progress``: bars on a terminal only."""
    return _group("heart", out_dir, client, progress)


def rpp_student(out_dir: str | Path = "results", *, client: Client | None = None,
             progress: bool | None = True) -> list[Path]:
    """Registry entry ``rpp-student``: the Student Performance scenarios.
    ``client``: the sweeps' cells as Dask tasks; ``progress``: bars on a terminal only."""
    return _group("student", out_dir, client, progress)


def _tightness_of(key: str, epsilon: float, alpha: float) -> pd.DataFrame:
    return tightness(SCENARIOS[key], epsilon=epsilon, alpha=alpha)


def rpp_tightness(
    out_dir: str | Path = "results", *, epsilon: float = 1.0, alpha: float = 2.0,
    keys: Sequence[str] | None = None, client: Client | None = None, progress: bool | None = True,
) -> list[Path]:
    """Registry entry ``rpp-tightness``: certified α-W scale vs the certified tight scale vs W∞.

    Writes ``results/rpp/tightness.csv`` and ``tightness.png`` (one group of bars per scenario,
    Laplace and Gaussian panels, log scale). The tight scale is proven private and 0.99 times it
    is proven not private (:func:`dpopt.pufferfish.calibrate_tight`). ``client`` runs one Dask
    task per scenario (identical table); ``progress`` draws a bar on a terminal only.
    """
    from matplotlib.figure import Figure

    from dpopt.parallel import map_ordered

    chosen = list(SCENARIOS) if keys is None else list(keys)
    table = pd.concat(
        map_ordered(_tightness_of, chosen, client=client, args=(epsilon, alpha),
                    desc="tightness", progress=progress),
        ignore_index=True,
    )
    out = Path(out_dir) / "rpp"
    out.mkdir(parents=True, exist_ok=True)
    csv = write_table(table, out / "tightness.csv")
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    for ax, mech in zip(fig.subplots(1, 2), ("laplace", "gaussian"), strict=True):
        sub = table[table["mechanism"] == mech]
        x = np.arange(len(sub))
        for k, (col, label) in enumerate(
            [("tight", "tight: least scale (certified, 1 %)"), ("calibrated", "α-W (certified)"),
             ("winf_rpp", "W∞-RPP baseline")]
        ):  # fmt: skip
            # the tight bar's error bar is its 1 % bracket: down to the scale proven not private
            err = None if col != "tight" else [
                (sub["tight"] - sub["tight_refuted"]).fillna(0.0).to_numpy(dtype=float),
                np.zeros(len(sub))]
            ax.bar(x + (k - 1) * 0.27, sub[col], 0.27, label=label, yerr=err, capsize=2)
        ax.set_xticks(x, [s.replace("-", "\n", 1) for s in sub["scenario"]], fontsize=7)
        ax.set(yscale="log", ylabel="b" if mech == "laplace" else "σ",
               title=f"{mech.capitalize()} noise")  # fmt: skip
        ax.legend(fontsize=8)
    fig.suptitle(f"How tight is the α-W condition? All scenarios, ε = {epsilon:g}, α = {alpha:g}")
    png = out / "tightness.png"
    fig.savefig(png, dpi=110)
    return [csv, png]
