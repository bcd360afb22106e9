"""dpopt.covariance.design.design_covariance end to end: ideal denoiser on a grid with every
budget type."""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest

from certificates.errors import (
    AccuracyWarning,
    InvalidParameterError,
    InvalidTypeError,
)
from certificates.problem import CovarianceProgram
from dpopt.accounting.budgets import GDP, MIDP, RDP, ZCDP, AllOf, ApproxDP
from dpopt.covariance import add_remove_set, uniform_query_set
from dpopt.covariance.design import Design, design_covariance
from dpopt.covariance.domains import Grid
from dpopt.covariance.privacy import CovariancePrivacy
from dpopt.covariance.sensitivity import TwoRecordVectors
from dpopt.relation import NeighbouringRelation, add_remove_bound
from solvers.api import solve
from tests.canonical import F1

BUDGETS = [
    RDP(alpha=[2.0, 8.0], epsilon=[0.5, 1.0]),
    ZCDP(rho=0.5),
    GDP(mu=1.0),
    ApproxDP(epsilon=1.0, delta=1e-6),
    MIDP(kappa=0.1, relation="add_remove"),
    AllOf(GDP(mu=1.0), ApproxDP(epsilon=1.0, delta=1e-6)),
]


def _mp_ratio(sigma: np.ndarray, vectors: np.ndarray) -> mpmath.mpf:
    with mpmath.workdps(40):
        m = mpmath.matrix(sigma.tolist())
        return max(
            (mpmath.matrix(v.tolist()).T * mpmath.lu_solve(m, mpmath.matrix(v.tolist())))[0]
            for v in vectors
        )


@pytest.fixture(scope="module")
def denoiser_set():  # type: ignore[no-untyped-def]
    grid = Grid(np.zeros(2), np.ones(2), (3, 3))
    return add_remove_set(grid, [0.4, 0.6], 0.3)


@pytest.mark.parametrize("budget", BUDGETS, ids=[b.describe() for b in BUDGETS])
def test_denoiser_each_budget(denoiser_set, budget) -> None:  # type: ignore[no-untyped-def]
    design = design_covariance(denoiser_set, budget)
    q = budget.mahalanobis_bound()
    assert isinstance(design, Design) and design.certified
    assert design.bound == q
    assert design.value <= design.isotropic_value * (1 + 1e-9)
    # re-checked privacy: the sup over the two-record vectors is within the budget (mpmath)
    vec = denoiser_set.dense()
    assert _mp_ratio(design.covariance, vec) < q
    assert design.privacy.mahalanobis_bound <= q * (1 + 1e-12)
    assert design.certificate.lower <= design.value


def test_budget_sequence_is_all_of(denoiser_set) -> None:  # type: ignore[no-untyped-def]
    both = design_covariance(denoiser_set, [GDP(mu=1.0), ApproxDP(epsilon=1.0, delta=1e-6)])
    one = design_covariance(denoiser_set, ApproxDP(epsilon=1.0, delta=1e-6))
    assert both.bound == one.bound
    assert both.value == pytest.approx(one.value, rel=1e-6)


def test_matches_canonical_and_scaling() -> None:
    """Value scales as 1/q (v(q/2) = 2 v(q), F1)."""
    d1 = design_covariance(F1.vectors, ZCDP(rho=0.5), weight=F1.weight)
    d2 = design_covariance(F1.vectors, ZCDP(rho=0.25), weight=F1.weight)
    assert d1.certificate.lower <= F1.value <= d1.value
    assert d2.value == pytest.approx(2 * F1.value, rel=1e-6)
    assert d1.isotropic_value == pytest.approx(10.5)


def test_uniform_query_with_floor_rigorous() -> None:
    src = uniform_query_set(Grid(np.zeros(2), np.ones(2), (3, 3)))
    design = design_covariance(src, GDP(mu=1.0), noise_floor=0.5, rigorous=True)
    assert design.certified and design.certificate.rigorous
    assert np.linalg.eigvalsh(design.covariance)[0] >= 0.5
    assert _mp_ratio(design.covariance, src.dense()) < 1.0


def test_save_and_verify(tmp_path, denoiser_set) -> None:  # type: ignore[no-untyped-def]
    from certificates.io import verify_file

    design = design_covariance(denoiser_set, GDP(mu=1.0), rigorous=True)
    path = tmp_path / "design.json"
    design.save(path, description="ideal denoiser, 3x3 grid, g=(0.4, 0.6), sigma=0.3")
    cert = verify_file(path, source=denoiser_set)
    assert cert.certified and cert.upper == design.value
    assert np.array_equal(cert.repaired_covariance, design.covariance)


def test_every_backend(denoiser_set) -> None:  # type: ignore[no-untyped-def]
    values = [design_covariance(denoiser_set, GDP(mu=1.0), solver=s).value
              for s in ("clarabel", "scs")]
    assert values[0] == pytest.approx(values[1], rel=1e-6)


def test_uncertified_warns_but_is_private(denoiser_set) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        design = design_covariance(denoiser_set, GDP(mu=1.0), tol=1e-14, solver="clarabel")
    assert any(issubclass(w.category, AccuracyWarning) for w in rec)
    assert not design.certified
    assert _mp_ratio(design.covariance, denoiser_set.dense()) < 1.0


def test_bad_input(denoiser_set) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidTypeError):
        design_covariance(denoiser_set, "eps=1")
    with pytest.raises(InvalidParameterError):
        design_covariance(denoiser_set, [])
    with pytest.raises(InvalidParameterError):
        design_covariance(denoiser_set, GDP(mu=1.0), weight=np.eye(3))
    with pytest.raises(InvalidParameterError):
        design_covariance(denoiser_set, GDP(mu=1.0), noise_floor=-1.0)
    with pytest.raises(InvalidParameterError):
        design_covariance(denoiser_set, GDP(mu=1.0), solver="nope")
    with pytest.raises(InvalidParameterError):
        design_covariance(np.array([[np.nan, 1.0]]), GDP(mu=1.0))


@pytest.mark.parametrize(("d", "m"), [(3, 3), (5, 4), (10, 6)])
def test_rank_deficient_design_is_certified_and_rechecked(d: int, m: int) -> None:
    """m <= d records: the two-record vectors span m - 1 < d dimensions, the optimum is singular
    (returned with a tiny ridge off the span, condition ~1e9). The design must certify, and the
    independent privacy re-check must not mistake rounding for a violation (regression: the
    condition-number margin of the re-check used to reject these designs)."""
    from dpopt.covariance.domains import FinitePoints

    rng = np.random.default_rng(d + m)
    vectors = add_remove_set(FinitePoints(rng.random((m, d))), np.full(d, 0.5), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no AccuracyWarning either
        design = design_covariance(vectors, GDP(mu=1.0))
    assert design.certified
    assert design.certificate.gap < 1e-8
    sup = design.privacy.sup
    assert sup.upper <= design.bound
    assert sup.upper <= sup.value * (1 + 1e-9)
    # brute force in extended precision over every vector
    dense = np.concatenate([b for _, b in vectors.chunks()])
    with mpmath.workdps(50):
        cov = mpmath.matrix(design.covariance.tolist())
        vecs = [mpmath.matrix(v.tolist()) for v in dense]
        true = max((v.T * mpmath.lu_solve(cov, v))[0] for v in vecs)
    assert true <= sup.upper <= design.bound


class _CountingSource:
    """A VectorSource that counts complete passes over the wrapped source."""

    def __init__(self, inner: TwoRecordVectors) -> None:
        self.inner = inner
        self.passes = 0

    @property
    def count(self) -> int:
        return self.inner.count

    @property
    def dim(self) -> int:
        return self.inner.dim

    def chunks(self, size: int = 65536):  # type: ignore[no-untyped-def]
        seen = 0
        for start, block in self.inner.chunks(size):
            seen += block.shape[0]
            yield start, block
        if seen == self.inner.count:
            self.passes += 1

    def take(self, indices: np.ndarray) -> np.ndarray:
        return self.inner.take(indices)


def test_one_design_costs_the_solver_passes_plus_one_verification_pass() -> None:
    rng = np.random.default_rng(7)
    src = TwoRecordVectors(rng.random((300, 3)), np.full(3, 0.5), 0.3)  # J = 44,850
    budget = ApproxDP(1.0, 1e-6)
    solver_only = _CountingSource(src)
    sol = solve(CovarianceProgram(solver_only, None, budget.mahalanobis_bound()),
                method="structured")
    counted = _CountingSource(src)
    design = design_covariance(counted, budget, solver="structured")
    assert design.certified
    assert solver_only.passes == sol.stats.passes
    assert counted.passes <= solver_only.passes + 1, (counted.passes, solver_only.passes)
    # ... and every number the design reports comes from that one verification pass:
    # an independent brute-force sup over all vectors agrees with the design's privacy bound
    dense = np.concatenate([b for _, b in src.chunks()])
    sup = float(np.max(np.einsum("ij,ij->i", dense @ np.linalg.inv(design.covariance), dense)))
    assert design.privacy.mahalanobis_bound >= sup * (1 - 1e-12)
    assert design.privacy.mahalanobis_bound == pytest.approx(sup, rel=1e-9)
    assert design.privacy.mahalanobis_bound <= design.bound
    assert design.isotropic_value == pytest.approx(
        float(np.max(np.einsum("ij,ij->i", dense, dense))) / design.bound * 3, rel=1e-12
    )


def test_design_reports_status_like_scipy() -> None:
    s = np.array([[1.0, 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
    d = design_covariance(s, ZCDP(rho=0.5))
    assert d.success is d.certified is True
    assert d.status == "optimal" and "certified" in d.message
    assert isinstance(d.privacy, CovariancePrivacy)
    assert d.relation is NeighbouringRelation.ADD_REMOVE


def test_replacement_relation_designs_against_a_quarter_of_the_bound() -> None:
    s = np.array([[1.0, 0.0], [0.0, 2.0]])
    add = design_covariance(s, GDP(mu=1.0))
    rep = design_covariance(s, GDP(mu=1.0), relation="replacement")
    assert rep.program.bound == add_remove_bound(1.0, "replacement") == 0.25
    assert rep.value == pytest.approx(4 * add.value, rel=1e-7)
    assert rep.privacy.mahalanobis_bound <= 1.0
    with pytest.raises(InvalidParameterError, match="add_remove"):
        design_covariance(s, GDP(mu=1.0), relation="replace")


def test_design_rejects_an_all_zero_source() -> None:
    from certificates.problem import ArrayVectors
    from dpopt.accounting.budgets import GDP
    from dpopt.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="no noise is needed"):
        design_covariance(ArrayVectors(np.zeros((4, 2))), GDP(mu=1.0))
