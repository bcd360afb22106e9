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


# ------------------------------------------------------------------ one privacy-report shape

REPORT_KEYS = {"schema", "approximate", "mahalanobis_bound", "zcdp_rho", "gdp_mu", "rdp",
               "epsilon_for_delta", "delta_for_epsilon", "mi_nats"}


def _assert_report_shape(rep: dict, q: float) -> None:  # type: ignore[type-arg]
    import math

    assert set(rep) == REPORT_KEYS and rep["schema"] == "dpopt.privacy-report/1"
    assert rep["mahalanobis_bound"] == pytest.approx(q, rel=1e-12)
    # closed forms of a Gaussian with Mahalanobis bound q: zCDP q/2, GDP sqrt(q), RDP a q / 2
    assert rep["zcdp_rho"] == pytest.approx(q / 2, rel=1e-12)
    assert rep["gdp_mu"] == pytest.approx(math.sqrt(q), rel=1e-12)
    assert rep["rdp"] and all(set(r) == {"alpha", "epsilon"} for r in rep["rdp"])
    for r in rep["rdp"]:
        assert r["epsilon"] == pytest.approx(r["alpha"] * q / 2, rel=1e-12)
    assert all(set(r) == {"delta", "epsilon"} for r in rep["epsilon_for_delta"])
    assert all(set(r) == {"epsilon", "delta"} for r in rep["delta_for_epsilon"])
    json.dumps(rep, allow_nan=False)


def test_one_report_shape_everywhere(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.accounting.budgets import privacy_report

    _assert_report_shape(privacy_report(1.0).to_dict(), 1.0)
    code, out, _ = run(["account", "convert", "gdp:mu=1", "--json"], capsys)
    assert code == 0
    _assert_report_shape(json.loads(out)["privacy"], 1.0)
    design = tmp_path / "d.json"
    code, out, _ = run([*DESIGN, "-o", str(design), "--json", "-q"], capsys)
    assert code == 0
    designed = json.loads(out)["privacy"]
    _assert_report_shape(designed, designed["mahalanobis_bound"])
    code, out, _ = run(["verify", str(design), "--json", "-q"], capsys)
    assert code == 0
    verified = json.loads(out)["privacy"]
    _assert_report_shape(verified, verified["mahalanobis_bound"])
    assert verified["mahalanobis_bound"] <= 1.0 * (1 + 1e-12)     # gdp:mu=1 -> q = 1


def test_report_values_beyond_double_range_are_null() -> None:
    from dpopt.accounting.budgets import privacy_report

    rep = privacy_report(1e308).to_dict(alphas=[1.5, 64.0])
    assert rep["rdp"][0]["epsilon"] == pytest.approx(7.5e307)
    assert rep["rdp"][1]["epsilon"] is None                      # 64 * 1e308 / 2 overflows
    json.dumps(rep, allow_nan=False)


def test_figures_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.figures.__main__ import FIGURES

    code, out, _ = run(["figures", "--list", "--json"], capsys)
    assert code == 0
    listed = json.loads(out)["figures"]
    assert [f["name"] for f in listed] == list(FIGURES)
    assert all(f["description"] for f in listed)


# ------------------------------------------------------------------ unambiguous option names


def test_denoiser_sigma_and_its_deprecated_alias(capsys: pytest.CaptureFixture[str]) -> None:
    code, new, err = run(["demo", "--no-save", "--denoiser-sigma", "0.4", "--json", "-q"], capsys)
    assert code == 0 and "deprecated" not in err
    code, old, err = run(["demo", "--no-save", "--sigma", "0.4", "--json", "-q"], capsys)
    assert code == 0 and "--sigma is deprecated; use --denoiser-sigma" in err
    assert json.loads(new)["total_error"] == json.loads(old)["total_error"]
    code, out, _ = run(["design", "--help"], capsys)
    assert "--denoiser-sigma" in out and "--sigma " not in out.replace("--denoiser-sigma ", "")


def test_noise_multiplier_and_its_deprecated_alias(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["account", "subsample", "--sampling", "poisson", "--rate", "0.0042667", "--steps",
            "3516", "--json"]
    code, new, err = run([*argv, "--noise-multiplier", "1.3"], capsys)
    assert code == 0 and "deprecated" not in err
    code, old, err = run([*argv, "--sigma", "1.3"], capsys)
    assert code == 0 and "--sigma is deprecated; use --noise-multiplier" in err
    assert json.loads(new)["privacy"] == json.loads(old)["privacy"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "--noise-multiplier" in err and "--sigma" not in err
    code, out, _ = run(["account", "subsample", "--help"], capsys)
    assert "--noise-multiplier" in out and "--sigma" not in out


def _doc_commands() -> list[list[str]]:
    import re
    import shlex

    root = Path(__file__).resolve().parents[3]
    files = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    commands = []
    for path in files:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                if words and words[0].endswith("dpopt"):
                    commands.append(words[1:])
    return commands


def test_every_documented_command_line_parses(capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.cli import build_parser

    commands = _doc_commands()
    assert len(commands) >= 10
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)                 # exits (SystemExit) on an unknown option
        assert "deprecated" not in capsys.readouterr().err, argv


# ------------------------------------------------------------------ large designs


class _HugeSource:
    """A stand-in VectorSource with an enormous count whose first chunks are cheap."""

    def __init__(self, count: int, dim: int = 2) -> None:
        self.count, self.dim = count, dim

    def chunks(self, size: int = 65536):  # type: ignore[no-untyped-def]
        import numpy as np

        yield 0, np.ones((size, self.dim))
        yield size, np.ones((size, self.dim))  # the second, warm chunk is the one timed
        raise AssertionError("only two chunks may be generated for the estimate")


def _ctx():  # type: ignore[no-untyped-def]
    import io

    from dpopt.cli.common import Context

    return Context(io.StringIO(), io.StringIO(), quiet=False)


def test_large_design_estimate_and_confirmation() -> None:
    from dpopt.cli.common import UsageError
    from dpopt.cli.options import announce_large_design

    ctx = _ctx()
    announce_large_design(ctx, _HugeSource(10**7), confirmed=False)     # at the limit: silent
    assert ctx.err.getvalue() == ""
    announce_large_design(ctx, _HugeSource(5 * 10**8, 20), confirmed=False)
    said = ctx.err.getvalue()
    assert "5e+08 sensitivity vectors in R^20" in said and "80 GB" in said and "passes" in said
    with pytest.raises(UsageError, match="--yes"):
        announce_large_design(_ctx(), _HugeSource(5 * 10**11), confirmed=False)
    announce_large_design(_ctx(), _HugeSource(5 * 10**11), confirmed=True)


def test_huge_design_needs_yes_on_the_command_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # 10^6 grid points: 5e11 two-record vectors (the case that used to start silently)
    code, _, err = run(["design", "--domain", "grid:lo=0,hi=1,n=1000,d=2", "--query", "0.5,0.5",
                        "--denoiser-sigma", "0.3", "--budget", "gdp:mu=1",
                        "-o", str(tmp_path / "d.json")], capsys)
    assert code == 2
    assert "large design: 5e+11 sensitivity vectors" in err and "--yes" in err
    assert not (tmp_path / "d.json").exists()


# ------------------------------------------------------------------ progress only on a terminal


class _Terminal:
    def __init__(self) -> None:
        import io

        self.buffer = io.StringIO()

    def write(self, text: str) -> int:
        return self.buffer.write(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal() -> None:
    import io

    from dpopt.cli.common import Context

    log = io.StringIO()                                    # a log file or a pipe
    ctx = Context(io.StringIO(), log, quiet=False)
    assert list(ctx.progress(range(50), desc="work")) == list(range(50))
    with ctx.stage("solving"):
        pass
    assert log.getvalue() == ""
    tty = _Terminal()
    ctx = Context(io.StringIO(), tty, quiet=False)         # type: ignore[arg-type]
    with ctx.stage("solving"):
        assert "solving" in tty.buffer.getvalue()
    assert "0/1" not in tty.buffer.getvalue()
    quiet = _Terminal()
    ctx = Context(io.StringIO(), quiet, quiet=True)        # type: ignore[arg-type]
    list(ctx.progress(range(5), desc="work"))
    with ctx.stage("solving"):
        pass
    assert quiet.buffer.getvalue() == ""


# ------------------------------------------------------------------ no silent overwrite


def _fake_figure(out_dir: Path) -> list[Path]:
    (out_dir / "sub").mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "fake.csv", out_dir / "sub" / "fake.png"]
    for p in paths:
        p.write_text("new")
    print(f"wrote {paths[0]}")
    return paths


def test_figures_keep_earlier_results_without_force(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dpopt.figures import __main__ as registry

    monkeypatch.setitem(registry.FIGURES, "fake",
                        (f"{__name__}:_fake_figure", "a quick stand-in figure"))
    out = tmp_path / "results"
    code, stdout, _ = run(["figures", "fake", "--out-dir", str(out), "-q"], capsys)
    assert code == 0 and (out / "sub" / "fake.png").read_text() == "new"
    assert f"wrote {out / 'fake.csv'}" in stdout           # the temporary folder never shows
    (out / "fake.csv").write_text("mine")
    code, _, err = run(["figures", "fake", "--out-dir", str(out), "-q"], capsys)
    assert code == 2 and "--force" in err and (out / "fake.csv").read_text() == "mine"
    code, stdout, _ = run(["figures", "fake", "--out-dir", str(out), "--force", "--json", "-q"],
                          capsys)
    assert code == 0 and (out / "fake.csv").read_text() == "new"
    assert json.loads(stdout)["written"]["fake"] == [str(out / "fake.csv"),
                                                     str(out / "sub" / "fake.png")]
    assert sorted(p.name for p in out.iterdir()) == ["fake.csv", "sub"]   # no temporary left


# ------------------------------------------------------------------ wording


def test_output_wording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.cli.options import less_error, one_plus

    assert one_plus(-1e-12) == "(1 - 1e-12)" and one_plus(3e-9) == "(1 + 3e-09)"
    assert one_plus(0.0) == "(1 + 0)"
    assert less_error(1.0) == "the same error as isotropic noise"
    assert less_error(1.3123) == "23.8 % less error than isotropic noise"
    design = tmp_path / "d.json"
    code, out, _ = run(["design", "--domain", "grid:lo=0,hi=1,n=4,d=2", "--query", "0.3,0.6",
                        "--denoiser-sigma", "0.4", "--budget", "gdp:mu=1", "-o", str(design),
                        "-q"], capsys)
    assert code == 0 and "% less error than isotropic noise" in out and "x less" not in out
    code, out, _ = run(["verify", str(design), "-q"], capsys)
    assert code == 0 and "+ -" not in out and "strictly feasible as stored" in out
