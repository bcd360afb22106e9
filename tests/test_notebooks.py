"""Execute every notebook with small settings (DPOPT_NOTEBOOK_SMALL=1), each under a minute.

A notebook is skipped only when a dpopt module it depends on does not exist (yet).
"""

from __future__ import annotations

import importlib.util
import json
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
def test_notebook_executes(name: str, tmp_path: Path) -> None:
    pytest.importorskip("nbclient")
    for module in REQUIREMENTS[name]:
        pytest.importorskip(module)
    runner = _load_runner()
    # the kernel runs in a temporary folder: whatever the notebook writes stays out of the tree
    runner.execute_notebook(NOTEBOOKS / name, small=True, timeout=120, workdir=tmp_path)
