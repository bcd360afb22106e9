"""Tight Pufferfish certificate files for the tests of both formats (/2 writes null for an
infinite alpha or upper, /1 the string "inf"). Imports only ``certificates``, so the checker's
stand-alone tests can use it too."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from certificates.renyi_mixture import check_calibration, write_mixture_certificate
from certificates.strict_json import digest

PAIRS = [("R1", np.array([0.0, 1, 2]), np.array([0.5, 0.3, 0.2]),
          np.array([0.0, 1, 2, 3]), np.array([0.2, 0.3, 0.3, 0.2]))]

#: (format tag, field, value written, the refusal's wording) for files mixing the spellings.
MIXED_SPELLINGS = [("/2", "alpha", "inf", "alpha: the string 'inf'"),
                   ("/1", "alpha", None, "alpha: null"),
                   ("/2", "upper", "inf", "claim.upper: the string 'inf'"),
                   ("/1", "upper", None, "claim.upper: null")]


def to_v1(content: dict) -> dict:
    """The same certificate as the previous format wrote it (infinity as the string "inf")."""
    old = json.loads(json.dumps(content))
    old["format"] = "dpopt-renyi-mixture-certificate/1"
    if old["alpha"] is None:
        old["alpha"] = "inf"
    if old["claim"]["upper"] is None:
        old["claim"]["upper"] = "inf"
    old["sha256"] = digest(old)
    return old


def mixed_spelling_file(tmp_path: Path, tag: str, field: str, value: object) -> Path:
    """A pure certificate (infinite upper at scale 0) whose ``field`` is spelt ``value`` under
    format ``tag``, with a consistent digest, so only the field check can catch it."""
    cert = check_calibration(PAIRS, noise="laplace", alpha=math.inf, epsilon=1.0, scale=0.0)
    path = tmp_path / "c.json"
    write_mixture_certificate(path, PAIRS, cert)
    content = json.loads(path.read_text())
    content = to_v1(content) if tag == "/1" else content
    content["format"] = "dpopt-renyi-mixture-certificate" + tag
    if field == "alpha":
        content["alpha"] = value
    else:
        content["claim"]["upper"] = value
    content["sha256"] = digest(content)
    bad = tmp_path / "mixed.json"
    bad.write_text(json.dumps(content))
    return bad
