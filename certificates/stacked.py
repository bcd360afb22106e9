r"""The certificate of :func:`certificates.covariance.check` for many small programs at once.

:func:`check_stacked` certifies ``n`` candidate covariances with their factored duals, one per
program, and returns for each exactly the certificate that :func:`~certificates.covariance.check`
proves (float mode): the same bounds, derived the same way, with the ``d x d`` and
support-sized arithmetic of the ``n`` programs stacked into single LAPACK calls
(``numpy.linalg`` on ``(n, d, d)`` arrays) and the verification pass over every vector of every
program one batched product. Nothing is shared between the programs but what they share as
data (the weight :math:`W` and its smallest eigenvalue, computed once); every program's proof is
complete on its own:

* **upper**: :math:`\bar r_i \ge \max_j s_{ij}^\top\Sigma_i^{-1}s_{ij}` over all of its vectors
  (:func:`certificates.rigorous.ratio_bounds`, valid for any approximate solve), the scaling to
  strict feasibility and ``upper`` :math:`= \operatorname{tr}(W\hat\Sigma_i)` rounded up;
* **lower**: :math:`D_i/(1 + \|E_i\|_F/w_{\min})` with :math:`D_i = \sum_j\lambda_{ij}
  (2u_{ij}^\top s_{ij} - q_i)` (+ :math:`\eta\operatorname{tr}H_i`), :math:`E_i = W - H_i -
  \sum_j\lambda_{ij}u_{ij}u_{ij}^\top`, and the closed-form bounds of
  :mod:`certificates.closed_form` wherever their float screen says they may be higher.

The one place the two may differ beyond summation order: several vectors attaining the sup
(the constraints active at an optimum) can tie, and the closed-form bounds are evaluated at the
vector each pass found largest; where rounding breaks the tie differently, the two checks
report two different but equally valid lower bounds.

A program the stacked arithmetic cannot settle as :func:`~certificates.covariance.check` would
in its first steps (a singular or indefinite :math:`\Sigma_i`, a repair beyond the first margin,
an ill-conditioned :math:`W` whose residual calls for the whitened bounds, vectors of another
shape, ``rigorous=True``) is certified by :func:`~certificates.covariance.check` itself, so the
result never depends on which route a program took beyond floating-point summation order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from certificates.closed_form import closed_form_lower_bound
from certificates.covariance import (
    _MARGINS,
    CovarianceCertificate,
    _trace_upper,
    _verdict,
    check,
)
from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import ArrayVectors, CovarianceProgram, FactoredDual
from certificates.rigorous import _gamma, ratio_bounds
from certificates.validate import as_scalar

__all__ = ["check_stacked"]

FloatArray = NDArray[np.float64]
_Pass = tuple[FloatArray, FloatArray, NDArray[np.intp], FloatArray, NDArray[np.bool_]]
_U = 2.0**-53


def _stackable(problems: Sequence[CovarianceProgram]) -> bool:
    """One weight, one floor and in-memory vector arrays of one shape."""
    first = problems[0]
    arrays = [p.source for p in problems]
    if not all(isinstance(a, ArrayVectors) for a in arrays):
        return False
    shape = (first.count, first.dim)
    return all(p.count == shape[0] and p.dim == shape[1] for p in problems) and all(
        p.noise_floor == first.noise_floor
        and (p.weight is first.weight or np.array_equal(np.asarray(p.weight),
                                                        np.asarray(first.weight)))
        for p in problems)


#: Numbers (J d per program) per block of the stacked pass over the vectors: its temporaries
#: stay in cache (one block of all n programs is several times slower per number).
_BLOCK_NUMBERS = 65536


def _feasibility(vectors: Sequence[FloatArray], sigma: FloatArray,
                 ev: FloatArray | None = None) -> _Pass:
    """The verification pass of n programs (``vectors[i]`` the (J, d) array of program i):
    ``(bound, estimate, argmax, lambda_low, ok)`` with ``ok`` False where Sigma_i is not
    (numerically) positive definite. The ``d x d`` algebra (``eigvalsh``, Cholesky, inverse)
    runs once on the whole stack; the pass over the vectors in blocks of programs (each block
    stacked on its own). ``ev``: the eigenvalues of ``sigma`` when already computed."""
    n = len(vectors)
    count, d = vectors[0].shape
    spectrum = np.asarray(np.linalg.eigvalsh(sigma) if ev is None else ev, dtype=np.float64)
    lam_low = spectrum[:, 0] - 4 * d * _U * spectrum[:, -1]
    ok = lam_low > 0
    safe = np.where(ok[:, None, None], sigma, np.eye(d))
    chol = np.empty_like(safe)
    try:
        chol[:] = np.linalg.cholesky(safe)
    except np.linalg.LinAlgError:  # one program at a time: a failure spoils only its own pass
        for i in range(n):
            try:
                chol[i] = np.linalg.cholesky(safe[i])
            except np.linalg.LinAlgError:
                ok[i], chol[i] = False, np.eye(d)
    # x = Sigma^{-1} s from the inverse of the Cholesky factor: any approximate solve will do,
    # ratio_bounds bounds s^T Sigma^{-1} s from the residual of whatever x it is given
    linv = np.linalg.inv(chol)
    prec = np.matmul(linv.transpose(0, 2, 1), linv)
    low = np.where(ok, lam_low, 1.0)[:, None]
    upper = np.empty((n, count))
    xs = np.empty((n, count))
    step = max(1, _BLOCK_NUMBERS // max(1, count * d))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        # one program: a view of its array (stacking would copy it)
        b = vectors[lo][None] if hi - lo == 1 else np.stack(vectors[lo:hi])
        upper[lo:hi], xs[lo:hi] = _norm_ratio_bounds(b, np.matmul(b, prec[lo:hi]),
                                                     safe[lo:hi], low[lo:hi])
    finite = np.all(np.isfinite(upper), axis=1)
    bound = np.where(finite, upper.max(axis=1), math.inf)
    arg = np.argmax(xs, axis=1)
    est = np.take_along_axis(xs, arg[:, None], axis=1)[:, 0]
    # where the norm bounds' slack is not negligible (an ill-conditioned Sigma), the
    # elementwise bounds of ratio_bounds, as check computes them
    loose = np.flatnonzero(finite & (bound > est * (1.0 + _LOOSE)))
    for i in loose.tolist():
        b = vectors[i]
        up_i, xs_i = ratio_bounds(b, b @ prec[i], safe[i], float(low[i, 0]))
        finite[i] = bool(np.all(np.isfinite(up_i)))
        bound[i] = float(up_i.max()) if finite[i] else math.inf
        arg[i] = int(np.argmax(xs_i))
        est[i] = float(xs_i[arg[i]])
    return bound, est, arg, lam_low, ok & finite


#: The relative slack of the norm bounds above which a program's pass is redone elementwise.
_LOOSE = 1e-10


def _norm_ratio_bounds(b: FloatArray, x: FloatArray, sigma: FloatArray, lam_low: FloatArray,
                       ) -> tuple[FloatArray, FloatArray]:
    r"""Error-bounded :math:`s^\top\Sigma^{-1}s` of every row of ``b`` (shape (n, J, d)) from
    approximate solves ``x``, as :func:`certificates.rigorous.ratio_bounds` (the same identity
    :math:`s^\top\Sigma^{-1}s = \hat x^\top s + \hat x^\top e + e^\top\Sigma^{-1}e \le
    \hat x^\top s + \|\hat x\|\|e\| + \|e\|^2/\lambda_{\min}`, the same rounding model) with
    the rounding of the residual and of the dot product bounded through norms instead of
    elementwise: :math:`|\mathrm{fl}(s - \Sigma\hat x) - (s - \Sigma\hat x)| \le
    \gamma_{d+1}(|s| + |\Sigma||\hat x|)` has norm at most :math:`\gamma_{d+1}(\|s\| +
    \|\Sigma\|_F\|\hat x\|)` and :math:`|\mathrm{fl}(\hat x^\top s) - \hat x^\top s| \le
    \gamma_d\|\hat x\|\|s\|` (Cauchy-Schwarz). Half the passes over the vectors; looser by
    about :math:`\gamma_d\kappa(\Sigma)` relative, which the caller checks."""
    d = sigma.shape[-1]
    g_res = _gamma(d + 1)
    g_dot = _gamma(d)
    inflate = 1.0 + _gamma(2 * d + 16)
    res = b - np.matmul(x, sigma)
    r_norm = np.sqrt(np.einsum("...j,...j->...", res, res)) * inflate
    b_norm = np.sqrt(np.einsum("...j,...j->...", b, b)) * inflate
    x_norm = np.sqrt(np.einsum("...j,...j->...", x, x)) * inflate
    s_fro = np.sqrt(np.einsum("...ij,...ij->...", sigma, sigma))[..., None] * inflate
    e_norm = (r_norm + g_res * (b_norm + s_fro * x_norm)) * inflate
    xs = np.einsum("...j,...j->...", x, b)
    upper = (xs + g_dot * x_norm * b_norm * inflate + x_norm * e_norm
             + e_norm * e_norm / lam_low) * inflate + 1e-300
    return upper, xs


def check_stacked(
    problems: Sequence[CovarianceProgram],
    covariances: Sequence[FloatArray] | FloatArray,
    duals: Sequence[FactoredDual],
    *,
    tol: float = 1e-6,
    rigorous: bool = False,
) -> list[CovarianceCertificate]:
    """Certify ``n`` candidate covariances, each with its factored dual, for ``n`` programs.

    Parameters
    ----------
    problems : sequence of CovarianceProgram
        The programs (any; those sharing W, eta and an in-memory vector array of one shape are
        checked stacked, the others one at a time).
    covariances : sequence of array_like (d, d), or an (n, d, d) array
        Candidate Sigma_i.
    duals : sequence of FactoredDual
        One factored dual per program (its ``support`` indexes that program's vectors).
    tol : float, default 1e-6
        Relative gap required for ``certified``.
    rigorous : bool, default False
        Every program through :func:`certificates.covariance.check` with ``rigorous=True``.

    Returns
    -------
    list of CovarianceCertificate
        Item ``i`` is what ``check(problems[i], covariances[i], duals[i], tol=tol)`` certifies:
        the same interval up to floating-point summation order, the same repaired covariance,
        Mahalanobis sup and ``certified`` flag.
    """
    tol = as_scalar("tol", tol, low=0.0)
    n = len(problems)
    if len(covariances) != n or len(duals) != n:
        raise InvalidParameterError("covariances/duals", (len(covariances), len(duals)),
                                    f"must hold one entry per program ({n})")
    if not n:
        return []
    for i, prob in enumerate(problems):
        if not isinstance(prob, CovarianceProgram):
            raise InvalidTypeError(f"problems[{i}]", prob, "a CovarianceProgram")
        if not isinstance(duals[i], FactoredDual):
            raise InvalidTypeError(f"duals[{i}]", duals[i], "a FactoredDual")
    if rigorous or not _stackable(problems):
        return [check(p, c, u, tol=tol, rigorous=rigorous)
                for p, c, u in zip(problems, covariances, duals, strict=True)]
    return _stacked(problems, covariances, duals, float(tol))


def _stacked(problems: Sequence[CovarianceProgram], covariances: Sequence[FloatArray] | FloatArray,
             duals: Sequence[FactoredDual], tol: float) -> list[CovarianceCertificate]:
    n = len(problems)
    first = problems[0]
    d, count = first.dim, first.count
    weight = np.asarray(first.weight, dtype=np.float64)
    eta = float(first.noise_floor)
    q = np.array([float(p.bound) for p in problems])
    sig_in = np.asarray(covariances, dtype=np.float64)
    if sig_in.shape != (n, d, d) or not np.all(np.isfinite(sig_in)):
        return [check(p, c, u, tol=tol) for p, c, u in zip(problems, covariances, duals,
                                                             strict=True)]
    vectors = [_array_of(p) for p in problems]
    # as check: a symmetric Sigma (to 1e-10 relative), symmetrised
    scale_in = np.maximum(np.max(np.abs(sig_in), axis=(1, 2)), 1e-300)
    symmetric = np.max(np.abs(sig_in - sig_in.transpose(0, 2, 1)), axis=(1, 2)) <= 1e-10 * scale_in
    sigma = 0.5 * (sig_in + sig_in.transpose(0, 2, 1))
    # a dual whose support does not index the program's vectors: check names it
    valid = symmetric & np.array([
        (u.directions.shape == (u.support.shape[0], d) or not u.support.size)
        and (u.floor_factor.shape[0] == d or not u.floor_factor.size)
        and (not u.support.size or (int(u.support.min()) >= 0
                                    and int(u.support.max()) < count))
        for u in duals])
    ev = np.linalg.eigvalsh(sigma)
    regular = valid & (ev[:, -1] > 0) & (ev[:, 0] > 1e-13 * ev[:, -1])
    bound, est, arg, lam_low, ok = _feasibility(vectors, np.where(
        regular[:, None, None], sigma, np.eye(d)), np.where(regular[:, None], ev, 1.0))
    ok &= regular
    primal_residual = est / q - 1.0
    floor_ok = (eta == 0) | (lam_low > eta)
    fine = ok & (bound < q) & floor_ok
    repaired = sigma.copy()
    scale = np.ones(n)
    retry = np.flatnonzero(ok & ~fine)
    if retry.size:  # the repair's first margin, stacked; anything beyond goes to check
        factor = np.maximum.reduce([np.ones(retry.size), bound[retry] / q[retry],
                                    np.where(eta > 0, eta / lam_low[retry], 1.0)])
        factor = factor * (1.0 + _MARGINS[0])
        trial = sigma[retry] * factor[:, None, None]
        b2, e2, a2, l2, ok2 = _feasibility([vectors[i] for i in retry.tolist()], trial)
        good = ok2 & (b2 < q[retry]) & ((eta == 0) | (l2 > eta))
        sel = retry[good]
        repaired[sel], scale[sel] = trial[good], factor[good]
        bound[sel], est[sel], arg[sel], lam_low[sel] = b2[good], e2[good], a2[good], l2[good]
        fine[sel] = True
    # the dual side, padded to the largest support (zero multipliers add exact zeros)
    w_min = float(np.linalg.eigvalsh(weight)[0]) * (1 - 1e-10)
    kmax = max(1, max(int(u.support.size) for u in duals))
    gmax = max(1, max(int(u.floor_factor.size // d) for u in duals))
    lam = np.zeros((n, kmax))
    dirs = np.zeros((n, kmax, d))
    sup = np.zeros((n, kmax, d))
    floor = np.zeros((n, d, gmax))
    for i, u in enumerate(duals):
        k = int(u.support.size)
        if not (fine[i] and k):
            continue
        lam[i, :k] = u.multipliers
        dirs[i, :k] = u.directions.reshape(-1, d)
        sup[i, :k] = vectors[i][u.support]
        if u.floor_factor.size:
            floor[i, :, : u.floor_factor.shape[1]] = u.floor_factor
    h = np.matmul(floor, floor.transpose(0, 2, 1))
    e_mat = weight - h - np.matmul(dirs.transpose(0, 2, 1) * lam[:, None, :], dirs)
    e_norm = np.sqrt(np.sum(e_mat * e_mat, axis=(1, 2)))
    dval = eta * np.trace(h, axis1=1, axis2=2) + np.sum(
        lam * (2 * np.einsum("nkd,nkd->nk", dirs, sup) - q[:, None]), axis=1)
    lower = np.maximum(0.0, dval / (1.0 + e_norm / w_min))
    # an ill-conditioned W calls for the whitened bounds of check: that program goes there
    fine &= e_norm <= 1e-12 * w_min
    upper = np.array([_trace_upper(weight, repaired[i]) if fine[i] else math.inf
                      for i in range(n)])
    # the duality gap as a complementarity sum at the repaired Sigma
    comp = np.sum(lam * (np.einsum("nkd,nde,nke->nk", dirs, repaired, dirs)
                         - 2 * np.einsum("nkd,nkd->nk", dirs, sup) + q[:, None]), axis=1) + (
        np.sum(h * repaired, axis=(1, 2)) - eta * np.trace(h, axis1=1, axis2=2))
    top = np.stack([vectors[i][j] for i, j in enumerate(np.clip(arg, 0, count - 1).tolist())])
    second = np.einsum("nd,de,ne->n", top, weight, top) / q
    out: list[CovarianceCertificate] = []
    for i in range(n):
        if not fine[i]:
            out.append(check(problems[i], covariances[i], duals[i], tol=tol))
            continue
        notes: list[str] = []
        if scale[i] != 1.0:
            notes.append(f"Sigma scaled by {scale[i]:.15g} to strict feasibility")
        low = float(lower[i])
        up = float(upper[i])
        # the closed-form bounds wherever their float screen may beat the dual's (check runs
        # the same exact evaluation; below the screen it returns at most eta tr W <= low)
        screen = low * (1.0 - 1e-3)
        if up > 0 and low < up and (eta > 0 or float(second[i]) >= screen):
            exact = closed_form_lower_bound(weight, float(q[i]), eta, top[i:i + 1], above=low)
            if exact > low:
                low = exact
                notes.append("lower bound from the closed-form bounds (certificates.closed_form)")
        gap, certified = _verdict(low, up, tol, notes)
        out.append(CovarianceCertificate(
            lower=low, upper=up, gap=float(gap), primal_residual=float(primal_residual[i]),
            floor_residual=float(ev[i, 0]) - eta, dual_residual=float(e_norm[i]),
            complementarity=float(comp[i]) / up if up > 0 else math.nan,
            repaired_covariance=np.array(repaired[i]), scale=float(scale[i]),
            dual_value=float(dval[i]), w_min=w_min, mahalanobis_sup=float(bound[i]),
            attained_sup=float(est[i]), argmax=int(arg[i]), certified=certified,
            rigorous=False, tol=tol, message="; ".join(notes)))
    return out


def _array_of(problem: CovarianceProgram) -> FloatArray:
    source = problem.source
    if not isinstance(source, ArrayVectors):  # pragma: no cover - _stackable checked it
        raise InvalidTypeError("problems", problem, "programs over in-memory arrays")
    return np.asarray(source.array, dtype=np.float64)
