"""Command-line consistency: pictures, option names, JSON shapes, overwrites, wording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpopt.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DESIGN = ["design", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--uniform-query",
          "--budget", "gdp:mu=1"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# ------------------------------------------------------------------ --plot


def test_design_plot_writes_a_picture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png, out = tmp_path / "d.png", tmp_path / "d.json"
    code, stdout, _ = run([*DESIGN, "-o", str(out), "--plot", str(png), "-q"], capsys)
    assert code == 0 and png.read_bytes()[:8] == PNG_MAGIC
    assert f"drew the design to {png}" in stdout
    svg = tmp_path / "d.svg"
    code, stdout, _ = run(["demo", "--no-save", "--plot", str(svg), "--json", "-q"], capsys)
    assert code == 0 and json.loads(stdout)["plot"] == str(svg)
    assert svg.read_text().lstrip().startswith("<?xml")


def test_design_plot_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "keep.png"
    png.write_bytes(b"mine")
    code, _, err = run([*DESIGN, "-o", str(tmp_path / "d.json"), "--plot", str(png)], capsys)
    assert code == 2 and "already exists" in err and png.read_bytes() == b"mine"
    assert not (tmp_path / "d.json").exists()        # refused before any work was done
    code, _, _ = run([*DESIGN, "-o", str(tmp_path / "d.json"), "--plot", str(png), "--force",
                      "-q"], capsys)
    assert code == 0 and png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("name", ["d.txt", "d", "d.json"])
def test_design_plot_needs_an_image_name(name: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([*DESIGN, "-o", str(tmp_path / "x.json"), "--plot",
                        str(tmp_path / name)], capsys)
    assert code == 2 and "--plot" in err
