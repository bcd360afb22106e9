r"""The one boundary to Google's ``dp-accounting`` library (private).

Every call into the library goes through this module, after dpopt has validated the inputs, and
any exception it raises (or NaN it returns) becomes a :class:`~dpopt.errors.SolverError` naming
the library — no traceback from it reaches the user. The library's log output is silenced.

Why ``dp-accounting``: its privacy-loss-distribution (PLD) accountant builds *pessimistic*
discretisations (the "connect the dots" construction of Doroshenko, Ghazi, Kamath, Kumar &
Manurangsi, "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions",
and the pessimistic rounding of Meiser & Mohammadi, "Tight on Budget?"), so the (ε, δ) it
reports is an upper bound for every ε, tail mass it truncates is moved to the "infinite loss"
atom, and it is maintained by the authors of those papers with an extensive test suite. A
home-made PLD would have to re-derive all of that.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpopt.errors import SolverError

__all__ = ["noise_multiplier_down", "optimistic_delta", "optimistic_epsilon",
           "optimistic_event_delta", "optimistic_event_epsilon", "pld_delta", "pld_epsilon",
           "rdp_without_replacement"]

_T = TypeVar("_T")

#: A PLD answer is used only for δ at or above this value: below it the library's floating-point
#: resolution (FFT convolutions of probability masses) is not trustworthy.
PLD_MIN_DELTA = 1e-12
#: Largest number of loss-grid points one PLD may need; beyond it (tiny noise multipliers) the PLD
#: is not built and the other accountants answer.
PLD_MAX_POINTS = 4e6
#: Most steps one PLD composes; beyond it the RDP curve answers (it composes by multiplication).
PLD_MAX_STEPS = 1_000_000
#: Relative and absolute slack on δ covering round-off in the library's FFT convolutions.
_PLD_REL = 1e-6
_PLD_ABS = 1e-14


def _call(what: str, fn: Callable[[], _T]) -> _T:
    for name in ("absl", "dp_accounting"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with np.errstate(all="ignore"):
            return fn()
    except Exception as exc:  # the library's exceptions are not part of dpopt's API
        raise SolverError(
            f"the dp-accounting library failed while computing {what}: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def _library() -> Any:
    try:
        import dp_accounting
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError:  # pragma: no cover - a core dependency
        raise SolverError(
            "the PLD accountant needs the 'dp-accounting' package (pip install dp-accounting)"
        ) from None
    return dp_accounting, privacy_loss_distribution


def noise_multiplier_down(bound: float) -> float:
    """Noise multiplier 1/√q rounded DOWN (less noise is the pessimistic side)."""
    return math.nextafter(1.0 / math.sqrt(bound), 0.0)


def _pld(groups: Sequence[tuple[float, float, int]], discretization: float,
         replace_one: bool = False) -> Any:
    return _pld_cached(tuple(groups), discretization, replace_one)


def _dense_profile(pmf: Any, eps: NDArray[np.float64]) -> NDArray[np.float64] | None:
    r"""δ(ε) of one dense PLD pmf at the sorted ``eps``, vectorised: with losses l_k and masses
    m_k, :math:`\delta(\varepsilon) = m_\infty + \sum_{l_k > \varepsilon} m_k
    - e^{\varepsilon}\sum_{l_k > \varepsilon} m_k e^{-l_k}` (the library's own formula, which
    it evaluates in a Python loop); None when the pmf is not the dense kind or a sum
    overflows."""
    from dp_accounting.pld import pld_pmf

    if not isinstance(pmf, pld_pmf.DensePLDPmf):
        return None
    try:
        probs = np.asarray(pmf._probs, dtype=float)
        lower, disc = int(pmf._lower_loss), float(pmf._discretization)
        inf_mass = float(pmf._infinity_mass)
    except AttributeError:
        return None
    losses = (lower + np.arange(probs.size)) * disc
    with np.errstate(over="ignore", invalid="ignore"):
        upper = np.append(np.cumsum(probs[::-1])[::-1], 0.0)
        lower_mass = np.append(np.cumsum((probs * np.exp(-losses))[::-1])[::-1], 0.0)
        k = np.searchsorted(losses, eps, side="right")
        out = inf_mass + upper[k] - np.exp(eps) * lower_mass[k]
    return out if bool(np.all(np.isfinite(out))) else None


def _profile(pld: Any, eps: NDArray[np.float64]) -> NDArray[np.float64]:
    """The larger of a PLD's two directions' δ(ε) at the sorted ``eps`` (what its public
    ``get_delta_for_epsilon`` returns, without its per-point Python loop when the pmfs are
    dense)."""
    parts = [_dense_profile(getattr(pld, name, None), eps) for name in ("_pmf_remove", "_pmf_add")]
    if any(part is None for part in parts):
        return np.asarray(pld.get_delta_for_epsilon(eps), dtype=float)
    return np.maximum(parts[0], parts[1])  # type: ignore[arg-type]


def _without_replacement_pld(sigma: float, p: float, discretization: float) -> Any:
    r"""A pessimistic PLD of one Gaussian step on a batch drawn without replacement, under
    replace-one neighbours (``sigma`` per replace-one sensitivity, rate ``p`` = B/N).

    Dong, Roth & Su ("Gaussian Differential Privacy", Theorem 4.2, subsampling) prove: if a
    mechanism is f-DP, running it on a uniformly drawn subset of m of the n records (datasets of
    the same size, differing in one record) is :math:`C_p(f)`-DP, with p = m/n,
    :math:`f_p = pf + (1-p)\mathrm{Id}` and :math:`C_p(f) = \min\{f_p, f_p^{-1}\}^{**}`.
    For :math:`f = G_{1/\sigma}`, :math:`f_p` and :math:`f_p^{-1}` are the trade-off functions
    of the two Poisson-subsampled Gaussian pairs (the "remove" pair
    :math:`((1-p)N(0,\sigma^2) + pN(1,\sigma^2),\ N(0,\sigma^2))` and the "add" pair, its
    reverse). A convex conjugate turns the lower convex envelope of a minimum into the maximum
    of the conjugates, so the privacy profile of :math:`C_p(f)` is, at every ε,

    .. math:: \delta(\varepsilon) = \max\{\delta_{\rm remove}(\varepsilon),\
              \delta_{\rm add}(\varepsilon)\},

    the profile of one pair of distributions that realises :math:`C_p(f)`.

    The profile is read from dp-accounting's pessimistic PLD of the Poisson-subsampled Gaussian
    (its ``get_delta_for_epsilon`` is the larger of the two directions), which lies above the
    true one at every ε, on a grid of ε spaced by ``discretization``; the pessimistic "connect
    the dots" PLD (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi, "Connect the Dots") of those
    values joins them by chords in :math:`e^\varepsilon`, above the convex true profile. A
    profile above another at every ε is a trade-off function below the other (they are convex
    conjugates), and that domination survives composition (Dong, Roth & Su, "Gaussian
    Differential Privacy", Thm. 3.2), so
    composing this PLD gives an upper bound on the run's δ(ε). (Composing the two
    one-directional PLDs separately and taking the larger δ, as for Poisson sampling, would
    not be: no single neighbouring pair need realise either direction at every step.)
    """
    _, pldm = _library()
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_mechanism as plm

    poisson = pldm.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=p,
                                           pessimistic_estimate=True,
                                           value_discretization_interval=discretization)
    bounds = [plm.GaussianPrivacyLoss(sigma, pessimistic_estimate=True, sampling_prob=p,
                                      adjacency_type=kind).connect_dots_bounds()
              for kind in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD)]
    lo = math.floor(min(b.epsilon_lower for b in bounds) / discretization)
    hi = math.ceil(max(b.epsilon_upper for b in bounds) / discretization) + 1
    eps = np.arange(lo, hi + 1) * discretization
    # non-increasing by raising (never lowering) a value to the largest one to its right
    deltas = np.clip(np.maximum.accumulate(_profile(poisson, eps)[::-1])[::-1], 0.0, 1.0)
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(discretization, lo, hi, deltas)
    return pldm.PrivacyLossDistribution(pmf)


def _dense_for(pmf: Any, count: int) -> Any:
    """``pmf`` as the library composes it ``count`` times: a sparse pmf whose composition would
    exceed the library's sparse size (``size ** count`` points) is first made dense, which is
    what the library's sparse ``self_compose`` does itself, after forming ``size ** count`` as
    an exact integer (a number of ``count · log2(size)`` bits: 20-30 ms at T = 10^5)."""
    from dp_accounting.pld import pld_pmf

    limit = getattr(pld_pmf, "_MAX_PMF_SPARSE_SIZE", None)
    if (isinstance(pmf, pld_pmf.SparsePLDPmf) and isinstance(limit, int) and pmf.size > 1
            and count * math.log(pmf.size) > math.log(limit) + 1e-9):
        return pmf.to_dense_pmf()
    return pmf


def _self_composed(one: Any, count: int) -> Any:
    """``one`` composed with itself ``count`` times (the library's PLD self-composition, its
    sparse pmfs made dense first where the library would make them dense: :func:`_dense_for`)."""
    if count <= 1:
        return one
    _, pldm = _library()
    remove = getattr(one, "_pmf_remove", None)
    add = getattr(one, "_pmf_add", None)
    symmetric = getattr(one, "_symmetric", None)
    if remove is None or add is None or not isinstance(symmetric, bool):
        return one.self_compose(count)
    if symmetric:
        return pldm.PrivacyLossDistribution(_dense_for(remove, count)).self_compose(count)
    return pldm.PrivacyLossDistribution(_dense_for(remove, count),
                                        _dense_for(add, count)).self_compose(count)


def _compose_groups(groups: Sequence[tuple[float, float, int]],
                    group: Callable[[float, float, int], Any]) -> Any:
    """The composition over the groups (q, p, T) of ``group(q, p, T)``, each group's PLD."""
    total = None
    for q, p, count in groups:
        one = group(q, p, count)
        total = one if total is None else total.compose(one)
    return total


@lru_cache(maxsize=8)
def _pld_cached(groups: tuple[tuple[float, float, int], ...], discretization: float,
                replace_one: bool = False) -> Any:
    """PLD of the composition; ``groups`` are (bound q, rate p, count T), Poisson-sampled
    (add/remove) or, with ``replace_one``, fixed-size batches without replacement."""
    _, pldm = _library()

    def group(q: float, p: float, count: int) -> Any:
        sigma = noise_multiplier_down(q)
        if replace_one and p < 1.0:
            return _self_composed(_without_replacement_pld(sigma, p, discretization), count)
        if p == 1.0:
            # T Gaussian releases compose exactly to one with σ/√T.
            return pldm.from_gaussian_mechanism(
                standard_deviation=math.nextafter(sigma / math.sqrt(count), 0.0),
                pessimistic_estimate=True, value_discretization_interval=discretization)
        return _self_composed(pldm.from_gaussian_mechanism(
            standard_deviation=sigma, sampling_prob=p, pessimistic_estimate=True,
            value_discretization_interval=discretization), count)

    def build() -> Any:
        return _compose_groups(groups, group)

    return _call("a privacy loss distribution", build)


def pld_points(groups: Sequence[tuple[float, float, int]], discretization: float,
               replace_one: bool = False) -> int:
    """Grid points of the (cached) composed PLD, both directions: its cost is about linear in
    them, and they scale like 1/discretisation (``replace_one`` as in :func:`pld_epsilon`)."""
    pld = _pld(groups, discretization, replace_one)
    total = 0
    for pmf in (getattr(pld, "_pmf_remove", None), getattr(pld, "_pmf_add", None)):
        probs = getattr(pmf, "_probs", None)
        total += int(np.size(probs)) if probs is not None else 0
    return total


def pld_feasible(groups: Sequence[tuple[float, float, int]], discretization: float,
                 max_points: float = PLD_MAX_POINTS) -> bool:
    """Whether every group's PLD fits in ``max_points`` grid points (the privacy loss of a
    Gaussian with noise multiplier σ spans about (1 + 20σ)/σ² before truncation)."""
    if sum(count for _, _, count in groups) > PLD_MAX_STEPS:
        return False
    for q, p, count in groups:
        sigma = 1.0 / math.sqrt(q)
        if p == 1.0:
            sigma /= math.sqrt(count)
        if (1.0 + 20.0 * sigma) / (sigma * sigma) / discretization > max_points:
            return False
    return True


def pld_epsilon(groups: Sequence[tuple[float, float, int]], delta: float,
                discretization: float, replace_one: bool = False) -> float:
    """Pessimistic-PLD ε at δ (``inf`` when δ is below :data:`PLD_MIN_DELTA` or the PLD would
    be too large to build); ``replace_one``: fixed-size batches without replacement
    (:func:`_without_replacement_pld`)."""
    if delta < PLD_MIN_DELTA or not pld_feasible(groups, discretization):
        return math.inf
    pld = _pld(groups, discretization, replace_one)
    target = delta * (1.0 - _PLD_REL) - _PLD_ABS
    eps = float(_call("ε from the PLD", lambda: pld.get_epsilon_for_delta(target)))
    if math.isnan(eps) or eps < 0.0:
        raise SolverError(f"the dp-accounting PLD returned an invalid ε ({eps!r})")
    return eps * (1.0 + 1e-12) + 1e-12


def pld_delta(groups: Sequence[tuple[float, float, int]], epsilon: float,
              discretization: float, replace_one: bool = False) -> float:
    """Pessimistic-PLD δ at ε (rounded up by the round-off slack; at most 1; 1 when the PLD
    would be too large to build); ``replace_one`` as in :func:`pld_epsilon`."""
    if not pld_feasible(groups, discretization):
        return 1.0
    pld = _pld(groups, discretization, replace_one)
    d = float(_call("δ from the PLD", lambda: pld.get_delta_for_epsilon(epsilon)))
    if math.isnan(d) or d < 0.0:
        raise SolverError(f"the dp-accounting PLD returned an invalid δ ({d!r})")
    return min(d * (1.0 + _PLD_REL) + _PLD_ABS, 1.0)


def rdp_without_replacement(p: float, sigma: float, orders: Sequence[float]
                            ) -> NDArray[np.float64]:
    """RDP of a Gaussian on a batch drawn without replacement (replace-one neighbours)."""
    dpa, _ = _library()

    def run() -> NDArray[np.float64]:
        from dp_accounting.rdp import rdp_privacy_accountant as rdpm

        acc = rdpm.RdpAccountant(
            orders=list(orders), neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE
        )
        # The library reads only the ratio sample_size / dataset_size: express p exactly.
        num, den = float(p).as_integer_ratio()
        event = dpa.SampledWithoutReplacementDpEvent(den, num, dpa.GaussianDpEvent(sigma))
        acc.compose(event)
        return np.asarray(acc.rdp, dtype=np.float64)

    out = _call("the RDP of sampling without replacement", run)
    return np.where(np.isnan(out), np.inf, out)


# --------------------------------------------------------------------------------------------
# Optimistic PLDs: proven LOWER bounds
# --------------------------------------------------------------------------------------------
#
# With ``pessimistic_estimate=False`` the library rounds every privacy loss DOWN to its grid
# ("privacy buckets"), discards the truncated left tail and moves the truncated right tail to a
# lower loss; each step only lowers δ(ε) = E_P[(1 - e^{ε - L})_+], and composing (adding
# independent losses) keeps the order, so the δ(ε) it reports is at most the true one of the pair
# it was built for. The rounding costs up to one grid step per composed step (a bias of order
# T × discretisation), so the grid is sized by the ε in question.
#
# Where the library says so (dp-accounting 0.6, ``dp_accounting/pld/pld_pmf.py``):
# ``_truncate_tails`` with ``pessimistic_estimate=False`` adds the right truncated mass to the
# last kept element and discards the left one (both lower δ); ``DensePLDPmf.self_compose`` adds
# ``tail_mass_truncation`` (1e-15 by default) to the infinity mass in both modes, and its FFT
# window (``common.compute_self_convolve_bounds``, a Chernoff bound) leaves at most that mass
# outside, aliased into the window — together at most 2e-15 on δ, inside the 1e-14 absolute
# slack below. The FFT's own round-off has no a-priori bound there (the relative slack 1e-6
# covers what is seen in practice), which is why :mod:`dpopt.accounting._binned`, whose FFT error
# is bounded and subtracted, is the route for subsampled Gaussians and this one is kept for event
# trees (Laplace) and for runs whose binned composition would not fit.

#: Most grid points (both directions) of one optimistic PLD (about a second of CPU to compose).
OPTIMISTIC_MAX_POINTS = 1.5e6


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


def optimistic_discretization(total_steps: int, scale: float) -> float:
    """Grid of an optimistic PLD whose rounding bias is at most about 6 % of ``scale`` (about 3 %
    on average: each composed step loses at most one grid step)."""
    return min(max(0.06 * scale / max(total_steps, 1), 1e-6), 0.1)


@lru_cache(maxsize=8)
def _optimistic_pld(groups: tuple[tuple[float, float, int], ...], discretization: float) -> Any:
    """Optimistic PLD of the remove pair ((1-p)N(0,s²) + pN(1,s²), N(0,s²)), s = 1/√q rounded
    UP (more noise: the optimistic side), composed over the groups (q, p, T)."""
    _, pldm = _library()

    def group(q: float, p: float, count: int) -> Any:
        s = _up(1.0 / math.sqrt(q))
        if p == 1.0:
            return pldm.from_gaussian_mechanism(
                standard_deviation=_up(_up(s / math.sqrt(count))),
                pessimistic_estimate=False, use_connect_dots=False,
                value_discretization_interval=discretization)
        return _self_composed(pldm.from_gaussian_mechanism(
            standard_deviation=s, sampling_prob=p, pessimistic_estimate=False,
            use_connect_dots=False, value_discretization_interval=discretization), count)

    def build() -> Any:
        return _compose_groups(groups, group)

    return _call("an optimistic privacy loss distribution", build)


def _epsilon_lower_of(pld: Any, delta: float) -> float | None:
    """Proven lower bound on ε(δ) read from an optimistic PLD: asked at δ widened by the FFT's
    round-off (a larger δ only lowers ε, so the round-off is covered on the safe side), the
    answer lowered by 1e-9 relative and 1e-12 absolute. ``None`` when dp-accounting fails or
    gives no finite positive ε."""
    target = min(delta * (1.0 + _PLD_REL) + _PLD_ABS, 1.0)
    try:
        eps = float(_call("ε from the optimistic PLD", lambda: pld.get_epsilon_for_delta(target)))
    except SolverError:
        return None
    if not math.isfinite(eps) or eps <= 0.0:
        return None
    return max(eps * (1.0 - 1e-9) - 1e-12, 0.0)


def _delta_lower_of(pld: Any, epsilon: float) -> float | None:
    """Proven lower bound on δ(ε) read from an optimistic PLD: its δ lowered by the FFT's
    round-off (``_PLD_REL`` relative, ``_PLD_ABS`` absolute) and clipped to [0, 1]. ``None``
    when dp-accounting fails or gives no finite δ."""
    try:
        d = float(_call("δ from the optimistic PLD", lambda: pld.get_delta_for_epsilon(epsilon)))
    except SolverError:
        return None
    if not math.isfinite(d):
        return None
    return min(max(d * (1.0 - _PLD_REL) - _PLD_ABS, 0.0), 1.0)


def optimistic_epsilon(groups: Sequence[tuple[float, float, int]], delta: float,
                       discretization: float) -> float | None:
    """Proven lower bound on ε(δ) from the optimistic PLD (``None`` when too large to build or
    δ below :data:`PLD_MIN_DELTA`)."""
    if delta < PLD_MIN_DELTA or not pld_feasible(groups, discretization, OPTIMISTIC_MAX_POINTS):
        return None
    try:
        pld = _optimistic_pld(tuple(groups), discretization)
    except SolverError:
        return None
    return _epsilon_lower_of(pld, delta)


def optimistic_delta(groups: Sequence[tuple[float, float, int]], epsilon: float,
                     discretization: float) -> float | None:
    """Proven lower bound on δ(ε) from the optimistic PLD (``None`` when too large to build)."""
    if not pld_feasible(groups, discretization, OPTIMISTIC_MAX_POINTS):
        return None
    try:
        pld = _optimistic_pld(tuple(groups), discretization)
    except SolverError:
        return None
    return _delta_lower_of(pld, epsilon)


def _optimistic_event_pld(event: Any, discretization: float) -> Any:
    """Optimistic PLD of an add/remove event tree (Gaussian, Laplace, Poisson-sampled of either,
    self-composed, composed, no-op); ``None`` for a no-op."""
    dpa, pldm = _library()
    common = {"pessimistic_estimate": False, "value_discretization_interval": discretization,
              "use_connect_dots": False}

    def leaf(e: Any, p: float) -> Any:
        if isinstance(e, dpa.GaussianDpEvent):
            return pldm.from_gaussian_mechanism(standard_deviation=_up(e.noise_multiplier),
                                                sampling_prob=p, **common)
        if isinstance(e, dpa.LaplaceDpEvent):
            return pldm.from_laplace_mechanism(parameter=_up(e.noise_multiplier),
                                               sampling_prob=p, **common)
        raise TypeError(f"no optimistic PLD for {type(e).__name__}")

    def walk(e: Any) -> Any:
        if isinstance(e, dpa.NoOpDpEvent):
            return None
        if isinstance(e, dpa.PoissonSampledDpEvent):
            return leaf(e.event, float(e.sampling_probability))
        if isinstance(e, dpa.SelfComposedDpEvent):
            one = walk(e.event)
            return None if one is None or e.count == 0 else one.self_compose(int(e.count))
        if isinstance(e, dpa.ComposedDpEvent):
            total = None
            for sub in e.events:
                one = walk(sub)
                if one is not None:
                    total = one if total is None else total.compose(one)
            return total
        return leaf(e, 1.0)

    return _call("an optimistic privacy loss distribution of the event", lambda: walk(event))


def optimistic_event_epsilon(event: Any, delta: float, discretization: float) -> float | None:
    """Proven lower bound on ε(δ) of an add/remove event tree (``None`` if not available)."""
    if delta < PLD_MIN_DELTA:
        return None
    try:
        pld = _optimistic_event_pld(event, discretization)
    except SolverError:
        return None
    return None if pld is None else _epsilon_lower_of(pld, delta)


def optimistic_event_delta(event: Any, epsilon: float, discretization: float) -> float | None:
    """Proven lower bound on δ(ε) of an add/remove event tree (``None`` if not available)."""
    try:
        pld = _optimistic_event_pld(event, discretization)
    except SolverError:
        return None
    return None if pld is None else _delta_lower_of(pld, epsilon)
