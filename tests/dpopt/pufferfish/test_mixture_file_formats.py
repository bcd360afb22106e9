"""The tight Pufferfish certificate file through dpopt: both formats (/2 writes null for an
infinite alpha or upper, /1 the string "inf") validate against the files schema and are read
by ``dpopt verify``; a file mixing the spellings is refused there too. (The checker's own
reading of both formats is tested in tests/certificates, which imports no dpopt.)"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from certificates.errors import CertificateError
from certificates.renyi_mixture import _canonical, check_calibration, write_mixture_certificate
from dpopt.cli import files_schema
from dpopt.verification import verify

PAIRS = [("R1", np.array([0.0, 1, 2]), np.array([0.5, 0.3, 0.2]),
          np.array([0.0, 1, 2, 3]), np.array([0.2, 0.3, 0.3, 0.2]))]


def _to_v1(content: dict) -> dict:
    """The same certificate as the previous format wrote it (infinity as the string "inf")."""
    old = json.loads(json.dumps(content))
    old["format"] = "dpopt-renyi-mixture-certificate/1"
    if old["alpha"] is None:
        old["alpha"] = "inf"
    if old["claim"]["upper"] is None:
        old["claim"]["upper"] = "inf"
    old["sha256"] = _canonical(old)
    return old


def _schema_errors(content: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(files_schema())
    return [e.message for e in validator.iter_errors(content)]


@pytest.mark.parametrize(("scale", "refuted"), [(1.0, 0.5), (0.0, None)])
def test_both_formats_validate_against_the_files_schema(tmp_path: Path, scale: float,
                                                        refuted: float | None) -> None:
    cert = check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0, scale=scale,
                             refuted_scale=refuted)
    path = tmp_path / "c.json"
    write_mixture_certificate(path, PAIRS, cert)
    content = json.loads(path.read_text())
    assert content["alpha"] is None
    assert _schema_errors(content) == []
    old = _to_v1(content)
    assert old["alpha"] == "inf"
    assert _schema_errors(old) == []


def test_old_and_dpopt_verify_read_both_formats(tmp_path: Path) -> None:
    cert = check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0, scale=1.0,
                             refuted_scale=0.5)
    path = tmp_path / "new.json"
    write_mixture_certificate(path, PAIRS, cert)
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(_to_v1(json.loads(path.read_text()))))
    for p, tag in ((path, "/2"), (old_path, "/1")):
        result = verify(p)
        assert result.kind == "tight Pufferfish calibration"
        assert result.format.endswith(tag) and result.summary["alpha"] is None
        assert result.summary["certified"] is True


@pytest.mark.parametrize(("tag", "field", "value", "needle"),
                         [("/2", "alpha", "inf", "alpha: the string 'inf'"),
                          ("/1", "alpha", None, "alpha: null"),
                          ("/2", "upper", "inf", "claim.upper: the string 'inf'"),
                          ("/1", "upper", None, "claim.upper: null")])
def test_dpopt_verify_refuses_a_file_mixing_the_spellings(tmp_path: Path, tag: str, field: str,
                                                          value: object, needle: str) -> None:
    cert = check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0, scale=0.0)
    path = tmp_path / "c.json"
    write_mixture_certificate(path, PAIRS, cert)
    content = json.loads(path.read_text())
    content = _to_v1(content) if tag == "/1" else content
    content["format"] = "dpopt-renyi-mixture-certificate" + tag
    if field == "alpha":
        content["alpha"] = value
    else:
        content["claim"]["upper"] = value
    content["sha256"] = _canonical(content)  # a consistent digest: the field check must catch it
    bad = tmp_path / "mixed.json"
    bad.write_text(json.dumps(content))
    with pytest.raises(CertificateError, match=re.escape(needle)):
        verify(bad)
