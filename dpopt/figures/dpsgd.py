r"""Many releases, one budget: DP-SGD accounting and the run-design gain.

(a) ε at δ = 1e-5 against the number of steps of one DP-SGD schedule (Poisson rate p = B/N,
noise multiplier σ) by three accountants: the central-limit approximation of Bu, Dong, Long & Su
("Deep Learning with Gaussian Differential Privacy") — APPROXIMATE, it understates the loss — and
two certified upper bounds: the subsampled-Gaussian RDP (Mironov, Talwar & Zhang) and the
pessimistic PLD of Google's ``dp-accounting``.

(b) Total error of T denoiser releases along a diffusion sampling run under one (ε, δ) budget
(:func:`dpopt.covariance.run_design.design_run`): the optimal split of the composed budget with
optimal covariances, the equal split with optimal covariances, and isotropic noise with the equal
split.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dpopt.experiments.tables import write_table

__all__ = ["dpsgd_epsilon_table", "dpsgd_figure", "run_gain_table"]

#: The schedule of panel (a): N = 60000, B = 256 (p = 256/60000), σ = 1.1, up to 60 epochs.
DATASET, BATCH, SIGMA, DELTA = 60000, 256, 1.1, 1e-5
STEPS: tuple[int, ...] = (100, 300, 1000, 2344, 4688, 9375, 14063)
RUN_STEPS: tuple[int, ...] = (2, 4, 6, 8, 12)


def dpsgd_epsilon_table(steps: Sequence[int] = STEPS, *, sigma: float = SIGMA,
                        rate: float = BATCH / DATASET, delta: float = DELTA,
                        discretization: float = 1e-4) -> pd.DataFrame:
    """ε(δ) per step count under Poisson sampling: CLT (approximate), RDP and PLD (certified)."""
    from dpopt.accounting.composition import GaussianSteps, composed_epsilon
    from dpopt.accounting.gdp import clt_mu_poisson, epsilon_for_delta
    from dpopt.errors import ApproximationWarning

    rows = []
    for t in steps:
        run = GaussianSteps.from_noise_multiplier(sigma, int(t), rate, "poisson")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ApproximationWarning)
            mu = float(clt_mu_poisson(rate, sigma, int(t)))
        res = composed_epsilon(run, delta, accountants=("pld", "rdp"),
                               discretization=discretization)
        rows.append({
            "steps": int(t),
            "clt_approximate": float(epsilon_for_delta(delta, mu)),
            "rdp": res.candidates["rdp"],
            "pld": res.candidates["pld"],
        })
    return pd.DataFrame(rows)


def run_gain_table(run_steps: Sequence[int] = RUN_STEPS, *, epsilon: float = 1.0,
                   delta: float = 1e-5, grid: int = 5, data_size: int = 10,
                   seed: int = 0) -> pd.DataFrame:
    """Total error of a T-step denoiser run: optimal split, equal split, isotropic."""
    from dpopt.accounting.budgets import ApproxDP
    from dpopt.covariance.domains import Grid
    from dpopt.covariance.run_design import design_run
    from dpopt.diffusion.trajectory import diffusion_run

    domain = Grid(np.zeros(2), np.ones(2), (grid, grid))
    rng = np.random.default_rng(seed)
    data = domain.points[rng.choice(domain.size, min(data_size, domain.size), replace=False)]
    rows = []
    for t in run_steps:
        ex = diffusion_run(domain, data, int(t), seed=seed)
        run = design_run(ex.sets, ex.weights, ApproxDP(epsilon, delta))
        rows.append({
            "steps": int(t),
            "optimal_split": run.value,
            "certified_lower": run.lower,
            "equal_split": run.equal_split_value,
            "isotropic_equal_split": run.isotropic_value,
        })
    return pd.DataFrame(rows)


def dpsgd_figure(out_dir: str | Path = "results", *, steps: Sequence[int] = STEPS,
                 run_steps: Sequence[int] = RUN_STEPS, discretization: float = 1e-4
                 ) -> list[Path]:
    """Registry entry ``dpsgd``: CSVs + PNG under ``results/dpsgd/``."""
    from matplotlib.figure import Figure

    acc = dpsgd_epsilon_table(steps, discretization=discretization)
    gain = run_gain_table(run_steps)
    out = Path(out_dir) / "dpsgd"
    out.mkdir(parents=True, exist_ok=True)
    csv1, csv2 = out / "dpsgd-epsilon.csv", out / "run-design-gain.csv"
    write_table(acc, csv1)
    write_table(gain, csv2)

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(acc["steps"], acc["clt_approximate"], ":^", label="CLT (APPROXIMATE, not a bound)")
    ax1.plot(acc["steps"], acc["rdp"], "--s", label="RDP (certified)")
    ax1.plot(acc["steps"], acc["pld"], "-o", label="pessimistic PLD (certified)")
    ax1.set(xscale="log", xlabel="steps T", ylabel=f"ε at δ = {DELTA:g}",
            title=f"(a) DP-SGD, p = {BATCH}/{DATASET}, σ = {SIGMA}")  # fmt: skip
    ax1.legend()
    x = np.arange(len(gain))
    ax2.bar(x - 0.27, gain["isotropic_equal_split"], 0.27, label="isotropic, equal split")
    ax2.bar(x, gain["equal_split"], 0.27, label="optimal Σ, equal split")
    ax2.bar(x + 0.27, gain["optimal_split"], 0.27, label="optimal Σ, optimal split")
    ratio = gain["equal_split"] / gain["optimal_split"]
    ax2.set(xticks=x, xticklabels=[f"T={t}\n(x{r:.2f})" for t, r in zip(gain["steps"], ratio,
                                                                        strict=True)],
            yscale="log", ylabel="total error of the sample",
            title="(b) denoiser along a sampling run, (1, 1e-5)-DP in total")  # fmt: skip
    ax2.legend(fontsize=8)
    fig.suptitle("Many releases, one budget", fontsize=10)
    png = out / "dpsgd.png"
    fig.savefig(png, dpi=110)
    if not math.isfinite(float(acc["pld"].iloc[-1])):  # pragma: no cover - δ is 1e-5
        raise RuntimeError("PLD accountant returned inf at delta = 1e-5")
    return [csv1, csv2, png]
