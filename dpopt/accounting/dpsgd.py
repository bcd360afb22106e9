r"""DP-SGD calibration: the smallest certified noise multiplier for an (ε, δ) target.

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy") runs T steps, each adding
Gaussian noise of std σ·C to a sum of per-example gradients clipped to norm C, on a batch drawn
by Poisson sampling with rate p = B/N (add/remove neighbours) or a fixed batch of B records drawn
without replacement (replace-one neighbours). Each step is a release with Mahalanobis bound
q = 1/σ², so the answer is :func:`dpopt.accounting.composition.smallest_noise_multiplier`.

The step count is a whole number: :math:`T = \lceil E\cdot N/B\rceil` for E epochs (computed in
exact rational arithmetic), or exactly ``steps`` when given.

Beside the certified σ the result carries the central-limit figure of Bu, Dong, Long & Su
("Deep Learning with Gaussian Differential Privacy"), :math:`\mu \approx p\sqrt{T(e^{1/\sigma^2}
- 1)}`, **labelled approximate**: it is a limit, not a bound, and understates the privacy loss —
the result states by how much (the certified ε at the CLT's σ).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

from scipy import optimize

from certificates.validate import as_int, as_scalar
from dpopt.accounting.composition import (
    SAMPLINGS,
    GaussianSteps,
    as_steps,
    composed_epsilon,
    smallest_noise_multiplier,
)
from dpopt.errors import ApproximationWarning, InvalidParameterError

__all__ = ["DpsgdCalibration", "dpsgd_noise_multiplier", "dpsgd_steps"]


def dpsgd_steps(dataset_size: int, batch_size: int, epochs: float) -> int:
    r"""The whole number of steps :math:`\lceil E\cdot N/B\rceil` of ``epochs`` passes.

    Exact rational arithmetic (``epochs`` is read as the exact binary value of the float).

    >>> dpsgd_steps(60000, 256, 60)
    14063
    """
    n = as_int("dataset_size", dataset_size, low=1)
    b = as_int("batch_size", batch_size, low=1)
    if b > n:
        raise InvalidParameterError("batch_size", batch_size, f"must be <= dataset_size={n}")
    e = as_scalar("epochs", epochs, low=0.0)
    steps = math.ceil(Fraction(e) * n / b)
    return max(int(steps), 1)


def _clt_mu(rate: float, sigma: float, steps: int, sampling: str) -> float:
    from dpopt.accounting import gdp

    fn = gdp.clt_mu_poisson if sampling == "poisson" else gdp.clt_mu_uniform
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        return float(fn(rate, sigma, steps))


def _clt_sigma(rate: float, steps: int, epsilon: float, delta: float, sampling: str) -> float:
    """σ the CLT would choose: μ_CLT(σ) = μ(ε, δ) (APPROXIMATE)."""
    from dpopt.accounting.gdp import mu_for

    mu = float(mu_for(epsilon, delta))
    if sampling == "poisson":
        return 1.0 / math.sqrt(math.log1p(mu * mu / (rate * rate * steps)))
    lo, hi = 1e-2, 1e4

    def f(s: float) -> float:
        return _clt_mu(rate, s, steps, sampling) - mu

    if f(lo) < 0 or f(hi) > 0:
        return math.nan
    return float(optimize.brentq(f, lo, hi, rtol=1e-12))


@dataclass(frozen=True)
class DpsgdCalibration:
    """The certified noise multiplier of a DP-SGD schedule, and the CLT figure beside it.

    Attributes
    ----------
    noise_multiplier : float
        Smallest certified σ (noise std / clipping norm), rounded up.
    accountant : str
        Which accountant certified it (``"pld"``, ``"rdp"`` or ``"gdp-exact"``).
    certified_epsilon : float
        The certified ε at δ for that σ (<= the target).
    steps, sampling_rate, sampling, epsilon, delta
        The schedule and the target.
    clt_noise_multiplier : float
        APPROXIMATE: σ from the central-limit approximation (smaller: it under-noises).
    clt_epsilon_at_certified : float
        APPROXIMATE: the ε the CLT claims for the certified σ (below the target).
    epsilon_at_clt_sigma : float
        Certified ε of the CLT's σ: how far the CLT's choice overshoots the target.
    """

    noise_multiplier: float
    accountant: str
    certified_epsilon: float
    steps: int
    sampling_rate: float
    sampling: str
    epsilon: float
    delta: float
    clt_noise_multiplier: float
    clt_epsilon_at_certified: float
    epsilon_at_clt_sigma: float

    @property
    def clt_understatement(self) -> float:
        """Relative excess of the true (certified) ε over the target when using the CLT's σ."""
        return self.epsilon_at_clt_sigma / self.epsilon - 1.0

    def describe(self) -> str:
        return (
            f"DP-SGD, {self.steps} steps, {self.sampling.replace('_', ' ')} rate "
            f"{self.sampling_rate:.6g}: noise multiplier {self.noise_multiplier:.6g} certifies "
            f"({self.certified_epsilon:.4g}, {self.delta:g})-DP [{self.accountant}]; "
            f"CLT (APPROXIMATE) would give {self.clt_noise_multiplier:.6g}, whose certified ε is "
            f"{self.epsilon_at_clt_sigma:.4g} (> {self.epsilon:g}: the CLT understates the loss "
            f"by {100 * self.clt_understatement:.1f}%)"
        )


def dpsgd_noise_multiplier(*, dataset_size: int, batch_size: int, epsilon: float,
                           delta: float, epochs: float | None = None, steps: int | None = None,
                           sampling: str = "poisson", rtol: float = 1e-3,
                           discretization: float = 1e-4) -> DpsgdCalibration:
    r"""Smallest noise multiplier σ such that DP-SGD is certified (ε, δ)-DP.

    Parameters
    ----------
    dataset_size, batch_size : int
        N and B (p = B/N; B <= N).
    epsilon : float
        Target ε > 0.
    delta : float
        Target δ in (0, 1).
    epochs : float, optional
        E > 0: T = ⌈E N / B⌉ steps. Exactly one of ``epochs`` / ``steps``.
    steps : int, optional
        The exact whole number of steps T >= 1.
    sampling : {"poisson", "without_replacement"}
        Batch sampling (Poisson: add/remove neighbours; without replacement: replace-one).
    rtol, discretization
        Search tolerance on q and PLD discretisation, see
        :func:`~dpopt.accounting.composition.largest_bound`.

    Examples
    --------
    >>> cal = dpsgd_noise_multiplier(dataset_size=1000, batch_size=1000, steps=4, epsilon=2.0,
    ...                              delta=1e-5)
    >>> cal.accountant      # no subsampling: exact composition
    'gdp-exact'
    """
    n = as_int("dataset_size", dataset_size, low=1)
    b = as_int("batch_size", batch_size, low=1)
    if b > n:
        raise InvalidParameterError("batch_size", batch_size, f"must be <= dataset_size={n}")
    if (epochs is None) == (steps is None):
        raise InvalidParameterError("epochs/steps", (epochs, steps), "give exactly one of them")
    t = dpsgd_steps(n, b, epochs) if epochs is not None else as_steps("steps", steps)
    e = as_scalar("epsilon", epsilon, low=0.0)
    d = as_scalar("delta", delta, low=0.0, high=1.0)
    if not isinstance(sampling, str) or sampling not in SAMPLINGS:
        raise InvalidParameterError("sampling", sampling, f"must be one of {SAMPLINGS}")
    rate = float(Fraction(b, n))
    sigma, how = smallest_noise_multiplier(e, d, t, rate, sampling, rtol=rtol,
                                           discretization=discretization)
    cert = composed_epsilon(GaussianSteps.from_noise_multiplier(sigma, t, rate, sampling), d,
                            discretization=discretization).value
    clt_sigma = _clt_sigma(rate, t, e, d, sampling) if rate < 1.0 else sigma
    if rate < 1.0 and math.isfinite(clt_sigma):
        at_clt = composed_epsilon(GaussianSteps.from_noise_multiplier(clt_sigma, t, rate,
                                                                      sampling), d,
                                  discretization=discretization).value
        from dpopt.accounting.gdp import epsilon_for_delta

        clt_eps = float(epsilon_for_delta(d, _clt_mu(rate, sigma, t, sampling)))
    else:
        at_clt, clt_eps = cert, cert
    return DpsgdCalibration(
        noise_multiplier=sigma, accountant=how, certified_epsilon=cert, steps=t,
        sampling_rate=rate, sampling=sampling, epsilon=e, delta=d,
        clt_noise_multiplier=clt_sigma, clt_epsilon_at_certified=clt_eps,
        epsilon_at_clt_sigma=at_clt,
    )
