r"""DP-SGD calibration: the smallest certified noise multiplier for an (ε, δ) target.

DP-SGD (Abadi et al., "Deep Learning with Differential Privacy") runs T steps, each adding
Gaussian noise of std σ·C to a sum of per-example gradients clipped to norm C, on a batch drawn
by one of the sampling schemes of :class:`dpopt.relation.SamplingScheme`:

- ``"poisson"`` — every record joins with probability p = B/N (Opacus' Poisson sampling):
  add/remove neighbours, sensitivity C, so each step is a release with bound q = 1/σ²;
- ``"without_replacement"`` — a batch of exactly B records drawn afresh at every step:
  replace-one neighbours, under which the clipped sum moves by up to **2C**, so q = 4/σ² (the
  noise multiplier handed to the replace-one accountants is σ/2);
- ``"full_batch"`` — B = N, every record every step (add/remove).

Shuffling once per epoch is refused (no tight analysis exists). The answer is
:func:`dpopt.accounting.composition.calibrate_noise`: a certified σ and a proven lower end.

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

import numpy as np

from certificates.validate import as_int, as_scalar
from dpopt.accounting.composition import (
    ACCOUNTANTS,
    DEFAULT_ORDERS,
    WOR_SEARCH_ORDERS,
    GaussianSteps,
    as_steps,
    calibrate_noise,
    composed_epsilon,
)
from dpopt.errors import ApproximationWarning, InvalidParameterError
from dpopt.relation import NeighbouringRelation, SamplingScheme, as_sampling, required_sampling

#: Accountant names accepted by the DP-SGD entry points and ``--accountant``.
ACCOUNTANT_CHOICES = ("auto", "pld", "rdp", "gdp")


def accountants_for(name: str) -> tuple[str, ...]:
    """The accountants behind an ``--accountant`` choice: ``auto`` = all (the tightest wins),
    ``gdp`` = the exact GDP composition (no subsampling only)."""
    if name not in ACCOUNTANT_CHOICES:
        raise InvalidParameterError("accountant", name, f"must be one of {ACCOUNTANT_CHOICES}")
    return {"auto": ACCOUNTANTS, "pld": ("pld",), "rdp": ("rdp",),
            "gdp": ("gdp-exact",)}[name]

__all__ = [
    "ACCOUNTANT_CHOICES",
    "DpsgdCalibration",
    "accountants_for",
    "dpsgd_noise_multiplier",
    "dpsgd_steps",
]


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
    """The CLT's μ for noise multiplier σ per C; under replace-one the sensitivity is 2C, so the
    uniform-sampling CLT sees σ/2."""
    from dpopt.accounting import gdp

    if sampling == "without_replacement":
        fn, s = gdp.clt_mu_uniform, sigma / 2.0
    else:
        fn, s = gdp.clt_mu_poisson, sigma
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        return float(fn(rate, s, float(steps)))


def _clt_sigma(rate: float, steps: int, epsilon: float, delta: float, sampling: str) -> float:
    """σ the CLT would choose: μ_CLT(σ) = μ(ε, δ) (APPROXIMATE)."""
    from dpopt.accounting.gdp import mu_for

    mu = float(mu_for(epsilon, delta))
    if sampling != "without_replacement":
        x = 2.0 * math.log(mu) - 2.0 * math.log(rate) - math.log(steps) if mu > 0 else -math.inf
        q = float(np.logaddexp(0.0, x))
        return 1.0 / math.sqrt(q) if q > 0.0 else math.inf
    from certificates.roots import BracketError, solve_increasing

    def g(x: float) -> float:  # increasing in x = log σ: the CLT's μ falls as σ grows
        return mu - _clt_mu(rate, math.exp(x), steps, sampling)

    try:
        return math.exp(solve_increasing(g, 0.0, xtol=1e-12, low=math.log(1e-2),
                                         high=math.log(1e4)))
    except BracketError:  # no σ in [0.01, 1e4] matches
        return math.inf


def _excess(understatement: float) -> str:
    if understatement > 0:
        return f"the CLT understates the loss by {100 * understatement:.1f}%"
    return "the CLT does not understate the loss here"


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
        The schedule and the target; ``sampling`` is a :class:`~dpopt.relation.SamplingScheme`
        (``relation`` gives its neighbouring relation).
    noise_multiplier_lower : float
        Proven lower end: every σ below it misses the target under exact accounting (0 when no
        lower bound applied).
    lower_accountant : str
        What proved the lower end (``"gdp-exact"``, ``"sum-test"``, ``"binned"``,
        ``"pld-optimistic"`` or ``"none"``).
    epsilon_lower : float
        Proven lower bound on the true ε of the certified σ (``certified_epsilon`` is the upper).
    note : str
        Why the search stopped early or hit a limit (empty otherwise).
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
    noise_multiplier_lower: float = 0.0
    lower_accountant: str = "none"
    epsilon_lower: float = 0.0
    note: str = ""

    @property
    def relation(self) -> NeighbouringRelation:
        return as_sampling(self.sampling).relation

    @property
    def certified_interval(self) -> tuple[float, float]:
        """``(noise_multiplier_lower, noise_multiplier)``: the exact smallest σ lies in it."""
        return (self.noise_multiplier_lower, self.noise_multiplier)

    @property
    def relative_width(self) -> float:
        """Width of the σ interval relative to the certified σ."""
        return (self.noise_multiplier - self.noise_multiplier_lower) / self.noise_multiplier

    @property
    def clt_understatement(self) -> float:
        """Relative excess of the true (certified) ε over the target when using the CLT's σ."""
        return self.epsilon_at_clt_sigma / self.epsilon - 1.0

    def describe(self) -> str:
        return (
            f"DP-SGD, {self.steps} steps, {as_sampling(self.sampling).describe()}, rate "
            f"{self.sampling_rate:.6g}: noise multiplier {self.noise_multiplier:.6g} certifies "
            f"({self.certified_epsilon:.4g}, {self.delta:g})-DP [{self.accountant}]; the exact "
            f"smallest σ is in [{self.noise_multiplier_lower:.6g}, {self.noise_multiplier:.6g}] "
            f"[{self.lower_accountant}]; "
            f"CLT (APPROXIMATE) would give {self.clt_noise_multiplier:.6g}, whose certified ε is "
            f"{self.epsilon_at_clt_sigma:.4g} ({_excess(self.clt_understatement)})"
        )


def dpsgd_noise_multiplier(*, dataset_size: int, batch_size: int, epsilon: float,
                           delta: float, epochs: float | None = None, steps: int | None = None,
                           sampling: str | SamplingScheme | None = None, rtol: float = 1e-3,
                           discretization: float = 1e-4, accountant: str = "auto",
                           time_budget: float = 10.0, two_sided: bool = True,
                           progress: bool | None = None,
                           epsilon_interval: bool = True) -> DpsgdCalibration:
    r"""Smallest noise multiplier σ such that DP-SGD is certified (ε, δ)-DP, two-sided.

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
    sampling : {"poisson", "without_replacement", "full_batch"} or SamplingScheme
        How batches are drawn (see the module docstring): required when B < N, never implied
        (the error lists the schemes and the data loaders they match); ``None`` with B = N is
        the full batch. ``"shuffling"`` is refused.
    rtol, discretization
        Search tolerance on q and the fine PLD discretisation, see
        :func:`~dpopt.accounting.composition.calibrate_noise`.
    accountant : {"auto", "pld", "rdp", "gdp"}
        Which accountant may certify (``auto``: the tightest of all that apply).
    time_budget : float
        Seconds after which the search returns its best certified answer (``note`` says so).
    two_sided : bool
        Also prove the lower end of σ (``noise_multiplier_lower``).
    progress : bool or None
        Progress bar: always, never, or (None) only when the search takes longer than 2 s.
    epsilon_interval : bool
        Also prove the lower end of the certified ε at σ (``epsilon_lower``; one more
        lower-bound evaluation, about as costly as the one behind ``noise_multiplier_lower``;
        with ``False`` it is 0).

    Examples
    --------
    >>> cal = dpsgd_noise_multiplier(dataset_size=1000, batch_size=1000, steps=4, epsilon=2.0,
    ...                              delta=1e-5, sampling="full_batch")
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
    rate = float(Fraction(b, n))
    scheme = required_sampling(sampling, rate)
    if scheme is SamplingScheme.FULL_BATCH and b != n:
        raise InvalidParameterError("batch_size", batch_size,
                                    f"must equal dataset_size={n} with sampling='full_batch'")
    accs = accountants_for(accountant)
    cal = calibrate_noise(e, d, t, rate, scheme, rtol=rtol, discretization=discretization,
                          accountants=accs, time_budget=time_budget, two_sided=two_sided,
                          progress=progress)
    sigma = cal.noise_multiplier
    # the certified bound itself (its PLD is cached); σ rounded up only adds noise. The checks
    # below use the grid the search finished on and the accountants it paid for.
    run = GaussianSteps(cal.bound, t, rate, scheme)
    disc = cal.discretization
    accs = cal.checking_accountants(accs)
    # fixed-size batches: the RDP bound of sampling without replacement costs O(α) per order,
    # so the report uses the search's orders (any subset of orders gives a valid bound)
    orders = WOR_SEARCH_ORDERS if scheme is SamplingScheme.WITHOUT_REPLACEMENT else DEFAULT_ORDERS
    cert = composed_epsilon(run, d, discretization=disc, accountants=accs, orders=orders,
                            two_sided=two_sided and bool(epsilon_interval))
    clt_sigma = _clt_sigma(rate, t, e, d, scheme) if rate < 1.0 else sigma
    if rate < 1.0 and math.isfinite(clt_sigma):
        # at the same discretisation as the answer, so the CLT's excess is not overstated (the
        # bracketing grid would overstate it by about a point of percent)
        at_clt = composed_epsilon(GaussianSteps.from_noise_multiplier(clt_sigma, t, rate,
                                                                      scheme), d,
                                  discretization=disc, accountants=accs, orders=orders,
                                  two_sided=False).value
        from dpopt.accounting.gdp import epsilon_for_delta

        clt_eps = float(epsilon_for_delta(d, _clt_mu(rate, sigma, t, scheme)))
    else:
        at_clt, clt_eps = cert.value, cert.value
    return DpsgdCalibration(
        noise_multiplier=sigma, accountant=cal.accountant, certified_epsilon=cert.value,
        steps=t, sampling_rate=rate, sampling=scheme, epsilon=e, delta=d,
        clt_noise_multiplier=clt_sigma, clt_epsilon_at_certified=clt_eps,
        epsilon_at_clt_sigma=at_clt, noise_multiplier_lower=cal.noise_multiplier_lower,
        lower_accountant=cal.lower_accountant, epsilon_lower=cert.lower, note=cal.note,
    )
