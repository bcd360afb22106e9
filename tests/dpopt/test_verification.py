"""The certificate-kind registry behind ``dpopt verify``: dispatch on the file's format tag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpopt import verification
from dpopt.cli.main import main
from dpopt.errors import CertificateError, InvalidParameterError
from dpopt.pufferfish import Scenario, calibrate_tight


@pytest.fixture(scope="module")
def tight_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sc = Scenario.from_laws({"a": ([0.0, 1.0, 3.0], [0.5, 0.3, 0.2]),
                             "b": ([0.0, 2.0, 3.0, 5.0], [0.2, 0.3, 0.3, 0.2])})
    path = tmp_path_factory.mktemp("kinds") / "t.json"
    calibrate_tight(sc, 2.0, 1.0).write_certificate(path)
    return path


def test_builtin_kinds_are_registered_and_importable() -> None:
    tags = {k.format for k in verification.registered_kinds()}
    assert set(verification.BUILTIN_KINDS) <= tags
    for kind in verification.registered_kinds():
        assert callable(kind.load())


def test_dispatch_reads_the_kind_from_the_file(tight_file: Path) -> None:
    v = verification.verify(tight_file)
    assert v.kind == "tight Pufferfish calibration"
    assert v.summary["tight"] is True
    content = json.loads(tight_file.read_text())
    assert v.summary["scale"] == content["scale"]


def test_a_registered_kind_is_dispatched_to(tmp_path: Path) -> None:
    seen: list[Any] = []

    def check(path: Path, content: dict[str, Any],
              options: verification.VerifyOptions) -> verification.Verification:
        seen.append((path, content, options))
        if content["value"] != 2:
            raise CertificateError(f"{path}: value is not 2")
        return verification.Verification(kind="toy", format=content["format"], path=str(path),
                                          summary={"value": 2}, lines=("value 2 re-derived",))

    verification.register_kind("toy-kind/1", "toy", check)
    try:
        with pytest.raises(InvalidParameterError, match="already registered"):
            verification.register_kind("toy-kind/1", "toy", check)
        good, bad = tmp_path / "good.json", tmp_path / "bad.json"
        good.write_text(json.dumps({"format": "toy-kind/1", "value": 2}))
        bad.write_text(json.dumps({"format": "toy-kind/1", "value": 3}))
        assert verification.verify(good, rigorous=True).summary == {"value": 2}
        assert seen[-1][2].rigorous is True
        with pytest.raises(CertificateError, match="value is not 2"):
            verification.verify(bad)
        assert main(["verify", str(good)]) == 0
        assert main(["verify", str(bad)]) == 1
    finally:
        verification.unregister_kind("toy-kind/1")
    assert main(["verify", str(good)]) == 1  # unknown kind once removed


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[1, 2]", "file: must be a JSON object"),
        ('{"a": 1}', "format: missing"),
        ('{"format": 3}', "format: must be a string"),
        ('{"format": "dpopt-unknown/9"}', "is not a certificate kind dpopt reads"),
        ('{"format": NaN}', "NaN/Infinity"),
        ('{"format": "x", "format": "y"}', "duplicate key"),
        ("not json", "not valid JSON"),
        ("", "not valid JSON"),
        ('{"format": "dpopt-renyi-mixture-certificate/1"', "not valid JSON"),
        ('{"format": "dpopt-renyi-mixture-certificate/1", "scale": 1e999}', "overflows"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_kind_errors_name_the_field(tmp_path: Path, text: str, field: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(CertificateError, match="malformed certificate file") as info:
        verification.read_kind(path)
    assert field in str(info.value)
    assert main(["verify", str(path)]) == 1
    assert field in capsys.readouterr().out


def test_cli_tight_then_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's reproduction: a certificate written by ``calibrate pufferfish --tight`` is
    read back by ``dpopt verify`` (it used to fail with 'missing field(s) problem, ...')."""
    rng = np.random.default_rng(0)
    csv = tmp_path / "d.csv"
    rows = ["group,value"] + [f"{g},{v}" for g in "ab" for v in rng.integers(0, 6, 12)]
    csv.write_text("\n".join(rows) + "\n")
    cert = tmp_path / "t.json"
    assert main(["calibrate", "pufferfish", str(csv), "--secret", "group", "--query", "value",
                 "--alpha", "2", "--epsilon", "1", "--tight", "--certificate", str(cert)]) == 0
    capsys.readouterr()
    assert main(["verify", str(cert), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["holds"] is True and out["kind"] == "tight Pufferfish calibration"
    assert out["certified"] is True


def test_no_noise_needed_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Laws already within ε: the CLI reports least scale 0 with a sentence and writes a
    certificate that ``dpopt verify`` re-proves (the divergence of the laws themselves)."""
    csv = tmp_path / "flat.csv"
    rows = ["group,value"] + ["a,0", "a,1"] * 5 + ["b,0"] * 5 + ["b,1"] * 6
    csv.write_text("\n".join(rows) + "\n")
    cert = tmp_path / "z.json"
    assert main(["calibrate", "pufferfish", str(csv), "--secret", "group", "--query", "value",
                 "--alpha", "2", "--epsilon", "1", "--tight", "--certificate", str(cert),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tight_scale"] == 0.0 and "no noise is needed" in out["tight_message"]
    assert main(["verify", str(cert)]) == 0
    assert "no noise is needed" in capsys.readouterr().out
    # forging a law far from the other (digest recomputed) must not keep "no noise needed"
    from certificates.strict_json import digest

    content = json.loads(cert.read_text())
    content["pairs"][0]["p"]["probs"] = [0.99, 0.01]
    content["sha256"] = digest(content)
    cert.write_text(json.dumps(content))
    assert main(["verify", str(cert)]) == 1


def test_non_utf8_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bin.json"
    path.write_bytes(b'{"format": "\xff\xfe"}')
    assert main(["verify", str(path)]) == 1
    assert "file: not UTF-8 text" in capsys.readouterr().out


def test_every_builtin_kind_rejects_a_truncated_copy(tight_file: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A file cut anywhere is exit 1 with a reason, never a traceback (exit 3)."""
    text = tight_file.read_text()
    for cut in range(0, len(text), max(1, len(text) // 25)):
        path = tmp_path / "cut.json"
        path.write_text(text[:cut])
        assert main(["verify", str(path)]) == 1
        out = capsys.readouterr().out
        assert "does NOT hold" in out and "reason:" in out
