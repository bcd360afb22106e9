r"""A budget over a schedule of releases: the per-release Mahalanobis bound for a total guarantee.

``Schedule(ApproxDP(epsilon=3, delta=1e-5), steps=T, sampling_rate=p)`` is a
:class:`~dpopt.accounting.budgets.Budget` whose :meth:`~Schedule.mahalanobis_bound` is the
largest per-release bound q such that T releases with bound q — each on a Poisson subsample of
rate p, or a fixed-size batch drawn without replacement — are certified to meet the *total*
target. It composes with :class:`~dpopt.accounting.budgets.AllOf` and is accepted by
:func:`dpopt.covariance.design.design_covariance` like any budget.

How each target is met (never optimistic):

* ``ApproxDP(ε, δ)`` — without subsampling exactly (T releases with bound q compose to one
  Gaussian with μ² = Tq: Dong, Roth & Su, "Gaussian Differential Privacy"; its (ε, δ) curve is
  Balle & Wang's exact formula); with subsampling by a search on q with the tighter of a
  pessimistic PLD (Google's ``dp-accounting``) and the subsampled-Gaussian RDP (Mironov, Talwar &
  Zhang), the answer re-checked (:func:`dpopt.accounting.composition.largest_bound`);
* ``GDP(μ)`` / ``ZCDP(ρ)`` — without subsampling only, exactly: q = μ²/T, q = 2ρ/T;
* ``RDP(α, ε)`` — the composed subsampled-Gaussian RDP at each order is at most ε (exact
  :math:`q = 2\varepsilon/(\alpha T)` without subsampling);
* ``AllOf`` of these — every part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from certificates.rounding import div_sqrt_up, round_down, round_up
from certificates.validate import as_scalar
from dpopt.accounting import analytic_gaussian as bw
from dpopt.accounting.budgets import GDP, RDP, ZCDP, AllOf, ApproxDP, Budget
from dpopt.accounting.composition import (
    ACCOUNTANTS,
    MAX_BOUND,
    _solve,
    as_steps,
    largest_bound,
    uniform_epsilon,
)
from dpopt.accounting.subsampled_rdp import subsampled_gaussian_rdp
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import SamplingScheme, required_sampling, sensitivity_factor

__all__ = ["Schedule"]


def _floor_div(value: Fraction) -> float:
    return round_down(value)


@dataclass(frozen=True)
class Schedule(Budget):
    r"""A total privacy target over ``steps`` Gaussian releases (optionally subsampled).

    Parameters
    ----------
    target : Budget
        The guarantee for the whole run: ``ApproxDP``, ``GDP``, ``ZCDP``, ``RDP`` or an ``AllOf``
        of them (``GDP``/``ZCDP`` only without subsampling).
    steps : int
        Number of releases T (a whole number >= 1).
    sampling_rate : float
        p in (0, 1] (1: every release sees the whole dataset).
    sampling : {"poisson", "without_replacement", "full_batch"}
        Poisson subsampling (add/remove neighbours), fixed-size batches without replacement
        (replace-one neighbours: the bound is for the replacement relation, so call
        ``design_covariance(..., relation="replacement")``), or the full batch (rate 1).
        Required when ``sampling_rate < 1`` (never implied); ``None`` at rate 1 is the full
        batch. ``"shuffling"`` is refused (no tight analysis).
    rtol : float
        Relative tolerance of the search on q (the answer is within ``rtol`` below the largest q
        the accountants certify).
    discretization : float
        PLD discretisation interval.

    Examples
    --------
    >>> from dpopt.accounting.budgets import ApproxDP
    >>> s = Schedule(ApproxDP(epsilon=1.0, delta=1e-6), steps=4)
    >>> round(s.mahalanobis_bound() * 4, 9) == round(ApproxDP(1.0, 1e-6).mahalanobis_bound(), 9)
    True
    """

    target: Budget
    steps: int
    sampling_rate: float = 1.0
    sampling: str | None = None
    rtol: float = 1e-3
    discretization: float = 1e-4

    def __post_init__(self) -> None:
        if not isinstance(self.target, Budget):
            raise InvalidTypeError("target", self.target, "a Budget (e.g. ApproxDP)")
        object.__setattr__(self, "steps", as_steps("steps", self.steps))
        object.__setattr__(
            self, "sampling_rate",
            as_scalar("sampling_rate", self.sampling_rate, low=0.0, high=1.0, high_open=False),
        )
        # required below rate 1 (never implied); names shuffling's refusal and the schemes
        scheme = required_sampling(self.sampling, self.sampling_rate)
        object.__setattr__(self, "sampling", scheme.value)
        if self.sampling == "full_batch" and self.sampling_rate != 1.0:
            raise InvalidParameterError("sampling_rate", self.sampling_rate,
                                        "must be 1 with sampling='full_batch'")
        object.__setattr__(self, "rtol", as_scalar("rtol", self.rtol, low=1e-9, high=1.0))
        object.__setattr__(
            self, "discretization",
            as_scalar("discretization", self.discretization, low=1e-6, high=0.1,
                      low_open=False, high_open=False),
        )
        self._parts(self.target)  # reject unsupported targets now, not at solve time

    # ------------------------------------------------------------------ per-target bounds

    def _parts(self, target: Budget) -> list[Budget]:
        if isinstance(target, AllOf):
            out: list[Budget] = []
            for b in target.budgets:
                out.extend(self._parts(b))
            return out
        if isinstance(target, ApproxDP | RDP):
            return [target]
        if isinstance(target, GDP | ZCDP):
            if self.sampling_rate < 1.0:
                raise InvalidParameterError(
                    "target", target.describe(),
                    "GDP and zCDP targets are supported without subsampling only (a subsampled "
                    "Gaussian is not exactly GDP/zCDP); give ApproxDP or RDP",
                )
            return [target]
        raise InvalidParameterError(
            "target", target.describe(),
            "must be ApproxDP, GDP, ZCDP, RDP or an AllOf of them (mutual information and "
            "schedules do not compose this way)",
        )

    def _rdp_at(self, q: float, alpha: float) -> float:
        return self.steps * float(
            subsampled_gaussian_rdp(q, self.sampling_rate, [alpha], self.sampling)[0]
        )

    def _bound_of(self, part: Budget) -> float:
        t = self.steps
        if isinstance(part, ApproxDP):
            q, _ = largest_bound(part.epsilon, part.delta, t, self.sampling_rate,
                                 self.sampling, rtol=self.rtol,
                                 discretization=self.discretization)
            return q
        if isinstance(part, GDP | ZCDP):
            return _floor_div(Fraction(part.mahalanobis_bound()) / t)
        assert isinstance(part, RDP)
        if self.sampling_rate == 1.0:
            return _floor_div(Fraction(part.mahalanobis_bound()) / t)
        best = math.inf
        for a, e in zip(part.alpha, part.epsilon, strict=True):
            best = min(best, self._rdp_search(a, e))
        return best

    def _rdp_search(self, alpha: float, eps: float) -> float:
        """Largest q (within ``rtol``) whose RDP of order α over the run is at most ``eps``: the
        shared bracket-then-Brent search on log q (:func:`certificates.roots.bracket_increasing`
        via the calibration's solver), stepped down to a q the check accepts."""
        start = 2.0 * eps / (alpha * self.steps * self.sampling_rate ** 2) + 1.0
        what = (f"epsilon={eps!r}: no noise level meets RDP of order {alpha} over "
                f"{self.steps} releases at sampling rate {self.sampling_rate}")
        return _solve(lambda q: self._rdp_at(q, alpha), eps, min(start, MAX_BOUND), self.rtol,
                      what)

    def _admits_part(self, part: Budget, bound: float) -> bool:
        if isinstance(part, ApproxDP):
            res = uniform_epsilon(bound, self.steps, self.sampling_rate, self.sampling,
                                  part.delta, ACCOUNTANTS, self.discretization)
            return res.value <= part.epsilon
        if isinstance(part, GDP | ZCDP) or self.sampling_rate == 1.0:
            exact = self.steps * Fraction(bound)  # T releases compose to one with bound T q
            return bool(part.admits(round_up(exact)))
        assert isinstance(part, RDP)
        return all(self._rdp_at(bound, a) <= e
                   for a, e in zip(part.alpha, part.epsilon, strict=True))

    # ------------------------------------------------------------------ Budget interface

    def mahalanobis_bound(self) -> float:
        """Largest certified per-release bound q (re-checked with :meth:`admits`)."""
        q = min(self._bound_of(p) for p in self._parts(self.target))
        if not self.admits(q):
            q = bw.shrink_until(q, self.admits)
        return q

    def admits(self, bound: float) -> bool:
        """Whether T releases with bound ``bound`` are certified to meet the target."""
        q = as_scalar("bound", bound, low=0.0)
        return all(self._admits_part(p, q) for p in self._parts(self.target))

    def noise_multiplier(self) -> float:
        """The per-release noise multiplier σ = (noise std) / C for records clipped to norm C,
        rounded up: 1/√q under add/remove (Poisson, full batch), 2/√q under replace-one (fixed-size
        batches, whose clipped sum moves by 2C), as :meth:`GaussianSteps.noise_multiplier
        <dpopt.accounting.composition.GaussianSteps.noise_multiplier>`."""
        q = self.mahalanobis_bound()
        f = Fraction(sensitivity_factor(self.scheme.relation))
        return div_sqrt_up(float(f), q)

    @property
    def scheme(self) -> SamplingScheme:
        """The sampling scheme (``sampling`` as a :class:`~dpopt.relation.SamplingScheme`)."""
        return required_sampling(self.sampling, self.sampling_rate)

    def describe(self) -> str:
        where = (
            "" if self.sampling_rate == 1.0
            else f", {self.scheme.value.replace('_', ' ')} sampling rate {self.sampling_rate:.6g}"
        )
        return f"{self.target.describe()} over {self.steps} releases{where}"
