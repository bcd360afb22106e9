"""dpopt.covariance.batch.design_covariance_batch: many certified designs in one call."""

from __future__ import annotations

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import InvalidParameterError, InvalidTypeError
from dpopt.accounting.budgets import GDP, ZCDP, ApproxDP
from dpopt.covariance.batch import design_covariance_batch
from dpopt.covariance.design import design_covariance


def _trajectory(n: int, d: int, m: int, seed: int = 0) -> list[np.ndarray]:
    """Two-record-like vectors of a drifting query: consecutive problems are close."""
    rng = np.random.default_rng(seed)
    points = rng.random((m, d))
    i0, i1 = np.triu_indices(m, 1)
    base = points[i0] - points[i1]
    out = []
    for t in range(n):
        stretch = 1.0 + 0.3 * np.sin(0.2 * t + np.arange(d))
        out.append(base * stretch)
    return out


def test_batch_matches_a_loop_and_every_item_is_certified() -> None:
    sets = _trajectory(6, 3, 12)
    budgets = [ZCDP(rho=0.2 + 0.1 * i) for i in range(6)]
    batch = design_covariance_batch(sets, budgets, tol=1e-7)
    assert len(batch) == len(sets)
    for vec, bud, des in zip(sets, budgets, batch, strict=True):
        ref = design_covariance(vec, bud, tol=1e-7)
        assert des.certified
        assert des.value == pytest.approx(ref.value, rel=2e-7)
        # re-check the returned covariance and dual from scratch
        cert = check(des.program, des.covariance, des.solution.dual, tol=1e-7)
        assert cert.certified
        assert cert.mahalanobis_sup <= des.program.bound
        assert cert.lower <= ref.value * (1 + 1e-12)


def test_one_shared_budget_and_a_3d_array() -> None:
    sets = np.stack(_trajectory(3, 2, 10))
    batch = design_covariance_batch(sets, GDP(mu=1.0))
    assert [d.bound for d in batch] == [batch[0].bound] * 3
    assert all(d.certified for d in batch)


def test_bad_batches_are_refused_by_name() -> None:
    sets = _trajectory(2, 2, 6)
    with pytest.raises(InvalidParameterError, match="budgets"):
        design_covariance_batch(sets, [ZCDP(rho=1.0)] * 3)
    with pytest.raises(InvalidParameterError, match="sensitivities"):
        design_covariance_batch([], ZCDP(rho=1.0))
    with pytest.raises(InvalidParameterError, match="sensitivities"):
        design_covariance_batch(np.zeros((4, 2)), ZCDP(rho=1.0))
    with pytest.raises(InvalidTypeError, match="sensitivities"):
        design_covariance_batch(3.0, ZCDP(rho=1.0))  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="budgets"):
        design_covariance_batch(sets, 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="warm_start"):
        design_covariance_batch(sets, ZCDP(rho=1.0), warm_start=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="delta"):
        design_covariance_batch(sets, [ApproxDP(epsilon=1.0, delta=2.0)] * 2)
