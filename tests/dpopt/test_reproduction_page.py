"""The numbers the reproduction page quotes are the numbers the code computes.

``docs/guide/reproduction.md`` states, in tables and prose, what the sweeps of the α-Wasserstein
paper's experiments show. Its code blocks run with the other pages (``tests/test_readme.py``);
here the quoted numbers themselves are recomputed: the main table at ε = 1, α = 2, the
Gaussian-against-Laplace table of claim 4 and the ranges of claims 1 to 4, from the full sweeps
(every scale certified). A number is compared to the digits shown (``0.424`` must round to
0.424), so a stale number fails. The tight columns of claim 4 need the tight scale at every
point (about 40 CPU seconds): they run with ``-m slow``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpopt.experiments.rpp import SCENARIOS, noise_power_claims, rpp_sweep, summary_ratios

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "reproduction.md"
TEXT = PAGE.read_text(encoding="utf-8")


def agrees(shown: str, value: float) -> bool:
    """``value`` rounds to ``shown`` at the digits shown (``"62 %"`` is a share of 0.62)."""
    text = shown.replace("*", "").strip()
    scale = 100.0 if text.endswith("%") else 1.0
    number = text.rstrip("% ").strip()
    decimals = len(number.split(".")[1]) if "." in number else 0
    return math.isclose(round(value * scale, decimals), float(number), abs_tol=1e-9)


def table_after(heading: str) -> list[list[str]]:
    """The rows (cells) of the first Markdown table after ``heading``, its header left out."""
    rest = TEXT[TEXT.index(heading):]
    rows = []
    for line in rest.splitlines():
        line = line.strip()
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return [r for r in rows[2:]]  # header and the |---| line


def sentence(start: str) -> str:
    """The text from ``start`` to the end of its sentence (numbers are searched in it)."""
    i = TEXT.index(start)
    j = TEXT.find(". ", i)
    return " ".join(TEXT[i:j].split())


def numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", text.replace("–", " "))


@pytest.fixture(scope="module")
def sweeps() -> dict[str, pd.DataFrame]:
    """The full sweep of every scenario, without the tight scales (about 9 CPU seconds)."""
    return {key: rpp_sweep(spec, progress=False) for key, spec in SCENARIOS.items()}


def _finite(table: pd.DataFrame) -> pd.DataFrame:
    return table[np.isfinite(table["alpha"])]


def test_the_main_table(sweeps: dict[str, pd.DataFrame]) -> None:
    rows = table_after("## The main numbers")
    summary = summary_ratios(list(sweeps.values()), epsilon=1.0, alpha=2.0)
    columns = ["laplace_vs_winf_rpp", "laplace_vs_winf", "gauss_var_vs_winf", "paper_vs_winf",
               "gauss_vs_laplace_power"]
    assert [r[0] for r in rows] == list(SCENARIOS)
    for row in rows:
        got = summary[summary["scenario"] == row[0]].iloc[0]
        for cell, col in zip(row[1:], columns, strict=True):
            assert agrees(cell, float(got[col])), (row[0], col, cell, float(got[col]))


def test_claims_one_to_three(sweeps: dict[str, pd.DataFrame]) -> None:
    fin = pd.concat([_finite(t) for t in sweeps.values()])
    lap = fin["b_exact"] / fin["b_winf_rpp"]
    gauss = fin["noise_std"] ** 2 / fin["sigma_winf"] ** 2
    claim1 = sentence("Over the whole grid, b_exact")
    lo1, hi1, lo2, hi2 = numbers(claim1)[-4:]
    assert agrees(lo1, lap.min()) and agrees(hi1, lap.max()), (claim1, lap.min(), lap.max())
    assert agrees(lo2, gauss.min()) and agrees(hi2, gauss.max()), (gauss.min(), gauss.max())
    # claim 2: the paper cost is worse than W∞/ε at this share of the finite-α points
    shares = [float((_finite(t)["b_paper"] > _finite(t)["b_winf"]).mean())
              for t in sweeps.values()]
    low, high = numbers(sentence("plain W∞/ε mechanism: this happens at"))[:2]
    assert agrees(low + " %", min(shares)) and agrees(high + " %", max(shares)), shares
    # claim 3: Adult sex -> hours at ε = 1
    adult = sweeps["adult-sex-hours"]
    at = {a: adult[(adult["epsilon"] == 1.0) & (adult["alpha"] == a)].iloc[0]
          for a in (1.1, 2.0, 50.0)}
    shown = numbers(sentence("On Adult sex→hours at"))
    assert shown[:2] == ["1", "3.99"] or shown[1] == "3.99"
    b = [float(at[a]["b_exact"]) for a in (1.1, 2.0, 50.0)]
    assert [agrees(s, v) for s, v in zip(("3.99", "5.77", "15.97"), b, strict=True)] == [True] * 3
    assert "3.99 / 5.77 / 15.97" in TEXT
    paper = sentence("Only the paper")
    assert "68.1" in paper and agrees("68.1", float(at[1.1]["b_paper"]))
    assert "= 19" in paper and agrees("19", float(at[1.1]["b_winf"]))


def _claim4_rows() -> list[list[str]]:
    return table_after("where σ² < 2b² (the Gaussian has the lower noise power)")


def test_claim_four_paper_and_exact_columns(sweeps: dict[str, pd.DataFrame]) -> None:
    claims = noise_power_claims(list(sweeps.values()))
    rows = _claim4_rows()
    assert [r[0] for r in rows] == list(SCENARIOS)
    for row in rows:
        got = claims[claims["scenario"] == row[0]].iloc[0]
        assert int(got["points"]) == 66
        for cell, col in ((row[1], "gauss_below_paper"), (row[2], "gauss_below_exact"),
                          (row[4], "median_ratio_paper"), (row[5], "median_ratio_exact")):
            assert agrees(cell, float(got[col])), (row[0], col, cell, float(got[col]))
    prose = sentence("Against the paper's cost exp(α|z|/b) the Gaussian is lower at")
    lo, hi = numbers(prose)[-2:]
    assert agrees(lo + " %", claims["gauss_below_paper"].min())
    assert agrees(hi + " %", claims["gauss_below_paper"].max())
    prose = sentence("With both α-W calibrations as sharp")
    lo, hi = numbers(prose.split("at only")[1])[:2]
    assert agrees(lo + " %", claims["gauss_below_exact"].min())
    assert agrees(hi + " %", claims["gauss_below_exact"].max())
    # where the Gaussian wins with exact costs: at eps <= 1, and at alpha = 10 only eps <= 0.2
    fin = pd.concat([_finite(t) for t in sweeps.values()])
    wins = fin[fin["power_gauss"] < fin["power_laplace"]]
    assert "it is at ε ≤ 1 (exact costs; at α = 10 only for ε ≤ 0.2)" in TEXT
    assert wins["epsilon"].max() <= 1.0
    assert wins[wins["alpha"] == 10.0]["epsilon"].max() <= 0.2


@pytest.mark.slow  # the tight scale at every point of every sweep: about 40 CPU seconds
def test_claim_four_tight_columns() -> None:
    tables = [rpp_sweep(spec, progress=False, tight="all") for spec in SCENARIOS.values()]
    claims = noise_power_claims(tables)
    for row in _claim4_rows():
        got = claims[claims["scenario"] == row[0]].iloc[0]
        assert agrees(row[3], float(got["gauss_below_tight"])), (row[0], row[3])
        assert agrees(row[6], float(got["median_ratio_tight"])), (row[0], row[6])
    prose = sentence("With both α-W calibrations as sharp")
    lo, hi = numbers(prose.split("each proven within 1 %) at")[1])[:2]
    assert agrees(lo + " %", claims["gauss_below_tight"].min())
    assert agrees(hi + " %", claims["gauss_below_tight"].max())
    lo, hi = numbers(prose.split("median noise-power ratio is then")[1])[:2]
    assert agrees(lo, claims["median_ratio_tight"].min())
    assert agrees(hi, claims["median_ratio_tight"].max())


@pytest.mark.slow  # the tight scales and the quadrature audit of all six scenarios
def test_claim_five() -> None:
    from dpopt.experiments.rpp import tightness

    table = pd.concat([tightness(spec) for spec in SCENARIOS.values()], ignore_index=True)
    prose = sentence("the least private scale (`rpp-tightness`, proven within 1 %) is")
    shown = numbers(prose.split("%) is", 1)[1])
    lap = table[table["mechanism"] == "laplace"]
    gauss = table[table["mechanism"] == "gaussian"]
    for (lo, hi), values, unit in (((shown[0], shown[1]), lap["ratio"], " %"),
                                   ((shown[2], shown[3]), gauss["ratio"], " %"),
                                   ((shown[4], shown[5]), table["true_divergence_at_calibrated"],
                                    "")):
        assert agrees(lo + unit, values.min()) and agrees(hi + unit, values.max()), (lo, hi)
    adult = lap[lap["scenario"] == "adult-sex-hours"].iloc[0]
    assert "b = 0.34 suffices where the certified scale is 5.77" in TEXT
    assert agrees("0.34", adult["tight"]) and agrees("5.77", adult["calibrated"])


def test_agrees_can_fail() -> None:
    assert agrees("0.424", 0.4244) and agrees("62 %", 0.621) and agrees("1.5 %", 0.0152)
    assert not agrees("0.424", 0.4246) and not agrees("62 %", 0.63)


def _labels(ax: object) -> list[str]:
    return [str(line.get_label()) for line in ax.get_lines()]  # type: ignore[attr-defined]


def test_every_panel_carries_the_tight_scales_and_their_bracket() -> None:
    """The scenario figure on a small sweep with the tight scales: panels (a)-(c) draw the
    tight line with its bracket band (panel (c) at α = 2 and at α = 10), panel (d) the
    tight-against-tight ratio for each finite α with the band of its brackets."""
    pytest.importorskip("matplotlib")
    from matplotlib.collections import PolyCollection

    from dpopt.figures.rpp import rpp_scenario_figure

    spec = SCENARIOS["student-mat-sex-G3"]
    table = rpp_sweep(spec, epsilons=[0.5, 1.0], alphas=[2.0, 10.0, math.inf], tight="all",
                      progress=False)
    fig = rpp_scenario_figure(spec, table)
    a, b, c, d = fig.axes[:4]

    def bands(ax: object) -> int:
        return sum(isinstance(x, PolyCollection) for x in ax.collections)  # type: ignore[attr-defined]

    for ax in (a, b):
        assert any(label.startswith("tight") for label in _labels(ax)) and bands(ax) >= 1
    tight_c = [label for label in _labels(c) if label.startswith("tight")]
    assert tight_c == ["tight, within 1 % (band), α = 2", "tight, within 1 % (band), α = 10"]
    assert bands(c) == 2
    tight_d = [label for label in _labels(d) if "tight vs tight" in label]
    assert len(tight_d) == 2 and bands(d) == 2
    # the band of panel (d) holds the tight ratio, from sigma_refuted^2/2b^2 to sigma^2/2b_r^2
    row = table[(table["alpha"] == 2.0) & (table["epsilon"] == 1.0)].iloc[0]
    low = row["sigma_tight_refuted"] ** 2 / (2 * row["b_tight"] ** 2)
    high = row["sigma_tight"] ** 2 / (2 * row["b_tight_refuted"] ** 2)
    # each bracket is 1 %, so the ratio's band spans at most (1 / 0.99)^4
    assert low < row["sigma_tight"] ** 2 / (2 * row["b_tight"] ** 2) < high < 0.99**-4 * low
