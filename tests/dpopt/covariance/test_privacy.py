"""Exact privacy of a covariance: rho*, naive bound and the report (Balle & Wang)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from dpopt.covariance import add_remove_set, prune, uniform_query_set
from dpopt.covariance.domains import Box, FinitePoints
from dpopt.covariance.privacy import max_norm, privacy_of
from dpopt.errors import InvalidParameterError

needs_budgets = pytest.mark.skipif(
    importlib.util.find_spec("dpopt.accounting.budgets") is None,
    reason="dpopt.accounting.budgets not available yet",
)


@needs_budgets
def test_unit_bound_report_matches_math_md() -> None:
    # K = [0,1]^2, uniform query: vertex differences (1, +-1); Sigma = 2 I gives rho* = 2/2 = 1
    p = privacy_of(2.0 * np.eye(2), uniform_query_set(Box([0.0, 0.0], [1.0, 1.0])))
    assert p.exact and p.relation == "add_remove"
    assert p.sup.value == pytest.approx(1.0, rel=1e-15)
    assert 1.0 <= p.mahalanobis_bound <= 1.0 + 1e-9  # safely rounded up, never down
    assert p.zcdp_rho == pytest.approx(0.5, rel=1e-8)
    assert p.gdp_mu == pytest.approx(1.0, rel=1e-8)
    rep = p.report
    assert rep.zcdp_rho == pytest.approx(0.5, rel=1e-8)
    assert rep.gdp_mu == pytest.approx(1.0, rel=1e-8)
    assert float(p.rdp_epsilon(3.0)) == pytest.approx(1.5, rel=1e-8)
    assert float(p.delta(1.0)) == pytest.approx(0.126936737506644, rel=1e-6)
    assert float(p.epsilon(1e-5)) == pytest.approx(4.37717809568, rel=1e-6)
    assert float(rep.mi_nats) == pytest.approx(0.11142148218474, rel=1e-6)
    # naive bound diam^2 lambda_max(Sigma^-1) = 2 * 0.5 = 1: tight for an isotropic Sigma
    assert p.naive_bound == pytest.approx(1.0)
    assert p.looseness == pytest.approx(1.0, rel=1e-8)
    d = p.to_dict()
    assert d["exact"] is True and "report" in d


@needs_budgets
def test_anisotropic_naive_bound_is_loose() -> None:
    cov = np.diag([1.0, 100.0])
    p = privacy_of(cov, uniform_query_set(Box([0.0, 0.0], [1.0, 1.0])))
    # rho* = max_v v^T P v = 1 + 0.01; naive = 2 * lambda_max(P) = 2
    assert p.sup.value == pytest.approx(1.01, rel=1e-14)
    assert p.naive_bound == pytest.approx(2.0)
    assert p.looseness == pytest.approx(2.0 / 1.01, rel=1e-8)


@needs_budgets
def test_replacement_is_four_times_and_flagged_as_bound() -> None:
    dom = FinitePoints(np.random.default_rng(0).normal(size=(6, 3)))
    src = add_remove_set(dom, np.zeros(3), 0.7)
    ar = privacy_of(np.eye(3), src)
    rep = privacy_of(np.eye(3), src, relation="replacement")
    assert rep.mahalanobis_bound == pytest.approx(4 * ar.mahalanobis_bound, rel=1e-15)
    assert not rep.exact and ar.exact
    assert rep.gdp_mu == pytest.approx(2 * ar.gdp_mu, rel=1e-12)


@needs_budgets
def test_pruned_set_gives_same_privacy_and_max_norm() -> None:
    rng = np.random.default_rng(1)
    dom = rng.normal(size=(20, 2))
    src = add_remove_set(dom, rng.normal(size=2), 0.5)
    a = rng.normal(size=(2, 2))
    cov = a @ a.T + 0.1 * np.eye(2)
    assert privacy_of(cov, prune(src)).mahalanobis_bound == pytest.approx(
        privacy_of(cov, src).mahalanobis_bound, rel=1e-14
    )
    assert max_norm(src) == pytest.approx(np.max(np.linalg.norm(src.dense(), axis=1)))
    box = Box([0.0, 0.0, 0.0], [1.0, 2.0, 2.0])
    assert max_norm(uniform_query_set(box)) == pytest.approx(3.0)


def test_bad_input() -> None:
    src = uniform_query_set(Box([0.0, 0.0], [1.0, 1.0]))
    with pytest.raises(InvalidParameterError) as err:
        privacy_of(np.eye(3), src)
    assert err.value.name == "covariance"
    with pytest.raises(InvalidParameterError) as err:
        privacy_of([[1.0, 2.0], [2.0, 1.0]], src)  # indefinite
    assert err.value.name == "covariance"
    with pytest.raises(InvalidParameterError) as err:
        privacy_of([[1.0, 0.3], [0.0, 1.0]], src)  # not symmetric
    assert err.value.name == "covariance"
    with pytest.raises(InvalidParameterError) as err:
        privacy_of(np.eye(2), src, relation="swap")  # type: ignore[arg-type]
    assert err.value.name == "relation"


@needs_budgets
def test_zero_sensitivity_is_perfectly_private() -> None:
    p = privacy_of(np.eye(2), [[0.0, 0.0]])
    assert p.mahalanobis_bound == 0.0
    assert float(p.delta(0.0)) == 0.0
