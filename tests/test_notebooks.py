"""Execute every notebook with small settings (DPOPT_NOTEBOOK_SMALL=1), each under a minute.

A notebook is skipped only when a dpopt module it depends on does not exist (yet).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: notebook -> dpopt modules it needs
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "rpp_experiments.ipynb": ("dpopt.pufferfish", "dpopt.experiments.rpp"),
    "denoiser_covariance.ipynb": (
        "dpopt.covariance.design", "dpopt.covariance.sensitivity", "dpopt.accounting.budgets",
    ),
    "gdp_tour.ipynb": ("dpopt.accounting.gdp",),
    "run_design.ipynb": ("dpopt.covariance.run_design", "dpopt.diffusion.trajectory",
                         "dpopt.accounting.schedule"),
    "private_sampling.ipynb": ("dpopt.diffusion", "dpopt.figures.sampler"),
}


def _load_runner():  # type: ignore[no-untyped-def]
    path = ROOT / "scripts" / "run_notebooks.py"
    spec = importlib.util.spec_from_file_location("run_notebooks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("run_notebooks", module)
    spec.loader.exec_module(module)
    return module


def test_every_notebook_is_listed_and_committed_without_outputs() -> None:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == sorted(REQUIREMENTS)
    for name in names:
        nb = json.loads((NOTEBOOKS / name).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, name
        sources = "".join("".join(c["source"]) for c in nb["cells"])
        assert "DPOPT_NOTEBOOK_SMALL" in sources, f"{name} has no small-settings parameter cell"


@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
def test_notebook_executes_with_its_figures(name: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Executed even with MPLBACKEND=Agg in the environment (as in CI), the copy has figures."""
    pytest.importorskip("nbclient")
    for module in REQUIREMENTS[name]:
        pytest.importorskip(module)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    runner = _load_runner()
    # the kernel runs in a temporary folder: whatever the notebook writes stays out of the tree
    out = runner.execute_notebook(NOTEBOOKS / name, small=True, timeout=120,
                                  out_dir=tmp_path / "executed", workdir=tmp_path)
    executed = json.loads(Path(out).read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{name}: no figure drawn"
    assert os.environ["MPLBACKEND"] == "Agg"          # restored for the rest of the process
