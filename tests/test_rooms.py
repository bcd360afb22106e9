"""The import graph has no upward arrow, down to the rooms of ``dpopt``.

``tests/test_public_api.py`` checks the packages (dpopt -> solvers -> certificates); this test
checks the rooms inside ``dpopt`` against the order the architecture page states: accounting at
the bottom, then covariance and pufferfish, then diffusion and the experiments, and the command
line and the figures on top. Every import statement counts, also those inside functions (a
deprecated path that forwards to a higher room does so by name, through
``certificates._deprecated``, not by an import statement).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: room -> the rooms it must never import
FORBIDDEN: dict[str, set[str]] = {
    "accounting": {"covariance", "pufferfish", "diffusion", "experiments", "datasets", "figures",
                   "cli", "verification"},
    "covariance": {"pufferfish", "diffusion", "experiments", "datasets", "figures", "cli",
                   "verification"},
    "pufferfish": {"covariance", "diffusion", "experiments", "figures", "cli"},
    "diffusion": {"pufferfish", "experiments", "figures", "cli"},
    "experiments": {"covariance", "diffusion", "figures", "cli"},
    "datasets": {"accounting", "covariance", "pufferfish", "diffusion", "experiments", "figures",
                 "cli"},
    "relation": {"accounting", "covariance", "pufferfish", "diffusion", "figures", "cli"},
}


def _rooms_imported(path: Path) -> set[str]:
    """The rooms of ``dpopt`` (second component of the module path) that ``path`` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "dpopt" and len(parts) > 1:
                found.add(parts[1])
    return found


def _files(room: str) -> list[Path]:
    base = ROOT / "dpopt" / room
    return sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_no_room_imports_a_room_above_it(room: str) -> None:
    bad = {str(p.relative_to(ROOT)): sorted(_rooms_imported(p) & FORBIDDEN[room])
           for p in _files(room)}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dpopt.diffusion.trajectory import diffusion_run\n"
                     "    import dpopt.cli.main\n")
    assert _rooms_imported(probe) == {"diffusion", "cli"}
