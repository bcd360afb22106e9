"""``dpopt sample`` end to end and the sampler figure at toy sizes."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpopt.cli.main import main
from dpopt.diffusion.record import verify_record


def _csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    pts = np.vstack([rng.uniform(0, 1, (28, 2)), [[1.3, 0.5], [-0.2, 0.1]]])  # 2 off the domain
    path = tmp_path / "records.csv"
    path.write_text("a,b\n" + "\n".join(f"{x},{y}" for x, y in pts) + "\n")
    return path


def test_sample_command_writes_a_verifiable_record(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = _csv(tmp_path)
    out = tmp_path / "run.json"
    samples = tmp_path / "samples.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # shown again even if an earlier test triggered it
        rc = main(["sample", "--data", str(data), "--header", "--domain",
                   "grid:lo=0,hi=1,n=6,d=2", "--budget", "gdp:mu=50", "--steps", "3",
                   "--samples", "4", "--seed", "1", "-o", str(out), "--samples-out",
                   str(samples), "-q", "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["releases"] == 12
    assert summary["privacy"]["gdp_mu"] == pytest.approx(50.0)
    assert "2 of 30 records" in captured.err  # records off the domain are reported on stderr
    assert verify_record(out).holds
    assert np.loadtxt(samples, delimiter=",").shape == (4, 2)
    assert main(["verify", str(out), "-q"]) == 0
    # an existing output is never overwritten without --force
    assert main(["sample", "--data", str(data), "--header", "--budget", "gdp:mu=1", "-o",
                 str(out), "-q"]) == 2


@pytest.mark.parametrize("extra", [["--split", "a,b"], ["--split", "1,2"],
                                   ["--budget", "midp:kappa=0.1"]])
def test_sample_command_user_errors(tmp_path: Path, extra: list[str]) -> None:
    args = ["sample", "--dataset", "mixture", "--steps", "3", "--samples", "1", "-o",
            str(tmp_path / "r.json"), "-q"]
    if "--budget" not in extra:
        args += ["--budget", "gdp:mu=1"]
    assert main(args + extra) == 2


def test_sampler_figure_toy_sizes(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from dpopt.figures.sampler import sampler_figure

    paths = sampler_figure(tmp_path, datasets=("mixture",), mus=(100.0,), samples=4, steps=2,
                           picture_samples=4)
    names = {p.name for p in paths}
    assert {"sampler-samples.png", "sampler-quality.csv", "sampler-errors.csv"} <= names
    import pandas as pd

    table = pd.read_csv(tmp_path / "sampler-quality.csv")
    assert set(table.noise) == {"nonprivate", "holdout", "optimal", "isotropic"}
    errors = pd.read_csv(tmp_path / "sampler-errors.csv")
    assert float(errors.isotropic_exact_over_optimal.iloc[0]) >= 1.0 - 1e-9
