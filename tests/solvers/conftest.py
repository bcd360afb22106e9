"""Shared fixtures: the canonical covariance problems (``tests/canonical.py``) for every backend."""

from __future__ import annotations

import pytest

from tests.canonical import CANONICAL, CanonicalCase


@pytest.fixture(params=CANONICAL, ids=[c.name for c in CANONICAL])
def canonical_case(request: pytest.FixtureRequest) -> CanonicalCase:
    """Each canonical problem F1-F3 (+ rank-deficient F4) with its known optimum."""
    case: CanonicalCase = request.param
    return case
