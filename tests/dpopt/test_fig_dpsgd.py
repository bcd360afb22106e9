"""The ``dpsgd`` figure: registered, writes its files, and its numbers are ordered as the theory
says (certified RDP/PLD above the CLT's approximation; the optimal split never worse)."""

from __future__ import annotations

from pathlib import Path

from dpopt.figures.__main__ import FIGURES, resolve
from dpopt.figures.dpsgd import dpsgd_epsilon_table, dpsgd_figure, run_gain_table


def test_registered() -> None:
    assert "dpsgd" in FIGURES
    assert resolve("dpsgd") is dpsgd_figure


def test_tables_are_ordered() -> None:
    acc = dpsgd_epsilon_table([50, 200], discretization=1e-3)
    assert (acc["pld"] >= acc["clt_approximate"]).all()
    assert (acc["rdp"] >= acc["clt_approximate"]).all()
    assert acc["pld"].is_monotonic_increasing
    gain = run_gain_table([2, 3], grid=3, data_size=4)
    assert (gain["optimal_split"] <= gain["equal_split"] * (1 + 1e-9)).all()
    assert (gain["certified_lower"] <= gain["optimal_split"]).all()


def test_figure_writes_files(tmp_path: Path) -> None:
    paths = dpsgd_figure(tmp_path, steps=[50, 100], run_steps=[2], discretization=1e-3)
    assert [p.name for p in paths] == ["dpsgd-epsilon.csv", "run-design-gain.csv", "dpsgd.png"]
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
