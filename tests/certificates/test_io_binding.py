"""Regression tests: certificate files whose claims do not hold, or that are malformed, are
rejected with a CertificateError naming the reason (the cases of an adversarial audit)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import CertificateError
from certificates.io import (
    CLAIM_MARGIN,
    parse_certificate,
    read_certificate,
    vectors_digest,
    verify_file,
    write_certificate,
)
from certificates.problem import CovarianceProgram, FactoredDual
from certificates.strict_json import digest
from tests.canonical import F1
from tests.certificates.closed_form import pair


@pytest.fixture(scope="module", params=[True, False], ids=["rigorous", "float"])
def written(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Any]:
    prob = CovarianceProgram(F1.vectors, F1.weight, 1.0, 0.0)
    sigma, dual = pair(F1)
    cert = check(prob, sigma, dual, rigorous=request.param)
    path = tmp_path_factory.mktemp("w") / "c.json"
    write_certificate(path, prob, cert, dual)
    return path, json.loads(path.read_text()), cert


def _rewrite(tmp: Path, content: dict[str, Any], *, vectors: bool = False) -> Path:
    if vectors:
        content["problem"]["vectors_sha256"] = vectors_digest(
            np.asarray(content["problem"]["vectors"], dtype=np.float64))
    content["sha256"] = digest(content)
    out = tmp / "edited.json"
    out.write_text(json.dumps(content))
    return out


def _edited(written: tuple[Path, dict[str, Any], Any]) -> dict[str, Any]:
    return json.loads(json.dumps(written[1]))


def test_claim_is_the_certified_interval_widened_outward(written) -> None:  # type: ignore[no-untyped-def]
    _, content, cert = written
    claim = content["claim"]
    assert claim["lower"] <= cert.lower and claim["upper"] >= cert.upper
    assert claim["lower"] >= cert.lower * (1 - 2 * CLAIM_MARGIN)
    assert claim["upper"] <= cert.upper * (1 + 2 * CLAIM_MARGIN)
    assert claim["lower"] <= F1.value <= claim["upper"]  # closed form (√2 + 1 + √½)²


@pytest.mark.parametrize(
    ("field", "factor"),
    [("lower", 1 + 9e-10), ("upper", 1 - 9e-10), ("lower", 1 + 2e-8), ("upper", 1 - 2e-8)],
)
def test_no_slack_on_the_claimed_interval(written, tmp_path: Path, field: str,  # type: ignore[no-untyped-def]
                                          factor: float) -> None:
    """The audit: lower × (1 + 9e-10), upper × (1 - 9e-10) were accepted (a 1e-9 slack). The
    stored claim is widened by 1e-8, so a nudge inside that stays true; one that crosses the
    re-derived interval is rejected, however small."""
    _, _, cert = written
    edited = _edited(written)
    edited["claim"][field] *= factor
    c = edited["claim"]
    c["gap"] = (c["upper"] - c["lower"]) / c["upper"]
    path = _rewrite(tmp_path, edited)
    crosses = c["lower"] > cert.lower or c["upper"] < cert.upper
    if crosses:
        with pytest.raises(CertificateError, match=r"claimed (lower|upper)"):
            verify_file(path)
    else:
        fresh = verify_file(path)
        assert c["lower"] <= fresh.lower and fresh.upper <= c["upper"]


@pytest.mark.parametrize("which", ["lower", "upper"])
def test_claim_at_the_rederived_bound_plus_one_ulp_rejected(written, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           which: str) -> None:
    _, _, cert = written
    edited = _edited(written)
    c = edited["claim"]
    if which == "lower":
        c["lower"] = math.nextafter(cert.lower, math.inf)
    else:
        c["upper"] = math.nextafter(cert.upper, -math.inf)
    c["gap"] = (c["upper"] - c["lower"]) / c["upper"]
    with pytest.raises(CertificateError, match=f"claimed {which}"):
        verify_file(_rewrite(tmp_path, edited))


def test_lower_above_upper_rejected(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    c = edited["claim"]
    c["lower"], c["upper"] = c["upper"], c["lower"]
    c["gap"] = (c["upper"] - c["lower"]) / c["upper"]
    with pytest.raises(CertificateError, match=r"lower .* > claimed upper"):
        verify_file(_rewrite(tmp_path, edited))


def test_claim_gap_and_certified_flag_must_be_consistent(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    edited["claim"]["gap"] = 0.0
    with pytest.raises(CertificateError, match="gap"):
        verify_file(_rewrite(tmp_path, edited))
    edited = _edited(written)
    edited["claim"]["lower"] = 0.5 * edited["claim"]["upper"]  # true but loose: gap 0.5
    edited["claim"]["gap"] = 0.5
    with pytest.raises(CertificateError, match="certified"):
        verify_file(_rewrite(tmp_path, edited))
    edited["claim"]["certified"] = False  # the honest version of the same loose claim holds
    assert verify_file(_rewrite(tmp_path, edited)).upper <= edited["claim"]["upper"]


@pytest.mark.parametrize("value", ["yes", 1, 0, None, [True], {"v": True}])
def test_certified_must_be_a_boolean(written, tmp_path: Path, value: Any) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    edited["claim"]["certified"] = value
    with pytest.raises(CertificateError, match=r"claim\.certified"):
        verify_file(_rewrite(tmp_path, edited))


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
@pytest.mark.parametrize("field", ['"tol": ', '"bound": ', '"lower": '])
def test_nonfinite_numbers_rejected(written, tmp_path: Path, token: str, field: str) -> None:  # type: ignore[no-untyped-def]
    """A NaN made the digest raise a raw ValueError (CLI exit 3); now a named rejection."""
    text = json.dumps(written[1])
    start = text.index(field) + len(field)
    end = min(i for i in (text.find(",", start), text.find("}", start)) if i >= 0)
    bad = tmp_path / "nan.json"
    bad.write_text(text[:start] + token + text[end:])
    with pytest.raises(CertificateError, match=r"non-finite|overflows"):
        verify_file(bad)


@pytest.mark.parametrize(
    "path",
    [("claim", "lower"), ("claim", "tol"), ("problem", "bound"), ("dual", "support"),
     ("problem", "vectors_sha256"), ("covariance",), ("versions",)],
)
def test_missing_field_rejected(written, tmp_path: Path, path: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """`del claim["lower"]` raised a raw KeyError."""
    edited = _edited(written)
    obj = edited
    for k in path[:-1]:
        obj = obj[k]
    del obj[path[-1]]
    with pytest.raises(CertificateError, match="missing field"):
        verify_file(_rewrite(tmp_path, edited))


def test_unexpected_field_and_duplicate_key_rejected(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    edited["claim"]["proof"] = "trust me"
    with pytest.raises(CertificateError, match="unexpected field"):
        verify_file(_rewrite(tmp_path, edited))
    text = json.dumps(written[1]).replace('"tol":', '"tol": 1e-300, "tol":', 1)
    dup = tmp_path / "dup.json"
    dup.write_text(text)
    with pytest.raises(CertificateError, match="duplicate key"):
        verify_file(dup)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("problem", "dim"), 3.0),
        (("problem", "dim"), True),
        (("problem", "count"), "4"),
        (("dual", "support"), [0, 1, 2, 99]),
        (("dual", "support"), [0.0, 1.0]),
        (("problem", "weight"), [["1", 0, 0], [0, 1, 0], [0, 0, 1]]),
        (("covariance",), [[1, 0, 0], [0, 1, 0], [0, 0, True]]),
        (("problem", "vectors_description"), 7),
        (("claim", "rigorous"), "false"),
    ],
)
def test_wrong_types_rejected(written, tmp_path: Path, where: tuple[str, ...], value: Any) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    obj = edited
    for k in where[:-1]:
        obj = obj[k]
    obj[where[-1]] = value
    with pytest.raises(CertificateError, match="malformed"):
        verify_file(_rewrite(tmp_path, edited))


def test_huge_arrays_and_deep_nesting_rejected(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    edited["problem"]["vectors"] = edited["problem"]["vectors"] * 2_500
    with pytest.raises(CertificateError, match="rows, expected 4"):
        verify_file(_rewrite(tmp_path, edited))
    text = json.dumps(written[1]).replace('"versions": {', '"versions": {"x": '
                                          + "[" * 100_000 + "]" * 100_000 + ", ", 1)
    deep = tmp_path / "deep.json"
    deep.write_text(text)
    with pytest.raises(CertificateError, match=r"nested too deeply|versions"):
        verify_file(deep)


def test_too_large_file_rejected_before_parsing(written, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import certificates.io as cio

    monkeypatch.setattr(cio, "MAX_FILE_BYTES", 100)
    with pytest.raises(CertificateError, match="bytes"):
        verify_file(written[0])


def test_asymmetric_matrices_rejected(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    edited = _edited(written)
    cov = np.asarray(edited["covariance"])
    cov[0, 1] = math.nextafter(cov[0, 1], math.inf)
    edited["covariance"] = cov.tolist()
    with pytest.raises(CertificateError, match="symmetric"):
        verify_file(_rewrite(tmp_path, edited))


def test_sigma_halved_rejected_by_read_certificate(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The README release recipe loaded Σ with `read_certificate`: a halved Σ with its hash
    recomputed loaded without complaint. `read_certificate` now re-checks; the unverified parse
    is `parse_certificate` and says so."""
    edited = _edited(written)
    edited["covariance"] = (0.5 * np.asarray(edited["covariance"])).tolist()
    path = _rewrite(tmp_path, edited)
    with pytest.raises(CertificateError, match="not strictly feasible"):
        read_certificate(path)
    raw = parse_certificate(path)
    assert not raw.verified and raw.certificate is None
    good = read_certificate(written[0])
    assert good.verified and good.certificate is not None
    assert np.array_equal(good.covariance, good.certificate.repaired_covariance)


def test_source_must_match_stored_vectors(written) -> None:  # type: ignore[no-untyped-def]
    """A caller binding the file to vectors it regenerated: a mismatch is rejected even when the
    file stores (other) vectors."""
    from certificates.problem import ArrayVectors

    path = written[0]
    assert verify_file(path, source=ArrayVectors(F1.vectors)).certified
    with pytest.raises(CertificateError, match="do not match"):
        verify_file(path, source=ArrayVectors(F1.vectors * 0.5))
    with pytest.raises(CertificateError, match="are not the file's"):
        verify_file(path, source=ArrayVectors(F1.vectors[:3]))


def test_rigorous_claim_always_rechecked_rigorously(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, content, _ = written
    fresh = verify_file(path, rigorous=False)
    assert fresh.rigorous == content["claim"]["rigorous"]
    assert verify_file(path, rigorous=True).rigorous  # a float claim also holds rigorously


def test_shrunken_weight_or_grown_bound_rejected(written, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Editing the program data (q up: more room; W scaled: smaller optimum) with every digest
    recomputed: the claimed interval no longer contains the re-derived one."""
    for edit in ("bound", "weight"):
        edited = _edited(written)
        if edit == "bound":
            edited["problem"]["bound"] *= 1.5
        else:
            edited["problem"]["weight"] = (0.5 * np.asarray(edited["problem"]["weight"])).tolist()
        with pytest.raises(CertificateError, match=r"claimed (lower|upper)"):
            verify_file(_rewrite(tmp_path, edited))


def test_writer_never_claims_more_than_it_proved(tmp_path: Path) -> None:
    """An uncertified check is written as such, and a claim's gap is that of the stored
    interval."""
    prob = CovarianceProgram(F1.vectors, F1.weight, 1.0, 0.0)
    dual = FactoredDual(np.array([0]), np.array([0.1]), F1.vectors[:1] * 0.1, np.zeros((3, 0)))
    cert = check(prob, 3.0 * np.eye(3), dual)
    assert not cert.certified
    path = tmp_path / "loose.json"
    write_certificate(path, prob, cert, dual)
    c = json.loads(path.read_text())["claim"]
    assert c["certified"] is False and c["gap"] == (c["upper"] - c["lower"]) / c["upper"]
    assert verify_file(path).upper <= c["upper"]
