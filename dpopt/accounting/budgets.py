r"""Privacy budgets and their translation to a Mahalanobis sensitivity bound.
(Mironov; Dong, Roth & Su; Balle & Wang.)

A Gaussian mechanism :math:`M(D) = g(D) + N(0, \Sigma)` is characterised, for every notion below,
by one number: the **Mahalanobis bound**

.. math:: q = \sup_{s \in S} s^\top \Sigma^{-1} s,

the largest squared Mahalanobis length of a sensitivity vector :math:`s = g(D) - g(D')` over the
neighbouring relation that generated the set :math:`S` (replacement of one record, or
addition/removal of one record — whichever the caller used to build :math:`S`; every budget
below is a statement about that same relation, except :class:`MIDP`, which names its own).
For each pair the output laws are :math:`N(g(D), \Sigma)` and :math:`N(g(D'), \Sigma)`, a
one-dimensional Gaussian shift of size :math:`\sqrt{s^\top\Sigma^{-1}s}` after whitening, so:

* Rényi DP of order α: :math:`\varepsilon_\alpha = \alpha q / 2` (Mironov, "Rényi Differential
  Privacy", exact);
* zCDP: :math:`\rho = q/2`; Gaussian DP: :math:`\mu = \sqrt q` (Dong, Roth & Su);
* (ε, δ)-DP: :math:`\delta \ge h_\varepsilon(q)`, the exact Balle–Wang curve;
* mutual information for a binary record: :math:`\psi(q)` (the theory page,
  "Budgets and their bounds").

Each budget's :meth:`Budget.mahalanobis_bound` returns the largest ``q`` meeting it (on the safe
side of floating point: it never exceeds the exact answer), and :func:`privacy_report` goes the
other way, from ``q`` to every notion. The name is ``mahalanobis_bound``, not ``rho``: ρ is the
zCDP parameter, which is half of it.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.rounding import (
    next_up,
    round_down,
    round_up,
    sqrt_up,
    square_down,
    step_up_until,
)
from certificates.validate import as_scalar
from dpopt.accounting import analytic_gaussian as bw
from dpopt.accounting._arrays import FloatOrArray, broadcast, finish, real_array
from dpopt.accounting.mi_dp import mi_binary_inverse_scalar, mi_binary_scalar
from dpopt.errors import InfeasibleError, InvalidParameterError, InvalidTypeError
from dpopt.relation import (
    NeighbouringRelation,
    add_remove_bound,
    as_relation,
    replacement_sup,
)

if TYPE_CHECKING:  # pragma: no cover
    from certificates.io import JSONValue

__all__ = [
    "GDP",
    "MIDP",
    "RDP",
    "ZCDP",
    "AllOf",
    "ApproxDP",
    "BoundOverflowError",
    "Budget",
    "PrivacyReport",
    "approx_dp_bound",
    "mi_binary",
    "mi_binary_inverse",
    "parse_budget",
    "privacy_report",
]

_LOG2 = math.log(2.0)
#: Relative margin on ψ used by MIDP in both directions (inverse and check): ψ is computed by
#: quadrature to ~1e-13 relative.
_MI_MARGIN = 1e-11


_DBL_MAX = float(np.finfo(np.float64).max)
_SQRT_DBL_MAX = math.sqrt(_DBL_MAX)


class BoundOverflowError(InvalidParameterError):
    """A budget so loose that its Mahalanobis bound is beyond the largest double (1.8e308).

    Such a budget constrains no noise scale that double precision can represent; it is refused
    with this error (a :class:`~dpopt.errors.InvalidParameterError` naming the budget parameter)
    rather than returned as ``inf`` (which would let zero noise "meet" it). :class:`AllOf`
    ignores such members when another member gives a finite bound.
    """


def _bound_from_exact(exact: Fraction, name: str, value: object, what: str) -> float:
    """The largest double <= ``exact`` (> 0), or a named error if it is 0 or beyond the range.

    Raises :class:`BoundOverflowError` when ``exact`` exceeds the largest double and
    :class:`~dpopt.errors.InfeasibleError` when the largest double below it is 0.
    """
    if exact > Fraction(_DBL_MAX):
        raise BoundOverflowError(
            name,
            value,
            f"the Mahalanobis bound {what} is beyond the largest double (1.8e308): the budget "
            "constrains no representable noise; use a smaller value",
        )
    q = round_down(exact)
    if q <= 0.0:
        raise InfeasibleError(
            f"{name}={value!r}: the Mahalanobis bound {what} underflows to 0 in double precision "
            "(no finite noise meets it); relax the budget"
        )
    return q


def _fmt(x: float) -> str:
    return f"{x:.6g}"


# --------------------------------------------------------------------------------------------
# Mutual information of a binary record
# --------------------------------------------------------------------------------------------


@overload
def mi_binary(bound: float) -> float: ...


@overload
def mi_binary(bound: ArrayLike) -> FloatOrArray: ...


def mi_binary(bound: ArrayLike) -> FloatOrArray:
    r"""Mutual information (nats) leaked about a binary record: :math:`\psi(q)`.

    .. math:: \psi(q) = \log 2 - \mathbb E\,\log\big(1 + e^{-q/2 - \sqrt q Z}\big),
              \quad Z \sim N(0,1),

    for a record uniform on two values whose sensitivity vector has Mahalanobis length² ``q``
    (theory page, "Budgets and their bounds"). Increasing from 0 (slope 1/8) to
    log 2. Vectorised.
    """
    q = real_array("bound", bound, low=0.0, low_open=False)
    flat = np.array([mi_binary_scalar(float(v)) for v in q.ravel()], dtype=np.float64)
    return finish(flat.reshape(q.shape))


@overload
def mi_binary_inverse(kappa: float) -> float: ...


@overload
def mi_binary_inverse(kappa: ArrayLike) -> FloatOrArray: ...


def mi_binary_inverse(kappa: ArrayLike) -> FloatOrArray:
    r"""Largest ``q`` with :math:`\psi(q) \le \kappa` (safe side), ``0 < kappa < log 2``.

    Ill-conditioned as κ → log 2 (ψ is flat there). Vectorised.
    """
    k = real_array("kappa", kappa, low=0.0, high=_LOG2)
    flat = np.array([mi_binary_inverse_scalar(float(v)) for v in k.ravel()], dtype=np.float64)
    return finish(flat.reshape(k.shape))


# --------------------------------------------------------------------------------------------
# Budgets
# --------------------------------------------------------------------------------------------


class Budget(ABC):
    """A privacy guarantee for a Gaussian mechanism (abstract base; immutable subclasses).

    Subclasses state their math and neighbouring relation and implement
    :meth:`mahalanobis_bound` (the largest admissible ``q = sup_s s^T Σ^{-1} s``) and
    :meth:`describe`.
    """

    @abstractmethod
    def mahalanobis_bound(self) -> float:
        """Largest ``q`` such that a Gaussian mechanism with ``sup_s s^T Σ^{-1} s <= q`` meets
        this budget (never above the exact value)."""

    @abstractmethod
    def describe(self) -> str:
        """A short human-readable statement of the budget."""

    @abstractmethod
    def admits(self, bound: float) -> bool:
        """Whether a Gaussian mechanism with Mahalanobis bound ``bound`` meets this budget.

        Checked directly on the budget's own criterion (exact rational arithmetic for RDP, zCDP
        and GDP; the forward Balle–Wang formula with the same rounding margin as the inverse for
        (ε, δ); ψ with the same margin for MI-DP), so ``admits(mahalanobis_bound())`` holds.
        """

    def __str__(self) -> str:
        return self.describe()


def _as_orders(name: str, value: ArrayLike, *, low: float, low_open: bool) -> tuple[float, ...]:
    arr = real_array(name, value, low=low, low_open=low_open)
    if arr.ndim > 1:
        raise InvalidParameterError(name, value, f"must be a scalar or 1-D, got shape {arr.shape}")
    return tuple(float(v) for v in np.atleast_1d(arr))


@dataclass(frozen=True, init=False)
class RDP(Budget):
    r"""Rényi differential privacy at one or several orders.

    The mechanism must satisfy :math:`D_{\alpha_i}(M(D)\,\|\,M(D')) \le \varepsilon_i` for every
    given order and every neighbouring pair (Mironov 2017, Def. 4). For a Gaussian mechanism
    :math:`D_\alpha = \alpha\, s^\top\Sigma^{-1}s / 2` (Mironov, Proposition 7), so

    .. math:: q = \min_i 2\varepsilon_i / \alpha_i .

    Parameters
    ----------
    alpha : float or array_like
        Order(s), finite and > 1.
    epsilon : float or array_like
        ε at each order (> 0), broadcast against ``alpha``.
    """

    alpha: tuple[float, ...]
    epsilon: tuple[float, ...]

    def __init__(self, alpha: ArrayLike, epsilon: ArrayLike) -> None:
        a = _as_orders("alpha", alpha, low=1.0, low_open=True)
        e = _as_orders("epsilon", epsilon, low=0.0, low_open=True)
        if len(a) != len(e):
            if len(a) == 1:
                a = a * len(e)
            elif len(e) == 1:
                e = e * len(a)
            else:
                raise InvalidParameterError(
                    "alpha, epsilon", (alpha, epsilon), "must have the same length (or one value)"
                )
        object.__setattr__(self, "alpha", a)
        object.__setattr__(self, "epsilon", e)

    def mahalanobis_bound(self) -> float:
        exact = min(
            2 * Fraction(e) / Fraction(a) for a, e in zip(self.alpha, self.epsilon, strict=True)
        )
        return _bound_from_exact(exact, "epsilon", self.epsilon, "min 2 epsilon / alpha")

    def admits(self, bound: float) -> bool:
        q = Fraction(bound)
        return all(
            Fraction(a) * q <= 2 * Fraction(e)
            for a, e in zip(self.alpha, self.epsilon, strict=True)
        )

    def describe(self) -> str:
        pairs = ", ".join(
            f"ε({_fmt(a)})={_fmt(e)}" for a, e in zip(self.alpha, self.epsilon, strict=True)
        )
        return f"RDP[{pairs}]"


@dataclass(frozen=True)
class ZCDP(Budget):
    r"""ρ-zero-concentrated DP (Bun & Steinke 2016): :math:`D_\alpha \le \rho\alpha` for all α > 1.

    A Gaussian mechanism has :math:`D_\alpha = \alpha q/2`, so :math:`q = 2\rho` (exact).
    The neighbouring relation is the one of the sensitivity set.
    """

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", as_scalar("rho", self.rho, low=0.0))

    def mahalanobis_bound(self) -> float:
        return _bound_from_exact(2 * Fraction(self.rho), "rho", self.rho, "2 rho")

    def admits(self, bound: float) -> bool:
        return Fraction(bound) <= 2 * Fraction(self.rho)

    def describe(self) -> str:
        return f"{_fmt(self.rho)}-zCDP"


@dataclass(frozen=True)
class GDP(Budget):
    r"""μ-Gaussian DP (Dong, Roth & Su 2022): every test has trade-off at least :math:`G_\mu`.

    A Gaussian mechanism is exactly :math:`\sqrt q`-GDP, so :math:`q = \mu^2` (never rounded up).
    The neighbouring relation is the one of the sensitivity set.
    """

    mu: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", as_scalar("mu", self.mu, low=0.0))

    def mahalanobis_bound(self) -> float:
        return _bound_from_exact(Fraction(self.mu) ** 2, "mu", self.mu, "mu^2")

    def admits(self, bound: float) -> bool:
        return Fraction(bound) <= Fraction(self.mu) ** 2

    def describe(self) -> str:
        return f"{_fmt(self.mu)}-GDP"


@dataclass(frozen=True)
class ApproxDP(Budget):
    r"""(ε, δ)-differential privacy: :math:`P[M(D)\in E] \le e^\varepsilon P[M(D')\in E] + \delta`.

    For a Gaussian mechanism this holds iff :math:`h_\varepsilon(q) \le \delta` with the exact
    Balle–Wang curve :math:`h_\varepsilon(q) = \Phi(\sqrt q/2 - \varepsilon/\sqrt q) -
    e^\varepsilon\Phi(-\sqrt q/2 - \varepsilon/\sqrt q)` (Balle & Wang 2018, Thm. 8), so the
    bound is :math:`q^*(\varepsilon, \delta) = \sup\{q : h_\varepsilon(q) \le \delta\}`, solved
    in log form and moved to the safe side (re-checked with a rounding margin). The neighbouring
    relation is the one of the sensitivity set.

    Parameters
    ----------
    epsilon : float
        ε >= 0, finite.
    delta : float
        δ in (0, 1).

    Raises
    ------
    InfeasibleError
        From :meth:`mahalanobis_bound` when the bound underflows to 0 (e.g. ε = 0, δ = 1e-200).
    BoundOverflowError
        From :meth:`mahalanobis_bound` when it is beyond the largest double (ε near 1e308).

    See :func:`approx_dp_bound` for whole arrays of (ε, δ) at once.
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "epsilon", as_scalar("epsilon", self.epsilon, low=0.0, low_open=False)
        )
        object.__setattr__(self, "delta", as_scalar("delta", self.delta, low=0.0, high=1.0))

    def mahalanobis_bound(self) -> float:
        return float(approx_dp_bound(self.epsilon, self.delta))

    def admits(self, bound: float) -> bool:
        return bool(np.all(_approx_admits(np.asarray(self.epsilon), np.asarray(self.delta),
                                          np.asarray(float(bound)))))

    def describe(self) -> str:
        return f"({_fmt(self.epsilon)}, {self.delta:.3g})-DP"


def _approx_admits(
    epsilon: NDArray[np.float64], delta: NDArray[np.float64], bound: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """δ(ε; √q) <= δ with the rounding margin, √q rounded up (both on the safe side)."""
    target = np.log(delta)
    goal = target - bw.safety_margin(target)
    return np.asarray(bw.log_delta_mu(epsilon, sqrt_up(bound)) <= goal)


@overload
def approx_dp_bound(epsilon: float, delta: float) -> float: ...


@overload
def approx_dp_bound(epsilon: ArrayLike, delta: ArrayLike) -> FloatOrArray: ...


def approx_dp_bound(epsilon: ArrayLike, delta: ArrayLike) -> FloatOrArray:
    r"""Largest Mahalanobis bound :math:`q` meeting (ε, δ)-DP, for whole arrays of (ε, δ).

    The vectorised form of ``ApproxDP(epsilon, delta).mahalanobis_bound()``:
    :math:`q^*(\varepsilon,\delta) = \sup\{q : \delta(\varepsilon;\sqrt q) \le \delta\}` on the
    exact curve of Balle & Wang ("Improving the Gaussian Mechanism for Differential Privacy",
    Theorem 8). μ* is found by one safeguarded Newton iteration over the whole array (no Python
    loop per element), squared rounding down, and every element is checked on the forward
    formula at √q rounded up, with a rounding margin, and stepped down until it passes. Where √q
    rounds up to μ* itself (every μ* between 1e-137 and 1e150) that check is the one the
    inverse already made at μ*; elsewhere it is evaluated again.

    Parameters
    ----------
    epsilon : float or array_like
        ε >= 0, finite.
    delta : float or array_like
        δ in (0, 1). Broadcast against ``epsilon``.

    Returns
    -------
    float or ndarray
        q > 0, never above the exact value.

    Raises
    ------
    InfeasibleError
        If some q underflows to 0 (no finite noise meets that budget).
    BoundOverflowError
        If some q is beyond the largest double.

    Examples
    --------
    >>> round(approx_dp_bound(1.0, 1e-5), 12)
    0.071851404655
    """
    e = real_array("epsilon", epsilon, low=0.0, low_open=False)
    d = real_array("delta", delta, low=0.0, high=1.0)
    e, d = broadcast(epsilon=e, delta=d)
    mu = bw.max_mu(e, np.log(d))
    over = mu > _SQRT_DBL_MAX
    if np.any(over):
        i = int(np.flatnonzero(over.ravel())[0])
        raise BoundOverflowError(
            "epsilon",
            float(e.ravel()[i]),
            f"with delta={float(d.ravel()[i])!r} the Mahalanobis bound is beyond the largest "
            "double (1.8e308): the budget constrains no representable noise",
        )
    q = square_down(mu)
    flat_q, flat_e, flat_d = q.ravel(), e.ravel(), d.ravel()
    # max_mu re-evaluated the forward formula at mu itself (against the same target and margin):
    # where the check's sqrt_up(q) gives back that mu, that evaluation is the check; re-evaluate
    # only the others (few: q is the largest double <= mu^2, so sqrt_up(q) is almost always mu)
    idx = np.flatnonzero(sqrt_up(flat_q) != mu.ravel())
    idx = idx[~_approx_admits(flat_e[idx], flat_d[idx], flat_q[idx])]
    rel = 2.0**-52
    while idx.size and rel < 1.0:
        flat_q[idx] = flat_q[idx] * (1.0 - rel)
        idx = idx[~_approx_admits(flat_e[idx], flat_d[idx], flat_q[idx])]
        rel *= 4.0
    if idx.size:  # pragma: no cover - the Newton answer passed the same check before squaring
        raise InfeasibleError("could not move the (epsilon, delta) bound to the safe side")
    zero = ~(flat_q > 0.0)
    if np.any(zero):
        i = int(np.flatnonzero(zero)[0])
        raise InfeasibleError(
            f"({float(flat_e[i])!r}, {float(flat_d[i])!r})-DP: the admissible Mahalanobis bound "
            "underflows to 0 in double precision (no finite noise meets it); relax epsilon or "
            "delta"
        )
    return finish(flat_q.reshape(q.shape))



@dataclass(frozen=True)
class MIDP(Budget):
    r"""κ-mutual-information DP for binary records (theory page, "Budgets and their bounds").

    For every record that takes one of two values (uniform prior), the mutual information between
    it and the output is at most κ nats. For a Gaussian mechanism this is
    :math:`\psi(q) \le \kappa`, with ψ of :func:`mi_binary`, where ``q`` is the sup over the
    **replacement** set (the two values of the record). Hence :math:`q = \psi^{-1}(\kappa)` when the
    sensitivity set is the replacement set. When the caller's sensitivity set is the
    **add/remove** set, the bound it must meet is :func:`dpopt.relation.add_remove_bound` of
    :math:`\psi^{-1}(\kappa)` (a quarter of it: the replacement sup is at most 4 times the
    add/remove sup).

    Parameters
    ----------
    kappa : float
        κ in (0, log 2) nats.
    relation : {"replacement", "add_remove"} or NeighbouringRelation
        The relation that generated the caller's sensitivity set.
    """

    kappa: float
    relation: NeighbouringRelation = NeighbouringRelation.REPLACEMENT

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", as_scalar("kappa", self.kappa, low=0.0, high=_LOG2))
        object.__setattr__(self, "relation", as_relation(self.relation))

    def mahalanobis_bound(self) -> float:
        q = mi_binary_inverse_scalar(self.kappa)
        if self.relation is NeighbouringRelation.REPLACEMENT:
            return q
        return add_remove_bound(q, NeighbouringRelation.REPLACEMENT)

    def admits(self, bound: float) -> bool:
        q = float(bound)
        if self.relation is NeighbouringRelation.ADD_REMOVE:
            q = replacement_sup(q, NeighbouringRelation.REPLACEMENT)
        return mi_binary_scalar(q) <= self.kappa * (1.0 - _MI_MARGIN)

    def describe(self) -> str:
        return f"{_fmt(self.kappa)}-MI-DP (binary records, {self.relation.value})"


@dataclass(frozen=True, init=False)
class AllOf(Budget):
    """All of several budgets at once: the bound is the minimum of their bounds (tightest).

    Members whose bound is beyond the double range (:class:`BoundOverflowError`) are vacuous and
    skipped when another member gives a finite bound.
    """

    budgets: tuple[Budget, ...]

    def __init__(self, *budgets: Budget) -> None:
        if not budgets:
            raise InvalidParameterError("budgets", budgets, "needs at least one budget")
        for i, b in enumerate(budgets):
            if not isinstance(b, Budget):
                raise InvalidTypeError(f"budgets[{i}]", b, "a Budget")
        object.__setattr__(self, "budgets", tuple(budgets))

    def mahalanobis_bound(self) -> float:
        bounds: list[float] = []
        overflow: BoundOverflowError | None = None
        for b in self.budgets:
            try:
                bounds.append(b.mahalanobis_bound())
            except BoundOverflowError as exc:  # vacuous next to any finite bound
                overflow = exc
        if bounds:
            return min(bounds)
        if overflow is not None:
            raise overflow
        raise InvalidParameterError("budgets", self.budgets, "needs at least one budget")

    def admits(self, bound: float) -> bool:
        return all(b.admits(bound) for b in self.budgets)

    def describe(self) -> str:
        return " and ".join(b.describe() for b in self.budgets)


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------

_KINDS: dict[str, tuple[str, ...]] = {
    "rdp": ("alpha", "epsilon"),
    "zcdp": ("rho",),
    "gdp": ("mu",),
    "approx": ("epsilon", "delta"),
    "midp": ("kappa", "relation"),
}
_ALIASES = {"dp": "approx", "approxdp": "approx", "eps-delta": "approx", "mi": "midp"}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _number(spec: str, key: str, text: str) -> float:
    text = text.strip()
    if not _NUMBER.match(text):
        raise InvalidParameterError("spec", spec, f"{key}={text!r} is not a finite number")
    return float(text)


def _parse_one(spec: str, part: str) -> Budget:
    from dpopt.spec import parse_spec

    try:
        kind, fields = parse_spec(part)
    except InvalidParameterError as exc:
        raise InvalidParameterError("spec", spec, exc.requirement) from None
    kind = _ALIASES.get(kind, kind)
    if kind not in _KINDS:
        raise InvalidParameterError(
            "spec", spec, f"must look like 'kind:key=value,...' with kind in {sorted(_KINDS)}"
        )
    allowed = _KINDS[kind]
    unknown = [k for k in fields if k not in allowed]
    if unknown:
        raise InvalidParameterError(
            "spec", spec, f"unknown field {unknown[0]!r} for {kind} (fields: {', '.join(allowed)})"
        )
    required = tuple(k for k in allowed if k != "relation")
    missing = [k for k in required if k not in fields]
    if missing:
        raise InvalidParameterError("spec", spec, f"{kind} needs {', '.join(missing)}")
    try:
        if kind == "rdp":
            alphas = [_number(spec, "alpha", t) for t in fields["alpha"].split(";")]
            epss = [_number(spec, "epsilon", t) for t in fields["epsilon"].split(";")]
            return RDP(alphas, epss)
        if kind == "zcdp":
            return ZCDP(_number(spec, "rho", fields["rho"]))
        if kind == "gdp":
            return GDP(_number(spec, "mu", fields["mu"]))
        if kind == "approx":
            return ApproxDP(
                _number(spec, "epsilon", fields["epsilon"]),
                _number(spec, "delta", fields["delta"]),
            )
        relation = as_relation(fields.get("relation", "replacement"), name=f"{spec}: relation")
        return MIDP(_number(spec, "kappa", fields["kappa"]), relation)
    except InvalidParameterError as exc:
        if exc.name == "spec":
            raise
        raise InvalidParameterError("spec", spec, f"{exc}") from None


def parse_budget(spec: str) -> Budget:
    """Parse a budget string (used by the CLI).

    Grammar: ``kind:key=value,key=value``; several orders of an RDP budget are separated by
    ``;``; several budgets joined with ``&`` give :class:`AllOf`. Kinds: ``rdp``
    (``alpha``, ``epsilon``), ``zcdp`` (``rho``), ``gdp`` (``mu``), ``approx`` (alias ``dp``;
    ``epsilon``, ``delta``), ``midp`` (``kappa``, optional ``relation=replacement|add_remove``).

    Examples
    --------
    >>> parse_budget("approx:epsilon=1,delta=1e-6").describe()
    '(1, 1e-06)-DP'
    >>> parse_budget("rdp:alpha=2;4;8,epsilon=1;1.5;2").mahalanobis_bound()
    0.5

    Raises
    ------
    InvalidParameterError
        Naming ``spec`` (and echoing it) when the string is malformed or a value is invalid.
    """
    if not isinstance(spec, str):
        raise InvalidTypeError("spec", spec, "a string such as 'gdp:mu=1'")
    parts = spec.split("&")
    if any(not p.strip() for p in parts):
        raise InvalidParameterError("spec", spec, "empty budget")
    budgets = [_parse_one(spec, p.strip()) for p in parts]
    return budgets[0] if len(budgets) == 1 else AllOf(*budgets)


# --------------------------------------------------------------------------------------------
# The reverse: from a bound to every notion
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivacyReport:
    r"""Every guarantee of a Gaussian mechanism with Mahalanobis bound ``q``.

    Attributes
    ----------
    bound : float
        :math:`q = \sup_s s^\top\Sigma^{-1}s` over the sensitivity set (its neighbouring relation
        is the one every statement refers to; ``mi_nats`` assumes it is the replacement set of
        binary records).
    """

    bound: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", as_scalar("bound", self.bound, low=0.0, low_open=False))

    @property
    def zcdp_rho(self) -> float:
        """zCDP parameter :math:`\\rho = q/2` (rounded up: exact unless q is subnormal)."""
        return round_up(Fraction(self.bound) / 2)

    @property
    def gdp_mu(self) -> float:
        """GDP parameter :math:`\\mu = \\sqrt q` (rounded up, the safe direction)."""
        return sqrt_up(self.bound)

    @property
    def mi_nats(self) -> float:
        """Mutual information :math:`\\psi(q)` for a binary record (replacement set), nats.

        Rounded up by a relative 2e-11 (covering the quadrature error); at most the smallest
        double above log 2 (ψ < log 2 always).
        """
        psi = mi_binary_scalar(self.bound)
        cap = next_up(_LOG2)
        return min(psi * (1.0 + 2.0 * _MI_MARGIN), cap) if psi > 0.0 else 0.0

    @overload
    def rdp_epsilon(self, alpha: float) -> float: ...

    @overload
    def rdp_epsilon(self, alpha: ArrayLike) -> FloatOrArray: ...

    def rdp_epsilon(self, alpha: ArrayLike) -> FloatOrArray:
        """RDP curve :math:`\\varepsilon_\\alpha = \\alpha q/2` for order(s) α > 1 (rounded up).

        Raises
        ------
        InvalidParameterError
            Naming ``alpha`` when some :math:`\\alpha q/2` is beyond the largest double.
        """
        a = real_array("alpha", alpha, low=1.0)
        with np.errstate(over="ignore"):
            out = a * self.bound / 2.0
        if not np.all(np.isfinite(out)):
            bad = float(a.ravel()[int(np.flatnonzero(~np.isfinite(out.ravel()))[0])])
            raise InvalidParameterError(
                "alpha",
                bad,
                f"epsilon_alpha = alpha * q / 2 with q={self.bound!r} is beyond the largest double",
            )
        q = Fraction(self.bound)
        flat = out.reshape(-1)
        for i, (ai, vi) in enumerate(zip(a.reshape(-1), flat, strict=True)):
            exact = Fraction(float(ai)) * q

            def covers(v: float, exact: Fraction = exact) -> bool:
                return Fraction(v) * 2 >= exact

            flat[i] = step_up_until(float(vi), covers)  # round up (safe side)
        return finish(flat.reshape(out.shape))

    def _mu_up(self) -> NDArray[np.float64]:
        return sqrt_up(np.asarray(self.bound, dtype=np.float64))

    @overload
    def delta(self, epsilon: float) -> float: ...

    @overload
    def delta(self, epsilon: ArrayLike) -> FloatOrArray: ...

    def delta(self, epsilon: ArrayLike) -> FloatOrArray:
        """Exact δ(ε) on the Balle–Wang curve (arrays; underflows to 0 below ~1e-308).

        Evaluated at √q rounded up (a δ never below the exact one, up to the formula's ~1e-14
        relative rounding).
        """
        e = real_array("epsilon", epsilon, low=0.0, low_open=False)
        return finish(np.exp(bw.log_delta_mu(e, self._mu_up())))

    @overload
    def log_delta(self, epsilon: float) -> float: ...

    @overload
    def log_delta(self, epsilon: ArrayLike) -> FloatOrArray: ...

    def log_delta(self, epsilon: ArrayLike) -> FloatOrArray:
        """Natural log of :meth:`delta`, valid far below the double range."""
        e = real_array("epsilon", epsilon, low=0.0, low_open=False)
        return finish(bw.log_delta_mu(e, self._mu_up()))

    @overload
    def epsilon(self, delta: float) -> float: ...

    @overload
    def epsilon(self, delta: ArrayLike) -> FloatOrArray: ...

    def epsilon(self, delta: ArrayLike) -> FloatOrArray:
        """Smallest ε with δ(ε) <= ``delta`` on the exact curve (safe side; vectorised).

        Raises
        ------
        InfeasibleError
            If no finite double ε meets ``delta`` (only for q beyond ~1e300 with a tiny δ).
        """
        d = real_array("delta", delta, low=0.0, high=1.0)
        eps, bad = bw.min_epsilon_mu(self._mu_up(), np.log(d))
        if np.any(bad):
            raise InfeasibleError(
                f"q={self.bound!r}: no finite epsilon meets delta={delta!r} in double precision"
            )
        return finish(eps)

    def satisfies(self, budget: Budget) -> bool:
        """Whether the mechanism meets ``budget`` (:meth:`Budget.admits` of this bound).

        Consistent with the budget's own bound: ``privacy_report(b.mahalanobis_bound())
        .satisfies(b)`` holds, and every value this report states (``gdp_mu``, ``zcdp_rho``,
        ``rdp_epsilon``, ``epsilon``, ``mi_nats``) is rounded so that the budget built from it
        is satisfied.
        """
        if not isinstance(budget, Budget):
            raise InvalidTypeError("budget", budget, "a Budget")
        return bool(budget.admits(self.bound))

    def to_dict(self, *, alphas: Sequence[float] | None = None,
                deltas: Sequence[float] | None = None,
                epsilons: Sequence[float] | None = None) -> dict[str, JSONValue]:
        """The report as JSON-ready data, in the one shape every dpopt report uses.

        Keys ``schema`` (``"dpopt.privacy-report/1"``), ``approximate``,
        ``mahalanobis_bound``, ``zcdp_rho``, ``gdp_mu``, ``rdp`` (a list of
        ``{"alpha", "epsilon"}``), ``epsilon_for_delta`` (``{"delta", "epsilon"}``),
        ``delta_for_epsilon`` (``{"epsilon", "delta"}``) and ``mi_nats``; a value beyond
        double precision is ``None``. See :mod:`dpopt.accounting.report_json`.
        """
        from dpopt.accounting.report_json import report_dict

        return report_dict(self, alphas=alphas, deltas=deltas, epsilons=epsilons)

    def describe(self) -> str:
        """One line: q, ρ, μ and ε at δ = 1e-6."""
        return (
            f"q={_fmt(self.bound)}: {_fmt(self.zcdp_rho)}-zCDP, {_fmt(self.gdp_mu)}-GDP, "
            f"({_fmt(float(self.epsilon(1e-6)))}, 1e-06)-DP"
        )


def privacy_report(bound: float) -> PrivacyReport:
    """The :class:`PrivacyReport` of a Gaussian mechanism with Mahalanobis bound ``bound`` >= 0.

    Examples
    --------
    >>> rep = privacy_report(1.0)
    >>> rep.gdp_mu, rep.zcdp_rho, round(rep.epsilon(1e-5), 9)
    (1.0, 0.5, 4.377178096)
    >>> rep.satisfies(ApproxDP(epsilon=4.4, delta=1e-5))
    True
    """
    return PrivacyReport(as_scalar("bound", bound, low=0.0, low_open=False))
