r"""Runs described as dp-accounting ``DpEvent``\ s, and an Opacus-style stateful accountant.

Google's ``dp-accounting`` describes a run as a tree of events; dpopt accepts that tree wherever
it accepts :class:`~dpopt.accounting.composition.GaussianSteps` (``composed_epsilon(event, δ)``):

- ``GaussianDpEvent(σ)``, ``PoissonSampledDpEvent(p, GaussianDpEvent(σ))``,
  ``SampledWithoutReplacementDpEvent(N, B, GaussianDpEvent(σ))``, ``SelfComposedDpEvent``,
  ``ComposedDpEvent`` and ``NoOpDpEvent`` become GaussianSteps and get dpopt's accounting (exact
  GDP / pessimistic PLD / RDP, the tightest, and a proven lower bound);
- a tree with ``LaplaceDpEvent``\ s (plain or Poisson-sampled) is accounted by dp-accounting's own
  accountants — the pessimistic PLD and RDP, the smaller wins — so Laplace and Gaussian releases
  compose in one run (add/remove neighbours); its lower bound is dp-accounting's optimistic PLD
  of the same tree (every loss rounded down, truncated tails dropped).

The noise multipliers are dp-accounting's: noise std divided by the ℓ2 sensitivity **of the
tree's neighbouring relation**. A tree containing ``SampledWithoutReplacementDpEvent`` is
analysed under replace-one neighbours (a gradient sum clipped to C has sensitivity 2C there, so
σ_event = std / 2C); any other tree under add/remove. Mixing Poisson and without-replacement
sampling in one tree is refused.

:class:`PrivacyAccountant` is the stateful form (as in Opacus): ``step(noise_multiplier,
sample_rate)`` once per training step, with the DP-SGD noise multiplier std / C; the history is
a list of ``(noise_multiplier, sample_rate, steps)`` and the state is plain JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from certificates.validate import as_scalar
from dpopt.accounting.composition import (
    AccountingResult,
    GaussianSteps,
    as_steps,
    composed_delta,
    composed_epsilon,
)
from dpopt.errors import InvalidParameterError, InvalidTypeError, SolverError
from dpopt.relation import NeighbouringRelation, SamplingScheme, as_sampling
from solvers.threads import single_blas_thread

if TYPE_CHECKING:  # pragma: no cover
    from dp_accounting import DpEvent

__all__ = ["PrivacyAccountant", "event_delta", "event_epsilon", "event_relation",
           "event_to_steps"]

_SUPPORTED = ("GaussianDpEvent, LaplaceDpEvent, PoissonSampledDpEvent, "
              "SampledWithoutReplacementDpEvent, SelfComposedDpEvent, ComposedDpEvent, "
              "NoOpDpEvent")


def _dpa() -> Any:
    import dp_accounting

    return dp_accounting


def _walk(event: Any, name: str) -> tuple[set[str], bool]:
    """(sampling kinds found, whether a Laplace event occurs); unsupported events refused."""
    dpa = _dpa()
    if isinstance(event, dpa.NoOpDpEvent):
        return set(), False
    if isinstance(event, dpa.GaussianDpEvent | dpa.LaplaceDpEvent):
        return set(), isinstance(event, dpa.LaplaceDpEvent)
    if isinstance(event, dpa.SelfComposedDpEvent):
        as_steps(f"{name}.count", event.count)
        return _walk(event.event, f"{name}.event")
    if isinstance(event, dpa.ComposedDpEvent):
        kinds: set[str] = set()
        lap = False
        for i, e in enumerate(event.events):
            k, la = _walk(e, f"{name}.events[{i}]")
            kinds |= k
            lap = lap or la
        return kinds, lap
    if isinstance(event, dpa.PoissonSampledDpEvent):
        if not isinstance(event.event, dpa.GaussianDpEvent | dpa.LaplaceDpEvent):
            raise InvalidParameterError(f"{name}.event", event.event,
                                        "Poisson sampling of a Gaussian or Laplace event only")
        return {"poisson"}, isinstance(event.event, dpa.LaplaceDpEvent)
    if isinstance(event, dpa.SampledWithoutReplacementDpEvent):
        if not isinstance(event.event, dpa.GaussianDpEvent):
            raise InvalidParameterError(f"{name}.event", event.event,
                                        "sampling without replacement of a Gaussian event only")
        return {"without_replacement"}, False
    raise InvalidParameterError(name, type(event).__name__, f"must be one of {_SUPPORTED}")


def event_relation(event: DpEvent, name: str = "event") -> NeighbouringRelation:
    """The neighbouring relation the event tree is analysed under (see the module docstring)."""
    dpa = _dpa()
    if not isinstance(event, dpa.DpEvent):
        raise InvalidTypeError(name, event, "a dp_accounting DpEvent")
    kinds, lap = _walk(event, name)
    if len(kinds) > 1:
        raise InvalidParameterError(
            name, event, "mixes Poisson sampling (add/remove neighbours) and sampling without "
            "replacement (replace-one neighbours): one run has one neighbouring relation")
    if "without_replacement" in kinds:
        if lap:
            raise InvalidParameterError(
                name, event, "Laplace events are accounted under add/remove neighbours only; "
                "this tree samples without replacement (replace-one)")
        return NeighbouringRelation.REPLACEMENT
    return NeighbouringRelation.ADD_REMOVE


def _sigma(value: float, name: str) -> float:
    return as_scalar(name, value, low=0.0)


def event_to_steps(event: DpEvent, name: str = "event") -> list[GaussianSteps]:
    """The Gaussian steps of an event tree without Laplace events (q = 1/σ_event² over the
    tree's relation)."""
    rel = event_relation(event, name)
    wor = rel is NeighbouringRelation.REPLACEMENT
    dpa = _dpa()
    out: list[GaussianSteps] = []

    def bound(sigma: float, where: str) -> float:
        s = _sigma(sigma, where)
        q = 1.0 / (s * s)
        if not math.isfinite(q):
            raise InvalidParameterError(where, sigma, "is too small: 1/σ² overflows")
        return math.nextafter(q, math.inf)

    def visit(e: Any, count: int, where: str) -> None:
        if isinstance(e, dpa.NoOpDpEvent):
            return
        if isinstance(e, dpa.LaplaceDpEvent) or (
                isinstance(e, dpa.PoissonSampledDpEvent)
                and isinstance(e.event, dpa.LaplaceDpEvent)):
            raise InvalidParameterError(where, e, "is a Laplace event (no Gaussian steps)")
        if isinstance(e, dpa.SelfComposedDpEvent):
            visit(e.event, count * int(e.count), f"{where}.event")
        elif isinstance(e, dpa.ComposedDpEvent):
            for i, sub in enumerate(e.events):
                visit(sub, count, f"{where}.events[{i}]")
        elif isinstance(e, dpa.GaussianDpEvent):
            scheme = SamplingScheme.WITHOUT_REPLACEMENT if wor else SamplingScheme.FULL_BATCH
            out.append(GaussianSteps(bound(e.noise_multiplier, f"{where}.noise_multiplier"),
                                     count, 1.0, scheme))
        elif isinstance(e, dpa.PoissonSampledDpEvent):
            p = as_scalar(f"{where}.sampling_probability", e.sampling_probability, low=0.0,
                          high=1.0, high_open=False)
            q = bound(e.event.noise_multiplier, f"{where}.event.noise_multiplier")
            out.append(GaussianSteps(q, count, p, "poisson" if p < 1.0 else "full_batch"))
        else:  # SampledWithoutReplacementDpEvent (checked by _walk)
            n = as_steps(f"{where}.source_dataset_size", e.source_dataset_size)
            b = as_steps(f"{where}.sample_size", e.sample_size)
            if b > n:
                raise InvalidParameterError(f"{where}.sample_size", b,
                                            f"must be <= source_dataset_size={n}")
            q = bound(e.event.noise_multiplier, f"{where}.event.noise_multiplier")
            out.append(GaussianSteps(q, count, b / n, "without_replacement"))

    visit(event, 1, name)
    if not out:
        raise InvalidParameterError(name, event, "has no private release (only NoOp events)")
    return out


def _laplace_accounting(event: Any, what: str, value: float, discretization: float,
                        two_sided: bool = True) -> AccountingResult:
    """Upper bound from dp-accounting's pessimistic PLD and RDP accountants (add/remove); the
    lower bound from its optimistic PLD of the same tree (``"pld-optimistic"``)."""
    dpa = _dpa()
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    from dpopt.accounting._dp_accounting import _call

    def pld() -> float:
        acc = pld_privacy_accountant.PLDAccountant(
            dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
            value_discretization_interval=discretization)
        acc.compose(event)
        if what == "epsilon":
            return float(acc.get_epsilon(value * (1.0 - 1e-6) - 1e-14)) * (1 + 1e-12) + 1e-12
        return min(float(acc.get_delta(value)) * (1.0 + 1e-6) + 1e-14, 1.0)

    def rdp() -> float:
        acc = rdp_privacy_accountant.RdpAccountant(
            neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
        acc.compose(event)
        if what == "epsilon":
            return float(acc.get_epsilon(value)) * (1 + 1e-10) + 1e-12
        return min(float(acc.get_delta(value)) * (1 + 1e-10), 1.0)

    cands: dict[str, float] = {}
    for label, fn in (("pld", pld), ("rdp", rdp)):
        try:
            v = _call(f"{what} of the event with Laplace releases ({label})", fn)
        except SolverError:
            v = math.inf
        cands[label] = v if v == v and v >= 0.0 else math.inf
    best = min(cands, key=lambda k: cands[k])
    upper = cands[best]
    if what == "delta":
        upper = min(upper, 1.0)
    lower, how = 0.0, "none"
    if two_sided and math.isfinite(upper):
        # the same tree with optimistic rounding (losses rounded down): a proven lower bound
        from dpopt.accounting import _dp_accounting as lib

        got = (lib.optimistic_event_epsilon(event, value, discretization) if what == "epsilon"
               else lib.optimistic_event_delta(event, value, discretization))
        if got is not None and got > 0.0:
            lower, how = min(got, upper), "pld-optimistic"
    return AccountingResult(upper, best, cands, None, lower, how, None)


def _has_laplace(event: Any) -> bool:
    return _walk(event, "event")[1]


@single_blas_thread
def event_epsilon(event: DpEvent, delta: float, *, discretization: float = 1e-4,
                  two_sided: bool = True) -> AccountingResult:
    """Certified ε at δ of a dp-accounting event tree (see the module docstring)."""
    event_relation(event)
    d = as_scalar("delta", delta, low=0.0, high=1.0)
    if _has_laplace(event):
        return _laplace_accounting(event, "epsilon", d, discretization, two_sided)
    return composed_epsilon(event_to_steps(event), d, discretization=discretization,
                            two_sided=two_sided)


@single_blas_thread
def event_delta(event: DpEvent, epsilon: float, *, discretization: float = 1e-4,
                two_sided: bool = True) -> AccountingResult:
    """Certified δ at ε of a dp-accounting event tree."""
    event_relation(event)
    e = as_scalar("epsilon", epsilon, low=0.0, low_open=False)
    if _has_laplace(event):
        return _laplace_accounting(event, "delta", e, discretization, two_sided)
    return composed_delta(event_to_steps(event), e, discretization=discretization,
                          two_sided=two_sided)


class PrivacyAccountant:
    """A stateful DP-SGD accountant in the style of Opacus, on dpopt's certified accounting.

    Parameters
    ----------
    sampling : {"poisson", "without_replacement", "full_batch"} or SamplingScheme
        The sampling scheme of every step (required: it fixes the neighbouring relation).

    Examples
    --------
    >>> acc = PrivacyAccountant(sampling="poisson")
    >>> for _ in range(3):
    ...     acc.step(noise_multiplier=1.1, sample_rate=0.01)
    >>> acc.history
    [(1.1, 0.01, 3)]
    >>> PrivacyAccountant.from_json(acc.to_json()).history == acc.history
    True
    """

    def __init__(self, sampling: SamplingScheme | str) -> None:
        self.sampling = as_sampling(sampling)
        self.history: list[tuple[float, float, int]] = []

    def step(self, noise_multiplier: float, sample_rate: float, *, steps: int = 1) -> None:
        """Record ``steps`` steps with noise std ``noise_multiplier``·C on batches of rate
        ``sample_rate``."""
        sigma = as_scalar("noise_multiplier", noise_multiplier, low=0.0)
        rate = as_scalar("sample_rate", sample_rate, low=0.0, high=1.0, high_open=False)
        if self.sampling is SamplingScheme.FULL_BATCH and rate != 1.0:
            raise InvalidParameterError("sample_rate", sample_rate,
                                        "must be 1 with sampling='full_batch'")
        n = as_steps("steps", steps)
        if self.history and self.history[-1][:2] == (sigma, rate):
            self.history[-1] = (sigma, rate, self.history[-1][2] + n)
        else:
            self.history.append((sigma, rate, n))

    def __len__(self) -> int:
        return sum(t for _, _, t in self.history)

    def to_steps(self) -> list[GaussianSteps]:
        """The history as GaussianSteps (bounds over the scheme's relation)."""
        if not self.history:
            raise InvalidParameterError("history", [], "no step was recorded")
        return [GaussianSteps.from_noise_multiplier(s, t, p, self.sampling)
                for s, p, t in self.history]

    def to_dp_event(self) -> DpEvent:
        """The history as a dp-accounting event (noise multipliers in dp-accounting's units:
        σ/2 for fixed-size batches without replacement)."""
        dpa = _dpa()
        events = []
        for s, p, t in self.history:
            if self.sampling is SamplingScheme.WITHOUT_REPLACEMENT and p < 1.0:
                num, den = float(p).as_integer_ratio()
                one = dpa.SampledWithoutReplacementDpEvent(den, num, dpa.GaussianDpEvent(s / 2))
            elif self.sampling is SamplingScheme.WITHOUT_REPLACEMENT:
                one = dpa.GaussianDpEvent(s / 2)
            elif p < 1.0:
                one = dpa.PoissonSampledDpEvent(p, dpa.GaussianDpEvent(s))
            else:
                one = dpa.GaussianDpEvent(s)
            events.append(dpa.SelfComposedDpEvent(one, t))
        return dpa.ComposedDpEvent(events)

    def get_epsilon(self, delta: float, *, discretization: float = 1e-4,
                    two_sided: bool = True) -> AccountingResult:
        """Certified ε at δ of the steps so far (two-sided; see
        :func:`~dpopt.accounting.composition.composed_epsilon`)."""
        return composed_epsilon(self.to_steps(), delta, discretization=discretization,
                                two_sided=two_sided)

    def get_delta(self, epsilon: float, *, discretization: float = 1e-4,
                  two_sided: bool = True) -> AccountingResult:
        """Certified δ at ε of the steps so far."""
        return composed_delta(self.to_steps(), epsilon, discretization=discretization,
                              two_sided=two_sided)

    def state_dict(self) -> dict[str, Any]:
        """The state as plain JSON-able data."""
        return {"schema": "dpopt.accountant/1", "sampling": self.sampling.value,
                "history": [[s, p, t] for s, p, t in self.history]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the state by ``state`` (from :meth:`state_dict`), validated."""
        if not isinstance(state, dict) or state.get("schema") != "dpopt.accountant/1":
            raise InvalidParameterError("state", state, "is not a dpopt.accountant/1 state")
        fresh = PrivacyAccountant(state.get("sampling", ""))
        hist = state.get("history")
        if not isinstance(hist, Sequence):
            raise InvalidParameterError("state['history']", hist, "must be a list")
        for i, row in enumerate(hist):
            if not isinstance(row, Sequence) or len(row) != 3:
                raise InvalidParameterError(f"state['history'][{i}]", row,
                                            "must be [noise_multiplier, sample_rate, steps]")
            fresh.step(row[0], row[1], steps=row[2])
        self.sampling, self.history = fresh.sampling, fresh.history

    def to_json(self) -> str:
        return json.dumps(self.state_dict())

    @classmethod
    def from_json(cls, text: str) -> PrivacyAccountant:
        try:
            state = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError("text", str(text)[:60], f"is not JSON ({exc})") from None
        acc = cls(SamplingScheme.POISSON)
        acc.load_state_dict(state)
        return acc
