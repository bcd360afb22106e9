r"""Binding noise floors for any weight: projected Newton on the vector weights and the floor block.

In whitened coordinates (:math:`W = LL^\top`, normalised units, :math:`q = 1`) the reduced dual of
:math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s_j^\top\Sigma^{-1}s_j \le 1`,
:math:`\Sigma \succeq \eta I` maximises

.. math::

    f(\mu, \Pi) = 2\operatorname{tr}A^{1/2} - \sum_i\mu_i - \operatorname{tr}\Pi,\qquad
    A = \sum_i \mu_i y_iy_i^\top + B\Pi B^\top,\quad B = \sqrt\eta\,L^\top,

over :math:`\mu \ge 0` and :math:`\Pi \succeq 0` (:math:`d \times d`): the floor is the constraint
:math:`x^\top\Sigma^{-1}x \le 1` for every :math:`|x|^2 = \eta`, and :math:`\Pi` its multiplier
(the covariance program of the theory page, "The covariance program", with the ball of radius
:math:`\sqrt\eta` added to the sensitivity set). With :math:`W = I` the best :math:`\Pi` for fixed
:math:`\mu` is known in closed form (:mod:`solvers.floored`); with any other :math:`W` the floor's
cost :math:`\operatorname{tr}\Pi` and the whitened block :math:`L^\top\Pi L` do not commute and
no such elimination exists. Here :math:`\Pi` stays a variable, held as
:math:`\Pi = U\operatorname{diag}(\pi)U^\top` with orthonormal :math:`U` and :math:`\pi > 0`
(only the clamped eigenspace carries weight), and :math:`f` is maximised by projected Newton
(Bertsekas, "Projected Newton methods for optimization problems with simple constraints") on the
product of the orthant and the PSD cone:

* the gradient is :math:`q_i - 1` (:math:`q_i = y_i^\top A^{-1/2}y_i`) and
  :math:`Q - I` with :math:`Q = B^\top A^{-1/2}B = \eta\Sigma_\mu^{-1}` in the original
  coordinates, so the whole floor is priced with every iterate (no floor direction enters by
  column generation);
* weights and floor directions at (nearly) zero that the gradient pushes out are held at zero;
  the free floor directions are those of :math:`U` and the eigenvectors of :math:`Q - I` on the
  complement of :math:`U` with a positive eigenvalue;
* the Newton system on the free coordinates (vector weights and :math:`\operatorname{svec}` of
  the free block of :math:`\Pi`) is the Daleckii–Krein Hessian of :math:`2\operatorname{tr}
  A^{1/2}`; the step is searched along the projected arc (weights clipped at zero, the floor
  block projected onto the PSD cone by its eigen-decomposition), so any number of weights and
  floor directions may leave in one step;
* :math:`f` is positively homogeneous of degree 1/2 in :math:`A` and linear in the mass, so every
  iterate is rescaled to its best multiple, where :math:`f = T^2` with
  :math:`T = \operatorname{tr}A^{1/2}` and the restricted KKT gap is
  :math:`\max(\max_i q_i, \lambda_{\max}(Q)) - 1`.

No barrier is needed (the log-det barrier it replaces followed a central path, restarted after
every pricing pass). The certificate is built and checked outside: :mod:`solvers.structured`
maps :math:`(\mu, \Pi)` to the factored dual and :mod:`certificates.covariance` re-checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certificates.errors import SolverError
from solvers.restricted import (
    _DIRECT_FLOPS,
    SOLVER_NAME,
    _cho,
    _cho_solve,
    _smat,
    _svec,
    _syrk,
    _triu,
    jacobi_cg,
    step_accepted,
)

__all__ = ["FloorBlock", "floor_block_solve", "lift_to_floor"]

FloatArray = NDArray[np.float64]
#: eigh of the assembled A is trusted when a_min > _EIGH_RESOLVED a_max (else SVD of its factor).
_EIGH_RESOLVED = 1e-6
#: A step may not make A more singular than this (relative smallest eigenvalue).
_RANK_RTOL = 1e-26
#: Floor directions whose weight falls below this fraction of the largest weight are dropped.
_DROP_RTOL = 1e-15
#: The cross entries of the kept floor directions with every other direction join the Newton
#: step while there are at most this many (else only those along the gradient's coupling).
_CROSS_MAX = 4000
#: Iterations without halving the KKT gap after which a solve is reported as stalled.
_STALL_ITER = 25
#: Marquardt's ridge of the Newton system: this times min(1, max|gradient|) times diag(H).
_RIDGE = 1e-3
#: A floor direction whose gradient u^T Q u - 1 exceeds this is filled before the Newton step
#: (:func:`_fill_violated`).
_FILL_GRADIENT = 1.0
#: Trials of the fill, each a quarter of the previous weight.
_FILL_TRIALS = 40


@dataclass
class FloorBlock:
    r"""The working set of a floor-mode solve, unnormalised (:math:`f` homogeneous form).

    Attributes
    ----------
    atoms : ndarray, shape (k, p)
        Whitened vector atoms :math:`y_i`.
    mu : ndarray, shape (k,)
        Their weights.
    floor : ndarray, shape (p, d)
        :math:`B`: the whitened floor atoms of the :math:`d` coordinate directions.
    basis : ndarray, shape (d, n)
        :math:`U`, orthonormal: the directions of the floor block that carry weight.
    weights : ndarray, shape (n,)
        :math:`\pi > 0`: :math:`\Pi = U\operatorname{diag}(\pi)U^\top`.
    """

    atoms: FloatArray
    mu: FloatArray
    floor: FloatArray
    basis: FloatArray
    weights: FloatArray

    def total(self) -> float:
        return float(self.mu.sum() + self.weights.sum())


@dataclass
class _Point:
    a: FloatArray  # eigenvalues of A, ascending
    v: FloatArray  # eigenvectors of A


def _spectrum(block: FloorBlock, mu: FloatArray, basis: FloatArray,
              weights: FloatArray) -> _Point:
    """Eigen-decomposition of A: ``eigh`` of the assembled matrix when it resolves the spectrum,
    else from the SVD of its factor (small eigenvalues to a relative error ~ u sqrt(cond))."""
    fu = block.floor @ basis
    amat = (block.atoms.T * mu) @ block.atoms + (fu * weights) @ fu.T
    a, v = np.linalg.eigh(0.5 * (amat + amat.T))
    if a[0] > _EIGH_RESOLVED * a[-1]:
        return _Point(a, v)
    rows = np.concatenate([block.atoms * np.sqrt(np.clip(mu, 0.0, None))[:, None],
                           (fu * np.sqrt(np.clip(weights, 0.0, None))).T])
    _, sv, vt = np.linalg.svd(rows, full_matrices=True)
    a = np.zeros(block.atoms.shape[1])
    a[: sv.size] = sv * sv
    order = np.argsort(a)
    return _Point(a[order], vt.T[:, order])


def _rescale(block: FloorBlock, pt: _Point) -> _Point:
    """Scale (mu, Pi) to the best multiple: f(c nu) is largest at c = T(nu)^2 (sum nu = 1)."""
    t = float(np.sum(np.sqrt(np.clip(pt.a, 0.0, None))))
    s = block.total()
    c = t * t / (s * s)
    block.mu = block.mu * c
    block.weights = block.weights * c
    return _Point(pt.a * c, pt.v)


def lift_to_floor(sig_w: FloatArray, sig_v: FloatArray, weight: FloatArray, eta: float,
                  scale: float) -> tuple[FloatArray, float, float]:
    r"""The cheapest repair of a floor violation along the eigenvectors of a candidate.

    With :math:`\Sigma = V\operatorname{diag}(\sigma)V^\top` and :math:`c\Sigma` feasible for
    the vector constraints, :math:`\hat\Sigma = c\Sigma + V\operatorname{diag}((\eta -
    c\sigma_i)_+)V^\top` meets the floor and keeps them (:math:`\hat\Sigma \succeq c\Sigma`,
    so :math:`s^\top\hat\Sigma^{-1}s \le s^\top(c\Sigma)^{-1}s`), at the cost
    :math:`c\operatorname{tr}W\Sigma + \sum_i(\eta - c\sigma_i)_+v_i^\top Wv_i`. Scaling the
    whole of :math:`\Sigma` by :math:`\eta/\sigma_{\min}` instead pays for a violation in a
    direction that :math:`W` weighs lightly as if it were everywhere: with an ill-conditioned
    :math:`W` that is what kept the certified gap of a solve whose value had converged far
    above the value's accuracy.

    Returns the lift :math:`(\eta - c\sigma_i)_+` (per eigenvector),
    :math:`\operatorname{tr}W\Sigma` and the lift's cost.
    """
    wdiag = np.einsum("ia,ij,ja->a", sig_v, weight, sig_v)
    lift = np.maximum(eta - scale * sig_w, 0.0)
    return lift, float(sig_w @ wdiag), float(lift @ wdiag)


def _lifted_gap(block: FloorBlock, q: FloatArray, gw: FloatArray, gv: FloatArray) -> float:
    r"""The restricted gap certified by :func:`lift_to_floor` at the rescaled point (where
    :math:`f = T = \operatorname{tr}W\Sigma_\mu`): with :math:`r = \max(1, \max_i q_i)` and
    the eigenpairs :math:`(\kappa_i, u_i)` of :math:`Q = \eta\Sigma_\mu^{-1}` (``gw`` those of
    :math:`Q - I`), :math:`r - 1 + \sum_{\kappa_i > r}(1 - r/\kappa_i)|Bu_i|^2/T`, since
    :math:`|Bu|^2 = \eta u^\top Wu`."""
    r = max(1.0, float(q.max()) if q.size else 1.0)
    kappa = gw + 1.0
    over = kappa > r
    reach = block.floor @ gv[:, over]
    lift = float((1.0 - r / kappa[over]) @ np.einsum("ij,ij->j", reach, reach))
    return r - 1.0 + lift / block.total()


def _fill_violated(block: FloorBlock, gw: FloatArray, gv: FloatArray,
                   cond_floor: float) -> _Point | None:
    r"""Weight on the floor directions whose gradient :math:`\kappa - 1 = u^\top Qu - 1` exceeds
    ``_FILL_GRADIENT``: :math:`\Pi + \sum_u t_u uu^\top`, with :math:`t_u` first the weight
    :math:`|Bu|^2` that puts :math:`u` on the floor when nothing else covers it (as
    :func:`_seed_floor`), then quartered until :math:`f` increases.

    A direction of :math:`A` starved of weight is a square-root singularity of :math:`f`: the
    quadratic model under-steps there (a Newton step at most doubles the weight) and the
    projected Newton method crawls, its KKT gap growing while :math:`f` barely changes (seen
    with ill-conditioned :math:`W` above :math:`d = 30`). Returns the new point (``block``
    updated) or ``None`` when no trial increases :math:`f`."""
    over = gw > _FILL_GRADIENT
    dirs = gv[:, over]
    fb = block.floor @ dirs
    proj = dirs.T @ block.basis
    have = np.einsum("ja,a,ja->j", proj, block.weights, proj)
    add = np.maximum(np.einsum("ij,ij->j", fb, fb) - have, 0.0)
    f0 = block.total()
    half = block.basis * np.sqrt(block.weights)
    for _ in range(_FILL_TRIALS if np.any(add > 0) else 0):
        # the new block from the SVD of its factor [U diag(pi)^1/2, D diag(t)^1/2]: its small
        # weights keep their relative accuracy (an eigh of the assembled block would not)
        left, sv, _ = np.linalg.svd(np.concatenate([half, dirs * np.sqrt(add)], axis=1),
                                    full_matrices=False)
        pw = sv * sv
        keep = pw > _DROP_RTOL * float(pw[0])
        pv = left
        trial = _spectrum(block, block.mu, pv[:, keep], pw[keep])
        f_new = 2.0 * float(np.sum(np.sqrt(np.clip(trial.a, 0.0, None)))) - float(
            block.mu.sum() + pw[keep].sum())
        if f_new > f0 * (1.0 + 1e-13) and trial.a[0] > cond_floor * trial.a[-1]:
            block.basis, block.weights = pv[:, keep], pw[keep]
            return _rescale(block, trial)
        add = 0.25 * add
    return None


def _sym(mat: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (mat + mat.T), dtype=np.float64)


def _complement(basis: FloatArray, d: int) -> FloatArray:
    """An orthonormal basis of the orthogonal complement of ``basis`` (columns)."""
    if basis.shape[1] == 0:
        return np.eye(d)
    q, _ = np.linalg.qr(basis, mode="complete")
    return np.asarray(q[:, basis.shape[1]:], dtype=np.float64)


def _entering(basis: FloatArray, kept: FloatArray, gmat: FloatArray,
              threshold: float) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    r"""Directions off the floor block that join the Newton step, on the complement :math:`Z`
    of ``basis``: the eigenvectors of :math:`Z^\top GZ` with a positive eigenvalue (the floor
    is violated there: they may take weight) and, orthogonal to them, the range of the coupling
    :math:`Z^\top GU` to the kept directions (singular values above ``threshold``: the range of
    the block must rotate towards them; only the cross entries move, the weight they gain is of
    second order, from the PSD projection). The third value holds the eigenvalues of the
    gradient block of the coupled directions when they are its eigenvectors (else ``None``)."""
    d = gmat.shape[0]
    comp = _complement(basis, d)
    if not comp.shape[1]:
        return comp, comp, np.zeros(0)
    gz = comp.T @ gmat
    cw, cv = np.linalg.eigh(gz @ comp)
    pos = cv[:, cw > 0]
    coupled = np.zeros((comp.shape[1], 0))
    eigs: FloatArray | None = np.zeros(0)
    if kept.shape[1]:
        if kept.shape[1] * (cw <= 0).sum() <= _CROSS_MAX:
            coupled, eigs = cv[:, cw <= 0], cw[cw <= 0]
        else:
            cross = gz @ kept
            left, sv, _ = np.linalg.svd(cross - pos @ (pos.T @ cross), full_matrices=False)
            coupled, eigs = left[:, sv > threshold], None
    return (np.asarray(comp @ pos, dtype=np.float64),
            np.asarray(comp @ coupled, dtype=np.float64), eigs)


def _rotation_curvature(coupled: FloatArray, gmat: FloatArray, kept_w: FloatArray,
                        n_e: int, eigs: FloatArray | None) -> tuple[FloatArray, FloatArray]:
    r"""The coupled directions in the eigenbasis of their gradient block and the curvature of
    the rotation: a cross entry :math:`\Pi_{az}` of a kept direction (weight :math:`\pi_a`)
    and a coupled one keeps :math:`\Pi` PSD only with :math:`\Pi_{zz} \ge
    \Pi_{az}^2/\pi_a`, which changes :math:`f` by :math:`G_{zz}\Pi_{az}^2/\pi_a` to second
    order: in svec coordinates (:math:`x = \sqrt2\,\Pi_{az}`) the term
    :math:`\max(-G_{zz}, 0)/\pi_a` on the diagonal of the negated Hessian (0 elsewhere).
    ``eigs``: the eigenvalues when ``coupled`` is already that eigenbasis."""
    n_k = kept_w.size
    n_c = coupled.shape[1]
    i0, i1 = _triu(n_k + n_e + n_c)[:2]
    curv = np.zeros(i0.size)
    if not n_c or not n_k:
        return coupled, curv
    if eigs is None:
        eigs, cv = np.linalg.eigh(coupled.T @ gmat @ coupled)
        coupled = coupled @ cv
    cw = eigs
    cross = (i0 < n_k) & (i1 >= n_k + n_e)
    curv[cross] = np.maximum(-cw[i1[cross] - n_k - n_e], 0.0) / kept_w[i0[cross]]
    return np.asarray(coupled, dtype=np.float64), curv


def _pair_mask(n_k: int, n_e: int, n_c: int) -> NDArray[np.bool_]:
    """The svec entries of the free floor block that are variables: every pair of kept and
    entering directions, and coupled directions with kept ones only (the block between
    directions of zero weight moves only with weight on them)."""
    i0, i1 = _triu(n_k + n_e + n_c)[:2]
    return np.asarray(~((i0 >= n_k) & ((i0 >= n_k + n_e) | (i1 >= n_k + n_e))))


def _seed_floor(block: FloorBlock) -> None:
    r"""A first floor block where the vector weights alone violate the floor: the eigenvectors
    :math:`u` of :math:`Q = B^\top A^{-1/2}B` (at the best multiple of the weights) with
    :math:`Q_{uu} > 1` get :math:`\pi_u = |Bu|^2`, the weight that puts the floor's part of
    :math:`A` at :math:`|Bu|^4` along :math:`Bu` (with :math:`W = I` the closed form's
    :math:`\eta` on an uncovered direction). The Newton steps correct it; a start on the
    floor keeps them away from the nearly singular :math:`A` of the vectors alone."""
    pt = _rescale(block, _spectrum(block, block.mu, block.basis, block.weights))
    if not pt.a[-1] > 0:
        return
    a = np.maximum(pt.a, _RANK_RTOL * float(pt.a[-1]))
    comp = _complement(block.basis, block.floor.shape[1])
    gs = (pt.v.T @ (block.floor @ comp)) * a[:, None] ** -0.25
    qw, qv = np.linalg.eigh(gs.T @ gs)
    violated = comp @ qv[:, qw > 1.0]
    if violated.shape[1]:
        fu = block.floor @ violated
        sw, sv = np.linalg.eigh(fu.T @ fu)
        keep = sw > 0
        block.basis = np.concatenate([block.basis, violated @ sv[:, keep]], axis=1)
        block.weights = np.concatenate([block.weights, sw[keep]])


def floor_block_solve(block: FloorBlock, tol: float, max_iter: int,
                      seed: bool = False) -> tuple[FloorBlock, int, bool]:
    r"""Maximise :math:`f(\mu, \Pi)` over the working set by projected Newton (module docstring).

    Stops when the restricted KKT gap :math:`\max(\max_i q_i, \lambda_{\max}(Q))/T - 1`, or
    the smaller gap certified by lifting the floor's violations (:func:`_lifted_gap`), is at
    most ``tol``, or when no step improves :math:`f`. ``block`` is updated in place and returned
    at its best multiple, with the number of Newton iterations and whether the gap reached
    ``tol``.
    ``seed``: first put weight on the directions
    where the floor is violated (:func:`_seed_floor`), for a cold start.
    """
    k = block.atoms.shape[0]
    d = block.floor.shape[1]
    if block.total() <= 0:
        raise SolverError(f"{SOLVER_NAME}: the floor block starts without weight")
    if seed:
        _seed_floor(block)
    pt = _rescale(block, _spectrum(block, block.mu, block.basis, block.weights))
    if not pt.a[0] > _RANK_RTOL * pt.a[-1]:
        raise SolverError(f"{SOLVER_NAME}: the floor-mode working set does not span; remedy: "
                          "use solver='clarabel'")
    it = 0
    stall = 0
    converged = False
    history: list[float] = []
    # |B|^2: the floor weights of directions that W weighs lightly are small by that ratio
    reach_scale = float(np.linalg.norm(block.floor, 2)) ** 2 if block.floor.size else 1.0
    while it < max_iter:
        it += 1
        a, v = pt.a, pt.v
        a4 = a**-0.25
        zs = (block.atoms @ v) * a4
        q = np.einsum("ij,ij->i", zs, zs)
        gs = (v.T @ block.floor) * a4[:, None]
        gmat = gs.T @ gs
        gmat = 0.5 * (gmat + gmat.T)
        gmat.flat[::d + 1] -= 1.0  # the gradient in Pi: Q - I
        gw, gv = np.linalg.eigh(gmat)
        top = float(gw[-1])
        # the KKT gap, or the gap certified by lifting the floor's violations where W is light
        # (smaller only when the floor's violation is the larger)
        vector_kkt = float(q.max()) - 1.0 if k else -1.0
        kkt = max(vector_kkt, top)
        if top > max(vector_kkt, 0.0, tol):
            kkt = min(kkt, _lifted_gap(block, q, gw, gv))
        if kkt <= tol:
            converged = True
            break
        # a stall (the KKT gap not halved in _STALL_ITER iterations) is reported to the caller
        history.append(kkt)
        if _stalled(history):
            break
        if top > _FILL_GRADIENT:
            filled = _fill_violated(block, gw, gv, max(_RANK_RTOL * 10,
                                                       1e-6 * float(pt.a[0] / pt.a[-1])))
            if filled is not None:
                pt = filled
                continue
        grad = q - 1.0
        scale = block.total()
        mu, basis, weights = block.mu, block.basis, block.weights
        n = weights.size
        gu = np.einsum("ia,ij,ja->a", basis, gmat, basis)
        # epsilon-active sets (weights and floor directions at zero that the gradient pushes out)
        residual = max(
            float(np.max(np.where(mu > 0, np.abs(grad), np.maximum(grad, 0.0)))) if k else 0.0,
            float(np.max(np.abs(gu))) if n else 0.0, max(top, 0.0))
        eps = min(1e-4, residual) * scale / max(k + n, 1)
        active_v = (mu <= eps) & (grad <= 0)
        # (a floor direction's weight is measured against its reach |Bu|^2 / |B|^2: the light
        # directions of an ill-conditioned W carry weights that small at the optimum, and
        # holding them at zero by the absolute test made them leave and re-enter every step)
        reach = block.floor @ basis
        active_f = (weights <= eps * np.einsum("ij,ij->j", reach, reach) / reach_scale) & (gu <= 0)
        kept = basis[:, ~active_f]
        entering, coupled, eigs = _entering(basis, kept, gmat, 0.1 * tol)
        idx = np.flatnonzero(~active_v)
        z = block.atoms[idx] @ v
        n_kept = kept.shape[1]
        # the step must not push an entering direction (weight 0) below zero, which the PSD
        # projection would undo: such directions keep only their cross entries with the kept
        # ones, and the step is re-solved
        kept_w = weights[~active_f]
        for _ in range(4):
            n_e = entering.shape[1]
            coupled, curv = _rotation_curvature(coupled, gmat, kept_w, n_e, eigs)
            free_dirs = np.concatenate([kept, entering, coupled], axis=1)
            n_f = free_dirs.shape[1]
            mask = _pair_mask(n_kept, n_e, coupled.shape[1])
            gfree = _svec(free_dirs.T @ gmat @ free_dirs)[mask]
            small = _newton_step(z, v.T @ (block.floor @ free_dirs), a,
                                 np.concatenate([grad[idx], gfree]), kkt, mask,
                                 curv[mask])
            step = np.zeros(idx.size + mask.size)
            step[: idx.size] = small[: idx.size]
            step[idx.size:][mask] = small[idx.size:]
            if not n_e:
                break
            dblock = _smat(step[idx.size:], n_f)
            ew, ev = np.linalg.eigh(dblock[n_kept:n_kept + n_e, n_kept:n_kept + n_e])
            if ew[0] >= -1e-12 * max(float(np.max(np.abs(dblock))), 1e-300):
                break
            coupled = np.concatenate([coupled, entering @ ev[:, ew <= 0]], axis=1)
            eigs = None
            entering = entering @ ev[:, ew > 0]
        free_w = np.concatenate([weights[~active_f], np.zeros(n_f - n_kept)])
        dmu = np.zeros(k)
        dmu[idx] = step[: idx.size]
        dmu[active_v] = -mu[active_v]
        dblock = _smat(step[idx.size:], n_f) if n_f else np.zeros((0, 0))
        old_inner = float(weights @ gu)  # <Q - I, Pi>
        act_dirs, act_w = basis[:, active_f], weights[active_f]
        gact = gu[active_f]
        cond_floor = max(_RANK_RTOL * 10, 1e-6 * float(a[0] / a[-1]))
        f0 = scale  # f = 2T - mass = T^2 = mass at the rescaled point
        longest = float(np.max(np.abs(step))) if step.size else 0.0
        alpha = min(1.0, scale / longest) if longest > 0 else 1.0
        accepted = False
        for _ in range(60):
            mu_new = np.maximum(mu + alpha * dmu, 0.0)
            clipped = bool(np.any(mu + alpha * dmu < 0))
            if n_f:
                kw, kv = np.linalg.eigh(np.diag(free_w) + alpha * dblock)
                # the projection of a rotation of the block clips at second order (weight
                # ~ x^2 / pi): only a clip of the first order counts as one
                clipped |= bool(-float(kw.min()) > 1e-9 * float(kw.max()))
                pos = kw > 0
                new_dirs, new_w = free_dirs @ kv[:, pos], kw[pos]
            else:
                new_dirs, new_w = np.zeros((d, 0)), np.zeros(0)
            rest = act_w * (1.0 - alpha)
            inner = float(np.einsum("ia,ij,ja->a", new_dirs, gmat, new_dirs) @ new_w)
            inner += float(rest @ gact)
            new_dirs = np.concatenate([new_dirs, act_dirs], axis=1)
            new_w = np.concatenate([new_w, rest])
            keep = new_w > _DROP_RTOL * max(float(new_w.max()) if new_w.size else 0.0, 1e-300)
            new_dirs, new_w = new_dirs[:, keep], new_w[keep]
            predicted = float(grad @ (mu_new - mu)) + inner - old_inner
            trial = _spectrum(block, mu_new, new_dirs, new_w)
            t_new = float(np.sum(np.sqrt(np.clip(trial.a, 0.0, None))))
            mass = float(mu_new.sum() + new_w.sum())
            f_new = 2.0 * t_new - mass
            cond = float(trial.a[0] / max(float(trial.a[-1]), 1e-300))
            if cond > cond_floor and mass > 0 and step_accepted(f_new, f0, predicted,
                                                                clipped=clipped):
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            break
        block.mu, block.basis, block.weights = mu_new, new_dirs, new_w
        pt = _rescale(block, trial)
        if block.total() <= f0 * (1 + 1e-15):
            stall += 1
            if stall > 8:
                break
        else:
            stall = 0
    return block, it, converged


def _stalled(history: list[float]) -> bool:
    """Whether the best KKT gap of the last ``_STALL_ITER`` iterations is not half the best
    before them.

    The best values, not the current one against the one ``_STALL_ITER`` back: a step that
    nearly collapses A's conditioning (accepted when it raises f) sends the gap up for one
    iteration and the fill that follows brings it back, and such a spike ended a converging
    solve (d = 60, cond(W) = 1e6: the gap from 0.37 to 0.042 in 25 iterations, then one step to
    92, reported as a stall under some BLAS kernels' rounding).
    """
    if len(history) <= _STALL_ITER:
        return False
    return min(history[-_STALL_ITER:]) > 0.5 * min(history[:-_STALL_ITER])


def _factor_rows(z: FloatArray, gf: FloatArray, a: FloatArray,
                 mask: NDArray[np.bool_]) -> tuple[FloatArray, FloatArray]:
    """Rows X with ``-Hessian of T = X X^T`` (Daleckii-Krein, as
    :func:`solvers.restricted._hessian_factor`), the floor rows only for the svec entries in
    ``mask`` (the block between zero-weight directions is never formed)."""
    rt = np.sqrt(a)
    i0, i1, _ = _triu(a.size)
    gam = 1.0 / (rt[i0] * rt[i1] * (rt[i0] + rt[i1]))
    w = np.sqrt(np.where(i0 == i1, 0.5 * gam, gam))
    xv = z[:, i0] * z[:, i1] * w
    e0, e1 = _triu(gf.shape[1])[:2]
    e0, e1 = e0[mask], e1[mask]
    if not e0.size:
        return xv, np.empty((0, xv.shape[1]))
    g0, g1 = gf[i0], gf[i1]
    sym = g0[:, e0] * g1[:, e1] + g0[:, e1] * g1[:, e0]
    scale = np.where(e0 == e1, 0.5, np.sqrt(0.5))
    return xv, (sym * scale).T * w


def _newton_step(z: FloatArray, gf: FloatArray, a: FloatArray, g: FloatArray,
                 kkt: float, mask: NDArray[np.bool_], curv: FloatArray) -> FloatArray:
    """The Newton step on (vector weights, svec of the free floor block): the Hessian formed and
    factored while that is cheap, else conjugate gradients on Hessian-vector products. The
    Hessian is singular along changes of the weights that leave A unchanged (more free
    coordinates than p(p+1)/2, where f is linear), and the floor block's coordinates live on
    another scale than the vector weights' (``eta`` small, ``W`` ill-conditioned): Marquardt's
    scaled ridge ``lam diag(H)``, ``lam = _RIDGE min(1, max|g|)``, bounds a step along the null
    space whatever the scales and vanishes with the gradient (quadratic convergence)."""
    p = a.size
    lam = _RIDGE * min(1.0, float(np.max(np.abs(g)))) if g.size else 0.0
    if g.size**2 * p * (p + 1) / 2 > _DIRECT_FLOPS:
        return _newton_cg(z, gf, a, g, min(0.1, float(np.sqrt(max(kkt, 1e-16)))), lam, mask,
                          curv)
    xv, xf = _factor_rows(z, gf, a, mask)
    rows = np.concatenate([xv, xf]) if xf.shape[0] else xv
    # (a GEMM beats the rank-k update plus symmetrisation on the small systems)
    hess = 2.0 * (rows @ rows.T) if rows.shape[0] <= 256 else 2.0 * _syrk(rows)
    n = hess.shape[0]
    hess.flat[xv.shape[0] * (n + 1)::n + 1] += curv
    diag = hess.diagonal().copy()
    tau = 1e-12 * max(float(np.max(diag)), 1e-300) + 1e-300
    hess.flat[::n + 1] += np.maximum(lam * diag, tau)
    return np.asarray(_cho_solve(_cho(hess, tau), g), dtype=np.float64)


def _newton_cg(z: FloatArray, gf: FloatArray, a: FloatArray, g: FloatArray,
               rtol: float, lam: float, mask: NDArray[np.bool_],
               curv: FloatArray) -> FloatArray:
    r"""Solve :math:`(-\nabla^2 2T)\delta = g` on (vector weights, svec of the floor block) by
    Jacobi-preconditioned conjugate gradients on Hessian-vector products: with
    :math:`D = Z^\top\operatorname{diag}(\delta_\mu)Z + G\,\Delta_\Pi G^\top` (eigenbasis of A),
    the product is :math:`(z_i^\top(\Gamma\circ D)z_i,\ \operatorname{svec}G^\top(\Gamma\circ D)G)`,
    :math:`\Gamma_{ab} = 1/(r_ar_b(r_a + r_b))`, :math:`r = \sqrt a`."""
    rt = np.sqrt(a)
    gam = 1.0 / (rt[:, None] * rt[None, :] * (rt[:, None] + rt[None, :]))
    k = z.shape[0]
    n_f = gf.shape[1]

    def hess(x: FloatArray) -> FloatArray:
        dmat = (z.T * x[:k]) @ z
        if n_f:
            full = np.zeros(mask.size)
            full[mask] = x[k:]
            dmat = dmat + gf @ _smat(full, n_f) @ gf.T
        kmat = gam * dmat
        out_v = np.einsum("ij,ij->i", z @ kmat, z)
        if not n_f:
            return np.asarray(out_v)
        return np.concatenate([out_v, _svec(gf.T @ kmat @ gf)[mask] + curv * x[k:]])

    zz = z * z
    diag_v = np.einsum("ij,ij->i", zz @ gam, zz)
    if n_f:
        # diagonal of the floor part: e_ab -> (g_a g_b^T + g_b g_a^T)/sqrt 2 (g_a g_a^T on a = b)
        i0, i1 = _triu(n_f)[:2]
        i0, i1 = i0[mask], i1[mask]
        ga, gb = gf[:, i0], gf[:, i1]
        cross = ga * gb
        quad_aa = np.einsum("ci,ci->i", ga * ga, gam @ (gb * gb))
        quad_ab = np.einsum("ci,ci->i", cross, gam @ cross)
        diag_f = np.where(i0 == i1, quad_aa, quad_aa + quad_ab) + curv
        diag = np.concatenate([diag_v, diag_f])
    else:
        diag = diag_v
    tau = np.maximum(lam * diag, 1e-12 * max(float(diag.max()), 1e-300) + 1e-300)
    diag = diag + tau
    return jacobi_cg(lambda v: hess(v) + tau * v, g, diag, rtol)
