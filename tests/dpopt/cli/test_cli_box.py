"""``dpopt design --domain box:...`` with a query: records anywhere in the box, and its verify."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpopt.cli import main
from dpopt.covariance.design import Design
from dpopt.errors import CertificateError
from tests.certificates import mutations as mu

ARGS = ["design", "--domain", "box:lo=0,hi=1,d=2", "--query", "0.3,0.6", "--denoiser-sigma",
        "0.15", "--budget", "approx:epsilon=1,delta=1e-6"]


def _edit(path: Path, out: Path, **changes: object) -> None:
    """Edit the description and re-seal the file's digests (a forger would)."""
    raw = json.loads(path.read_text())
    desc = json.loads(raw["problem"]["vectors_description"])
    desc.update(changes)
    raw["problem"]["vectors_description"] = json.dumps(desc, sort_keys=True)
    out.write_text(mu.render(raw))


@pytest.fixture(scope="module")
def box_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("box") / "box.json"
    assert main([*ARGS, "-o", str(path), "--json"]) == 0
    return path


def test_box_design_from_the_cli_covers_the_box(box_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "-o", str(tmp_path / "again.json"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["set"] == "two-record-box" and res["certified"]
    assert "anywhere in the box" in res["covers"]
    assert main(["verify", str(box_file)]) == 0
    out = capsys.readouterr().out
    assert "covers: every dataset of records anywhere in the box box:lo=0,hi=1,d=2" in out


def test_verify_json_reports_the_box_sup(box_file: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(box_file), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["holds"] and res["box_sup"] <= res["bound"]
    assert res["design"]["set"] == "two-record-box"


def test_design_load_rebuilds_the_coverage(box_file: Path) -> None:
    des = Design.load(box_file)
    assert des.coverage is not None and des.coverage.sup.upper <= des.program.bound
    assert des.privacy.mahalanobis_bound <= des.bound


@pytest.mark.parametrize(
    "change",
    [{"domain": "box:lo=0,hi=1.5,d=2"},  # a larger box: same pairs, but the sup grows
     {"sigma": 0.3},  # regenerated vectors differ from the file's
     {"query": [0.5, 0.5]},
     {"pairs": [[0.0, 0.0, 1.0, 1.0]]},
     {"domain": "grid:lo=0,hi=1,n=3,d=2"}],
)
def test_tampered_box_descriptions_are_rejected(box_file: Path, tmp_path: Path,
                                                change: dict[str, object],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    _edit(box_file, bad, **change)
    assert main(["verify", str(bad)]) == 1
    assert "does NOT hold" in capsys.readouterr().out
    with pytest.raises(CertificateError):
        Design.load(bad)


def test_a_larger_box_is_rejected_for_its_sup(box_file: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bigger.json"
    _edit(box_file, bad, domain="box:lo=0,hi=1.5,d=2")
    assert main(["verify", str(bad)]) == 1
    assert "records in the box are not covered" in capsys.readouterr().out


def test_grid_design_says_it_covers_grid_values_only(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["design", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--query", "0.5,0.5",
                 "--denoiser-sigma", "0.3", "--budget", "gdp:mu=1", "--json", "-o",
                 str(tmp_path / "grid.json")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert "snap" in res["covers"] and "box" in res["covers"]
    assert np.asarray(res["covariance"]).shape == (2, 2)
