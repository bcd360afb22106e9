"""The certificate audit (``scripts/audit_certificates.py``) in its small form: every count its
verdict rests on, asserted one by one (so a failure names the suite), and the verdict itself."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def audit() -> Any:
    spec = importlib.util.spec_from_file_location("audit_certificates",
                                                  ROOT / "scripts" / "audit_certificates.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("audit_certificates", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result(audit: Any) -> dict[str, Any]:
    return audit.audit(small=True)  # type: ignore[no-any-return]


def test_tampered_and_malformed_files(result: dict[str, Any]) -> None:
    for suite in ("tampered", "malformed"):
        r = result[suite]
        assert r["edits"] >= 60 and r["rejected"] > r["edits"] // 2, r
        assert r["false_claims_accepted"] == 0 and r["crash"] == 0, r
    kinds = set(result["tampered"]["per_kind"])
    assert {"covariance design", "sampling run record"} <= kinds
    assert sum(k.startswith("tight Pufferfish") for k in kinds) == 2


def test_offsets_trivial_and_ill_conditioned(result: dict[str, Any]) -> None:
    o, t, ill = result["offsets"], result["trivial"], result["ill_conditioned"]
    assert o["scales"] >= 8 and o["point_masses"] >= 18
    assert o["under_noise"] == 0 and o["false_claims"] == 0
    assert t["instances"] >= 18 and t["certified_exactly"] == t["instances"]
    assert ill["instances"] >= 1 and ill["under_noise"] == 0
    assert ill["worst_proven_gap_at_1e12"] <= 1e-8


def test_every_writer_is_classified_and_read_back(result: dict[str, Any], audit: Any) -> None:
    w = result["writers"]
    assert w["unclassified"] == [] and w["certificate_formats_not_read_by_verify"] == []
    assert all(w["written_and_read_back"].values()) and len(w["written_and_read_back"]) == 4
    assert set(w["write_sites"]) <= set(audit.WRITERS)
    assert result["passed"] is True


def test_the_verdict_can_fail(result: dict[str, Any], audit: Any) -> None:
    """One false claim, crash or unclassified writer anywhere fails the audit."""
    import copy

    for suite, key, value in (("tampered", "false_claims_accepted", 1), ("malformed", "crash", 1),
                              ("offsets", "under_noise", 1), ("writers", "unclassified_count", 1),
                              ("ill_conditioned", "worst_proven_gap_at_1e12", 2e-8)):
        bad = copy.deepcopy(result)
        bad[suite][key] = value
        assert not audit.passed(bad), (suite, key)


def _quoted_blocks() -> list[str]:
    """The audit outputs the certificates guide quotes (the text blocks its markers name)."""
    text = (ROOT / "docs" / "guide" / "certificates.md").read_text(encoding="utf-8")
    pattern = r"compares it with this block[^\n]*-->\n```text\n(.*?)\n```"
    return re.findall(pattern, text, flags=re.S)


def test_the_guide_quotes_the_small_audit(result: dict[str, Any], audit: Any) -> None:
    quoted = _quoted_blocks()
    assert len(quoted) == 2
    assert quoted[0] == audit.render(result)


@pytest.mark.slow
def test_the_guide_quotes_the_full_audit(audit: Any) -> None:
    full = audit.audit(small=False)
    assert full["passed"] is True
    assert _quoted_blocks()[1] == audit.render(full)
