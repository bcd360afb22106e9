r"""Optimal against isotropic Gaussian covariance for the ideal denoiser (theory page).

The release is the ideal diffusion denoiser's posterior mean :math:`m_g(D)` at a fixed query
:math:`g` and noise level :math:`\sigma`, for datasets in a finite grid domain
:math:`K \subset \mathbb{R}^d`. Its add/remove sensitivity set is the set of two-record vectors
:math:`t_g(x, y)`, :math:`x, y \in K` (the two-record theorem of the theory page;
:func:`dpopt.covariance.sensitivity.add_remove_set`).
For each ε of an (ε, δ)-DP budget the Mahalanobis bound is :math:`q^*(\varepsilon, \delta)` (exact
Balle–Wang curve) and :func:`dpopt.covariance.design.design_covariance` returns the
certified
least total variance :math:`\min \operatorname{tr}\Sigma` subject to
:math:`t^\top\Sigma^{-1}t \le q^*` (the covariance program); the isotropic baseline is
:math:`c I` with :math:`c = \max_t |t|^2 / q^*`, total variance :math:`d\,c`.

Both totals scale as :math:`1/q^*(\varepsilon,\delta)`, so their ratio does not depend on ε; it
depends on the shape of the domain (an elongated box leaves the isotropic noise wasted on its short
axes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from certificates.validate import as_float_array, as_scalar
from dpopt.experiments.tables import write_table

if TYPE_CHECKING:  # pragma: no cover - Dask is optional
    from distributed import Client

__all__ = ["DenoiserSetup", "denoiser_covariance_figure", "denoiser_sweep"]

#: ε grid of the figure.
EPSILONS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True)
class DenoiserSetup:
    """The figure's default setting: an elongated 3-D box grid, one query, one σ, δ = 1e-5.

    Attributes
    ----------
    upper : tuple of float
        The domain is the grid on ``[0, upper[0]] x ... x [0, upper[d-1]]``.
    shape : tuple of int
        Grid points per axis.
    query : tuple of float
        The query point :math:`g`.
    sigma : float
        Diffusion noise level :math:`\\sigma` of the denoiser.
    delta : float
        δ of the (ε, δ)-DP budget.
    """

    upper: tuple[float, ...] = (1.0, 0.5, 0.2)
    shape: tuple[int, ...] = (6, 4, 3)
    query: tuple[float, ...] = (0.5, 0.25, 0.1)
    sigma: float = 0.3
    delta: float = 1e-5

    def describe(self) -> str:
        box = " x ".join(f"[0, {u:g}]" for u in self.upper)
        grid = "x".join(str(s) for s in self.shape)
        return f"K = {grid} grid on {box}, g = {self.query}, σ = {self.sigma:g}, δ = {self.delta:g}"


def _design_row(epsilon: float, vectors: Any, delta: float) -> dict[str, Any]:
    """One ε of the sweep: the certified design and its isotropic baseline."""
    from dpopt.accounting.budgets import ApproxDP
    from dpopt.covariance.design import design_covariance

    design = design_covariance(vectors, ApproxDP(epsilon, delta))
    row: dict[str, Any] = {
        "epsilon": epsilon,
        "bound": design.bound,
        "optimal": design.value,
        "isotropic": design.isotropic_value,
        "improvement": design.improvement,
        "lower": design.certificate.lower,
        "certified": design.certified,
    }
    for i, v in enumerate(np.diag(design.covariance)):
        row[f"var_{i}"] = float(v)
    return row


def denoiser_sweep(
    setup: DenoiserSetup | None = None, epsilons: Sequence[float] = EPSILONS, *,
    client: Client | None = None, progress: bool | None = False,
) -> pd.DataFrame:
    """Certified optimal and isotropic total variance for each ε.

    ``client`` (a ``distributed.Client``) designs every ε as one Dask task (the sensitivity set
    is sent once; identical table); ``progress`` draws a bar on a terminal only.

    Returns
    -------
    pandas.DataFrame
        Columns ``epsilon, bound, optimal, isotropic, improvement, lower, certified`` and
        ``var_0 .. var_{d-1}`` (diagonal of the optimal covariance).
    """
    from dpopt.covariance import add_remove_set
    from dpopt.covariance.domains import Grid
    from dpopt.parallel import map_ordered

    st = DenoiserSetup() if setup is None else setup
    eps = as_float_array("epsilons", list(epsilons), ndim=1, low=0.0)
    upper = as_float_array("upper", list(st.upper), ndim=1, low=0.0)
    grid = Grid(np.zeros_like(upper), upper, st.shape)
    vectors = add_remove_set(grid, list(st.query), as_scalar("sigma", st.sigma, low=0.0))
    rows = map_ordered(_design_row, [float(e) for e in eps], client=client,
                       args=(vectors, st.delta), desc="denoiser designs", progress=progress)
    return pd.DataFrame(rows)


def denoiser_covariance_figure(
    out_dir: str | Path = "results",
    *,
    setup: DenoiserSetup | None = None,
    epsilons: Sequence[float] = EPSILONS,
    client: Client | None = None,
    progress: bool | None = True,
) -> list[Path]:
    """Registry entry ``denoiser-covariance``: CSV + PNG under ``results/denoiser/``
    (``client``: one Dask task per ε; ``progress``: a bar on a terminal only)."""
    from matplotlib.figure import Figure

    st = DenoiserSetup() if setup is None else setup
    table = denoiser_sweep(st, epsilons, client=client, progress=progress)
    out = Path(out_dir) / "denoiser"
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "denoiser-covariance.csv"
    write_table(table, csv)

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(table["epsilon"], table["isotropic"], "--s", label="isotropic c·I")
    ax1.plot(table["epsilon"], table["optimal"], "-o", label="optimal Σ (certified)")
    ax1.set(xscale="log", yscale="log", xlabel="ε", ylabel="total variance tr Σ",
            title="(a) total noise variance vs ε")  # fmt: skip
    ax1.legend()
    k = int(np.argmin(np.abs(np.log(table["epsilon"].to_numpy()))))
    row = table.iloc[k]
    d = len(st.upper)
    opt = [float(row[f"var_{i}"]) for i in range(d)]
    iso = float(row["isotropic"]) / d
    x = np.arange(d)
    ax2.bar(x - 0.2, [iso] * d, 0.4, label="isotropic")
    ax2.bar(x + 0.2, opt, 0.4, label="optimal")
    ax2.set(xticks=x, xticklabels=[f"axis {i} (side {u:g})" for i, u in enumerate(st.upper)],
            ylabel="variance", title=f"(b) per-axis variance at ε = {row['epsilon']:g} "
            f"(improvement x{row['improvement']:.3g})")  # fmt: skip
    ax2.legend()
    fig.suptitle(f"Ideal denoiser, (ε, δ)-DP Gaussian noise: {st.describe()}", fontsize=10)
    png = out / "denoiser-covariance.png"
    fig.savefig(png, dpi=110)
    return [csv, png]
