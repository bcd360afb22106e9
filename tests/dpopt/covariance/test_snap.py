"""Snapping records to a public domain, and the denoiser release on snapped records."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpopt
from dpopt.covariance.denoiser import posterior_mean, snapped_posterior_mean, two_record_vector
from dpopt.covariance.domains import Box, FinitePoints, Grid, snap
from dpopt.covariance.mechanisms import DenoiserMechanism
from dpopt.errors import InvalidParameterError, InvalidTypeError


def _brute_nearest(points, records):
    """Index of the nearest point by exhaustive exact distances (lowest index on ties)."""
    out = []
    for x in records:
        d2 = [float(np.sum((p - x) ** 2)) for p in points]
        out.append(int(np.argmin(d2)))
    return np.array(out)


@settings(max_examples=60)
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),
    st.integers(0, 2**31 - 1),
)
def test_grid_snap_is_the_nearest_grid_point(shape, seed):
    rng = np.random.default_rng(seed)
    d = len(shape)
    lo = rng.uniform(-2, 1, d)
    hi = lo + rng.uniform(0.1, 3, d)
    hi = np.where(np.array(shape) == 1, lo, hi)
    grid = Grid(lo, hi, tuple(shape))
    records = rng.uniform(lo - 1.0, hi + 1.0, (25, d))
    rep = grid.snap(records)
    pts = grid.points
    brute = _brute_nearest(pts, records)
    # same distance as the brute-force nearest point (ties may pick another point)
    d_snap = np.sum((rep.records - records) ** 2, axis=1)
    d_brute = np.sum((pts[brute] - records) ** 2, axis=1)
    np.testing.assert_allclose(d_snap, d_brute, rtol=1e-12, atol=1e-14)
    # the snapped value is the grid's own point, bit for bit
    np.testing.assert_array_equal(pts[rep.indices], rep.records)
    outside = np.any((records < lo) | (records > hi), axis=1)
    assert rep.clamped == int(outside.sum())
    assert rep.moved == int(np.any(records != rep.records, axis=1).sum())
    assert rep.max_distance == pytest.approx(float(np.sqrt(d_snap.max())))


def test_grid_snap_keeps_grid_points_and_is_idempotent():
    grid = Grid([0.0, -1.0], [1.0, 1.0], (4, 3))
    rep = grid.snap(grid.points)
    np.testing.assert_array_equal(rep.records, grid.points)
    np.testing.assert_array_equal(rep.indices, np.arange(grid.size))
    assert rep.moved == 0 and rep.clamped == 0 and rep.max_distance == 0.0
    again = grid.snap(grid.snap([[0.3, 0.2], [5.0, -7.0]]).records)
    assert again.moved == 0


def test_finite_points_snap_matches_brute_force_and_counts():
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(17, 3))
    dom = FinitePoints(pts)
    records = rng.normal(scale=2.0, size=(40, 3))
    rep = dom.snap(records)
    np.testing.assert_array_equal(rep.indices, _brute_nearest(pts, records))
    np.testing.assert_array_equal(rep.records, pts[rep.indices])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    assert rep.clamped == int(np.any((records < lo) | (records > hi), axis=1).sum())
    assert "of 40 records" in rep.summary()


def test_box_snap_clamps():
    box = Box([0.0, 0.0], [1.0, 2.0])
    rep = box.snap([[0.5, 0.5], [-1.0, 3.0], [1.0, 2.0]])
    np.testing.assert_array_equal(rep.records, [[0.5, 0.5], [0.0, 2.0], [1.0, 2.0]])
    assert rep.clamped == 1 and rep.moved == 1 and rep.indices is None
    np.testing.assert_array_equal(box.contains([[0.5, 0.5], [1.5, 0.0]]), [True, False])
    assert snap(box, [[2.0, 2.0]]).records.tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize("bad", [[[np.nan]], [[1.0, 2.0]], "x"])
def test_snap_rejects_bad_records(bad):
    with pytest.raises((InvalidParameterError, InvalidTypeError), match="records"):
        Grid([0.0], [1.0], (3,)).snap(bad)


def test_snap_rejects_non_domain():
    with pytest.raises(InvalidTypeError, match="domain"):
        snap(np.zeros((2, 1)), [[0.0]])  # type: ignore[arg-type]


def test_snapped_posterior_mean_is_the_denoiser_of_the_snapped_records():
    grid = Grid([0.0, 0.0], [1.0, 1.0], (3, 3))
    records = np.array([[0.1, 0.9], [0.45, 0.55], [2.0, -1.0]])
    m, rep = snapped_posterior_mean(records, grid, [0.3, 0.6], 0.2)
    np.testing.assert_allclose(m, posterior_mean(rep.records, [0.3, 0.6], 0.2), rtol=0, atol=0)
    np.testing.assert_array_equal(rep.records, [[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]])
    with pytest.raises(InvalidParameterError, match="records"):
        snapped_posterior_mean(np.zeros((0, 2)), grid, [0.3, 0.6], 0.2)


def test_snapping_closes_the_grid_hole_of_the_issue():
    """Records 0.973 and 0.0 on a 2-point grid: unsnapped the sup is exceeded; snapped, every
    pair of neighbouring datasets moves the denoiser by a vector the design covers."""
    g, sg = np.array([0.5]), 0.05
    grid = Grid([0.0], [1.0], (2,))
    des = dpopt.design_covariance(dpopt.add_remove_set(grid, query=g, sigma=sg),
                                  dpopt.ApproxDP(epsilon=1, delta=1e-6))
    prec = np.linalg.inv(des.covariance)
    q = des.bound
    raw = two_record_vector(np.array([0.973]), np.array([0.0]), g, sg)
    assert float(raw @ prec @ raw) > 1.5 * q  # the hole: an unsnapped record is not covered
    # snapped: brute force over neighbouring datasets built from real-valued records
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 4))
        data = rng.uniform(-0.2, 1.2, (n, 1))
        extra = rng.uniform(-0.2, 1.2, (1, 1))
        a, _ = snapped_posterior_mean(np.vstack([data, extra]), grid, g, sg)
        b, _ = snapped_posterior_mean(data, grid, g, sg)
        s = a - b
        assert float(s @ prec @ s) <= q * (1 + 1e-9)


def test_denoiser_mechanism_release_and_validation():
    grid = Grid([0.0], [1.0], (5,))
    mech = DenoiserMechanism(grid, [0.5], 0.1, [[0.04]])
    records = np.array([[0.13], [0.52], [1.4]])
    out1 = mech.release(records, rng=11)
    out2 = mech.release(records, rng=11)
    np.testing.assert_array_equal(out1.value, out2.value)
    exact, rep = mech.exact(records)
    noise = mech._gauss.noise((), rng=11)
    np.testing.assert_allclose(out1.value, exact + noise, rtol=1e-15)
    assert rep.clamped == 1 and out1.snap.moved == 3
    with pytest.raises(InvalidParameterError, match="query"):
        DenoiserMechanism(grid, [0.5, 0.5], 0.1, [[0.04]])
    with pytest.raises(InvalidParameterError, match="covariance"):
        DenoiserMechanism(grid, [0.5], 0.1, np.eye(2))
    with pytest.raises(InvalidParameterError, match="sigma"):
        DenoiserMechanism(grid, [0.5], -1.0, [[0.04]])
    with pytest.raises(InvalidTypeError, match="domain"):
        DenoiserMechanism([[0.0], [1.0]], [0.5], 0.1, [[0.04]])  # type: ignore[arg-type]


def test_domain_built_from_released_records_warns():
    records = np.array([[0.1], [0.7], [0.3]])
    mech = DenoiserMechanism(FinitePoints(records), [0.5], 0.1, [[0.04]])
    with pytest.warns(UserWarning, match="must be public"):
        mech.release(records, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DenoiserMechanism(FinitePoints([[0.0], [1.0]]), [0.5], 0.1, [[0.04]]).release(
            records, rng=0
        )


def test_grid_snap_axis_order_matches_points():
    grid = Grid([0.0, 0.0, 0.0], [1.0, 2.0, 3.0], (2, 3, 4))
    for idx in itertools.product(range(2), range(3), range(4)):
        pt = np.array([grid.axis_values(a)[i] for a, i in enumerate(idx)])
        rep = grid.snap(pt[None] + 0.01)
        np.testing.assert_array_equal(grid.points[rep.indices[0]], rep.records[0])


def test_mechanism_from_design_uses_the_designs_domain_query_and_sigma():
    grid = Grid([0.0, 0.0], [1.0, 1.0], (3, 3))
    des = dpopt.design_covariance(dpopt.add_remove_set(grid, [0.5, 0.4], 0.3), dpopt.GDP(mu=1))
    mech = DenoiserMechanism.from_design(des, grid)
    np.testing.assert_array_equal(mech.query, [0.5, 0.4])
    assert mech.sigma == 0.3 and mech.domain is grid
    with pytest.raises(InvalidParameterError, match="domain"):
        DenoiserMechanism.from_design(des)
    with pytest.raises(InvalidParameterError, match="points"):
        DenoiserMechanism.from_design(des, Grid([0.0, 0.0], [1.0, 1.0], (4, 4)))
    box = Box([0.0, 0.0], [1.0, 1.0])
    bdes = dpopt.design_covariance(dpopt.add_remove_set(box, [0.5, 0.4], 0.3), dpopt.GDP(mu=1),
                                   tol=1e-3)
    bmech = DenoiserMechanism.from_design(bdes)
    assert isinstance(bmech.domain, Box) and bmech.sigma == 0.3
    with pytest.raises(InvalidParameterError, match="box"):
        DenoiserMechanism.from_design(bdes, Box([0.0, 0.0], [2.0, 2.0]))
    uq = dpopt.design_covariance(dpopt.uniform_query_set(box), dpopt.GDP(mu=1))
    with pytest.raises(InvalidParameterError, match="fixed-query"):
        DenoiserMechanism.from_design(uq, grid)
