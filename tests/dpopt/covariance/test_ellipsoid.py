"""Balls and ellipsoids: domains, the uniform-query closed form, the design."""

import numpy as np
import pytest

import dpopt
from dpopt.covariance.domains import Ball, Ellipsoid
from dpopt.covariance.sensitivity import EllipsoidDifferences, uniform_query_set
from dpopt.errors import InvalidParameterError, InvalidTypeError


def _sampled_sup(e, cov, n=20000, seed=0):
    """max of (x - y)^T Sigma^-1 (x - y) over random boundary pairs x = c + E u, y = c - E u."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, e.shape[0]))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    s = 2.0 * u @ e.T
    return float(np.max(np.einsum("ij,ij->i", s @ np.linalg.inv(cov), s)))


def test_ball_domain_snap_contains_and_box():
    b = Ball([1.0, -1.0], 2.0)
    rep = b.snap([[1.0, 3.0], [1.5, -1.0]])
    np.testing.assert_allclose(rep.records, [[1.0, 1.0], [1.5, -1.0]])
    assert rep.clamped == 1 and rep.moved == 1
    assert b.contains([[2.9, -1.0], [3.1, -1.0]]).tolist() == [True, False]
    box = b.bounding_box()
    assert np.all(box.lower <= [-1.0, -3.0]) and np.all(box.upper >= [3.0, 1.0])
    assert b.diameter() == pytest.approx(4.0)


def test_ellipsoid_validation():
    with pytest.raises(InvalidParameterError, match="shape"):
        Ellipsoid([0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]])
    with pytest.raises(InvalidParameterError, match="radius"):
        Ball([0.0], -1.0)
    with pytest.raises(InvalidParameterError, match="bounding_box"):
        dpopt.add_remove_set(Ball([0.0, 0.0], 1.0), [0.0, 0.0], 0.1)
    with pytest.raises(InvalidTypeError, match="continuum"):
        dpopt.prune(uniform_query_set(Ball([0.0], 1.0)))


def test_closed_form_sup_is_proven_and_matches_sampling():
    rng = np.random.default_rng(3)
    e = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    ell = Ellipsoid(rng.normal(size=3), e)
    cov = np.cov(rng.normal(size=(3, 10))) + 0.1 * np.eye(3)
    res = dpopt.sup_mahalanobis(uniform_query_set(ell), cov)
    sampled = _sampled_sup(e, cov)
    assert res.lower <= res.upper and sampled <= res.upper * (1 + 1e-12)
    assert res.upper / res.lower - 1 < 1e-9 and sampled >= 0.99 * res.lower


@pytest.mark.parametrize("weighted", [False, True])
def test_design_is_the_closed_form(weighted):
    rng = np.random.default_rng(5)
    e = np.array([[1.0, 0.3], [0.0, 0.5]])
    w = np.array([[2.0, 0.4], [0.4, 1.0]]) if weighted else None
    budget = dpopt.ZCDP(rho=0.5)  # q = 1
    des = dpopt.design_covariance(uniform_query_set(Ellipsoid([0.0, 0.0], e)), budget, weight=w)
    q = des.bound
    ww = np.eye(2) if w is None else w
    closed = 4.0 / q * float(np.trace(ww @ e @ e.T))
    assert des.value == pytest.approx(closed, rel=1e-6)
    assert des.certificate.lower <= closed * (1 + 1e-9)
    assert _sampled_sup(e, des.covariance) <= q
    assert des.coverage is not None and des.coverage.sup.upper <= q
    assert des.path.startswith("ellipsoid (closed-form sup); its working vectors by structured")
    del rng


def test_ball_design_and_its_guarantee():
    ball = Ball([0.5, 0.5], 0.5)
    sset = uniform_query_set(ball)
    assert isinstance(sset, EllipsoidDifferences)
    des = dpopt.design_covariance(sset, dpopt.ApproxDP(epsilon=1.0, delta=1e-6))
    np.testing.assert_allclose(des.covariance, 1.0 / des.bound * np.eye(2), rtol=1e-6)
    assert dpopt.privacy_of(des.covariance, sset).epsilon(1e-6) <= 1.0 + 1e-9
    with pytest.raises(InvalidParameterError, match="description"):
        des.save("never-written.json")
