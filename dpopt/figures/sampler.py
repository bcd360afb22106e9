r"""Private sampling with the ideal denoiser: samples, per-step noise, quality against ε.

``make fig-sampler`` (``python -m dpopt.figures sampler``) writes

- ``sampler-samples.png``: the synthetic mixture, non-private samples (the exact ideal
  denoiser, which copies records), isotropic-noise and optimal-covariance private samples at the
  same budget, side by side;
- ``sampler-trajectory.png``: along one run, the per-step GDP share :math:`\mu_t = \sqrt{q_t}`
  and the error :math:`\operatorname{tr}(W\Sigma_t)` of the optimal design against the
  baselines at the same :math:`q_t`;
- ``sampler-quality.png`` / ``sampler-quality.csv``: energy distance to the private data and to
  a held-out split, and the median distance from a sample to its nearest private record, across
  a sweep of the run's budget, optimal against isotropic noise at equal budget, for Adult
  (age, hours-per-week), Heart (age, maximum heart rate) and the mixture;
- ``sampler-errors.csv``: the summed error :math:`\sum\operatorname{tr}(W\Sigma_t)` of each
  baseline over the optimal designs', per dataset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpopt.experiments.tables import write_table

if TYPE_CHECKING:
    from dpopt.diffusion.sampler import PrivateSamples

__all__ = ["MUS", "plot_quality", "plot_run", "quality_sweep", "sampler_figure"]

#: GDP parameters of the whole run in the sweep.
MUS: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0, 10000.0)


def _unit_grid(n: int = 20) -> Any:
    from dpopt.covariance.domains import Grid

    return Grid(np.zeros(2), np.ones(2), (n, n))


def plot_run(out: PrivateSamples, path: str | Path, *, data: np.ndarray | None = None) -> Path:
    """Draw a :class:`~dpopt.diffusion.sampler.PrivateSamples`: the samples (and, for the data
    holder's eyes only, ``data``) and the per-step error against the baselines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = out.record
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4.2))
    if data is not None:
        ax0.scatter(data[:, 0], data[:, 1], s=6, c="0.7", label="private records")
    ax0.scatter(out.samples[:, 0], out.samples[:, 1], s=10, c="C3", label="private samples")
    dom = rec["domain"]
    if dom["kind"] == "grid":
        lo, hi = dom["lower"], dom["upper"]
        ax0.add_patch(plt.Rectangle((lo[0], lo[1]), hi[0] - lo[0], hi[1] - lo[1], fill=False,
                                    ls="--", color="k", label="public domain"))
    ax0.set_title(f"{rec['samples']} samples, μ = {rec['totals']['gdp_mu']:.3g}-GDP")
    ax0.legend(loc="best", fontsize=8)
    _trajectory_axes(ax1, rec)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p


def _per_step(rec: dict[str, Any], key: str) -> np.ndarray:
    t = int(rec["steps"])
    vals = np.zeros(t)
    for r in rec["releases"]:
        vals[r["step"]] += r["errors"][key] / int(rec["samples"])
    return vals


def _trajectory_axes(ax: Any, rec: dict[str, Any]) -> None:
    steps = np.arange(int(rec["steps"]))
    for key, label, style in (("released", "optimal Σ_t", "-"),
                              ("isotropic_exact", "isotropic, exact sup", "--"),
                              ("isotropic_diameter", "isotropic, diameter", ":"),
                              ("uniform_query", "uniform-query Σ", "-.")):
        ax.semilogy(steps, _per_step(rec, key), style, label=label)
    ax.set_xlabel("step t (noisiest first)")
    ax.set_ylabel("mean tr(W Σ_t) per release")
    ax2 = ax.twinx()
    mu_t = np.sqrt(rec["split"]["per_step_bound"])
    ax2.plot(steps, mu_t, color="0.5", lw=0.8)
    ax2.set_ylim(0.0, 1.15 * float(np.max(mu_t)))
    ax2.set_ylabel("μ_t = √q_t (grey)")
    ax.legend(loc="best", fontsize=8)
    ax.set_title("noise along the trajectory")


def quality_sweep(name: str, mus: Sequence[float] = MUS, *, samples: int = 100,
                  steps: int = 10, seed: int = 0, grid: int = 20,
                  progress: bool = False,
                  splits: Sequence[str] = ("equal", "propagated")) -> pd.DataFrame:
    """Quality and memorisation of private samples of dataset ``name`` across run budgets.

    Rows: one per (μ, noise, split): optimal and isotropic noise with the equal split, optimal
    noise with every other split in ``splits``; plus a "nonprivate" and a "holdout" row;
    columns ``split``, ``mu``, ``epsilon`` (at δ = 1e-5), ``energy_train``, ``energy_holdout``,
    ``sliced_w``, ``median_nn`` (median distance from a sample to its nearest private record),
    ``inside`` (fraction of samples in the unit square), ``summed_error``, ``cpu_seconds``.
    """
    import warnings

    from dpopt.accounting.budgets import GDP, PrivacyReport
    from dpopt.diffusion.data import load_pair
    from dpopt.diffusion.quality import (
        energy_distance,
        nearest_record_distance,
        sliced_wasserstein,
    )
    from dpopt.diffusion.sampler import ClampWarning, sample_nonprivate, sample_private

    pair = load_pair(name, seed=seed, size=2000 if name == "adult" else None)
    dom = _unit_grid(grid)
    train = dom.snap(pair.train).records
    rows: list[dict[str, Any]] = []

    def measure(pts: np.ndarray) -> dict[str, float]:
        inside = np.all((pts >= 0) & (pts <= 1), axis=1)
        return {"energy_train": energy_distance(pts, train),
                "energy_holdout": energy_distance(pts, pair.holdout),
                "sliced_w": sliced_wasserstein(pts, train),
                "median_nn": float(np.median(nearest_record_distance(pts, train))),
                "inside": float(np.mean(inside))}

    ref = sample_nonprivate(train, samples=samples, steps=steps, rng=seed)
    rows.append({"dataset": name, "noise": "nonprivate", "split": "", "mu": math.inf,
                 "epsilon": math.inf,
                 "summed_error": 0.0, "cpu_seconds": 0.0, **measure(ref)})
    # the floor every sampler meets: the held-out split against the private data
    rows.append({"dataset": name, "noise": "holdout", "split": "", "mu": math.inf,
                 "epsilon": math.inf,
                 "summed_error": 0.0, "cpu_seconds": 0.0, **measure(pair.holdout)})
    runs = [("optimal", "equal"), ("isotropic", "equal")]
    runs += [("optimal", split) for split in splits if split != "equal"]
    for mu in mus:
        eps = float(PrivacyReport(mu * mu).epsilon(1e-5))
        for noise, split in runs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ClampWarning)
                out = sample_private(train, dom, GDP(mu=mu), samples=samples, steps=steps,
                                     noise=noise, rng=seed, progress=progress,  # type: ignore[arg-type]
                                     split=split)
            rows.append({"dataset": name, "noise": noise, "split": split, "mu": mu,
                         "epsilon": eps, "summed_error": out.errors["released"],
                         "cpu_seconds": out.seconds, **measure(out.samples)})
    return pd.DataFrame(rows)


def plot_quality(table: pd.DataFrame, path: str | Path) -> Path:
    """The quality-vs-ε figure from a :func:`quality_sweep` table (one column per dataset)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(table.dataset))
    fig, axes = plt.subplots(2, len(datasets), figsize=(4.6 * len(datasets), 7), squeeze=False)
    for j, name in enumerate(datasets):
        sub = table[table.dataset == name]
        split_of = sub.split if "split" in sub else pd.Series("equal", index=sub.index)
        for noise, split, style, label in (
                ("optimal", "equal", "o-", "optimal Σ_t"),
                ("isotropic", "equal", "s--", "isotropic"),
                ("optimal", "propagated", "^-", "optimal Σ_t, propagated split")):
            rows = sub[(sub.noise == noise) & (split_of == split)]
            if rows.empty:
                continue
            axes[0, j].loglog(rows.epsilon, rows.energy_holdout, style, label=label)
            axes[1, j].loglog(rows.epsilon, rows.median_nn, style, label=label)
        nonpriv = sub[sub.noise == "nonprivate"].iloc[0]
        hold = sub[sub.noise == "holdout"].iloc[0]
        axes[0, j].axhline(float(nonpriv.energy_holdout), ls=":", color="k",
                           label="non-private sampler")
        axes[0, j].axhline(float(hold.energy_train), ls="-.", color="g",
                           label="private data itself")
        axes[1, j].axhline(max(float(nonpriv.median_nn), 1e-4), ls=":", color="k",
                           label="non-private (≈ 0: copies)")
        axes[1, j].axhline(float(hold.median_nn), ls="-.", color="g",
                           label="held-out records")
        axes[0, j].set_title(f"{name}: energy distance to held-out data")
        axes[1, j].set_title(f"{name}: median distance to nearest record")
        axes[1, j].set_xlabel("ε of the run at δ = 1e-5")
        axes[0, j].legend(fontsize=7)
        axes[1, j].legend(fontsize=7)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p


def sampler_figure(out_dir: str | Path, *, progress: bool | None = None,
                   datasets: Sequence[str] = ("mixture", "heart", "adult"),
                   mus: Sequence[float] = MUS, samples: int = 100,
                   steps: int = 10, picture_samples: int = 200) -> list[Path]:
    """Write the sampler figures and tables into ``out_dir`` (see the module notes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpopt.accounting.budgets import GDP
    from dpopt.diffusion.data import load_pair
    from dpopt.diffusion.sampler import sample_nonprivate, sample_private

    show = bool(progress)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    dom = _unit_grid(20)
    # ---- samples side by side on the mixture
    pair = load_pair("mixture", seed=0)
    train = dom.snap(pair.train).records
    mu_pic = 1000.0
    runs = {noise: sample_private(train, dom, GDP(mu=mu_pic), samples=picture_samples,
                                  steps=steps,
                                  noise=noise, rng=1, progress=show)  # type: ignore[arg-type]
            for noise in ("isotropic", "optimal")}
    ref = sample_nonprivate(train, samples=picture_samples, steps=steps, rng=1)
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.9), sharex=True, sharey=True)
    panels = (("private records (snapped to the 20 x 20 grid)", train),
              ("non-private ideal denoiser (copies records)", ref),
              (f"isotropic noise, μ = {mu_pic:g}", runs["isotropic"].samples),
              (f"optimal Σ_t, μ = {mu_pic:g}", runs["optimal"].samples))
    for ax, (title, pts) in zip(axes, panels, strict=True):
        ax.scatter(pts[:, 0], pts[:, 1], s=5)
        ax.set_title(title, fontsize=9)
        ax.set_xlim(-0.5, 1.5)
        ax.set_ylim(-0.5, 1.5)
        ax.add_patch(plt.Rectangle((0, 0), 1, 1, fill=False, ls="--", color="k"))
    fig.tight_layout()
    p = out / "sampler-samples.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    written.append(p)
    # ---- per-step noise along the run
    fig, ax = plt.subplots(figsize=(6.5, 4))
    _trajectory_axes(ax, runs["optimal"].record)
    fig.tight_layout()
    p = out / "sampler-trajectory.png"
    fig.savefig(p, dpi=120)
    plt.close(fig)
    written.append(p)
    # ---- quality against the budget
    tables = [quality_sweep(name, mus, samples=samples, steps=steps, progress=show)
              for name in datasets]
    table = pd.concat(tables, ignore_index=True)
    p = out / "sampler-quality.csv"
    write_table(table, p)
    written.append(p)
    written.append(plot_quality(table, out / "sampler-quality.png"))
    # ---- summed error ratios at equal q_t, per dataset (one run each)
    rows_e = []
    for name in datasets:
        pr = load_pair(name, seed=0, size=2000 if name == "adult" else None)
        run = sample_private(dom.snap(pr.train).records, dom, GDP(mu=10.0), samples=samples,
                             steps=steps, rng=2, progress=show)
        rows_e.append({"dataset": name, "releases": run.releases,
                       "released": run.errors["released"], **{
                           f"{k}_over_optimal": v for k, v in run.ratios().items()
                           if k != "optimal"},
                       "releases_per_cpu_second": run.releases / run.seconds})
    p = out / "sampler-errors.csv"
    write_table(pd.DataFrame(rows_e), p)
    written.append(p)
    return written
