r"""A deterministic sampling trajectory of the ideal denoiser, as a run of T releases to design.

:func:`diffusion_run` is the example that the design-run command, the run-gain figure and the
run-design notebook share: the ideal denoiser queried at T geometric noise levels of a
variance-exploding deterministic (DDIM-type) sampler, each release with its sensitivity set and
the weight through which its noise reaches the final sample. Its
:class:`DiffusionRun` feeds :func:`dpopt.covariance.run_design.design_run` (the budget split
over the T releases). The private sampler of this room (:mod:`dpopt.diffusion.sampler`) is the
full pipeline on a variance-preserving schedule; this is the small, closed-form example.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from certificates.validate import as_scalar
from dpopt.errors import InvalidParameterError

if TYPE_CHECKING:  # pragma: no cover
    from dpopt.covariance.domains import Domain
    from dpopt.covariance.sensitivity import TwoRecordVectors

__all__ = ["DiffusionRun", "diffusion_run"]


@dataclass(frozen=True)
class DiffusionRun:
    r"""T denoiser releases along a deterministic sampling trajectory.

    Attributes
    ----------
    sets : list of TwoRecordVectors
        Step t's sensitivity set: the two-record vectors of the ideal denoiser at query
        :math:`g_t` and noise level :math:`\sigma_t` (add/remove neighbours).
    weights : list of ndarray
        :math:`W_t = c_t^2 I` with :math:`c_t` the factor by which noise in the t-th denoiser
        output reaches the final sample (see :func:`diffusion_run`).
    sigmas, queries : ndarray
        The noise levels and query points.
    """

    sets: list[TwoRecordVectors]
    weights: list[np.ndarray]
    sigmas: np.ndarray
    queries: np.ndarray


def diffusion_run(domain: Domain | ArrayLike, data: ArrayLike, steps: int, *,
                  sigma_max: float = 2.0,
                  sigma_min: float = 0.05, seed: int = 0) -> DiffusionRun:
    r"""The ideal denoiser queried at ``steps`` noise levels of a deterministic sampler.

    Noise levels are geometric from ``sigma_max`` down to ``sigma_min``; the trajectory starts at
    a random point :math:`x_1` and follows the deterministic (DDIM-type, variance-exploding)
    update :math:`x_{t+1} = m_t + (\sigma_{t+1}/\sigma_t)(x_t - m_t)` with
    :math:`m_t = m_{x_t}(D)` the ideal denoiser at noise level :math:`\sigma_t`, and the last
    step releases :math:`m_T`. Independent noise :math:`\xi_t` added to :math:`m_t` reaches the
    final sample multiplied by :math:`c_t = (1 - \sigma_{t+1}/\sigma_t)\,\sigma_T/\sigma_{t+1}`
    (:math:`c_T = 1`), so the expected squared error of the sample is
    :math:`\sum_t c_t^2\operatorname{tr}\Sigma_t` — the weights :math:`W_t = c_t^2 I`.

    Parameters
    ----------
    domain : FinitePoints, Grid or array_like
        The finite data domain (the sensitivity sets range over it).
    data : array_like, shape (n, d)
        The dataset the trajectory is computed on (the queries).
    steps : int
        T >= 1.
    """
    from dpopt.accounting.composition import as_steps
    from dpopt.covariance.denoiser import posterior_mean
    from dpopt.covariance.sensitivity import TwoRecordVectors, add_remove_set

    t_count = as_steps("steps", steps)
    s_hi = as_scalar("sigma_max", sigma_max, low=0.0)
    s_lo = as_scalar("sigma_min", sigma_min, low=0.0, high=s_hi, high_open=False)
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise InvalidParameterError("data", data, "must be an (n, d) array with n >= 1")
    sig = np.geomspace(s_hi, s_lo, t_count) if t_count > 1 else np.array([s_lo])
    rng = np.random.default_rng(seed)
    point = x.mean(axis=0) + s_hi * rng.standard_normal(x.shape[1])
    queries, sets = [], []
    for t in range(t_count):
        queries.append(point.copy())
        step_set = add_remove_set(domain, point, float(sig[t]))
        if not isinstance(step_set, TwoRecordVectors):
            raise InvalidParameterError(
                "domain", domain, "a diffusion run needs a finite domain here (a Grid, with the "
                "records snapped to it: Grid.snap); per-step box designs are "
                "design_covariance(add_remove_set(box, query, sigma), ...)")
        sets.append(step_set)
        m = posterior_mean(x, point, float(sig[t]))
        if t + 1 < t_count:
            point = m + (sig[t + 1] / sig[t]) * (point - m)
    coef = np.ones(t_count)
    for t in range(t_count - 1):
        coef[t] = (1.0 - sig[t + 1] / sig[t]) * sig[-1] / sig[t + 1]
    weights = [float(c * c) * np.eye(x.shape[1]) for c in coef]
    return DiffusionRun(sets=sets, weights=weights, sigmas=sig, queries=np.array(queries))
