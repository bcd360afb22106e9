r"""Noise schedules of a diffusion sampler in the ideal-denoiser convention.

A schedule is the list of cumulative signal levels :math:`a_t = \bar\alpha_t \in (0, 1)` at which
a sampler queries the denoiser, in *sampling order* (noisiest first). The forward process is
:math:`G_t = \sqrt{a_t}\,x_0 + \sqrt{1 - a_t}\,\varepsilon`, so the posterior mean of
:math:`x_0` given :math:`G_t` is the ideal denoiser :math:`m_g(D)` at

.. math::

    g = G_t / \sqrt{a_t}, \qquad \sigma_t^2 = (1 - a_t) / a_t

(the forward-process map of the theory page). After the last step the sampler
moves to :math:`a = 1` (no noise) and returns the last denoised value.

Two standard families are provided, each defined on ``train_steps`` fine steps and subsampled at
``steps`` evenly spaced ones (the DDIM subsequence of Song, Meng and Ermon, "Denoising Diffusion
Implicit Models"):

- :func:`linear_schedule`: :math:`\beta_i` linear from ``beta_start`` to ``beta_end``,
  :math:`a_i = \prod_{j \le i}(1 - \beta_j)` (Ho, Jain and Abbeel, "Denoising Diffusion
  Probabilistic Models");
- :func:`cosine_schedule`: :math:`a(u) = \cos^2\!\big(\tfrac{u + s}{1 + s}\tfrac{\pi}{2}\big) /
  \cos^2\!\big(\tfrac{s}{1 + s}\tfrac{\pi}{2}\big)`, :math:`u = i / N` (Nichol and Dhariwal,
  "Improved Denoising Diffusion Probabilistic Models"), clipped to
  :math:`[a_{\min}, 1 - 10^{-12}]` (``min_alpha_bar``) so that every :math:`\sigma_t` is finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array, as_scalar
from dpopt.errors import InvalidParameterError

__all__ = ["Schedule", "as_schedule", "cosine_schedule", "linear_schedule"]


def _positive_int(name: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < low:
        raise InvalidParameterError(name, value, f"must be an integer >= {low}")
    return int(value)


@dataclass(frozen=True, eq=False)
class Schedule:
    r"""Cumulative signal levels :math:`a_t` in sampling order (noisiest first).

    Parameters
    ----------
    alpha_bar : array_like, shape (T,)
        Strictly increasing values in (0, 1): step 0 is the noisiest.
    name : str
        A label (``"linear"``, ``"cosine"`` or ``"custom"``).

    Examples
    --------
    >>> s = Schedule([0.25, 0.5, 0.8])
    >>> s.steps, [round(float(v), 6) for v in s.sigma]
    (3, [1.732051, 1.0, 0.5])
    """

    alpha_bar: NDArray[np.float64]
    name: str = "custom"

    def __post_init__(self) -> None:
        a = as_float_array("alpha_bar", self.alpha_bar)
        a = a[None] if a.ndim == 0 else a
        if a.ndim != 1 or a.size < 1:
            raise InvalidParameterError("alpha_bar", self.alpha_bar, "must be a non-empty vector")
        if np.any(a <= 0.0) or np.any(a >= 1.0):
            raise InvalidParameterError("alpha_bar", self.alpha_bar, "values must lie in (0, 1)")
        if np.any(np.diff(a) <= 0.0):
            raise InvalidParameterError(
                "alpha_bar", self.alpha_bar,
                "must increase strictly (sampling order: the noisiest level first)",
            )
        a = np.array(a, dtype=np.float64)
        a.setflags(write=False)
        object.__setattr__(self, "alpha_bar", a)

    @property
    def steps(self) -> int:
        """Number of denoiser queries T."""
        return int(self.alpha_bar.shape[0])

    @property
    def sigma(self) -> NDArray[np.float64]:
        r""":math:`\sigma_t = \sqrt{(1 - a_t)/a_t}` for every step."""
        a = self.alpha_bar
        return np.asarray(np.sqrt((1.0 - a) / a), dtype=np.float64)

    @property
    def next_alpha_bar(self) -> NDArray[np.float64]:
        r"""The level each step moves to: :math:`a_{t+1}`, and 1 after the last step."""
        return np.append(self.alpha_bar[1:], 1.0)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description (the exact floats, by ``repr`` round trip)."""
        return {"name": self.name, "alpha_bar": [float(v) for v in self.alpha_bar]}


def _subsample(a_fine: NDArray[np.float64], steps: int) -> NDArray[np.float64]:
    n = a_fine.shape[0]
    if steps > n:
        raise InvalidParameterError("steps", steps, f"must be at most train_steps = {n}")
    idx = np.unique(np.round(np.linspace(n - 1, 0, steps)).astype(np.int64))[::-1]
    return np.asarray(a_fine[idx], dtype=np.float64)


def linear_schedule(steps: int, *, beta_start: float = 1e-4, beta_end: float = 0.02,
                    train_steps: int = 1000) -> Schedule:
    r"""The linear-:math:`\beta` schedule, subsampled at ``steps`` levels.

    Examples
    --------
    >>> s = linear_schedule(50)
    >>> s.steps, bool(s.sigma[0] > 100), round(float(s.alpha_bar[-1]), 6)
    (50, True, 0.9999)
    """
    t = _positive_int("steps", steps)
    n = _positive_int("train_steps", train_steps)
    b0 = as_scalar("beta_start", beta_start, low=0.0, high=1.0)
    b1 = as_scalar("beta_end", beta_end, low=b0, high=1.0, low_open=False)
    betas = np.linspace(b0, b1, n)
    a = np.exp(np.cumsum(np.log1p(-betas)))
    return Schedule(_subsample(a, t), name="linear")


def cosine_schedule(steps: int, *, offset: float = 0.008, train_steps: int = 1000,
                    min_alpha_bar: float = 1e-6) -> Schedule:
    r"""The cosine schedule, subsampled at ``steps`` levels.

    Examples
    --------
    >>> s = cosine_schedule(50)
    >>> s.steps, bool(s.alpha_bar[0] >= 1e-6), bool(s.alpha_bar[-1] > 0.99)
    (50, True, True)
    """
    t = _positive_int("steps", steps)
    n = _positive_int("train_steps", train_steps)
    s = as_scalar("offset", offset, low=0.0, low_open=False)
    a_min = as_scalar("min_alpha_bar", min_alpha_bar, low=0.0, high=0.5)
    u = np.arange(1, n + 1, dtype=np.float64) / n
    f = np.cos((u + s) / (1.0 + s) * np.pi / 2.0) ** 2 / np.cos(s / (1.0 + s) * np.pi / 2.0) ** 2
    a = np.clip(f, a_min, 1.0 - 1e-12)
    a = np.minimum.accumulate(a)  # the clipped tail must stay monotone
    a_sub = _subsample(a, t)
    # the clip can tie the noisiest levels: keep the strictly increasing ones
    keep = np.concatenate([np.diff(a_sub) > 0, [True]])
    if not np.all(keep):
        raise InvalidParameterError(
            "steps", steps, f"too many steps for min_alpha_bar = {a_min:g}: levels coincide"
        )
    return Schedule(a_sub, name="cosine")


def as_schedule(schedule: Schedule | str | ArrayLike, steps: int) -> Schedule:
    """A :class:`Schedule` from a name (``"linear"``, ``"cosine"``), an array or a Schedule."""
    if isinstance(schedule, Schedule):
        if schedule.steps != steps:
            raise InvalidParameterError(
                "schedule", schedule.name, f"has {schedule.steps} steps, expected {steps}"
            )
        return schedule
    if isinstance(schedule, str):
        key = schedule.strip().lower()
        if key == "linear":
            return linear_schedule(steps)
        if key == "cosine":
            return cosine_schedule(steps)
        raise InvalidParameterError("schedule", schedule, "must be 'linear', 'cosine' or levels")
    return as_schedule(Schedule(as_float_array("schedule", schedule)), steps)
