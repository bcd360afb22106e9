"""``dpopt calibrate pufferfish --tight``: the least scale, its refutation, the certificate file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certificates.renyi_mixture import verify_mixture_file
from dpopt.cli import main
from dpopt.pufferfish import audit
from dpopt.pufferfish.scenario import Scenario


def _r1_csv(path: Path) -> Path:
    rows = [("s1", 0)] * 5 + [("s1", 1)] * 3 + [("s1", 2)] * 2
    rows += [("s2", 0)] * 2 + [("s2", 1)] * 3 + [("s2", 2)] * 3 + [("s2", 3)] * 2
    path.write_text("group,value\n" + "".join(f"{g},{v}\n" for g, v in rows))
    return path


R1 = Scenario.from_laws(
    {"s1": ([0, 1, 2], [0.5, 0.3, 0.2]), "s2": ([0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2])}
)
BASE = ["--secret", "group", "--query", "value", "--alpha", "2", "--epsilon", "1"]


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_tight_json(tmp_path: Path, noise: str, capsys: pytest.CaptureFixture[str]) -> None:
    csv = _r1_csv(tmp_path / "r1.csv")
    cert = tmp_path / "tight.json"
    argv = ["calibrate", "pufferfish", str(csv), *BASE, "--noise", noise, "--tight"]
    code = main([*argv, "--json", "--certificate", str(cert)])
    res = json.loads(capsys.readouterr().out)
    assert code == 0 and res["tight_within_tol"] is True
    tight, refuted = res["tight_scale"], res["tight_refuted_scale"]
    assert refuted == pytest.approx(0.99 * tight) and tight < res["scale"]
    # independent quadrature on both sides of the bracket
    assert audit(R1, noise, tight, 2.0).max_divergence <= 1.0
    assert audit(R1, noise, refuted, 2.0).max_divergence > 1.0
    assert verify_mixture_file(cert).certified
    # text output, and an existing certificate is never overwritten
    code = main([*argv, "--tol", "0.05"])
    out = capsys.readouterr().out
    assert code == 0 and "tight scale" in out and "proven NOT private" in out
    code = main([*argv, "--certificate", str(cert)])
    err = capsys.readouterr().err
    assert code != 0 and "exists" in err and "Traceback" not in err


def test_tight_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = _r1_csv(tmp_path / "r1.csv")
    code = main(["calibrate", "pufferfish", str(csv), *BASE, "--certificate", "x.json"])
    assert code == 2 and "--tight" in capsys.readouterr().err
    code = main(["calibrate", "pufferfish", str(csv), *BASE, "--tight", "--tol", "0.9"])
    err = capsys.readouterr().err
    assert code != 0 and "--tol" in err and "Traceback" not in err
