"""Quality measures against scipy's 1-D versions and brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpopt.diffusion.quality import energy_distance, nearest_record_distance, sliced_wasserstein
from dpopt.errors import InvalidParameterError


def test_energy_distance_matches_scipy_in_one_dimension() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(0, 1, 60), rng.normal(0.5, 2, 45)
    # scipy returns sqrt(2 E|X-Y| - E|X-X'| - E|Y-Y'|)
    assert energy_distance(x, y) == pytest.approx(stats.energy_distance(x, y) ** 2, rel=1e-10)


def test_energy_distance_two_dimensions_brute_force() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(0, 1, (20, 2)), rng.normal(1, 1, (15, 2))

    def mean_dist(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean([np.linalg.norm(p - q) for p in a for q in b]))

    want = 2 * mean_dist(x, y) - mean_dist(x, x) - mean_dist(y, y)
    assert energy_distance(x, y) == pytest.approx(want, rel=1e-12)
    assert energy_distance(x, x) == 0.0


def test_sliced_wasserstein_one_dimension_is_wasserstein() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(0, 1, (50, 1)), rng.normal(1, 1, (40, 1))
    want = stats.wasserstein_distance(x[:, 0], y[:, 0])
    assert sliced_wasserstein(x, y, projections=3) == pytest.approx(want, rel=1e-12)
    # a translation by v moves every 1-D projection by theta . v
    z = rng.normal(0, 1, (30, 2))
    sw = sliced_wasserstein(z, z + np.array([3.0, 0.0]), projections=2000, seed=1)
    assert sw == pytest.approx(3.0 * 2 / np.pi, rel=0.05)  # E|cos| = 2/pi


def test_nearest_record_distance_brute_force() -> None:
    rng = np.random.default_rng(3)
    s, r = rng.uniform(0, 1, (10, 2)), rng.uniform(0, 1, (25, 2))
    want = np.min(np.linalg.norm(s[:, None] - r[None], axis=2), axis=1)
    np.testing.assert_allclose(nearest_record_distance(s, r), want, rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="y"):
        nearest_record_distance(s, np.zeros((3, 3)))
