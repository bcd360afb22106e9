r"""Independent certificate of an optimal covariance.

:func:`check` takes the problem data, a candidate :math:`\Sigma` and a
:class:`~certificates.problem.FactoredDual`, trusts neither, and returns a
:class:`CovarianceCertificate` with a certified interval ``[lower, upper]`` on the optimal value

.. math::

    v_\eta(q) = \min\{\operatorname{tr}(W\Sigma) : s_j^\top\Sigma^{-1}s_j \le q\ \forall j,\
    \Sigma \succeq \eta I\}.

* **upper** (scale, don't reject): :math:`\hat\Sigma = c\Sigma` with
  :math:`c = \max(1, \bar r/q\,(1+m), \eta/\lambda_{\min}(\Sigma)\,(1+m))`, where :math:`\bar r`
  is an upper bound on :math:`\max_j s_j^\top\Sigma^{-1}s_j` over ALL J vectors (one chunked
  pass, Cholesky solves and their residuals, with a forward error bound;
  :func:`certificates.rigorous.ratio_upper_bound`). :math:`\hat\Sigma` is re-verified after the
  (rounded) scaling, so it is strictly feasible; ``upper`` = :math:`\operatorname{tr}(W\hat\Sigma)`.
* **lower** (self-bounding): with :math:`D = \eta\operatorname{tr}H +
  \sum_j\lambda_j(2u_j^\top s_j - q)` and :math:`E = W - H - \sum_j\lambda_ju_ju_j^\top`,
  every feasible :math:`\Sigma` has :math:`\operatorname{tr}(W\Sigma) \ge D/(1 + \|E\|_F/w_{\min})`
  for :math:`w_{\min} \le \lambda_{\min}(W)`. Valid whatever the solver's accuracy. For an
  ill-conditioned :math:`W` this pays :math:`\|E\|_F/\lambda_{\min}(W) \approx u\,\kappa(W)`;
  then the bound :math:`tD` with :math:`W - tS \succeq 0` is also proven in the metric of the
  stored :math:`W` (:func:`certificates.rigorous.exact_whitened_bound`: exact congruence by a
  float inverse Cholesky factor, no squared condition number), which reaches what the stored
  dual carries: :math:`t` is then :math:`1/\lambda_{\max}(S, W)` up to a margin of 1e-13.
* **lower** is also compared with the bounds every
  program satisfies (:mod:`certificates.closed_form`: :math:`\eta\operatorname{tr}W` and the
  bounds from the vector the pass found largest), exact in rational arithmetic: they prove the
  closed-form optima (:math:`\eta I`, a set on one line) to the last bit.
* **gap** = (upper - lower) / upper; ``certified`` iff gap <= tol.
* ``complementarity`` is the duality gap as a complementarity sum (theory page, "Certificates":
  :math:`\operatorname{tr}(W\Sigma) - D` for :math:`E = 0`) evaluated at :math:`\hat\Sigma`:
  :math:`\sum_j\langle Z_j, F_j(\hat\Sigma)\rangle + \langle H, \hat\Sigma - \eta I\rangle`
  relative to ``upper`` (about 0 at an optimum).

With ``rigorous=True`` the d x d and support-sized parts are exact (Python integers on the dyadic
values of the doubles) and the J-vector pass is error-bounded, so ``[lower, upper]`` is a proof
about the returned float matrix ``repaired_covariance``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

from certificates.closed_form import closed_form_lower_bound
from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProgram, FactoredDual
from certificates.rigorous import (
    ChunkMap,
    certified_min_eigenvalue,
    certify_psd,
    exact_dual_bound,
    exact_trace_product,
    exact_whitened_bound,
    ratio_upper_bound,
    refine_whitened_dual,
)
from certificates.validate import as_matrix, as_scalar

__all__ = ["CovarianceCertificate", "check", "dual_cut", "dual_lower_bound", "primal_ratio",
           "whitened_dual_bound"]

#: Scaling margins tried in turn by the repair (relative enlargement of the scale factor).
_MARGINS = (1e-12, 1e-10, 1e-8, 1e-6, 1e-4)


@dataclass(frozen=True)
class CovarianceCertificate:
    """Result of :func:`check`.

    Attributes
    ----------
    lower, upper : float
        Certified interval on the optimal value (proof when ``rigorous``).
    gap : float
        (upper - lower) / upper.
    primal_residual : float
        max_j s_j^T Sigma^{-1} s_j / q - 1 over all J vectors at the GIVEN Sigma (> 0: violated;
        inf when Sigma is not positive definite).
    floor_residual : float
        lambda_min(Sigma) - eta at the given Sigma.
    dual_residual : float
        Upper bound on ||E||_F, E = W - H - sum_j lambda_j u_j u_j^T.
    complementarity : float
        The duality gap as a complementarity sum at the repaired Sigma, relative to ``upper``.
    repaired_covariance : ndarray, shape (d, d)
        Sigma scaled (and ridged if singular) to strict feasibility; ``upper`` is its value.
    scale : float
        The factor applied (1.0 when Sigma was already strictly feasible).
    dual_value : float
        D (the dual objective of the factored dual).
    w_min : float
        The lower bound on lambda_min(W) used.
    mahalanobis_sup : float
        Certified upper bound on :math:`\\max_j s_j^\top\\hat\\Sigma^{-1}s_j` over ALL J vectors at
        the repaired covariance (< q): the one number every privacy statement about the design
        is derived from (inf when no repair succeeded).
    attained_sup : float
        The float value of :math:`s_j^\top\\hat\\Sigma^{-1}s_j` at ``argmax`` (an estimate of the
        sup from below, up to rounding).
    argmax : int
        Index of the vector attaining ``attained_sup`` (-1 when unknown).
    certified : bool
        gap <= tol.
    rigorous : bool
        Whether every rounding error was accounted for.
    tol : float
    message : str
    """

    lower: float
    upper: float
    gap: float
    primal_residual: float
    floor_residual: float
    dual_residual: float
    complementarity: float
    repaired_covariance: NDArray[np.float64]
    scale: float
    dual_value: float
    w_min: float
    mahalanobis_sup: float
    attained_sup: float
    argmax: int
    certified: bool
    rigorous: bool
    tol: float
    message: str

    @property
    def interval(self) -> tuple[float, float]:
        return (self.lower, self.upper)

    def __str__(self) -> str:
        kind = "rigorous" if self.rigorous else "float"
        state = "certified" if self.certified else "NOT certified"
        return (
            f"{state} ({kind}): optimal value in [{self.lower:.12g}, {self.upper:.12g}], "
            f"relative gap {self.gap:.3g} (tol {self.tol:g}); primal residual "
            f"{self.primal_residual:.3g}, ||E||_F {self.dual_residual:.3g}, scale {self.scale:.12g}"
        )


def dual_lower_bound(
    support_vectors: NDArray[np.float64],
    weight: NDArray[np.float64],
    bound: float,
    eta: float,
    multipliers: NDArray[np.float64],
    directions: NDArray[np.float64],
    floor: NDArray[np.float64],
    w_min: float,
) -> tuple[float, float, float]:
    r"""Float self-bounding lower bound

    Returns ``(D / (1 + ||E||_F / w_min), D, ||E||_F)`` with
    :math:`D = \eta\operatorname{tr}H + \sum_j\lambda_j(2u_j^\top s_j - q)` and
    :math:`E = W - H - \sum_j\lambda_ju_ju_j^\top` (``floor`` is :math:`H`).
    """
    e_norm = float(np.linalg.norm(weight - floor - (directions.T * multipliers) @ directions))
    dval = eta * float(np.trace(floor)) + float(
        np.sum(multipliers * (2 * np.einsum("ij,ij->i", directions, support_vectors) - bound))
    )
    return dval / (1.0 + e_norm / w_min), dval, e_norm


def whitened_dual_bound(
    weight: NDArray[np.float64],
    dual_value: float,
    multipliers: NDArray[np.float64],
    directions: NDArray[np.float64],
    floor: NDArray[np.float64],
) -> float:
    r"""Float lower bound for ill-conditioned weights: :math:`D/\max(1, \lambda_{\max}(F))`.

    With :math:`S = H + \sum_j\lambda_ju_ju_j^\top` and :math:`W = LL^\top`,
    :math:`F = L^{-1}SL^{-\top} = VV^\top` for :math:`V = L^{-1}[\,u_j\sqrt{\lambda_j},\ G\,]`
    (``floor`` is the factor :math:`G` of :math:`H`). Scaling the dual by
    :math:`t = 1/\max(1, \lambda_{\max}(F))` makes :math:`W - tS \succeq 0`, so weak duality gives
    :math:`v \ge tD`. The residual bound of :func:`dual_lower_bound` pays
    :math:`\|E\|_F/\lambda_{\min}(W)`, of order :math:`u\,\kappa(W)`; here the rounding enters
    through the triangular solve, of order :math:`d\,u\,\kappa(L) = d\,u\sqrt{\kappa(W)}`, which
    is charged to :math:`\lambda_{\max}(F)` by Skeel's componentwise bound
    :math:`|\hat V - V| \le \gamma_d|L^{-1}||L||\hat V|` (about :math:`d\,u` for a diagonal
    :math:`W`). The Cholesky factor is that of the stored :math:`W` to rounding (float mode, like
    the rest of this check). Returns 0 when :math:`W` is not numerically positive definite.
    """
    d = weight.shape[0]
    try:
        chol = sla.cholesky(0.5 * (weight + weight.T), lower=True)
    except (np.linalg.LinAlgError, ValueError):
        return 0.0
    factor = np.concatenate([directions.T * np.sqrt(np.clip(multipliers, 0.0, None)),
                             floor.reshape(d, -1)], axis=1)
    if not factor.size:
        return 0.0
    vmat = sla.solve_triangular(chol, factor, lower=True)
    # forward error of the triangular solve: (L + dL) v = b with |dL| <= gamma_d |L|, so
    # |v - v_exact| <= gamma_d |L^-1| |L| |v| column by column (Skeel); the largest singular
    # value moves by at most the Frobenius norm of that error
    unit = 2.0**-53
    gamma = (d + 2) * unit / (1.0 - (d + 2) * unit)
    linv = sla.solve_triangular(chol, np.eye(d), lower=True)
    err = gamma * (np.abs(linv) @ (np.abs(chol) @ np.abs(vmat))) * (1.0 + 4 * (d + 2) * unit)
    sv_top = float(sla.svdvals(vmat)[0])
    err_norm = float(np.linalg.norm(err))
    top = (sv_top + err_norm) ** 2
    margin = 4.0 * unit * (d + 2)  # the rounding of the singular value itself
    if not (math.isfinite(top) and top > 0 and err_norm < 1e-3 * sv_top):
        return 0.0
    return dual_value / max(1.0, top * (1.0 + margin))


def _refined_bound(weight: NDArray[np.float64], q: float, eta: float,
                   sup_vec: NDArray[np.float64], dual: FactoredDual, sigma: NDArray[np.float64],
                   upper: float, lower: float, tol: float, w_min: float, *,
                   rigorous: bool) -> float:
    """The W-metric bound of a dual recomputed against the stored W on the same support
    (:func:`certificates.rigorous.refine_whitened_dual`), for an ill-conditioned W only
    (condition above 1e6, where a solver's dual is limited by its own factorisation of W) and
    only while the gap is above ``tol`` or above 1e-8 (0.0 when it does not help); the new
    dual's value D is exact in rigorous mode."""
    if upper <= 0 or (upper - lower) / upper <= min(tol, 1e-8):
        return 0.0
    if not w_min <= 1e-6 * float(np.linalg.norm(weight, 2)):
        return 0.0
    refined = refine_whitened_dual(weight, sup_vec, q, dual, sigma)
    if refined is None:
        return 0.0
    d = weight.shape[0]
    if rigorous:
        _, dval, _ = exact_dual_bound(sup_vec, weight, q, eta, refined, w_min)
    else:
        g = refined.floor_factor.reshape(d, -1)
        h = g @ g.T if g.size else np.zeros((d, d))
        _, dval, _ = dual_lower_bound(sup_vec, weight, q, eta, refined.multipliers,
                                      refined.directions.reshape(-1, d), h, w_min)
    return exact_whitened_bound(weight, refined, dval, eta)[0]


def _trace_upper(weight: NDArray[np.float64], sigma: NDArray[np.float64]) -> float:
    """An upper bound on tr(W Sigma) in float: the float sum plus its error bound
    gamma_n sum |W_ik Sigma_ik| (n = d^2 products summed) plus n * 2^-1074 for the products that
    underflow (a relative bound does not cover them), rounded up."""
    products = weight * sigma
    n = products.size + 1
    unit = 2.0**-53
    gamma = n * unit / (1.0 - n * unit) * (1.0 + 1e-6)
    total = float(np.sum(products)) + gamma * float(np.sum(np.abs(products))) * (1.0 + 4 * unit)
    total += n * 5e-324
    return float(np.nextafter(total, math.inf))


def _verdict(lower: float, upper: float, tol: float, notes: list[str]) -> tuple[float, bool]:
    """The relative gap of ``[lower, upper]`` and whether it certifies to ``tol`` (never when
    the bounds cross); the verdict heads ``notes``."""
    gap = (upper - lower) / upper if upper > 0 else math.inf
    certified = bool(gap <= tol)
    if lower > upper * (1 + 1e-9):
        certified = False
        notes.append("lower bound exceeds upper bound: inconsistent data")
    notes.insert(0, ("certified" if certified else "NOT certified") + f": gap {gap:.3g} (tol "
                 f"{tol:g})")
    return gap, certified


def _validate_dual(dual: object, d: int, count: int) -> FactoredDual:
    if dual is None:  # primal-only check: the trivial lower bound 0
        return FactoredDual(np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros((0, d)),
                            np.zeros((d, 0)))
    if not isinstance(dual, FactoredDual):
        raise InvalidTypeError("dual", dual, "a FactoredDual")
    k = dual.support.shape[0]
    if k and (dual.directions.shape != (k, d)):
        raise InvalidParameterError("dual.directions", dual.directions.shape, f"must be ({k}, {d})")
    if dual.floor_factor.shape[0] != d and dual.floor_factor.size:
        raise InvalidParameterError(
            "dual.floor_factor", dual.floor_factor.shape, f"must have {d} rows"
        )
    if k and (dual.support.min() < 0 or dual.support.max() >= count):
        raise InvalidParameterError("dual.support", dual.support, f"must index 0..{count - 1}")
    return dual


def primal_ratio(problem: CovarianceProgram, covariance: NDArray[np.float64], *,
                 chunk_map: ChunkMap | None = None) -> float:
    """Float max_j s_j^T Sigma^{-1} s_j over all vectors (inf if Sigma is not positive definite);
    ``chunk_map`` as in :func:`check`."""
    try:
        chol = sla.cholesky(covariance, lower=True)
    except (np.linalg.LinAlgError, ValueError):
        return math.inf
    lam = float(sla.eigvalsh(covariance)[0])
    _, est, _ = ratio_upper_bound(problem.source, covariance, chol, max(lam, 1e-300),
                                  chunk_map=chunk_map)
    return est


@dataclass(frozen=True)
class _Feasibility:
    """One verification pass at a covariance: bounds on max_j r_j and on lambda_min."""

    ratio_bound: float  # certified upper bound on max_j s_j^T Sigma^-1 s_j
    ratio_estimate: float  # float max_j (estimate from below, up to rounding)
    argmax: int
    lambda_low: float  # lower bound on lambda_min(Sigma)


def _feasibility(
    problem: CovarianceProgram, sigma: NDArray[np.float64], rigorous: bool,
    chunk_map: ChunkMap | None = None,
) -> _Feasibility:
    """One pass: (upper bound on max_j r_j, estimate, argmax, lower bound on lambda_min(sigma));
    (inf, inf, -1, 0) if sigma is not positive definite."""
    try:  # numpy's LAPACK wrappers: a fraction of scipy's per-call cost at small d
        chol = np.asarray(np.linalg.cholesky(sigma), dtype=np.float64)
    except (np.linalg.LinAlgError, ValueError):
        return _Feasibility(math.inf, math.inf, -1, 0.0)
    if rigorous:
        lam_low = certified_min_eigenvalue(sigma)
    else:  # float estimate: eigvalsh is accurate to ~d u ||Sigma|| in absolute terms
        ev = np.linalg.eigvalsh(sigma)
        lam_low = float(ev[0]) - 4 * sigma.shape[0] * 2.0**-53 * float(ev[-1])
        if lam_low <= 0:  # beyond the float estimate's resolution: prove a bound exactly
            lam_low = certified_min_eigenvalue(sigma)
    rbar, est, arg = ratio_upper_bound(problem.source, sigma, chol, lam_low, chunk_map=chunk_map)
    return _Feasibility(rbar, est, arg, lam_low)


def _failed(
    sigma: NDArray[np.float64], primal_residual: float, floor_residual: float, scale: float,
    rigorous: bool, tol: float, message: str,
) -> CovarianceCertificate:
    return CovarianceCertificate(
        lower=0.0, upper=math.inf, gap=math.inf, primal_residual=primal_residual,
        floor_residual=floor_residual, dual_residual=math.inf, complementarity=math.nan,
        repaired_covariance=np.array(sigma, dtype=np.float64), scale=scale, dual_value=math.nan,
        w_min=0.0, mahalanobis_sup=math.inf, attained_sup=math.inf, argmax=-1, certified=False,
        rigorous=rigorous, tol=tol, message="NOT certified: " + message,
    )


def check(
    problem: CovarianceProgram,
    covariance: object,
    dual: FactoredDual | None,
    *,
    tol: float = 1e-6,
    rigorous: bool = False,
    chunk_map: ChunkMap | None = None,
) -> CovarianceCertificate:
    """Certify a candidate optimal covariance with a factored dual.

    Parameters
    ----------
    problem : CovarianceProgram
        Vectors (array or VectorSource), W, q, eta.
    covariance : array_like, shape (d, d)
        Candidate Sigma (symmetric). A singular or indefinite Sigma is first ridged, then scaled.
    dual : FactoredDual or None
        Any factored dual; its ``support`` indexes rows of the problem's vectors. ``None`` checks
        the primal side only (lower bound 0, never certified).
    tol : float, default 1e-6
        Relative gap required for ``certified``.
    rigorous : bool, default False
        Account for every rounding error (exact arithmetic on the support, error-bounded pass).
    chunk_map : ChunkMap, optional
        Where the verification pass over the J vectors runs. By default here, chunk by chunk
        (memory bounded by one chunk, time linear in J). A :class:`~certificates.rigorous.ChunkMap`
        runs this module's per-chunk function (:func:`~certificates.rigorous.ratio_chunk`) on the
        source's chunks elsewhere, e.g. as Dask tasks that regenerate the vectors from a
        generator description; the chunks' results are combined, and every bound derived, here,
        so the certificate is the same as the single-process one.

    Returns
    -------
    CovarianceCertificate

    Notes
    -----
    Everything but the chunk function runs in this process: the d x d and support-sized
    arithmetic, the combination of the chunks (which must tile the J indices in order) and the
    repair. The checker shares no code path with the solver's pass executors. A ``chunk_map``
    is trusted to run :func:`~certificates.rigorous.ratio_chunk` on the right vectors (as the
    single-process check trusts this machine).
    """
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    tol = as_scalar("tol", tol, low=0.0)
    d, count = problem.dim, problem.count
    sigma_in = as_matrix("covariance", covariance, dim=d)
    dual = _validate_dual(dual, d, count)
    weight = np.asarray(problem.weight, dtype=np.float64)
    q, eta = float(problem.bound), float(problem.noise_floor)
    notes: list[str] = []

    # --- primal side: residuals at the given Sigma, then repair -------------------------------
    ev = np.linalg.eigvalsh(sigma_in)
    lam_min, lam_max = float(ev[0]), float(ev[-1])
    floor_residual = lam_min - eta
    sigma = sigma_in
    if lam_max <= 0:
        return _failed(sigma_in, math.inf, floor_residual, 1.0, rigorous, tol,
                       "Sigma has no positive eigenvalue: not a covariance")
    if lam_min <= 1e-13 * lam_max:
        ridge = 2.0 * max(0.0, -lam_min) + 1e-12 * lam_max
        sigma = sigma_in + ridge * np.eye(d)
        notes.append(f"singular/indefinite Sigma ridged by {ridge:.3g}")
        primal_residual = math.inf
    scale = 1.0
    repaired = None
    feas = _feasibility(problem, sigma, rigorous, chunk_map)  # the pass (one when no repair)
    if sigma is sigma_in:
        primal_residual = feas.ratio_estimate / q - 1.0
    for margin in _MARGINS:
        rbar, lam_low = feas.ratio_bound, feas.lambda_low
        floor_ok = eta == 0 or lam_low > eta
        if eta > 0 and rigorous and floor_ok:
            floor_ok = certify_psd(sigma, eta)
        if rbar < q and floor_ok:
            repaired = sigma
            break
        factor = max(1.0, rbar / q, eta / lam_low if eta > 0 and lam_low > 0 else 1.0)
        if not math.isfinite(factor):
            break
        factor *= 1.0 + margin
        scale *= factor
        sigma = sigma * factor
        feas = _feasibility(problem, sigma, rigorous, chunk_map)
    if repaired is None:
        return _failed(sigma, primal_residual, floor_residual, scale, rigorous, tol,
                       "could not make Sigma provably feasible (ill-conditioned or not PD)")
    if scale != 1.0:
        notes.append(f"Sigma scaled by {scale:.15g} to strict feasibility")
    upper = exact_trace_product(weight, repaired) if rigorous else _trace_upper(weight, repaired)

    # --- dual side -------------------------------------------------------------------------
    sup_vec = problem.source.take(dual.support) if dual.support.size else np.zeros((0, d))
    lam, u, g = dual.multipliers, dual.directions.reshape(-1, d), dual.floor_factor
    h = g @ g.T if g.size else np.zeros((d, d))
    if rigorous:
        w_min = certified_min_eigenvalue(weight)
        if w_min <= 0:
            raise InvalidParameterError("weight", weight, "could not be proven positive definite")
        lower, dval, e_norm = exact_dual_bound(sup_vec, weight, q, eta, dual, w_min)
        if e_norm > 1e-12 * w_min:  # ill-conditioned W: prove the bound in the W-metric
            lower = max(lower, exact_whitened_bound(weight, dual, dval, eta)[0])
            lower = max(lower, _refined_bound(weight, q, eta, sup_vec, dual, repaired, upper, lower,
                                              tol, w_min, rigorous=True))
    else:
        w_min = float(np.linalg.eigvalsh(weight)[0]) * (1 - 1e-10)
        lower, dval, e_norm = dual_lower_bound(sup_vec, weight, q, eta, lam, u, h, w_min)
        if e_norm > 1e-12 * w_min:  # ill-conditioned W: the whitened bounds may be sharper
            g_mat = g if g.size else np.zeros((d, 0))
            lower = max(lower, whitened_dual_bound(weight, dval, lam, u, g_mat),
                        exact_whitened_bound(weight, dual, dval, eta)[0])
            lower = max(lower, _refined_bound(weight, q, eta, sup_vec, dual, repaired, upper, lower,
                                              tol, w_min, rigorous=False))
    lower = max(0.0, lower)
    if upper > 0 and lower < upper:
        # the bounds every program satisfies (eta tr W; the largest vector's) are exact where
        # they are the optimum (closed-form cases), whatever the conditioning of W
        top = problem.source.take(np.array([feas.argmax], dtype=np.intp)) if (
            feas.argmax >= 0) else np.zeros((0, d))
        exact = closed_form_lower_bound(weight, q, eta, top, above=lower)
        if exact > lower:
            lower = exact
            notes.append("lower bound from the closed-form bounds (certificates.closed_form)")
    gap, certified = _verdict(lower, upper, tol, notes)
    # the duality gap as a complementarity sum at the repaired Sigma
    comp = float(
        np.sum(lam * (np.einsum("ij,jk,ik->i", u, repaired, u)
                      - 2 * np.einsum("ij,ij->i", u, sup_vec) + q))
    ) + float(np.sum(h * repaired)) - eta * float(np.trace(h))
    complementarity = comp / upper if upper > 0 else math.nan
    return CovarianceCertificate(
        lower=float(lower), upper=float(upper), gap=float(gap),
        primal_residual=float(primal_residual), floor_residual=float(floor_residual),
        dual_residual=float(e_norm), complementarity=float(complementarity),
        repaired_covariance=np.array(repaired, dtype=np.float64), scale=float(scale),
        dual_value=float(dval), w_min=float(w_min), mahalanobis_sup=float(feas.ratio_bound),
        attained_sup=float(feas.ratio_estimate), argmax=int(feas.argmax), certified=certified,
        rigorous=rigorous,
        tol=tol, message="; ".join(notes),
    )


def dual_cut(problem: CovarianceProgram, dual: FactoredDual) -> tuple[float, float]:
    r"""An affine minorant of the value function :math:`v(q')` from one factored dual.

    Dual feasibility (:math:`H \succeq 0`, :math:`\lambda \ge 0`,
    :math:`W - H - \sum_j\lambda_ju_ju_j^\top \succeq 0`) does not involve the bound, so a dual
    of the program at bound :math:`q`, scaled by the factor :math:`\kappa` that makes it
    feasible (as in :func:`check`'s float lower bound), bounds the program at every bound
    :math:`q'`:

    .. math::

        v(q') \ge \kappa\Big(\eta\operatorname{tr}H + 2\sum_j\lambda_ju_j^\top s_j\Big)
        - \kappa\Big(\sum_j\lambda_j\Big)q' = a - bq' .

    Returns ``(a, b)`` (``b >= 0``), rounded outward by a relative 1e-12; ``(0, 0)`` when the
    dual proves nothing. Used to bound an optimal split of a budget across programs
    (:func:`dpopt.covariance.run_design.design_run`).
    """
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    d = problem.dim
    dual = _validate_dual(dual, d, problem.count)
    weight = np.asarray(problem.weight, dtype=np.float64)
    q, eta = float(problem.bound), float(problem.noise_floor)
    sup_vec = problem.source.take(dual.support) if dual.support.size else np.zeros((0, d))
    lam, u, g = dual.multipliers, dual.directions.reshape(-1, d), dual.floor_factor
    h = g @ g.T if g.size else np.zeros((d, d))
    w_min = float(sla.eigvalsh(weight)[0]) * (1 - 1e-10)
    if not w_min > 0:
        return 0.0, 0.0
    low, dval, e_norm = dual_lower_bound(sup_vec, weight, q, eta, lam, u, h, w_min)
    if not dval > 0:
        return 0.0, 0.0
    if e_norm > 1e-12 * w_min:
        low = max(low, whitened_dual_bound(weight, dval, lam, u, g if g.size else
                                           np.zeros((d, 0))))
    kappa = max(0.0, low) / dval
    intercept = eta * float(np.trace(h)) + 2.0 * float(
        np.sum(lam * np.einsum("ij,ij->i", u, sup_vec)))
    slope = float(np.sum(lam))
    a = kappa * intercept
    return a - 1e-12 * abs(a), kappa * slope * (1.0 + 1e-12)
