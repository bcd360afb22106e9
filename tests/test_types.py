"""Public signatures say what they accept: no parameter typed ``Any`` where a precise type exists.

The modules listed here have been swept (array inputs are ``numpy.typing.ArrayLike``, scalars
``float``, random generators ``RngLike``, domains ``Domain | ArrayLike``, sensitivity sets
``ArrayLike | VectorSource``); the test keeps them that way, and keeps their docstrings, which
the API reference renders, free of team-internal references.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEPT = [
    "dpopt/accounting/renyi.py",
    "dpopt/accounting/report_json.py",
    "dpopt/cli/options.py",
    "dpopt/covariance/denoiser.py",
    "dpopt/covariance/domains.py",
    "dpopt/covariance/mahalanobis_sup.py",
    "dpopt/covariance/mechanisms.py",
    "dpopt/covariance/plotting.py",
    "dpopt/covariance/privacy.py",
    "dpopt/covariance/pruning.py",
    "dpopt/covariance/sensitivity.py",
]
INTERNAL = re.compile(r"MATH\.md|§\s?\d|\b[Ss]eed 00\d")


def _public_params_typed_any(tree: ast.Module) -> list[str]:
    found: list[str] = []

    def visit(node: ast.AST, public: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if not public or child.name.startswith("_"):
                    continue
                for arg in [*child.args.posonlyargs, *child.args.args, *child.args.kwonlyargs]:
                    if arg.annotation is not None and ast.unparse(arg.annotation) == "Any":
                        found.append(f"{child.name}({arg.arg})")
            elif isinstance(child, ast.ClassDef):
                visit(child, public and not child.name.startswith("_"))

    visit(tree, True)
    return found


@pytest.mark.parametrize("path", SWEPT)
def test_no_public_parameter_typed_any(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    assert _public_params_typed_any(tree) == []


def test_the_check_can_fail() -> None:
    tree = ast.parse("from typing import Any\ndef f(x: Any, y: int) -> None: ...\n"
                     "def _g(z: Any) -> None: ...\n"
                     "class C:\n    def m(self, w: Any) -> None: ...\n")
    assert _public_params_typed_any(tree) == ["f(x)", "m(w)"]


@pytest.mark.parametrize("path", SWEPT)
def test_docstrings_cite_papers_not_team_notes(path: str) -> None:
    assert INTERNAL.findall((ROOT / path).read_text(encoding="utf-8")) == []
