"""certificates.io: JSON round trip, tamper detection (hash AND re-check), no overwrite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import CertificateError, InvalidParameterError
from certificates.io import read_certificate, verify_file, write_certificate
from certificates.problem import CovarianceProgram, FactoredDual
from certificates.strict_json import digest
from tests.canonical import F1, ChunkedArray
from tests.certificates.closed_form import kkt_dual


@pytest.fixture(scope="module")
def solved() -> tuple[CovarianceProgram, FactoredDual, object]:
    prob = CovarianceProgram(F1.vectors, F1.weight, 1.0, 0.3)  # the floor is slack at F1's optimum
    assert F1.covariance is not None
    dual = kkt_dual(prob, F1.covariance)
    return prob, dual, check(prob, F1.covariance, dual, rigorous=True)


def test_round_trip(tmp_path: Path, solved) -> None:  # type: ignore[no-untyped-def]
    prob, dual, cert = solved
    path = tmp_path / "c.json"
    sha = write_certificate(path, prob, cert, dual)
    cf = read_certificate(path)
    assert cf.sha256 == sha
    assert np.array_equal(cf.covariance, cert.repaired_covariance)  # exact doubles back
    assert np.array_equal(cf.dual.directions, dual.directions)
    assert "numpy" in cf.versions
    again = verify_file(path)
    assert again.certified and again.rigorous
    assert again.lower == cert.lower and again.upper == cert.upper
    assert b"pickle" not in path.read_bytes()


def test_no_overwrite(tmp_path: Path, solved) -> None:  # type: ignore[no-untyped-def]
    prob, dual, cert = solved
    path = tmp_path / "c.json"
    write_certificate(path, prob, cert, dual)
    with pytest.raises(InvalidParameterError):
        write_certificate(path, prob, cert, dual)
    write_certificate(path, prob, cert, dual, overwrite=True)


def _edit_digit(text: str, key: str) -> str:
    """Change one digit inside the first number after ``key``."""
    start = text.index(f'"{key}"')
    m = re.compile(r"\d\.(\d)(\d)").search(text, start)
    assert m is not None
    i = m.start(2)
    new = "7" if text[i] != "7" else "3"
    return text[:i] + new + text[i + 1 :]


@pytest.mark.parametrize("key", ["covariance", "vectors", "weight", "multipliers", "lower"])
def test_edited_digit_rejected_by_hash(tmp_path: Path, solved, key: str) -> None:  # type: ignore[no-untyped-def]
    prob, dual, cert = solved
    path = tmp_path / "c.json"
    write_certificate(path, prob, cert, dual)
    path.write_text(_edit_digit(path.read_text(), key))
    with pytest.raises(CertificateError, match="sha256"):
        verify_file(path)


@pytest.mark.parametrize("key", ["covariance", "vectors", "lower", "directions"])
def test_edited_digit_rejected_by_recheck(tmp_path: Path, solved, key: str) -> None:  # type: ignore[no-untyped-def]
    """An attacker who also recomputes the hash is caught by the re-check."""
    prob, dual, cert = solved
    path = tmp_path / "c.json"
    write_certificate(path, prob, cert, dual)
    content = json.loads(_edit_digit(path.read_text(), key))
    if key == "vectors":  # keep the vectors' own digest consistent as well
        from certificates.io import vectors_digest

        content["problem"]["vectors_sha256"] = vectors_digest(
            np.asarray(content["problem"]["vectors"])
        )
    content["sha256"] = digest(content)
    path.write_text(json.dumps(content))
    with pytest.raises(CertificateError, match="rejected"):
        verify_file(path)


def test_vector_source_file(tmp_path: Path) -> None:
    prob = CovarianceProgram(ChunkedArray(F1.vectors, 2), F1.weight, 1.0, 0.3)
    assert F1.covariance is not None
    dual = kkt_dual(CovarianceProgram(F1.vectors, F1.weight, 1.0, 0.3), F1.covariance)
    cert = check(prob, F1.covariance, dual)
    path = tmp_path / "s.json"
    with pytest.raises(InvalidParameterError):
        write_certificate(path, prob, cert, dual)
    write_certificate(path, prob, cert, dual, description="F1 cube vectors")
    with pytest.raises(CertificateError, match="source"):
        verify_file(path)
    assert verify_file(path, source=ChunkedArray(F1.vectors, 2)).certified
    with pytest.raises(CertificateError, match="sha256"):
        verify_file(path, source=ChunkedArray(2 * F1.vectors, 2))


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text("{not json")
    with pytest.raises(CertificateError):
        verify_file(path)
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(CertificateError):
        verify_file(path)
