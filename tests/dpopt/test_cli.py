"""The ``dpopt`` command line, driven through ``main(argv)`` and a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpopt.cli import build_parser, main
from dpopt.cli_io import parse_spec, read_points, write_text_safely

COMMANDS = [
    ["demo"],
    ["design"],
    ["verify"],
    ["account"],
    ["account", "convert"],
    ["account", "compose"],
    ["account", "subsample"],
    ["calibrate"],
    ["calibrate", "gaussian"],
    ["calibrate", "pufferfish"],
    ["figures"],
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def assert_one_line_error(err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("dpopt: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, err)


# ----------------------------------------------------------------------------- skeleton


def test_parser_builds() -> None:
    assert build_parser().prog == "dpopt"


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
def test_help_on_every_command_has_an_example(
    cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run([*cmd, "--help"], capsys)
    assert code == 0, err
    assert out.startswith(f"usage: dpopt {' '.join(cmd)}")
    assert "example" in out
    assert f"dpopt {cmd[0]}" in out.split("example", 1)[1]


def test_top_level_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    for c in ("demo", "design", "verify", "account", "calibrate", "figures"):
        assert c in out
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.startswith("dpopt ")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([], capsys)
    assert code == 2 and "COMMAND" in err
    code, _, err = run(["frobnicate"], capsys)
    assert code == 2 and "invalid choice" in err
    code, _, err = run(["calibrate", "gaussian", "--epsilon", "1", "--delta", "2"], capsys)
    assert code == 2 and "--delta" in err and "Traceback" not in err


def test_quiet_and_debug_accepted_after_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["demo", "-q", "--debug", "--help"], capsys)
    assert code == 0 and "--quiet" in out


def test_missing_domain_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.csv"
    code, _, err = run(
        [
            "design",
            "--domain",
            str(missing),
            "--uniform-query",
            "--budget",
            "gdp:mu=1",
            "-o",
            str(tmp_path / "o.json"),
        ],
        capsys,
    )
    assert code == 2
    assert_one_line_error(err, "not found", "nope.csv")


# ----------------------------------------------------------------------------- input helpers


def test_parse_spec() -> None:
    assert parse_spec("Grid:lo=0, hi=1,n=5") == ("grid", {"lo": "0", "hi": "1", "n": "5"})
    assert parse_spec("box") == ("box", {})
    for bad in ("", ":a=1", "grid:lo", "grid:lo=1,lo=2", "grid:=3", "grid:a=1,,b=2"):
        with pytest.raises(ValueError, match="spec"):
            parse_spec(bad)


def test_read_points_csv_npy(tmp_path: Path) -> None:
    pts = np.array([[0.0, 1.0], [0.5, 0.25], [1.0, -2.0]])
    (tmp_path / "h.csv").write_text("x,y\n" + "\n".join(f"{a},{b}" for a, b in pts) + "\n")
    (tmp_path / "n.csv").write_text("\n".join(f"{a}, {b}" for a, b in pts) + "\n")
    np.save(tmp_path / "p.npy", pts)
    for name in ("h.csv", "n.csv", "p.npy"):
        np.testing.assert_array_equal(read_points(tmp_path / name), pts)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("x,y\n0,1\nnan,2\n", "finite"),
        ("x,y\n0,1\n,2\n", "finite"),
        ("x,y\n0,1\nabc,2\n", "must be a number"),
        ("x,y\n0,1\ninf,2\n", "finite"),
        ("", "empty"),
        ("x,y\n", "no data"),
    ],
)
def test_read_points_rejects_bad_csv(tmp_path: Path, content: str, needle: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(content)
    with pytest.raises(Exception, match=needle) as info:
        read_points(f)
    from dpopt.errors import DpoptError

    assert isinstance(info.value, DpoptError)
    assert "\n" not in str(info.value)


def test_write_text_safely_refuses_overwrite(tmp_path: Path) -> None:
    f = tmp_path / "out.json"
    write_text_safely(f, "a", force=False)
    with pytest.raises(Exception, match="--force"):
        write_text_safely(f, "b", force=False)
    assert f.read_text() == "a"
    write_text_safely(f, "c", force=True)
    assert f.read_text() == "c"
    with pytest.raises(Exception, match="does not exist"):
        write_text_safely(tmp_path / "no" / "x.json", "a", force=False)


# ----------------------------------------------------------------------------- subprocess


def test_subprocess_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpopt.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert "usage: dpopt" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "dpopt.cli", "verify", "/nonexistent/file.json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("dpopt: error:")
