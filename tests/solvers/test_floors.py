"""Binding noise floors with W != I: both floor-block strategies against Clarabel at tight
tolerance, with weak duality checked by the independent certificate."""

from __future__ import annotations

import numpy as np
import pytest

from certificates.covariance import check
from certificates.problem import CovarianceProgram
from solvers.cvx import solve_cvx
from solvers.structured import solve_structured


def _weight(d: int, cond: float, rng: np.random.Generator) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = (q * np.geomspace(1.0, cond, d)) @ q.T
    return 0.5 * (w + w.T)


@pytest.mark.parametrize(("d", "count", "full"), [
    (3, 20, True), (6, 30, True), (10, 40, True),  # every direction in the floor block
    (11, 30, False), (13, 30, False),  # the block grows by column generation
    (12, 8, True),  # rank-deficient: 8 vectors in R^12
])
@pytest.mark.parametrize("quantile", [0.2, 0.6])
def test_floor_with_weight_agrees_with_clarabel(d: int, count: int, full: bool,
                                                quantile: float) -> None:
    rng = np.random.default_rng(1000 * d + count + int(100 * quantile))
    s = rng.standard_normal((count, d)) * rng.uniform(0.2, 2.0, (count, 1))
    w = _weight(d, 100.0, rng)
    base = solve_structured(CovarianceProgram(s, w, 1.0))
    ev = np.linalg.eigvalsh(base.covariance)
    eta = float(np.quantile(ev[ev > 1e-6 * ev[-1]], quantile))
    problem = CovarianceProgram(s, w, 1.0, eta)
    ours = solve_structured(problem, tol=1e-9)
    assert ours.status == "optimal", ours.message
    assert ours.stats.extra.get("floor_full", full) == full
    # the N = Sigma^-1 form beyond d = 8 (the natural form's blocks grow with d)
    ref = solve_cvx(problem, solver="clarabel", form="primal" if d <= 8 else "inverse",
                    tol=1e-10)
    assert ours.value == pytest.approx(ref.value, rel=1e-6)
    assert ours.value > base.value * (1 + 1e-7)  # the floor binds
    cert = check(problem, ours.covariance, ours.dual, tol=1e-8)
    assert cert.certified, cert.message
    # weak duality: the certified lower bound is below the reference optimum, which is below
    # the value of our (feasible) covariance
    assert cert.lower <= ref.value * (1 + 1e-8)
    assert ref.value <= cert.upper * (1 + 1e-8)
    assert float(np.linalg.eigvalsh(ours.covariance)[0]) >= eta
