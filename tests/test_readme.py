"""The README's Python examples run as written (documentation that cannot silently rot)."""

import pathlib
import re
import warnings

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index: int, tmp_path: pathlib.Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    code = BLOCKS[index]
    if "dpopt-demo.json" in code:  # the example that reads the demo's output: make it first
        from dpopt.cli import main

        assert main(["demo", "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, f"README.md[python block {index}]", "exec"), {"__name__": "__readme__"})
