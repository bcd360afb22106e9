"""The structured solver's name has one owner, ``solvers.restricted.SOLVER_NAME``.

The passes, the Dask passes, the floor block, the stacked and the structured solvers put it in
their statistics and at the head of their error messages; a second definition would let them
drift apart. The test reads the sources (every module-level assignment of the name counts) and
checks that the modules using it hold the owner's object.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USERS = ("solvers.dask_passes", "solvers.floor_block", "solvers.structured")


def _assigns(path: Path, name: str) -> bool:
    """Whether ``path`` binds ``name`` at module level (plain or annotated assignment)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def test_solver_name_is_defined_once() -> None:
    owners = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "solvers").rglob("*.py")
                    if _assigns(p, "SOLVER_NAME"))
    assert owners == ["solvers/restricted.py"]


@pytest.mark.parametrize("module", USERS)
def test_users_hold_the_owners_name(module: str) -> None:
    from solvers.restricted import SOLVER_NAME

    assert importlib.import_module(module).SOLVER_NAME is SOLVER_NAME


def test_stacked_name_extends_the_owners() -> None:
    from solvers import stacked
    from solvers.restricted import SOLVER_NAME

    assert stacked._NAME == f"{SOLVER_NAME} (stacked)"
