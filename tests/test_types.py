"""Public signatures say what they accept: no parameter typed ``Any`` where a precise type exists.

``scripts/public_any.py`` counts the public parameters and return types of dpopt, solvers and
certificates typed ``Any`` (or not annotated) and fails unless each is in its allow-list with a
reason; these tests run it on the packages and check, on small synthetic packages, that it finds
what it should (so it can fail). The modules in ``SWEPT`` also keep their docstrings, which the API
reference renders, free of team-internal references.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

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


# ------------------------------------------------------------------ scripts/public_any.py


def _public_any() -> ModuleType:
    spec = importlib.util.spec_from_file_location("public_any", ROOT / "scripts" / "public_any.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("public_any", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_no_public_any_left_outside_the_allow_list() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "public_any.py")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert "public parameters in all:" in run.stdout


def test_every_allow_list_entry_gives_a_reason() -> None:
    allowed = _public_any().ALLOWED
    assert all(isinstance(why, str) and len(why) > 20 for why in allowed.values())


_SAMPLE = """
    from dataclasses import dataclass
    from typing import Any, overload
    import typing

    def f(a: Any, b: int, c, *args: Any, **kw: typing.Any) -> Any: ...
    def g(x: Any | None, y: "Any", z: dict[str, Any]) -> list[Any]: ...
    def h(x: int) -> None: ...
    def _private(x: Any) -> Any: ...

    @overload
    def o(x: Any) -> int: ...
    @overload
    def o(x: int) -> int: ...
    def o(x: int) -> int: return x

    class C:
        def __init__(self, v: Any, w: float) -> None: ...
        def m(self, u) -> float: ...
        @staticmethod
        def s(first: Any) -> None: ...
        @classmethod
        def k(cls, t: Any) -> None: ...
        def _hidden(self, q: Any) -> None: ...
        def __repr__(self) -> str: ...

    class _Private:
        def m(self, u: Any) -> None: ...

    @dataclass(frozen=True)
    class D:
        field_a: Any
        field_b: int = 0

    @dataclass(init=False)
    class E:
        stored: Any
        def __init__(self, given: int) -> None: ...
"""


def _package(tmp_path: Path, allowed_module: str = "") -> Path:
    pkg = tmp_path / "dpopt"
    (pkg / "_inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "mod.py").write_text(textwrap.dedent(_SAMPLE), encoding="utf-8")
    (pkg / "_private_mod.py").write_text("from typing import Any\ndef f(x: Any) -> Any: ...\n",
                                        encoding="utf-8")
    (pkg / "_inner" / "pub.py").write_text("def f(x): ...\n", encoding="utf-8")
    for other in ("solvers", "certificates"):
        (tmp_path / other).mkdir()
        (tmp_path / other / "__init__.py").write_text(allowed_module, encoding="utf-8")
    return tmp_path


def test_the_script_finds_what_it_should(tmp_path: Path) -> None:
    pa = _public_any()
    found = {(f.key.split("::")[1], f.kind) for f in pa.findings(_package(tmp_path))}
    assert found == {
        ("f(a)", "any"), ("f(c)", "missing"), ("f(*args)", "any"), ("f(**kw)", "any"),
        ("f(-> return)", "any"),
        ("g(x)", "any"), ("g(y)", "any"), ("g(z)", "nested"), ("g(-> return)", "nested"),
        ("o(x)", "any"),
        ("C.__init__(v)", "any"), ("C.m(u)", "missing"), ("C.s(first)", "any"),
        ("C.k(t)", "any"),
        ("D(field_a)", "any"),
    }
    # parameters: f 5, g 3, h 1, o 1 (overload stubs not counted twice), C 2+1+1+1, D 2, E 1
    assert pa.count_parameters(tmp_path) == 5 + 3 + 1 + 1 + 5 + 2 + 1


def test_the_script_fails_on_unlisted_and_on_stale_entries(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    pa = _public_any()
    root = _package(tmp_path)
    monkeypatch.setattr(pa, "ALLOWED", {})
    assert pa.main([str(root)]) == 1
    assert "NOT ALLOWED (any): dpopt/mod.py::f(a)" in capsys.readouterr().err
    keys = {f.key: "a reason long enough to pass" for f in pa.findings(root) if f.kind != "nested"}
    monkeypatch.setattr(pa, "ALLOWED", keys)
    assert pa.main([str(root)]) == 0
    monkeypatch.setattr(pa, "ALLOWED", {**keys, "dpopt/mod.py::gone(x)": "no longer exists"})
    assert pa.main([str(root)]) == 1
    assert "STALE" in capsys.readouterr().err


def test_scalar_in_gives_float_out_to_the_type_checker(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``@overload`` pairs tell mypy that scalar arguments give a ``float`` (so callers need
    no ``float(...)``), and array arguments the float-or-array union."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent("""
        import numpy as np
        from dpopt.accounting import gdp, renyi
        from dpopt.accounting.budgets import approx_dp_bound, privacy_report
        reveal_type(gdp.mu_for(1.0, 1e-5))
        reveal_type(gdp.gaussian_sigma(1.0, 1e-5, 2))
        reveal_type(gdp.compose(0.5, 1.0))
        reveal_type(gdp.rdp_to_dp_improved(1e-5, rdp=lambda a: a / 2))
        reveal_type(renyi.renyi_gaussian(2.0, 1.0, 1.0))
        reveal_type(approx_dp_bound(1.0, 1e-5))
        reveal_type(privacy_report(1.0).epsilon(1e-5))
        reveal_type(gdp.mu_for(np.array([1.0, 2.0]), 1e-5))
    """), encoding="utf-8")
    monkeypatch.chdir(ROOT)  # mypy finds the packages of this checkout first
    out, err, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(ROOT / ".mypy_cache"), str(snippet)])
    revealed = re.findall(r'Revealed type is "([^"]+)"', out)
    assert revealed[:-1] == ["float"] * 7, out + err
    assert revealed[-1].startswith("float | numpy.ndarray"), out + err


def test_domain_constructors_accept_array_likes_for_a_type_checker(tmp_path: Path) -> None:
    """The documented ``Box([0.0], [1.0])`` and ``Grid([0.0], [1.0], [3])`` type-check under
    ``mypy --strict`` (the constructors take array-likes; the stored fields are arrays)."""
    pytest.importorskip("mypy")
    snippet = tmp_path / "uses_domains.py"
    snippet.write_text(textwrap.dedent("""
        from dpopt.covariance.domains import Ball, Box, Ellipsoid, FinitePoints, Grid

        Box([0.0, 0.0], [1.0, 2.0])
        Box(lower=(0.0,), upper=(1.0,))
        Grid([0.0], [1.0], [3])
        Grid(lower=(0.0, 0.0), upper=(1.0, 1.0), shape=(2, 3))
        FinitePoints([[0.0], [1.0]])
        Ellipsoid([0.0], [[1.0]])
        Ball([0.0, 0.0], 1.0)
    """))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--follow-imports=silent", str(snippet)], capture_output=True,
                          text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
