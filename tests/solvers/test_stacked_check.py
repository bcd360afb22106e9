"""certificates.stacked.check_stacked on solver output: each certificate the one check proves.

References: ``certificates.covariance.check`` on every item alone, an own float recomputation
of every constraint at the repaired covariance, and cvxpy + Clarabel at tight tolerance for the
optimal values the intervals must contain.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProgram, FactoredDual
from certificates.stacked import check_stacked
from solvers.structured import solve_structured


def _programs(seed: int, n: int, d: int, count: int, eta: float = 0.0,
              spd: bool = True) -> list[CovarianceProgram]:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((count, d))
    if spd:
        a = rng.standard_normal((d, d))
        w = a @ a.T + 0.5 * np.eye(d)
    else:
        w = np.eye(d)
    return [CovarianceProgram(base * (1.0 + 0.2 * rng.random(d)), w,
                              float(rng.uniform(0.3, 3.0)), eta) for _ in range(n)]


def _own_sup(program: CovarianceProgram, sigma: NDArray[np.float64]) -> float:
    s = np.asarray(program.vectors)
    z = np.linalg.solve(np.linalg.cholesky(sigma), s.T)
    return float(np.max(np.sum(z * z, axis=0)))


def _same(a: CovarianceCertificate, b: CovarianceCertificate) -> None:
    if a.argmax == b.argmax:
        assert a.certified == b.certified
        assert a.lower == pytest.approx(b.lower, rel=1e-12, abs=1e-300)
    else:
        # several vectors attain the sup (the constraints active at an optimum) and the two
        # passes' rounding broke the tie differently: the closed-form bound, taken at the
        # vector found largest, may then differ; each lower bound is still a valid one
        assert a.attained_sup == pytest.approx(b.attained_sup, rel=1e-12)
        assert max(a.lower, b.lower) <= min(a.upper, b.upper) * (1 + 1e-9)
        assert min(a.lower, b.lower) >= min(a.dual_value / (1 + a.dual_residual / a.w_min),
                                            b.lower) * (1 - 1e-12)
    assert a.upper == pytest.approx(b.upper, rel=1e-12)
    assert a.mahalanobis_sup == pytest.approx(b.mahalanobis_sup, rel=1e-12)
    assert a.scale == pytest.approx(b.scale, rel=1e-12)
    # the largest constraint value (at an optimum several vectors tie for it, so the index
    # rounding picks may differ; the value may not)
    assert a.attained_sup == pytest.approx(b.attained_sup, rel=1e-12)
    np.testing.assert_allclose(a.repaired_covariance, b.repaired_covariance, rtol=1e-12)
    assert a.message.split(";")[0].split(":")[0] == b.message.split(";")[0].split(":")[0]


@pytest.mark.parametrize("seed,d,eta", [(0, 2, 0.0), (1, 3, 0.0), (2, 5, 0.0), (3, 3, 0.05)])
def test_each_certificate_is_the_one_check_proves(seed: int, d: int, eta: float) -> None:
    problems = _programs(seed, 6, d, 40, eta)
    sols = [solve_structured(p, tol=1e-9) for p in problems]
    covs = [s.covariance for s in sols]
    # perturb some: one slightly infeasible (the repair), one far too small (the repair
    # beyond the first margin goes to check), one singular (ridged by check)
    covs[1] = covs[1] * (1.0 - 1e-7)
    covs[2] = covs[2] * 0.5
    v = np.linalg.eigh(covs[3])[1][:, 0]
    covs[3] = covs[3] - (np.linalg.eigvalsh(covs[3])[0]) * np.outer(v, v)
    duals = [s.dual for s in sols]
    got = check_stacked(problems, covs, duals, tol=1e-6)
    for p, c, u, cert in zip(problems, covs, duals, got, strict=True):
        ref = check(p, c, u, tol=1e-6)
        _same(cert, ref)
        if np.isfinite(cert.upper):
            # the repaired covariance is private for every vector, by an own recomputation
            assert _own_sup(p, cert.repaired_covariance) <= p.bound
            assert cert.mahalanobis_sup < p.bound
    assert got[0].certified and got[1].certified and got[1].scale > 1.0
    assert np.isfinite(got[2].upper) and got[2].scale > 1.9  # repaired by check


def test_intervals_contain_clarabels_optimum() -> None:
    from solvers.cvx import solve_cvx

    problems = _programs(7, 5, 3, 30)
    sols = [solve_structured(p, tol=1e-9) for p in problems]
    certs = check_stacked(problems, [s.covariance for s in sols], [s.dual for s in sols],
                          tol=1e-7)
    for p, cert in zip(problems, certs, strict=True):
        ref = solve_cvx(p, solver="clarabel", form="primal", tol=1e-10)
        assert cert.certified
        assert cert.lower <= ref.value * (1 + 1e-7)
        assert cert.upper >= ref.value * (1 - 1e-7)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(2, 4), shrink=st.floats(0.3, 1.0))
def test_property_stacked_equals_single(seed: int, d: int, shrink: float) -> None:
    """Any covariance (a scaled optimum) with any dual (a neighbour's): the same certificate."""
    problems = _programs(seed, 4, d, 12, spd=bool(seed % 2))
    sols = [solve_structured(p, tol=1e-8) for p in problems]
    covs = [s.covariance * shrink for s in sols]
    duals = [sols[(i + 1) % 4].dual for i in range(4)]  # a dual of another program
    for cert, p, c, u in zip(check_stacked(problems, covs, duals), problems, covs, duals,
                             strict=True):
        _same(cert, check(p, c, u))


def test_programs_that_do_not_stack_are_checked_one_by_one() -> None:
    problems = _programs(4, 2, 2, 10) + _programs(5, 1, 2, 14)  # another size, another W
    sols = [solve_structured(p, tol=1e-9) for p in problems]
    covs = [s.covariance for s in sols]
    duals = [s.dual for s in sols]
    for cert, p, c, u in zip(check_stacked(problems, covs, duals), problems, covs, duals,
                             strict=True):
        _same(cert, check(p, c, u))
    rig = check_stacked(problems[:2], covs[:2], duals[:2], rigorous=True)
    assert all(c.rigorous and c.certified for c in rig)


def test_bad_input_is_named() -> None:
    problems = _programs(6, 2, 2, 8)
    sols = [solve_structured(p, tol=1e-9) for p in problems]
    covs = [s.covariance for s in sols]
    duals = [s.dual for s in sols]
    assert check_stacked([], [], []) == []
    with pytest.raises(InvalidParameterError, match="covariances/duals"):
        check_stacked(problems, covs[:1], duals)
    with pytest.raises(InvalidTypeError, match=r"problems\[1\]"):
        check_stacked([problems[0], "x"], covs, duals)  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError, match=r"duals\[0\]"):
        check_stacked(problems, covs, [None, duals[1]])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="tol"):
        check_stacked(problems, covs, duals, tol=-1.0)
    bad = FactoredDual(np.array([0, 99]), np.ones(2), np.zeros((2, 2)), np.zeros((2, 0)))
    with pytest.raises(InvalidParameterError, match="support"):
        check_stacked(problems, covs, [bad, duals[1]])
    with pytest.raises(InvalidParameterError, match="covariance"):
        check_stacked(problems, [np.full((2, 2), np.nan), covs[1]], duals)
