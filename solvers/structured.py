r"""Structure-exploiting solver for the optimal-covariance program (MATH.md §6.3–§6.4, §11, §12).

The program (seed 002, Theorem 3; MATH.md §6.1) is

.. math::

    v_\eta(q) = \min_{\Sigma \succeq \eta I} \operatorname{tr}(W\Sigma)
    \quad\text{s.t.}\quad s_j^\top \Sigma^{-1} s_j \le q,\quad j = 1..J .

**Reduced dual** (MATH.md §6.3, §11.1). For weights :math:`\mu` on the probability simplex let
:math:`M(\mu) = \sum_j \mu_j s_j s_j^\top` and, with any factor :math:`W = LL^\top`,
:math:`A(\mu) = L^\top M(\mu) L`, :math:`T(\mu) = \operatorname{tr} A(\mu)^{1/2}` and
:math:`\Sigma_\mu = L^{-\top} A(\mu)^{1/2} L^{-1}`. Then :math:`T` is concave,
:math:`\partial T/\partial\mu_j = q_j/2` with :math:`q_j = s_j^\top\Sigma_\mu^{-1}s_j`,
:math:`\sum_j \mu_j q_j = T`, and for *every* :math:`\mu`, with :math:`r = \max_j q_j`,

.. math::

    T(\mu)^2/q \;\le\; v_0(q) \;\le\; \operatorname{tr}\!\big(W\,(r/q)\Sigma_\mu\big) = rT/q ,

so every iterate carries the certified relative gap :math:`r/T - 1`.

**Noise floor** (MATH.md §11.2, §6.4). :math:`\Sigma \succeq \eta I` is the constraint
:math:`x^\top\Sigma^{-1}x \le q` for every :math:`|x|^2 = q\eta`; the dual gains a PSD block,
:math:`M = \sum_j \mu_j s_j s_j^\top + q\eta P`, :math:`\sum_j\mu_j + \operatorname{tr}P = 1`,
and the certificate uses :math:`r = \max(\max_j q_j,\; q\eta/\lambda_{\min}(\Sigma_\mu))`. The block
is kept as :math:`P = E\Pi E^\top` on an explicit orthonormal basis :math:`E` of the clamped
eigenspace (Newton on the entries of :math:`\Pi`; directions whose weight vanishes are
eliminated), which removes the stalls of a generic barrier on that block (§11.5).

**Rank-deficient sets** (MATH.md §6.3, §11.3). With :math:`\eta = 0` the problem is solved in the
span :math:`U` of the vectors (weight :math:`U^\top W U`); the optimal :math:`\Sigma` is singular on
the complement and the dual carries the Schur-complement block of §6.3. With :math:`\eta > 0` the
complement is a clamped floor direction from the start.

**Algorithm** (MATH.md §11.4–§11.5). Column generation: a small working set of vectors; on it a
damped active-set Newton method maximises :math:`T` (Hessian by the Daleckii–Krein formula,
:math:`\partial^2 T/\partial\mu_i\partial\mu_k = -\tfrac12\sum_{ab}\Gamma_{ab}
(z_{ia}z_{ib})(z_{ka}z_{kb})`, :math:`\Gamma_{ab} = 1/(r_a r_b (r_a + r_b))`,
:math:`r = \sqrt{\operatorname{eig}A}`,
:math:`z_i = V^\top y_i`); then one chunked float64 BLAS pass over all :math:`J` vectors computes
every :math:`q_j`, the certified gap, and the most violated vectors, which join the working set.
A final pass re-verifies the returned matrix itself (Cholesky of :math:`\Sigma`) and scales it to
feasibility, so the covariance is feasible as returned (up to float64 rounding; the rigorous
check is ``certificates``' job).

**Dual certificate** (MATH.md §6.3, §12.1–§12.2): :math:`\lambda_j = (T/q)^2\mu_j`,
:math:`u_j = S^{-1}s_j` with :math:`S = (T/q)\Sigma_\mu`, floor factor
:math:`G = \sqrt{q\eta}\,\Sigma_\mu^{-1}E\Pi^{1/2}` (so :math:`H = GG^\top` and
:math:`W - H - \sum_j\lambda_j u_ju_j^\top = 0` exactly); rank-deficient :math:`\eta = 0`: the
corrected :math:`u_j` and Schur-complement :math:`H` of §6.3.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy
from numpy.typing import NDArray
from scipy import linalg
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

from certificates.errors import (
    AccuracyWarning,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)
from certificates.problem import CovarianceProgram, FactoredDual
from certificates.validate import as_scalar
from solvers._types import Solution, SolverStats
from solvers.passes import IN_PROCESS, PassExecutor

__all__ = ["solve_structured"]

SOLVER_NAME = "dpopt-structured"
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

#: Relative eigenvalue threshold (of the Gram matrix) below which a direction is outside the span.
_SPAN_RTOL = 1e-13
#: Relative safety margin applied to the returned covariance after the verification pass.
_SAFETY = 1e-12
#: Ridge on the complement of the span (rank-deficient, eta = 0): relative cost added to the value.
_RIDGE = 1e-10
#: A floor direction (eigenvector of Pi) is dropped from the block after a pass when its floor
#: value is below (1 - _FLOOR_DROP) T and its weight below _FLOOR_WREL times the largest weight.
_FLOOR_DROP = 0.1
_FLOOR_WREL = 1e-2
#: Entry weight of new floor directions, relative to the mean weight of the block.
_FLOOR_ENTRY = 1e-5


# ------------------------------------------------------------------------------------------------
# chunked passes over the data
# ------------------------------------------------------------------------------------------------
# ------------------------------------------------------------------------------------------------
# the restricted problem: max T over the simplex on a working set (+ optional floor block)
# ------------------------------------------------------------------------------------------------
@dataclass
class _Restricted:
    """Working-set state in whitened coordinates (``y = P^T s``, weight = identity)."""

    yw: FloatArray  # (k, p) whitened vector atoms
    mu: FloatArray  # (k,)
    bfl: FloatArray  # (p, kE) = sqrt(q eta) * P^T E, whitened floor directions
    pi: FloatArray  # (kE, kE) PSD weight block of the floor
    rot: FloatArray  # (kE0, kE) accumulated rotation/elimination of the floor basis
    tb: float = 0.0  # barrier weight on log det Pi


@dataclass
class _Eval:
    a: FloatArray
    vecs: FloatArray
    t: float
    q: FloatArray
    gf: FloatArray  # V^T bfl
    qf: FloatArray  # floor "q" matrix (kE, kE)


def _assemble(st: _Restricted, mu: FloatArray, pi: FloatArray) -> FloatArray:
    amat = (st.yw.T * mu) @ st.yw
    if pi.shape[0]:
        amat += st.bfl @ pi @ st.bfl.T
    return 0.5 * (amat + amat.T)


def _trace_sqrt(amat: FloatArray) -> tuple[float, float]:
    ev = np.linalg.eigvalsh(amat)
    return float(np.sum(np.sqrt(np.clip(ev, 0.0, None)))), float(ev[0] / max(ev[-1], 1e-300))


def _evaluate(st: _Restricted) -> _Eval:
    amat = _assemble(st, st.mu, st.pi)
    a, v = np.linalg.eigh(amat)
    if not a[0] > 1e-15 * a[-1]:
        raise SolverError(
            f"{SOLVER_NAME}: the working set lost full rank (cond > 1e15); remedy: rescale the "
            "vectors or pass a larger working_set"
        )
    a4 = a**-0.25
    zs = (st.yw @ v) * a4
    q = np.einsum("ij,ij->i", zs, zs)
    gf = v.T @ st.bfl
    gs = gf * a4[:, None]
    qf = gs.T @ gs
    return _Eval(a, v, float(np.sum(np.sqrt(a))), q, gf, 0.5 * (qf + qf.T))


def _hessian_factor(
    z: FloatArray, gf: FloatArray, a: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Rows X with ``-Hessian = X X^T`` (Daleckii–Krein), vectors first, then svec(Pi) entries."""
    p = a.shape[0]
    rt = np.sqrt(a)
    i0, i1 = np.triu_indices(p)
    gam = 1.0 / (rt[i0] * rt[i1] * (rt[i0] + rt[i1]))
    w = np.sqrt(np.where(i0 == i1, 0.5 * gam, gam))
    xv = z[:, i0] * z[:, i1] * w
    ke = gf.shape[1]
    if ke == 0:
        return xv, np.empty((0, xv.shape[1]))
    e0, e1 = np.triu_indices(ke)
    # (g_a g_b^T + g_b g_a^T)/sqrt2 for a < b; g_a g_a^T for a = b, entries (c, e) of the p-pairs
    sym = gf[i0][:, e0] * gf[i1][:, e1] + gf[i0][:, e1] * gf[i1][:, e0]
    scale = np.where(e0 == e1, 0.5, 1.0 / np.sqrt(2.0))
    xf = (sym * scale).T * w
    return xv, xf


def _svec(mat: FloatArray) -> FloatArray:
    i0, i1 = np.triu_indices(mat.shape[0])
    return np.where(i0 == i1, 1.0, np.sqrt(2.0)) * mat[i0, i1]


def _smat(vec: FloatArray, n: int) -> FloatArray:
    i0, i1 = np.triu_indices(n)
    out = np.zeros((n, n))
    vals = np.where(i0 == i1, 1.0, 1.0 / np.sqrt(2.0)) * vec
    out[i0, i1] = vals
    out[i1, i0] = vals
    return out


def _psd_step_limit(pi: FloatArray, dpi: FloatArray) -> float:
    """Largest alpha with ``pi + alpha * dpi`` PSD (pi positive definite)."""
    w, v = np.linalg.eigh(pi)
    h = v / np.sqrt(w)
    x = h.T @ dpi @ h
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


def _rotate_floor(st: _Restricted, ev: _Eval) -> None:
    """Rotate the floor basis to the eigenbasis of Pi (Pi becomes diagonal); updates ``ev``."""
    w, qv = np.linalg.eigh(0.5 * (st.pi + st.pi.T))
    st.pi = np.diag(w)
    st.bfl = st.bfl @ qv
    st.rot = st.rot @ qv
    ev.gf = ev.gf @ qv
    ev.qf = qv.T @ ev.qf @ qv


def _inner_solve(st: _Restricted, tol: float, max_iter: int) -> tuple[_Eval, int]:
    """Damped Newton for max T on the working set (MATH.md §11.5).

    Vector weights are handled by an active set (ratio test, atoms enter when ``q_i > T``); the
    floor block ``Pi`` by a log-det barrier ``tb * log det Pi`` driven to zero (its Hessian is
    diagonal in Pi's eigenbasis), so the range of ``Pi`` can rotate freely. Stops when the
    restricted KKT gap ``max(q_i, lambda_max(Q_floor))/T - 1`` and the barrier gap
    ``2 tb kE / T`` are both below ``tol``.
    """
    ev = _evaluate(st)
    it = 0
    stall = 0
    for it in range(1, max_iter + 1):
        t = ev.t
        ke = st.pi.shape[0]
        if ke:
            _rotate_floor(st, ev)
        pid = np.diag(st.pi).copy() if ke else np.zeros(0)
        qf_max = float(np.linalg.eigvalsh(ev.qf)[-1]) if ke else -np.inf
        kkt_v = float(ev.q.max()) / t - 1.0
        kkt = max(kkt_v, qf_max / t - 1.0)
        if ke and it == 1:
            # (re)start the barrier at a weight matched to the current KKT error and lift the
            # floor weights that fell far below their central value 2 tb / (2 nu - Qf_aa)
            st.tb = 0.1 * max(kkt, tol) * t / ke
            slack = t + 2.0 * st.tb * ke - np.diag(ev.qf)
            central = np.where(slack > 0, 2.0 * st.tb / np.maximum(slack, 1e-300), pid)
            lift = np.maximum(pid, np.minimum(0.5 * central, float(pid.max())))
            if np.any(lift > pid):
                st.pi = np.diag(lift)
                total = float(st.mu.sum() + lift.sum())
                st.mu, st.pi = st.mu / total, st.pi / total
                ev = _evaluate(st)
                _rotate_floor(st, ev)
                t = ev.t
                pid = np.diag(st.pi).copy()
                qf_max = float(np.linalg.eigvalsh(ev.qf)[-1])
                kkt_v = float(ev.q.max()) / t - 1.0
                kkt = max(kkt_v, qf_max / t - 1.0)
        if ke:
            # path following: shrink the barrier only at a (nearly) central point, where
            # pi_a (T + 2 tb kE - Qf_aa) = 2 tb for every floor direction a
            cen = pid * (t + 2.0 * st.tb * ke - np.diag(ev.qf)) / (2.0 * st.tb)
            off = ev.qf - np.diag(np.diag(ev.qf))
            centred = (
                bool(np.all((cen > 0.25) & (cen < 4.0)))
                and float(ev.q.max()) <= t + 3.0 * st.tb * ke + tol * t
                and float(np.max(np.abs(off))) <= 2.0 * max(2.0 * st.tb * ke, tol * t)
            )
            if centred and 2.0 * st.tb * ke / t > 0.5 * tol:
                st.tb = max(0.03 * st.tb, 0.2 * tol * t / ke)
        bar_gap = 2.0 * st.tb * ke / t if ke else 0.0
        if kkt <= tol and bar_gap <= tol:
            break
        t_ref = t + 2.0 * st.tb * ke if ke else t  # 2 nu at the barrier optimum
        free = (st.mu > 0) | (ev.q > t_ref * (1.0 + 1e-14))
        z = st.yw @ ev.vecs
        e0, e1 = np.triu_indices(ke)
        g_full = np.concatenate([0.5 * ev.q, 0.5 * _svec(ev.qf)])
        if ke:
            g_full[st.mu.size :] += np.where(e0 == e1, st.tb / pid[e0], 0.0)
        bar_h = st.tb / (pid[e0] * pid[e1]) if ke else np.zeros(0)
        kap_f = (e0 == e1).astype(float)
        idx0 = np.flatnonzero(free)
        xv0, xf = _hessian_factor(z[idx0], ev.gf, ev.a)
        x0 = np.concatenate([xv0, xf]) if xf.shape[0] else xv0
        k0 = x0 @ x0.T  # -Hessian on every candidate coordinate, formed once per iteration
        nv0 = idx0.size
        tau = 1e-13 * max(float(np.max(np.diag(k0))), 1e-300) + 1e-300
        k0[np.diag_indices_from(k0)] += tau
        g_f = g_full[st.mu.size :]
        # block elimination of the floor block (shared by every active-set re-solve): the Schur
        # complement of a subset of vector atoms is the principal submatrix of the full one
        if ke:
            k0[nv0:, nv0:][np.diag_indices(bar_h.size)] += bar_h
            cff = _cho(k0[nv0:, nv0:], tau)
            kvf = k0[:nv0, nv0:]
            y = _cho_solve(cff, np.ascontiguousarray(kvf.T))
            wf1 = _cho_solve(cff, g_f)
            wf2 = _cho_solve(cff, kap_f)
            schur = k0[:nv0, :nv0] - kvf @ y
            rv1 = g_full[idx0] - kvf @ wf1
            rv2 = 1.0 - kvf @ wf2
        else:
            schur = k0
            rv1 = g_full[idx0]
            rv2 = np.ones(nv0)
        for _ in range(st.mu.size + 1):
            idx = np.flatnonzero(free)
            sub = np.searchsorted(idx0, idx)
            if sub.size:
                cs = _cho(schur[np.ix_(sub, sub)], tau)
                av1 = _cho_solve(cs, rv1[sub])
                av2 = _cho_solve(cs, rv2[sub])
            else:
                av1 = av2 = np.zeros(0)
            if ke:
                a1 = np.concatenate([av1, wf1 - y[:, sub] @ av1])
                a2 = np.concatenate([av2, wf2 - y[:, sub] @ av2])
            else:
                a1, a2 = av1, av2
            g = np.concatenate([g_full[idx], g_f])
            kap = np.concatenate([np.ones(idx.size), kap_f])
            nu = float(kap @ a1) / float(kap @ a2)
            dlt = a1 - nu * a2
            dv = dlt[: idx.size]
            bad = (st.mu[idx] <= 0) & (dv < 0)
            if not np.any(bad):
                break
            free[idx[bad]] = False
        delta_v = np.zeros_like(st.mu)
        delta_v[idx] = dv
        delta_f = dlt[idx.size :]
        slope = float(g @ dlt)
        # ratio tests: vector weights stay >= 0, the floor block stays positive definite
        neg = delta_v < 0
        alpha_v = float(np.min(-st.mu[neg] / delta_v[neg])) if np.any(neg) else np.inf
        dpi = _smat(delta_f, ke) if ke else np.zeros((0, 0))
        alpha_f = _psd_step_limit(st.pi, dpi) if ke else np.inf
        alpha = min(1.0, alpha_v, 0.99 * alpha_f)
        phi0 = t + (st.tb * float(np.sum(np.log(pid))) if ke else 0.0)
        accepted = False
        for _ in range(60):
            mu_new = st.mu + alpha * delta_v
            if alpha == alpha_v:
                mu_new[neg & (-st.mu / np.where(neg, delta_v, -1.0) <= alpha * (1 + 1e-12))] = 0.0
            mu_new = np.clip(mu_new, 0.0, None)
            pi_new = st.pi + alpha * dpi
            t_new, cond = _trace_sqrt(_assemble(st, mu_new, pi_new))
            phi = t_new
            if ke:
                lp = np.linalg.eigvalsh(pi_new)
                phi = t_new + st.tb * float(np.sum(np.log(np.maximum(lp, 1e-300))))
            # near the optimum the predicted increase (~slope/2) drowns in the rounding of T:
            # then the Newton step is accepted as it stands (quadratic convergence region)
            tiny = slope <= 1e-11 * abs(phi0)
            if cond > 1e-14 and (tiny or phi >= phi0 + 1e-4 * alpha * slope - 4e-16 * abs(phi0)):
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            stall += 1
            break
        total = float(mu_new.sum() + np.trace(pi_new))
        st.mu = mu_new / total
        st.pi = pi_new / total
        if ke:
            _eliminate_floor(st)
        ev = _evaluate(st)
        if t_new <= t * (1 + 1e-15) and (not ke or bar_gap <= tol):
            stall += 1
            if stall > 8:
                break
        else:
            stall = 0
    return ev, it


def _eliminate_floor(st: _Restricted) -> None:
    """Rotate the floor block to Pi's eigenbasis and drop directions whose weight vanished."""
    w, qv = np.linalg.eigh(0.5 * (st.pi + st.pi.T))
    keep = w > 1e-15 * max(float(w[-1]), 1e-300)
    if np.all(keep):
        return
    qv = qv[:, keep]
    st.pi = np.diag(w[keep])
    st.bfl = st.bfl @ qv
    st.rot = st.rot @ qv


# ------------------------------------------------------------------------------------------------
# the driver
# ------------------------------------------------------------------------------------------------
@dataclass
class _Geometry:
    """Coordinates ``y = pmat^T s``; ``sigma = minv sigma' minv^T``."""

    pmat: FloatArray  # (d, p)
    minv: FloatArray  # (d, p)
    span: FloatArray  # (d, r) orthonormal basis of span{s_j}
    comp: FloatArray  # (d, d - r) orthonormal complement


def _geometry(weight: FloatArray, basis: FloatArray) -> tuple[FloatArray, FloatArray]:
    wr = basis.T @ weight @ basis
    lr = linalg.cholesky(0.5 * (wr + wr.T), lower=True)
    pmat = basis @ lr
    minv = linalg.solve_triangular(lr, basis.T, lower=True).T  # basis @ lr^{-T}
    return pmat, minv


def _dedupe(new: FloatArray, old: FloatArray) -> NDArray[np.bool_]:
    """Mask of rows of ``new`` not parallel/antiparallel to a row of ``old`` or an earlier row."""
    nn = new / np.maximum(np.linalg.norm(new, axis=1, keepdims=True), 1e-300)
    keep = np.ones(new.shape[0], dtype=bool)
    if old.shape[0]:
        no = old / np.maximum(np.linalg.norm(old, axis=1, keepdims=True), 1e-300)
        keep &= np.max(np.abs(nn @ no.T), axis=1) < 1.0 - 1e-12
    cos = np.abs(nn @ nn.T)
    for i in range(1, new.shape[0]):
        if keep[i] and np.any(cos[i, :i][keep[:i]] >= 1.0 - 1e-12):
            keep[i] = False
    return keep


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidTypeError(name, value, "an integer")
    if int(value) < low:
        raise InvalidParameterError(name, value, f"must be >= {low}")
    return int(value)


def solve_structured(
    problem: CovarianceProgram,
    *,
    tol: float = 1e-8,
    max_passes: int = 60,
    chunk_size: int | None = None,
    memory_budget_bytes: int = 256 * 2**20,
    working_set: int | None = None,
    verbose: bool = False,
    blas_threads: int | None = 1,
    executor: PassExecutor | None = None,
) -> Solution:
    r"""Solve :math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s_j^\top\Sigma^{-1}s_j\le q`,
    :math:`\Sigma\succeq\eta I` by column generation on the reduced dual (MATH.md §11).

    Parameters
    ----------
    problem : CovarianceProgram
        Vectors (array or chunked :class:`~certificates.problem.VectorSource`), weight
        :math:`W \succ 0`, bound :math:`q`, noise floor :math:`\eta`.
    tol : float, default 1e-8
        Target certified relative gap ``upper / lower - 1`` (MATH.md §11.1); in [1e-11, 1).
    max_passes : int, default 60
        Cap on full passes over the vectors (status ``iteration_limit`` when reached).
    chunk_size : int, optional
        Vectors per chunk; by default as many as fit ``memory_budget_bytes``.
    memory_budget_bytes : int, default 256 MiB
        Bound on the temporaries of one chunk of a pass.
    working_set : int, optional
        Number of violated vectors added per pass (default ``max(2p, 16)``, p = dimension).
    verbose : bool
        Print one line per pass.
    blas_threads : int or None, default 1
        BLAS threads during the solve (``threadpoolctl``); ``None`` leaves the setting alone.
        Most of the work is on small (support-sized) matrices, where multi-threaded OpenBLAS is
        slower, by 10x on a loaded 2-core machine; the benchmark figures are for one thread.
    executor : PassExecutor, optional
        Runs the full passes over the vectors (:mod:`solvers.passes`); in this process by
        default.

    Returns
    -------
    Solution
        ``covariance`` feasible as returned (scaled by the verification pass), ``value`` =
        tr(W Sigma), ``dual`` the factored certificate of §12.1, ``stats.extra`` with ``lower``,
        ``upper``, ``gap`` (certified relative gap in float64), ``support`` and timings.

    Examples
    --------
    >>> import numpy as np
    >>> from certificates.problem import CovarianceProgram
    >>> s = np.array([[1., 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
    >>> w = np.array([[2, .5, 0], [.5, 1, .2], [0, .2, .5]])
    >>> sol = solve_structured(CovarianceProgram(s, weight=w, bound=1.0))
    >>> round(sol.value, 8)  # (sqrt 2 + 1 + sqrt .5)^2, MATH.md F1
    9.74264069
    """
    if blas_threads is None:
        return _solve(problem, tol, max_passes, chunk_size, memory_budget_bytes, working_set,
                      verbose, executor or IN_PROCESS)
    threads = _check_int("blas_threads", blas_threads, 1)
    with threadpool_limits(limits=threads, user_api="blas"):
        return _solve(problem, tol, max_passes, chunk_size, memory_budget_bytes, working_set,
                      verbose, executor or IN_PROCESS)


def _solve(
    problem: CovarianceProgram,
    tol: float,
    max_passes: int,
    chunk_size: int | None,
    memory_budget_bytes: int,
    working_set: int | None,
    verbose: bool,
    executor: PassExecutor,
) -> Solution:
    t_start = time.perf_counter()
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    tol = as_scalar("tol", tol, low=1e-11, high=1.0, low_open=False)
    max_passes = _check_int("max_passes", max_passes, 3)
    memory_budget_bytes = _check_int("memory_budget_bytes", memory_budget_bytes, 2**16)
    src = problem.source
    d, n = src.dim, src.count
    if chunk_size is None:
        chunk = int(max(256, min(262144, memory_budget_bytes // (8 * 3 * (2 * d + 1)))))
    else:
        chunk = _check_int("chunk_size", chunk_size, 1)
    weight = np.asarray(problem.weight, dtype=np.float64)
    qb = float(problem.bound)
    eta = float(problem.noise_floor)
    log: list[str] = []

    def say(msg: str) -> None:
        log.append(msg)
        if verbose:
            print(msg)

    passes = 0
    pass_seconds: list[float] = []
    newton = 0

    # ---- pass 0: Gram matrix, span -------------------------------------------------------------
    t0 = time.perf_counter()
    gram, _ = executor.gram(src, chunk)
    passes += 1
    pass_seconds.append(time.perf_counter() - t0)
    gw, gv = linalg.eigh(gram)
    if gw[-1] <= 0:
        raise InvalidParameterError("vectors", problem.vectors, "must not all be zero")
    in_span = gw > _SPAN_RTOL * gw[-1]
    span, comp = gv[:, in_span], gv[:, ~in_span]
    rank = span.shape[1]
    floor_mode = False
    pmat, minv = _geometry(weight, span)
    p = rank
    add = working_set if working_set is not None else max(2 * p, 16)
    add = _check_int("working_set", add, 1)

    # ---- initial working set from the uniform-weight covariance --------------------------------
    a0 = pmat.T @ gram @ pmat / n
    a0w, a0v = linalg.eigh(0.5 * (a0 + a0.T))
    bmat = pmat @ (a0v * a0w**-0.25)
    res = executor.score(src, bmat, chunk, max(add, p), -np.inf)
    passes += 1
    pass_seconds.append(res.seconds)
    keep = _dedupe(res.top_vecs, np.empty((0, d)))
    ws_idx = res.top_idx[keep]
    ws_vec = res.top_vecs[keep]
    # guarantee the working set spans the problem's span (residual passes)
    while True:
        yw = ws_vec @ pmat
        sv = linalg.svdvals(yw) if yw.shape[0] else np.zeros(1)
        full = yw.shape[0] >= p and sv[min(p, sv.size) - 1] > 1e-10 * sv[0]
        if full:
            break
        if passes >= max_passes:
            raise SolverError(
                f"{SOLVER_NAME}: could not build a spanning working set within max_passes; "
                "remedy: raise max_passes"
            )
        _, _, vt = linalg.svd(yw, full_matrices=True)
        nz = int(np.sum(sv > 1e-10 * sv[0]))
        qc = vt[nz:].T  # complement in whitened span coordinates
        res = executor.score(src, pmat @ qc, chunk, max(add, p), 0.0)
        passes += 1
        pass_seconds.append(res.seconds)
        fresh = ~np.isin(res.top_idx, ws_idx)
        k2 = _dedupe(res.top_vecs[fresh], ws_vec)
        if not np.any(k2):
            raise SolverError(f"{SOLVER_NAME}: failed to span the vectors (degenerate data)")
        ws_idx = np.concatenate([ws_idx, res.top_idx[fresh][k2]])
        ws_vec = np.concatenate([ws_vec, res.top_vecs[fresh][k2]])

    st = _Restricted(
        yw=ws_vec @ pmat,
        mu=np.full(ws_idx.size, 1.0 / ws_idx.size),
        bfl=np.zeros((p, 0)),
        pi=np.zeros((0, 0)),
        rot=np.zeros((0, 0)),
    )
    floor_basis = np.zeros((d, 0))
    inner_tol = max(0.1 * tol, 1e-13)
    status = "iteration_limit"
    best: dict[str, Any] = {}
    lower = np.nan
    gap = np.inf
    tighten = False
    t_newton = 0.0

    while passes < max_passes - 1:
        tn = time.perf_counter()
        # inexact restricted solves while the certified gap is large (1 % of it), tight at the end
        inner_tol = max(0.1 * tol, 1e-13, min(1e-3, 0.01 * gap if not tighten else 0.0))
        ev, its = _inner_solve(st, inner_tol, 200)
        t_newton += time.perf_counter() - tn
        newton += its
        # the candidate's inverse factor: Sigma_mu^{-1} = B B^T (B = pmat V diag(a^-1/4))
        bmat = pmat @ (ev.vecs * ev.a**-0.25)
        t = ev.t
        res = executor.score(src, bmat, chunk, add, t * (1.0 + 0.5 * inner_tol))
        passes += 1
        pass_seconds.append(res.seconds)
        r = res.qmax
        ball_r = 0.0
        sig_mu = minv @ ((ev.vecs * np.sqrt(ev.a)) @ ev.vecs.T) @ minv.T
        sig_mu = 0.5 * (sig_mu + sig_mu.T)
        lam_w, lam_v = np.linalg.eigh(sig_mu)
        if floor_mode:
            ball_r = qb * eta / lam_w[0]
        r_cert = max(r, ball_r)
        gap = r_cert / t - 1.0
        say(
            f"pass {passes:3d}: T={t:.12g} r={r_cert:.12g} gap={gap:.3e} ws={st.mu.size} "
            f"support={int(np.sum(st.mu > 0))} floor={st.pi.shape[0]} newton={its}"
        )
        best = {"ev": ev, "r": r_cert, "sig": sig_mu, "mu": st.mu.copy(), "idx": ws_idx.copy(),
                "vec": ws_vec.copy(), "pi": st.pi.copy(), "E": floor_basis @ st.rot
                if floor_basis.shape[1] else floor_basis, "floor": floor_mode, "pmat": pmat,
                "minv": minv}
        # floor check (eta > 0): is the eta = 0 style solution above the floor?
        if eta > 0 and not floor_mode:
            lam_min_scaled = (r_cert / qb) * lam_w[0] if rank == d else 0.0
            if lam_min_scaled < eta:
                # switch to the floor mode in full coordinates (MATH.md §11.2)
                floor_mode = True
                pmat, minv = _geometry(weight, np.eye(d))
                p = d
                if working_set is None:
                    add = max(2 * p, 16)
                sig_full = sig_mu
                if rank < d:
                    base = comp
                else:
                    base = np.zeros((d, 0))
                # violated in-span eigendirections of the current candidate
                lw, lv = linalg.eigh(sig_full)
                viol = (qb * eta / np.maximum(lw, 1e-300)) > t
                inspan = lv[:, viol]
                if rank < d:
                    inspan = inspan - comp @ (comp.T @ inspan)
                    inspan = inspan[:, np.linalg.norm(inspan, axis=0) > 1e-6]
                cand = np.concatenate([base, inspan], axis=1)
                if cand.shape[1]:
                    qf_, rf_ = linalg.qr(cand, mode="economic")
                    floor_basis = qf_[:, np.abs(np.diag(rf_)) > 1e-8]
                ke = floor_basis.shape[1]
                share = ke / (ke + max(int(np.sum(st.mu > 0)), 1))
                st = _Restricted(
                    yw=ws_vec @ pmat,
                    mu=st.mu * (1.0 - share),
                    bfl=np.sqrt(qb * eta) * (pmat.T @ floor_basis),
                    pi=np.eye(ke) * (share / ke),
                    rot=np.eye(ke),
                )
                say(f"floor binds: switching to the floor block with {ke} directions")
                continue
        if gap <= 0.9 * tol:  # room for the final ridge / safety margin
            status = "optimal"
            break
        # ---- grow the working set ----------------------------------------------------------------
        grew = False
        fresh = ~np.isin(res.top_idx, ws_idx)
        if np.any(fresh):
            k2 = _dedupe(res.top_vecs[fresh], ws_vec)
            if np.any(k2):
                new_idx = res.top_idx[fresh][k2]
                new_vec = res.top_vecs[fresh][k2]
                # drop clearly inactive atoms to keep the restricted problem small
                inactive = (st.mu == 0) & (ev.q < t * (1 - 1e-2))
                if np.any(inactive) and st.mu.size > 4 * p:
                    kept = ~inactive
                    ws_idx, ws_vec = ws_idx[kept], ws_vec[kept]
                    st.yw, st.mu = st.yw[kept], st.mu[kept]
                ws_idx = np.concatenate([ws_idx, new_idx])
                ws_vec = np.concatenate([ws_vec, new_vec])
                st.yw = np.concatenate([st.yw, new_vec @ pmat])
                st.mu = np.concatenate([st.mu, np.zeros(new_idx.size)])
                grew = True
        if floor_mode and st.pi.shape[0]:
            # drop floor directions that are clearly not clamped (floor value well below T and a
            # negligible weight: by complementary slackness their weight is only the barrier's);
            # they re-enter through the ball check below if they become violated again. The
            # Newton system grows with the square of the block size, and only the clamped
            # eigenspace needs to be in it (MATH.md §11.5)
            fw, fv = np.linalg.eigh(0.5 * (st.pi + st.pi.T))
            qfd = np.einsum("ia,ij,ja->a", fv, ev.qf, fv)
            keep_f = (qfd >= t * (1.0 - _FLOOR_DROP)) | (fw >= _FLOOR_WREL * float(fw[-1]))
            if not np.all(keep_f):
                st.pi = np.diag(fw[keep_f])
                st.bfl = st.bfl @ fv[:, keep_f]
                st.rot = st.rot @ fv[:, keep_f]
                total = float(st.mu.sum() + np.trace(st.pi))
                st.mu, st.pi = st.mu / total, st.pi / total
                grew = True
        if floor_mode and ball_r > t * (1.0 + 0.5 * inner_tol):
            cur_e = floor_basis @ st.rot if st.rot.size else np.zeros((d, 0))
            ke_ = cur_e.shape[1]
            viol = (qb * eta / np.maximum(lam_w, 1e-300)) > t * (1.0 + 0.5 * inner_tol)
            cand = lam_v[:, viol]
            cand = cand - cur_e @ (cur_e.T @ cand)
            qn, rn = linalg.qr(cand, mode="economic")
            ok = np.abs(np.diag(rn)) > 1e-6
            if np.any(ok):
                new_e = qn[:, ok]
                # enter just inside the cone with a small weight: most new directions are only
                # the out-of-block residuals of violated eigenvectors and need little weight (a
                # large entry weight costs Newton steps to undo); the barrier restart of the
                # inner solve lifts them towards their central value
                eps = _FLOOR_ENTRY * float(np.trace(st.pi)) / max(ke_, 1) + 1e-3 * (ke_ == 0)
                floor_basis = np.concatenate([cur_e, new_e], axis=1)
                kn = new_e.shape[1]
                pi_new = linalg.block_diag(st.pi, eps * np.eye(kn))
                total = float(st.mu.sum() + np.trace(pi_new))
                st.mu = st.mu / total
                st.pi = pi_new / total
                st.rot = np.eye(floor_basis.shape[1])
                st.bfl = np.sqrt(qb * eta) * (pmat.T @ floor_basis)
                st.tb = max(st.tb, min(1e-3, 0.1 * gap) * t / floor_basis.shape[1])
                grew = True
        if not grew and inner_tol > max(0.1 * tol, 1e-13):
            tighten = True  # the restricted problem was solved loosely: solve it tightly
            continue
        tighten = False
        if not grew:
            say("no new violated atoms; stopping")
            status = "optimal_inaccurate"
            break

    # ---- final: build the covariance, verify it with its own Cholesky pass, scale to feasibility
    if not best:
        raise SolverError(f"{SOLVER_NAME}: max_passes too small to evaluate a candidate")
    ev = best["ev"]
    r_cert = best["r"]
    pmat_b, minv_b = best["pmat"], best["minv"]
    t = ev.t
    sig = (r_cert / qb) * best["sig"]
    sig = 0.5 * (sig + sig.T)
    ridge = 0.0
    if not best["floor"] and comp.shape[1]:
        # rank-deficient, eta = 0: the optimum is singular on the complement of the span; add the
        # tiny ridge (relative cost max(_RIDGE, tol / 20), within the requested gap) so Sigma is
        # invertible (and not too ill-conditioned for a float64 certificate) and
        # any residual out-of-span component of the data is checked by the pass below
        cost = max(_RIDGE, 0.05 * tol) * (r_cert * t / qb)
        ridge = cost / float(np.trace(comp.T @ weight @ comp))
        sig = sig + ridge * (comp @ comp.T)
        sig = 0.5 * (sig + sig.T)
    # verification pass on the returned matrix itself (its own Cholesky factor, float64)
    basis = np.eye(d)
    sig_r = sig
    try:
        cs = linalg.cholesky(0.5 * (sig_r + sig_r.T), lower=True)
    except linalg.LinAlgError:
        raise SolverError(
            f"{SOLVER_NAME}: the candidate covariance is not positive definite on the span; "
            "remedy: rescale the vectors"
        ) from None
    binv = basis @ linalg.solve_triangular(cs, np.eye(basis.shape[1]), lower=True).T
    chk = executor.score(src, binv, chunk, 0, np.inf)
    passes += 1
    pass_seconds.append(chk.seconds)
    # floating-point margins (err on the side of more noise): the float q_j carry a relative
    # error of order d eps sqrt(cond Sigma) (triangular solve), lambda_min one of d eps lambda_max
    ev_sig = linalg.eigvalsh(sig)
    unit = np.finfo(float).eps * (d + 2)
    cond = float(ev_sig[-1] / max(float(ev_sig[0]), 1e-300))
    margin = min(max(_SAFETY, 16.0 * unit * np.sqrt(cond)), 0.04 * tol)
    scale = max(1.0, chk.qmax / qb) * (1.0 + margin)
    if eta > 0:
        lmin = float(ev_sig[0]) - 16.0 * unit * float(ev_sig[-1])
        if lmin <= 0:
            raise SolverError(
                f"{SOLVER_NAME}: the covariance is too ill-conditioned to certify the noise floor "
                "in float64; remedy: rescale the problem"
            )
        scale = max(scale, eta / lmin * (1.0 + _SAFETY))
    sig = scale * sig
    value = float(np.sum(weight * sig))
    lower = t * t / qb
    gap = value / lower - 1.0
    if status == "optimal" and gap > tol:
        status = "optimal_inaccurate"
    dual = _factored_dual(best, weight, qb, eta, t, span, comp)
    elapsed = time.perf_counter() - t_start
    mean_pass = float(np.median(pass_seconds)) if pass_seconds else 0.0
    extra = {
        "lower": lower,
        "upper": value,
        "gap": gap,
        "tol": tol,
        "support": int(np.sum(best["mu"] > 0)),
        "working_set": int(best["mu"].size),
        "floor_block": int(best["pi"].shape[0]),
        "floor_rank": int(np.sum(linalg.eigvalsh(sig) <= eta * (1 + 1e-6))) if eta > 0 else 0,
        "rank": rank,
        "newton_seconds": t_newton,
        "pass_seconds": float(np.sum(pass_seconds)),
        "pass_median_seconds": mean_pass,
        "pass_equivalents": elapsed / mean_pass if mean_pass > 0 else float(passes),
        "verification_ratio": chk.qmax / qb,
        "ridge": ridge,
        "log": log,
    }
    if status != "optimal":
        warnings.warn(
            f"{SOLVER_NAME}: certified relative gap {gap:.3g} > tol {tol:.3g} after {passes} "
            "passes (status " + status + "); the covariance is feasible but not certified "
            "optimal to tol (remedy: raise max_passes)",
            AccuracyWarning,
            stacklevel=2,
        )
    stats = SolverStats(
        solver=SOLVER_NAME,
        version=f"numpy {np.__version__}, scipy {scipy.__version__}",
        setup_time=0.0,
        solve_time=elapsed,
        iterations=newton,
        passes=passes,
        extra=extra,
    )
    raw = {"mu": best["mu"], "support_indices": best["idx"], "floor_basis": best["E"],
           "floor_weights": best["pi"], "pmat": pmat_b, "minv": minv_b}
    return Solution(covariance=sig, value=value, dual=dual, status=status, stats=stats,
                    raw_duals=raw)


def _factored_dual(
    best: dict[str, Any],
    weight: FloatArray,
    qb: float,
    eta: float,
    t: float,
    span: FloatArray,
    comp: FloatArray,
) -> FactoredDual:
    """Map the reduced-dual weights to the factored dual of MATH.md §6.3 / §12.2."""
    ev = best["ev"]
    pmat = best["pmat"]
    mu = best["mu"]
    on = mu > 0
    idx = best["idx"][on]
    vec = best["vec"][on]
    lam = (t / qb) ** 2 * mu[on]
    # Sigma_mu^{+} s = pmat A^{-1/2} pmat^T s ; u = (q/T) Sigma_mu^{+} s
    ninv = pmat @ ((ev.vecs * ev.a**-0.5) @ ev.vecs.T) @ pmat.T
    ninv = 0.5 * (ninv + ninv.T)
    u = (qb / t) * (vec @ ninv)
    d = weight.shape[0]
    if best["floor"]:
        e = best["E"]
        if e.shape[1]:
            pw, pv = linalg.eigh(0.5 * (best["pi"] + best["pi"].T))
            half = pv * np.sqrt(np.clip(pw, 0.0, None))
            g = np.sqrt(qb * eta) * (ninv @ e @ half)
        else:
            g = np.zeros((d, 0))
    elif comp.shape[1]:
        wr = span.T @ weight @ span
        wu = comp.T @ weight @ span  # (d-r, r)
        corr = comp @ (wu @ linalg.solve(wr, span.T, assume_a="pos"))
        u = u + u @ corr.T
        schur = comp.T @ weight @ comp - wu @ linalg.solve(wr, wu.T, assume_a="pos")
        schur = 0.5 * (schur + schur.T)
        sw, sv = linalg.eigh(schur)
        g = comp @ (sv * np.sqrt(np.clip(sw, 0.0, None)))
    else:
        g = np.zeros((d, 0))
    return FactoredDual(support=idx, multipliers=lam, directions=u, floor_factor=g)
