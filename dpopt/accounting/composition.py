r"""Many Gaussian releases under one budget: composition and subsampling, never optimistic.

A release with Mahalanobis bound :math:`q` (``sup_s s^T Σ^{-1} s <= q``) is a Gaussian mechanism
with noise multiplier :math:`\sigma = 1/\sqrt q`. A run is a sequence of :class:`GaussianSteps`
— ``steps`` releases with the same bound, each on a subsample of rate ``sampling_rate`` (Poisson
sampling under add/remove neighbours, or a fixed-size batch drawn without replacement under
replace-one neighbours; rate 1 means no subsampling).

Three accountants give valid upper bounds; :func:`composed_epsilon` / :func:`composed_delta`
report the tightest and which one gave it:

``gdp-exact``
    only without subsampling: Gaussian releases compose exactly to one Gaussian with
    :math:`\mu^2 = \sum_t q_t` (Dong, Roth & Su, "Gaussian Differential Privacy", Cor. 3.3), whose
    (ε, δ) curve is Balle & Wang's exact formula ("Improving the Gaussian Mechanism for
    Differential Privacy", Thm. 8) — the exact answer, not a bound.
``pld``
    Google's ``dp-accounting`` privacy-loss-distribution accountant with pessimistic
    discretisation (see :mod:`dpopt.accounting._dp_accounting` for why this library). Poisson
    subsampling and no subsampling; used for δ >= 1e-12.
``rdp``
    the Rényi-DP curve of the subsampled Gaussian (Mironov, Talwar & Zhang, "Rényi Differential
    Privacy of the Sampled Gaussian Mechanism"; :mod:`dpopt.accounting.subsampled_rdp`),
    composed by addition and converted to (ε, δ); valid down to any δ.

The inverses (:func:`largest_bound`, :func:`smallest_noise_multiplier`) bisect on q with the same
never-optimistic accounting and re-check the answer they return.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy import optimize

from certificates.validate import as_scalar
from dpopt import progress
from dpopt.accounting import analytic_gaussian as bw
from dpopt.accounting.subsampled_rdp import (
    DEFAULT_ORDERS,
    rdp_epsilon_from_curve,
    rdp_log_delta_from_curve,
    subsampled_gaussian_rdp,
)
from dpopt.errors import InfeasibleError, InvalidParameterError, InvalidTypeError

__all__ = [
    "ACCOUNTANTS",
    "AccountingResult",
    "GaussianSteps",
    "as_steps",
    "composed_delta",
    "composed_epsilon",
    "largest_bound",
    "smallest_noise_multiplier",
    "uniform_epsilon",
]

ACCOUNTANTS = ("gdp-exact", "pld", "rdp")
SAMPLINGS = ("poisson", "without_replacement")
#: Largest per-release bound the inverse searches (noise multiplier 0.01).
MAX_BOUND = 1e4
#: Smallest per-release bound the inverse searches before declaring the target unreachable.
MIN_BOUND = 1e-30


def as_steps(name: str, value: object) -> int:
    """A whole number of steps >= 1 (fractional, zero, negative, bool -> named error)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.number):
        raise InvalidTypeError(name, value, "a whole number of steps >= 1")
    x = float(value)
    if not math.isfinite(x) or x != math.floor(x):
        raise InvalidParameterError(name, value, "must be a whole number of steps (not fractional)")
    if x < 1:
        raise InvalidParameterError(name, value, "must be >= 1")
    return int(x)


def _rate(value: object, name: str = "sampling_rate") -> float:
    return as_scalar(name, value, low=0.0, high=1.0, high_open=False)


def _delta(value: object) -> float:
    return as_scalar("delta", value, low=0.0, high=1.0)


@dataclass(frozen=True)
class GaussianSteps:
    r"""``steps`` Gaussian releases, each with Mahalanobis bound ``bound`` on a subsample.

    Parameters
    ----------
    bound : float
        q > 0: every release satisfies :math:`\sup_s s^\top\Sigma^{-1}s \le q` (noise multiplier
        :math:`1/\sqrt q`).
    steps : int
        Number of releases, a whole number >= 1.
    sampling_rate : float
        p in (0, 1]: each release sees a subsample of rate p (1: the whole dataset).
    sampling : {"poisson", "without_replacement"}
        Poisson sampling (add/remove neighbours) or a fixed-size batch of p·N records drawn without
        replacement (replace-one neighbours: q is then the bound over the replacement relation —
        with :func:`~dpopt.covariance.design.design_covariance` pass ``relation="replacement"``).
    """

    bound: float
    steps: int = 1
    sampling_rate: float = 1.0
    sampling: str = "poisson"

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", as_scalar("bound", self.bound, low=0.0))
        object.__setattr__(self, "steps", as_steps("steps", self.steps))
        object.__setattr__(self, "sampling_rate", _rate(self.sampling_rate))
        if not isinstance(self.sampling, str) or self.sampling not in SAMPLINGS:
            raise InvalidParameterError("sampling", self.sampling, f"must be one of {SAMPLINGS}")

    @classmethod
    def from_noise_multiplier(cls, noise_multiplier: float, steps: int = 1,
                              sampling_rate: float = 1.0, sampling: str = "poisson"
                              ) -> GaussianSteps:
        """Steps with noise multiplier σ (noise std / ℓ2 sensitivity): q = 1/σ², rounded up."""
        sigma = as_scalar("noise_multiplier", noise_multiplier, low=0.0)
        q = 1.0 / (sigma * sigma)
        while Fraction(q) * Fraction(sigma) ** 2 < 1:
            q = math.nextafter(q, math.inf)
        return cls(q, steps, sampling_rate, sampling)

    @property
    def noise_multiplier(self) -> float:
        """1/√q (the noise std in units of the ℓ2 sensitivity)."""
        return 1.0 / math.sqrt(self.bound)

    @property
    def subsampled(self) -> bool:
        return self.sampling_rate < 1.0


@dataclass(frozen=True)
class AccountingResult:
    """A certified ε (or δ) and the accountant that gave it.

    Attributes
    ----------
    value : float
        The tightest valid upper bound found (``inf`` when none applies).
    accountant : str
        ``"gdp-exact"``, ``"pld"`` or ``"rdp"``.
    candidates : dict
        Every accountant's bound (``inf``: not applicable at these parameters).
    order : float or None
        The RDP order that gave the RDP bound.
    """

    value: float
    accountant: str
    candidates: dict[str, float] = field(default_factory=dict)
    order: float | None = None

    def __float__(self) -> float:
        return float(self.value)


def _as_run(releases: GaussianSteps | Sequence[GaussianSteps]) -> tuple[GaussianSteps, ...]:
    if isinstance(releases, GaussianSteps):
        run: tuple[GaussianSteps, ...] = (releases,)
    elif isinstance(releases, Sequence) and not isinstance(releases, str | bytes):
        run = tuple(releases)
    else:
        raise InvalidTypeError("releases", releases, "GaussianSteps or a sequence of them")
    if not run:
        raise InvalidParameterError("releases", releases, "needs at least one GaussianSteps")
    for i, r in enumerate(run):
        if not isinstance(r, GaussianSteps):
            raise InvalidTypeError(f"releases[{i}]", r, "GaussianSteps")
    kinds = {r.sampling for r in run if r.subsampled}
    if len(kinds) > 1:
        raise InvalidParameterError(
            "releases", releases, "mixes Poisson (add/remove neighbours) and without-replacement "
            "(replace-one neighbours) steps: one run has one neighbouring relation"
        )
    return run


def _total_bound(run: tuple[GaussianSteps, ...]) -> float:
    """Σ T_i q_i rounded up (exact rational sum)."""
    exact = sum((r.steps * Fraction(r.bound) for r in run), Fraction(0))
    total = float(exact)
    while Fraction(total) < exact:
        total = math.nextafter(total, math.inf)
    return total


def _groups(run: tuple[GaussianSteps, ...]) -> tuple[tuple[float, float, int], ...]:
    merged: dict[tuple[float, float], int] = {}
    for r in run:
        key = (r.bound, r.sampling_rate)
        merged[key] = merged.get(key, 0) + r.steps
    return tuple((q, p, t) for (q, p), t in merged.items())


def _rdp_curve(run: tuple[GaussianSteps, ...], orders: Sequence[float]) -> np.ndarray:
    total = np.zeros(len(orders))
    for r in run:
        total = total + r.steps * subsampled_gaussian_rdp(r.bound, r.sampling_rate, orders,
                                                          r.sampling)
    return total


def _check_accountants(accountants: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(accountants, str):
        accountants = (accountants,)
    acc = tuple(accountants)
    bad = [a for a in acc if a not in ACCOUNTANTS]
    if bad or not acc:
        raise InvalidParameterError("accountants", accountants, f"must be among {ACCOUNTANTS}")
    return acc


def _discretization(value: object) -> float:
    return as_scalar("discretization", value, low=1e-6, high=0.1, low_open=False,
                     high_open=False)


def _pick(cands: dict[str, float]) -> str:
    return min(cands, key=lambda k: (cands[k], ACCOUNTANTS.index(k)))


def composed_epsilon(releases: GaussianSteps | Sequence[GaussianSteps], delta: float, *,
                     accountants: str | Sequence[str] = ACCOUNTANTS,
                     discretization: float = 1e-4,
                     orders: Sequence[float] = DEFAULT_ORDERS) -> AccountingResult:
    r"""Certified ε at δ for a run of Gaussian releases: the tightest of the accountants.

    Parameters
    ----------
    releases : GaussianSteps or sequence of GaussianSteps
        The run (heterogeneous sequences allowed).
    delta : float
        δ in (0, 1).
    accountants : sequence of str
        Among ``"gdp-exact"`` (no subsampling only), ``"pld"``, ``"rdp"``.
    discretization : float
        PLD loss-discretisation interval (smaller: tighter and slower).
    orders : sequence of float
        RDP orders.

    Examples
    --------
    >>> r = composed_epsilon(GaussianSteps(bound=0.01, steps=100), 1e-5)   # μ = 1 exactly
    >>> r.accountant, round(r.value, 6)
    ('gdp-exact', 4.377178)
    """
    run = _as_run(releases)
    d = _delta(delta)
    acc = _check_accountants(accountants)
    disc = _discretization(discretization)
    cands: dict[str, float] = {}
    order = None
    subsampled = any(r.subsampled for r in run)
    if "gdp-exact" in acc:
        cands["gdp-exact"] = (
            math.inf if subsampled else bw.min_epsilon(_total_bound(run), math.log(d))
        )
    if "pld" in acc:
        wor = any(r.subsampled and r.sampling == "without_replacement" for r in run)
        if wor:
            cands["pld"] = math.inf
        else:
            from dpopt.accounting import _dp_accounting as lib

            cands["pld"] = lib.pld_epsilon(_groups(run), d, disc)
    if "rdp" in acc:
        eps, order = rdp_epsilon_from_curve(orders, _rdp_curve(run, orders), d)
        cands["rdp"] = eps
    best = _pick(cands)
    return AccountingResult(cands[best], best, cands, order if best == "rdp" else None)


def composed_delta(releases: GaussianSteps | Sequence[GaussianSteps], epsilon: float, *,
                   accountants: str | Sequence[str] = ACCOUNTANTS,
                   discretization: float = 1e-4,
                   orders: Sequence[float] = DEFAULT_ORDERS) -> AccountingResult:
    r"""Certified δ at ε for a run of Gaussian releases: the tightest of the accountants.

    Parameters as in :func:`composed_epsilon`, with ``epsilon`` >= 0 instead of δ.
    """
    run = _as_run(releases)
    e = as_scalar("epsilon", epsilon, low=0.0, low_open=False)
    acc = _check_accountants(accountants)
    disc = _discretization(discretization)
    cands: dict[str, float] = {}
    order = None
    subsampled = any(r.subsampled for r in run)
    if "gdp-exact" in acc:
        if subsampled:
            cands["gdp-exact"] = math.inf
        else:
            ld = float(bw.log_delta(np.asarray(e), np.asarray(_total_bound(run))))
            cands["gdp-exact"] = min(math.exp(ld + bw.safety_margin(ld)), 1.0)
    if "pld" in acc:
        wor = any(r.subsampled and r.sampling == "without_replacement" for r in run)
        if wor:
            cands["pld"] = math.inf
        else:
            from dpopt.accounting import _dp_accounting as lib

            cands["pld"] = lib.pld_delta(_groups(run), e, disc)
    if "rdp" in acc:
        ld, order = rdp_log_delta_from_curve(orders, _rdp_curve(run, orders), e)
        cands["rdp"] = math.exp(ld)
    best = _pick(cands)
    return AccountingResult(cands[best], best, cands, order if best == "rdp" else None)


# --------------------------------------------------------------------------------------------
# Inverse: the largest per-release bound for a target
# --------------------------------------------------------------------------------------------


def certifies(releases: GaussianSteps | Sequence[GaussianSteps], epsilon: float, delta: float, *,
              discretization: float = 1e-4,
              accountants: str | Sequence[str] = ACCOUNTANTS) -> tuple[bool, str]:
    """Whether the run is certified (ε, δ)-DP, and by which accountant (cheapest first)."""
    run = _as_run(releases)
    acc = _check_accountants(accountants)
    order = [a for a in ("gdp-exact", "rdp", "pld") if a in acc]
    for name in order:
        if name == "gdp-exact" and any(r.subsampled for r in run):
            continue
        if composed_epsilon(run, delta, accountants=(name,),
                            discretization=discretization).value <= epsilon:
            return True, name
    return False, ""


#: evaluations of the full accountants in the subsampled noise search (measured 6-7: DP-SGD on
#: N = 60 000, B = 256 for 15 and 60 epochs, a schedule of 1000 releases at rate 0.01)
SEARCH_EVALUATIONS = (6, 9)

@lru_cache(maxsize=4096)
def uniform_epsilon(bound: float, steps: int, sampling_rate: float, sampling: str, delta: float,
                    accountants: tuple[str, ...] = ACCOUNTANTS, discretization: float = 1e-4
                    ) -> AccountingResult:
    """:func:`composed_epsilon` of ``steps`` identical releases (memoised)."""
    return composed_epsilon(GaussianSteps(bound, steps, sampling_rate, sampling), delta,
                            accountants=accountants, discretization=discretization)


def _solve(eps_of: Callable[[float], float], target: float, q0: float, rtol: float,
           what: str) -> float:
    """Largest q (within ``rtol``) with ``eps_of(q) <= target``: bracket from ``q0``, Brent on
    log q, then step down until the check holds (``eps_of`` is increasing in q)."""

    def g(x: float) -> float:
        return float(eps_of(math.exp(x))) - target

    x0 = math.log(q0)
    if g(x0) <= 0.0:
        lo, step = x0, math.log(1.25)
        while True:
            hi = min(lo + step, math.log(MAX_BOUND))
            if g(hi) > 0.0:
                break
            if hi >= math.log(MAX_BOUND):
                return MAX_BOUND
            lo, step = hi, 2.0 * step
    else:
        hi, step = x0, math.log(1.25)
        while True:
            lo = hi - step
            if lo < math.log(MIN_BOUND):
                raise InfeasibleError(what)
            if g(lo) <= 0.0:
                break
            hi, step = lo, 2.0 * step
    tol = math.log1p(rtol) / 4.0
    if hi - lo > tol:
        root = float(optimize.brentq(g, lo, hi, xtol=tol, rtol=1e-15, maxiter=200))
        x = max(root - tol, lo)
        for _ in range(60):  # step down to the certified side of the root
            if x <= lo or g(x) <= 0.0:
                break
            x -= tol
        lo = max(x, lo)
    return math.exp(lo)


@lru_cache(maxsize=256)
def _largest_bound(epsilon: float, delta: float, steps: int, rate: float, sampling: str,
                   rtol: float, discretization: float, accountants: tuple[str, ...]
                   ) -> tuple[float, str]:
    def ok(q: float) -> tuple[bool, str]:
        return certifies(GaussianSteps(q, steps, rate, sampling), epsilon, delta,
                         discretization=discretization, accountants=accountants)

    if rate == 1.0 and "gdp-exact" in accountants:
        from dpopt.accounting.budgets import ApproxDP

        total = ApproxDP(epsilon, delta).mahalanobis_bound()
        q = float(Fraction(total) / steps)
        q = bw.shrink_until(q, lambda v: ok(v)[0])
        return q, "gdp-exact"
    from dpopt.accounting.gdp import mu_for

    what = (
        f"epsilon={epsilon!r}: no noise level certifies ({epsilon}, {delta})-DP over {steps} "
        f"steps at sampling rate {rate} (the target is below what any noise level can be "
        "certified to reach in double precision); relax epsilon or delta"
    )

    def eps_with(names: tuple[str, ...]) -> Callable[[float], float]:
        def eps_of(q: float) -> float:
            return uniform_epsilon(q, steps, rate, sampling, delta, names, discretization).value
        return eps_of

    mu = float(mu_for(epsilon, delta))
    q0 = math.log1p(mu * mu / (rate * rate * steps))  # the CLT's guess
    q0 = min(max(q0, 1e-12), MAX_BOUND)
    names = accountants  # gdp-exact answers inf at once when subsampled
    if "rdp" in names:  # the cheap RDP answer is a valid start for the PLD's search
        q0 = _solve(eps_with(("rdp",)), epsilon, q0, rtol, what)
    accounting = eps_with(names)

    def full(q: float) -> float:  # each new evaluation of the accountants is one step shown
        misses = uniform_epsilon.cache_info().misses
        value = accounting(q)
        if uniform_epsilon.cache_info().misses > misses:
            progress.tick()
        return value

    with progress.auto(f"noise search ({'+'.join(names)}, {steps} steps)", unit="evaluation",
                       expected=SEARCH_EVALUATIONS):
        q = _solve(full, epsilon, q0, rtol, what)
        if full(q) > epsilon:  # final re-check of the value returned
            q = bw.shrink_until(q, lambda v: full(v) <= epsilon)
    return q, uniform_epsilon(q, steps, rate, sampling, delta, names, discretization).accountant


def largest_bound(epsilon: float, delta: float, steps: int, sampling_rate: float = 1.0,
                  sampling: str = "poisson", *, rtol: float = 1e-3,
                  discretization: float = 1e-4, accountants: str | Sequence[str] = ACCOUNTANTS
                  ) -> tuple[float, str]:
    r"""Largest per-release bound q such that ``steps`` releases are certified (ε, δ)-DP.

    Without subsampling this is exact (μ² = T q on the Balle–Wang curve, rounded down). With
    subsampling, a bisection on log q with the never-optimistic accountants (RDP, then the
    pessimistic PLD) stops when the bracket is within ``rtol``; the returned q is the lower end,
    re-checked. The search is capped at q = 1e4 (noise multiplier 0.01).

    Returns
    -------
    (q, accountant)
        The bound and the accountant that certified it.

    Raises
    ------
    InvalidParameterError
        Bad ε, δ, steps, rate or sampling (the parameter and value are named).
    InfeasibleError
        No q >= 1e-30 is certified (a target ε below what any noise can reach).
    """
    e = as_scalar("epsilon", epsilon, low=0.0, low_open=False)
    d = _delta(delta)
    t = as_steps("steps", steps)
    p = _rate(sampling_rate)
    if not isinstance(sampling, str) or sampling not in SAMPLINGS:
        raise InvalidParameterError("sampling", sampling, f"must be one of {SAMPLINGS}")
    r = as_scalar("rtol", rtol, low=1e-9, high=1.0)
    acc = _check_accountants(accountants)
    return _largest_bound(e, d, t, p, sampling, r, _discretization(discretization), acc)


def smallest_noise_multiplier(epsilon: float, delta: float, steps: int,
                              sampling_rate: float = 1.0, sampling: str = "poisson", *,
                              rtol: float = 1e-3, discretization: float = 1e-4,
                              accountants: str | Sequence[str] = ACCOUNTANTS) -> tuple[float, str]:
    r"""Smallest noise multiplier σ (noise std / ℓ2 sensitivity) certified for (ε, δ) over the
    schedule: :math:`\sigma = 1/\sqrt q` for q of :func:`largest_bound`, rounded up."""
    q, how = largest_bound(epsilon, delta, steps, sampling_rate, sampling, rtol=rtol,
                           discretization=discretization, accountants=accountants)
    sigma = 1.0 / math.sqrt(q)
    while Fraction(sigma) ** 2 * Fraction(q) < 1:
        sigma = math.nextafter(sigma, math.inf)
    return sigma, how
