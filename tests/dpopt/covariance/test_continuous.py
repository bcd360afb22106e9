"""Designs for records anywhere in a box: exchange, certified sup, no under-noised record."""

import numpy as np
import pytest

import dpopt
from dpopt.covariance.continuous import initial_pairs
from dpopt.covariance.denoiser import two_record_vector
from dpopt.covariance.sensitivity import BoxTwoRecordSet, uniform_query_set
from dpopt.errors import InvalidParameterError, InvalidTypeError
from tests.box_reference import independent_box_sup

BUDGET = dpopt.ApproxDP(epsilon=1.0, delta=1e-6)


def _worst_pair_value(lo, hi, g, sigma, cov, n=20000, starts=16, seed=0):
    """Independent search: dense random pairs, vertices, then multi-start L-BFGS-B on (x, y)."""
    return independent_box_sup(lo, hi, g, sigma, np.linalg.inv(cov), n=n, starts=starts,
                               seed=seed)


def test_the_issue_reproduction_is_covered_by_the_box_design():
    g, sg = np.array([0.5]), 0.05
    grid = dpopt.design_covariance(
        dpopt.add_remove_set(dpopt.Grid([0.0], [1.0], (2,)), query=g, sigma=sg), BUDGET)
    t = two_record_vector(np.array([0.973]), np.array([0.0]), g, sg)
    assert dpopt.privacy_of(grid.covariance, t[None]).epsilon(1e-6) > 2.0  # the hole
    box = dpopt.design_covariance(
        dpopt.add_remove_set(dpopt.Box([0.0], [1.0]), query=g, sigma=sg), BUDGET, tol=1e-3)
    assert dpopt.privacy_of(box.covariance, t[None]).epsilon(1e-6) <= 1.0
    assert box.coverage is not None and box.certified and box.certificate.gap <= 1e-3
    assert box.path.startswith("box exchange (") and "working set by structured" in box.path
    # every record in the box, by the independent search
    worst = _worst_pair_value(np.zeros(1), np.ones(1), g, sg, box.covariance)
    assert worst <= box.bound
    # and the certified privacy over the box meets the budget
    priv = dpopt.privacy_of(box.covariance, dpopt.add_remove_set(dpopt.Box([0.0], [1.0]), g, sg))
    assert priv.mahalanobis_bound <= box.bound
    assert priv.epsilon(1e-6) <= 1.0 + 1e-9


@pytest.mark.parametrize(
    ("d", "where", "sigma_factor", "seed"),
    [(1, "centre", 0.01, 0), (1, "outside", 10.0, 1), (2, "vertex", 0.1, 2),
     (2, "centre", 1.0, 3), (2, "outside", 0.03, 4), (3, "inside", 0.3, 5)],
)
def test_no_under_noised_record_in_random_boxes(d, where, sigma_factor, seed):
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-1.0, 1.0, d)
    hi = lo + rng.uniform(0.3, 2.0, d)
    g = {"centre": (lo + hi) / 2, "vertex": hi.copy(), "outside": lo - rng.uniform(0.2, 1.0, d),
         "inside": rng.uniform(lo, hi)}[where]
    sigma = sigma_factor * float(np.max(hi - lo))
    w = np.diag(rng.uniform(0.5, 2.0, d))
    des = dpopt.design_covariance(dpopt.add_remove_set(dpopt.Box(lo, hi), g, sigma), BUDGET,
                                  weight=w, tol=1e-3)
    q = des.bound
    assert des.coverage is not None and des.coverage.sup.upper <= q
    assert _worst_pair_value(lo, hi, g, sigma, des.covariance, seed=seed) <= q
    assert des.certificate.lower <= des.value
    # never worse than the uniform-query design of the box
    uq = dpopt.design_covariance(uniform_query_set(dpopt.Box(lo, hi)), BUDGET, weight=w)
    assert des.value <= uq.value * (1 + 1e-9)
    # the lower bound is a relaxation: the grid designs (subsets of the box's pairs) bound it
    grid = dpopt.design_covariance(
        dpopt.add_remove_set(dpopt.Grid(lo, hi, (3,) * d), g, sigma), BUDGET, weight=w)
    assert grid.certificate.lower <= des.value * (1 + 1e-9)


def test_box_design_beats_the_uniform_query_design_at_a_central_query():
    box = dpopt.Box([0.0, 0.0], [1.0, 1.0])
    des = dpopt.design_covariance(dpopt.add_remove_set(box, [0.5, 0.5], 0.1), BUDGET, tol=1e-3)
    uq = dpopt.design_covariance(uniform_query_set(box), BUDGET)
    assert des.coverage is not None and des.coverage.method == "exchange"
    assert des.value < 0.95 * uq.value
    assert des.certified and des.certificate.gap <= 1e-3
    assert "box" in str(des)


def test_sup_mahalanobis_of_the_box_set_is_a_certified_bound():
    sset = dpopt.add_remove_set(dpopt.Box([0.0, 0.0], [1.0, 2.0]), [0.2, 1.5], 0.3)
    assert isinstance(sset, BoxTwoRecordSet)
    cov = np.array([[0.5, 0.1], [0.1, 0.8]])
    res = dpopt.sup_mahalanobis(sset, cov)
    worst = _worst_pair_value(np.zeros(2), np.array([1.0, 2.0]), np.array([0.2, 1.5]), 0.3, cov)
    assert not res.exact and res.lower <= worst * (1 + 1e-12) <= res.upper * (1 + 1e-12)
    assert res.upper / res.lower - 1 <= 1e-6
    # the vector is the maximising pair's two-record vector
    assert float(res.vector @ np.linalg.solve(cov, res.vector)) == pytest.approx(res.lower,
                                                                                 rel=1e-9)


def test_initial_pairs_cover_the_grid_pairs():
    sset = BoxTwoRecordSet(dpopt.Box([0.0, 0.0], [1.0, 1.0]), [0.3, 0.3], 0.2)
    xs, ys = initial_pairs(sset, 3)
    assert xs.shape == ys.shape and xs.shape[0] == 10 * 9 // 2  # 9 grid points + the query
    v = sset.vectors(xs, ys)
    w = sset.vectors(ys, xs)
    assert np.all(np.sum(v * v, 1) >= np.sum(w * w, 1))  # the longer orientation


def test_box_set_validation_and_refusals():
    box = dpopt.Box([0.0], [1.0])
    with pytest.raises(InvalidParameterError, match="query"):
        BoxTwoRecordSet(box, [0.0, 1.0], 0.1)
    with pytest.raises(InvalidParameterError, match="sigma"):
        BoxTwoRecordSet(box, [0.0], 0.0)
    with pytest.raises(InvalidTypeError, match="box"):
        BoxTwoRecordSet(dpopt.Grid([0.0], [1.0], (2,)), [0.0], 0.1)  # type: ignore[arg-type]
    sset = BoxTwoRecordSet(box, [0.5], 0.1)
    with pytest.raises(InvalidParameterError, match="in the box"):
        sset.vectors([[2.0]], [[0.0]])
    with pytest.raises(InvalidTypeError, match="infinite"):
        dpopt.prune(sset)
    point = BoxTwoRecordSet(dpopt.Box([1.0], [1.0]), [0.0], 0.1)
    with pytest.raises(InvalidParameterError, match="single point"):
        dpopt.design_covariance(point, BUDGET)


def test_save_and_load_a_box_design(tmp_path):
    from dpopt.covariance.design import Design

    sset = dpopt.add_remove_set(dpopt.Box([0.0, 0.0], [1.0, 1.0]), [0.2, 0.4], 0.2)
    des = dpopt.design_covariance(sset, dpopt.ZCDP(rho=0.5), tol=1e-3)
    path = tmp_path / "box.json"
    des.save(path)
    back = Design.load(path)
    assert back.coverage is not None
    assert back.coverage.sensitivity.box.upper.tolist() == [1.0, 1.0]
    assert back.coverage.sup.upper <= back.program.bound
    np.testing.assert_array_equal(back.covariance, des.covariance)
    assert back.value == des.value


def test_box_design_with_replacement_and_a_noise_floor():
    box = dpopt.Box([0.0, 0.0], [1.0, 2.0])
    sset = dpopt.add_remove_set(box, [0.5, 1.0], 0.1)
    base = dpopt.design_covariance(sset, dpopt.ZCDP(rho=0.5), tol=1e-3)
    rep = dpopt.design_covariance(sset, dpopt.ZCDP(rho=0.5), tol=1e-3, relation="replacement")
    assert rep.coverage is not None and rep.coverage.sup.upper <= base.bound / 4
    assert rep.privacy.mahalanobis_bound <= rep.bound
    assert rep.value == pytest.approx(4 * base.value, rel=2e-3)  # q / 4: four times the noise
    eta = 1.5 * float(np.linalg.eigvalsh(base.covariance)[0])
    floored = dpopt.design_covariance(sset, dpopt.ZCDP(rho=0.5), tol=1e-3, noise_floor=eta)
    assert float(np.linalg.eigvalsh(floored.covariance)[0]) >= eta * (1 - 1e-12)
    assert floored.coverage is not None and floored.coverage.sup.upper <= floored.bound
    assert _worst_pair_value(np.zeros(2), np.array([1.0, 2.0]), np.array([0.5, 1.0]), 0.1,
                             floored.covariance) <= floored.bound
