"""certificates.stacked.check_stacked on closed-form primal/dual pairs (no solver).

The uniform-query cube with a diagonal weight has the optimum
Sigma* = diag(sum_k sqrt(w_k) / (q sqrt(w_i))) and the value (sum_i sqrt(w_i))^2 / q; its dual
follows from stationarity (tests/certificates/closed_form.py). Every stacked certificate must
contain the value, certify it, and equal ``certificates.covariance.check`` on the same pair.
"""

from __future__ import annotations

import numpy as np
import pytest

from certificates.covariance import check
from certificates.errors import InvalidParameterError
from certificates.problem import CovarianceProgram
from certificates.stacked import check_stacked
from tests.certificates.closed_form import cube, kkt_dual


@pytest.mark.parametrize("d", [2, 3, 4])
def test_closed_form_cubes_are_certified_as_check_certifies_them(d: int) -> None:
    rng = np.random.default_rng(d)
    weights = rng.uniform(0.5, 3.0, size=d)
    bounds = rng.uniform(0.2, 5.0, size=5)
    triples = [cube(weights, float(q)) for q in bounds]
    problems = [t[0] for t in triples]
    sigmas = [t[1] for t in triples]
    duals = [kkt_dual(p, s) for p, s in zip(problems, sigmas, strict=True)]
    # the exact optimum, one just below it (the repair scales it) and one far below (check)
    covs = [sigmas[0], sigmas[1] * (1 - 1e-9), sigmas[2] * 0.25, sigmas[3], sigmas[4]]
    got = check_stacked(problems, covs, duals, tol=1e-9)
    for prog, cov, dual, (_, _, value), cert in zip(problems, covs, duals, triples, got,
                                                    strict=True):
        ref = check(prog, cov, dual, tol=1e-9)
        assert cert.certified and ref.certified
        assert cert.lower <= value * (1 + 1e-12) <= cert.upper * (1 + 2e-12)
        assert cert.lower == pytest.approx(ref.lower, rel=1e-12)
        assert cert.upper == pytest.approx(ref.upper, rel=1e-12)
        assert cert.mahalanobis_sup == pytest.approx(ref.mahalanobis_sup, rel=1e-12)
        assert cert.mahalanobis_sup < prog.bound
        np.testing.assert_allclose(cert.repaired_covariance, ref.repaired_covariance,
                                   rtol=1e-12)
    assert got[1].scale > 1.0 and got[2].scale > 3.9


def test_a_wrong_dual_is_not_certified() -> None:
    """The dual of another bound proves a weaker interval, never a false one."""
    weights = np.array([1.0, 2.0, 0.5])
    (p1, s1, v1), (p2, s2, _) = cube(weights, 1.0), cube(weights, 3.0)
    foreign = kkt_dual(p2, s2)
    cert = check_stacked([p1, p2], [s1, s2], [foreign, foreign], tol=1e-9)
    assert cert[0].lower <= v1 * (1 + 1e-12) and not cert[0].certified
    assert cert[1].certified
    assert cert[0].lower == pytest.approx(check(p1, s1, foreign, tol=1e-9).lower, rel=1e-12)


def test_shapes_are_named() -> None:
    prog, sigma, _ = cube(np.ones(2), 1.0)
    dual = kkt_dual(prog, sigma)
    other = CovarianceProgram(np.eye(2), None, 1.0)
    with pytest.raises(InvalidParameterError, match="covariances/duals"):
        check_stacked([prog, other], [sigma], [dual])
