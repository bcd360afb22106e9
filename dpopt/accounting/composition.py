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

Every result is two-sided: :attr:`AccountingResult.lower` is a proven lower bound on the true
value (the exact curve without subsampling; otherwise the lower end of the privacy-random-variable
accountant of Gopi, Lee & Wutschitz, "Numerical Composition of Differential Privacy", for a pair
of neighbours every sampling scheme realises — see :func:`lower_epsilon`).

The inverses (:func:`calibrate_noise`, and :func:`largest_bound`,
:func:`smallest_noise_multiplier` on top of it) search q coarse to fine — the RDP curve for a
certified start, a coarse pessimistic PLD to bracket, one PLD on the coarsest grid the tolerance
allows to finish (:func:`_pld_search`) — with the same never-optimistic accounting, check
every answer they return, and refute a slightly larger q with the lower bound, so the exact
answer is bracketed from both sides.

Sampling schemes and their neighbouring relations are those of
:class:`dpopt.relation.SamplingScheme`; ``"without_replacement"`` runs are stated over the
replacement relation, whose ℓ2 sensitivity for records clipped to C is 2C
(:func:`dpopt.relation.sensitivity_factor`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize

from certificates.roots import BracketError, bracket_increasing
from certificates.rounding import div_sqrt_down, div_sqrt_up, step_up_until, sum_up
from certificates.validate import as_scalar
from dpopt.accounting import analytic_gaussian as bw
from dpopt.accounting.subsampled_rdp import (
    DEFAULT_ORDERS,
    rdp_epsilon_from_curve,
    rdp_log_delta_from_curve,
    subsampled_gaussian_rdp,
)
from dpopt.errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from dpopt.relation import (
    NeighbouringRelation,
    SamplingScheme,
    replacement_sup,
    required_sampling,
    sensitivity_factor,
)
from solvers.threads import single_blas_thread

__all__ = [
    "ACCOUNTANTS",
    "AccountingResult",
    "GaussianSteps",
    "NoiseCalibration",
    "as_steps",
    "calibrate_noise",
    "composed_delta",
    "composed_epsilon",
    "largest_bound",
    "lower_delta",
    "lower_epsilon",
    "smallest_noise_multiplier",
    "uniform_epsilon",
]

ACCOUNTANTS = ("gdp-exact", "pld", "rdp")
SAMPLINGS = tuple(s.value for s in SamplingScheme)
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
    sampling : {"poisson", "without_replacement", "full_batch"} or SamplingScheme
        Poisson sampling (add/remove neighbours), a fixed-size batch of p·N records drawn without
        replacement (replace-one neighbours: q is then the bound over the replacement relation —
        with :func:`~dpopt.covariance.design.design_covariance` pass ``relation="replacement"``),
        or the full batch (rate 1, add/remove). Required when ``sampling_rate < 1`` (never
        implied; :func:`dpopt.relation.required_sampling`); ``None`` at rate 1 is the full
        batch. ``"shuffling"`` is refused (no tight analysis).
    """

    bound: float
    steps: int = 1
    sampling_rate: float = 1.0
    sampling: SamplingScheme | str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", as_scalar("bound", self.bound, low=0.0))
        object.__setattr__(self, "steps", as_steps("steps", self.steps))
        object.__setattr__(self, "sampling_rate", _rate(self.sampling_rate))
        scheme = required_sampling(self.sampling, self.sampling_rate)
        if scheme is SamplingScheme.FULL_BATCH and self.sampling_rate != 1.0:
            raise InvalidParameterError(
                "sampling_rate", self.sampling_rate, "must be 1 with sampling='full_batch'"
            )
        object.__setattr__(self, "sampling", scheme)

    @classmethod
    def from_noise_multiplier(cls, noise_multiplier: float, steps: int = 1,
                              sampling_rate: float = 1.0,
                              sampling: SamplingScheme | str | None = None) -> GaussianSteps:
        r"""Steps adding noise of std σ·C to a sum of records clipped to norm C (DP-SGD's noise
        multiplier σ, as in Opacus).

        The bound is over the scheme's relation: :math:`q = 1/\sigma^2` under add/remove
        (Poisson, full batch) and :math:`q = 4/\sigma^2` under replace-one (fixed-size batches:
        replacing a record moves the clipped sum by up to 2C), rounded up.
        """
        sigma = as_scalar("noise_multiplier", noise_multiplier, low=0.0)
        q = 1.0 / (sigma * sigma)
        if not math.isfinite(q):
            raise InvalidParameterError("noise_multiplier", noise_multiplier,
                                        "is too small: 1/σ² overflows double precision")
        q = step_up_until(q, lambda v: Fraction(v) * Fraction(sigma) ** 2 >= 1)
        scheme = required_sampling(sampling, _rate(sampling_rate))
        return cls(replacement_sup(q, scheme.relation), steps, sampling_rate, scheme)

    @property
    def relation(self) -> NeighbouringRelation:
        """The neighbouring relation of the sampling scheme."""
        return self.scheme.relation

    @property
    def scheme(self) -> SamplingScheme:
        """The sampling scheme (``sampling`` as a :class:`~dpopt.relation.SamplingScheme`)."""
        return required_sampling(self.sampling, self.sampling_rate)

    @property
    def noise_multiplier(self) -> float:
        """σ = (noise std) / C for records clipped to norm C: 1/√q under add/remove, 2/√q under
        replace-one (the inverse of :meth:`from_noise_multiplier`)."""
        return sensitivity_factor(self.relation) / math.sqrt(self.bound)

    @property
    def sensitivity_noise_multiplier(self) -> float:
        """1/√q: the noise std in units of the relation's ℓ2 sensitivity (dp-accounting's
        convention for ``GaussianDpEvent`` and ``SampledWithoutReplacementDpEvent``)."""
        return 1.0 / math.sqrt(self.bound)

    @property
    def subsampled(self) -> bool:
        return self.sampling_rate < 1.0


@dataclass(frozen=True)
class AccountingResult:
    """A certified ε (or δ), the accountant that gave it, and a certified lower bound.

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
    lower : float
        A proven lower bound on the true value (the mechanism's ε at δ, or δ at ε): the exact
        value rounded down without subsampling, else a proven bound for a pair of neighbours the
        sampling scheme realises (see :func:`lower_epsilon`); 0 when none was computed.
    lower_accountant : str
        What gave ``lower`` (``"gdp-exact"``, ``"sum-test"``, ``"binned"``,
        ``"pld-optimistic"`` or ``"none"``; see :func:`lower_epsilon`).
    sampling : SamplingScheme or None
        The run's sampling scheme (its relation: ``sampling.relation``).
    """

    value: float
    accountant: str
    candidates: dict[str, float] = field(default_factory=dict)
    order: float | None = None
    lower: float = 0.0
    lower_accountant: str = "none"
    sampling: SamplingScheme | None = None

    def __float__(self) -> float:
        return float(self.value)

    @property
    def interval(self) -> tuple[float, float]:
        """``(lower, value)``: the true value lies in it."""
        return (self.lower, self.value)

    @property
    def width(self) -> float:
        """``value - lower`` (``inf`` when the upper bound is infinite)."""
        return self.value - self.lower if math.isfinite(self.value) else math.inf

    def certified_interval(self) -> list[float] | None:
        """``[lower, upper]`` for JSON output, or ``None`` when the upper bound is infinite."""
        return [self.lower, self.value] if math.isfinite(self.value) else None


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
    kinds = {r.relation for r in run}
    if len(kinds) > 1:
        raise InvalidParameterError(
            "releases", releases, "mixes add/remove steps (Poisson, full batch) and replace-one "
            "steps (without replacement): one run has one neighbouring relation"
        )
    return run


def _scheme(run: tuple[GaussianSteps, ...]) -> SamplingScheme:
    sub = [r for r in run if r.subsampled]
    if sub:
        return sub[0].scheme
    if run[0].relation is NeighbouringRelation.REPLACEMENT:
        return SamplingScheme.WITHOUT_REPLACEMENT
    return SamplingScheme.FULL_BATCH


def _total_bound(run: tuple[GaussianSteps, ...]) -> float:
    """Σ T_i q_i rounded up (exact rational sum)."""
    return sum_up(r.steps * Fraction(r.bound) for r in run)


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


def _events_or_run(releases: object) -> bool:
    """Whether ``releases`` is a dp-accounting ``DpEvent`` (handled by :mod:`.events`)."""
    try:
        from dp_accounting import DpEvent
    except ImportError:  # pragma: no cover - a core dependency
        return False
    return isinstance(releases, DpEvent)


def _eps_error(upper: float, eps_error: float | None) -> float:
    if eps_error is not None:
        return as_scalar("eps_error", eps_error, low=0.0)
    return min(max(0.02 * upper, 0.01), 1.0) if math.isfinite(upper) else 1.0


def _binned_groups(run: tuple[GaussianSteps, ...]) -> list[tuple[Any, int]]:
    """The run's groups as binned remove pairs (:mod:`dpopt.accounting._lower`), s = 1/√q
    rounded up (more noise: the optimistic side). For fixed-size batches the ±C pair
    (:meth:`dpopt.accounting._binned.BinnedPair.plus_minus`) is realised too, but its lower end
    was below the remove pair's in every case measured (p from 0.05 to 0.9, s from 0.3 to 10),
    so it is not computed."""
    from dpopt.accounting._binned import BinnedPair

    def up(x: float) -> float:  # two ulps up: past the rounding of the sqrt and the division
        return math.nextafter(math.nextafter(x, math.inf), math.inf)

    out = []
    for q, p, t in _groups(run):
        s = up(1.0 / math.sqrt(q))
        if p >= 1.0:
            # T full-batch Gaussian steps are one Gaussian with s/√T: one step of more noise
            out.append((BinnedPair.remove(1.0, up(s / math.sqrt(t))), 1))
        else:
            out.append((BinnedPair.remove(p, s), int(t)))
    return out


def _binned_lower(run: tuple[GaussianSteps, ...],
                  compute: Callable[[list[tuple[Any, int]], float], float | None],
                  goal: float, grids: Sequence[int] | None = None
                  ) -> tuple[float | None, dict[int, float]]:
    """The binned route's best value on the grids ``grids`` (default :data:`~dpopt.accounting.
    _binned.POINTS_TRIED`) in turn (``None`` when it does not fit), and the CPU seconds of each
    grid computed: the finer grid only while the coarser fell short of ``goal`` and its
    one-step pmfs were small (the finer one has about four times their cells; decided from
    sizes, not from the clock)."""
    import time

    from dpopt.accounting import _binned

    pairs = _binned_groups(run)
    got: float | None = None
    costs: dict[int, float] = {}
    for points in (_binned.POINTS_TRIED if grids is None else grids):
        c0 = time.process_time()
        found = compute(pairs, points)
        if found is None:
            break
        costs[points] = time.process_time() - c0
        got = found if got is None else max(got, found)
        if got >= goal or _binned.pmf_cells(pairs, points) > _binned.RETRY_BINS:
            break
    return got, costs


@single_blas_thread
def lower_epsilon(releases: GaussianSteps | Sequence[GaussianSteps], delta: float, *,
                  upper: float = math.inf, eps_error: float | None = None,
                  scale: float | None = None, enough: float | None = None
                  ) -> tuple[float, str]:
    r"""A proven lower bound on the run's true ε at δ, and what gave it.

    Without subsampling the run is exactly one Gaussian with :math:`\mu^2 = \sum_t q_t` (Dong,
    Roth & Su), so the lower bound is the exact Balle–Wang ε, rounded down (``"gdp-exact"``).
    With subsampling every bound is for the remove pair
    :math:`((1-p)N(0,s^2)+pN(1,s^2),\ N(0,s^2))`, :math:`s = 1/\sqrt q`, which every scheme
    realises (see :mod:`dpopt.accounting._lower`), by the first of these routes that reaches
    ``enough`` (default: within 0.2 % of ``upper``), the best one kept:

    1. ``"sum-test"``: a threshold test on the sum of the outputs (exact Gaussian tails, no
       mesh; close to tight at large noise — long runs at small ε), about 0.01–0.05 s;
    2. ``"binned"``: the exact likelihood-ratio test of the binned output — bins at the level
       sets of the privacy loss, each bin's loss and mass rounded down, composed by one FFT
       power with its floating-point error bounded and subtracted
       (:mod:`dpopt.accounting._binned`) on 2^17 grid points, and on 2^19 when that fell
       short of ``enough`` and its one-step pmf was small: about 0.05–0.35 s;
    3. ``"pld-optimistic"``: dp-accounting's PLD with optimistic rounding (losses rounded
       down, truncated tails dropped) on a grid sized by ``scale`` (default ``upper``), when
       the binned composition would not fit in its points.

    ``eps_error`` is accepted for compatibility and no longer used (no route has an error
    parameter: each is a proof). Never negative, never NaN; ``(0, "none")`` only when none of
    them applies.
    """
    del eps_error
    value, how, _ = _lower_epsilon(_as_run(releases), _delta(delta), upper, scale, enough)
    return value, how


def _lower_epsilon(run: tuple[GaussianSteps, ...], d: float, upper: float, scale: float | None,
                   enough: float | None, grids: Sequence[int] | None = None
                   ) -> tuple[float, str, dict[int, float]]:
    """:func:`lower_epsilon` on a validated run, with the binned route's grids ``grids`` and
    the CPU seconds of each binned grid it computed (none: empty)."""
    if not any(r.subsampled for r in run):
        total = _total_bound(run)
        ld = math.log(d)
        e = bw.min_epsilon(total, ld)
        shave = 1e-9
        for _ in range(30):
            lo = max(e * (1.0 - shave) - 1e-12, 0.0)
            if lo == 0.0:
                return 0.0, "gdp-exact", {}
            got = float(bw.log_delta(np.asarray(lo), np.asarray(total)))
            if got > ld + abs(float(bw.safety_margin(ld))):
                return lo, "gdp-exact", {}
            shave *= 10.0
        return 0.0, "none", {}
    from dpopt.accounting import _binned, _lower
    from dpopt.accounting import _dp_accounting as lib

    groups = _groups(run)
    if scale is None:
        scale = upper if math.isfinite(upper) else 50.0
    goal = enough if enough is not None else (
        upper * (1.0 - 2e-3) if math.isfinite(upper) else math.inf)
    best, how = _lower.sum_test_epsilon_lower(groups, d), "sum-test"
    costs: dict[int, float] = {}
    if best < goal:
        found, costs = _binned_lower(
            run, lambda g, n: _binned.binned_epsilon_lower(g, d, points=n), goal, grids)
        fits = found is not None
        if found is not None and found > best:
            best, how = found, "binned"
        if not fits and best < goal:
            total = int(sum(t for _, _, t in groups))
            opt = lib.optimistic_epsilon(groups, d, lib.optimistic_discretization(total, scale))
            if opt is not None and opt > best:
                best, how = opt, "pld-optimistic"
    if not best > 0.0:
        return 0.0, "none", costs
    return min(best, upper), how, costs


@single_blas_thread
def lower_delta(releases: GaussianSteps | Sequence[GaussianSteps], epsilon: float, *,
                upper: float = 1.0, eps_error: float = 0.01) -> tuple[float, str]:
    """A proven lower bound on the run's true δ at ε (the counterpart of :func:`lower_epsilon`:
    the sum test, then the binned composition, then the optimistic PLD when the binned one
    does not fit; ``eps_error`` is accepted for compatibility and no longer used)."""
    run = _as_run(releases)
    e = as_scalar("epsilon", epsilon, low=0.0, low_open=False)
    if not any(r.subsampled for r in run):
        ld = float(bw.log_delta(np.asarray(e), np.asarray(_total_bound(run))))
        lo = math.exp(ld - abs(float(bw.safety_margin(ld)))) * (1.0 - 1e-9)
        return (min(lo, upper), "gdp-exact")
    from dpopt.accounting import _binned, _lower
    from dpopt.accounting import _dp_accounting as lib

    del eps_error
    groups = _groups(run)
    best, how = _lower.sum_test_delta_lower(groups, e), "sum-test"
    if best < upper * (1.0 - 2e-3):
        found, _ = _binned_lower(run, lambda g, n: _binned.binned_delta_lower(g, e, points=n),
                              upper * (1.0 - 2e-3))
        fits = found is not None
        if found is not None and found > best:
            best, how = found, "binned"
        if not fits and best < 0.97 * upper:
            total = int(sum(t for _, _, t in groups))
            opt = lib.optimistic_delta(groups, e,
                                       lib.optimistic_discretization(total, max(e, 0.5)))
            if opt is not None and opt > best:
                best, how = opt, "pld-optimistic"
    if not best > 0.0:
        return 0.0, "none"
    return (min(best, upper), how)


@single_blas_thread
def composed_epsilon(releases: GaussianSteps | Sequence[GaussianSteps] | object, delta: float,
                     *, accountants: str | Sequence[str] = ACCOUNTANTS,
                     discretization: float = 1e-4,
                     orders: Sequence[float] = DEFAULT_ORDERS,
                     two_sided: bool = True) -> AccountingResult:
    r"""Certified ε at δ for a run of Gaussian releases: the tightest of the accountants.

    Parameters
    ----------
    releases : GaussianSteps, sequence of GaussianSteps, or a dp-accounting DpEvent
        The run (heterogeneous sequences allowed; a ``DpEvent`` goes to
        :func:`dpopt.accounting.events.event_epsilon`).
    delta : float
        δ in (0, 1).
    accountants : sequence of str
        Among ``"gdp-exact"``, ``"pld"``, ``"rdp"``. ``"gdp-exact"`` composes the steps' exact
        Gaussian DP, :math:`\mu = \sqrt{\sum_t q_t}` (Dong, Roth & Su, "Gaussian Differential
        Privacy"): exact without subsampling, and for subsampled steps the bound that ignores
        the amplification, valid for every sampling scheme (a step's output is a mixture, over
        the coupled batches, of Gaussians whose means differ by at most the relation's
        sensitivity, and the hockey-stick divergence is jointly convex). It is the tightest
        certificate for fixed-size batches at high rates, where the RDP bound for sampling
        without replacement is loose.
    discretization : float
        PLD loss-discretisation interval (smaller: tighter and slower).
    orders : sequence of float
        RDP orders.
    two_sided : bool
        Also compute the certified lower bound :attr:`AccountingResult.lower`
        (:func:`lower_epsilon`).

    Examples
    --------
    >>> r = composed_epsilon(GaussianSteps(bound=0.01, steps=100), 1e-5)   # μ = 1 exactly
    >>> r.accountant, round(r.value, 6), round(r.lower, 6)
    ('gdp-exact', 4.377178, 4.377178)
    """
    if _events_or_run(releases):
        from dpopt.accounting.events import event_epsilon

        return event_epsilon(releases, delta, discretization=discretization, two_sided=two_sided)
    run = _as_run(releases)  # type: ignore[arg-type]
    d = _delta(delta)
    acc = _check_accountants(accountants)
    disc = _discretization(discretization)
    cands: dict[str, float] = {}
    order = None
    if "gdp-exact" in acc:
        # exact for unsubsampled steps; for subsampled ones the bound without amplification
        # (see the docstring), the tightest one for fixed-size batches at high rates
        cands["gdp-exact"] = bw.min_epsilon(_total_bound(run), math.log(d))
    if "pld" in acc:
        if _pld_applies(run):
            from dpopt.accounting import _dp_accounting as lib

            cands["pld"] = lib.pld_epsilon(_groups(run), d, disc, _replace_one(run))
        else:
            cands["pld"] = math.inf
    if "rdp" in acc:
        eps, order = rdp_epsilon_from_curve(orders, _rdp_curve(run, orders), d)
        cands["rdp"] = eps
    best = _pick(cands)
    lower, how = (lower_epsilon(run, d, upper=cands[best]) if two_sided else (0.0, "none"))
    return AccountingResult(cands[best], best, cands, order if best == "rdp" else None,
                            lower, how, _scheme(run))


def _pld_applies(run: tuple[GaussianSteps, ...]) -> bool:
    """Whether one PLD covers the run: Poisson subsampling (add/remove), unsubsampled steps, or
    fixed-size batches without replacement (replace-one), through the symmetrised pessimistic
    PLD of :func:`dpopt.accounting._dp_accounting._without_replacement_pld` (dp-accounting's
    own PLD accountant refuses ``SampledWithoutReplacementDpEvent``). A run that mixes the two
    relations over subsampled steps is left to RDP."""
    return len({r.relation for r in run if r.subsampled}) <= 1


def _replace_one(run: tuple[GaussianSteps, ...]) -> bool:
    """Whether the run's subsampled steps are fixed-size batches (replace-one neighbours)."""
    return any(r.subsampled and r.relation is NeighbouringRelation.REPLACEMENT for r in run)


@single_blas_thread
def composed_delta(releases: GaussianSteps | Sequence[GaussianSteps] | object, epsilon: float,
                   *, accountants: str | Sequence[str] = ACCOUNTANTS,
                   discretization: float = 1e-4,
                   orders: Sequence[float] = DEFAULT_ORDERS,
                   two_sided: bool = True) -> AccountingResult:
    r"""Certified δ at ε for a run of Gaussian releases: the tightest of the accountants.

    Parameters as in :func:`composed_epsilon`, with ``epsilon`` >= 0 instead of δ; the lower
    bound is :func:`lower_delta`.
    """
    if _events_or_run(releases):
        from dpopt.accounting.events import event_delta

        return event_delta(releases, epsilon, discretization=discretization, two_sided=two_sided)
    run = _as_run(releases)  # type: ignore[arg-type]
    e = as_scalar("epsilon", epsilon, low=0.0, low_open=False)
    acc = _check_accountants(accountants)
    disc = _discretization(discretization)
    cands: dict[str, float] = {}
    order = None
    if "gdp-exact" in acc:  # for subsampled steps: without amplification (as in composed_epsilon)
        ld = float(bw.log_delta(np.asarray(e), np.asarray(_total_bound(run))))
        cands["gdp-exact"] = min(math.exp(ld + bw.safety_margin(ld)), 1.0)
    if "pld" in acc:
        if _pld_applies(run):
            from dpopt.accounting import _dp_accounting as lib

            cands["pld"] = lib.pld_delta(_groups(run), e, disc, _replace_one(run))
        else:
            cands["pld"] = math.inf
    if "rdp" in acc:
        ld, order = rdp_log_delta_from_curve(orders, _rdp_curve(run, orders), e)
        cands["rdp"] = math.exp(ld)
    best = _pick(cands)
    upper = min(cands[best], 1.0)
    lower, how = lower_delta(run, e, upper=upper) if two_sided else (0.0, "none")
    return AccountingResult(upper, best, cands, order if best == "rdp" else None, lower, how,
                            _scheme(run))


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
        if composed_epsilon(run, delta, accountants=(name,), discretization=discretization,
                            two_sided=False).value <= epsilon:
            return True, name
    return False, ""


@lru_cache(maxsize=4096)
def uniform_epsilon(bound: float, steps: int, sampling_rate: float, sampling: str, delta: float,
                    accountants: tuple[str, ...] = ACCOUNTANTS, discretization: float = 1e-4,
                    orders: tuple[float, ...] = DEFAULT_ORDERS) -> AccountingResult:
    """:func:`composed_epsilon` of ``steps`` identical releases (memoised)."""
    return composed_epsilon(GaussianSteps(bound, steps, sampling_rate, sampling), delta,
                            accountants=accountants, discretization=discretization,
                            orders=orders, two_sided=False)


#: RDP orders of the searches for fixed-size batches: the replace-one bound of Wang, Balle &
#: Kasiviswanathan costs O(α) per order, and orders above 128 are rarely the best ones (any
#: subset of orders gives a valid bound).
WOR_SEARCH_ORDERS: tuple[float, ...] = tuple(a for a in DEFAULT_ORDERS if a <= 128.0)


def _solve(eps_of: Callable[[float], float], target: float, q0: float, rtol: float,
           what: str) -> float:
    """Largest q (within ``rtol``) with ``eps_of(q) <= target``: bracket from ``q0``, Brent on
    log q, then step down until the check holds (``eps_of`` is increasing in q)."""

    def g(x: float) -> float:
        return float(eps_of(math.exp(x))) - target

    try:
        lo, hi = bracket_increasing(g, math.log(q0), step=math.log(1.25),
                                    low=math.log(MIN_BOUND), high=math.log(MAX_BOUND))
    except BracketError as exc:
        if exc.side == "high":
            return MAX_BOUND
        raise InfeasibleError(what) from None
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


#: Seconds of CPU after which one coarse PLD stops the PLD phase (a safety valve).
FINE_SECONDS = 0.4
#: Largest grid (points, both directions) of a finishing PLD: about 0.3 s of CPU on one core.
FINE_POINTS = 6e5
#: The calibration builds no PLD when the RDP answer's noise multiplier (per sensitivity) is
#: below this: such PLDs take seconds to minutes to build, and RDP is close to tight there.
PLD_MIN_SIGMA = 0.25


def coarse_discretization(discretization: float, epsilon: float) -> float:
    r"""The bracketing PLD grid of a calibration for target ε: :math:`1.2\cdot10^{-3}
    \sqrt\varepsilon`, within [``discretization``, 0.1]. The pessimistic PLD's excess in ε is
    about :math:`c h^2` with c of order 10⁴ over this sweep's targets, so this grid's relative
    excess :math:`c h^2/\varepsilon` is a few percent at every ε (small enough for the
    extrapolation of :func:`_pld_search`, and a cheap PLD)."""
    return min(max(discretization, 1.2e-3 * math.sqrt(epsilon)), 0.1)


class _OutOfTime(Exception):
    """The time budget ran out (internal: the search returns its best certified answer)."""


def _log_clt_guess(epsilon: float, delta: float, steps: int, rate: float) -> float:
    r"""log of the CLT's per-step bound :math:`\log(1 + \mu^2/(p^2T))`, in log form (no
    underflow of :math:`p^2` or overflow of :math:`\mu^2/(p^2 T)`), clamped to the search range."""
    from dpopt.accounting.gdp import mu_for

    try:
        mu = float(mu_for(epsilon, delta))
    except Exception:  # any failure only costs the starting guess
        mu = 0.0
    if not (mu > 0.0 and math.isfinite(mu)):
        return 0.0
    x = 2.0 * math.log(mu) - 2.0 * math.log(rate) - math.log(steps)
    q0 = float(np.logaddexp(0.0, x))  # log1p(e^x) without overflow
    q0 = min(max(q0, 1e-12), MAX_BOUND)
    return math.log(q0)


@dataclass(frozen=True)
class NoiseCalibration:
    r"""The largest certified per-step bound for a target, with a refuted one beside it.

    The true largest bound :math:`q^*` (the one the exact accounting of the mechanism would
    allow) satisfies ``bound <= q* < refuted_bound``: ``bound`` is certified by a never-optimistic
    accountant, ``refuted_bound`` has a proven lower bound on its ε above the target.

    Attributes
    ----------
    bound : float
        Certified q (over the sampling scheme's neighbouring relation).
    accountant : str
        What certified it (``"gdp-exact"``, ``"pld"``, ``"rdp"``).
    refuted_bound : float or None
        A q proven NOT to meet the target (``None``: no lower bound could refute one).
    lower_accountant : str
        What refuted it (``"gdp-exact"``, ``"sum-test"``, ``"binned"``, ``"pld-optimistic"``,
        ``"none"``).
    epsilon, delta, steps, sampling_rate, sampling
        The target and the schedule.
    note : str
        Why the search stopped early or hit a limit (empty otherwise).
    seconds : float
        Wall time of the search.
    discretization : float
        The finest PLD grid the search evaluated: the grid it finished on, the coarsest whose
        excess over the requested grid the tolerance allows (the answer is certified on it;
        see :func:`_pld_search`), or the finest that fits when ``note`` says so.
    pld_used : bool
        Whether any PLD was built (False: RDP or exact GDP only).
    """

    bound: float
    accountant: str
    refuted_bound: float | None
    lower_accountant: str
    epsilon: float
    delta: float
    steps: int
    sampling_rate: float
    sampling: SamplingScheme
    note: str = ""
    seconds: float = 0.0
    discretization: float = 1e-4
    pld_used: bool = False

    @property
    def relation(self) -> NeighbouringRelation:
        return self.sampling.relation

    @property
    def noise_multiplier(self) -> float:
        """Certified σ = noise std / C for records clipped to C (factor/√q, rounded up)."""
        return div_sqrt_up(float(sensitivity_factor(self.relation)), self.bound)

    @property
    def noise_multiplier_lower(self) -> float:
        """σ below which the target is proven unreachable (factor/√refuted, rounded down; 0 when
        nothing was refuted)."""
        if self.refuted_bound is None:
            return 0.0
        return div_sqrt_down(float(sensitivity_factor(self.relation)), self.refuted_bound)

    @property
    def noise_multiplier_interval(self) -> tuple[float, float]:
        """``(lower, upper)``: the smallest σ the exact accounting would accept lies in it."""
        return (self.noise_multiplier_lower, self.noise_multiplier)

    @property
    def relative_width(self) -> float:
        """(upper − lower) / upper of the σ interval (1 when nothing was refuted)."""
        lo, hi = self.noise_multiplier_interval
        return (hi - lo) / hi

    def checking_accountants(self, accountants: Sequence[str]) -> tuple[str, ...]:
        """Which of ``accountants`` re-check the answer at :attr:`discretization` at no more
        cost than the search paid: no PLD where the search built none (its grid may be costly),
        and only the PLD where it certified the answer (no RDP curve over every order)."""
        acc = tuple(accountants)
        if not self.pld_used:
            return tuple(a for a in acc if a != "pld") or acc
        return ("pld",) if self.accountant == "pld" else acc


class _LowerBounds:
    """The calibration's proven lower bounds on ε as q varies (:func:`lower_epsilon` routes),
    with what a refutation search needs to spend little on them: once a try's coarse binned
    grid fell short (and the finer one was computed), later tries open on the finer grid;
    bisection steps use the coarse grid alone, and the search is told their expected cost and
    whether the coarse grid is known to fall short here."""

    def __init__(self, run_of: Callable[[float], GaussianSteps], delta: float, epsilon: float,
                 tick: Callable[[], None]) -> None:
        self._run_of, self._delta, self._epsilon, self._tick = run_of, delta, epsilon, tick
        self._grids: Sequence[int] | None = None
        self.how: dict[float, str] = {}
        self.last_cost = 0.0
        self._coarse_cost: float | None = None

    @property
    def coarse_short(self) -> bool:
        """Whether a try needed the finer binned grid (the coarse one fell short there)."""
        return self._grids is not None

    @property
    def bisect_cost(self) -> float:
        """The expected CPU seconds of one bisection step (the last coarse-only bound's cost,
        else the last bound's)."""
        return self.last_cost if self._coarse_cost is None else self._coarse_cost

    def __call__(self, q: float, bisecting: bool = False) -> float:
        import time

        from dpopt.accounting import _binned

        self._tick()
        c0 = time.process_time()
        # only "above the target" matters here: stop at the first bound that shows it
        coarse, fine = _binned.POINTS_TRIED[0], _binned.POINTS_TRIED[-1]
        value, how, costs = _lower_epsilon(
            _as_run(self._run_of(q)), self._delta, math.inf, self._epsilon,
            self._epsilon * (1.0 + 1e-9), (coarse,) if bisecting else self._grids)
        self.last_cost = time.process_time() - c0
        if coarse in costs:  # a bisection step's cost: the sum test's and the coarse grid's
            self._coarse_cost = self.last_cost - sum(c for p, c in costs.items() if p != coarse)
        elif bisecting:  # the sum test sufficed
            self._coarse_cost = self.last_cost
        if fine in costs and fine != coarse and not bisecting:
            self._grids = (fine,)
        self.how[q] = how
        return value


def _refute(eps_lower_of: _LowerBounds, q: float, epsilon: float, slope: float,
            deadline: float, rel_gap: float, tries: int = 6) -> float | None:
    """A q above ``q`` whose proven lower ε exceeds the target (None if none is found in
    ``tries`` attempts or before ``deadline``); the first try moves ε up by about ``rel_gap``
    (the lower bound's own error, relative) along the slope d log ε / d log q. The refuted q
    is then bisected (in log q, at most five times) towards the last q that was not refuted,
    while a bisection step is expected to cost under 0.08 s of CPU (the sum test, the coarse
    binned grid), and not past a miss of the coarse grid where a try found it short. After a
    miss the next try moves past the deficit seen (along the slope, with room), at least three
    times as far. A bisection step may use a cheaper bound than a try: only a q it refutes is
    returned."""
    import time

    step = max(1.25 * math.log1p(rel_gap) / max(slope, 0.05), 1e-6)
    below = math.log(q)
    for _ in range(tries):
        if time.perf_counter() > deadline:
            return None
        cand = min(q * math.exp(step), MAX_BOUND * 1e3)
        got = eps_lower_of(cand)
        if got > epsilon:
            above = math.log(cand)
            for _ in range(5):
                if eps_lower_of.bisect_cost > 0.08 or time.perf_counter() > deadline:
                    break
                mid = 0.5 * (below + above)
                if eps_lower_of(math.exp(mid), True) > epsilon:
                    above = mid
                elif eps_lower_of.coarse_short:
                    break  # the coarse grid falls short here: its misses say nothing
                else:
                    below = mid
            return cand if above == math.log(cand) else math.exp(above)
        below = math.log(cand)
        # the next try: past the deficit seen along the slope (with room), at least 3x the step
        deficit = math.log(epsilon / got) / max(slope, 0.05) if got > 0.0 else math.inf
        step = max(3.0 * step, step + 1.5 * deficit) if math.isfinite(deficit) else 3.0 * step
    return None


@lru_cache(maxsize=256)
@single_blas_thread
def _calibrate(epsilon: float, delta: float, steps: int, rate: float, sampling: SamplingScheme,
               rtol: float, discretization: float, accountants: tuple[str, ...],
               time_budget: float, two_sided: bool, progress: bool | None) -> NoiseCalibration:
    import time

    from dpopt.accounting import _dp_accounting as lib

    t0 = time.perf_counter()
    deadline = t0 + time_budget
    # work in units of one coarse PLD: a finishing PLD costs about the grid ratio r of them, a
    # lower bound about four finishing PLDs (3/4 of the coarse-to-requested ratio until the
    # finishing grid is known), an RDP evaluation a fiftieth; 3-6 coarse, 1-2 finishing and
    # 1-2 lower-bound evaluations
    ratio = min(coarse_discretization(discretization, epsilon) / discretization, 40.0)
    lib._library()  # imported before the clock starts: its import is not one of the steps
    bar = _progress_bar(progress, (4.0 + 1.75 * ratio, 10.0 + 5.0 * ratio))
    lower_units = [0.75 * ratio]  # one lower bound's expected cost in coarse PLDs
    notes: list[str] = []

    used: dict[str, float] = {"disc": math.inf, "pld": 0.0}

    def done(q: float, how: str, refuted: float | None, lhow: str) -> NoiseCalibration:
        bar.close()
        if q >= MAX_BOUND:
            notes.append(f"the search stops at the per-step bound q = {MAX_BOUND:g} (noise "
                         "multiplier 0.01 per sensitivity): the target allows at least that")
        return NoiseCalibration(q, how, refuted if two_sided else None,
                                lhow if two_sided and refuted is not None else "none",
                                epsilon, delta, steps, rate, sampling, "; ".join(notes),
                                time.perf_counter() - t0,
                                used["disc"] if math.isfinite(used["disc"]) else discretization,
                                bool(used["pld"]))

    def run_of(q: float) -> GaussianSteps:
        return GaussianSteps(q, steps, rate, sampling)


    lower_of = _LowerBounds(run_of, _delta(delta), epsilon,
                            lambda: bar.update(lower_units[0]))

    q_gdp = 0.0
    if "gdp-exact" in accountants:
        # the exact GDP of the steps without amplification by sampling: exact at rate 1, a
        # valid (and for fixed-size batches at high rates the best) certificate below it
        from dpopt.accounting.budgets import ApproxDP

        def ok(v: float) -> bool:
            return composed_epsilon(run_of(v), delta, accountants=("gdp-exact",),
                                    two_sided=False).value <= epsilon

        total = ApproxDP(epsilon, delta).mahalanobis_bound()
        q_gdp = bw.shrink_until(float(Fraction(total) / steps), ok)
    if rate == 1.0 and "gdp-exact" in accountants:
        q = q_gdp
        refuted = None
        if two_sided:
            for r in (1e-9, 1e-7, 1e-5, 1e-3):
                cand = q * (1.0 + r)
                if lower_of(cand) > epsilon:
                    refuted = cand
                    break
        return done(q, "gdp-exact", refuted, "gdp-exact")

    what = (
        f"epsilon={epsilon!r}: no noise level certifies ({epsilon}, {delta})-DP over {steps} "
        f"steps at sampling rate {rate} (the target is below what any noise level can be "
        "certified to reach in double precision); relax epsilon or delta"
    )

    def ratio_of(disc: float) -> float:
        """The cost of one PLD at ``disc`` in coarse PLDs (its grid grows like 1/disc)."""
        return min(max(coarse_discretization(discretization, epsilon) / disc, 1.0), 40.0)

    def expect(fine: float | None) -> None:
        """What is left once the search knows its finishing grid (None: no PLD to finish)."""
        r = 0.0 if fine is None else ratio_of(fine)
        if fine is not None:  # a lower bound costs a few finishing PLDs (measured: 3-15)
            lower_units[0] = 4.0 * max(r, 1.0)
        bar.expected = (bar.done + r + lower_units[0], bar.done + 3.0 * r + 2.0 * lower_units[0])

    def timed(names: tuple[str, ...], disc: float, slow: float = math.inf,
              budgeted: bool = True, orders: tuple[float, ...] = DEFAULT_ORDERS
              ) -> Callable[[float], float]:
        def eps_of(q: float) -> float:
            if budgeted and time.perf_counter() > deadline:
                raise _OutOfTime
            bar.update(0.02 if "pld" not in names else ratio_of(disc))
            c0 = time.process_time()
            if "pld" in names:
                used["pld"] = 1.0
                used["disc"] = min(used["disc"], disc)
            out = uniform_epsilon(q, steps, rate, sampling, delta, names, disc, orders).value
            if time.process_time() - c0 > slow:
                notes.append(f"one PLD at discretisation {disc:g} took "
                             f"{time.process_time() - c0:.2g} s: stopped refining")
                raise _OutOfTime
            return out
        return eps_of

    orders = (WOR_SEARCH_ORDERS if sampling is SamplingScheme.WITHOUT_REPLACEMENT
              else DEFAULT_ORDERS)
    x0 = _log_clt_guess(epsilon, delta, steps, rate)
    # fixed-size batches: dp-accounting's RDP bound for them costs about a second per evaluation
    # and is looser than the symmetrised PLD, so when the PLD can answer the search starts from
    # the exact GDP without amplification (always valid) and runs RDP only if the PLD did not
    rdp_late = (sampling is SamplingScheme.WITHOUT_REPLACEMENT and "pld" in accountants
                and delta >= lib.PLD_MIN_DELTA and steps <= lib.PLD_MAX_STEPS and q_gdp > 0.0)
    best_q, best_how = 0.0, ""
    slope = 0.5
    seeded = False  # the RDP answer is a loose start (a PLD is to finish)
    pld_ok = ("pld" in accountants and delta >= lib.PLD_MIN_DELTA
              and steps <= lib.PLD_MAX_STEPS)

    def rdp_search(loose: bool) -> None:
        nonlocal best_q, best_how, x0, orders, slope, seeded
        # the RDP search runs on the orders around the best one at the starting point (any
        # subset of orders gives a valid bound; the best order moves little near the root)
        start = uniform_epsilon(math.exp(x0), steps, rate, sampling, delta, ("rdp",),
                                discretization, orders)
        if start.order is not None and epsilon / 4.0 <= start.value <= 4.0 * epsilon:
            near = tuple(a for a in orders if start.order / 3.0 <= a <= 3.0 * start.order)
            orders = near or orders
        # the RDP search is never cut short: it is what guarantees an answer. When a PLD
        # finishes, the RDP answer is only its (certified) start: a few secant steps will do.
        eps_r = timed(("rdp",), discretization, budgeted=False, orders=orders)
        q, s = 0.0, slope
        if loose and epsilon > 0.0:  # (the secant works on log ε)
            pts, s = _secant(eps_r, epsilon, x0, slope, RDP_START_GTOL, 4)
            q = max((math.exp(x) for x, e in pts if e <= epsilon), default=0.0)
        rough = q > 0.0
        if not rough:
            q = _solve(eps_r, epsilon, math.exp(x0), rtol, what)
        if q > best_q:
            best_q, best_how, slope, seeded = q, "rdp", s, rough
            x0 = math.log(best_q)

    def finish_rdp() -> None:
        """A loose RDP start that stayed the answer is finished to ``rtol``."""
        nonlocal best_q
        if seeded and best_how == "rdp":
            best_q = _solve(timed(("rdp",), discretization, budgeted=False, orders=orders),
                            epsilon, best_q, rtol, what)

    if "rdp" in accountants and not rdp_late:
        rdp_search(loose=pld_ok)
    if q_gdp > best_q:
        best_q, best_how = q_gdp, "gdp-exact"
        # the PLD's bracket starts from the RDP answer, or the CLT's guess when RDP comes late
        x0 = max(x0, math.log(best_q)) if rdp_late else math.log(best_q)
    pld_ok = pld_ok and not best_q >= MAX_BOUND
    if pld_ok and best_q > 0.0 and 1.0 / math.sqrt(best_q) < PLD_MIN_SIGMA:
        pld_ok = False
        notes.append(f"no PLD below a noise multiplier of {PLD_MIN_SIGMA:g} per sensitivity (its "
                     "grid would take long to build): certified by RDP")
    if not pld_ok:
        finish_rdp()
        expect(None)
    if pld_ok:
        best = _Best(best_q, best_how, slope)
        try:
            _pld_search(best, timed, epsilon, x0, rtol, discretization, rate, steps, notes,
                        expect, what, sampling is SamplingScheme.WITHOUT_REPLACEMENT)
        except _OutOfTime:
            if time.perf_counter() > deadline:
                notes.append(f"time budget of {time_budget:g} s reached: the answer is "
                             "certified but may be looser than the fine PLD's (raise "
                             "time_budget)")
        except InfeasibleError:
            if best.q <= 0.0:
                raise
        best_q, best_how, slope = best.q, best.how, best.slope
        finish_rdp()
    if rdp_late and best_how != "pld" and "rdp" in accountants:
        rdp_search(loose=False)
    if best_q <= 0.0:
        if "pld" in accountants and not pld_ok and "rdp" not in accountants:
            raise InvalidParameterError(
                "accountants", accountants,
                f"the PLD does not apply here (delta < {lib.PLD_MIN_DELTA:g}, or more than "
                f"{lib.PLD_MAX_STEPS:g} steps): add 'rdp'")
        raise InfeasibleError(what)
    refuted = None
    if two_sided:
        # the binned route's bias is below about 1 % of ε in the sweep's cells (ε = 0: any
        # positive lower bound refutes)
        gap = 0.012 if epsilon > 0.0 else 0.05
        refuted = _refute(lower_of, best_q, epsilon, slope, deadline + time_budget, gap)
    return done(best_q, best_how, refuted,
                lower_of.how.get(refuted, "none") if refuted is not None else "none")


@dataclass
class _Best:
    """The search's best certified bound so far, what certified it, and the slope
    d log ε / d log q there (mutable: an interrupted search keeps what it found)."""

    q: float
    how: str
    slope: float

    def offer(self, q: float, eps: float, target: float) -> None:
        """Keep ``q`` if it is certified (``eps <= target``) and larger than the best."""
        if eps <= target and q > self.q:
            self.q, self.how = q, "pld"


def _secant(eps_of: Callable[[float], float], epsilon: float, x: float, slope: float,
            gtol: float, evals: int) -> tuple[list[tuple[float, float]], float]:
    r"""Points :math:`(\log q, \varepsilon(q))` along a safeguarded secant on
    :math:`g(x) = \log\varepsilon(e^x) - \log\varepsilon_{target}` (increasing, nearly linear
    in x), from ``x`` with the slope guess ``slope``, until :math:`|g| \le` ``gtol`` or
    ``evals`` evaluations; a step moves q by at most ×4 until the root is bracketed, and then
    stays inside the bracket (regula falsi when the secant leaves it). Returns the points and
    the last slope."""
    pts: list[tuple[float, float]] = []
    s = min(max(slope, 0.05), 10.0)
    lo: tuple[float, float] | None = None  # (x, g) with g <= 0, the largest x
    hi: tuple[float, float] | None = None  # (x, g) with g > 0, the smallest x
    reach = math.log(4.0)
    for _ in range(evals):
        e = eps_of(math.exp(x))
        g = math.log(e) - math.log(epsilon) if e > 0.0 else -math.inf
        pts.append((x, e))
        if g <= 0.0 and (lo is None or x > lo[0]):
            lo = (x, g)
        elif g > 0.0 and (hi is None or x < hi[0]):
            hi = (x, g)
        if len(pts) >= 2:
            (xa, ea), (xb, eb) = pts[-2], pts[-1]
            if xb != xa and 0.0 < min(ea, eb) and math.isfinite(max(ea, eb)):
                local = math.log(eb / ea) / (xb - xa)
                if local > 0.0:
                    s = min(max(local, 0.05), 10.0)
        if abs(g) <= gtol:
            break
        step = -g / s if math.isfinite(g) else (reach if g < 0.0 else -reach)
        nxt = x + min(max(step, -reach), reach)
        if lo is not None and hi is not None and not lo[0] < nxt < hi[0]:
            (xl, gl), (xh, gh) = lo, hi
            nxt = (xl + (xh - xl) * (-gl) / (gh - gl) if math.isfinite(gh - gl)
                   else 0.5 * (xl + xh))
        nxt = min(max(nxt, math.log(MIN_BOUND)), math.log(MAX_BOUND))
        if nxt == x:
            break
        x = nxt
    return pts, s


#: The RDP start's secant stops within this of the target in log ε when a PLD finishes the
#: search (the start only seeds the PLD's and is the certified fallback).
RDP_START_GTOL = 0.01
#: The coarse secant toward the target shifted by the grid excess stops within this in log ε.
SHIFT_GTOL = 2e-4
#: The coarse secant stops within this of the target in log ε (its point only seeds the fine
#: search, shifted by the extrapolated grid excess).
COARSE_GTOL = 2e-3


def _pld_search(best: _Best, timed: Callable[..., Callable[[float], float]], epsilon: float,
                x0: float, rtol: float, discretization: float, rate: float, steps: int,
                notes: list[str], expect: Callable[[float | None], None], what: str,
                replace_one: bool = False) -> None:
    r"""The PLD part of the calibration, updating ``best`` (every accepted point certified;
    ``replace_one``: fixed-size batches, the symmetrised PLD).

    1. **Coarse.** A safeguarded secant (:func:`_secant`) on the pessimistic PLD at the coarse
       grid :math:`h_1` (:func:`coarse_discretization`) from the RDP answer ``x0`` = log q.
    2. **Grid excess.** Connect-the-dots discretisation makes the pessimistic ε exceed the
       exact one by about :math:`c\,h^2` (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi,
       "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions"); one
       more PLD at :math:`h_2 = 2h_1` at the same q gives :math:`c = (\varepsilon_{h_2} -
       \varepsilon_{h_1})/(h_2^2 - h_1^2)` (a Richardson estimate).
    3. **Finishing grid.** The coarsest h whose excess over the PLD at ``discretization`` (d)
       costs at most half the tolerance in q: :math:`c(h^2 - d^2) \le s\,\varepsilon\,
       r_{tol}/2` (s = d log ε / d log q), i.e. :math:`h = \sqrt{d^2 + s\varepsilon r_{tol}/
       (2c)}`, within :math:`[d, h_1]` and at most :data:`FINE_POINTS` grid points (predicted
       from the coarse PLD's size, so the answer does not depend on the machine's load).
    4. **Finish** (:func:`_finish`) at h from the extrapolated value: usually one PLD.

    The estimate of c only chooses the grid; every returned q was checked by the pessimistic
    PLD (or RDP) it names, so a poor estimate costs tightness or time, never privacy.
    """
    from dpopt.accounting import _dp_accounting as lib

    coarse = coarse_discretization(discretization, epsilon)
    if not lib.pld_feasible(((math.exp(x0) * 4.0, rate, steps),), coarse):
        expect(None)
        return
    eps_c = timed(("pld",), coarse, slow=2.5 * FINE_SECONDS)
    if epsilon <= 0.0:  # ε = 0 (reached only where δ covers δ(0)): no log ε, bracket instead
        q = _solve(eps_c, epsilon, math.exp(x0), rtol, what)
        best.offer(q, eps_c(q), epsilon)
        expect(None)
        return
    pts, slope = _secant(eps_c, epsilon, x0, best.slope, COARSE_GTOL, 6)
    for x, e in pts:
        best.offer(math.exp(x), e, epsilon)
    if best.q <= 0.0:  # no RDP start and the secant found no certified point: bracket
        best.q, best.how = _solve(eps_c, epsilon, math.exp(pts[-1][0]), rtol, what), "pld"
        pts.append((math.log(best.q), eps_c(best.q)))
    best.slope = slope
    # the point nearest the target seeds the fine search
    x1, e1 = min(pts, key=lambda pe: abs(math.log(max(pe[1], 1e-300) / epsilon)))
    # the grid's excess from a second grid, half the coarse one, at the same q
    ha = 0.5 * coarse
    e_ha = timed(("pld",), ha)(math.exp(x1))
    c = (e1 - e_ha) / (coarse * coarse - ha * ha)
    asymptotic = 0.0 < e_ha < e1 < 1.5 * e_ha and c > 0.0
    size = lib.pld_points(((math.exp(x1), rate, steps),), ha, replace_one)
    cap = ha * size / FINE_POINTS  # finest grid within FINE_POINTS points
    if asymptotic:
        fine = math.sqrt(discretization ** 2 + slope * e_ha * rtol / (2.0 * c))
    else:  # no estimate: the finest grid that fits, the half-coarse value as the guess
        fine = discretization
    fine = max(fine, discretization, cap)
    # on a grid already evaluated when the tolerance allows it (its PLDs are cached)
    fine = coarse if fine >= coarse else (ha if fine >= ha else fine)
    e_pred = e_ha - c * (ha * ha - fine * fine) if asymptotic else e_ha
    if cap > discretization and fine == cap:
        notes.append(f"finished with the PLD at discretisation {fine:.2g} (the one at "
                     f"{discretization:g} would have about "
                     f"{size * ha / discretization:.2g} grid points)")
    expect(fine)
    if asymptotic and fine < ha and abs(math.log(e_pred / epsilon)) > SHIFT_GTOL:
        # the coarse grid's excess over the finishing one, e1 - e_pred, barely changes with q:
        # a secant step or two on the coarse grid toward the shifted target brings the seed
        # next to the finishing root (a cheap PLD instead of a second finishing one)
        shift = e1 - e_pred
        more, slope = _secant(eps_c, epsilon + shift, x1, slope, SHIFT_GTOL, 3)
        for x, e in more:
            best.offer(math.exp(x), e, epsilon)
        x1, e1 = min(more, key=lambda pe: abs(math.log(max(pe[1], 1e-300) / (epsilon + shift))))
        e_pred = e1 - shift
    g_pred = math.log(max(e_pred, 1e-300)) - math.log(epsilon)
    if best.q > 0.0 and math.isfinite(g_pred) and lib.pld_feasible(
            ((best.q * 1.1, rate, steps),), fine):
        _finish(best, timed(("pld",), fine), epsilon, slope, rtol, x1, g_pred)


def _finish(best: _Best, eps_of: Callable[[float], float], epsilon: float, slope: float,
            rtol: float, x_pred: float, g_pred: float) -> None:
    """Refine ``best`` with the finishing PLD: a Newton step on log ε(log q) from the predicted
    value ``g_pred`` = log(ε(e^x_pred)/target) (extrapolated from the coarse grids) and the
    slope, aimed a little below the root; then Newton / regula falsi on the finishing values, at
    most six evaluations, stopping once a passing point is predicted to be within the tolerance
    (half of ``rtol`` in q) of the root. Every accepted point was checked by that PLD; if none
    passes, the earlier certified ``best`` stands."""
    tol = math.log1p(rtol) / 2.0
    s = max(slope, 0.05)
    floor_x = math.log(best.q)
    lo_x, hi_x = -math.inf, math.inf
    g_lo = g_hi = 0.0
    x = x_pred - g_pred / s - 0.75 * tol
    for _ in range(6):
        e = eps_of(math.exp(x))
        g = math.log(max(e, 1e-300)) - math.log(epsilon)
        if g <= 0.0:
            best.offer(math.exp(x), e, epsilon)
            lo_x, g_lo = x, g
        else:
            hi_x, g_hi = x, g
        if math.isfinite(lo_x) and math.isfinite(hi_x):
            local = (g_hi - g_lo) / (hi_x - lo_x) if hi_x > lo_x else s
            if local > 0.0:
                best.slope = s = max(local, 0.05)
            if hi_x - lo_x <= tol or -g_lo / s <= tol:
                break
            x = lo_x + (hi_x - lo_x) * (-g_lo) / (g_hi - g_lo) if g_hi > g_lo else (
                0.5 * (lo_x + hi_x))
            x = min(max(x - tol / 4.0, lo_x + tol / 8.0), hi_x - tol / 8.0)
        elif math.isfinite(lo_x):
            if -g_lo / s <= tol:  # predicted root within the tolerance above a passing point
                break
            x = lo_x - g_lo / s - tol / 4.0
        else:
            x = hi_x - g_hi / s - tol / 2.0
            if x <= floor_x:  # below the certified answer: keep that one
                break


def _progress_bar(progress: bool | None, expected: tuple[float, float]) -> Any:
    """The search's status line (:class:`dpopt.progress.Progress`: its evaluations, weighted by
    their expected cost, and the time so far; no time left, which the counts do not bound): on
    stderr always (``progress=True``), never (``False``), or (``None``) where the command line
    allows displays and only once the search has run for a second."""
    from dpopt import progress as display

    desc = "calibrating the noise (PLD/RDP evaluations)"
    if progress is None:
        bar = display.auto(desc, expected=expected, unit="step", count_only=True)
        bar.delay = 1.0
        return bar
    return display.Progress(desc, expected=expected, unit="step", enabled=progress,
                            count_only=True)


def calibrate_noise(epsilon: float, delta: float, steps: int, sampling_rate: float = 1.0,
                    sampling: str | SamplingScheme | None = None, *, rtol: float = 1e-3,
                    discretization: float = 1e-4,
                    accountants: str | Sequence[str] = ACCOUNTANTS,
                    time_budget: float = 10.0, two_sided: bool = True,
                    progress: bool | None = None) -> NoiseCalibration:
    r"""The largest certified per-step bound (smallest noise) for a total (ε, δ), two-sided.

    Coarse to fine (:func:`_pld_search`): the RDP curve (cheap, valid at every δ) gives a
    certified start; a pessimistic PLD on a coarse grid brackets the answer by a secant on
    log ε; a second grid measures the pessimistic excess :math:`c h^2`, which picks the coarsest
    finishing grid whose excess over ``discretization`` costs at most ``rtol/2`` in q; the
    finish there is usually one PLD. So the answer is within ``rtol`` in q of the PLD answer at
    ``discretization``. Every PLD is cached, every accepted point is certified by the accountant
    named (the PLD on the grid :attr:`NoiseCalibration.discretization`). Then a proven lower
    bound (:func:`lower_epsilon`) refutes a slightly larger bound, which brackets the
    exact answer from the other side.

    Parameters
    ----------
    epsilon, delta, steps, sampling_rate, sampling
        The target and the schedule (see :class:`GaussianSteps`).
    rtol : float
        Relative tolerance on q against the PLD answer at ``discretization`` (σ: about
        ``rtol/2``): half for the finishing search, half for the coarser finishing grid.
    discretization : float
        The requested PLD discretisation interval (the answer's reference; the search finishes
        on a grid at least this fine only when the tolerance needs it).
    accountants : sequence of str
        Among ``"gdp-exact"``, ``"pld"``, ``"rdp"``.
    time_budget : float
        Seconds after which the search stops refining and returns its best certified answer
        (with :attr:`NoiseCalibration.note` saying so); the lower-bound step gets as long again.
    two_sided : bool
        Also compute the refuted bound (lower end of σ).
    progress : bool or None
        Show a progress bar: always, never, or (None) when the call takes longer than 2 s.

    Raises
    ------
    InvalidParameterError
        A bad parameter (named, with its value).
    InfeasibleError
        No noise level is certified (the target is below what double precision can certify).
    """
    e = as_scalar("epsilon", epsilon, low=0.0, low_open=False)
    d = _delta(delta)
    t = as_steps("steps", steps)
    p = _rate(sampling_rate)
    scheme = required_sampling(sampling, p)
    if scheme is SamplingScheme.FULL_BATCH and p != 1.0:
        raise InvalidParameterError("sampling_rate", sampling_rate,
                                    "must be 1 with sampling='full_batch'")
    r = as_scalar("rtol", rtol, low=1e-9, high=1.0)
    acc = _check_accountants(accountants)
    budget = as_scalar("time_budget", time_budget, low=0.0)
    if progress is not None and not isinstance(progress, bool):
        raise InvalidTypeError("progress", progress, "True, False or None")
    return _calibrate(e, d, t, p, scheme, r, _discretization(discretization), acc, budget,
                      bool(two_sided), progress)


def largest_bound(epsilon: float, delta: float, steps: int, sampling_rate: float = 1.0,
                  sampling: str | SamplingScheme | None = None, *, rtol: float = 1e-3,
                  discretization: float = 1e-4, accountants: str | Sequence[str] = ACCOUNTANTS
                  ) -> tuple[float, str]:
    r"""Largest per-release bound q such that ``steps`` releases are certified (ε, δ)-DP.

    Without subsampling this is exact (μ² = T q on the Balle–Wang curve, rounded down). With
    subsampling, the coarse-to-fine search of :func:`calibrate_noise` (RDP, a coarse pessimistic
    PLD, then the fine one to finish within ``rtol``); every returned q was checked by the
    accountant named. The search is capped at q = 1e4 (noise multiplier 0.01). q is stated for
    the sampling scheme's relation (replacement for ``"without_replacement"``).

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
    cal = calibrate_noise(epsilon, delta, steps, sampling_rate, sampling, rtol=rtol,
                          discretization=discretization, accountants=accountants,
                          two_sided=False, progress=False)
    return cal.bound, cal.accountant


def smallest_noise_multiplier(epsilon: float, delta: float, steps: int,
                              sampling_rate: float = 1.0,
                              sampling: str | SamplingScheme | None = None, *,
                              rtol: float = 1e-3, discretization: float = 1e-4,
                              accountants: str | Sequence[str] = ACCOUNTANTS) -> tuple[float, str]:
    r"""Smallest noise multiplier σ = (noise std) / C, for records clipped to ℓ2 norm C, certified
    for (ε, δ) over the schedule, rounded up.

    :math:`\sigma = 1/\sqrt q` for Poisson sampling and full batches (add/remove: sensitivity
    C) and :math:`\sigma = 2/\sqrt q` for fixed-size batches without replacement (replace-one:
    sensitivity 2C), with q of :func:`largest_bound`. Two-sided and with a time budget:
    :func:`calibrate_noise`.
    """
    cal = calibrate_noise(epsilon, delta, steps, sampling_rate, sampling, rtol=rtol,
                          discretization=discretization, accountants=accountants,
                          two_sided=False, progress=False)
    return cal.noise_multiplier, cal.accountant
