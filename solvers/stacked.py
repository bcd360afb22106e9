r"""Many small programs at once, each from a neighbour's support: the restricted duals, stacked.

A trajectory of close problems (one domain, a drifting query; :func:`dpopt.design_covariance_batch`)
mostly keeps its optimal support from one problem to the next. For ``n`` programs
:math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s^{(i)\top}_j\Sigma^{-1}s^{(i)}_j \le q_i`
(:math:`\eta = 0`, one :math:`W`, the same number ``J`` of vectors, row ``j`` of every set the
same record pair) :func:`solve_on_support` maximises each reduced dual

.. math::

    T_i(\mu) = \operatorname{tr}\Big(\sum_{j\in K_i}\mu_j\,y^{(i)}_jy^{(i)\top}_j\Big)^{1/2},
    \qquad y^{(i)}_j = L^\top s^{(i)}_j,\ W = LL^\top,

over the simplex on a working set :math:`K_i` per program, started at a neighbour's support
and dual weights. Each program is first priced at its start: the vectors whose score
:math:`q^{(i)}_j = y^{(i)\top}_jA_i^{-1/2}y^{(i)}_j` exceeds :math:`(1 - 0.05)\,T_i` join
:math:`K_i` (violated and nearly active vectors: a drifting query makes them active next).
Then the projected Newton method of :func:`solvers.restricted.inner_solve` runs on all of them
with every ``d x d`` and ``k x k`` system of the ``n`` problems in one stacked LAPACK call
(``numpy.linalg`` on ``(n, d, d)`` and ``(n, k, k)`` arrays; working sets padded to a common
``k`` with zero atoms, which add nothing and keep weight 0; problems that have converged drop
out of the stack), and **all** ``J`` vectors of every problem are priced by batched products.
A problem whose pricing closes its gap (:math:`\max_j q^{(i)}_j \le T_i(1 + 0.9\,tol)`, the
reduced-dual optimality condition of the covariance program (the theory page): the working set
then holds the optimal support) is solved: :math:`\Sigma_i = r_i\,L^{-\top}A_i^{1/2}L^{-1}`
with :math:`r_i = \max_j q^{(i)}_j` and the factored dual :math:`\lambda_j = T_i^2\mu_j`,
:math:`u_j = L A_i^{-1/2}y_j/T_i`. The others take their most violated vectors (keeping those of
positive weight) for another round, and are reported unsolved after a few; the caller solves
them from a nearer start or one at a time.

Nothing here is trusted: every answer is certified independently by the caller
(:func:`certificates.stacked.check_stacked`), exactly as a single structured solution is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certificates.problem import FactoredDual
from solvers._types import Solution, SolverStats
from solvers.restricted import SOLVER_NAME, _pair_weights, _triu

__all__ = ["StackedResult", "solve_on_support"]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
#: The stacked eigen-decompositions are trusted while a_min > _RESOLVED a_max (as the single
#: restricted solver's eigh); a problem whose spectrum spreads further goes to the single path.
_RESOLVED = 1e-6
#: Projected-Newton iterations on the shared working set before a problem is given up.
_MAX_ITER = 40
#: Rounds of column generation on the stack (a problem still open after them goes alone).
_ROUNDS = 6
#: At the start, the vectors whose score is within this relative margin of the optimality
#: level T join the working set too (the start is a neighbour's optimum: its nearly active
#: vectors are the ones a drifting query makes active).
_START_MARGIN = 0.05
#: Numbers per block of the stacked pricing.
_BLOCK_NUMBERS = 65536
#: Relative safety on the pricing maximum (the certificate re-verifies and repairs anyway).
_SAFETY = 1e-12
_NAME = f"{SOLVER_NAME} (stacked)"


@dataclass(frozen=True)
class StackedResult:
    """What :func:`solve_on_support` found.

    Attributes
    ----------
    solved : ndarray of bool, shape (n,)
        Problems whose pricing over all of their vectors closed the gap on the shared set.
    solutions : list of Solution or None
        One per problem: the covariance, its factored dual and the solver's own (untrusted)
        bounds in ``stats.extra`` (``lower``, ``upper``, ``gap``); ``None`` when unsolved. The
        covariance is scaled to the largest constraint value the pricing found, with a margin
        of 1e-12, but not verified by a pass of its own as ``solve_structured``'s is: certify
        it (:func:`certificates.stacked.check_stacked` scales it to proven feasibility).
    iterations : int
        Stacked projected-Newton iterations.
    """

    solved: BoolArray
    solutions: list[Solution | None]
    iterations: int


def _spectra(atoms: FloatArray, mu: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigen-decompositions of :math:`A_i = \\sum_j \\mu_{ij} y_{ij}y_{ij}^\\top`, stacked."""
    amat = np.matmul(atoms.transpose(0, 2, 1) * mu[:, None, :], atoms)
    a, v = np.linalg.eigh(0.5 * (amat + amat.transpose(0, 2, 1)))
    return a, v


def _gather(vectors: FloatArray, members: NDArray[np.intp], whiten: FloatArray,
            problems: NDArray[np.intp] | None = None) -> FloatArray:
    """Whitened working-set atoms of every problem (or of the stack's ``problems``, one row of
    ``members`` each); index -1 pads with a zero atom (it adds nothing to A, scores 0 and
    keeps weight 0)."""
    rows = (np.arange(vectors.shape[0]) if problems is None else problems)[:, None]
    atoms = np.matmul(vectors[rows, np.maximum(members, 0)], whiten)
    atoms[members < 0] = 0.0
    return np.asarray(atoms)


def _price(vectors: FloatArray, rows: NDArray[np.intp], whiten: FloatArray, a: FloatArray,
           v: FloatArray) -> FloatArray:
    r""":math:`q_{ij} = |A_i^{-1/4}V_i^\top L_i^\top s_{ij}|^2` for every vector of the
    problems ``rows`` of the stack, in blocks of problems (each block's vectors gathered on
    its own: no copy of the whole stack)."""
    count, d = vectors.shape[1:]
    n = rows.size
    factor = np.matmul(whiten, v * (a ** -0.25)[:, None, :])
    step = max(1, _BLOCK_NUMBERS // (count * d))
    out = np.empty((n, count))
    for lo in range(0, n, step):
        zs = np.matmul(vectors[rows[lo:lo + step]], factor[lo:lo + step])
        out[lo:lo + step] = np.einsum("njd,njd->nj", zs, zs)
    return out


def _newton(atoms: FloatArray, mu: FloatArray, tol: float,
            spectra: tuple[FloatArray, FloatArray] | None = None,
            ) -> tuple[FloatArray, FloatArray, FloatArray, BoolArray, int]:
    """Projected Newton (:func:`solvers.restricted._projected_newton`) on every problem at
    once; returns ``(mu, a, V, ok, iterations)`` with ``ok`` the problems that reached the
    restricted KKT gap ``tol`` with a resolved spectrum. ``spectra``: the eigen-decompositions
    of the starting matrices when already computed."""
    n, k, p = atoms.shape
    i0, i1, _ = _triu(p)
    pair_w = _pair_weights(p)
    a, v = _spectra(atoms, mu) if spectra is None else (spectra[0].copy(), spectra[1].copy())
    alive = a[:, 0] > _RESOLVED * a[:, -1]
    done = np.zeros(n, dtype=bool)
    it = 0
    eye = np.eye(k)
    while it < _MAX_ITER:
        run = np.flatnonzero(alive & ~done)
        if not run.size:
            break
        y, m, ar, vr = atoms[run], mu[run], a[run], v[run]
        t = np.sum(np.sqrt(ar), axis=1)
        # the atoms in the eigenbasis: the gradient q_j / T - 1 (q_j = |A^{-1/4}V^T y_j|^2)
        # and, below, the Hessian's rows both read them
        z = np.matmul(y, vr)
        grad = np.matmul(z * z, (ar ** -0.5)[:, :, None])[:, :, 0] / t[:, None] - 1.0
        kkt = grad.max(axis=1)
        conv = kkt <= tol
        done[run[conv]] = True
        keep = ~conv
        if not np.any(keep):
            break
        it += 1
        run, y, m, ar, vr, t, grad, z = (run[keep], y[keep], m[keep], ar[keep], vr[keep],
                                         t[keep], grad[keep], z[keep])
        scale = t * t
        ms = scale[:, None] * m
        positive = ms > 0
        residual = np.max(np.where(positive, np.abs(grad), np.maximum(grad, 0.0)), axis=1)
        eps = np.minimum(1e-4, residual) * scale / k
        fixed = (ms <= eps[:, None]) & (grad <= 0)
        rt = np.sqrt(scale[:, None] * ar)
        r0, r1 = np.take(rt, i0, axis=1), np.take(rt, i1, axis=1)
        w = pair_w * np.sqrt(2.0 / (r0 * r1 * (r0 + r1)))
        # np.take: several times faster than fancy indexing on the last axis of a stack
        rows = np.take(z, i0, axis=2) * np.take(z, i1, axis=2) * w[:, None, :]
        hess = np.matmul(rows, rows.transpose(0, 2, 1))
        tau = 1e-12 * np.maximum(np.max(np.diagonal(hess, axis1=1, axis2=2), axis=1),
                                 1e-300) + 1e-300
        couple = fixed[:, :, None] | fixed[:, None, :]
        hess = np.where(couple, 0.0, hess) + eye * (tau[:, None, None] + fixed[:, :, None])
        rhs = np.where(fixed, 0.0, grad)
        try:
            step = np.linalg.solve(hess, rhs[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            alive[run] = False
            break
        step = np.where(fixed, -ms, step)
        cond_floor = np.maximum(1e-25, 1e-6 * ar[:, 0] / ar[:, -1])
        longest = np.max(np.abs(step), axis=1)
        alpha = np.where(longest > 0, np.minimum(1.0, scale / np.maximum(longest, 1e-300)), 1.0)
        pending = np.ones(run.size, dtype=bool)
        new_mu, new_a, new_v = np.empty_like(m), np.empty_like(ar), np.empty_like(vr)
        totals = np.ones(run.size)
        for _ in range(60):
            sel = np.flatnonzero(pending)
            if not sel.size:
                break
            trial = np.maximum(ms[sel] + alpha[sel, None] * step[sel], 0.0)
            predicted = np.sum(grad[sel] * (trial - ms[sel]), axis=1)
            total = trial.sum(axis=1)
            ta, tv = _spectra(y[sel], trial)
            t_new = np.sum(np.sqrt(np.clip(ta, 0.0, None)), axis=1)
            cond = ta[:, 0] / np.maximum(ta[:, -1], 1e-300)
            f0 = scale[sel]
            f_new = 2.0 * t_new - total
            tiny = (predicted >= 0) & (predicted <= 1e-11 * np.abs(f0))
            armijo = f_new >= f0 + 1e-4 * predicted - 4e-16 * np.abs(f0)
            ok = (cond > cond_floor[sel]) & (total > 0) & (tiny | armijo)
            good = sel[ok]
            new_mu[good], new_a[good], new_v[good] = trial[ok], ta[ok], tv[ok]
            totals[good] = total[ok]
            pending[good] = False
            alpha[sel[~ok]] *= 0.5
        alive[run[pending]] = False  # no acceptable step: the single path decides
        moved = ~pending
        upd = run[moved]
        tot = totals[moved]
        mu[upd] = new_mu[moved] / tot[:, None]
        a[upd] = new_a[moved] / tot[:, None]
        v[upd] = new_v[moved]
        alive[upd] &= a[upd, 0] > _RESOLVED * a[upd, -1]
    return mu, a, v, alive & done, it


def solve_on_support(
    vectors: FloatArray,
    weight: FloatArray,
    bounds: FloatArray,
    support: NDArray[np.intp],
    weights: FloatArray,
    tol: float,
) -> StackedResult:
    """Solve every program of a stack from its working set (see the module docstring).

    Parameters
    ----------
    vectors : ndarray, shape (n, J, d)
        The programs' vectors (finite; checked by the caller's ``CovarianceProgram``).
    weight : ndarray, shape (d, d)
        W, shared (symmetric positive definite).
    bounds : ndarray, shape (n,)
        The programs' add/remove bounds q_i > 0.
    support : ndarray of int, shape (k,) or (n, k)
        The working set: one shared by every program, or one per program (row ``i``: rows of
        set ``i``, padded with -1 to the common width ``k``); its entries pairwise distinct. A
        program whose working set holds fewer than d rows is left unsolved.
    weights : ndarray, shape (k,) or (n, k)
        Starting weights on it (a neighbour's dual multipliers; any positive scale; ignored
        at padding entries).
    tol : float
        The solver's target relative gap (the caller certifies each answer to its own ``tol``).

    Returns
    -------
    StackedResult
    """
    n, count, d = vectors.shape
    unsolved = StackedResult(np.zeros(n, dtype=bool), [None] * n, 0)
    members = np.asarray(support, dtype=np.intp)
    w0 = np.asarray(weights, dtype=np.float64)
    if members.ndim == 1:  # one working set for every program
        members, w0 = np.tile(members, (n, 1)), np.tile(w0, (n, 1))
    if n == 0 or members.shape != (n, members.shape[-1]) or w0.shape != members.shape:
        return unsolved
    members = np.where((members >= 0) & (members < count), members, -1)
    w0 = np.where((members >= 0) & np.isfinite(w0), np.clip(w0, 0.0, None), 0.0)
    w_sum = w0.sum(axis=1)
    startable = (np.sum(members >= 0, axis=1) >= d) & (w_sum > 0)
    if not np.any(startable):
        return unsolved
    # normalised units of each program (solvers.scaling): vectors / c_i, W / omega, q = 1
    omega = float(np.linalg.eigvalsh(0.5 * (weight + weight.T))[-1])
    try:
        chol = np.linalg.cholesky(0.5 * (weight + weight.T) / omega)
    except np.linalg.LinAlgError:
        return unsolved
    mean_sq = np.einsum("njd,njd->n", vectors, vectors) / count
    usable = (mean_sq > 1e-200) & (mean_sq < 1e200) & np.isfinite(mean_sq) & startable
    c = np.sqrt(np.where(usable, mean_sq, 1.0))
    whiten = chol[None, :, :] / c[:, None, None]  # y = s @ whiten_i
    atoms = _gather(vectors, members, whiten)  # -1: a padding zero atom
    usable &= np.all(np.isfinite(atoms), axis=(1, 2))
    mu = w0 / np.where(w_sum > 0, w_sum, 1.0)[:, None]
    inner = max(1e-13, 0.1 * tol)
    add = max(2 * d, 16)
    solved = np.zeros(n, dtype=bool)
    r, t = np.zeros(n), np.ones(n)
    final_a, final_v = np.ones((n, d)), np.tile(np.eye(d), (n, 1, 1))
    final_mu: list[FloatArray] = [mu[i] for i in range(n)]
    final_members: list[NDArray[np.intp]] = [members[i] for i in range(n)]
    live = np.flatnonzero(usable)
    iterations = 0
    for rnd in range(_ROUNDS + 1):
        if not live.size:
            break
        if rnd == 0:  # price at the start: its violators join before the first Newton step
            a, v = _spectra(atoms[live], mu[live])
            resolved = a[:, 0] > _RESOLVED * a[:, -1]  # the others are left to the single path
            live, a, v = live[resolved], a[resolved], v[resolved]
            if not live.size:
                break
            mu_l = mu[live]
            ok = np.ones(live.size, dtype=bool)
            start = (a, v)  # the first Newton round starts at the same matrices
        else:
            mu_l, a, v, ok, its = _newton(atoms[live], mu[live], inner,
                                          start if rnd == 1 else None)
            iterations += its
        # pricing: every vector of every program, q_ij = |A_i^{-1/4} V_i^T y_ij|^2
        q = _price(vectors, live, whiten[live], a, v)
        tl = np.sum(np.sqrt(a), axis=1)
        rl = q.max(axis=1)
        closed = ok & (rl / tl - 1.0 <= 0.9 * tol) & (rnd > 0)
        for pos in np.flatnonzero(closed).tolist():
            i = int(live[pos])
            solved[i], r[i], t[i] = True, rl[pos], tl[pos]
            final_mu[i], final_a[i], final_v[i] = mu_l[pos].copy(), a[pos], v[pos]
            final_members[i] = members[i].copy()
        # the others take their most violated vectors (column generation, as one solve does);
        # a working set keeps its vectors of positive weight (one dropped at weight 0 comes
        # back through the pricing if it is needed), so it stays near the support's size
        grow = np.flatnonzero(ok & ~closed)
        if not grow.size:
            if rnd == 0:
                continue
            break
        rows_g = live[grow]
        mem_g = members[rows_g]
        # at the start (a neighbour's optimum) the nearly active vectors join as well: a
        # drifting query makes them active next, and one Newton round then mostly suffices
        margin = _START_MARGIN if rnd == 0 else -0.5 * inner
        threshold = (tl[grow] * (1.0 - margin))[:, None]
        scores = np.full((grow.size, count + 1), -np.inf)  # column `count`: the padding's
        scores[:, :count] = np.where(q[grow] > threshold, q[grow], -np.inf)
        np.put_along_axis(scores, np.where(mem_g >= 0, mem_g, count), -np.inf, axis=1)
        m = min(add, count)
        top = np.argpartition(-scores[:, :count], m - 1, axis=1)[:, :m]
        fresh = np.take_along_axis(scores, top, axis=1) > -np.inf
        cont = fresh.any(axis=1) if rnd else np.ones(grow.size, dtype=bool)
        if not np.any(cont):
            break
        held = (mem_g >= 0) if rnd == 0 else (mem_g >= 0) & (mu_l[grow] > 0)
        mask = np.concatenate([held, fresh], axis=1)[cont]
        order = np.argsort(~mask, axis=1, kind="stable")
        width = max(int(mask.sum(axis=1).max()), members.shape[1] if rnd == 0 else 1)
        packed_m = np.take_along_axis(np.concatenate([mem_g, top], axis=1)[cont], order, axis=1)
        packed_w = np.take_along_axis(np.concatenate(
            [mu_l[grow], np.zeros(top.shape)], axis=1)[cont], order, axis=1)
        valid = np.take_along_axis(mask, order, axis=1)
        new_members = np.full((n, width), -1, dtype=np.intp)
        new_mu = np.zeros((n, width))
        if rnd == 0:  # every program goes on to its Newton steps, grown or not
            new_members[:, :members.shape[1]], new_mu[:, :members.shape[1]] = members, mu
        go = rows_g[cont]
        cols = min(width, packed_m.shape[1])
        new_members[go] = -1
        new_mu[go] = 0.0
        new_members[go, :cols] = np.where(valid, packed_m, -1)[:, :cols]
        new_mu[go, :cols] = np.where(valid, packed_w, 0.0)[:, :cols]
        members, mu = new_members, new_mu
        atoms = _gather(vectors, members, whiten)
        live = live if rnd == 0 else go  # after the start's pricing every program goes on
    idx = np.flatnonzero(solved)
    solutions: list[Solution | None] = [None] * n
    if not idx.size:
        return StackedResult(solved, solutions, iterations)
    a, v, r, t = final_a[idx], final_v[idx], r[idx], t[idx]
    # Sigma_i = (c_i^2 / q_i) r_i L^-T A^{1/2} L^-1 in the caller's units (normalised W / omega
    # does not change Sigma); the value and the bound scale by omega c^2 / q
    linv = np.linalg.inv(chol)
    root = np.matmul(v * np.sqrt(a)[:, None, :], v.transpose(0, 2, 1))
    sig_n = np.matmul(np.matmul(linv.T, root), linv)
    cs = c[idx] ** 2 / bounds[idx]
    sigma = (cs * r * (1.0 + _SAFETY))[:, None, None] * sig_n
    sigma = 0.5 * (sigma + sigma.transpose(0, 2, 1))
    # the factored dual: u_j = L A^{-1/2} y_j / T, the polar factor of the rows sqrt(mu_j) y_j
    # divided by sqrt(mu_j), with A^{-1/2} from the final eigen-decomposition (A = R^T R for
    # those rows; no SVD). Rows padded with -1 gather zero atoms and are dropped below.
    width = max(int(final_members[i].size) for i in idx.tolist())
    padded = np.full((idx.size, width), -1, dtype=np.intp)
    weights_on = np.zeros((idx.size, width))
    for pos, i in enumerate(idx.tolist()):
        mem, mu_i = final_members[i], final_mu[i]
        on = (mu_i > 0) & (mem >= 0)
        padded[pos, :mem.size] = np.where(on, mem, -1)
        weights_on[pos, :mem.size] = np.where(on, mu_i, 0.0)
    inv_root = np.matmul(v * (a ** -0.5)[:, None, :], v.transpose(0, 2, 1))
    dirs_all = np.matmul(np.matmul(_gather(vectors, padded, whiten[idx], idx), inv_root),
                         chol.T) / t[:, None, None]
    for pos, i in enumerate(idx.tolist()):
        on = padded[pos] >= 0
        mem = padded[pos][on]
        mu_i = weights_on[pos][on]
        ti = float(t[pos])
        ratio = float(c[i]) / float(bounds[i])  # Normalisation.dual: u = u' q / c, ...
        u_n = dirs_all[pos][on]
        lam_n = ti * ti * mu_i
        dual = FactoredDual(support=np.asarray(mem, dtype=np.intp),
                            multipliers=lam_n * (omega * ratio * ratio), directions=u_n / ratio,
                            floor_factor=np.zeros((d, 0)))
        scale_v = omega * float(cs[pos])
        lower = ti * ti * scale_v
        upper = float(r[pos]) * ti * scale_v
        stats = SolverStats(
            solver=_NAME, iterations=iterations, passes=1,
            extra={"lower": lower, "upper": upper, "gap": upper / lower - 1.0, "tol": tol,
                   "support": int(mem.size),
                   "working_set": int(np.sum(final_members[i] >= 0)),
                   "stacked": n},
        )
        solutions[i] = Solution(covariance=sigma[pos], value=upper, dual=dual, status="optimal",
                                stats=stats, message="")
    return StackedResult(solved, solutions, iterations)
