r"""Coupling certificates for Rényi Pufferfish calibrations.

A claim "the noise scale :math:`b` gives :math:`(\alpha, \varepsilon)`-RPP for the secret pair
:math:`(P, Q)`" is certified by a coupling :math:`\pi` of :math:`P` and :math:`Q` with

.. math::

    \log \sum_{ij} \pi_{ij} M_\alpha(x_i - y_j; b) \le (\alpha - 1)\varepsilon,

because for *any* coupling :math:`\int (P*N)^\alpha (Q*N)^{1-\alpha} \le \sum \pi_{ij} M_\alpha`
(joint convexity of :math:`(u, v) \mapsto u^\alpha v^{1-\alpha}`; Ding, Yang, Zhang,
"α-Wasserstein Mechanism for Rényi Pufferfish Privacy"). Nothing here trusts the solver that
produced :math:`\pi`; every step is exact or rounded to the side of *more* noise:

1. **The laws.** Probabilities are binary floating-point fractions, so they are exact rationals.
   The law the claim is about is :math:`\hat p_i = p_i / \sum_k p_k` with the sum taken exactly
   (Python integers), likewise :math:`\hat q`; no atom is ever dropped, however small.
2. **The plan.** Masses are exact rationals: either :class:`ExactMasses` (integer numerators over
   one integer denominator, as produced by :mod:`solvers.transport`) or floats (taken exactly as
   the binary fractions they are). The plan is normalised by its own exact total :math:`W`.
3. **Residual accounting.** With exact integer arithmetic the certificate computes the excess
   :math:`E = \sum_i (r_i/W - \hat p_i)^+ + \sum_j (c_j/W - \hat q_j)^+` of the plan's marginals
   over the laws. Shrinking the rows and then the columns with excess (which only removes mass)
   and adding back a plan of total mass at most :math:`E` between the rows and columns left short
   gives an *exact* coupling :math:`\pi^*` (Altschuler, Weed, Rigollet, Algorithm 2). The rows
   left short lie in :math:`R_d` = {rows short of :math:`\hat p`} ∪ {rows meeting a column with
   excess}, the columns in :math:`C_d` likewise, so with :math:`C_{\max} = \max_{R_d\times C_d}
   C_{ij}`

   .. math:: \sum \pi^*_{ij} C_{ij} - 1 \le \sum_k \frac{w_k}{W}(C_k - 1)^+ + E\,(C_{\max}-1)^+ .

   When :math:`E = 0` (an exact coupling) the bound is the exact value
   :math:`\sum_k \pi_k (C_k - 1)`, evaluated with each mass rounded outwards. Plans whose excess
   exceeds ``marginal_tol`` are not couplings and fail.
4. **The value** :math:`\log(1 + S)` is computed with relative precision (``log1p`` of a sum of
   positive terms, in log domain when large) and then rounded up by a bound on the floating-point
   error, so the certified value is never below the true one (the log-costs themselves are the
   caller's: the calibration evaluates them afresh and keeps a relative margin of 1e-11).
   For :math:`\alpha = \infty` (``aggregate="max"``) the value is the largest log-cost on the
   support of :math:`\pi^*` (including :math:`C_{\max}` when :math:`E > 0`).
5. **Pure privacy** (:func:`check_pure_coupling`). For noise with density
   :math:`\propto e^{-\lVert z\rVert/b}` the log-cost is :math:`\lVert x_i - y_j\rVert / b`; it is
   never evaluated as a plain float quotient (which can land an ulp below the exact one, or far
   below when :math:`x_i - y_j` itself rounds). Each difference is taken exactly (Knuth's
   two-sum gives the rounding error of :math:`x_i - y_j`, so a shared offset of 1e15 costs
   nothing), the norm is rounded up (:func:`distance_upper`) and the quotient too
   (:func:`certificates.rounding.div_up`); :func:`least_pure_scale` returns the least double
   scale this arithmetic proves, so a calibration and its check agree to the ulp.

Optionally, potentials :math:`u, v` with :math:`u_i + v_j \le e^{\log C_{ij} - s}` (after an
explicit repair :math:`u \leftarrow u - \max(0, \max_{ij}(u_i + v_j - e^{\log C_{ij}-s}))`) give
the lower bound :math:`e^{s}(\hat p^\top u + \hat q^\top v) \le \min_\pi \sum \pi C`, hence an
optimality gap. This module imports numpy and scipy only.

References
----------
1. Altschuler, Weed, Rigollet, "Near-linear time approximation algorithms for optimal transport
   via Sinkhorn iteration", NeurIPS 2017, Algorithm 2.
2. Ding, Yang, Zhang, "α-Wasserstein Mechanism for Rényi Pufferfish Privacy".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from certificates.errors import CertificateError, InvalidParameterError
from certificates.rounding import div_up, next_up, round_up, step_up_until
from certificates.validate import as_float_array, as_scalar

__all__ = [
    "CouplingCertificate",
    "ExactMasses",
    "check_coupling",
    "check_pure_coupling",
    "distance_upper",
    "dyadic_integers",
    "least_pure_scale",
    "log_average",
    "log_value_upper",
    "perturbation_penalty",
    "pure_value_upper",
    "relative_deviation",
    "round_to_marginals",
]

LogCost = Callable[[NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]]

#: Largest number of (row, column) pairs the residual accounting (or the approximate repair of
#: :func:`round_to_marginals`) may evaluate.
MAX_REPAIR_PIECES = 2_000_000

_EPS = float(np.finfo(np.float64).eps)
_TINY = 5e-324


def dyadic_integers(values: ArrayLike) -> tuple[list[int], int]:
    r"""Integers :math:`N_i` and an exponent :math:`K` with ``values[i]`` :math:`= N_i 2^{-K}`.

    Every finite double is a binary fraction, so this is exact (Python integers have no size
    limit; masses near 1e-300 simply give integers of ~1100 bits).

    Examples
    --------
    >>> dyadic_integers([0.5, 0.25, 0.75])
    ([2, 1, 3], 2)
    """
    ratios = [float(v).as_integer_ratio() for v in np.asarray(values, dtype=np.float64).ravel()]
    if not ratios:
        return [], 0
    k = max(d.bit_length() - 1 for _, d in ratios)
    return [num << (k - (den.bit_length() - 1)) for num, den in ratios], k


def _round(num: int, den: int, direction: int) -> float:
    """``num / den`` rounded to nearest (0), up (+1) or down (-1); num >= 0, den > 0."""
    f = num / den  # CPython's int true division is correctly rounded
    if direction == 0 or num == 0:
        return f
    a, b = f.as_integer_ratio()
    if direction > 0 and a * den < num * b:
        return math.nextafter(f, math.inf)
    if direction < 0 and a * den > num * b:
        return math.nextafter(f, 0.0)
    return f


@dataclass(frozen=True)
class ExactMasses:
    r"""Exact plan masses :math:`\pi_k = N_k / D` (non-negative integers over one integer).

    Attributes
    ----------
    numerators : tuple of int
        :math:`N_k \ge 0`, one per support piece.
    denominator : int
        :math:`D > 0`.
    """

    numerators: tuple[int, ...]
    denominator: int

    def __post_init__(self) -> None:
        nums = tuple(self.numerators)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in nums):
            raise InvalidParameterError("numerators", "...", "must be non-negative Python ints")
        den = self.denominator
        if not isinstance(den, int) or isinstance(den, bool) or den <= 0:
            raise InvalidParameterError("denominator", den, "must be a positive Python int")
        object.__setattr__(self, "numerators", nums)

    def rounded(self, direction: int = 0) -> NDArray[np.float64]:
        """Masses as floats rounded to nearest (0), upwards (+1) or downwards (-1)."""
        d = self.denominator
        return np.array([_round(v, d, direction) for v in self.numerators], dtype=np.float64)

    def fraction(self, k: int) -> Fraction:
        """The exact mass of piece ``k``."""
        return Fraction(self.numerators[k], self.denominator)


@dataclass(frozen=True)
class CouplingCertificate:
    r"""The outcome of :func:`check_coupling`.

    Attributes
    ----------
    log_value : float
        Upper bound on :math:`\log\sum\pi^*_{ij}C_{ij}` (``mean``) or
        :math:`\max_{\operatorname{supp}\pi^*}\log C` (``max``) for an exact coupling
        :math:`\pi^*` built from the plan (see the module docstring).
    threshold : float
        The bound the value must not exceed, e.g. :math:`(\alpha-1)\varepsilon`.
    aggregate : str
        ``"mean"`` or ``"max"``.
    marginal_error : float
        Largest absolute error of the (normalised) plan's marginals against the exact laws.
    repaired : bool
        Whether a residual (:math:`E > 0`) had to be accounted for.
    residual_mass : float
        :math:`E` rounded up (0 for an exact coupling).
    residual_log_cost : float
        :math:`\log C_{\max}` over the pairs the residual could meet (``-inf`` when :math:`E=0`).
    relative_deviation : float
        :math:`\delta`: largest relative deviation of the plan's marginals from the laws.
    log_lower : float or None
        Lower bound on :math:`\log\min_\pi\sum\pi C` from the potentials (``-inf`` if the bound
        is not positive; ``None`` without potentials).
    gap : float or None
        ``log_value - log_lower``.
    certified : bool
        The plan is (within ``marginal_tol``) a coupling and ``log_value <= threshold``.
    message : str
    rows, cols, mass : ndarray
        The pieces with positive mass that were scored (masses rounded to nearest).
    """

    log_value: float
    threshold: float
    aggregate: str
    marginal_error: float
    repaired: bool
    log_lower: float | None
    gap: float | None
    certified: bool
    message: str
    rows: NDArray[np.intp]
    cols: NDArray[np.intp]
    mass: NDArray[np.float64]
    residual_mass: float = 0.0
    residual_log_cost: float = float("-inf")
    relative_deviation: float = 0.0

    @property
    def margin(self) -> float:
        """``threshold - log_value`` (non-negative when the cost condition holds)."""
        return self.threshold - self.log_value


def log_average(log_cost: NDArray[np.float64], mass: NDArray[np.float64]) -> float:
    r""":math:`\log\sum_k w_k e^{c_k}` with full relative precision when it is small.

    When every :math:`c_k \le 1` the value is computed as
    :math:`\operatorname{log1p}\big(\sum_k w_k - 1 + \sum_k w_k\,\operatorname{expm1}(c_k)\big)`
    with one exactly rounded ``math.fsum`` (so thresholds :math:`(\alpha-1)\varepsilon` near 0
    are compared without the ~1e-16 absolute error of a log-sum-exp); otherwise by log-sum-exp.
    (A plain floating-point evaluation; :func:`check_coupling` uses its own rigorous bound.)
    """
    if mass.size == 0:
        return float("-inf")
    if float(np.max(log_cost)) <= 1.0:
        terms = np.concatenate([mass, [-1.0], mass * np.expm1(log_cost)])
        excess = math.fsum(terms.tolist())
        return float(np.log1p(excess)) if excess > -1.0 else float("-inf")
    return float(logsumexp(log_cost, b=mass))


def _log_expm1(c: NDArray[np.float64]) -> NDArray[np.float64]:
    """log(e^c - 1) for c > 0 without overflow."""
    with np.errstate(divide="ignore"):
        return np.where(c > 30.0, c + np.log1p(-np.exp(-c)), np.log(np.expm1(np.minimum(c, 30.0))))


def log_value_upper(
    lc: NDArray[np.float64],
    mass_up: NDArray[np.float64],
    mass_down: NDArray[np.float64],
    residual: float = 0.0,
    residual_log_cost: float = float("-inf"),
) -> float:
    r"""Rigorous upper bound on :math:`\log(1 + S)`,
    :math:`S = \sum_k \pi_k (e^{c_k}-1) + E (e^{c_{\max}}-1)^+`, for exact masses
    :math:`\pi_k \in [` ``mass_down``, ``mass_up`` :math:`]` summing to 1 when :math:`E = 0`.

    With :math:`E > 0` negative terms are dropped (see the module docstring). Terms are summed
    by ``math.fsum`` (each product has relative error at most :math:`2u`) when no log-cost
    exceeds 700, else in log domain with an absolute error bound on the log-sum-exp; the result
    is then moved up by that bound.
    """
    if np.isnan(lc).any() or np.isnan(residual_log_cost):
        raise InvalidParameterError("log_cost", "NaN", "must not be NaN")
    if np.isposinf(lc).any() or (residual > 0.0 and np.isposinf(residual_log_cost)):
        return float("inf")
    pos = lc > 0.0
    neg = ~pos
    lpos = lc[pos]
    wpos = mass_up[pos]
    res_term = residual > 0.0 and residual_log_cost > 0.0
    s_neg = 0.0
    if residual == 0.0 and neg.any():
        s_neg = math.fsum((mass_down[neg] * -np.expm1(lc[neg])).tolist())
        # each product rounded: shrink (a smaller s_neg is safe) by a relative 4u and, for the
        # products that underflow (where a relative margin vanishes), half an ulp of the
        # subnormals each
        s_neg = max(0.0, s_neg * (1.0 - 4.0 * _EPS) - int(neg.sum()) * _TINY)
    k = int(pos.sum()) + int(res_term) + 16
    top = max(float(np.max(lpos)) if lpos.size else 0.0, residual_log_cost if res_term else 0.0)
    if top < 700.0:
        terms = (wpos * np.expm1(lpos)).tolist()
        if res_term:
            terms.append(residual * math.expm1(residual_log_cost))
        s_pos = math.fsum(terms) * (1.0 + 4.0 * _EPS) + k * _TINY
        s = s_pos - s_neg
        if s <= -1.0:
            return float("-inf")
        v = math.log1p(s)
        return math.nextafter(v + 4.0 * _EPS * abs(v), math.inf)
    with np.errstate(divide="ignore"):
        logs = np.log(wpos) + _log_expm1(lpos)
    if res_term:
        extra = float(_log_expm1(np.array([residual_log_cost]))[0])
        logs = np.append(logs, math.log(residual) + extra)
    log_s = float(logsumexp(logs))
    bound = k * _EPS * max(1.0, float(np.max(np.abs(logs[np.isfinite(logs)]))))
    v = log_s + math.log1p(max(0.0, 1.0 - s_neg) * math.exp(-log_s))
    return math.nextafter(v + bound + 4.0 * _EPS * abs(v), math.inf)


def _marginals(
    n: int, m: int, rows: NDArray[np.intp], cols: NDArray[np.intp], mass: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    return (
        np.asarray(np.bincount(rows, weights=mass, minlength=n), dtype=np.float64),
        np.asarray(np.bincount(cols, weights=mass, minlength=m), dtype=np.float64),
    )


def round_to_marginals(
    p: NDArray[np.float64],
    q: NDArray[np.float64],
    rows: NDArray[np.intp],
    cols: NDArray[np.intp],
    mass: NDArray[np.float64],
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:
    r"""Round a near-coupling to one with marginals :math:`p, q` (Altschuler et al. 2017, Alg. 2).

    Rows are scaled by :math:`\min(1, p_i/r_i)`, then columns by :math:`\min(1, q_j/c_j)`; the
    deficits :math:`e_r = p - r'`, :math:`e_c = q - c'` are non-negative with equal mass and
    :math:`e_r e_c^\top / \|e_r\|_1` is added. Requires :math:`\sum p = \sum q`. Floating-point
    (marginals exact up to round-off); :func:`check_coupling` does its own exact accounting.
    """
    n, m = p.size, q.size
    r, _ = _marginals(n, m, rows, cols, mass)
    fr = np.where(r > p, p / np.where(r > 0, r, 1.0), 1.0)
    mass = mass * fr[rows]
    _, c = _marginals(n, m, rows, cols, mass)
    fc = np.where(c > q, q / np.where(c > 0, c, 1.0), 1.0)
    mass = mass * fc[cols]
    r, c = _marginals(n, m, rows, cols, mass)
    er = np.maximum(p - r, 0.0)
    ec = np.maximum(q - c, 0.0)
    total = float(er.sum())
    if total > 0.0:
        ir, jc = np.nonzero(er)[0], np.nonzero(ec)[0]
        if ir.size * jc.size > MAX_REPAIR_PIECES:
            raise CertificateError(
                f"marginal repair would add {ir.size * jc.size} pieces; re-solve more accurately"
            )
        add_r = np.repeat(ir, jc.size)
        add_c = np.tile(jc, ir.size)
        add_m = er[add_r] * ec[add_c] / total
        rows = np.concatenate([rows, add_r]).astype(np.intp)
        cols = np.concatenate([cols, add_c]).astype(np.intp)
        mass = np.concatenate([mass, add_m])
    keep = mass > 0.0
    return rows[keep], cols[keep], mass[keep]


def _as_log_cost(log_cost: LogCost | ArrayLike, n: int, m: int) -> LogCost:
    if callable(log_cost):
        return log_cost
    arr = as_float_array("log_cost", log_cost, ndim=2, allow_inf=True)
    if arr.shape != (n, m):
        raise InvalidParameterError("log_cost", arr.shape, f"must have shape {(n, m)}")
    return lambda i, j: arr[i, j]


def _eval_cost(cost: LogCost, i: NDArray[np.intp], j: NDArray[np.intp]) -> NDArray[np.float64]:
    lc = np.asarray(cost(i, j), dtype=np.float64).ravel()
    if lc.shape != i.shape or np.isnan(lc).any():
        raise InvalidParameterError("log_cost", lc.shape, "must return one non-NaN value per piece")
    return lc


def _fail(
    thr: float, aggregate: str, err: float, msg: str,
    ri: NDArray[np.intp], ci: NDArray[np.intp], w: NDArray[np.float64],
) -> CouplingCertificate:
    return CouplingCertificate(
        log_value=float("inf"), threshold=thr, aggregate=aggregate, marginal_error=err,
        repaired=False, log_lower=None, gap=None, certified=False, message=msg,
        rows=ri, cols=ci, mass=w,
    )


#: Largest relative deviation of a plan's marginals from the laws that is certified by the
#: perturbation bound (see :func:`perturbation_penalty`).
REL_TOL = 1e-6


def perturbation_penalty(alpha: float, delta: float, aggregate: str = "mean") -> float:
    r"""Extra log value paid when the plan couples laws :math:`P', Q'` within relative
    :math:`\delta` of :math:`P, Q` atom by atom (:math:`(1-\delta)p'_i \le p_i \le
    (1+\delta)p'_i`, likewise :math:`q`).

    The mixtures then satisfy the same pointwise bounds, so for :math:`\alpha > 1`
    :math:`\int p^\alpha q^{1-\alpha} \le (1+\delta)^\alpha(1-\delta)^{1-\alpha}
    \int p'^\alpha q'^{1-\alpha}` in both orders: the log value grows by at most
    :math:`\alpha\log(1+\delta) - (\alpha-1)\log(1-\delta)`. For :math:`D_\infty`
    (``aggregate="max"`` or ``alpha = inf``) by :math:`\log(1+\delta) - \log(1-\delta)`.
    Rounded up.
    """
    if delta == 0.0:
        return 0.0
    if not delta < 1.0:
        return float("inf")
    if aggregate == "max" or math.isinf(alpha):
        pen = math.log1p(delta) - math.log1p(-delta)
    else:
        pen = alpha * math.log1p(delta) - (alpha - 1.0) * math.log1p(-delta)
    return math.nextafter(pen * (1.0 + 8.0 * _EPS), math.inf)


def _relative_deviation(excess: list[int], big: list[int], total: int) -> float:
    """max_i |excess_i| / (big_i * total), rounded up (inf where an empty atom gets mass)."""
    worst = 0.0
    for e, b in zip(excess, big, strict=True):
        if e == 0:
            continue
        if b == 0:
            return float("inf")
        worst = max(worst, _round(abs(e), b * total, 1))
    return worst


def relative_deviation(
    p: ArrayLike, q: ArrayLike, rows: ArrayLike, cols: ArrayLike, mass: ArrayLike,
    exact: ExactMasses | None = None,
) -> float:
    r"""Exact :math:`\delta = \max` over atoms of :math:`|r_i/W - \hat p_i| / \hat p_i` and
    :math:`|c_j/W - \hat q_j| / \hat q_j` for a plan (rows, cols, masses), rounded up."""
    pw = np.asarray(p, dtype=np.float64)
    qw = np.asarray(q, dtype=np.float64)
    nums = list(exact.numerators) if exact is not None else dyadic_integers(mass)[0]
    big_p, _ = dyadic_integers(pw)
    big_q, _ = dyadic_integers(qw)
    tp, tq, total = sum(big_p), sum(big_q), sum(nums)
    if total == 0:
        return float("inf")
    row_sum = [0] * pw.size
    col_sum = [0] * qw.size
    for i, j, v in zip(np.asarray(rows).tolist(), np.asarray(cols).tolist(), nums, strict=True):
        row_sum[i] += v
        col_sum[j] += v
    ex_r = [row_sum[i] * tp - big_p[i] * total for i in range(pw.size)]
    ex_c = [col_sum[j] * tq - big_q[j] * total for j in range(qw.size)]
    return max(_relative_deviation(ex_r, big_p, total), _relative_deviation(ex_c, big_q, total))


def check_coupling(
    p: ArrayLike,
    q: ArrayLike,
    rows: ArrayLike,
    cols: ArrayLike,
    mass: ArrayLike,
    log_cost: LogCost | ArrayLike,
    threshold: float,
    *,
    aggregate: str = "mean",
    marginal_tol: float = 1e-9,
    exact: ExactMasses | None = None,
    potentials: tuple[ArrayLike, ArrayLike, float] | None = None,
    alpha: float | None = None,
) -> CouplingCertificate:
    r"""Check a transport plan against a cost threshold, independently of the solver.

    Parameters
    ----------
    p : array_like, shape (n,)
        Probabilities of :math:`P`; the law is :math:`p / \sum p` with the sum taken exactly.
    q : array_like, shape (m,)
        Probabilities of :math:`Q`.
    rows, cols : array_like of int, shape (k,)
        Support of the plan.
    mass : array_like, shape (k,)
        Plan masses (:math:`\ge 0`; used exactly as the binary fractions they are unless
        ``exact`` is given).
    log_cost : callable or array_like (n, m)
        ``log_cost(i, j)`` returns :math:`\log C_{ij}` for index arrays (or a full matrix).
    threshold : float
        Bound on the log value, e.g. :math:`(\alpha-1)\varepsilon`.
    aggregate : {"mean", "max"}
        ``"mean"``: :math:`\log\sum\pi C \le` threshold; ``"max"``: every support piece.
    marginal_tol : float, default 1e-9
        Largest residual mass :math:`E` that is accounted for (times the largest cost it could
        meet); a plan further from a coupling fails.
    exact : ExactMasses, optional
        Exact masses (one per piece); then ``mass`` is only used for display.
    potentials : (u, v, shift), optional
        Dual potentials for the costs :math:`e^{\log C - s}`; the full ``(n, m)`` cost is evaluated.
    alpha : float, optional
        The Rényi order the threshold is for. When given, a plan whose marginals are within a
        relative :data:`REL_TOL` of the laws atom by atom may also be certified as an exact
        coupling of its own marginals plus :func:`perturbation_penalty` (the better of this
        and the residual bound is used). This keeps a floating-point discrepancy of ~1e-17
        between two atoms' masses from being charged at the cost of a far pair.

    Returns
    -------
    CouplingCertificate
        ``certified`` is False (with a message) when the plan is not a coupling or the value
        exceeds the threshold; malformed inputs raise.

    Raises
    ------
    InvalidParameterError
        For malformed arrays, indices out of range, negative masses or a NaN cost.

    Examples
    --------
    >>> c = check_coupling([.5, .5], [.5, .5], [0, 1], [1, 0], [.5, .5],
    ...                    lambda i, j: abs(i - j) * 1.0, 1.5)
    >>> c.certified, round(c.log_value, 12)
    (True, 1.0)
    """
    pw = as_float_array("p", p, ndim=1, low=0.0, low_open=False)
    qw = as_float_array("q", q, ndim=1, low=0.0, low_open=False)
    n, m = pw.size, qw.size
    if not (pw.sum() > 0.0 and qw.sum() > 0.0):
        raise InvalidParameterError("p", p, "p and q must have positive total mass")
    if abs(pw.sum() - qw.sum()) > max(marginal_tol, 1e-9):
        raise InvalidParameterError("q", q, f"total mass must equal that of p ({pw.sum()!r})")
    ri = np.asarray(rows)
    ci = np.asarray(cols)
    integral = np.issubdtype(ri.dtype, np.integer) and np.issubdtype(ci.dtype, np.integer)
    if ri.size and not integral:
        raise InvalidParameterError("rows", rows, "rows and cols must be integer index arrays")
    ri = ri.astype(np.intp).ravel()
    ci = ci.astype(np.intp).ravel()
    w = as_float_array("mass", mass, ndim=1, low=0.0, low_open=False, allow_empty=True)
    if not (ri.size == ci.size == w.size):
        raise InvalidParameterError("mass", w.shape, "rows, cols and mass must have equal length")
    if ri.size and (ri.min() < 0 or ri.max() >= n or ci.min() < 0 or ci.max() >= m):
        raise InvalidParameterError("rows", rows, f"indices must lie in [0, {n}) x [0, {m})")
    if aggregate not in ("mean", "max"):
        raise InvalidParameterError("aggregate", aggregate, "must be 'mean' or 'max'")
    thr = as_scalar("threshold", threshold, allow_inf=False)
    tol = as_scalar("marginal_tol", marginal_tol, low=0.0, low_open=False)
    cost = _as_log_cost(log_cost, n, m)
    if exact is not None:
        if not isinstance(exact, ExactMasses):
            raise InvalidParameterError("exact", exact, "must be an ExactMasses")
        if len(exact.numerators) != w.size:
            raise InvalidParameterError("exact", len(exact.numerators), "one numerator per piece")
        nums = list(exact.numerators)  # the plan is normalised by its own total below
    else:
        nums, _ = dyadic_integers(w)

    # exact marginals: the plan normalised by its total W against p / TP and q / TQ
    big_p, _ = dyadic_integers(pw)
    big_q, _ = dyadic_integers(qw)
    tp, tq = sum(big_p), sum(big_q)
    total = sum(nums)
    if total == 0:
        return _fail(thr, aggregate, 1.0, "not a coupling: the plan has no mass", ri, ci, w)
    row_sum = [0] * n
    col_sum = [0] * m
    for i, j, v in zip(ri.tolist(), ci.tolist(), nums, strict=True):
        row_sum[i] += v
        col_sum[j] += v
    ex_r = [row_sum[i] * tp - big_p[i] * total for i in range(n)]  # over total * tp
    ex_c = [col_sum[j] * tq - big_q[j] * total for j in range(m)]  # over total * tq
    excess = Fraction(sum(e for e in ex_r if e > 0), total * tp) + Fraction(
        sum(e for e in ex_c if e > 0), total * tq
    )
    err = max(
        _round(max(abs(e) for e in ex_r), total * tp, 1),
        _round(max(abs(e) for e in ex_c), total * tq, 1),
    )
    resid = _round(excess.numerator, excess.denominator, 1)
    delta = max(_relative_deviation(ex_r, big_p, total), _relative_deviation(ex_c, big_q, total))
    abs_ok = excess <= tol
    rel_ok = alpha is not None and excess > 0 and delta <= REL_TOL
    if not (abs_ok or rel_ok):
        return _fail(
            thr, aggregate, err,
            f"not a coupling: marginal excess {resid:.3g} > tolerance {tol:.3g}", ri, ci, w,
        )
    res_lc = float("-inf")
    if abs_ok and excess > 0:
        short_r = {i for i in range(n) if ex_r[i] < 0}
        short_c = {j for j in range(m) if ex_c[j] < 0}
        for i, j in zip(ri.tolist(), ci.tolist(), strict=True):
            if ex_c[j] > 0:
                short_r.add(i)
            if ex_r[i] > 0:
                short_c.add(j)
        if len(short_r) * len(short_c) > MAX_REPAIR_PIECES:
            abs_ok = False
        else:
            ii, jj = np.meshgrid(
                np.array(sorted(short_r), dtype=np.intp),
                np.array(sorted(short_c), dtype=np.intp),
                indexing="ij",
            )
            res_lc = float(np.max(_eval_cost(cost, ii.ravel(), jj.ravel())))
    if not (abs_ok or rel_ok):
        return _fail(
            thr, aggregate, err,
            f"residual {resid:.3g} spread over too many pairs; re-solve more accurately",
            ri, ci, w,
        )

    keep = np.array([v > 0 for v in nums], dtype=bool)
    kept = [v for v in nums if v > 0]
    ri, ci = ri[keep], ci[keep]
    w_up = np.array([_round(v, total, 1) for v in kept], dtype=np.float64)
    w_dn = np.array([_round(v, total, -1) for v in kept], dtype=np.float64)
    w_near = np.array([_round(v, total, 0) for v in kept], dtype=np.float64)
    lc = _eval_cost(cost, ri, ci)
    top = float(np.max(lc)) if lc.size else float("-inf")
    value = float("inf")
    how = ""
    if abs_ok:
        if aggregate == "mean":
            value = log_value_upper(lc, w_up, w_dn, resid, res_lc)
        else:
            value = max(top, res_lc)
        if excess > 0:
            how = f" (residual mass {resid:.3g} charged at log cost {res_lc:.6g})"
    penalty = 0.0
    if rel_ok and alpha is not None:
        penalty = perturbation_penalty(alpha, delta, aggregate)
        own = log_value_upper(lc, w_up, w_dn) if aggregate == "mean" else top
        v_rel = math.nextafter(own + penalty, math.inf)
        if v_rel < value:
            value = v_rel
            how = f" (marginals within relative {delta:.3g}: penalty {penalty:.3g})"

    log_lower: float | None = None
    gap: float | None = None
    if potentials is not None:
        pu = as_float_array("u", potentials[0], ndim=1)
        pv = as_float_array("v", potentials[1], ndim=1)
        shift = as_scalar("shift", potentials[2])
        if pu.size != n or pv.size != m:
            raise InvalidParameterError(
                "potentials", (pu.shape, pv.shape), f"must be ({n},), ({m},)"
            )
        ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
        full = _eval_cost(cost, ii.ravel().astype(np.intp), jj.ravel().astype(np.intp))
        scaled = np.exp(np.minimum(full.reshape(n, m) - shift, 700.0))
        viol = max(0.0, float(np.max(pu[:, None] + pv[None, :] - scaled)))
        lower = float((pw / pw.sum()) @ (pu - viol) + (qw / qw.sum()) @ pv)
        log_lower = float(np.log(lower)) + shift if lower > 0 else float("-inf")
        gap = value - log_lower

    ok = bool(value <= thr)
    msg = (
        f"coupling certified: log value {value:.12g} <= threshold {thr:.12g}"
        if ok
        else f"cost condition fails: log value {value:.12g} > threshold {thr:.12g}"
    )
    msg += how
    return CouplingCertificate(
        log_value=value, threshold=thr, aggregate=aggregate, marginal_error=err,
        repaired=bool(excess > 0), log_lower=log_lower, gap=gap, certified=ok, message=msg,
        rows=ri, cols=ci, mass=w_near, residual_mass=resid, residual_log_cost=res_lc,
        relative_deviation=delta,
    )



# ------------------------------------------------------------------------ pure (alpha = inf)
#: Ulps allowed for one ``pow`` of numpy (a few in practice; the same allowance as the
#: mixture bounds make for ``exp``/``log``).
_POW_ULPS = 64.0


def _abs_diff_upper(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Doubles >= ``|x - y|`` exactly (elementwise), by Knuth's two-sum error term."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = x - y
        bb = s - x
        err = (x - (s - bb)) + (-y - bb)
    mag = np.abs(s)
    out = np.where(err * np.sign(s) > 0.0, np.nextafter(mag, np.inf), mag)
    odd = np.isfinite(s) & ~np.isfinite(err)  # an intermediate overflowed: decide exactly
    for idx in zip(*np.nonzero(odd), strict=True):
        out[idx] = round_up(abs(Fraction(float(x[idx])) - Fraction(float(y[idx]))))
    return np.asarray(out, dtype=np.float64)


def distance_upper(x: ArrayLike, y: ArrayLike, norm: float = 1.0) -> NDArray[np.float64]:
    r"""Doubles :math:`\ge \lVert x_k - y_k\rVert_p` exactly, one per row.

    Parameters
    ----------
    x, y : array_like, shape (k, d) or (k,)
        Paired points (finite doubles).
    norm : float, default 1
        :math:`p \ge 1` or ``inf``.

    Notes
    -----
    Each :math:`|x_{kc} - y_{kc}|` is rounded up from the exact difference (two-sum error term),
    so values sharing a large offset (timestamps, IDs) lose nothing. In one dimension, and for
    :math:`p = \infty`, that is the distance. For :math:`p = 1` the sum of :math:`d`
    non-negative terms is within a relative :math:`(d-1)u` of its float sum (:math:`u = 2^{-53}`)
    and is moved up by :math:`2du` and one ulp. Otherwise the row is divided by its largest entry
    :math:`m` (so nothing under- or overflows; each ratio rounded up), the powers summed
    (:math:`S \ge 1`) and the root taken, with a relative allowance of 64 ulps per ``pow`` and
    :math:`2du` for the sum. A difference beyond the double range gives ``inf``.

    Examples
    --------
    >>> float(distance_upper([1e15 + 1.0], [1e15])[0])
    1.0
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim not in (1, 2):
        raise InvalidParameterError("y", ys.shape, f"must have the shape of x {xs.shape}")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise InvalidParameterError("x", "non-finite", "points must be finite")
    p = as_scalar("norm", norm, low=1.0, low_open=False, allow_inf=True)
    a = _abs_diff_upper(xs, ys)
    if a.ndim == 1:
        return a
    k, d = a.shape
    if d == 1:
        return np.asarray(a[:, 0], dtype=np.float64)
    if d == 0:
        return np.zeros(k)
    if math.isinf(p):
        return np.asarray(np.max(a, axis=1), dtype=np.float64)
    grow = 1.0 + 2.0 * d * _EPS
    with np.errstate(over="ignore"):
        if p == 1.0:
            return np.asarray(np.nextafter(np.sum(a, axis=1) * grow, np.inf), dtype=np.float64)
        m = np.max(a, axis=1)
        safe = np.where(m > 0.0, m, 1.0)
        with np.errstate(under="ignore"):
            r = np.nextafter(a / safe[:, None], np.inf)
            total = np.sum(r**p, axis=1) * (1.0 + (_POW_ULPS + 2.0 * d) * _EPS) + d * _TINY
        root = total ** (1.0 / p) * (1.0 + _POW_ULPS * _EPS)
        out = np.nextafter(m * np.nextafter(root, np.inf) * (1.0 + 2.0 * _EPS), np.inf)
    return np.asarray(np.where(m > 0.0, out, 0.0), dtype=np.float64)


def pure_value_upper(distance: float, scale: float, penalty: float = 0.0) -> float:
    r"""The certified pure-privacy loss :math:`\lVert x-y\rVert/b + \text{penalty}` rounded up,
    exactly as :func:`check_pure_coupling` computes it (``distance`` an upper bound from
    :func:`distance_upper`; scale 0 gives 0 for distance 0, ``inf`` otherwise)."""
    if scale == 0.0:
        own = 0.0 if distance == 0.0 else math.inf
    else:
        own = div_up(float(distance), float(scale))
    return own if penalty == 0.0 else next_up(own + penalty)


def least_pure_scale(distance: float, epsilon: float, penalty: float = 0.0) -> float:
    r"""The least double :math:`b` with ``pure_value_upper(distance, b, penalty) <= epsilon``.

    Starts at :math:`w/(\varepsilon - \text{penalty})` rounded up in rational arithmetic (no
    smaller double can pass: the value is never below the exact quotient) and steps up by ulps
    until the check's own arithmetic passes, so the scale a calibration returns is the one its
    certificate proves.

    Raises
    ------
    InvalidParameterError
        The distance is infinite (the points' differences overflow the double range), or the
        penalty uses up ε, or the scale would overflow the double range (ε too small).
    """
    w = as_scalar("distance", distance, low=0.0, low_open=False, allow_inf=True)
    eps = as_scalar("epsilon", epsilon, low=0.0)
    if w == 0.0:
        return 0.0
    if math.isinf(w):
        raise InvalidParameterError(
            "distance", w, "is infinite: the atoms' differences overflow the double range "
            "(rescale the query, e.g. to other units)",
        )
    room = Fraction(eps) - Fraction(penalty)
    if room <= 0:
        raise InvalidParameterError("epsilon", eps, f"must exceed the plan's penalty {penalty!r}")
    exact = Fraction(w) / room
    if exact > Fraction(np.finfo(np.float64).max):
        raise InvalidParameterError(
            "epsilon", eps, f"too small: the scale {float(w)!r} / epsilon overflows the doubles"
        )
    start = round_up(exact)
    return step_up_until(start, lambda b: pure_value_upper(w, b, penalty) <= eps)


def check_pure_coupling(
    p: ArrayLike,
    q: ArrayLike,
    x: ArrayLike,
    y: ArrayLike,
    rows: ArrayLike,
    cols: ArrayLike,
    mass: ArrayLike,
    scale: float,
    epsilon: float,
    *,
    norm: float = 1.0,
    exact: ExactMasses | None = None,
    marginal_tol: float = 1e-9,
) -> CouplingCertificate:
    r"""Certify pure (:math:`\alpha = \infty`) Pufferfish privacy from a coupling, in proven
    arithmetic.

    For noise with density :math:`\propto e^{-\lVert z\rVert_p/b}` (Laplace: :math:`p = 1`; the
    exponential mechanism: any :math:`p`) and any coupling :math:`\pi` of :math:`P, Q`,
    :math:`D_\infty(P*N_b\,\|\,Q*N_b) \le \max_{\operatorname{supp}\pi}\lVert x_i - y_j\rVert_p/b`
    (Song, Wang and Chaudhuri, "Pufferfish Privacy Mechanisms for Correlated Data"). The log-costs
    given to :func:`check_coupling` (``aggregate="max"``) are upper bounds: the distance from
    :func:`distance_upper`, divided by :math:`b` rounded up; a plan that is a coupling only up to
    rounding pays :func:`perturbation_penalty` (rounded up, added rounding up).

    Parameters
    ----------
    p, q : array_like
        Probabilities of the laws.
    x, y : array_like, shape (n,) / (n, d) and (m,) / (m, d)
        Their atoms.
    rows, cols, mass : array_like
        The plan.
    scale : float
        :math:`b \ge 0` (0: only exact matches of atoms pass).
    epsilon : float
        :math:`\varepsilon > 0`.
    norm : float, default 1
    exact : ExactMasses, optional
    marginal_tol : float, default 1e-9

    Returns
    -------
    CouplingCertificate

    Examples
    --------
    >>> c = check_pure_coupling([1.0], [1.0], [1e15 + 2.0], [1e15], [0], [0], [1.0], 2.0, 1.0)
    >>> c.certified, c.log_value
    (True, 1.0)
    """
    xs = np.asarray(as_float_array("x", x, ndim=None), dtype=np.float64)
    ys = np.asarray(as_float_array("y", y, ndim=None), dtype=np.float64)
    xs = xs[:, None] if xs.ndim == 1 else xs
    ys = ys[:, None] if ys.ndim == 1 else ys
    if xs.ndim != 2 or ys.ndim != 2 or xs.shape[1] != ys.shape[1]:
        raise InvalidParameterError("y", ys.shape, f"atoms must match x's dimension {xs.shape}")
    b = as_scalar("scale", scale, low=0.0, low_open=False)
    eps = as_scalar("epsilon", epsilon, low=0.0)
    pn = as_scalar("norm", norm, low=1.0, low_open=False, allow_inf=True)

    def log_cost(i: NDArray[np.intp], j: NDArray[np.intp]) -> NDArray[np.float64]:
        dist = distance_upper(xs[i], ys[j], pn)
        if b == 0.0:
            return np.where(dist == 0.0, 0.0, np.inf)
        return np.asarray(div_up(dist, b), dtype=np.float64)

    return check_coupling(p, q, rows, cols, mass, log_cost, eps, aggregate="max",
                          marginal_tol=marginal_tol, exact=exact, alpha=math.inf)
