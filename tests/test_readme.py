"""The Python examples of the README and of the documentation site run as written.

Every ```python block of README.md and of docs/**/*.md is executed in a fresh namespace, with a
temporary folder as the working directory (so examples that write files leave nothing behind).
A block preceded by the line ``<!-- no-test -->`` is shown but not run (for examples that need
resources a test cannot have).
"""

from __future__ import annotations

import pathlib
import re
import sys
import types
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"(<!-- no-test -->\s*\n)?```python\n(.*?)```", flags=re.S)


def python_blocks(path: pathlib.Path) -> list[tuple[str, bool]]:
    """The (code, skip) pairs of the ```python blocks of a Markdown file, in order."""
    text = path.read_text(encoding="utf-8")
    return [(m.group(2), m.group(1) is not None) for m in _BLOCK.finditer(text)]


def _cases() -> list[tuple[pathlib.Path, int]]:
    files = [README, *sorted(DOCS.rglob("*.md"))]
    return [(path, i) for path in files for i in range(len(python_blocks(path)))]


CASES = _cases()


def test_readme_has_examples() -> None:
    assert len(python_blocks(README)) >= 1
    assert len(CASES) >= 8


def test_no_test_marker_is_recognised(tmp_path: pathlib.Path) -> None:
    text = "a\n<!-- no-test -->\n```python\nraise SystemExit\n```\n```python\nx = 1\n```\n"
    probe = tmp_path / "probe.md"
    probe.write_text(text, encoding="utf-8")
    assert python_blocks(probe) == [("raise SystemExit\n", True), ("x = 1\n", False)]


@pytest.mark.parametrize(("path", "index"), CASES,
                         ids=[f"{p.relative_to(ROOT)}[{i}]" for p, i in CASES])
def test_markdown_block_runs(path: pathlib.Path, index: int, tmp_path: pathlib.Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    code, skip = python_blocks(path)[index]
    if skip:
        pytest.skip("marked <!-- no-test -->")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if "dpopt-demo.json" in code and "main([\"demo\"" not in code:
        from dpopt.cli import main  # the example reads the demo's output: make it first

        assert main(["demo", "-q"]) == 0
    name = f"{path.relative_to(ROOT)}[python block {index}]"
    module = types.ModuleType("__docs__")  # a real module: dataclasses in examples need one
    monkeypatch.setitem(sys.modules, "__docs__", module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, name, "exec"), module.__dict__)
    try:
        import matplotlib.pyplot as plt

        plt.close("all")
    except ImportError:  # pragma: no cover - matplotlib is optional
        pass
