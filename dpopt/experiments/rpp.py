r"""α-Wasserstein Rényi Pufferfish experiments on the UCI datasets (Ding, Yang and Zhang,
"α-Wasserstein Mechanism for Rényi Pufferfish Privacy").

Scenarios
---------
A scenario is a dataset, a **secret** attribute :math:`S` of one individual (a binary sensitive
attribute: sex, income class, disease presence, being in a romantic relationship) and a numeric
**query** :math:`g` (hours worked, age, cholesterol, maximum heart rate, final grade G3). The
prior :math:`\theta` is the empirical joint law of the dataset: the conditional law of the query
given the secret, :math:`P_s = \mathrm{law}(g \mid S = s)`, is the empirical distribution of the
query column over the rows whose secret column equals :math:`s` (rows with a missing query or
secret are dropped; repeated values are merged into one atom with the summed frequency). The one
discriminative pair is :math:`(s_0, s_1)`, the two values of the secret. A mechanism releases
:math:`g + N` with additive Laplace or Gaussian noise :math:`N`; it is
:math:`(\alpha, \varepsilon)`-RPP if :math:`D_\alpha(P_{s_0} * N \,\|\, P_{s_1} * N) \le
\varepsilon` in both directions (the usual conventions).

Quantities
-----------------------------------
For every scenario, :math:`\varepsilon` in :data:`EPSILONS` and :math:`\alpha` in :data:`ALPHAS`:

- ``b_exact``: Laplace scale from the α-Wasserstein condition with the exact Rényi moment cost
  :math:`M^{Lap}_\alpha(|z|/b)` (the tightest);
- ``b_lr``: with the likelihood-ratio cost :math:`e^{(\alpha-1)|z|/b}`;
- ``b_paper``: with the α-Wasserstein paper's "paper" cost :math:`e^{\alpha|z|/b}` (loosest);
- ``noise_std``: Gaussian standard deviation :math:`\sigma` from the exact cost
  :math:`e^{\alpha(\alpha-1)z^2/(2\sigma^2)}` (NaN at
  :math:`\alpha = \infty`: a Gaussian is never pure-DP);
- baselines from :math:`W_\infty`: ``b_winf = W_inf/eps`` (Song et al.),
  ``b_winf_rpp`` (Laplace RDP calibration at shift :math:`W_\infty`), ``sigma_winf``
  :math:`=\sqrt{\alpha W_\infty^2/(2\varepsilon)}` (Pierquin et al.);
- noise power: ``power_laplace`` :math:`= 2 b_{exact}^2`, ``power_gauss`` :math:`= \sigma^2`;
- tight scales (optional, :func:`dpopt.pufferfish.calibrate_tight`): ``b_tight`` and
  ``sigma_tight``, the least scales whose true divergence is at most ε, proven within 1 %
  (a proven private scale, with ``b_tight_refuted`` / ``sigma_tight_refuted``, about
  :math:`0.99\times` it, proven not private).

At :math:`\alpha = \infty` every Laplace cost reduces to :math:`b = W_\infty/\varepsilon`.

Tables on disk
--------------
:func:`write_table` writes a table as CSV with finite numbers or empty cells only: an empty
cell is a null (a Gaussian scale at :math:`\alpha = \infty`, a tight scale not computed), and
an empty ``alpha`` is :math:`\alpha = \infty`. :func:`read_sweep_table` reads such a file back
(and the files of earlier releases, which wrote ``inf`` and named ``noise_std`` ``sigma``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from certificates.validate import as_float_array
from dpopt.datasets import load_adult, load_heart_disease, load_student
from dpopt.errors import InvalidParameterError
from dpopt.experiments.tables import write_table
from dpopt.pufferfish import (
    Scenario,
    audit,
    calibrate_gaussian,
    calibrate_laplace,
    calibrate_tight,
    rpp_winf_gaussian,
    rpp_winf_laplace,
    winf_laplace,
)
from solvers.transport import quantile_coupling

if TYPE_CHECKING:  # pragma: no cover - Dask is optional
    from distributed import Client

__all__ = [
    "ALPHAS",
    "EPSILONS",
    "SCENARIOS",
    "RPPScenarioSpec",
    "build_scenario",
    "noise_power_claims",
    "read_sweep_table",
    "rpp_sweep",
    "scenario_laws",
    "summary_ratios",
    "tightness",
    "with_current_columns",
    "write_table",
]

#: Columns of the sweep tables of earlier releases, by their current name (``sigma`` was the
#: Gaussian noise standard deviation, a name the rest of dpopt uses for other quantities).
RENAMED_COLUMNS: dict[str, str] = {"sigma": "noise_std"}

#: The ε grid of the experiments (log-spaced from 0.1 to 5).
EPSILONS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0)
#: The Rényi orders of the experiments (∞ = pure Pufferfish).
ALPHAS: tuple[float, ...] = (1.1, 1.5, 2.0, 5.0, 10.0, 50.0, float("inf"))


def _adult() -> pd.DataFrame:
    return load_adult("train")


def _heart() -> pd.DataFrame:
    df = load_heart_disease()
    df["disease"] = df["disease"].map({False: "absent", True: "present"})
    df["sex"] = df["sex"].map({0: "female", 1: "male"})
    return df


def _student_mat() -> pd.DataFrame:
    return load_student("mat")


def _student_por() -> pd.DataFrame:
    return load_student("por")


@dataclass(frozen=True)
class RPPScenarioSpec:
    """A documented Pufferfish scenario on one of the packaged datasets.

    Attributes
    ----------
    key : str
        Short identifier, e.g. ``"adult-sex-hours"``.
    dataset : str
        ``"adult"``, ``"heart"`` or ``"student"`` (the figure group).
    title : str
        Human-readable title used on figures.
    query, secret : str
        Column names of the numeric query and of the secret attribute.
    secret_values : tuple of str
        The two secret values forming the discriminative pair, in order.
    loader : callable
        Returns the DataFrame (with derived, readable secret values where needed).
    """

    key: str
    dataset: str
    title: str
    query: str
    secret: str
    secret_values: tuple[str, str]
    loader: Callable[[], pd.DataFrame] = field(repr=False, compare=False)

    def frame(self) -> pd.DataFrame:
        """The two columns of the scenario, rows with a missing query or secret dropped."""
        df = self.loader()[[self.secret, self.query]].dropna()
        df = df.assign(**{self.secret: df[self.secret].astype(str)})
        return df[df[self.secret].isin(self.secret_values)].reset_index(drop=True)


#: The experiments' scenarios, two per dataset.
SCENARIOS: dict[str, RPPScenarioSpec] = {
    s.key: s
    for s in (
        RPPScenarioSpec(
            "adult-sex-hours", "adult", "Adult: secret = sex, query = hours-per-week",
            "hours-per-week", "sex", ("Female", "Male"), _adult,
        ),
        RPPScenarioSpec(
            "adult-income-age", "adult", "Adult: secret = income class, query = age",
            "age", "income", ("<=50K", ">50K"), _adult,
        ),
        RPPScenarioSpec(
            "heart-disease-chol", "heart",
            "Heart Disease: secret = disease presence, query = cholesterol",
            "chol", "disease", ("absent", "present"), _heart,
        ),
        RPPScenarioSpec(
            "heart-disease-thalach", "heart",
            "Heart Disease: secret = disease presence, query = max heart rate",
            "thalach", "disease", ("absent", "present"), _heart,
        ),
        RPPScenarioSpec(
            "student-mat-sex-G3", "student", "Student (math): secret = sex, query = final grade G3",
            "G3", "sex", ("F", "M"), _student_mat,
        ),
        RPPScenarioSpec(
            "student-por-romantic-G3", "student",
            "Student (Portuguese): secret = in a romantic relationship, query = G3",
            "G3", "romantic", ("no", "yes"), _student_por,
        ),
    )
}  # fmt: skip


def scenario_laws(
    spec: RPPScenarioSpec,
) -> tuple[tuple[NDArray[np.float64], NDArray[np.float64]], ...]:
    """Empirical conditional laws ``(support, probabilities)`` of the query, one per secret value.

    Supports are sorted and distinct; probabilities are frequencies (they sum to 1 up to
    rounding). This is the independent reference the tests use for the Pufferfish scenario.
    """
    df = spec.frame()
    laws = []
    for value in spec.secret_values:
        col = df.loc[df[spec.secret] == value, spec.query].to_numpy(dtype=float)
        if col.size == 0:
            raise InvalidParameterError("secret_values", value, f"no rows in {spec.key}")
        support, counts = np.unique(col, return_counts=True)
        laws.append((support, counts / counts.sum()))
    return tuple(laws)


def build_scenario(spec: RPPScenarioSpec) -> Scenario:
    """The :class:`dpopt.pufferfish.Scenario` of a spec (one prior, one pair of secret values)."""
    return Scenario.from_dataframe(
        spec.frame(), spec.query, spec.secret, pairs=[spec.secret_values]
    )


def _wasserstein(scenario: Scenario) -> tuple[float, float, float]:
    """(W∞, W1, W2) of the scenario's pair from the quantile coupling."""
    _, _, _, p_law, q_law = next(scenario.iter_pairs())
    x, y = p_law.support.ravel(), q_law.support.ravel()
    plan = quantile_coupling(x, p_law.probabilities, y, q_law.probabilities)
    shift = np.abs(x[plan.rows] - y[plan.cols])
    return float(shift.max()), float(plan.mass @ shift), float(np.sqrt(plan.mass @ shift**2))


def _sweep_row(
    cell: tuple[float, float], scenario: Scenario, key: str, dists: tuple[float, float, float],
    tight: str = "none", alpha_curve: float | None = None, eps_curve: float | None = None,
) -> dict[str, Any]:
    """One (ε, α) cell of :func:`rpp_sweep`: every mechanism and baseline (a task of its own
    when the sweep runs on Dask)."""
    eps, alpha = cell
    w_inf, w_1, w_2 = dists
    b_winf = winf_laplace(scenario, eps).scale
    row: dict[str, Any] = {
        "scenario": key, "epsilon": eps, "alpha": alpha,
        "w_inf": w_inf, "w_1": w_1, "w_2": w_2, "b_winf": b_winf,
    }  # fmt: skip
    if np.isinf(alpha):
        pure = calibrate_laplace(scenario, alpha, eps).scale
        row |= {"b_exact": pure, "b_lr": pure, "b_paper": pure, "b_winf_rpp": b_winf,
                "noise_std": np.nan, "sigma_winf": np.nan}  # fmt: skip
    else:
        row |= {
            "b_exact": calibrate_laplace(scenario, alpha, eps, form="exact").scale,
            "b_lr": calibrate_laplace(scenario, alpha, eps, form="ratio").scale,
            "b_paper": calibrate_laplace(scenario, alpha, eps, form="paper").scale,
            "b_winf_rpp": rpp_winf_laplace(scenario, alpha, eps).scale,
            "noise_std": calibrate_gaussian(scenario, alpha, eps).scale,
            "sigma_winf": rpp_winf_gaussian(scenario, alpha, eps).scale,
        }
    if tight == "all" or (tight == "curves" and (alpha == alpha_curve or eps == eps_curve)):
        row |= _tight_row(scenario, alpha, eps)
    elif tight != "none":
        row |= {"b_tight": np.nan, "b_tight_refuted": np.nan, "sigma_tight": np.nan,
                "sigma_tight_refuted": np.nan}
    return row


def rpp_sweep(
    spec: RPPScenarioSpec,
    *,
    epsilons: Sequence[float] = EPSILONS,
    alphas: Sequence[float] = ALPHAS,
    progress: bool | None = False,
    tight: str = "none",
    client: Client | None = None,
) -> pd.DataFrame:
    """Calibrate every mechanism and baseline of the module docstring over an (ε, α) grid.

    Parameters
    ----------
    spec : RPPScenarioSpec
    epsilons : sequence of float
        Values > 0.
    alphas : sequence of float
        Values > 1; ``inf`` allowed (pure Pufferfish).
    progress : bool or None
        Progress bar over the grid: ``None`` or ``True`` draw a tqdm bar when stderr is a
        terminal (never into logs), ``False`` none.
    client : distributed.Client, optional
        Run every (ε, α) cell as a Dask task on this cluster (the scenario is sent once); the
        table is identical to the in-process one. Needs Dask (from a clone:
        ``pip install -e '.[distributed]'``).
    tight : {"none", "curves", "all"}
        Where to add the tight scales ``b_tight`` / ``sigma_tight``: nowhere, on the two curves
        the figures draw (every ε at the α nearest 2, every α at the ε nearest 1), or everywhere
        (NaN where not computed).

    Returns
    -------
    pandas.DataFrame
        One row per (ε, α) with columns ``scenario, epsilon, alpha, w_inf, w_1, w_2, b_exact,
        b_lr, b_paper, b_winf, b_winf_rpp, noise_std, sigma_winf, power_laplace, power_gauss``
        (Gaussian columns are NaN at α = ∞), plus ``b_tight, b_tight_refuted, sigma_tight,
        sigma_tight_refuted`` unless ``tight="none"`` (the tight scale is proven private, the
        refuted one, within 1 % below it, proven not private: the bracket of the true least
        scale). Every scale is the certified output of
        :func:`dpopt.pufferfish.calibrate`, :func:`dpopt.pufferfish.calibrate_tight` or of a
        :mod:`dpopt.pufferfish` baseline.
    """
    if tight not in ("none", "curves", "all"):
        raise InvalidParameterError("tight", tight, "must be 'none', 'curves' or 'all'")
    from dpopt.parallel import map_ordered

    eps_arr = as_float_array("epsilons", list(epsilons), ndim=1, low=0.0)
    alpha_arr = as_float_array("alphas", list(alphas), ndim=1, low=1.0, allow_inf=True)
    scenario = build_scenario(spec)
    dists = _wasserstein(scenario)
    grid = [(float(e), float(a)) for e in eps_arr for a in alpha_arr]
    fin = alpha_arr[np.isfinite(alpha_arr)]
    alpha_curve = float(fin[np.argmin(np.abs(np.log(fin / 2.0)))]) if fin.size else None
    eps_curve = float(eps_arr[np.argmin(np.abs(np.log(eps_arr)))])
    rows = map_ordered(_sweep_row, grid, client=client,
                       args=(scenario, spec.key, dists, tight, alpha_curve, eps_curve),
                       desc=spec.key, progress=progress)
    table = pd.DataFrame(rows)
    table["power_laplace"] = 2.0 * table["b_exact"] ** 2
    table["power_gauss"] = table["noise_std"] ** 2
    return table


def _tight_row(scenario: Scenario, alpha: float, eps: float) -> dict[str, float]:
    """Tight Laplace and Gaussian scales at one (α, ε) (σ is NaN at α = ∞)."""
    lap = calibrate_tight(scenario, alpha, eps, "laplace")
    out = {"b_tight": lap.scale,
           "b_tight_refuted": np.nan if lap.refuted_scale is None else lap.refuted_scale,
           "sigma_tight": np.nan, "sigma_tight_refuted": np.nan}
    if not np.isinf(alpha):
        gauss = calibrate_tight(scenario, alpha, eps, "gaussian")
        out["sigma_tight"] = gauss.scale
        out["sigma_tight_refuted"] = (np.nan if gauss.refuted_scale is None
                                      else gauss.refuted_scale)
    return out


def summary_ratios(
    tables: pd.DataFrame | Sequence[pd.DataFrame], *, epsilon: float = 1.0, alpha: float = 2.0
) -> pd.DataFrame:
    """Ratios of α-Wasserstein to W∞ noise at one (ε, α), one row per scenario.

    Columns: ``laplace_vs_winf_rpp`` = b_exact / b_winf_rpp, ``laplace_vs_winf`` = b_exact /
    (W∞/ε), ``paper_vs_winf`` = b_paper / (W∞/ε), ``gauss_var_vs_winf`` = σ² / σ_W∞², and
    ``gauss_vs_laplace_power`` = σ² / (2 b_exact²). Values below 1 mean α-W needs less noise.
    With tight columns in the tables: ``tight_vs_alpha_w_laplace`` = b_tight / b_exact and
    ``tight_vs_alpha_w_gauss`` = σ_tight / σ (below 1: the tight calibration needs less noise).
    """
    frame = with_current_columns(
        tables if isinstance(tables, pd.DataFrame) else pd.concat(list(tables)))
    sel = frame[np.isclose(frame["epsilon"], epsilon) & np.isclose(frame["alpha"], alpha)]
    if sel.empty:
        raise InvalidParameterError("(epsilon, alpha)", (epsilon, alpha), "not in the tables")
    out = pd.DataFrame(
        {
            "scenario": sel["scenario"].to_numpy(),
            "w_inf": sel["w_inf"].to_numpy(),
            "w_1": sel["w_1"].to_numpy(),
            "laplace_vs_winf_rpp": (sel["b_exact"] / sel["b_winf_rpp"]).to_numpy(),
            "laplace_vs_winf": (sel["b_exact"] / sel["b_winf"]).to_numpy(),
            "paper_vs_winf": (sel["b_paper"] / sel["b_winf"]).to_numpy(),
            "gauss_var_vs_winf": (sel["noise_std"] ** 2 / sel["sigma_winf"] ** 2).to_numpy(),
            "gauss_vs_laplace_power": (sel["power_gauss"] / sel["power_laplace"]).to_numpy(),
        }
    )
    if "b_tight" in sel.columns:
        out["tight_vs_alpha_w_laplace"] = (sel["b_tight"] / sel["b_exact"]).to_numpy()
        out["tight_vs_alpha_w_gauss"] = (sel["sigma_tight"] / sel["noise_std"]).to_numpy()
    return out


def tightness(
    spec: RPPScenarioSpec, *, epsilon: float = 1.0, alpha: float = 2.0, tol: float = 0.01
) -> pd.DataFrame:
    """How conservative the α-W calibration is on a scenario: α-W vs the certified least scale.

    For Laplace and Gaussian noise, compares the certified α-W scale (exact cost) with the
    tight scale of :func:`dpopt.pufferfish.calibrate_tight` (proven private, and
    ``(1 - tol)`` times it proven *not* private, so the true least scale lies in between) and
    with the W∞ RPP baseline.

    Returns
    -------
    pandas.DataFrame
        Two rows (``laplace``, ``gaussian``) with columns ``scenario, mechanism, epsilon, alpha,
        calibrated, tight, tight_refuted, winf_rpp, true_divergence_at_calibrated, ratio`` where
        ``ratio`` = tight / calibrated (1 would mean the sufficient condition is tight) and
        ``true_divergence_at_calibrated`` is a quadrature diagnostic (:func:`audit`).
    """
    eps = float(as_float_array("epsilon", [epsilon], ndim=1, low=0.0)[0])
    a = float(as_float_array("alpha", [alpha], ndim=1, low=1.0)[0])
    scenario = build_scenario(spec)
    rows = []
    for mech in ("laplace", "gaussian"):
        if mech == "laplace":
            calibrated = calibrate_laplace(scenario, a, eps).scale
            winf = rpp_winf_laplace(scenario, a, eps).scale
        else:
            calibrated = calibrate_gaussian(scenario, a, eps).scale
            winf = rpp_winf_gaussian(scenario, a, eps).scale
        tc = calibrate_tight(scenario, a, eps, mech, tol, start=calibrated)
        rows.append(
            {
                "scenario": spec.key, "mechanism": mech, "epsilon": eps, "alpha": a,
                "calibrated": calibrated, "tight": tc.scale,
                "tight_refuted": np.nan if tc.refuted_scale is None else tc.refuted_scale,
                "winf_rpp": winf,
                "true_divergence_at_calibrated": audit(scenario, mech, calibrated, a)
                .max_divergence,
                "ratio": tc.scale / calibrated,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def noise_power_claims(tables: pd.DataFrame | Sequence[pd.DataFrame]) -> pd.DataFrame:
    r"""How often the Gaussian mechanism needs less noise power than Laplace, per scenario.

    The α-Wasserstein paper states that the Gaussian mechanism needs less noise power than the
    Laplace one. The answer depends on which Laplace scale it is compared with; over the finite
    α of each sweep table (every ε), the columns are

    - ``points``: the (ε, α) cells compared;
    - ``gauss_below_paper``: the share of cells with :math:`\sigma^2 < 2 b_{paper}^2` (the
      paper's own, loose Laplace cost);
    - ``gauss_below_exact``: with the exact Rényi cost, :math:`\sigma^2 < 2 b_{exact}^2`
      (both α-W calibrations as sharp as the condition allows);
    - ``gauss_below_tight``: tight against tight, :math:`\sigma_{tight}^2 < 2 b_{tight}^2`
      (the least private scales, proven within 1 %; only where both were computed, NaN when
      the tables have no tight columns);
    - ``median_ratio_paper``, ``median_ratio_exact``, ``median_ratio_tight``: the median of
      :math:`\sigma^2 / (2b^2)` for the three comparisons (above 1: Laplace has less power).

    Shares are fractions in [0, 1].
    """
    frames = [with_current_columns(t)
              for t in ([tables] if isinstance(tables, pd.DataFrame) else list(tables))]
    rows = []
    for table in frames:
        for key, sub in table.groupby("scenario", sort=False):
            fin = sub[np.isfinite(sub["alpha"].to_numpy(dtype=float))]
            sigma2 = fin["noise_std"].to_numpy(dtype=float) ** 2
            row: dict[str, Any] = {"scenario": key, "points": len(fin)}
            for name, col in (("paper", "b_paper"), ("exact", "b_exact")):
                ratio = sigma2 / (2.0 * fin[col].to_numpy(dtype=float) ** 2)
                row[f"gauss_below_{name}"] = float(np.mean(ratio < 1.0))
                row[f"median_ratio_{name}"] = float(np.median(ratio))
            if {"b_tight", "sigma_tight"} <= set(fin.columns):
                ratio = (fin["sigma_tight"].to_numpy(dtype=float) ** 2
                         / (2.0 * fin["b_tight"].to_numpy(dtype=float) ** 2))
                ratio = ratio[np.isfinite(ratio)]
                row["tight_points"] = int(ratio.size)
                row["gauss_below_tight"] = float(np.mean(ratio < 1.0)) if ratio.size else np.nan
                row["median_ratio_tight"] = float(np.median(ratio)) if ratio.size else np.nan
            else:
                row |= {"tight_points": 0, "gauss_below_tight": np.nan,
                        "median_ratio_tight": np.nan}
            rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- tables on disk
def with_current_columns(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the columns of earlier releases renamed (``sigma`` -> ``noise_std``,
    :data:`RENAMED_COLUMNS`); a table already in the current names is returned as is."""
    old = {k: v for k, v in RENAMED_COLUMNS.items() if k in table.columns and v not in table}
    return table.rename(columns=old) if old else table


def read_sweep_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    r"""Read a sweep table written by :func:`write_table` (or by an earlier release).

    An empty ``alpha`` cell is :math:`\alpha = \infty`; files of earlier releases, which wrote
    the string ``inf`` and named the Gaussian noise standard deviation ``sigma``, read the same
    (:func:`with_current_columns`).
    """
    table = with_current_columns(pd.read_csv(path))
    if "alpha" in table.columns:
        table["alpha"] = table["alpha"].astype(float).fillna(float("inf"))
    return table
