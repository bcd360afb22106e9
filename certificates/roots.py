r"""Bracket, then solve: the one root-finding loop of the package family.

The inverses of dpopt (the largest Mahalanobis bound meeting a budget, the smallest noise scale,
the mutual-information inverse) solve :math:`f(x) = 0` for a nondecreasing :math:`f`, usually of
a log-scaled variable. :func:`bracket_increasing` finds :math:`lo \le hi` with
:math:`f(lo) \le 0 < f(hi)` by steps from a start that grow geometrically (so a bracket is found
in a number of evaluations logarithmic in the distance to the root), inside optional limits;
:func:`solve_increasing` then applies Brent's method (:func:`scipy.optimize.brentq`; R. P.
Brent, *Algorithms for Minimization without Derivatives*, ch. 4). Neither result is trusted by
its callers: each moves the answer to the certified side with its own exact check.

Examples
--------
>>> lo, hi = bracket_increasing(lambda x: x - 10.0, 0.0)
>>> lo <= 10.0 < hi
True
>>> abs(solve_increasing(lambda x: x**3 - 8.0, 0.0, xtol=1e-12) - 2.0) < 1e-9
True
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy.optimize import brentq

from certificates.errors import SolverError

__all__ = ["BracketError", "bracket_increasing", "solve_increasing"]


class BracketError(SolverError):
    """No bracket inside the limits: ``side`` is ``"low"`` (``f > 0`` down to the lower limit)
    or ``"high"`` (``f <= 0`` up to the upper limit); ``at`` is the last point evaluated."""

    def __init__(self, side: str, at: float) -> None:
        self.side, self.at = side, at
        where = "below" if side == "low" else "above"
        super().__init__(f"no sign change of the function {where} x = {at!r} within the limits")


def bracket_increasing(
    f: Callable[[float], float], x0: float, *, step: float = 0.5, grow: float = 2.0,
    low: float = -math.inf, high: float = math.inf, max_steps: int = 200,
) -> tuple[float, float]:
    """``(lo, hi)`` with ``f(lo) <= 0 < f(hi)`` for a nondecreasing ``f``, from ``x0``.

    Steps of ``step``, ``step * grow``, ... move away from ``x0`` on the side the sign of
    ``f(x0)`` points to; the other end is the last point of the other sign, so the bracket is
    at most one step wide. The points stay inside ``[low, high]`` (the limit itself is tried
    last).

    Raises
    ------
    BracketError
        After ``max_steps`` steps, or at a limit, without a sign change.
    """
    if f(x0) <= 0.0:
        lo, s = x0, step
        for _ in range(max_steps):
            hi = min(lo + s, high)
            if f(hi) > 0.0:
                return lo, hi
            if hi >= high:
                raise BracketError("high", hi)
            lo, s = hi, s * grow
        raise BracketError("high", lo)
    hi, s = x0, step
    for _ in range(max_steps):
        lo = max(hi - s, low)
        if f(lo) <= 0.0:
            return lo, hi
        if lo <= low:
            raise BracketError("low", lo)
        hi, s = lo, s * grow
    raise BracketError("low", hi)


def solve_increasing(
    f: Callable[[float], float], x0: float, *, xtol: float = 2e-12, rtol: float = 1e-15,
    maxiter: int = 200, **bracket: float,
) -> float:
    """A root of the nondecreasing ``f`` near ``x0``: :func:`bracket_increasing` (its keyword
    arguments in ``bracket``), then Brent's method to ``xtol``/``rtol``."""
    lo, hi = bracket_increasing(f, x0, **bracket)  # type: ignore[arg-type]
    if f(lo) == 0.0:
        return lo
    return float(brentq(f, lo, hi, xtol=xtol, rtol=rtol, maxiter=maxiter))
