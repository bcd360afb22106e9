r"""Transport costs for the RPP-OT condition, all as log-costs.

Reference: Ding, Yang, Zhang, "α-Wasserstein Mechanism for Rényi Pufferfish Privacy".

For noise :math:`N_b` of scale :math:`b` the sufficient condition of Ding, Yang and Zhang is

.. math:: \log \min_\pi \sum_{kl} \pi_{kl}\, C_\alpha(x_k - y_l;\, b) \le (\alpha - 1)\varepsilon,

for any cost with :math:`M_\alpha(z) \le C_\alpha(z)`. Every cost here has the form
:math:`\log C_\alpha(z; b) \le g(\lVert z\rVert / b)` for a ground norm :math:`\lVert\cdot\rVert`
(:meth:`RenyiCost.distance`) and an increasing *profile* :math:`g` with :math:`g(0) = 0`, with
equality whenever the cost depends on :math:`z` through the norm only; this gives the
:math:`W_\infty` baselines and brackets. All costs are convex in :math:`z` (so the
1-D quantile coupling is optimal) and nonincreasing in the scale.

========================  =========================================  ==========================
cost                      :math:`\log C_\alpha(z; b)`                 ground norm / status
========================  =========================================  ==========================
``LaplaceCost("exact")``  :math:`\sum_c \log M^{Lap}_\alpha(|z_c|/b)`  :math:`\ell_1`; exact moment
``LaplaceCost("ratio")``  :math:`(\alpha-1)\lVert z\rVert_1/b`          likelihood-ratio bound
``LaplaceCost("paper")``  :math:`\alpha\lVert z\rVert_1/b`              paper's form, loosest
``GaussianCost``          :math:`\alpha(\alpha-1) z^\top S^{-1}z/(2\sigma^2)`  Mahalanobis; exact
``ExponentialCost``       :math:`(\alpha-1)\lVert z\rVert/\theta`       any norm
========================  =========================================  ==========================

Laplace noise in :math:`\mathbb{R}^d` is the product of independent :math:`\mathrm{Lap}(0, b)`
coordinates (log-moments add); Gaussian noise is :math:`N(0, \sigma^2 S)`;
exponential-mechanism noise has density :math:`\propto \exp(-\lVert z\rVert/\theta)`.
With :math:`\alpha = \infty` (Laplace, exponential) the log-cost is the pure-DP log density-ratio
bound :math:`\lVert z\rVert/b` and the condition is its maximum over the coupling's support.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import brentq

from certificates.roots import BracketError, bracket_increasing
from certificates.rounding import step_down_until
from certificates.validate import as_psd_matrix, as_scalar
from dpopt.accounting.renyi import gaussian_log_moment, laplace_log_moment
from dpopt.errors import InvalidParameterError

#: A vectorised profile t -> g(t) (arrays in, arrays out), as :meth:`RenyiCost.profile`.
Profile = Callable[[NDArray[np.float64]], NDArray[np.float64]]

__all__ = [
    "ExponentialCost",
    "GaussianCost",
    "LaplaceCost",
    "RenyiCost",
    "is_declared_convex",
    "make_cost",
]


#: Relative safety margin on log thresholds: calibrations solve for
#: ``level * (1 - LEVEL_MARGIN)`` so that round-off (relative ~n * 1e-16 for n coupling pieces; the
#: log values are computed with relative precision, see ``certificates.coupling.log_average``)
#: never lands on the unsafe side.
LEVEL_MARGIN = 1e-11


def safe_level(level: float) -> float:
    """The threshold actually targeted by calibrations and baselines (see LEVEL_MARGIN)."""
    return level * (1.0 - LEVEL_MARGIN)


def _alpha(value: object, allow_inf: bool) -> float:
    return as_scalar("alpha", value, low=1.0, allow_inf=allow_inf)


@dataclass(frozen=True)
class RenyiCost(ABC):
    """Base class: a log-cost :math:`\\log C_\\alpha(z; \\text{scale})` for a noise family."""

    alpha: float

    #: ``"laplace"``, ``"gaussian"`` or ``"exponential"``.
    mechanism: ClassVar[str] = ""
    #: Declared (and proved) property: :math:`z \mapsto C_\alpha(z; b)` is convex for every
    #: scale, so the 1-D quantile coupling is optimal. Trusted only on the built-in classes
    #: themselves (see :func:`is_declared_convex`); any other cost is checked numerically on the
    #: shift grid of each pair before the quantile route is used.
    convex_in_shift: ClassVar[bool] = False

    @property
    def name(self) -> str:
        """Short label, e.g. ``laplace-exact``."""
        return self.mechanism

    @property
    def is_pure(self) -> bool:
        """True for :math:`\\alpha = \\infty` (pure Pufferfish: max over the support)."""
        return bool(np.isinf(self.alpha))

    def level(self, epsilon: float) -> float:
        """The threshold on the log-cost: :math:`(\\alpha-1)\\varepsilon`, or ε when α = ∞."""
        return float(epsilon) if self.is_pure else (self.alpha - 1.0) * float(epsilon)

    @abstractmethod
    def distance(self, diff: NDArray[np.float64]) -> NDArray[np.float64]:
        """Ground norm of each row of ``diff`` (shape (k, d)) -> (k,)."""

    @abstractmethod
    def profile(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """Increasing :math:`g(t)` with :math:`\\log C(z; b) \\le g(\\lVert z\\rVert/b)`."""

    def log_cost(self, diff: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
        """:math:`\\log C_\\alpha(z; \\text{scale})` for each row of ``diff`` (shape (k, d))."""
        return self.profile(self.distance(diff) / scale)

    def profile_inverse(self, level: float) -> float:
        """Largest :math:`t` with :math:`g(t) \\le` ``level`` (the safe side), ``level > 0``."""
        return _invert(self.profile, level)


def _invert(g: Profile, level: float, bracket: tuple[float, float] | None = None) -> float:
    """Largest ``t >= 0`` with ``g(t) <= level`` in floating point, for an increasing ``g``:
    Brent's method inside ``bracket`` (by default the bracket of
    :func:`certificates.roots.bracket_increasing` from ``t = 1``: 1, 2, 4, ... or down to 0),
    then steps down to the safe side."""

    def f(t: float) -> float:
        return float(g(np.array([t]))[0]) - level

    if bracket is None:
        try:
            bracket = bracket_increasing(f, 1.0, step=1.0, grow=2.0, low=0.0, high=1e300)
        except BracketError as exc:
            if exc.side == "low":
                return 0.0  # g(0) > level: no t > 0 qualifies
            raise InvalidParameterError(  # pragma: no cover - profiles are unbounded
                "level", level, "profile never reaches the level") from None
    lo, hi = bracket
    if f(hi) <= 0.0:
        return hi
    if f(lo) < 0.0:
        t = float(brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))
    else:
        t = lo
    # Nudge to the safe side: g(t) <= level exactly in floating point.
    step = max(abs(t), 1e-300) * 1e-15
    while t > 0.0 and f(t) > 0.0:
        t = max(t - step, 0.0)
        step *= 2.0
    return float(t)


@dataclass(frozen=True)
class LaplaceCost(RenyiCost):
    r"""Product-Laplace noise :math:`\mathrm{Lap}(0, b)^{\otimes d}`.

    Parameters
    ----------
    alpha : float
        Rényi order > 1; ``np.inf`` for pure Pufferfish (log-cost :math:`\lVert z\rVert_1/b`).
    form : {"exact", "ratio", "paper"}
        ``exact`` (default): :math:`\sum_c \log M^{Lap}_\alpha(|z_c|/b)` (Mironov, "Rényi
        Differential Privacy"; the tightest); ``ratio``: :math:`(\alpha-1)\lVert z\rVert_1/b`;
        ``paper``: :math:`\alpha\lVert z\rVert_1/b` (the form quoted from Ding, Yang and Zhang,
        for reproduction only).
    """

    form: str = "exact"
    mechanism: ClassVar[str] = "laplace"
    convex_in_shift: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _alpha(self.alpha, allow_inf=True))
        if self.form not in ("exact", "ratio", "paper"):
            raise InvalidParameterError("form", self.form, "must be 'exact', 'ratio' or 'paper'")

    @property
    def name(self) -> str:
        return "laplace-pure" if self.is_pure else f"laplace-{self.form}"

    def distance(self, diff: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(np.sum(np.abs(diff), axis=-1), dtype=np.float64)

    def profile(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        t = np.asarray(t, dtype=np.float64)
        if self.is_pure:
            return t
        if self.form == "exact":
            return np.asarray(laplace_log_moment(self.alpha, t), dtype=np.float64)
        factor = self.alpha - 1.0 if self.form == "ratio" else self.alpha
        return factor * t

    def log_cost(self, diff: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
        if self.is_pure or self.form != "exact" or diff.shape[-1] == 1:
            return super().log_cost(diff, scale)
        per = laplace_log_moment(self.alpha, np.abs(diff) / scale)
        return np.asarray(np.sum(per, axis=-1), dtype=np.float64)

    def profile_inverse(self, level: float) -> float:
        if self.is_pure:
            return float(level)
        if self.form == "exact":
            a = self.alpha
            lo = level / (a - 1.0)  # g(t) <= (a-1) t
            hi = (level + np.log((2.0 * a - 1.0) / a)) / (a - 1.0)  # g(t) >= (a-1)t - log(...)
            return _invert(self.profile, level, (lo, hi * (1 + 1e-12)))
        factor = self.alpha - 1.0 if self.form == "ratio" else self.alpha
        return _safe_div(level, factor, self.profile)


def _safe_div(level: float, factor: float, g: Profile) -> float:
    return step_down_until(level / factor, lambda t: float(g(np.array([t]))[0]) <= level)


@dataclass(frozen=True)
class GaussianCost(RenyiCost):
    r"""Gaussian noise :math:`N(0, \sigma^2 S)`; the cost is the exact Rényi moment.

    :math:`\log C = \alpha(\alpha-1) z^\top S^{-1} z / (2\sigma^2)` (Mironov, "Rényi
    Differential Privacy": the exact Rényi moment). The ground norm is the Mahalanobis norm
    :math:`\sqrt{z^\top S^{-1} z}` (computed by a Cholesky solve).

    Parameters
    ----------
    alpha : float
        Finite Rényi order > 1.
    covariance : array_like (d, d), optional
        Shape :math:`S` of the noise (positive definite); identity when omitted.
    """

    covariance: ArrayLike | None = None
    mechanism: ClassVar[str] = "gaussian"
    convex_in_shift: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _alpha(self.alpha, allow_inf=False))
        if self.covariance is not None:
            cov = as_psd_matrix("covariance", self.covariance)
            object.__setattr__(self, "covariance", cov)
            object.__setattr__(self, "_chol", cholesky(cov, lower=True))

    @property
    def name(self) -> str:
        return "gaussian"

    def distance(self, diff: NDArray[np.float64]) -> NDArray[np.float64]:
        diff = np.asarray(diff, dtype=np.float64)
        if self.covariance is None:
            return _scaled_norm(diff.reshape(-1, diff.shape[-1])).reshape(diff.shape[:-1])
        chol = self._chol  # type: ignore[attr-defined]
        if diff.shape[-1] != chol.shape[0]:
            raise InvalidParameterError(
                "covariance", chol.shape, f"must match the query dimension {diff.shape[-1]}"
            )
        flat = diff.reshape(-1, chol.shape[0])
        # scale each row before the triangular solve, so that neither tiny nor huge shifts
        # underflow or overflow (the solve is linear)
        big = np.max(np.abs(flat), axis=1, keepdims=True)
        unit = flat / np.where(big > 0.0, big, 1.0)
        y = solve_triangular(chol, unit.T, lower=True).T
        return (big[:, 0] * _scaled_norm(y)).reshape(diff.shape[:-1])

    def profile(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(gaussian_log_moment(self.alpha, np.asarray(t)), dtype=np.float64)

    def profile_inverse(self, level: float) -> float:
        return _sqrt_inverse(level, self.alpha, self.profile)


def _scaled_norm(rows: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""Euclidean norm of each row without underflow or overflow: :math:`m\,\lVert v/m\rVert`
    with :math:`m = \max_i |v_i|` (a shift of 1e-170 has norm 1e-170, not 0)."""
    big = np.max(np.abs(rows), axis=1) if rows.shape[1] else np.zeros(rows.shape[0])
    safe = np.where(big > 0.0, big, 1.0)
    unit = rows / safe[:, None]
    return np.asarray(big * np.sqrt(np.sum(unit * unit, axis=1)), dtype=np.float64)


def _sqrt_inverse(level: float, a: float, g: Profile) -> float:
    t = float(np.sqrt(2.0 * level / (a * (a - 1.0))))
    return step_down_until(t, lambda v: float(g(np.array([v]))[0]) <= level)


@dataclass(frozen=True)
class ExponentialCost(RenyiCost):
    r"""Exponential-mechanism noise :math:`f_\theta(z) \propto \exp(-\lVert z\rVert/\theta)`.

    For a symmetric subadditive :math:`c` (any norm) :math:`f(y-x)/f(y-x') \le e^{c(x-x')/\theta}`,
    so :math:`M_\alpha(z) \le \exp((\alpha-1)c(z)/\theta)` (``form="ratio"``, default) and
    :math:`\le \exp(\alpha c(z)/\theta)` (``form="paper"``). ``alpha = np.inf``
    gives the pure condition :math:`c(z)/\theta \le \varepsilon`.

    Parameters
    ----------
    alpha : float
    norm : float, default 2
        Order of the :math:`\ell_p` norm :math:`c` (``1``, ``2``, ``np.inf``, any p >= 1).
    form : {"ratio", "paper"}
    """

    norm: float = 2.0
    form: str = "ratio"
    mechanism: ClassVar[str] = "exponential"
    convex_in_shift: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _alpha(self.alpha, allow_inf=True))
        p = as_scalar("norm", self.norm, low=1.0, low_open=False, allow_inf=True)
        object.__setattr__(self, "norm", p)
        if self.form not in ("ratio", "paper"):
            raise InvalidParameterError("form", self.form, "must be 'ratio' or 'paper'")

    @property
    def name(self) -> str:
        return "exponential-pure" if self.is_pure else f"exponential-{self.form}"

    def distance(self, diff: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(np.linalg.norm(diff, ord=self.norm, axis=-1), dtype=np.float64)

    def profile(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        t = np.asarray(t, dtype=np.float64)
        if self.is_pure:
            return t
        return (self.alpha - 1.0 if self.form == "ratio" else self.alpha) * t

    def profile_inverse(self, level: float) -> float:
        if self.is_pure:
            return float(level)
        factor = self.alpha - 1.0 if self.form == "ratio" else self.alpha
        return _safe_div(level, factor, self.profile)


def is_declared_convex(cost: RenyiCost) -> bool:
    """True only for an instance of exactly :class:`LaplaceCost`, :class:`GaussianCost` or
    :class:`ExponentialCost`: their costs are convex in the shift (Laplace exact moment: C¹ with
    positive second derivative; exponentials of a norm; the Gaussian quadratic exponential). A
    subclass may change the cost, so it is checked numerically instead."""
    return type(cost) in (LaplaceCost, GaussianCost, ExponentialCost) and type(cost).convex_in_shift


def make_cost(mechanism: str, alpha: float, **options: Any) -> RenyiCost:
    """Build a cost by name: ``"laplace"`` (``form=``), ``"gaussian"`` (``covariance=``) or
    ``"exponential"`` (``norm=``, ``form=``)."""
    kinds: dict[str, type[RenyiCost]] = {
        "laplace": LaplaceCost,
        "gaussian": GaussianCost,
        "exponential": ExponentialCost,
    }
    if mechanism not in kinds:
        raise InvalidParameterError(
            "mechanism", mechanism, "must be 'laplace', 'gaussian' or 'exponential'"
        )
    try:
        return kinds[mechanism](alpha, **options)
    except TypeError as exc:
        raise InvalidParameterError(
            "options", options, f"not accepted by {mechanism} ({exc})"
        ) from None
