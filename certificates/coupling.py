r"""Coupling certificates for Rényi Pufferfish calibrations (MATH.md §2.2, §3.3).

A claim "the noise scale :math:`b` gives :math:`(\alpha, \varepsilon)`-RPP for the secret pair
:math:`(P, Q)`" is certified by a coupling :math:`\pi` of :math:`P` and :math:`Q` with

.. math::

    \log \sum_{ij} \pi_{ij} M_\alpha(x_i - y_j; b) \le (\alpha - 1)\varepsilon
    \qquad \text{(RPP-OT, MATH.md §2.2)},

because for *any* coupling :math:`\int (P*N)^\alpha (Q*N)^{1-\alpha} \le \sum \pi_{ij} M_\alpha`.
Only two things need checking, and neither needs the solver that produced :math:`\pi`:

1. :math:`\pi` is a coupling: :math:`\pi \ge 0`, row sums :math:`p`, column sums :math:`q`. Sums
   within ``exact_tol`` (default 1e-12, floating-point round-off) count as exact; sums within
   ``marginal_tol`` (default 1e-9) are repaired to exact marginals by the rounding of Altschuler,
   Weed and Rigollet (2017, Alg. 2: shrink rows, shrink columns, add the outer product of the
   deficits divided by their mass), and the *repaired* plan is the one scored; larger errors fail.
2. Its log-domain value :math:`\operatorname{logsumexp}(\log\pi + \log C)` is at most the
   threshold (``aggregate="mean"``), or, for :math:`\alpha=\infty`, the largest log-cost on the
   support is (``aggregate="max"``).

Optionally, potentials :math:`u, v` with :math:`u_i + v_j \le e^{\log C_{ij} - s}` (after an
explicit repair :math:`u \leftarrow u - \max(0, \max_{ij}(u_i + v_j - e^{\log C_{ij}-s}))`) give
the lower bound :math:`e^{s}(p^\top u + q^\top v) \le \min_\pi \sum \pi C`, hence an optimality
gap for the plan. The log-costs are evaluated by a caller-supplied function (the model's cost),
never taken from the solver. This module imports numpy and scipy only.

References
----------
1. Altschuler, Weed, Rigollet, "Near-linear time approximation algorithms for optimal transport
   via Sinkhorn iteration", NeurIPS 2017, Algorithm 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from certificates.errors import CertificateError, InvalidParameterError
from certificates.validate import as_float_array, as_scalar

__all__ = ["CouplingCertificate", "check_coupling", "log_average", "round_to_marginals"]

LogCost = Callable[[NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]]

#: Largest number of pieces the exact marginal repair may add.
MAX_REPAIR_PIECES = 2_000_000


@dataclass(frozen=True)
class CouplingCertificate:
    r"""The outcome of :func:`check_coupling`.

    Attributes
    ----------
    log_value : float
        :math:`\log\sum\pi_{ij}C_{ij}` (``mean``) or :math:`\max_{\operatorname{supp}\pi}\log C`
        (``max``) of the checked (possibly repaired) plan.
    threshold : float
        The bound the value must not exceed, e.g. :math:`(\alpha-1)\varepsilon`.
    aggregate : str
        ``"mean"`` or ``"max"``.
    marginal_error : float
        Largest absolute marginal error of the plan as given.
    repaired : bool
        Whether the plan was rounded to exact marginals before scoring.
    log_lower : float or None
        Certified lower bound on :math:`\log\min_\pi\sum\pi C` from the potentials (``-inf`` if
        the bound is not positive; ``None`` without potentials).
    gap : float or None
        ``log_value - log_lower`` (log-scale optimality gap).
    certified : bool
        The plan is a coupling (exact after repair) and ``log_value <= threshold``.
    message : str
    rows, cols, mass : ndarray
        The plan that was scored.
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
    """
    if mass.size == 0:
        return float("-inf")
    if float(np.max(log_cost)) <= 1.0:
        terms = np.concatenate([mass, [-1.0], mass * np.expm1(log_cost)])
        excess = math.fsum(terms.tolist())
        return float(np.log1p(excess)) if excess > -1.0 else float("-inf")
    return float(logsumexp(log_cost, b=mass))


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
    :math:`e_r e_c^\top / \|e_r\|_1` is added. Requires :math:`\sum p = \sum q`.
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


def _as_log_cost(log_cost: Any, n: int, m: int) -> LogCost:
    if callable(log_cost):
        return log_cost  # type: ignore[no-any-return]
    arr = as_float_array("log_cost", log_cost, ndim=2, allow_inf=True)
    if arr.shape != (n, m):
        raise InvalidParameterError("log_cost", arr.shape, f"must have shape {(n, m)}")
    return lambda i, j: arr[i, j]


def check_coupling(
    p: Any,
    q: Any,
    rows: Any,
    cols: Any,
    mass: Any,
    log_cost: LogCost | NDArray[np.float64],
    threshold: float,
    *,
    aggregate: str = "mean",
    marginal_tol: float = 1e-9,
    exact_tol: float = 1e-12,
    potentials: tuple[Any, Any, float] | None = None,
) -> CouplingCertificate:
    r"""Check a transport plan against a cost threshold, independently of the solver.

    Parameters
    ----------
    p : array_like, shape (n,)
        Probabilities of :math:`P` (the law the claim is about).
    q : array_like, shape (m,)
        Probabilities of :math:`Q`.
    rows, cols : array_like of int, shape (k,)
        Support of the plan.
    mass : array_like, shape (k,)
        Plan masses (must be :math:`\ge 0`).
    log_cost : callable or array_like (n, m)
        ``log_cost(i, j)`` returns :math:`\log C_{ij}` for index arrays (or a full matrix).
    threshold : float
        Bound on the log value, e.g. :math:`(\alpha-1)\varepsilon`.
    aggregate : {"mean", "max"}
        ``"mean"``: :math:`\log\sum\pi C \le` threshold; ``"max"``: every support piece.
    marginal_tol : float, default 1e-9
        Marginal errors up to this are repaired exactly (see the module docstring).
    exact_tol : float, default 1e-12
        Marginal errors up to this count as floating-point exact (no repair): the round-off of
        cumulative sums over ~1e4 atoms, and solver debris below 1e-15 per entry.
    potentials : (u, v, shift), optional
        Dual potentials for the costs :math:`e^{\log C - s}`; the full ``(n, m)`` cost is evaluated.

    Returns
    -------
    CouplingCertificate
        ``certified`` is False (with a message) when the plan is not a coupling or the value exceeds
        the threshold; malformed inputs raise.

    Raises
    ------
    InvalidParameterError
        For malformed arrays, indices out of range or negative masses.
    """
    pw = as_float_array("p", p, ndim=1, low=0.0, low_open=False)
    qw = as_float_array("q", q, ndim=1, low=0.0, low_open=False)
    n, m = pw.size, qw.size
    if abs(pw.sum() - qw.sum()) > marginal_tol:
        raise InvalidParameterError("q", q, f"total mass must equal that of p ({pw.sum()!r})")
    ri = np.asarray(rows)
    ci = np.asarray(cols)
    if not (np.issubdtype(ri.dtype, np.integer) and np.issubdtype(ci.dtype, np.integer)):
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

    r, c = _marginals(n, m, ri, ci, w)
    err = float(max(np.max(np.abs(r - pw)), np.max(np.abs(c - qw))))
    repaired = False
    if err > tol:
        return CouplingCertificate(
            log_value=float("inf"), threshold=thr, aggregate=aggregate, marginal_error=err,
            repaired=False, log_lower=None, gap=None, certified=False,
            message=f"not a coupling: marginal error {err:.3g} > tolerance {tol:.3g}",
            rows=ri, cols=ci, mass=w,
        )
    if err > exact_tol:
        ri, ci, w = round_to_marginals(pw, qw, ri, ci, w)
        repaired = True
    keep = w > 0.0
    ri, ci, w = ri[keep], ci[keep], w[keep]
    lc = np.asarray(cost(ri, ci), dtype=np.float64).ravel()
    if lc.shape != w.shape or np.isnan(lc).any():
        raise InvalidParameterError("log_cost", lc.shape, "must return one non-NaN value per piece")
    if aggregate == "mean":
        value = log_average(lc, w)
    else:
        value = float(np.max(lc)) if w.size else float("-inf")

    log_lower: float | None = None
    gap: float | None = None
    if potentials is not None:
        u = as_float_array("u", potentials[0], ndim=1)
        v = as_float_array("v", potentials[1], ndim=1)
        shift = as_scalar("shift", potentials[2])
        if u.size != n or v.size != m:
            raise InvalidParameterError("potentials", (u.shape, v.shape), f"must be ({n},), ({m},)")
        ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
        full = np.asarray(cost(ii.ravel(), jj.ravel()), dtype=np.float64).reshape(n, m)
        scaled = np.exp(np.minimum(full - shift, 700.0))
        viol = max(0.0, float(np.max(u[:, None] + v[None, :] - scaled)))
        lower = float(pw @ (u - viol) + qw @ v)
        log_lower = float(np.log(lower)) + shift if lower > 0 else float("-inf")
        gap = value - log_lower

    ok = value <= thr
    msg = (
        f"coupling certified: log value {value:.12g} <= threshold {thr:.12g}"
        if ok
        else f"cost condition fails: log value {value:.12g} > threshold {thr:.12g}"
    )
    if repaired:
        msg += f" (marginals repaired from error {err:.3g})"
    return CouplingCertificate(
        log_value=value, threshold=thr, aggregate=aggregate, marginal_error=err,
        repaired=repaired, log_lower=log_lower, gap=gap, certified=ok, message=msg,
        rows=ri, cols=ci, mass=w,
    )
