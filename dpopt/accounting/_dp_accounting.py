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

__all__ = ["noise_multiplier_down", "pld_delta", "pld_epsilon", "rdp_without_replacement"]

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


def _pld(groups: Sequence[tuple[float, float, int]], discretization: float) -> Any:
    return _pld_cached(tuple(groups), discretization)


@lru_cache(maxsize=8)
def _pld_cached(groups: tuple[tuple[float, float, int], ...], discretization: float) -> Any:
    """PLD of the composition; ``groups`` are (bound q, Poisson rate p, count T)."""
    _, pldm = _library()

    def build() -> Any:
        total = None
        for q, p, count in groups:
            sigma = noise_multiplier_down(q)
            if p == 1.0:
                # T Gaussian releases compose exactly to one with σ/√T.
                one = pldm.from_gaussian_mechanism(
                    standard_deviation=math.nextafter(sigma / math.sqrt(count), 0.0),
                    pessimistic_estimate=True,
                    value_discretization_interval=discretization,
                )
            else:
                one = pldm.from_gaussian_mechanism(
                    standard_deviation=sigma,
                    sampling_prob=p,
                    pessimistic_estimate=True,
                    value_discretization_interval=discretization,
                )
                if count > 1:
                    one = one.self_compose(count)
            total = one if total is None else total.compose(one)
        return total

    return _call("a privacy loss distribution", build)


def pld_points(groups: Sequence[tuple[float, float, int]], discretization: float) -> int:
    """Grid points of the (cached) composed PLD, both directions: its cost is about linear in
    them, and they scale like 1/discretisation."""
    pld = _pld(groups, discretization)
    total = 0
    for pmf in (getattr(pld, "_pmf_remove", None), getattr(pld, "_pmf_add", None)):
        probs = getattr(pmf, "_probs", None)
        total += int(np.size(probs)) if probs is not None else 0
    return total


def pld_feasible(groups: Sequence[tuple[float, float, int]], discretization: float) -> bool:
    """Whether every group's PLD fits in :data:`PLD_MAX_POINTS` grid points (the privacy loss of
    a Gaussian with noise multiplier σ spans about (1 + 20σ)/σ² before truncation)."""
    if sum(count for _, _, count in groups) > PLD_MAX_STEPS:
        return False
    for q, p, count in groups:
        sigma = 1.0 / math.sqrt(q)
        if p == 1.0:
            sigma /= math.sqrt(count)
        if (1.0 + 20.0 * sigma) / (sigma * sigma) / discretization > PLD_MAX_POINTS:
            return False
    return True


def pld_epsilon(groups: Sequence[tuple[float, float, int]], delta: float,
                discretization: float) -> float:
    """Pessimistic-PLD ε at δ (``inf`` when δ is below :data:`PLD_MIN_DELTA` or the PLD would
    be too large to build)."""
    if delta < PLD_MIN_DELTA or not pld_feasible(groups, discretization):
        return math.inf
    pld = _pld(groups, discretization)
    target = delta * (1.0 - _PLD_REL) - _PLD_ABS
    eps = float(_call("ε from the PLD", lambda: pld.get_epsilon_for_delta(target)))
    if math.isnan(eps) or eps < 0.0:
        raise SolverError(f"the dp-accounting PLD returned an invalid ε ({eps!r})")
    return eps * (1.0 + 1e-12) + 1e-12


def pld_delta(groups: Sequence[tuple[float, float, int]], epsilon: float,
              discretization: float) -> float:
    """Pessimistic-PLD δ at ε (rounded up by the round-off slack; at most 1; 1 when the PLD
    would be too large to build)."""
    if not pld_feasible(groups, discretization):
        return 1.0
    pld = _pld(groups, discretization)
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
