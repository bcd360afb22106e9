"""The digest-stamped files shared by the covariance and the tight Pufferfish certificates.

``certificates.strict_json`` owns the digest, the versions field and the writer both kinds use;
the digest is checked here against hashlib on a hand-written canonical text, the writer and the
checks on files edited by hand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from certificates import strict_json as sj
from certificates.errors import CertificateError, InvalidParameterError


def test_digest_is_the_sha256_of_the_sorted_compact_text_without_its_own_field() -> None:
    content = {"b": [1, 2.5], "a": {"y": None, "x": "é"}, "sha256": "ignored"}
    text = '{"a":{"x":"\\u00e9","y":null},"b":[1,2.5]}'
    assert sj.digest(content) == hashlib.sha256(text.encode()).hexdigest()
    assert sj.digest({"a": {"x": "é", "y": None}, "b": [1, 2.5]}) == sj.digest(content)


def test_digest_of_content_json_cannot_hold_is_a_named_rejection() -> None:
    with pytest.raises(CertificateError, match="cannot be digested"):
        sj.digest({"x": float("nan")})


def test_write_signed_stamps_refuses_to_replace_and_the_checks_catch_an_edit(
        tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    sha = sj.write_signed(path, {"format": "x/1", "versions": sj.versions()}, overwrite=False)
    top = json.loads(path.read_text())
    assert top["sha256"] == sha == sj.digest(top)
    sj.check_versions(top["versions"])
    sj.check_digest(top, sha)
    assert {"python", "numpy"} <= set(top["versions"])
    with pytest.raises(InvalidParameterError, match=r"path.*overwrite=True"):
        sj.write_signed(path, {"format": "x/1"}, overwrite=False)
    assert sj.write_signed(path, {"format": "x/2"}, overwrite=True) != sha
    top["format"] = "x/9"
    with pytest.raises(sj.FieldError, match=r"^sha256: does not match"):
        sj.check_digest(top, sha)


@pytest.mark.parametrize("value", [None, [], {"a": 1}, {"a": "x" * 201}, {str(i): "" for i in
                                                                            range(65)}])
def test_a_malformed_versions_field_is_refused(value: object) -> None:
    with pytest.raises(sj.FieldError, match=r"^versions: "):
        sj.check_versions(value)
