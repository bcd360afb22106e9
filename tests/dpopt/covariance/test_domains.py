"""Domains: validation, points, vertices, diameters (checked by brute force)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

from dpopt.covariance.domains import Ball, Box, Ellipsoid, FinitePoints, Grid, as_domain
from dpopt.errors import InvalidParameterError, InvalidTypeError


def test_finite_points_diameter_brute_force() -> None:
    rng = np.random.default_rng(0)
    p = rng.normal(size=(40, 3))
    brute = max(np.linalg.norm(a - b) for a, b in itertools.combinations(p, 2))
    dom = FinitePoints(p)
    assert dom.diameter() == pytest.approx(brute, rel=1e-14)
    assert dom.dim == 3 and dom.size == 40
    assert not dom.points.flags.writeable


def test_finite_points_1d_input_and_single_point() -> None:
    dom = FinitePoints([0.0, 2.0, 5.0])
    assert dom.points.shape == (3, 1)
    assert dom.diameter() == pytest.approx(5.0)
    assert FinitePoints([[1.0, 2.0]]).diameter() == 0.0


def test_box_vertices_and_diameter() -> None:
    box = Box([0.0, -1.0, 2.0], [1.0, 1.0, 2.5])
    v = box.vertices()
    assert v.shape == (8, 3)
    assert {tuple(r) for r in v} == set(itertools.product([0.0, 1.0], [-1.0, 1.0], [2.0, 2.5]))
    assert box.diameter() == pytest.approx(np.sqrt(1 + 4 + 0.25))
    np.testing.assert_array_equal(box.side_lengths, [1.0, 2.0, 0.5])


def test_grid_points_contain_vertices() -> None:
    grid = Grid([0.0, 0.0], [1.0, 2.0], (3, 5))
    pts = grid.points
    assert pts.shape == (15, 2) and grid.size == 15
    assert {tuple(r) for r in grid.box.vertices()} <= {tuple(r) for r in pts}
    np.testing.assert_allclose(np.unique(pts[:, 1]), [0.0, 0.5, 1.0, 1.5, 2.0])
    assert grid.diameter() == pytest.approx(FinitePoints(pts).diameter())
    assert grid.as_finite().size == 15
    single = Grid([1.0, 0.0], [1.0, 1.0], (1, 2))
    np.testing.assert_array_equal(single.points, [[1.0, 0.0], [1.0, 1.0]])


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: FinitePoints(np.zeros((0, 2))), "points"),
        (lambda: FinitePoints([[0.0, np.nan]]), "points"),
        (lambda: FinitePoints([[0.0, np.inf]]), "points"),
        (lambda: FinitePoints(np.zeros((2, 2, 2))), "points"),
        (lambda: Box([0.0, 1.0], [1.0, 0.0]), "upper"),
        (lambda: Box([0.0, 0.0], [1.0]), "upper"),
        (lambda: Box([0.0, np.nan], [1.0, 1.0]), "lower"),
        (lambda: Box(np.zeros((2, 2)), np.ones((2, 2))), "lower"),
        (lambda: Grid([0.0], [1.0], (0,)), "shape"),
        (lambda: Grid([0.0, 0.0], [1.0, 1.0], (3,)), "shape"),
        (lambda: Grid([0.0], [1.0], (1,)), "shape"),
        (lambda: Grid([0.0] * 8, [1.0] * 8, (10,) * 8), "shape"),
        (lambda: as_domain(np.zeros((0, 3))), "domain"),
    ],
)
def test_bad_domains_name_parameter(make, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError) as err:
        make()
    assert err.value.name == name


def test_bad_types() -> None:
    with pytest.raises(InvalidTypeError):
        Grid([0.0], [1.0], (1.5,))
    with pytest.raises(InvalidTypeError):
        as_domain("points")
    assert isinstance(as_domain([[0.0, 1.0], [1.0, 1.0]]), FinitePoints)


@pytest.mark.parametrize("build, fields", [
    (lambda a, b: FinitePoints(np.stack([a, b])), ("points",)),
    (lambda a, b: Box(a, b), ("lower", "upper")),
    (lambda a, b: Grid(a, b, (3, 4)), ("lower", "upper")),
    (lambda a, b: Ellipsoid(a, np.diag(b)), ("centre", "shape")),
    (lambda a, b: Ball(a, 2.0), ("centre", "shape")),
])
def test_domain_arrays_are_read_only_copies(
    build: Callable[[np.ndarray, np.ndarray], object], fields: tuple[str, ...]
) -> None:
    """Every array a domain stores is float64, read-only, and a copy: editing the caller's array
    afterwards changes nothing (a domain that changed after its design was certified would make
    the certificate speak of another domain)."""
    lo, hi = np.array([0, 1]), np.array([2.0, 3.0])  # integer input on purpose
    dom = build(lo, hi)
    before = {f: getattr(dom, f).copy() for f in fields}
    lo[:] = -7
    hi[:] = 9.0
    for f in fields:
        arr = getattr(dom, f)
        assert arr.dtype == np.float64 and not arr.flags.writeable
        np.testing.assert_array_equal(arr, before[f])
        with pytest.raises(ValueError):
            arr[...] = 0.0
