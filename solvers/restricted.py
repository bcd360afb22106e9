r"""The restricted reduced dual: maximise :math:`T` on a working set by damped Newton.

For weights :math:`\mu \ge 0` on whitened atoms :math:`y_i` (rows of ``atoms``) and a PSD block
:math:`\Pi` on whitened floor directions :math:`b_a` (columns of ``floor_atoms``) with
:math:`\sum_i\mu_i + \operatorname{tr}\Pi = 1`, let
:math:`A = \sum_i \mu_i y_iy_i^\top + B\Pi B^\top` and :math:`T = \operatorname{tr}A^{1/2}`.
:math:`T` is concave with :math:`\partial T/\partial\mu_i = q_i/2`, :math:`q_i = y_i^\top
A^{-1/2}y_i`, and its Hessian follows from the Daleckii–Krein formula (the reduced dual of the
covariance program, theory page "The covariance program"). :func:`inner_solve` maximises
:math:`T` with an active set on :math:`\mu` and a log-det barrier on :math:`\Pi` driven to
zero. Used by :mod:`solvers.structured`, which grows the working set from full passes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import blas, lapack

from certificates.errors import SolverError

__all__ = ["Restricted", "RestrictedPoint", "eliminate_floor", "evaluate", "inner_solve",
           "priced_newton"]

#: The structured solver's name in ``SolverStats.solver`` and at the head of its error messages;
#: the one definition (the Dask passes, the floor block, the stacked and the structured
#: solvers import it from here).
SOLVER_NAME = "dpopt-structured"


def step_accepted(f_new: float, f0: float, predicted: float, *, clipped: bool = False) -> bool:
    """The line searches' acceptance test on a concave objective f (maximised): Armijo's
    sufficient increase ``f_new >= f0 + 1e-4 predicted`` with a few ulps of slack, or, for an
    unprojected step (``clipped`` False), a predicted increase so small that it drowns in the
    rounding of f (the quadratic convergence region: the Newton step is taken as it stands)."""
    tiny = not clipped and 0 <= predicted <= 1e-11 * abs(f0)
    return tiny or f_new >= f0 + 1e-4 * predicted - 4e-16 * abs(f0)
#: eigh of the assembled A is trusted when a_min > _EIGH_RESOLVED a_max (else SVD of its factor).
_EIGH_RESOLVED = 1e-6
#: The working set must keep a_min > _RANK_RTOL a_max (singular values resolved to ~1e-3).
_RANK_RTOL = 1e-26
#: Above this many flops for forming the Hessian (k^2 p(p+1)/2), the Newton system of the vector
#: weights is solved by preconditioned conjugate gradients on Hessian-vector products (about
#: 4 k p^2 flops each) instead of being formed.
_DIRECT_FLOPS = 1.5e9
#: In dimension 2, working sets of at most this many atoms try every pair's closed form first.
_PAIRS_MAX = 96
#: ... and, when no pair is optimal, the triples of the closest pairs with their most violated.
_TRIPLE_PAIRS = 6
_TRIPLE_THIRDS = 3
FloatArray = NDArray[np.float64]


@dataclass
class Restricted:
    """Working-set state in whitened coordinates (``y = P^T s``, weight = identity)."""

    atoms: FloatArray  # (k, p) whitened vector atoms y = P^T s
    mu: FloatArray  # (k,)
    floor_atoms: FloatArray  # (p, kE) = sqrt(q eta) P^T E, whitened floor directions
    floor_weights: FloatArray  # (kE, kE) PSD weight block Pi of the floor
    floor_rotation: FloatArray  # (kE0, kE) accumulated rotation/elimination of E
    barrier: float = 0.0  # weight of the barrier on log det Pi


@dataclass
class RestrictedPoint:
    eigvals: FloatArray  # a: eigenvalues of A(mu, Pi)
    eigvecs: FloatArray  # V
    root_trace: float  # T = tr A^{1/2}
    scores: FloatArray  # q_i of the working-set atoms
    floor_proj: FloatArray  # V^T floor_atoms
    floor_scores: FloatArray  # Q_floor: the floor block's "q" matrix (kE, kE)


@lru_cache(maxsize=64)
def _triu(n: int) -> tuple[NDArray[np.intp], NDArray[np.intp], FloatArray]:
    """Upper-triangle indices of an n x n matrix and the svec scaling (1 on the diagonal,
    sqrt 2 off it), cached: the Newton loop asks for the same few sizes every iteration."""
    i0, i1 = np.triu_indices(n)
    scale = np.where(i0 == i1, 1.0, np.sqrt(2.0))
    for arr in (i0, i1, scale):
        arr.setflags(write=False)
    return i0, i1, scale


@lru_cache(maxsize=64)
def _pair_weights(n: int) -> FloatArray:
    """sqrt(1/2) on the diagonal pairs (a, a) of :func:`_triu`, 1 off it (the Daleckii-Krein
    factor rows count each off-diagonal pair once for both orders)."""
    i0, i1, _ = _triu(n)
    out = np.where(i0 == i1, np.sqrt(0.5), 1.0)
    out.setflags(write=False)
    return out


def _vector_spectrum(atoms: FloatArray, mu: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigen-decomposition of A = sum_i mu_i y_i y_i^T (no floor block): ``eigh`` of the
    assembled matrix when it resolves the spectrum, else from the SVD of the factor."""
    amat = (atoms.T * mu) @ atoms
    a, v = np.linalg.eigh(0.5 * (amat + amat.T))
    if a[0] > _EIGH_RESOLVED * a[-1]:
        return a, v
    _, sv, vt = np.linalg.svd(atoms * np.sqrt(np.clip(mu, 0.0, None))[:, None],
                              full_matrices=True)
    a = np.zeros(atoms.shape[1])
    a[: sv.size] = sv * sv
    order = np.argsort(a)
    return a[order], vt.T[:, order]


def _vector_point(atoms: FloatArray, a: FloatArray, v: FloatArray) -> RestrictedPoint:
    """:func:`evaluate` without a floor block, from the spectrum of A."""
    if not a[0] > _RANK_RTOL * a[-1]:
        raise SolverError(
            f"{SOLVER_NAME}: the working set lost full rank (cond > {1 / _RANK_RTOL:.0e}); "
            "remedy: pass a larger working_set or use solver='clarabel'"
        )
    zs = (atoms @ v) * a**-0.25
    return RestrictedPoint(a, v, float(np.sum(np.sqrt(a))), np.einsum("ij,ij->i", zs, zs),
                           np.zeros((a.size, 0)), np.zeros((0, 0)))


def _assemble(state: Restricted, mu: FloatArray, pi: FloatArray) -> FloatArray:
    amat = (state.atoms.T * mu) @ state.atoms
    if pi.shape[0]:
        amat += state.floor_atoms @ pi @ state.floor_atoms.T
    return 0.5 * (amat + amat.T)


def _factor_spectrum(
    state: Restricted, mu: FloatArray, pi: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Eigen-decomposition of A from the SVD of its factor ``F`` (``A = F^T F``): the small
    eigenvalues come with a relative error of order ``u sqrt(a_max / a)`` instead of
    ``u a_max / a`` (ill-conditioned W, nearly degenerate sets)."""
    rows = [state.atoms * np.sqrt(np.clip(mu, 0.0, None))[:, None]]
    if pi.shape[0]:
        pw, pv = np.linalg.eigh(0.5 * (pi + pi.T))
        rows.append((state.floor_atoms @ (pv * np.sqrt(np.clip(pw, 0.0, None)))).T)
    factor = np.concatenate(rows)
    p = factor.shape[1]
    _, sv, vt = np.linalg.svd(factor, full_matrices=True)
    a = np.zeros(p)
    a[: sv.size] = sv * sv
    order = np.argsort(a)
    return a[order], vt.T[:, order]


def _spectrum(state: Restricted, mu: FloatArray, pi: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigen-decomposition of A: ``eigh`` of the assembled matrix when it resolves the
    spectrum, else from the SVD of the factor (:func:`_factor_spectrum`)."""
    a, v = np.linalg.eigh(_assemble(state, mu, pi))
    if a[0] > _EIGH_RESOLVED * a[-1]:
        return a, v
    return _factor_spectrum(state, mu, pi)


def _trace_sqrt(state: Restricted, mu: FloatArray, pi: FloatArray) -> tuple[float, float]:
    """T = tr A^{1/2} and the condition ratio a_min / a_max."""
    eig = np.linalg.eigvalsh(_assemble(state, mu, pi))
    if not eig[0] > _EIGH_RESOLVED * eig[-1]:
        eig, _ = _factor_spectrum(state, mu, pi)
    return float(np.sum(np.sqrt(np.clip(eig, 0.0, None)))), float(eig[0] / max(eig[-1], 1e-300))


def evaluate(state: Restricted) -> RestrictedPoint:
    a, v = _spectrum(state, state.mu, state.floor_weights)
    if not a[0] > _RANK_RTOL * a[-1]:
        raise SolverError(
            f"{SOLVER_NAME}: the working set lost full rank (cond > {1 / _RANK_RTOL:.0e}); "
            "remedy: pass a larger working_set or use solver='clarabel'"
        )
    a4 = a**-0.25
    zs = (state.atoms @ v) * a4
    q = np.einsum("ij,ij->i", zs, zs)
    if not state.floor_atoms.shape[1]:
        return RestrictedPoint(a, v, float(np.sum(np.sqrt(a))), q, np.zeros((a.size, 0)),
                               np.zeros((0, 0)))
    gf = v.T @ state.floor_atoms
    gs = gf * a4[:, None]
    qf = gs.T @ gs
    return RestrictedPoint(a, v, float(np.sum(np.sqrt(a))), q, gf, 0.5 * (qf + qf.T))


def _hessian_factor(
    z: FloatArray, gf: FloatArray, a: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Rows X with ``-Hessian = X X^T`` (Daleckii–Krein), vectors first, then svec(Pi) entries."""
    p = a.shape[0]
    rt = np.sqrt(a)
    i0, i1, _ = _triu(p)
    gam = 1.0 / (rt[i0] * rt[i1] * (rt[i0] + rt[i1]))
    w = np.sqrt(np.where(i0 == i1, 0.5 * gam, gam))
    xv = z[:, i0] * z[:, i1] * w
    n_floor = gf.shape[1]
    if n_floor == 0:
        return xv, np.empty((0, xv.shape[1]))
    e0, e1, _ = _triu(n_floor)
    # (g_a g_b^T + g_b g_a^T)/sqrt2 for a < b; g_a g_a^T for a = b, entries (c, e) of the p-pairs
    sym = gf[i0][:, e0] * gf[i1][:, e1] + gf[i0][:, e1] * gf[i1][:, e0]
    scale = np.where(e0 == e1, 0.5, 1.0 / np.sqrt(2.0))
    rows_floor = (sym * scale).T * w
    return xv, rows_floor


def _svec(mat: FloatArray) -> FloatArray:
    i0, i1, scale = _triu(mat.shape[0])
    return scale * mat[i0, i1]


def _smat(vec: FloatArray, n: int) -> FloatArray:
    i0, i1, scale = _triu(n)
    out = np.zeros((n, n))
    vals = vec / scale
    out[i0, i1] = vals
    out[i1, i0] = vals
    return out


def _psd_step_limit(pi: FloatArray, step_pi: FloatArray) -> float:
    """Largest alpha with ``pi + alpha * step_pi`` PSD (pi positive definite)."""
    w, v = np.linalg.eigh(pi)
    h = v / np.sqrt(w)
    x = h.T @ step_pi @ h
    m = float(np.linalg.eigvalsh(0.5 * (x + x.T))[0])
    return np.inf if m >= 0 else -1.0 / m


def _cho(mat: FloatArray, tau: float) -> FloatArray:
    """Lower Cholesky factor (LAPACK potrf, little overhead), larger ridge if the first fails."""
    c, info = lapack.dpotrf(mat, lower=1, clean=0)
    if info != 0:
        c, info = lapack.dpotrf(mat + 1e3 * tau * np.eye(mat.shape[0]), lower=1, clean=0)
        if info != 0:
            raise SolverError(
                f"{SOLVER_NAME}: the Newton system is not positive definite (degenerate working "
                "set); remedy: rescale the vectors"
            )
    return np.asarray(c)


def _cho_solve(c: FloatArray, rhs: FloatArray) -> FloatArray:
    x, info = lapack.dpotrs(c, rhs, lower=1)
    if info != 0:  # pragma: no cover - only on invalid arguments
        raise SolverError(f"{SOLVER_NAME}: potrs failed (info {info})")
    return np.asarray(x)


def _rotate_floor(state: Restricted, point: RestrictedPoint) -> None:
    """Rotate the floor basis to the eigenbasis of Pi (Pi becomes diagonal); updates ``point``."""
    w, qv = np.linalg.eigh(0.5 * (state.floor_weights + state.floor_weights.T))
    state.floor_weights = np.diag(w)
    state.floor_atoms = state.floor_atoms @ qv
    state.floor_rotation = state.floor_rotation @ qv
    point.floor_proj = point.floor_proj @ qv
    point.floor_scores = qv.T @ point.floor_scores @ qv


def _syrk(rows: FloatArray) -> FloatArray:
    """``rows @ rows.T`` by the symmetric rank-k update (half the flops of a GEMM)."""
    if rows.shape[0] == 0:
        return np.zeros((0, 0))
    # rows.T is Fortran-ordered (no copy); C starts at zero, so the strict upper part stays 0
    low = np.asarray(blas.dsyrk(1.0, rows.T, trans=1, lower=1))
    full = low + low.T
    full.flat[:: full.shape[0] + 1] *= 0.5
    return full


def _projected_newton(state: Restricted, tol: float, max_iter: int) -> tuple[RestrictedPoint, int]:
    r"""Projected Newton (Bertsekas) on the vector weights (no floor block).

    :math:`T` is positively homogeneous of degree 1/2, so maximising :math:`T` on the simplex is
    maximising :math:`f(\mu) = 2T(\mu) - \sum_i\mu_i` over :math:`\mu \ge 0` (the best
    multiple of any :math:`\nu` on the simplex is :math:`T(\nu)^2\nu`, where
    :math:`f = T(\nu)^2`). Without the equality constraint the bounds are handled by projection:
    a Newton step on the free weights, weights (nearly) at zero with a non-positive gradient
    driven to zero, and an Armijo search along the projected arc :math:`\max(0, \mu +
    \alpha\delta)`, so any number of weights may reach zero in one step (an active-set method
    drops one per step). Every iterate is rescaled to :math:`T(\nu)^2\nu`, where the gradient
    is :math:`q_i/T - 1` and the restricted KKT gap is :math:`\max_i q_i/T - 1`. The Newton
    system is formed and factored (:func:`_syrk`, Cholesky) while that is cheap, else solved by
    conjugate gradients on Hessian-vector products (:func:`_newton_cg`).
    """
    atoms = state.atoms
    exact = _closed_form(atoms)
    if exact is not None:
        mu_before = state.mu
        state.mu = exact
        try:
            point = evaluate(state)
        except SolverError:
            state.mu = mu_before
            point = evaluate(state)
        else:
            if float(point.scores.max()) / point.root_trace - 1.0 <= tol:
                return point, 1  # certified below by the same KKT test as Newton's
    else:
        point = evaluate(state)
    it = 0
    stall = 0
    while it < max_iter:
        it += 1
        t = point.root_trace
        grad = point.scores / t - 1.0
        kkt = float(grad.max())
        if kkt <= tol:
            break
        scale = t * t
        mu = scale * state.mu
        k = mu.size
        # epsilon-active set: weights (nearly) at zero that the gradient pushes out
        positive = mu > 0
        residual = float(np.max(np.where(positive, np.abs(grad), np.maximum(grad, 0.0))))
        eps = min(1e-4, residual) * scale / k
        active = (mu <= eps) & (grad <= 0)
        idx = np.flatnonzero(~active)
        z = atoms[idx] @ point.eigvecs
        p = z.shape[1]
        step = np.zeros(k)
        if idx.size**2 * p * (p + 1) / 2 > _DIRECT_FLOPS:
            step[idx] = _newton_cg(z, scale * point.eigvals, grad[idx], min(0.1, np.sqrt(kkt)))
        else:
            i0, i1, _ = _triu(p)
            rt = np.sqrt(scale * point.eigvals)
            # Daleckii-Krein factor rows (as _hessian_factor), 2x: the Hessian of 2T
            w = _pair_weights(p) * np.sqrt(2.0 / (rt[i0] * rt[i1] * (rt[i0] + rt[i1])))
            rows = z[:, i0] * z[:, i1] * w
            hess = rows @ rows.T if idx.size <= 256 else 2.0 * _syrk(rows / np.sqrt(2.0))
            tau = 1e-12 * max(float(np.max(hess.diagonal())), 1e-300) + 1e-300
            hess.flat[:: hess.shape[0] + 1] += tau
            step[idx] = _cho_solve(_cho(hess, tau), grad[idx])
        step[active] = -mu[active]
        # a step may not collapse the conditioning of A by more than 1e6 (near a singular A the
        # gradient is unbounded: the optimum has full rank, and the next step would come back)
        cond_floor = max(_RANK_RTOL * 10, 1e-6 * float(point.eigvals[0] / point.eigvals[-1]))
        f0 = scale  # f = 2T - sum mu = T(nu)^2 at the rescaled point
        # with more free weights than p(p+1)/2 the Hessian is singular and the (ridged) Newton
        # step is huge along its null space; no weight can usefully move by more than the total
        # mass sum mu = T^2, so the search starts there instead of halving down from 1 (a
        # Newton step near the optimum is far smaller and starts at 1 as before)
        longest = float(np.max(np.abs(step))) if k else 0.0
        alpha = min(1.0, scale / longest) if longest > 0 else 1.0
        accepted = False
        for _ in range(60):
            mu_new = np.maximum(mu + alpha * step, 0.0)
            predicted = float(grad @ (mu_new - mu))
            total = float(mu_new.sum())
            # the spectrum of the trial point is the next iterate's (A scales with 1 / total)
            a_new, v_new = _vector_spectrum(atoms, mu_new)
            t_new = float(np.sum(np.sqrt(np.clip(a_new, 0.0, None))))
            cond = float(a_new[0] / max(a_new[-1], 1e-300))
            f_new = 2.0 * t_new - total
            if cond > cond_floor and total > 0 and step_accepted(f_new, f0, predicted):
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            break
        state.mu = mu_new / total
        point = _vector_point(atoms, a_new / total, v_new)
        if point.root_trace <= t * (1 + 1e-15):
            stall += 1
            if stall > 8:
                break
        else:
            stall = 0
    return point, it


def _closed_form(atoms: FloatArray) -> FloatArray | None:
    """The restricted optimum in closed form where one exists for small dimensions (p <= 3):
    two atoms in the plane, or exactly p(p+1)/2 atoms all active; ``None`` otherwise (the
    caller checks the KKT conditions of whatever is returned, and runs Newton from it if they
    do not hold)."""
    k, p = atoms.shape
    if p == 2 and k == 2:
        return _two_atoms_in_the_plane(atoms)
    if p == 2 and 2 < k <= _PAIRS_MAX:
        pair, excess = _best_pair_in_the_plane(atoms)
        if excess <= 1e-12 or k != 3:
            return pair
        return _all_atoms_active(atoms) if k == 3 else pair
    if p <= 3 and k == p * (p + 1) // 2:
        return _all_atoms_active(atoms)
    return None


def _best_pair_in_the_plane(atoms: FloatArray) -> tuple[FloatArray | None, float]:
    r"""The restricted optimum in dimension 2 when two atoms carry it: every pair's exact
    optimum (:func:`_two_atoms_in_the_plane`, vectorised over the :math:`k(k-1)/2` pairs),
    the one whose scores :math:`q_j = y_j^\top A^{-1/2}y_j` of ALL k atoms exceed its
    :math:`T` least (at the optimum of the whole working set none does: the KKT conditions).
    For a 2 x 2 matrix :math:`A^{1/2} = (A + \sqrt{\det A}\,I)/T` with
    :math:`T = \sqrt{\operatorname{tr}A + 2\sqrt{\det A}}`, so
    :math:`A^{-1/2} = \operatorname{adj}(A^{1/2})/\sqrt{\det A}`. Returns the weights and
    their excess :math:`\max_j q_j/T - 1` (``(None, inf)`` when every pair is (nearly)
    parallel); the caller checks the KKT conditions of the returned weights and runs Newton
    from them if they do not hold (an optimum on three atoms)."""
    k = atoms.shape[0]
    i, j = np.triu_indices(k, 1)
    y1, y2 = atoms[i], atoms[j]
    a = np.einsum("ij,ij->i", y1, y1)
    b = np.einsum("ij,ij->i", y2, y2)
    c = y1[:, 0] * y2[:, 1] - y1[:, 1] * y2[:, 0]
    h = 0.5 * (a - b)
    r = np.hypot(h, c)
    ok = np.abs(c) > 1e-6 * np.maximum(a, b)
    if not np.any(ok):
        return None, np.inf
    i, j, y1, y2, h, c, r = i[ok], j[ok], y1[ok], y2[ok], h[ok], c[ok], r[ok]
    small = c * c / (2.0 * r * (r + np.abs(h)))
    m1 = np.where(h >= 0, 1.0 - small, small)
    m2 = 1.0 - m1
    # A = m1 y1 y1^T + m2 y2 y2^T; det A = m1 m2 c^2
    a00 = m1 * y1[:, 0] ** 2 + m2 * y2[:, 0] ** 2
    a11 = m1 * y1[:, 1] ** 2 + m2 * y2[:, 1] ** 2
    a01 = m1 * y1[:, 0] * y1[:, 1] + m2 * y2[:, 0] * y2[:, 1]
    root_det = np.sqrt(m1 * m2) * np.abs(c)
    t = np.sqrt(a00 + a11 + 2.0 * root_det)
    # A^{-1/2} = adj((A + sqrt(det) I) / T) / sqrt(det)
    n00 = (a11 + root_det) / (t * root_det)
    n11 = (a00 + root_det) / (t * root_det)
    n01 = -a01 / (t * root_det)
    x, y = atoms[:, 0], atoms[:, 1]
    q = (n00[:, None] * x * x + 2.0 * n01[:, None] * x * y + n11[:, None] * y * y)
    excess = np.max(q, axis=1) / t - 1.0
    excess = np.where(np.isfinite(excess), excess, np.inf)
    best = int(np.argmin(excess))
    if not np.isfinite(excess[best]):
        return None, np.inf
    mu = np.zeros(k)
    mu[i[best]], mu[j[best]] = m1[best], m2[best]
    if excess[best] <= 1e-12 or k < 3:
        return mu, float(excess[best])
    # three atoms carry the optimum: the closest pairs with each of their most violated atoms
    close = np.argsort(excess)[:_TRIPLE_PAIRS]
    third = np.argsort(-q[close], axis=1)[:, :_TRIPLE_THIRDS]
    triples = np.sort(np.stack([np.repeat(i[close], third.shape[1]),
                                np.repeat(j[close], third.shape[1]), third.ravel()], axis=1),
                      axis=1)
    triples = np.unique(triples[(triples[:, 0] != triples[:, 1])
                                & (triples[:, 1] != triples[:, 2])], axis=0)
    found = _three_atoms_in_the_plane(atoms, triples)
    if found is None:
        return mu, float(excess[best])
    return found, 0.0


def _three_atoms_in_the_plane(atoms: FloatArray, triples: NDArray[np.intp]
                              ) -> FloatArray | None:
    r""":func:`_all_atoms_active` for many triples of atoms in the plane at once, the KKT test
    over ALL atoms included: for each triple, :math:`N = A^{-1/2}/T` from the three equations
    :math:`y_i^\top Ny_i = 1`, valid when :math:`N \succ 0`, the weights of
    :math:`A = N^{-2}/\operatorname{tr}N^{-1}` are positive and every atom has
    :math:`y_j^\top Ny_j \le 1 + 10^{-12}` (:math:`q_j \le T`). Returns the weights of a valid
    triple (the largest T), ``None`` when none is."""
    if not triples.size:
        return None
    y = atoms[triples]  # (m, 3, 2)
    rows = np.stack([y[..., 0] ** 2, math.sqrt(2.0) * y[..., 0] * y[..., 1], y[..., 1] ** 2],
                    axis=-1)  # svec(y y^T), (m, 3, 3)
    det = np.linalg.det(rows)
    ok = np.abs(det) > 1e-12 * np.max(np.abs(rows), axis=(1, 2)) ** 3
    if not np.any(ok):
        return None
    rows, triples = rows[ok], triples[ok]
    nvec = np.linalg.solve(rows, np.ones((rows.shape[0], 3, 1)))[..., 0]
    n00, n01, n11 = nvec[:, 0], nvec[:, 1] / math.sqrt(2.0), nvec[:, 2]
    ndet = n00 * n11 - n01 * n01
    pos = (ndet > 1e-12 * (n00 + n11) ** 2) & (n00 + n11 > 0)
    # N^{-1} = adj(N) / det N; A = N^{-2} / tr N^{-1}
    i00, i01, i11 = n11 / ndet, -n01 / ndet, n00 / ndet
    tr_inv = i00 + i11
    a00 = (i00 * i00 + i01 * i01) / tr_inv
    a01 = (i00 * i01 + i01 * i11) / tr_inv
    a11 = (i01 * i01 + i11 * i11) / tr_inv
    avec = np.stack([a00, math.sqrt(2.0) * a01, a11], axis=1)
    mu = np.linalg.solve(rows.transpose(0, 2, 1), avec[:, :, None])[..., 0]
    x, yy = atoms[:, 0], atoms[:, 1]
    score = n00[:, None] * x * x + 2.0 * n01[:, None] * x * yy + n11[:, None] * yy * yy
    valid = pos & np.all(mu > 0, axis=1) & np.all(score <= 1.0 + 1e-12, axis=1)
    valid &= np.all(np.isfinite(mu), axis=1)
    if not np.any(valid):
        return None
    pick = int(np.flatnonzero(valid)[np.argmax(tr_inv[valid])])
    out = np.zeros(atoms.shape[0])
    out[triples[pick]] = mu[pick] / float(mu[pick].sum())
    return out


def _all_atoms_active(atoms: FloatArray) -> FloatArray | None:
    r"""The restricted optimum of exactly :math:`p(p+1)/2` atoms when every one is active.

    Active atoms all have :math:`q_i = y_i^\top A^{-1/2} y_i = T`, so :math:`N = A^{-1/2}/T`
    solves the :math:`p(p+1)/2` linear equations :math:`y_i^\top N y_i = 1`; then
    :math:`T^2 = \operatorname{tr}N^{-1}`, :math:`A = N^{-2}/\operatorname{tr}N^{-1}`, and the
    weights solve :math:`\sum_i \mu_i y_iy_i^\top = A` (they sum to 1 since
    :math:`\sum_i\mu_iq_i = T`). Valid when :math:`N \succ 0` and every :math:`\mu_i > 0`
    (then the KKT conditions hold); ``None`` otherwise."""
    p = atoms.shape[1]
    i0, i1, scale = _triu(p)
    rows = atoms[:, i0] * atoms[:, i1] * scale  # svec(y_i y_i^T)
    try:
        n_mat = _smat(np.asarray(np.linalg.solve(rows, np.ones(rows.shape[0])),
                                 dtype=np.float64), p)
        w, v = np.linalg.eigh(n_mat)
        if not w[0] > 1e-12 * w[-1]:
            return None
        a_mat = (v / (w * w)) @ v.T / float(np.sum(1.0 / w))
        mu = np.linalg.solve(rows.T, _svec(0.5 * (a_mat + a_mat.T)))
    except np.linalg.LinAlgError:
        return None
    if not (np.all(np.isfinite(mu)) and np.all(mu > 0)):
        return None
    return np.asarray(mu / float(mu.sum()), dtype=np.float64)


def _two_atoms_in_the_plane(atoms: FloatArray) -> FloatArray | None:
    r"""The exact maximiser of :math:`T` over two atoms in dimension 2.

    With :math:`\mu_1 = \cos^2\theta`, :math:`T^2 = \operatorname{tr}A + 2\sqrt{\det A} =
    a\cos^2\theta + b\sin^2\theta + |c|\sin 2\theta` for :math:`a = |y_1|^2`,
    :math:`b = |y_2|^2`, :math:`c = y_1 \times y_2`, i.e. :math:`(a + b)/2 + h\cos 2\theta +
    |c|\sin 2\theta` with :math:`h = (a - b)/2`, largest at :math:`\cos 2\theta = h/R`,
    :math:`R = \sqrt{h^2 + c^2}`: :math:`\mu = ((1 + h/R)/2, (1 - h/R)/2)`, the smaller weight
    computed as :math:`c^2/(2R(R + |h|))` (no cancellation). ``None`` when the atoms are
    (nearly) parallel (the optimum would be singular)."""
    y1, y2 = atoms[0], atoms[1]
    a = float(y1 @ y1)
    b = float(y2 @ y2)
    c = float(y1[0] * y2[1] - y1[1] * y2[0])
    h = 0.5 * (a - b)
    r = math.hypot(h, c)
    if not abs(c) > 1e-6 * max(a, b):
        return None
    small = c * c / (2.0 * r * (r + abs(h)))  # the smaller weight, without cancellation
    return np.array([1.0 - small, small] if h >= 0 else [small, 1.0 - small])


def _newton_cg(z: FloatArray, a: FloatArray, grad: FloatArray, rtol: float) -> FloatArray:
    r"""Solve :math:`(-\nabla^2 2T)\,\delta = g` by Jacobi-preconditioned conjugate gradients.

    In the eigenbasis of :math:`A` (rows :math:`z_i` of ``z``, eigenvalues ``a``) the
    Daleckii–Krein formula gives the Hessian-vector product
    :math:`(-\nabla^2 2T\,v)_i = z_i^\top(\Gamma\circ Z^\top\operatorname{diag}(v)Z)z_i` with
    :math:`\Gamma_{ab} = 1/(r_ar_b(r_a + r_b))`, :math:`r = \sqrt a`: about :math:`4kp^2`
    flops instead of :math:`k^2p^2/2` for forming the Hessian. Stops at relative residual
    ``rtol`` (an inexact Newton step: the projected search only needs an ascent direction, and
    every CG iterate of a positive definite system is one).
    """
    rt = np.sqrt(a)
    return newton_cg_kernel(z, 1.0 / (rt[:, None] * rt[None, :] * (rt[:, None] + rt[None, :])),
                            grad, rtol)


def newton_cg_kernel(z: FloatArray, gam: FloatArray, grad: FloatArray,
                     rtol: float, ridge: float = 0.0) -> FloatArray:
    r"""Jacobi-preconditioned CG for :math:`H\delta = g` with
    :math:`(Hv)_i = z_i^\top(\Gamma\circ Z^\top\operatorname{diag}(v)Z)z_i` for a given
    divided-difference kernel :math:`\Gamma` (the Hessian of a spectral function
    :math:`\operatorname{tr}\varphi(M(\mu))` in the eigenbasis of :math:`M`), plus ``ridge``
    on the diagonal."""
    zz = z * z
    diag = np.einsum("ij,ij->i", zz @ gam, zz)
    tau = max(1e-12 * max(float(diag.max()), 1e-300), ridge) + 1e-300
    diag = diag + tau

    def hess(v: FloatArray) -> FloatArray:
        dmat = (z.T * v) @ z
        return np.asarray(np.einsum("ij,ij->i", z @ (gam * dmat), z) + tau * v)

    return jacobi_cg(hess, grad, diag, rtol)


def jacobi_cg(hess: Callable[[FloatArray], FloatArray], rhs: FloatArray, diag: FloatArray,
              rtol: float) -> FloatArray:
    """Jacobi-preconditioned conjugate gradients for ``hess(x) = rhs`` (``hess`` a positive
    definite operator, ``diag`` its preconditioning diagonal), stopped at relative residual
    ``rtol``, on non-positive curvature, or after ``max(50, min(500, n))`` iterations; every
    iterate of a positive definite system is an ascent direction, so an early stop is safe."""
    x = np.zeros_like(rhs)
    r = rhs.copy()
    y = r / diag
    d = y.copy()
    ry = float(r @ y)
    stop = rtol * float(np.linalg.norm(rhs))
    for _ in range(max(50, min(500, rhs.size))):
        hd = hess(d)
        curv = float(d @ hd)
        if not curv > 0:
            break
        alpha = ry / curv
        x += alpha * d
        r -= alpha * hd
        if float(np.linalg.norm(r)) <= stop:
            break
        y = r / diag
        ry_new = float(r @ y)
        d = y + (ry_new / ry) * d
        ry = ry_new
    return x


def inner_solve(state: Restricted, tol: float, max_iter: int) -> tuple[RestrictedPoint, int]:
    """Damped Newton for max T on the working set.

    Vector weights are handled by an active set (ratio test, atoms enter when ``q_i > T``); the
    floor block ``Pi`` by a log-det barrier ``tb * log det Pi`` driven to zero (its Hessian is
    diagonal in Pi's eigenbasis), so the range of ``Pi`` can rotate freely. Stops when the
    restricted KKT gap ``max(q_i, lambda_max(Q_floor))/T - 1`` and the barrier gap
    ``2 tb kE / T`` are both below ``tol``.
    """
    if state.floor_weights.shape[0] == 0:
        return _projected_newton(state, tol, max_iter)
    point = evaluate(state)
    it = 0
    stall = 0
    for it in range(1, max_iter + 1):
        t = point.root_trace
        n_floor = state.floor_weights.shape[0]
        if n_floor:
            _rotate_floor(state, point)
        floor_diag = np.diag(state.floor_weights).copy() if n_floor else np.zeros(0)
        floor_score_max = float(np.linalg.eigvalsh(point.floor_scores)[-1]) if n_floor else -np.inf
        kkt_vectors = float(point.scores.max()) / t - 1.0
        kkt = max(kkt_vectors, floor_score_max / t - 1.0)
        if n_floor and it == 1:
            # (re)start the barrier at a weight matched to the current KKT error and lift the
            # floor weights that fell far below their central value 2 tb / (2 nu - Qf_aa)
            state.barrier = 0.1 * max(kkt, tol) * t / n_floor
            slack = t + 2.0 * state.barrier * n_floor - np.diag(point.floor_scores)
            central = np.where(
                slack > 0, 2.0 * state.barrier / np.maximum(slack, 1e-300), floor_diag
            )
            lift = np.maximum(floor_diag, np.minimum(0.5 * central, float(floor_diag.max())))
            if np.any(lift > floor_diag):
                state.floor_weights = np.diag(lift)
                total = float(state.mu.sum() + lift.sum())
                state.mu, state.floor_weights = state.mu / total, state.floor_weights / total
                point = evaluate(state)
                _rotate_floor(state, point)
                t = point.root_trace
                floor_diag = np.diag(state.floor_weights).copy()
                floor_score_max = float(np.linalg.eigvalsh(point.floor_scores)[-1])
                kkt_vectors = float(point.scores.max()) / t - 1.0
                kkt = max(kkt_vectors, floor_score_max / t - 1.0)
        if n_floor:
            # path following: shrink the barrier only at a (nearly) central point, where
            # pi_a (T + 2 tb kE - Qf_aa) = 2 tb for every floor direction a
            slack_diag = t + 2.0 * state.barrier * n_floor - np.diag(point.floor_scores)
            cen = floor_diag * slack_diag / (2.0 * state.barrier)
            off = point.floor_scores - np.diag(np.diag(point.floor_scores))
            centred = (
                bool(np.all((cen > 0.25) & (cen < 4.0)))
                and float(point.scores.max()) <= t + 3.0 * state.barrier * n_floor + tol * t
                and float(np.max(np.abs(off))) <= 2.0 * max(2.0 * state.barrier * n_floor, tol * t)
            )
            if centred and 2.0 * state.barrier * n_floor / t > 0.5 * tol:
                state.barrier = max(0.03 * state.barrier, 0.2 * tol * t / n_floor)
        bar_gap = 2.0 * state.barrier * n_floor / t if n_floor else 0.0
        if kkt <= tol and bar_gap <= tol:
            break
        # 2 nu at the barrier optimum
        t_central = t + 2.0 * state.barrier * n_floor if n_floor else t
        free = (state.mu > 0) | (point.scores > t_central * (1.0 + 1e-14))
        z = state.atoms @ point.eigvecs
        e0, e1, _ = _triu(n_floor)
        grad = np.concatenate([0.5 * point.scores, 0.5 * _svec(point.floor_scores)])
        if n_floor:
            grad[state.mu.size :] += np.where(e0 == e1, state.barrier / floor_diag[e0], 0.0)
        barrier_hess = state.barrier / (floor_diag[e0] * floor_diag[e1]) if n_floor else np.zeros(0)
        simplex_floor = (e0 == e1).astype(float)
        cand = np.flatnonzero(free)
        rows_vec, rows_floor = _hessian_factor(z[cand], point.floor_proj, point.eigvals)
        rows = np.concatenate([rows_vec, rows_floor]) if rows_floor.shape[0] else rows_vec
        # -Hessian on every candidate coordinate, formed once per iteration
        neg_hessian = rows @ rows.T
        n_cand = cand.size
        tau = 1e-13 * max(float(np.max(np.diag(neg_hessian))), 1e-300) + 1e-300
        neg_hessian.flat[:: neg_hessian.shape[0] + 1] += tau
        grad_floor = grad[state.mu.size :]
        # block elimination of the floor block (shared by every active-set re-solve): the Schur
        # complement of a subset of vector atoms is the principal submatrix of the full one
        if n_floor:
            neg_hessian[n_cand:, n_cand:][np.diag_indices(barrier_hess.size)] += barrier_hess
            chol_floor = _cho(neg_hessian[n_cand:, n_cand:], tau)
            k_vf = neg_hessian[:n_cand, n_cand:]
            y = _cho_solve(chol_floor, np.ascontiguousarray(k_vf.T))
            wf1 = _cho_solve(chol_floor, grad_floor)
            wf2 = _cho_solve(chol_floor, simplex_floor)
            schur = neg_hessian[:n_cand, :n_cand] - k_vf @ y
            rv1 = grad[cand] - k_vf @ wf1
            rv2 = 1.0 - k_vf @ wf2
        else:
            schur = neg_hessian
            rv1 = grad[cand]
            rv2 = np.ones(n_cand)
        for _ in range(state.mu.size + 1):
            idx = np.flatnonzero(free)
            sub = np.searchsorted(cand, idx)
            if sub.size:
                chol_s = _cho(schur[np.ix_(sub, sub)], tau)
                av1 = _cho_solve(chol_s, rv1[sub])
                av2 = _cho_solve(chol_s, rv2[sub])
            else:
                av1 = av2 = np.zeros(0)
            if n_floor:
                a1 = np.concatenate([av1, wf1 - y[:, sub] @ av1])
                a2 = np.concatenate([av2, wf2 - y[:, sub] @ av2])
            else:
                a1, a2 = av1, av2
            g = np.concatenate([grad[idx], grad_floor])
            kap = np.concatenate([np.ones(idx.size), simplex_floor])
            nu = float(kap @ a1) / float(kap @ a2)
            step = a1 - nu * a2
            step_v = step[: idx.size]
            bad = (state.mu[idx] <= 0) & (step_v < 0)
            if not np.any(bad):
                break
            free[idx[bad]] = False
        delta_v = np.zeros_like(state.mu)
        delta_v[idx] = step_v
        delta_f = step[idx.size :]
        slope = float(g @ step)
        # ratio tests: vector weights stay >= 0, the floor block stays positive definite
        neg = delta_v < 0
        alpha_v = float(np.min(-state.mu[neg] / delta_v[neg])) if np.any(neg) else np.inf
        step_pi = _smat(delta_f, n_floor) if n_floor else np.zeros((0, 0))
        alpha_f = _psd_step_limit(state.floor_weights, step_pi) if n_floor else np.inf
        # first try projecting the weights (clipped at zero, then the point renormalised: T is
        # homogeneous), so any number of them may leave in one step; if that search fails, the
        # step stopped at the first weight to reach zero. The floor block keeps to the interior
        # by its ratio test either way.
        merit0 = t + (state.barrier * float(np.sum(np.log(floor_diag))) if n_floor else 0.0)
        accepted = False
        limits = [min(1.0, 0.99 * alpha_f)]
        if alpha_v < limits[0]:
            limits.append(min(1.0, alpha_v, 0.99 * alpha_f))
        for start in limits:
            alpha = start
            for _ in range(60):
                mu_new = state.mu + alpha * delta_v
                if alpha == alpha_v:
                    ratio = -state.mu / np.where(neg, delta_v, -1.0)
                    mu_new[neg & (ratio <= alpha * (1 + 1e-12))] = 0.0
                clipped = bool(np.any(mu_new < 0))
                mu_new = np.clip(mu_new, 0.0, None)
                pi_new = state.floor_weights + alpha * step_pi
                t_new, cond = _trace_sqrt(state, mu_new, pi_new)
                total = float(mu_new.sum() + np.trace(pi_new))
                t_new /= np.sqrt(total)
                merit = t_new
                if n_floor:
                    lp = np.linalg.eigvalsh(pi_new / total)
                    merit = t_new + state.barrier * float(np.sum(np.log(np.maximum(lp, 1e-300))))
                # near the optimum the predicted increase (~slope/2) drowns in the rounding of
                # T: then an unprojected Newton step is accepted as it stands (quadratic
                # convergence region); a projected one must show its increase
                tiny = slope <= 1e-11 * abs(merit0) and not clipped
                armijo = merit >= merit0 + 1e-4 * alpha * slope - 4e-16 * abs(merit0)
                if cond > _RANK_RTOL * 10 and (tiny or armijo):
                    accepted = True
                    break
                alpha *= 0.5
            if accepted:
                break
        if not accepted:
            stall += 1
            break
        total = float(mu_new.sum() + np.trace(pi_new))
        state.mu = mu_new / total
        state.floor_weights = pi_new / total
        if n_floor:
            eliminate_floor(state)
        point = evaluate(state)
        if t_new <= t * (1 + 1e-15) and (not n_floor or bar_gap <= tol):
            stall += 1
            if stall > 8:
                break
        else:
            stall = 0
    return point, it


def eliminate_floor(state: Restricted) -> None:
    """Rotate the floor block to Pi's eigenbasis and drop directions whose weight vanished."""
    w, qv = np.linalg.eigh(0.5 * (state.floor_weights + state.floor_weights.T))
    keep = w > 1e-15 * max(float(w[-1]), 1e-300)
    if np.all(keep):
        return
    qv = qv[:, keep]
    state.floor_weights = np.diag(w[keep])
    state.floor_atoms = state.floor_atoms @ qv
    state.floor_rotation = state.floor_rotation @ qv


def _fast_spectrum(atoms: FloatArray, mu: FloatArray) -> tuple[FloatArray, FloatArray]:
    """:func:`_vector_spectrum` by LAPACK ``dsyevd`` called directly (a third of
    ``np.linalg.eigh``'s per-call cost on the small matrices of :func:`priced_newton`); the SVD
    of the factor when the eigenvalues are not resolved."""
    a, v, info = lapack.dsyevd((atoms.T * mu) @ atoms, compute_v=1, lower=1)
    if info == 0 and a[0] > _EIGH_RESOLVED * a[-1]:
        return a, v
    return _vector_spectrum(atoms, mu)


def priced_newton(
    whitened: FloatArray, mu: FloatArray, tol: float, add: int, max_iter: int = 100
) -> tuple[FloatArray, RestrictedPoint, float, int] | None:
    r"""Projected Newton over ALL vectors at once, priced at every step (no restricted solves).

    For a small in-memory program (rows :math:`y_j` of ``whitened``, :math:`J` of them) every
    iterate prices all vectors, :math:`q_j = |A^{-1/4}V^\top y_j|^2` (one :math:`J \times p`
    product), so the gap :math:`\max_j q_j/T - 1` of the whole program, the certificate's, is
    known at every step. The Newton step of :func:`_projected_newton` (the same function
    :math:`f(\mu) = 2T(\mu) - \sum_j\mu_j` over :math:`\mu \ge 0`, its Daleckii–Krein Hessian
    and projected Armijo search) runs on the free weights: the support, less the weights the
    gradient drives to zero, plus the ``add`` most violated vectors (:math:`q_j > T`) outside
    it. This is column generation with one Newton step per restricted solve: the working set is
    updated from the certified pricing at every iterate instead of after a restricted solve
    to tolerance, so the inexact early solves, their pricing rounds and the working-set
    bookkeeping disappear, and near the optimum the free set is the optimal support, on which
    the step is Newton's (quadratic convergence). Coordinate ascent on a subset of the
    coordinates with an Armijo search increases :math:`f` at every step, and a vector whose
    score exceeds :math:`T` enters the free set as soon as it is among the ``add`` most
    violated, so the method stops only at a point with :math:`\max_j q_j \le (1 + tol)T`,
    the KKT conditions of the reduced dual (the Kiefer–Wolfowitz equivalence theorem).

    Parameters
    ----------
    whitened : ndarray, shape (J, p)
        Whitened, normalised vectors; the starting support must span.
    mu : ndarray, shape (J,)
        Starting weights (non-negative; their support spans).
    tol : float
        Stop at ``max_j q_j / T - 1 <= tol``.
    add : int
        Violated vectors freed per step.
    max_iter : int
        Newton steps at most.

    Returns
    -------
    tuple or None
        ``(mu, point, qmax, iterations)``: the weights on the simplex (shape (J,)), the
        :class:`RestrictedPoint` of their support (in the order of ``np.flatnonzero(mu)``),
        the largest score over all vectors and the steps taken; ``None`` when the search
        stalls, the support loses rank or ``max_iter`` is reached (the caller's column
        generation then solves the program).
    """
    count, p = whitened.shape
    weights = np.asarray(mu, dtype=np.float64)
    sup = np.flatnonzero(weights > 0)
    w_sup = weights[sup] / float(weights[sup].sum())  # the weights of the support
    a, v = _fast_spectrum(whitened[sup], w_sup)
    stall = 0
    for it in range(1, max_iter + 1):
        if not a[0] > _RANK_RTOL * a[-1]:
            return None
        rt = np.sqrt(a)
        t = float(rt.sum())
        zs = whitened @ (v / np.sqrt(rt))
        q = np.einsum("ij,ij->i", zs, zs)
        arg = int(q.argmax())
        kkt = float(q[arg]) / t - 1.0
        if kkt <= tol:
            order = np.argsort(sup)
            sup, w_sup = sup[order], w_sup[order]
            zsup = zs[sup]
            out_mu = np.zeros(count)
            out_mu[sup] = w_sup
            point = RestrictedPoint(a, v, t, np.einsum("ij,ij->i", zsup, zsup),
                                    np.zeros((p, 0)), np.zeros((0, 0)))
            return out_mu, point, float(q[arg]), it - 1
        scale = t * t
        # the working set of this step: the support and the most violated vectors outside it
        out = q > t
        out[sup] = False
        viol = out.nonzero()[0]
        if viol.size > add:
            viol = viol[np.argpartition(q[viol], viol.size - add)[viol.size - add:]]
        ws = np.concatenate((sup, viol))
        k = ws.size
        g = q[ws] / t - 1.0
        m = np.zeros(k)
        m[: sup.size] = scale * w_sup
        # weights the gradient pushes out go to zero when they are small against the mean
        # weight scale / k in proportion to the KKT residual (the epsilon-active set of
        # Bertsekas' projected Newton method; a looser epsilon than the restricted solves'
        # drops the first working set's inactive atoms in fewer steps: 103 against 111 steps
        # over twelve programs, d = 3..20)
        residual = max(float(np.abs(g[: sup.size]).max()), kkt)
        active = (m <= min(1.0, residual) * scale / k) & (g <= 0)
        atoms = whitened[ws]
        step = np.zeros(k)
        if active.any():
            free: NDArray[np.intp] | slice = (~active).nonzero()[0]
            z = atoms[free] @ v
            step[active] = -m[active]
        else:
            free = slice(None)
            z = atoms @ v
        gf = g[free]
        if gf.size**2 * p * (p + 1) / 2 > _DIRECT_FLOPS:
            step[free] = _newton_cg(z, scale * a, gf, min(0.1, math.sqrt(kkt)))
        else:
            i0, i1, _ = _triu(p)
            pair = _pair_weights(p) * math.sqrt(2.0)
            rts = t * rt
            ra, rb = rts[i0], rts[i1]
            rows = z[:, i0] * z[:, i1] * (pair / np.sqrt(ra * rb * (ra + rb)))
            hess = rows @ rows.T
            # a Levenberg-Marquardt ridge in proportion to the gap: far from the optimum (more
            # free weights than p(p+1)/2, a singular Hessian) the step bends towards the
            # gradient instead of running along the null space; near it the step is Newton's
            tau = (1e-12 + kkt) * max(float(hess.diagonal().max()), 1e-300) + 1e-300
            hess.flat[:: gf.size + 1] += tau
            _, sol, info = lapack.dposv(hess, gf, lower=1)  # factor and solve in one call
            step[free] = sol if info == 0 else _cho_solve(_cho(hess, tau), gf)
        cond_floor = max(_RANK_RTOL * 10, 1e-6 * float(a[0] / a[-1]))
        longest = float(np.abs(step).max())
        alpha = min(1.0, scale / longest) if longest > 0 else 1.0
        accepted = False
        g_m = float(g @ m)
        for _ in range(60):
            m_new = m + alpha * step
            np.maximum(m_new, 0.0, out=m_new)
            predicted = float(g @ m_new) - g_m
            total = float(m_new.sum())
            a_new, v_new = _fast_spectrum(atoms, m_new)
            f_new = 2.0 * float(np.sqrt(np.maximum(a_new, 0.0)).sum()) - total
            tiny = 0 <= predicted <= 1e-11 * scale
            armijo = f_new >= scale + 1e-4 * predicted - 4e-16 * scale
            if a_new[0] > cond_floor * a_new[-1] and total > 0 and (tiny or armijo):
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            return None
        stall = stall + 1 if f_new <= scale * (1.0 + 1e-15) else 0
        if stall > 8:
            return None
        keep = m_new > 0
        sup = ws[keep]
        w_sup = m_new[keep] / total
        a, v = a_new / total, v_new
    return None
