"""The design-run example: a deterministic trajectory of the ideal denoiser (one owner, this room).

References: the trajectory recomputed step by step from the softmax of the squared distances
(the ideal denoiser written out here, not imported), the propagation factors as finite
differences of the recursion with the denoiser outputs held fixed, and the deprecated path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpopt.covariance.domains import Grid
from dpopt.diffusion.trajectory import DiffusionRun, diffusion_run
from dpopt.errors import InvalidParameterError


def _denoiser(data: np.ndarray, query: np.ndarray, sigma: float) -> np.ndarray:
    logits = -np.sum((data - query) ** 2, axis=1) / (2.0 * sigma**2)
    w = np.exp(logits - logits.max())
    return (w / w.sum()) @ data


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_the_trajectory_and_its_weights_follow_the_recursion(steps: int) -> None:
    domain = Grid(np.zeros(2), np.ones(2), (4, 4))
    data = domain.points[[0, 5, 10, 15]]
    run = diffusion_run(domain, data, steps, sigma_max=2.0, sigma_min=0.05, seed=3)
    assert isinstance(run, DiffusionRun) and len(run.sets) == steps == len(run.weights)
    sig = np.geomspace(2.0, 0.05, steps) if steps > 1 else np.array([0.05])
    assert np.allclose(run.sigmas, sig, rtol=1e-15)
    point = data.mean(axis=0) + 2.0 * np.random.default_rng(3).standard_normal(2)
    means = []
    for t in range(steps):
        assert np.allclose(run.queries[t], point, rtol=1e-13, atol=1e-13)
        m = _denoiser(data, point, sig[t])
        means.append(m)
        if t + 1 < steps:
            point = m + (sig[t + 1] / sig[t]) * (point - m)

    def last_state(ms: list[np.ndarray]) -> np.ndarray:
        x = run.queries[0].copy()
        for t in range(steps - 1):
            x = ms[t] + (sig[t + 1] / sig[t]) * (x - ms[t])
        return x

    # c_t: how a perturbation of the t-th output reaches the last state (outputs held fixed);
    # the last output is released itself (c_T = 1)
    base = last_state(means)
    for t in range(steps - 1):
        bumped = [m.copy() for m in means]
        bumped[t] = bumped[t] + np.array([1e-6, 0.0])
        c_t = (last_state(bumped) - base)[0] / 1e-6
        assert np.isclose(np.sqrt(run.weights[t][0, 0]), abs(c_t), rtol=1e-6)
        assert np.allclose(run.weights[t], run.weights[t][0, 0] * np.eye(2))
    assert run.weights[-1][0, 0] == 1.0


def test_bad_inputs_name_the_parameter() -> None:
    domain = Grid(np.zeros(2), np.ones(2), (3, 3))
    with pytest.raises(InvalidParameterError, match="data"):
        diffusion_run(domain, np.zeros(3), 2)
    with pytest.raises(InvalidParameterError, match="sigma_min"):
        diffusion_run(domain, domain.points[:2], 2, sigma_max=1.0, sigma_min=2.0)


def test_the_old_path_warns_and_forwards() -> None:
    import dpopt.covariance.run_design as old

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DeprecationWarning)
        assert old.diffusion_run is diffusion_run
        assert old.DiffusionRun is DiffusionRun
    assert [w.category for w in seen] == [DeprecationWarning] * 2
    assert "dpopt.diffusion.trajectory" in str(seen[0].message)
    assert "diffusion_run" not in old.__all__
