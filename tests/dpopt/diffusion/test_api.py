"""dpopt.diffusion's advertised names resolve, and the room depends one way."""

from __future__ import annotations

import ast
import importlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_all_names_resolve() -> None:
    mod = importlib.import_module("dpopt.diffusion")
    assert [n for n in mod.__all__ if getattr(mod, n, None) is None] == []


def test_covariance_and_accounting_never_import_diffusion() -> None:
    for room in ("covariance", "accounting"):
        for path in sorted((ROOT / "dpopt" / room).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n.startswith("dpopt.diffusion") for n in names), path
