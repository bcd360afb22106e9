"""The ``dpopt`` command line, driven through ``main(argv)`` and a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpopt.cli import build_parser, main
from dpopt.cli.common import read_points, write_text_safely
from dpopt.covariance.description import parse_spec

COMMANDS = [
    ["demo"],
    ["design"],
    ["verify"],
    ["account"],
    ["account", "convert"],
    ["account", "compose"],
    ["account", "subsample"],
    ["account", "dpsgd"],
    ["account", "schedule"],
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
    for name in ("n.csv", "p.npy"):
        np.testing.assert_array_equal(read_points(tmp_path / name), pts)
    np.testing.assert_array_equal(read_points(tmp_path / "h.csv", header=True), pts)


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
        read_points(f, header=True)
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
        [sys.executable, "-m", "dpopt.cli", "verify", "/nonexistent/file.json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("dpopt: error:")
    assert proc.stdout == ""
    # a non-UTF-8 terminal gets escapes, not a crash
    import os

    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpopt.cli",
            "calibrate",
            "gaussian",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3.730631635" in proc.stdout


# ----------------------------------------------------------------------------- account, calibrate


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_account_convert_gdp_matches_math_md(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(
        ["account", "convert", "gdp:mu=1", "--delta", "1e-5", "--epsilon", "1", "--alpha", "2"],
        capsys,
    )
    rep = res["privacy"]
    assert rep["mahalanobis_bound"] == pytest.approx(1.0, rel=1e-9)
    assert rep["zcdp_rho"] == pytest.approx(0.5, rel=1e-9)
    assert rep["gdp_mu"] == pytest.approx(1.0, rel=1e-9)
    assert rep["rdp"] == [{"alpha": 2.0, "epsilon": pytest.approx(1.0, rel=1e-9)}]
    assert rep["epsilon_for_delta"][0]["epsilon"] == pytest.approx(4.37717809568, rel=1e-6)
    assert rep["delta_for_epsilon"][0]["delta"] == pytest.approx(0.126936737506644, rel=1e-6)
    assert rep["approximate"] is False


@pytest.mark.parametrize(
    ("specs", "bound"),
    [
        (["approx:epsilon=1,delta=1e-5"], 0.0718514046548),
        (["approx:epsilon=5,delta=1e-10"], 0.609610300836),
        (["zcdp:rho=0.25"], 0.5),
        (["rdp:alpha=8,epsilon=1"], 0.25),  # eps_a = a q / 2
        (["mi:kappa=0.1"], 0.8865867397),
        (["approx:epsilon=1,delta=1e-5&gdp:mu=0.1"], 0.01),
        (["approx:epsilon=1,delta=1e-5", "gdp:mu=0.1"], 0.01),  # strictest wins
    ],
)
def test_account_convert_bounds(
    specs: list[str], bound: float, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_json(["account", "convert", *specs], capsys)
    q = res["privacy"]["mahalanobis_bound"]
    assert q == pytest.approx(bound, rel=1e-6)
    # privacy is correctness: never a larger bound (less noise) than the reference
    assert q <= bound * (1 + 1e-9)


def test_account_convert_text_and_bad_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["account", "convert", "approx:epsilon=1,delta=1e-6"], capsys)
    assert code == 0, err
    assert "Mahalanobis bound" in out and "GDP" in out and "zCDP" in out
    for bad in ("approx:epsilon=1", "foo:x=1", "gdp:mu=-1", "approx:epsilon=1,delta=2", "gdp"):
        code, out, err = run(["account", "convert", bad], capsys)
        assert code == 2, (bad, out)
        assert_one_line_error(err)


def test_account_compose(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_json(["account", "compose", "0.5", "1", "2", "--delta", "1e-5"], capsys)
    assert res["mu"] == pytest.approx(2.29128784748, rel=1e-9)
    assert res["privacy"]["mahalanobis_bound"] == pytest.approx(2.29128784748**2, rel=1e-9)


EPS_14063 = 2.32436166284  # Balle-Wang root at mu above, delta 1e-5 (mpmath, 40 digits)


@pytest.mark.parametrize(
    ("sampling", "sigma", "epochs", "mu", "eps"),
    [
        # whole step counts: T = ceil(E N / B) = 3516 and 14063 (mpmath references)
        ("poisson", 1.3, 15, 0.227286288343, None),
        # without replacement: replace-one sensitivity 2C, so σ = 2.6 per C is the CLT at 1.3
        ("without_replacement", 2.6, 15, 0.284725866495, None),
        ("poisson", 1.1, 60, 0.573601470392, EPS_14063),
    ],
)
def test_account_subsample_clt(
    sampling: str,
    sigma: float,
    epochs: int,
    mu: float,
    eps: float | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "account",
        "subsample",
        "--sampling",
        sampling,
        "--dataset-size",
        "60000",
        "--batch-size",
        "256",
        "--noise-multiplier",
        str(sigma),
        "--epochs",
        str(epochs),
        "--delta",
        "1e-5",
        "--no-certified",
    ]
    res = run_json(argv, capsys)
    assert res["approximate"] is True and res["privacy"]["approximate"] is True
    assert res["steps"] == (3516 if epochs == 15 else 14063)
    assert res["mu"] == pytest.approx(mu, rel=1e-8)
    if eps is not None:
        assert res["privacy"]["epsilon_for_delta"][0]["epsilon"] == pytest.approx(eps, rel=1e-5)
    code, out, _ = run(argv, capsys)
    assert code == 0 and "APPROXIMATE" in out


def test_account_subsample_bad_combinations(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["account", "subsample", "--noise-multiplier", "1"]
    for extra in (
        ["--steps", "10"],  # no rate
        ["--rate", "0.1"],  # no steps/epochs
        ["--rate", "0.1", "--steps", "10", "--epochs", "2"],
        ["--rate", "0.1", "--batch-size", "5", "--dataset-size", "10", "--steps", "3"],
        ["--batch-size", "20", "--dataset-size", "10", "--steps", "3"],
    ):
        code, _, err = run(base + extra, capsys)
        assert code == 2, extra
        assert_one_line_error(err)


@pytest.mark.parametrize(
    ("eps", "delta", "sens", "sigma"),
    [
        (1.0, 1e-5, 1.0, 3.73063163482),
        (0.5, 1e-5, 1.0, 7.03182667558),
        (5.0, 1e-10, 1.0, 1.28077797789),
        (1.0, 1e-6, 2.5, 2.5 * 4.22467888933),
    ],
)
def test_calibrate_gaussian_balle_wang(
    eps: float, delta: float, sens: float, sigma: float, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["calibrate", "gaussian", "--epsilon", str(eps), "--delta", str(delta)]
    res = run_json([*argv, "--sensitivity", str(sens)], capsys)
    assert res["noise_std"] == pytest.approx(sigma, rel=1e-6)
    assert res["noise_std"] >= sigma * (1 - 1e-9)  # never under-noise
    # the budget-spec route agrees
    spec = f"approx:epsilon={eps},delta={delta}"
    res2 = run_json(["calibrate", "gaussian", "--budget", spec, "--sensitivity", str(sens)], capsys)
    assert res2["noise_std"] == pytest.approx(sigma, rel=1e-6)


def test_calibrate_gaussian_bad_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["calibrate", "gaussian", "--epsilon", "1"],
        ["calibrate", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--budget", "gdp:mu=1"],
        ["calibrate", "gaussian", "--budget", "approx:epsilon=x,delta=1e-5"],
    ):
        code, _, err = run(argv, capsys)
        assert code == 2, argv
        assert_one_line_error(err)


def _r1_csv(path: Path) -> Path:
    """R1 as samples: P = {0: .5, 1: .3, 2: .2}, Q = {0: .2, 1: .3, 2: .3, 3: .2}."""
    rows = ["group,value"]
    for v, n in ((0, 5), (1, 3), (2, 2)):
        rows += [f"a,{v}"] * n
    for v, n in ((0, 2), (1, 3), (2, 3), (3, 2)):
        rows += [f"b,{v}"] * n
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("noise", "alpha", "eps", "scale", "winf"),
    [
        ("laplace", 2.0, 1.0, 0.646254278, 0.715333491),
        ("laplace", 5.0, 0.5, 1.43783448, 1.54714418),
        ("gaussian", 2.0, 1.0, 0.933837327, 1.0),
        ("gaussian", 5.0, 0.5, 2.13409211, 2.23606798),
    ],
)
def test_calibrate_pufferfish_r1(
    tmp_path: Path,
    noise: str,
    alpha: float,
    eps: float,
    scale: float,
    winf: float,
    capsys: pytest.CaptureFixture[str],
) -> None:
    csv = _r1_csv(tmp_path / "r1.csv")
    argv = ["calibrate", "pufferfish", str(csv), "--secret", "group", "--query", "value"]
    argv += ["--alpha", str(alpha), "--epsilon", str(eps), "--noise", noise]
    res = run_json(argv, capsys)
    assert res["scale"] == pytest.approx(scale, rel=1e-6)
    assert res["scale"] >= scale * (1 - 1e-8)  # never under-noise
    assert res["winf_baseline_scale"] == pytest.approx(winf, rel=1e-6)
    assert res["certified"] is True
    code, out, _ = run(argv, capsys)
    assert code == 0 and "W_inf baseline" in out


def test_calibrate_pufferfish_bad_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--secret", "group", "--query", "value", "--alpha", "2", "--epsilon", "1"]
    nan = tmp_path / "nan.csv"
    nan.write_text("group,value\na,1\na,\nb,2\n")
    text = tmp_path / "text.csv"
    text.write_text("group,value\na,1\na,zz\nb,2\n")
    one = tmp_path / "one.csv"
    one.write_text("group,value\na,1\na,2\n")
    cases = [
        (nan, base, "missing"),
        (text, base, "must be a number"),
        (one, base, "two distinct"),
        (tmp_path / "absent.csv", base, "not found"),
        (_r1_csv(tmp_path / "r1.csv"), ["--secret", "nope", *base[2:]], "'nope'"),
        (_r1_csv(tmp_path / "r1.csv"), [*base[:4], "--alpha", "1", "--epsilon", "1"], "alpha"),
    ]
    for path, extra, needle in cases:
        code, _, err = run(["calibrate", "pufferfish", str(path), *extra], capsys)
        assert code == 2, (path, err)
        assert_one_line_error(err, needle)


# ----------------------------------------------------------------------------- figures


def test_figures_list_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dpopt.figures.__main__ as registry

    code, out, _ = run(["figures", "--list"], capsys)
    assert code == 0
    for name in registry.FIGURES:
        assert name in out

    def good(out_dir: Path) -> list[Path]:
        p = out_dir / "good.txt"
        p.write_text("ok")
        return [p]

    def bad(out_dir: Path) -> list[Path]:
        raise RuntimeError("boom")

    monkeypatch.setattr(registry, "FIGURES", {"good": ("x:good", "a"), "bad": ("x:bad", "b")})
    monkeypatch.setattr(registry, "resolve", lambda name: {"good": good, "bad": bad}[name])
    out_dir = tmp_path / "res"
    code, out, err = run(["figures", "good", "--out-dir", str(out_dir)], capsys)
    assert code == 0 and (out_dir / "good.txt").read_text() == "ok"
    assert "good:" in out
    code, out, err = run(["-q", "figures", "all", "--out-dir", str(out_dir), "--force"], capsys)
    assert code == 1 and "bad: FAILED" in err and "boom" in err and "good:" in out
    code, _, err = run(["figures", "nope"], capsys)
    assert code == 2
    assert_one_line_error(err, "nope")


# ----------------------------------------------------------------------------- demo, design, verify

Q_APPROX_1_1EM6 = 0.0560289638253  # Balle & Wang: q*(eps=1, delta=1e-6)


def _softmax_mean(data: np.ndarray, g: np.ndarray, sigma: float) -> np.ndarray:
    """Ideal denoiser m_g(D) computed directly (posterior mean), independent of dpopt."""
    logw = -np.sum((data - g) ** 2, axis=1) / (2 * sigma**2)
    w = np.exp(logw - logw.max())
    return (w / w.sum()) @ data


def _design_argv(tmp_path: Path, name: str, *extra: str) -> list[str]:
    return ["-q", "design", *extra, "-o", str(tmp_path / name)]


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("demo") / "demo.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["-q", "demo", "-o", str(out), "--json"])
    assert code == 0
    return out, json.loads(buf.getvalue())


def test_demo_certified_and_private(demo_file: tuple[Path, dict]) -> None:
    path, res = demo_file
    assert path.exists() and res["output"] == str(path)
    assert res["certified"] is True
    assert res["budget_bound"] == pytest.approx(Q_APPROX_1_1EM6, rel=1e-9)
    assert res["budget_bound"] <= Q_APPROX_1_1EM6 * (1 + 1e-12)
    lo, up = res["certified_interval"]
    assert lo <= up and up == pytest.approx(res["total_error"], rel=1e-12)
    assert res["gap"] < 1e-6
    assert res["improvement"] > 1.2  # beats isotropic noise on the built-in example
    eps_at = {r["delta"]: r["epsilon"] for r in res["privacy"]["epsilon_for_delta"]}
    assert eps_at[1e-6] <= 1.0 + 1e-9
    # independent privacy check: every deletion shift of random datasets from the grid, and
    # every ordered two-record vector, has s^T Sigma^-1 s <= q (the two-record theorem, brute force)
    cov = np.asarray(res["covariance"])
    prec = np.linalg.inv(cov)
    axis = np.linspace(0, 1, 5)
    grid = np.array([[a, b] for a in axis for b in axis])
    g, sigma = np.array(res["query"]), res["denoiser_sigma"]
    worst = 0.0
    for x in grid:
        for y in grid:
            if np.array_equal(x, y):
                continue
            t = _softmax_mean(np.array([x, y]), g, sigma) - y
            worst = max(worst, float(t @ prec @ t))
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 8))
        data = grid[rng.integers(0, len(grid), n)]
        m = _softmax_mean(data, g, sigma)
        for k in range(n):
            s = m - _softmax_mean(np.delete(data, k, axis=0), g, sigma)
            worst = max(worst, float(s @ prec @ s))
    assert worst <= res["budget_bound"] * (1 + 1e-9)
    assert worst >= 0.99 * res["budget_bound"]  # the constraint is active: no wasted noise


def test_demo_says_which_path_answered(demo_file: tuple[Path, dict], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON and the printed summary name the solver path (structured, a closed form or a
    fallback), the one the certificate file records."""
    path, res = demo_file
    assert res["path"].startswith("structured")
    stored = json.loads(path.read_text())
    assert stored["versions"]["produced_by"] == res["path"]
    code, out, _ = run(["demo", "-o", str(tmp_path / "d.json")], capsys)
    assert code == 0
    assert f"answer from:           {res['path']}" in out


def test_demo_refuses_overwrite_then_force(
    demo_file: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = demo_file
    before = path.read_text()
    code, _, err = run(["-q", "demo", "-o", str(path)], capsys)
    assert code == 2
    assert_one_line_error(err, "already exists", "--force")
    assert path.read_text() == before


def test_verify_round_trip_and_tamper(
    demo_file: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, res = demo_file
    code, out, err = run(["verify", str(path)], capsys)
    assert code == 0, err
    assert "certificate holds" in out
    code, out, _ = run(["verify", str(path), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["holds"] is True
    assert data["certified_interval"] == pytest.approx(res["certified_interval"], rel=1e-9)
    code, out, _ = run(["verify", str(path), "--json", "--rigorous"], capsys)
    data = json.loads(out)
    assert code == 0 and data["rigorous"] is True
    lo, up = data["certified_interval"]
    assert lo <= res["total_error"] <= up * (1 + 1e-12)
    # tamper: shrink the covariance (less noise) -> must fail with exit 1
    content = json.loads(path.read_text())
    content["covariance"] = (0.5 * np.asarray(content["covariance"])).tolist()
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(content))
    code, out, err = run(["verify", str(bad)], capsys)
    assert code == 1 and "does NOT hold" in out and err == ""
    code, out, _ = run(["verify", str(bad), "--json"], capsys)
    assert code == 1 and json.loads(out)["holds"] is False
    # tamper + recomputed hash: the re-check itself must reject the smaller covariance
    import hashlib

    body = {k: v for k, v in content.items() if k != "sha256"}
    content["sha256"] = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    bad.write_text(json.dumps(content))
    code, out, _ = run(["verify", str(bad)], capsys)
    assert code == 1 and "does NOT hold" in out
    # a missing file -> exit 2; content that is not a certificate -> rejected, exit 1
    code, _, err = run(["verify", str(tmp_path / "missing.json")], capsys)
    assert code == 2
    assert_one_line_error(err, "not found")
    notjson = tmp_path / "x.json"
    notjson.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something-else"}))
    for target, needle in ((notjson, "not valid JSON"),
                           (other, "format: 'something-else' is not a certificate kind")):
        code, out, err = run(["verify", str(target)], capsys)
        assert code == 1 and err == ""
        assert "does NOT hold" in out and needle in out


@pytest.mark.parametrize(
    ("extra", "value"),
    [
        # uniform query on [0,1]^2, W = I, q = 1 (gdp:mu=1): (sum sqrt W_ii)^2 / q = 4
        (["--budget", "gdp:mu=1"], 4.0),
        # replacement relation: bound q/4 on the add/remove set (the x4 rule) -> 16
        (["--budget", "gdp:mu=1", "--relation", "replacement"], 16.0),
        # two budgets: the strictest (zcdp rho = 0.125 -> q = 0.25) wins -> 16
        (["--budget", "gdp:mu=1", "--budget", "zcdp:rho=0.125"], 16.0),
    ],
)
def test_design_uniform_query_closed_form(
    extra: list[str], value: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _design_argv(
        tmp_path, "u.json", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--uniform-query", *extra
    )
    res = run_json([*argv, "--rigorous"], capsys)
    assert res["certified"] is True and res["rigorous"] is True
    assert res["certified_interval"][0] <= value * (1 + 1e-9)  # proven lower bound
    assert res["total_error"] == pytest.approx(value, rel=1e-6)
    assert res["total_error"] >= value * (1 - 1e-6)
    code, _, err = run(["verify", str(tmp_path / "u.json")], capsys)
    assert code == 0, err


def test_design_weight_file_and_csv_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "w.npy", np.diag([1.0, 4.0]))
    # box vertices as a CSV point set: uniform query differences include (+-1, +-1)
    (tmp_path / "pts.csv").write_text("x,y\n0,0\n1,0\n0,1\n1,1\n")
    argv = _design_argv(
        tmp_path,
        "w.json",
        "--domain",
        str(tmp_path / "pts.csv"),
        "--header",
        "--uniform-query",
        "--budget",
        "gdp:mu=1",
        "--weight",
        str(tmp_path / "w.npy"),
    )
    res = run_json(argv, capsys)
    # diagonal W: (sum_i sqrt W_ii)^2 / q = 9 (cube closed form)
    assert res["total_error"] == pytest.approx(9.0, rel=1e-6)
    code, _out, err = run(["verify", str(tmp_path / "w.json")], capsys)
    assert code == 0, err


def test_design_query_round_trip_via_console_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d.json"
    argv = ["-q", "design", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--query", "0.3,0.6"]
    argv += ["--denoiser-sigma", "0.4", "--budget", "approx:epsilon=1,delta=1e-6",
             "--noise-floor", "1e-3"]
    code, stdout, err = run([*argv, "-o", str(out)], capsys)
    assert code == 0, err
    assert "CERTIFIED" in stdout and "isotropic baseline" in stdout
    exe = Path(sys.executable).with_name("dpopt")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dpopt.cli"]
    proc = subprocess.run(
        [*cmd, "verify", str(out)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "certificate holds" in proc.stdout


def test_design_unstored_vectors_regenerated_by_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dpopt.cli.design as cd

    monkeypatch.setattr(cd, "MAX_STORED_FLOATS", 4)
    argv = _design_argv(
        tmp_path,
        "s.json",
        "--domain",
        "grid:lo=0,hi=1,n=3,d=2",
        "--query",
        "0.2,0.7",
        "--denoiser-sigma",
        "0.5",
        "--budget",
        "gdp:mu=0.5",
    )
    res = run_json(argv, capsys)
    assert res["certified"] is True
    content = json.loads((tmp_path / "s.json").read_text())
    assert content["problem"]["vectors"] is None
    code, _out, err = run(["verify", str(tmp_path / "s.json")], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--domain", "grid:lo=0,hi=1,n=3,d=2", "--uniform-query", "--budget", "gdp:mu"],
         "--budget"),
        (["--domain", "grid:lo=0,hi=1,n=3,d=2", "--uniform-query", "--budget", "foo:x=1"],
         "--budget"),
        (["--domain", "grid:lo=0,hi=1,n=1,d=2", "--uniform-query", "--budget", "gdp:mu=1"], "n"),
        (["--domain", "grid:lo=1,hi=0,d=2", "--uniform-query", "--budget", "gdp:mu=1"], "hi > lo"),
        (["--domain", "ball:r=1", "--uniform-query", "--budget", "gdp:mu=1"], "domain"),
        (["--domain", "grid:lo=0,hi=1,n=3,d=2", "--budget", "gdp:mu=1"], "--uniform-query"),
        (
            [
                "--domain",
                "grid:lo=0,hi=1,n=3,d=2",
                "--query",
                "0.5",
                "--denoiser-sigma",
                "1",
                "--budget",
                "gdp:mu=1",
            ],
            "2 coordinates",
        ),
        (
            [
                "--domain",
                "grid:lo=0,hi=1,n=3,d=2",
                "--query",
                "0.5,x",
                "--denoiser-sigma",
                "1",
                "--budget",
                "gdp:mu=1",
            ],
            "query",
        ),
        (
            [
                "--domain",
                "grid:lo=0,hi=1,n=3,d=2",
                "--uniform-query",
                "--query",
                "0.5,0.5",
                "--budget",
                "gdp:mu=1",
            ],
            "excludes",
        ),
        (
            [
                "--domain",
                "grid:lo=0,hi=1,n=3,d=2",
                "--uniform-query",
                "--budget",
                "gdp:mu=1",
                "--noise-floor",
                "-1",
            ],
            "--noise-floor",
        ),
    ],
)
def test_design_bad_inputs(
    extra: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(_design_argv(tmp_path, "x.json", *extra), capsys)
    assert code == 2, err
    assert_one_line_error(err, needle)
    assert not (tmp_path / "x.json").exists()


def test_design_nan_in_csv_and_bad_weight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nan.csv").write_text("x,y\n0,0\n1,nan\n0,1\n")
    code, _, err = run(
        _design_argv(
            tmp_path,
            "x.json",
            "--domain",
            str(tmp_path / "nan.csv"),
            "--header",
            "--uniform-query",
            "--budget",
            "gdp:mu=1",
        ),
        capsys,
    )
    assert code == 2
    assert_one_line_error(err, "nan.csv", "line 3", "finite")
    np.save(tmp_path / "w.npy", np.array([[1.0, 2.0], [2.0, 1.0]]))  # indefinite
    np.save(tmp_path / "w3.npy", np.eye(3))
    for w, needle in (("w.npy", "positive definite"), ("w3.npy", "2 x 2")):
        code, _, err = run(
            _design_argv(
                tmp_path,
                "x.json",
                "--domain",
                "grid:lo=0,hi=1,n=3,d=2",
                "--uniform-query",
                "--budget",
                "gdp:mu=1",
                "--weight",
                str(tmp_path / w),
            ),
            capsys,
        )
        assert code == 2, w
        assert_one_line_error(err, needle)


def test_demo_default_file_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dpopt-demo.json").write_text("earlier run")
    code, out, err = run(["-q", "demo", "--json"], capsys)
    assert code == 0
    assert "kept" in err and "--force" in err
    assert (tmp_path / "dpopt-demo.json").read_text() == "earlier run"
    assert json.loads(out)["output"] is None


# ----------------------------------------------------------------------------- properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _mp_delta(eps: float, mu: float) -> float:
    """Balle-Wang delta(eps) for mu-GDP at 40 digits (Balle & Wang), independent of dpopt."""
    import mpmath as mp

    mp.mp.dps = 40
    m, e = mp.mpf(mu), mp.mpf(eps)
    return float(mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m))


@settings(max_examples=20, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=8.0),
    log10_delta=st.floats(min_value=-12.0, max_value=-2.0),
    sens=st.floats(min_value=0.01, max_value=100.0),
)
def test_calibrate_gaussian_never_under_noises(eps: float, log10_delta: float, sens: float) -> None:
    import contextlib
    import io

    delta = 10.0**log10_delta
    outs = []
    for e in (eps, eps * 1.5):
        buf = io.StringIO()
        argv = ["calibrate", "gaussian", "--epsilon", repr(e), "--delta", repr(delta)]
        with contextlib.redirect_stdout(buf):
            assert main([*argv, "--sensitivity", repr(sens), "--json"]) == 0
        outs.append(json.loads(buf.getvalue())["noise_std"])
    sigma, sigma_larger_eps = outs
    # forward check at high precision: the released sigma meets (eps, delta)
    assert _mp_delta(eps, sens / sigma) <= delta * (1 + 1e-9)
    # and is nearly tight (not wasteful)
    assert _mp_delta(eps, sens / (sigma * (1 - 1e-6))) > delta * (1 - 1e-3)
    # monotone: a larger epsilon never needs more noise
    assert sigma_larger_eps <= sigma


@settings(max_examples=20, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=8.0),
    log10_delta=st.floats(min_value=-12.0, max_value=-2.0),
)
def test_account_convert_round_trip(eps: float, log10_delta: float) -> None:
    import contextlib
    import io

    delta = 10.0**log10_delta
    buf = io.StringIO()
    argv = ["account", "convert", f"approx:epsilon={eps!r},delta={delta!r}"]
    with contextlib.redirect_stdout(buf):
        assert main([*argv, "--delta", repr(delta), "--epsilon", repr(eps), "--json"]) == 0
    rep = json.loads(buf.getvalue())["privacy"]
    # the bound of an (eps, delta) budget gives back at most eps at delta, at most delta at eps
    assert rep["epsilon_for_delta"][0]["epsilon"] <= eps * (1 + 1e-9) + 1e-12
    assert rep["epsilon_for_delta"][0]["epsilon"] >= eps * (1 - 1e-6) - 1e-9
    assert rep["delta_for_epsilon"][0]["delta"] <= delta * (1 + 1e-9)


_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
_VAL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-+e", min_size=1, max_size=10)


@settings(max_examples=50, deadline=None)
@given(kind=_KEY, params=st.dictionaries(_KEY, _VAL, max_size=5))
def test_parse_spec_round_trip(kind: str, params: dict[str, str]) -> None:
    text = kind + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")
    assert parse_spec(text) == (kind, params)


@settings(max_examples=200, deadline=None)
@given(
    sens=st.floats(min_value=1e-6, max_value=1e6),
    bound=st.floats(min_value=1e-8, max_value=1e4),
)
def test_safe_sigma_is_exactly_safe(sens: float, bound: float) -> None:
    from fractions import Fraction

    from dpopt.cli.account import safe_sigma

    sigma = safe_sigma(sens, bound)
    assert Fraction(sens) ** 2 <= Fraction(bound) * Fraction(sigma) ** 2
    assert sigma <= sens / bound**0.5 * (1 + 1e-15)
