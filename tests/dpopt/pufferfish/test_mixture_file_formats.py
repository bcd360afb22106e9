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
import pytest

from certificates.errors import CertificateError
from certificates.renyi_mixture import check_calibration, write_mixture_certificate
from dpopt.cli import files_schema
from dpopt.verification import verify
from tests.mixture_files import MIXED_SPELLINGS, PAIRS, mixed_spelling_file, to_v1


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
    old = to_v1(content)
    assert old["alpha"] == "inf"
    assert _schema_errors(old) == []


def test_old_and_dpopt_verify_read_both_formats(tmp_path: Path) -> None:
    cert = check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0, scale=1.0,
                             refuted_scale=0.5)
    path = tmp_path / "new.json"
    write_mixture_certificate(path, PAIRS, cert)
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(to_v1(json.loads(path.read_text()))))
    for p, tag in ((path, "/2"), (old_path, "/1")):
        result = verify(p)
        assert result.kind == "tight Pufferfish calibration"
        assert result.format.endswith(tag) and result.summary["alpha"] is None
        assert result.summary["certified"] is True


@pytest.mark.parametrize(("tag", "field", "value", "needle"), MIXED_SPELLINGS)
def test_dpopt_verify_refuses_a_file_mixing_the_spellings(tmp_path: Path, tag: str, field: str,
                                                          value: object, needle: str) -> None:
    with pytest.raises(CertificateError, match=re.escape(needle)):
        verify(mixed_spelling_file(tmp_path, tag, field, value))
