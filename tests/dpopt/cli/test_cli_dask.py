"""``--dask`` on the commands that run designs and sweeps: ``dpopt design``, ``dpopt demo``,
``dpopt design-run``, ``dpopt figures`` and ``python -m dpopt.figures``.

Reference for every answer: the same command without ``--dask`` (in process), which must give the
same numbers to the last digit (the structured solver's passes reduce the same blocks in the same
order; the sweeps' cells are the same pure functions). One 2-worker ``LocalCluster`` serves the
module through its scheduler address (the ``ADDRESS`` form); one test starts ``--dask local``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpopt.cli import main

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        yield str(cluster.scheduler_address)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


DESIGN = ["--domain", "grid:lo=0,hi=1,n=7,d=2", "--query", "0.3,0.6", "--denoiser-sigma", "0.4",
          "--budget", "approx:epsilon=1,delta=1e-6"]


UNIFORM = ["--domain", "grid:lo=0,hi=1,n=6,d=3", "--uniform-query", "--budget", "gdp:mu=1"]


def _design(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str],
            *extra: str, problem: list[str] = DESIGN) -> dict[str, Any]:
    code, out, err = run(["-q", "design", *problem, "--json", "-o", str(tmp_path / name),
                          *extra], capsys)
    assert code == 0, err
    res: dict[str, Any] = json.loads(out)
    return res


def _same_design(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("covariance", "certified_interval", "gap", "total_error", "budget_bound",
                "count", "privacy"):
        assert a[key] == b[key], key
    assert a["certified"] and b["certified"]


def test_design_on_a_cluster_address_is_the_in_process_design(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = _design(tmp_path, "ref.json", capsys)
    got = _design(tmp_path, "dask.json", capsys, "--dask", address)
    _same_design(got, ref)
    # both files verify, and describe the same design
    for name in ("ref.json", "dask.json"):
        code, _, err = run(["-q", "verify", str(tmp_path / name)], capsys)
        assert code == 0, err
    # the cluster is left running (an address is only connected to)
    with distributed.Client(address) as c:
        assert len(c.scheduler_info()["workers"]) == 2


def test_design_dask_local_starts_and_stops_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = _design(tmp_path, "ref.json", capsys, problem=UNIFORM)
    got = _design(tmp_path, "dask.json", capsys, "--dask", "local", problem=UNIFORM)
    _same_design(got, ref)


def test_demo_and_design_run_on_a_cluster(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out_ref, err = run(["-q", "demo", "--no-save", "--json"], capsys)
    assert code == 0, err
    code, out, err = run(["-q", "demo", "--no-save", "--json", "--dask", address], capsys)
    assert code == 0, err
    _same_design(json.loads(out), json.loads(out_ref))

    argv = ["-q", "design-run", "--steps", "2", "--domain", "grid:lo=0,hi=1,n=4,d=2",
            "--epsilon", "1", "--delta", "1e-5", "--json"]
    code, out_ref, err = run(argv, capsys)
    assert code == 0, err
    code, out, err = run([*argv, "--dask", address], capsys)
    assert code == 0, err
    assert json.loads(out) == json.loads(out_ref)


@pytest.mark.parametrize("value", ["nowhere", "", "tcp://127.0.0.1:1"])
def test_bad_dask_value_is_a_one_line_error(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):  # nobody listens there
        code, _, err = run(["design", *DESIGN, "-o", str(tmp_path / "x.json"), "--dask",
                              value], capsys)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dpopt: error: ") and "dask" in lines[0], err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("cmd", [["design"], ["demo"], ["design-run"], ["figures"]])
def test_help_documents_dask(cmd: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*cmd, "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "--dask local|ADDRESS" in text and "LocalCluster" in text and "tcp://" in text


# ----------------------------------------------------------------------------- figures


def test_figures_on_a_cluster_are_the_in_process_figures(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref_dir, dask_dir = tmp_path / "ref", tmp_path / "dask"
    code, _, err = run(["-q", "figures", "fig1", "--out-dir", str(ref_dir)], capsys)
    assert code == 0, err
    code, _, err = run(["-q", "figures", "fig1", "--out-dir", str(dask_dir), "--dask", address],
                         capsys)
    assert code == 0, err
    assert (dask_dir / "fig1.csv").read_text() == (ref_dir / "fig1.csv").read_text()
    assert (dask_dir / "fig1.png").stat().st_size > 0


def test_denoiser_sweep_on_a_cluster_is_the_in_process_table(address: str) -> None:
    import pandas as pd

    from dpopt.figures.denoiser import DenoiserSetup, denoiser_sweep

    setup = DenoiserSetup(shape=(4, 3, 2))
    ref = denoiser_sweep(setup, [0.5, 2.0])
    with distributed.Client(address) as client:
        got = denoiser_sweep(setup, [0.5, 2.0], client=client, progress=True)
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert list(got["epsilon"]) == [0.5, 2.0] and bool(got["certified"].all())


def test_python_m_figures_passes_the_client(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import dpopt.figures.__main__ as registry

    seen: dict[str, Any] = {}

    def sweep(out_dir: Path, *, client: Any = None, progress: bool | None = None) -> list[Path]:
        from dpopt.parallel import map_ordered

        seen["client"], seen["progress"] = client, progress
        squares = map_ordered(pow, list(range(9)), client=client, args=(2,), progress=progress)
        p = out_dir / "sweep.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(" ".join(map(str, squares)))
        return [p]

    def plain(out_dir: Path) -> list[Path]:  # nothing to distribute: never sees the client
        p = out_dir / "plain.txt"
        p.write_text("ok")
        return [p]

    monkeypatch.setattr(registry, "FIGURES", {"sweep": ("x:sweep", "a"), "plain": ("x:plain", "b")})
    monkeypatch.setattr(registry, "resolve", lambda name: {"sweep": sweep, "plain": plain}[name])
    assert registry.uses_dask("sweep") and not registry.uses_dask("plain")
    assert registry.main(["all", "--out-dir", str(tmp_path), "--dask", address]) == 0
    assert type(seen["client"]).__name__ == "Client" and seen["progress"] is None
    assert (tmp_path / "sweep.txt").read_text() == " ".join(str(i * i) for i in range(9))
    assert (tmp_path / "plain.txt").read_text() == "ok"
    # the CLI passes its terminal rule: no bars under -q / when stderr is not a terminal
    code, _, err = run(["-q", "figures", "sweep", "--out-dir", str(tmp_path / "b"), "--dask",
                        address], capsys)
    assert code == 0, err
    assert seen["progress"] is False and seen["client"] is not None
    capsys.readouterr()
    assert registry.main(["sweep", "--out-dir", str(tmp_path / "c"), "--dask", "nowhere"]) == 2
    assert "dask" in capsys.readouterr().err


def test_rpp_tightness_on_a_cluster_is_the_in_process_table(address: str) -> None:
    from dpopt.figures.rpp import _tightness_of
    from dpopt.parallel import map_ordered

    keys = ["heart-disease-chol"]
    ref = map_ordered(_tightness_of, keys, args=(1.0, 2.0))
    with distributed.Client(address) as client:
        got = map_ordered(_tightness_of, keys, client=client, args=(1.0, 2.0))
    np.testing.assert_array_equal(got[0].to_numpy(dtype=object), ref[0].to_numpy(dtype=object))


def test_without_dask_the_commands_never_import_it(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    out = tmp_path / "d.json"
    code = (
        "import sys\n"
        "from dpopt.cli import main\n"
        f"argv = ['-q', 'design', *{DESIGN!r}, '-o', {str(out)!r}]\n"
        "assert main(argv) == 0\n"
        f"assert main(['-q', 'verify', {str(out)!r}]) == 0\n"
        "assert main(['-q', 'figures', '--list']) == 0\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "print('IMPORTED:' + ','.join(bad))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(root))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120, check=True)
    assert res.stdout.strip().splitlines()[-1] == "IMPORTED:"
