"""The grid corner reduction against brute force over every pair; schedules against closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from dpopt.covariance.domains import FinitePoints, Grid
from dpopt.diffusion.schedules import Schedule, as_schedule, cosine_schedule, linear_schedule
from dpopt.diffusion.sets import grid_reduction, release_set
from dpopt.errors import InvalidParameterError


def brute_force_sup(points: np.ndarray, query: np.ndarray, sigma: float, p: np.ndarray) -> float:
    """max over ordered pairs x != y of t_g(x, y)^T P t_g(x, y), written from the formula."""
    best = 0.0
    for x, y in itertools.permutations(points, 2):
        if np.array_equal(x, y):
            continue
        z = (np.sum((query - y) ** 2) - np.sum((query - x) ** 2)) / (2.0 * sigma**2)
        t = expit(z) * (x - y)
        best = max(best, float(t @ p @ t))
    return best


@settings(max_examples=40, deadline=None)
@given(
    nx=st.integers(1, 5), ny=st.integers(2, 5),
    gx=st.floats(-2, 3), gy=st.floats(-2, 3), log_sigma=st.floats(-2.5, 1.0),
    a=st.floats(-1, 1), b=st.floats(0.05, 2), c=st.floats(0.05, 2),
)
def test_reduction_matches_brute_force(nx: int, ny: int, gx: float, gy: float,
                                       log_sigma: float, a: float, b: float, c: float) -> None:
    grid = Grid([0.0, -0.5], [1.0 if nx > 1 else 0.0, 2.0], (nx, ny))
    g = np.array([gx, gy])
    sigma = 10.0**log_sigma
    p = np.array([[b, a * math.sqrt(b * c)], [a * math.sqrt(b * c), c]])
    red = grid_reduction(grid).vectors(g, sigma)
    got = float(np.max(np.einsum("ij,jk,ik->i", red, p, red)))
    want = brute_force_sup(grid.points, g, sigma, p)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-300)


def test_reduction_vectors_are_members_of_the_full_set() -> None:
    grid = Grid([0.0, 0.0], [1.0, 1.0], (6, 4))
    g, sigma = np.array([0.3, 0.9]), 0.2
    full = release_set(grid, g, sigma, reduce=False)
    dense = np.asarray(full.take(np.arange(full.count, dtype=np.intp)))
    red = grid_reduction(grid).vectors(g, sigma)
    assert red.shape == ((11 * 7 - 1) // 2, 2)
    for v in red:
        assert np.min(np.max(np.abs(dense - v), axis=1)) < 1e-15


def test_reduction_in_three_dimensions() -> None:
    rng = np.random.default_rng(3)
    grid = Grid([0.0, 0.0, 0.0], [1.0, 2.0, 1.0], (3, 3, 2))
    for _ in range(5):
        g = rng.uniform(-1, 2, 3)
        sigma = float(10 ** rng.uniform(-1.5, 0.5))
        a = rng.standard_normal((3, 3))
        p = a @ a.T
        red = grid_reduction(grid).vectors(g, sigma)
        got = float(np.max(np.einsum("ij,jk,ik->i", red, p, red)))
        assert got == pytest.approx(brute_force_sup(grid.points, g, sigma, p), rel=1e-12)


def test_release_set_box_and_finite_points() -> None:
    from dpopt.covariance.domains import Box
    from dpopt.covariance.sensitivity import BoxTwoRecordSet

    assert isinstance(release_set(Box(np.zeros(1), np.ones(1)), [0.5], 1.0), BoxTwoRecordSet)
    src = release_set(FinitePoints([[0.0], [1.0], [3.0]]), [0.0], 1.0)
    assert src.count == 3
    with pytest.raises(InvalidParameterError, match="query"):
        grid_reduction(Grid([0.0, 0.0], [1.0, 1.0], (2, 2))).vectors([0.0], 1.0)


def test_linear_schedule_is_the_cumulative_product() -> None:
    s = linear_schedule(10, train_steps=100)
    betas = np.linspace(1e-4, 0.02, 100)
    a = np.cumprod(1.0 - betas)
    idx = np.round(np.linspace(99, 0, 10)).astype(int)
    np.testing.assert_allclose(s.alpha_bar, a[idx], rtol=1e-12)
    np.testing.assert_allclose(s.sigma, np.sqrt((1 - a[idx]) / a[idx]), rtol=1e-12)
    assert s.next_alpha_bar[-1] == 1.0


def test_cosine_schedule_closed_form() -> None:
    s = cosine_schedule(5, train_steps=100)
    u = np.round(np.linspace(99, 0, 5)).astype(int)[1:] + 1  # the unclipped levels
    f = np.cos((u / 100 + 0.008) / 1.008 * np.pi / 2) ** 2 / np.cos(0.008 / 1.008 * np.pi / 2) ** 2
    np.testing.assert_allclose(s.alpha_bar[1:], f, rtol=1e-12)
    assert s.alpha_bar[0] == 1e-6  # the clipped noisiest level


@pytest.mark.parametrize("bad", [[0.5, 0.4], [0.0, 0.5], [0.5, 1.0], [[0.1]]])
def test_schedule_rejects_bad_levels(bad: list[float]) -> None:
    with pytest.raises(InvalidParameterError, match="alpha_bar"):
        Schedule(bad)  # type: ignore[arg-type]


def test_as_schedule() -> None:
    assert as_schedule("linear", 4).name == "linear"
    with pytest.raises(InvalidParameterError, match="schedule"):
        as_schedule("quadratic", 4)
    with pytest.raises(InvalidParameterError, match="steps"):
        as_schedule(linear_schedule(3), 4)
    with pytest.raises(InvalidParameterError, match="steps"):
        linear_schedule(0)
