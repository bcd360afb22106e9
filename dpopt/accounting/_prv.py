r"""The one boundary to Microsoft's ``prv-accountant`` library (private): certified LOWER bounds.

The privacy-random-variable accountant of Gopi, Lee & Wutschitz ("Numerical Composition of
Differential Privacy", Thm. 5.5) discretises the privacy loss on a mesh chosen so that the
computed curve :math:`\tilde\delta` satisfies
:math:`\delta(\varepsilon + \varepsilon_{err}) - \delta_{err} \le \tilde\delta(\varepsilon)
\le \delta(\varepsilon - \varepsilon_{err}) + \delta_{err}`; its ``compute_epsilon`` /
``compute_delta`` return the two ends. dpopt uses only the *lower* end, as the lower side of a
certified interval whose upper side comes from the pessimistic PLD / RDP / exact GDP: a lower
bound that is too low only widens the interval, never makes an answer optimistic.

Only the Poisson-subsampled Gaussian of the **remove** direction is modelled here, i.e. the pair
:math:`((1-p)N(0,\sigma^2) + pN(1,\sigma^2),\ N(0,\sigma^2))`: any realisable pair gives a valid
lower bound. For fixed-size batches under replace-one neighbours the same pair is realised with
shift equal to the replace-one sensitivity (all other records share one clipped gradient −C, the
replaced record has +C against −C), so it is a lower bound there too.

**The library's error bound is not always met.** On one case found by the tests (Poisson rate
0.12109375, σ = 1, T = 90, δ = 1e-3, ε error 0.112) its lower end, 5.6144, exceeded the exact ε,
which dp-accounting's pessimistic and optimistic PLDs at discretisation 1e-5 bracket in
[5.60457, 5.60502]. dpopt therefore counts the ε error twice (the lower end is the library's
lower end minus ``eps_error``, at δ raised by the δ error) — a safety factor, not a proof; the
``"sum-test"`` and ``"pld-optimistic"`` routes of :func:`dpopt.accounting.composition.lower_epsilon`
rest on nothing but exact tails and optimistic rounding.

Every call is guarded: when the library is missing, fails, or the case is outside what it handles
quickly, the lower bound is 0 (trivially valid) and marked ``"none"``.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["prv_delta_lower", "prv_epsilon_lower", "prv_feasible"]

#: Beyond this many steps in total, or below this noise multiplier, no PRV lower bound is tried
#: (the library's mesh would be too fine to answer in seconds).
PRV_MAX_STEPS = 2_000_000
PRV_MIN_SIGMA = 0.3
#: Most mesh cells tried (about a second of CPU).
PRV_MAX_POINTS = 4e6


def prv_feasible(groups: Sequence[tuple[float, float, int]], eps_error: float,
                 delta_error: float, scale: float) -> bool:
    """Whether the PRV accountant is tried at all for these groups (steps, noise and mesh
    within the limits above)."""
    total = sum(t for _, _, t in groups)
    mesh = eps_error / math.sqrt(total / 2.0 * math.log(12.0 / delta_error))
    if 2.0 * (2.0 * scale + 50.0) / mesh > PRV_MAX_POINTS or total > PRV_MAX_STEPS:
        return False
    return all(p >= 1.0 or math.nextafter(1.0 / math.sqrt(q), math.inf) >= PRV_MIN_SIGMA
               for q, p, _ in groups)


def _accountant(groups: Sequence[tuple[float, float, int]], eps_error: float,
                delta_error: float, scale: float) -> tuple[Any, list[int]] | None:
    try:
        from prv_accountant import PRVAccountant
        from prv_accountant.privacy_random_variables import (
            GaussianMechanism,
            PoissonSubsampledGaussianMechanism,
        )
    except ImportError:  # pragma: no cover - optional
        return None
    # the library's mesh: eps_error / sqrt(T/2 log(12/delta_error)) on a domain somewhat wider
    # than the ε in question; refuse what would need more than PRV_MAX_POINTS cells
    if not prv_feasible(groups, eps_error, delta_error, scale):
        return None
    prvs: list[Any] = []
    counts: list[int] = []
    for q, p, t in groups:
        # more noise is the optimistic side for a lower bound: round σ up
        sigma = math.nextafter(1.0 / math.sqrt(q), math.inf)
        if p == 1.0:
            prvs.append(GaussianMechanism(noise_multiplier=sigma))
        else:
            prvs.append(PoissonSubsampledGaussianMechanism(noise_multiplier=sigma,
                                                           sampling_probability=p))
        counts.append(int(t))
    logging.getLogger("prv_accountant").setLevel(logging.ERROR)
    acc = PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=eps_error,
                        delta_error=delta_error)
    return acc, counts


def prv_epsilon_lower(groups: Sequence[tuple[float, float, int]], delta: float,
                      eps_error: float, scale: float = 10.0) -> float | None:
    """Lower bound on ε(δ) of the composed subsampled Gaussians, or ``None`` if not available;
    ``scale`` is the order of magnitude of that ε (it sizes the library's domain)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            made = _accountant(groups, eps_error, delta * 1e-3, scale)
            if made is None:
                return None
            acc, counts = made
            # the theorem's lower end holds at δ + δ_err; the ε error is counted twice
            lo, _, _ = acc.compute_epsilon(delta=min(delta * (1.0 + 1e-3), 1.0),
                                           num_self_compositions=counts)
    except Exception:  # the library's failures only cost the lower bound
        return None
    lo = float(lo) - eps_error
    if not math.isfinite(lo):
        return None
    # round-off in the library's FFT: shave a relative 1e-9 more
    return max(lo * (1.0 - 1e-9) - 1e-12, 0.0)


def prv_delta_lower(groups: Sequence[tuple[float, float, int]], epsilon: float,
                    eps_error: float, delta_error: float) -> float | None:
    """Lower bound on δ(ε) of the composed subsampled Gaussians, or ``None``."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            made = _accountant(groups, eps_error, delta_error, epsilon)
            if made is None:
                return None
            acc, counts = made
            # the ε error counted twice (see the module docstring)
            lo, _, _ = acc.compute_delta(epsilon=epsilon + eps_error,
                                         num_self_compositions=counts)
    except Exception:
        return None
    lo = float(lo)
    if not math.isfinite(lo):
        return None
    return min(max(lo * (1.0 - 1e-9) - 1e-15, 0.0), 1.0)
