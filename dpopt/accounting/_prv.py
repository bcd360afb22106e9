"""Deprecated: the prv-accountant lower bounds were replaced by the proven lower bounds of
:func:`dpopt.accounting.composition.lower_epsilon` / :func:`~dpopt.accounting.composition.
lower_delta` (the sum test, the binned likelihood-ratio test, the optimistic PLD). This thin
alias forwards its three functions to them, with a :class:`DeprecationWarning` on import, and
goes in dpopt 0.6.

The pair is the same one the prv-accountant route modelled: T Poisson-subsampled Gaussian steps
of the remove direction per group (q, p, T), s = 1/√q; what comes back is now a proof, not the
library's lower end minus its error allowance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from certificates._deprecated import warn_module

if TYPE_CHECKING:
    from dpopt.accounting.composition import GaussianSteps

warn_module(__name__, "dpopt.accounting.composition.lower_epsilon / lower_delta", __file__)

__all__ = ["prv_delta_lower", "prv_epsilon_lower", "prv_feasible"]


def _run(groups: Sequence[tuple[float, float, int]]) -> list[GaussianSteps]:
    from dpopt.accounting.composition import GaussianSteps

    return [GaussianSteps(q, int(t), p, "poisson" if p < 1.0 else "full_batch")
            for q, p, t in groups]


def prv_feasible(groups: Sequence[tuple[float, float, int]], eps_error: float,
                 delta_error: float, scale: float) -> bool:
    """Always True: the proven routes answer every run (a lower bound of 0 where none applies)."""
    del groups, eps_error, delta_error, scale
    return True


def prv_epsilon_lower(groups: Sequence[tuple[float, float, int]], delta: float,
                      eps_error: float, scale: float = 10.0) -> float | None:
    """A proven lower bound on ε(δ) of the composed groups (``None`` where none applies);
    ``eps_error`` is no longer used."""
    from dpopt.accounting.composition import lower_epsilon

    del eps_error
    value, how = lower_epsilon(_run(groups), delta, scale=scale)
    return None if how == "none" else value


def prv_delta_lower(groups: Sequence[tuple[float, float, int]], epsilon: float,
                    eps_error: float, delta_error: float) -> float | None:
    """A proven lower bound on δ(ε) of the composed groups (``None`` where none applies);
    ``eps_error`` and ``delta_error`` are no longer used."""
    from dpopt.accounting.composition import lower_delta

    del eps_error, delta_error
    value, how = lower_delta(_run(groups), epsilon)
    return None if how == "none" else value
