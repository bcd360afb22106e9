"""A covariance certificate rejected because of its noise floor says so (not q-feasibility)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import CertificateError
from certificates.io import verify_file, write_certificate
from certificates.problem import CovarianceProgram, FactoredDual


def _rehash(content: dict) -> dict:
    body = {k: v for k, v in content.items() if k != "sha256"}
    content["sha256"] = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return content


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, dict, float]:
    # s = e_1, e_2; W = I; q = 2: the optimum is Sigma = I / 2 (value 1), eta = 0.1 inactive
    p = CovarianceProgram(np.eye(2), np.eye(2), 2.0, 0.1)
    dual = FactoredDual(np.array([0, 1]), np.array([0.25, 0.25]), 2 * np.eye(2),
                        np.zeros((2, 0)))
    cert = check(p, 0.5 * np.eye(2), dual)
    path = tmp_path / "c.json"
    write_certificate(path, p, cert, dual)
    content = json.loads(path.read_text())
    lam_min = float(np.linalg.eigvalsh(np.asarray(content["covariance"]))[0])
    verify_file(path)
    return path, content, lam_min


def test_floor_above_lambda_min_is_named(written: tuple[Path, dict, float],
                                         tmp_path: Path) -> None:
    _, content, lam_min = written
    content["problem"]["noise_floor"] = 1.5 * lam_min  # Sigma >= eta I now fails
    bad = tmp_path / "floor.json"
    bad.write_text(json.dumps(_rehash(content)))
    with pytest.raises(CertificateError) as info:
        verify_file(bad)
    msg = str(info.value)
    assert "noise floor eta" in msg and "exceeds lambda_min(Sigma)" in msg
    assert "Mahalanobis bound fails" not in msg  # q-feasibility still holds: not blamed


def test_q_infeasibility_is_named(written: tuple[Path, dict, float], tmp_path: Path) -> None:
    _, content, _ = written
    content["problem"]["bound"] = 1.0  # s^T Sigma^-1 s ~ 2 > q: the Mahalanobis bound fails
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps(_rehash(content)))
    with pytest.raises(CertificateError) as info:
        verify_file(bad)
    msg = str(info.value)
    assert "Mahalanobis bound fails" in msg and "noise floor" not in msg
