r"""A certified sup of the two-record quadratic form over a box: records anywhere in :math:`K`.

For the ideal denoiser at a fixed query :math:`g` with noise scale :math:`\sigma`, the add/remove
sensitivity of a release :math:`m_g(D) + N(0, \Sigma)` over datasets with records in a set
:math:`K` is governed by (the two-record theorem, derived on the theory page: every deletion
shift is a sub-convex combination of two-record vectors)

.. math::

    \rho^* = \sup_{x, y \in K} t_g(x, y)^\top A\, t_g(x, y), \qquad
    t_g(x, y) = \operatorname{expit}(z)\,(x - y), \qquad
    z = \frac{|g - y|^2 - |g - x|^2}{2\sigma^2},

with :math:`A = \Sigma^{-1}`. :func:`certified_box_sup` returns, for an axis-aligned box
:math:`K = \prod_i [\ell_i, u_i]` and any :math:`A \succ 0`, a **proven upper bound** and an
**attained lower bound** (with the pair :math:`(x, y)` attaining it) on :math:`\rho^*`. It uses
numpy, scipy and exact rational arithmetic only, so the bound can be re-derived from
:math:`(K, g, \sigma, A)` alone.

Reduction to the difference box
-------------------------------
Write :math:`x = c + \delta/2`, :math:`y = c - \delta/2`. Then :math:`x - y = \delta` and
:math:`z = \delta^\top (g - c)/\sigma^2`. For a fixed difference :math:`\delta` the quadratic form
does not depend on :math:`c` and expit is increasing, so the sup over :math:`c` maximises
:math:`\delta^\top(g - c)` over the feasible midpoints
:math:`c_i \in [\ell_i + |\delta_i|/2,\ u_i - |\delta_i|/2]`, coordinate by coordinate:

.. math::

    \rho^* = \sup_{\delta \in \prod_i [-L_i, L_i]}
        \operatorname{expit}\!\big(h(\delta)/\sigma^2\big)^2\, \delta^\top A \delta, \qquad
    h(\delta) = \sum_i \varphi_i(\delta_i), \qquad
    \varphi_i(\delta_i) = \max(a_i\delta_i, -b_i\delta_i) - \tfrac12 \delta_i^2,

with :math:`L_i = u_i - \ell_i`, :math:`a_i = g_i - \ell_i`, :math:`b_i = u_i - g_i`. A
maximiser :math:`\delta` gives the pair :math:`x_i = \ell_i + \delta_i, y_i = \ell_i`
(:math:`\delta_i \ge 0`) or :math:`x_i = u_i + \delta_i, y_i = u_i` (:math:`\delta_i < 0`). This
halves the dimension of the search (d instead of 2d) and makes :math:`z` exact per coordinate.

Why branch-and-bound with a mean-value bound
--------------------------------------------
A Lipschitz bound converges only linearly in the node width :math:`w` and needs a global
Lipschitz constant, which is large for small :math:`\sigma`. The decoupled bound
:math:`\operatorname{expit}(h_{\max}/\sigma^2)^2 \max_{\text{node}} \delta^\top A \delta` is
excellent on large nodes far from the maximiser but is also first order: about
:math:`\varepsilon^{-d/2}` nodes survive at relative gap :math:`\varepsilon`. Here every node
:math:`B = [p, r]` lies in one orthant (the root is split at :math:`\delta_i = 0`, where
:math:`\varphi_i` has its kink), where :math:`F(\delta) = E(h(\delta))\,Q(\delta)`,
:math:`E(h) = \operatorname{expit}(h/\sigma^2)^2`, :math:`Q = |R\delta|^2`, is smooth. The node
bound is the smaller of

- the decoupled bound :math:`E(\max_B h)\,\max_B Q`, and
- the mean-value form :math:`F(m) + \sum_i w_i \max |G_i|`, with :math:`m` the node centre,
  :math:`w` its half-widths and :math:`G` an interval enclosure of :math:`\nabla F` over
  :math:`B` (:math:`\nabla F = E'(h)\,Q\,\nabla h + E(h)\, 2R^\top R\delta`,
  :math:`E'(h) = 2\sigma^{-2} \operatorname{expit}(z)^2\operatorname{expit}(-z)`).

Near an interior maximiser the gradient enclosure is :math:`O(w)` around 0, and near a maximiser
on a face of the box it has a fixed sign, so the mean-value form overestimates the node maximum by
:math:`O(w^2)`: a bounded number of nodes survives per level of refinement and the gap falls
geometrically. Nodes are processed best-first in vectorised batches; the incumbent comes from a
multi-start local search (L-BFGS-B on :math:`\log F`) and from every node centre evaluated.

Rigour
------
- **Interval arithmetic with outward rounding.** Every bound is computed in interval arithmetic
  on (lower, upper) float arrays; after each correctly rounded IEEE operation the lower end is
  moved one ulp down and the upper one ulp up (``numpy.nextafter``), which contains the exact
  result. ``expit`` is not correctly rounded: its results are widened by a relative
  :math:`2^{-48}` (the C library's ``exp`` is accurate to about one ulp) and an absolute
  :math:`2^{-1020}` (subnormal results); the final bound gets an absolute :math:`10^{-300}`
  for underflow in the sums. Matrix-vector products
  use the standard bound :math:`|\mathrm{fl}(Rm) - Rm| \le \gamma_{d+1} |R||m|` (Higham,
  "Accuracy and Stability of Numerical Algorithms", chapter 3).
- **The matrix.** With a factor :math:`R` given, :math:`A = R^\top R` is used as is. Otherwise a
  float factor :math:`\hat R` is computed and a constant :math:`c \ge 1` with
  :math:`A \preceq c\,\hat R^\top\hat R` is **proven in exact rational arithmetic**: for a given
  precision :math:`A` by Sylvester's criterion on :math:`c\hat R^\top\hat R - A`; for a given
  covariance :math:`\Sigma` (:math:`A = \Sigma^{-1}`) on the block matrix
  :math:`\begin{pmatrix} c\hat R^\top\hat R & I \\ I & \Sigma\end{pmatrix}`, positive definite
  iff :math:`c\hat R^\top\hat R \succ \Sigma^{-1}` (Schur complement). The returned upper bound
  is :math:`c` times the branch-and-bound bound.
- **Upper bound.** Every node leaves the open list either split (its children cover it) or
  discarded, and the largest discarded bound is kept: the final bound is the largest of the
  discarded and still-open bounds, valid whenever the search stops (node budget reached or
  not). Nothing depends on the incumbent except how much work is done.
- **Lower bound.** The reported pair :math:`(x, y)` is a pair of floats in :math:`K`, and
  ``lower`` is an interval-arithmetic lower bound of :math:`t_g(x, y)^\top A\, t_g(x, y)` at that
  pair, evaluated from the original formula (for a covariance, through
  :math:`t^\top\Sigma^{-1}t \ge 2v^\top t - v^\top\Sigma v` for any :math:`v`).

The search stops at relative gap ``tol`` (``upper <= lower (1 + tol)``) or after ``max_nodes``
node evaluations; it never raises for lack of convergence, it reports the gap.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.rigorous import ExactArray, _bareiss_positive
from certificates.validate import as_float_array, as_scalar

__all__ = ["BoxSup", "certified_box_sup", "local_maximisers", "two_record_form_bounds"]

_U = 2.0**-53
_F = np.float64
Arr = NDArray[np.float64]

#: relative widening of every expit result (the C library exp is accurate to ~1 ulp)
_EXPIT_REL = 2.0**-48


def _gamma(n: int) -> float:
    return (n * _U / (1.0 - n * _U)) * (1.0 + 1e-6)


def _dn(x: Arr) -> Arr:
    return np.nextafter(x, -np.inf)


def _up(x: Arr) -> Arr:
    return np.nextafter(x, np.inf)


# ---------------------------------------------------------------- interval arithmetic
# An interval array is a pair (lo, hi) of float arrays of one shape, lo <= hi.

Iv = tuple[Arr, Arr]


def _add(a: Iv, b: Iv) -> Iv:
    return _dn(a[0] + b[0]), _up(a[1] + b[1])


def _sub(a: Iv, b: Iv) -> Iv:
    return _dn(a[0] - b[1]), _up(a[1] - b[0])


def _mul(a: Iv, b: Iv) -> Iv:
    p1, p2, p3, p4 = a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]
    lo = np.minimum(np.minimum(p1, p2), np.minimum(p3, p4))
    hi = np.maximum(np.maximum(p1, p2), np.maximum(p3, p4))
    return _dn(lo), _up(hi)


def _mul_nonneg(a: Iv, b: Iv) -> Iv:
    """Product of two intervals with non-negative ends."""
    return _dn(a[0] * b[0]), _up(a[1] * b[1])


def _sqr(a: Iv) -> Iv:
    mag_hi = np.maximum(np.abs(a[0]), np.abs(a[1]))
    mag_lo = np.where((a[0] <= 0) & (a[1] >= 0), 0.0, np.minimum(np.abs(a[0]), np.abs(a[1])))
    return _dn(mag_lo * mag_lo), _up(mag_hi * mag_hi)


def _sum_nonneg(a: Iv, axis: int = -1) -> Iv:
    """Sum of intervals with non-negative ends along an axis."""
    n = a[0].shape[axis]
    g = _gamma(max(n, 2))
    return (_dn(np.sum(a[0], axis=axis) * (1.0 - g)), _up(np.sum(a[1], axis=axis) * (1.0 + g)))


def _sum(a: Iv, axis: int = -1) -> Iv:
    """Sum of signed intervals: |fl(sum) - sum| <= gamma_n sum |terms|."""
    n = a[0].shape[axis]
    g = _gamma(max(n, 2))
    lo_s = np.sum(a[0], axis=axis)
    hi_s = np.sum(a[1], axis=axis)
    lo_e = _up(np.sum(np.abs(a[0]), axis=axis) * (g * (1.0 + 4.0 * n * _U)))
    hi_e = _up(np.sum(np.abs(a[1]), axis=axis) * (g * (1.0 + 4.0 * n * _U)))
    return _dn(_dn(lo_s) - lo_e), _up(_up(hi_s) + hi_e)


def _linear(mat: Arr, abs_mat: Arr, a: Iv) -> Iv:
    r"""Enclosure of :math:`\{M v : v \in [lo, hi]\}` for rows v (shape (N, d) -> (N, k)).

    With the midpoint m (a float inside the interval) and radius rad >= |v - m|:
    :math:`Mv \in \mathrm{fl}(Mm) \pm (\gamma_{d+1}|M||m| + |M|\,\mathrm{rad})`, the error of the
    bound itself covered by a relative :math:`4(d+2)u`.
    """
    lo, hi = a
    mid = np.clip(lo + 0.5 * (hi - lo), lo, hi)
    rad = _up(np.maximum(hi - mid, mid - lo))
    d = mat.shape[1]
    y = mid @ mat.T
    err = (_gamma(d + 1) * (np.abs(mid) @ abs_mat.T) + rad @ abs_mat.T) * (1.0 + 4.0 * (d + 2) * _U)
    err = _up(err)
    return _dn(y - err), _up(y + err)


#: absolute widening of expit results (a subnormal result carries no relative accuracy)
_EXPIT_ABS = 2.0**-1020


def _expit_iv(z: Iv) -> tuple[Iv, Iv]:
    """Enclosures of expit(z) and expit(-z) = 1 - expit(z) (monotone)."""
    s = (np.maximum(expit(z[0]) * (1.0 - _EXPIT_REL) - _EXPIT_ABS, 0.0),
         np.minimum(expit(z[1]) * (1.0 + _EXPIT_REL) + _EXPIT_ABS, 1.0))
    t = (np.maximum(expit(-z[1]) * (1.0 - _EXPIT_REL) - _EXPIT_ABS, 0.0),
         np.minimum(expit(-z[0]) * (1.0 + _EXPIT_REL) + _EXPIT_ABS, 1.0))
    return (_dn(s[0]), _up(s[1])), (_dn(t[0]), _up(t[1]))


# ---------------------------------------------------------------- the matrix


def _exact_block(blocks: list[list[ExactArray]]) -> NDArray[np.object_]:
    scale = max(b.scale for row in blocks for b in row)
    rows = [np.concatenate([b.ints * (1 << (scale - b.scale)) for b in row], axis=1)
            for row in blocks]
    return np.concatenate(rows, axis=0)


def _certify_factor(
    precision: Arr | None, covariance: Arr | None, factor: Arr | None
) -> tuple[Arr, float]:
    r"""A float factor R and c >= 1 with :math:`A \preceq c R^\top R`, proven exactly."""
    if factor is not None:
        return factor, 1.0
    if precision is not None:
        r_hat = cholesky(precision, lower=False)
        target = ExactArray.of(precision)
    else:
        assert covariance is not None
        low = cholesky(covariance, lower=True)
        r_hat = solve_triangular(low, np.eye(low.shape[0]), lower=True)
        target = None
    d = r_hat.shape[0]
    rr = ExactArray.of(r_hat)
    gram = rr.T @ rr
    eig = np.linalg.eigvalsh(r_hat.T @ r_hat)
    kappa = float(eig[-1] / max(eig[0], 1e-300))
    for margin in (2.0**-40, 2.0**-30, 2.0**-20, 2.0**-12, 2.0**-6, 0.25):
        c = 1.0 + margin
        scaled = ExactArray.of(np.array(c)) * gram
        if target is not None:
            ok = _bareiss_positive((scaled - target).ints)
        else:
            assert covariance is not None
            eye = ExactArray.of(np.eye(d))
            block = _exact_block([[scaled, eye], [eye, ExactArray.of(covariance)]])
            ok = _bareiss_positive(block)
        if ok:
            return r_hat, c
    name = "precision" if precision is not None else "covariance"
    mat = precision if precision is not None else covariance
    raise InvalidParameterError(
        name, mat, f"is too ill-conditioned to certify (condition number about {kappa:.3g})"
    )


# ---------------------------------------------------------------- the problem


@dataclass(frozen=True)
class _Problem:
    lower: Arr
    upper: Arr
    query: Arr
    sigma: float
    factor: Arr
    abs_factor: Arr
    factor_t: Arr
    abs_factor_t: Arr
    a: Iv  # g - l
    b: Iv  # u - g
    k: Iv  # 1 / sigma^2
    lengths: Arr
    dim: int


def _make_problem(lower: Arr, upper: Arr, query: Arr, sigma: float, factor: Arr) -> _Problem:
    g, lo, hi = query, lower, upper
    s2 = sigma * sigma
    s2_lo, s2_hi = float(_dn(np.array(s2))), float(_up(np.array(s2)))
    k = (np.array(_dn(np.array(1.0 / s2_hi))), np.array(_up(np.array(1.0 / s2_lo))))
    return _Problem(
        lower=lo, upper=hi, query=g, sigma=sigma, factor=factor, abs_factor=np.abs(factor),
        factor_t=np.ascontiguousarray(factor.T), abs_factor_t=np.abs(factor.T),
        a=(_dn(g - lo), _up(g - lo)), b=(_dn(hi - g), _up(hi - g)), k=k,
        lengths=hi - lo, dim=int(g.shape[0]),
    )


@dataclass(frozen=True)
class _Bounds:
    upper: Arr  # node upper bounds
    centre: Arr  # node centres (N, d)
    centre_lo: Arr  # float estimate of F at the centre (for the incumbent)
    split: NDArray[np.intp]  # coordinate to bisect


def _node_bounds(pb: _Problem, p: Arr, r: Arr, sign: Arr) -> _Bounds:
    """Rigorous upper bounds of F over the nodes [p, r] (each inside the orthant ``sign``)."""
    pos = sign > 0
    # e = |delta| in [e_lo, e_hi], coefficient cf = a (positive orthant) or b (negative)
    e_lo = np.where(pos, p, -r)
    e_hi = np.where(pos, r, -p)
    cf = (np.where(pos, pb.a[0], pb.b[0]), np.where(pos, pb.a[1], pb.b[1]))
    mid = np.clip(p + 0.5 * (r - p), p, r)
    half = _up(np.maximum(r - mid, mid - p))

    # --- enclosure over the node
    # phi = cf e - e^2/2, concave in e >= 0: max at clip(cf_hi, e) with cf_hi, min at an end
    e_star = np.clip(cf[1], e_lo, e_hi)
    sq_star = _sqr((e_star, e_star))
    phi_hi = _sub(_mul((cf[1], cf[1]), (e_star, e_star)), (0.5 * sq_star[0], 0.5 * sq_star[1]))[1]
    sq_lo_end = _sqr((e_lo, e_lo))
    sq_hi_end = _sqr((e_hi, e_hi))
    phi_at_lo = _sub(_mul((cf[0], cf[0]), (e_lo, e_lo)), (0.5 * sq_lo_end[0], 0.5 * sq_lo_end[1]))
    phi_at_hi = _sub(_mul((cf[0], cf[0]), (e_hi, e_hi)), (0.5 * sq_hi_end[0], 0.5 * sq_hi_end[1]))
    phi_lo = np.minimum(phi_at_lo[0], phi_at_hi[0])
    h = _sum((phi_lo, phi_hi))
    z = _mul(pb.k, h)
    s, t = _expit_iv(z)
    big_e = _sqr(s)
    v = _linear(pb.factor, pb.abs_factor, (p, r))
    q = _sum_nonneg(_sqr(v))
    decoupled = _up(big_e[1] * q[1])

    # gradient enclosure: dF_i = E'(h) Q dh_i + E(h) dQ_i
    de = _mul_nonneg((2.0 * pb.k[0], 2.0 * pb.k[1]), _mul_nonneg(big_e, t))
    dh_e = _sub(cf, (e_lo, e_hi))  # d phi / d e = cf - e
    dh = (np.where(pos, dh_e[0], -dh_e[1]), np.where(pos, dh_e[1], -dh_e[0]))
    dq = _linear(pb.factor_t, pb.abs_factor_t, v)
    dq = (2.0 * dq[0], 2.0 * dq[1])
    eq = _mul_nonneg(de, q)
    grad = _add(_mul((eq[0][:, None], eq[1][:, None]), dh),
                _mul((big_e[0][:, None], big_e[1][:, None]), dq))
    gmax = np.maximum(np.abs(grad[0]), np.abs(grad[1]))
    lin = _up(np.sum(_up(gmax * half), axis=1) * (1.0 + _gamma(pb.dim + 1)))

    # --- F at the centre (point enclosure)
    ec = np.abs(mid)
    sq_c = _sqr((ec, ec))
    phi_c = _sub(_mul(cf, (ec, ec)), (0.5 * sq_c[0], 0.5 * sq_c[1]))
    hc = _sum(phi_c)
    sc, _ = _expit_iv(_mul(pb.k, hc))
    ec2 = _sqr(sc)
    qc = _sum_nonneg(_sqr(_linear(pb.factor, pb.abs_factor, (mid, mid))))
    fc_hi = _up(ec2[1] * qc[1])
    fc_lo = ec2[0] * qc[0]
    meanvalue = _up(fc_hi + lin)
    bound = np.minimum(decoupled, meanvalue)
    bound = np.where(np.isfinite(bound), bound, np.inf)

    score = gmax * half
    widest = (r - p) / np.where(pb.lengths > 0, pb.lengths, 1.0)
    split = np.where(np.max(score, axis=1, keepdims=True) > 0, score, widest)
    split = np.where(r > p, split, -1.0)  # never split a degenerate coordinate
    return _Bounds(upper=bound, centre=mid, centre_lo=fc_lo,
                   split=np.argmax(split, axis=1).astype(np.intp))


# ---------------------------------------------------------------- float objective (search)


def _log_f_batch(pb: _Problem, delta: Arr) -> tuple[Arr, Arr]:
    """log F and its gradient at the rows of ``delta`` (float; for the local search only)."""
    pos = delta >= 0
    e = np.abs(delta)
    cf = np.where(pos, pb.query - pb.lower, pb.upper - pb.query)
    h = np.sum(cf * e - 0.5 * e * e, axis=1)
    kk = 1.0 / (pb.sigma * pb.sigma)
    v = delta @ pb.factor.T
    q = np.einsum("ij,ij->i", v, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = 2.0 * log_expit(kk * h) + np.log(q)
        dh = np.where(pos, cf - e, e - cf)
        grad = (2.0 * kk * expit(-kk * h))[:, None] * dh + 2.0 * (v @ pb.factor) / q[:, None]
    bad = ~np.isfinite(val)
    val = np.where(bad, -np.inf, val)
    grad = np.where(bad[:, None] | ~np.isfinite(grad), 0.0, grad)
    return val, grad


def _ascend(pb: _Problem, starts: Arr, iters: int = 300, *,
            stop_when_still: bool = True) -> tuple[Arr, Arr]:
    """Projected gradient ascent on log F from every start at once, step sizes adapted per
    start (grown after an accepted step, halved after a rejected one); returns every end point
    and its value. ``stop_when_still`` ends the loop once every step is below 1e-13 of the box."""
    lim = pb.lengths
    x = np.clip(np.array(starts, dtype=np.float64), -lim, lim)
    val, grad = _log_f_batch(pb, x)
    step = np.full(x.shape[0], 0.1 * float(np.max(lim)))
    for _ in range(iters):
        gn = np.sqrt(np.einsum("ij,ij->i", grad, grad))
        gn = np.where(gn > 0, gn, 1.0)
        trial = np.clip(x + (step / gn)[:, None] * grad, -lim, lim)
        tv, tg = _log_f_batch(pb, trial)
        ok = tv > val
        x = np.where(ok[:, None], trial, x)
        val = np.where(ok, tv, val)
        grad = np.where(ok[:, None], tg, grad)
        step = np.where(ok, step * 1.5, step * 0.5)
        if stop_when_still and np.all(step < 1e-13 * float(np.max(lim))):
            break
    return x, val


def _local_search(pb: _Problem, starts: Arr, iters: int = 300) -> tuple[Arr, float]:
    """:func:`_ascend` from every start; returns the best end point and its value."""
    x, val = _ascend(pb, starts, iters)
    j = int(np.argmax(val))
    return x[j].copy(), float(val[j])


def _polish(pb: _Problem, x0: Arr) -> tuple[Arr, float]:
    """L-BFGS-B from one point (the final digits of the incumbent)."""
    def fun(x: Arr) -> tuple[float, Arr]:
        val, grad = _log_f_batch(pb, x[None])
        if not np.isfinite(val[0]):
            return 1e300, np.zeros_like(x)
        return -float(val[0]), -grad[0]
    bounds = list(zip(-pb.lengths, pb.lengths, strict=True))
    res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 200, "ftol": 1e-15, "gtol": 1e-13})
    x = np.clip(res.x, -pb.lengths, pb.lengths)
    return x, -float(res.fun)


def local_maximisers(
    lower: ArrayLike, upper: ArrayLike, query: ArrayLike, sigma: float, factor: ArrayLike, *,
    starts: int = 64, seed: int = 0,
) -> tuple[Arr, Arr, Arr]:
    r"""Distinct local maximisers of :math:`|R\,t_g(x, y)|^2` over the box (float search only).

    A heuristic (no guarantee): projected-gradient ascent from the corners of the difference box
    and seeded random points. Used to seed working sets of exchange methods with several worst
    pairs at once.

    Returns
    -------
    x, y : ndarray, shape (k, d)
        The pairs, best first.
    values : ndarray, shape (k,)
        Their float values.
    """
    lo, hi, g = _validate_box(lower, upper, query)
    s = as_scalar("sigma", sigma, low=0.0)
    fac = as_float_array("factor", factor)
    pb = _make_problem(lo, hi, g, s, np.array(fac, dtype=np.float64))
    d = lo.shape[0]
    rng = np.random.default_rng(seed)
    pts = [rng.uniform(-pb.lengths, pb.lengths, (starts, d))]
    if d <= 8:
        bits = (np.arange(2**d)[:, None] >> np.arange(d)[None, :]) & 1
        pts.append((1.0 - 2.0 * bits) * pb.lengths * 0.999)
    x, val = _ascend(pb, np.vstack(pts), 300, stop_when_still=False)
    lim = pb.lengths
    order = np.argsort(-val)
    keep: list[int] = []
    tol_x = 1e-6 * float(np.max(lim))
    for i in order:
        if not np.isfinite(val[i]):
            continue
        if all(np.max(np.abs(x[i] - x[j])) > tol_x for j in keep):
            keep.append(int(i))
    xs, ys = [], []
    for i in keep:
        a, b = _pair_of(pb, x[i])
        xs.append(a)
        ys.append(b)
    vals = np.exp(val[keep]) if keep else np.zeros(0)
    return np.array(xs).reshape(-1, d), np.array(ys).reshape(-1, d), vals


# ---------------------------------------------------------------- the pair and its value


def _pair_of(pb: _Problem, delta: Arr) -> tuple[Arr, Arr]:
    pos = delta >= 0
    x = np.where(pos, pb.lower + delta, pb.upper + delta)
    y = np.where(pos, pb.lower, pb.upper)
    return np.clip(x, pb.lower, pb.upper), y


def _t_interval(x: Arr, y: Arr, g: Arr, sigma: float) -> Iv:
    """Enclosure of t_g(x, y) from the original formula."""
    dx = (_dn(g - x), _up(g - x))
    dy = (_dn(g - y), _up(g - y))
    num = _sub(_sum_nonneg(_sqr(dy)), _sum_nonneg(_sqr(dx)))
    s2 = np.array(sigma * sigma)
    den = (_dn(2.0 * _dn(s2)), _up(2.0 * _up(s2)))
    inv = (_dn(1.0 / den[1]), _up(1.0 / den[0]))
    z = _mul((np.array(num[0]), np.array(num[1])), inv)
    s, _ = _expit_iv(z)
    diff = (_dn(x - y), _up(x - y))
    return _mul((np.broadcast_to(s[0], diff[0].shape), np.broadcast_to(s[1], diff[1].shape)), diff)


def two_record_form_bounds(
    x: ArrayLike, y: ArrayLike, query: ArrayLike, sigma: float, *,
    precision: ArrayLike | None = None, covariance: ArrayLike | None = None,
    factor: ArrayLike | None = None,
) -> tuple[float, float]:
    r"""Proven bounds ``(lower, upper)`` on :math:`t_g(x, y)^\top A\, t_g(x, y)` at one pair.

    Exactly one of ``precision`` (:math:`A`), ``covariance`` (:math:`A = \Sigma^{-1}`) or
    ``factor`` (:math:`A = R^\top R`) is given. Interval arithmetic with outward rounding; for a
    covariance the lower bound is :math:`2v^\top t - v^\top \Sigma v` at
    :math:`v = \mathrm{fl}(\Sigma^{-1} t)` and the upper bound uses a certified factor.
    """
    g = as_float_array("query", query)
    g = g[None] if g.ndim == 0 else g
    xa = as_float_array("x", x).reshape(-1)
    ya = as_float_array("y", y).reshape(-1)
    if xa.shape != g.shape or ya.shape != g.shape:
        raise InvalidParameterError("x", x, f"x and y must be vectors of length {g.shape[0]}")
    s = as_scalar("sigma", sigma, low=0.0)
    prec, cov, fac = _matrix_args(precision, covariance, factor, g.shape[0])
    t = _t_interval(xa, ya, g, s)
    return _form_bounds(t, prec, cov, fac)


def _form_bounds(t: Iv, prec: Arr | None, cov: Arr | None, fac: Arr | None) -> tuple[float, float]:
    if fac is not None:
        q = _sum_nonneg(_sqr(_linear(fac, np.abs(fac), (t[0][None], t[1][None]))))
        return float(q[0][0]), float(q[1][0])
    r_hat, c = _certify_factor(prec, cov, None)
    q = _sum_nonneg(_sqr(_linear(r_hat, np.abs(r_hat), (t[0][None], t[1][None]))))
    upper = float(_up(np.array(q[1][0] * c)) * (1.0 + 2 * _U))
    tm = 0.5 * (t[0] + t[1])
    if prec is not None:
        at = _linear(prec, np.abs(prec), (t[0][None], t[1][None]))
        lower = _sum(_mul((t[0][None], t[1][None]), at))[0][0]
    else:
        assert cov is not None
        v = np.asarray(np.linalg.solve(cov, tm), dtype=np.float64)
        vt = _sum(_mul((v[None], v[None]), (t[0][None], t[1][None])))
        sv = _linear(cov, np.abs(cov), (v[None], v[None]))
        vsv = _sum(_mul((v[None], v[None]), sv))
        lower = _sub((_dn(2.0 * vt[0]), _up(2.0 * vt[1])), vsv)[0][0]
    return max(0.0, float(lower)), upper


def _matrix_args(
    precision: ArrayLike | None, covariance: ArrayLike | None, factor: ArrayLike | None, d: int
) -> tuple[Arr | None, Arr | None, Arr | None]:
    given = [(n, v) for n, v in (("precision", precision), ("covariance", covariance),
                                 ("factor", factor)) if v is not None]
    if len(given) != 1:
        raise InvalidParameterError(
            "precision/covariance/factor", [n for n, _ in given],
            "give exactly one of precision (A), covariance (A = inverse) or factor (A = R^T R)",
        )
    name, val = given[0]
    arr = as_float_array(name, val)
    if arr.ndim != 2 or arr.shape != (d, d):
        raise InvalidParameterError(name, val, f"must be a {d} x {d} matrix")
    if name == "factor":
        if np.linalg.matrix_rank(arr) < d:
            raise InvalidParameterError(name, val, "must be non-singular")
        return None, None, np.array(arr)
    if not np.array_equal(arr, arr.T):
        arr = 0.5 * (arr + arr.T)
        if not np.allclose(arr, np.asarray(val, dtype=float), rtol=1e-10, atol=0.0):
            raise InvalidParameterError(name, val, "must be symmetric")
    try:
        cholesky(arr, lower=True)
    except np.linalg.LinAlgError:
        raise InvalidParameterError(name, val, "must be positive definite") from None
    return (np.array(arr), None, None) if name == "precision" else (None, np.array(arr), None)


# ---------------------------------------------------------------- the search


@dataclass(frozen=True)
class BoxSup:
    r"""Certified bounds on :math:`\sup_{x,y\in K} t_g(x,y)^\top A\,t_g(x,y)` for a box K.

    Attributes
    ----------
    upper : float
        A proven upper bound of the sup (the number to use for privacy accounting).
    lower : float
        A proven lower bound of :math:`t_g(x, y)^\top A\, t_g(x, y)` at the pair below (so the
        sup is at least ``lower``: no design can claim less).
    x, y : ndarray, shape (d,)
        The pair attaining ``lower`` (``x`` is the removed record), both in K.
    gap : float
        ``upper / lower - 1`` (``inf`` when ``lower`` is 0).
    converged : bool
        ``gap <= tol`` was reached within the node budget.
    nodes : int
        Nodes whose bounds were evaluated.
    matrix_margin : float
        The proven :math:`c - 1` with :math:`A \preceq c\,\hat R^\top\hat R` (0 for a factor).
    seconds : float
        CPU time of the search.
    """

    upper: float
    lower: float
    x: Arr
    y: Arr
    gap: float
    converged: bool
    nodes: int
    matrix_margin: float
    seconds: float

    def __float__(self) -> float:
        return float(self.upper)


def _validate_box(lower: ArrayLike, upper: ArrayLike, query: ArrayLike) -> tuple[Arr, Arr, Arr]:
    lo = np.atleast_1d(as_float_array("lower", lower)).astype(np.float64)
    hi = np.atleast_1d(as_float_array("upper", upper)).astype(np.float64)
    g = np.atleast_1d(as_float_array("query", query)).astype(np.float64)
    if lo.ndim != 1:
        raise InvalidParameterError("lower", lower, "must be a vector")
    if hi.shape != lo.shape:
        raise InvalidParameterError("upper", upper, f"must be a vector of length {lo.shape[0]}")
    if np.any(hi < lo):
        raise InvalidParameterError("upper", upper, "must be >= lower in every coordinate")
    if g.shape != lo.shape:
        raise InvalidParameterError("query", query, f"must be a vector of length {lo.shape[0]}")
    return lo, hi, g


def certified_box_sup(
    lower: ArrayLike,
    upper: ArrayLike,
    query: ArrayLike,
    sigma: float,
    *,
    precision: ArrayLike | None = None,
    covariance: ArrayLike | None = None,
    factor: ArrayLike | None = None,
    tol: float = 1e-6,
    max_nodes: int = 2_000_000,
    batch: int = 512,
    starts: int = 32,
    seed: int = 0,
    stop_below: float | None = None,
) -> BoxSup:
    r"""Proven bounds on :math:`\sup_{x, y \in K} t_g(x, y)^\top A\, t_g(x, y)`,
    :math:`K = \prod_i [\ell_i, u_i]`.

    Branch-and-bound over the difference box (see the module docstring for the reduction, the
    bounds and the rounding model), with an incumbent from multi-start local search.

    Parameters
    ----------
    lower, upper : array_like, shape (d,)
        The box, ``lower <= upper``.
    query : array_like, shape (d,)
        The query :math:`g` (anywhere, inside or outside the box).
    sigma : float
        The denoiser noise scale, > 0.
    precision, covariance, factor : array_like, shape (d, d)
        Exactly one: :math:`A` itself, :math:`\Sigma` with :math:`A = \Sigma^{-1}`, or :math:`R`
        with :math:`A = R^\top R`.
    tol : float
        Target relative gap ``upper / lower - 1``.
    max_nodes : int
        Budget of node evaluations; when it is reached the bounds so far are returned (valid,
        with ``converged=False`` and the gap reported).
    batch : int
        Smallest number of nodes bisected per vectorised round (a sixteenth of the open nodes
        when that is more).
    starts : int
        Local-search starts for the incumbent (box corners of the difference box first, then
        seeded random points).
    seed : int
        Seed of the random starts (the result is deterministic).
    stop_below : float, optional
        Also stop as soon as the proven upper bound is at most this value, or a pair is found
        whose value exceeds it (a decision: "is the sup at most ``stop_below``?"); with
        ``tol=0`` the search runs until it decides or the node budget is spent. ``converged``
        still refers to ``tol``.

    Returns
    -------
    BoxSup

    Examples
    --------
    >>> res = certified_box_sup([0.0], [1.0], [0.5], 0.05, precision=[[1.0]])
    >>> res.converged, round(res.lower, 6), bool(res.upper >= res.lower)
    (True, 0.936921, True)
    """
    cpu0 = time.process_time()
    lo, hi, g = _validate_box(lower, upper, query)
    d = lo.shape[0]
    s = as_scalar("sigma", sigma, low=0.0)
    tol = as_scalar("tol", tol, low=0.0, low_open=False)
    stop_at = -math.inf if stop_below is None else as_scalar("stop_below", stop_below)
    for name, val, low in (("max_nodes", max_nodes, 1), ("batch", batch, 1), ("starts", starts, 0)):
        if isinstance(val, bool) or not isinstance(val, int | np.integer) or int(val) < low:
            raise InvalidTypeError(name, val, f"an integer >= {low}")
    prec, cov, fac = _matrix_args(precision, covariance, factor, d)
    r_hat, c = _certify_factor(prec, cov, fac)
    pb = _make_problem(lo, hi, g, s, r_hat)
    lengths = pb.lengths

    if not np.any(lengths > 0):  # a single point: every pair is (x, x) and t = 0
        return BoxSup(0.0, 0.0, lo.copy(), lo.copy(), 0.0, True, 0, c - 1.0,
                      time.process_time() - cpu0)

    # --- incumbent: local search from corners of the difference box and random points
    rng = np.random.default_rng(seed)
    corners = []
    if d <= 10:
        nc = min(2**d, max(starts, 1))
        bits = (np.arange(2**d)[:, None] >> np.arange(d)[None, :]) & 1
        pick = rng.permutation(2**d)[:nc] if 2**d > nc else np.arange(2**d)
        corners = list((1.0 - 2.0 * bits[pick]) * lengths * 0.999)
    rand = list(rng.uniform(-lengths, lengths, (max(starts, 1), d)))
    start_pts = np.array(corners + rand)
    best_delta, best_val = _local_search(pb, start_pts)
    pol, pol_val = _polish(pb, best_delta)
    if pol_val > best_val:
        best_delta, best_val = pol, pol_val
    inc = math.exp(best_val) if np.isfinite(best_val) else 0.0

    # --- root nodes: one per orthant of the non-degenerate coordinates
    free = np.flatnonzero(lengths > 0)
    n_orth = 2 ** len(free) if len(free) <= 16 else None
    if n_orth is None:
        raise InvalidParameterError("lower", lower, "the box may have at most 16 non-flat sides")
    bits = (np.arange(n_orth)[:, None] >> np.arange(len(free))[None, :]) & 1
    p = np.zeros((n_orth, d))
    r = np.zeros((n_orth, d))
    sign = np.ones((n_orth, d))
    p[:, free] = np.where(bits == 1, -lengths[free], 0.0)
    r[:, free] = np.where(bits == 1, 0.0, lengths[free])
    sign[:, free] = np.where(bits == 1, -1.0, 1.0)

    b = _node_bounds(pb, p, r, sign)
    nodes = n_orth
    discarded = 0.0
    it = 0
    open_p, open_r, open_s = p, r, sign
    open_b, open_split, open_c, open_clo = b.upper, b.split, b.centre, b.centre_lo
    while True:
        it += 1
        if open_clo.size:
            j = int(np.argmax(open_clo))
            if open_clo[j] > inc:
                inc, best_delta = float(open_clo[j]), open_c[j].copy()
        keep = open_b > inc * (1.0 + 0.5 * tol)
        if not np.all(keep):
            discarded = max(discarded, float(np.max(open_b[~keep])))
            open_p, open_r, open_s = open_p[keep], open_r[keep], open_s[keep]
            open_b, open_split = open_b[keep], open_split[keep]
            open_c, open_clo = open_c[keep], open_clo[keep]
        top = float(np.max(open_b)) if open_b.size else 0.0
        if open_b.size == 0 or top <= inc * (1.0 + tol) or nodes >= max_nodes:
            break
        if max(top, discarded) * c * (1.0 + 4 * _U) <= stop_at:
            break  # proved: the sup is at most stop_below
        if stop_below is not None and inc * (1.0 - 1e-9) > stop_at:
            break  # disproved (the attained lower bound is recomputed rigorously below)
        if it % 8 == 0:  # local search from the best node centres
            order = (np.argpartition(-open_b, 7)[:8] if open_b.size > 8
                     else np.arange(open_b.size))
            dl, vl = _local_search(pb, np.vstack([best_delta[None], open_c[order]]), 100)
            if np.isfinite(vl) and math.exp(vl) > inc:
                dp, vp = _polish(pb, dl)
                dl, vl = (dp, vp) if vp > vl else (dl, vl)
                inc, best_delta = math.exp(vl), dl
        # best-first in batches; the batch grows with the open list so that the copying of the
        # list per round stays a small share of the bound evaluations
        k = min(max(batch, open_b.size // 16), open_b.size)
        sel = np.argpartition(-open_b, k - 1)[:k] if k < open_b.size else np.arange(open_b.size)
        rest = np.ones(open_b.size, dtype=bool)
        rest[sel] = False
        sp, sr, ss, sj = open_p[sel], open_r[sel], open_s[sel], open_split[sel]
        rows = np.arange(k)
        cut = sp[rows, sj] + 0.5 * (sr[rows, sj] - sp[rows, sj])
        left_r = sr.copy()
        left_r[rows, sj] = cut
        right_p = sp.copy()
        right_p[rows, sj] = cut
        cp = np.concatenate([sp, right_p])
        cr = np.concatenate([left_r, sr])
        cs = np.concatenate([ss, ss])
        cb = _node_bounds(pb, cp, cr, cs)
        nodes += 2 * k
        open_p = np.concatenate([open_p[rest], cp])
        open_r = np.concatenate([open_r[rest], cr])
        open_s = np.concatenate([open_s[rest], cs])
        open_b = np.concatenate([open_b[rest], cb.upper])
        open_split = np.concatenate([open_split[rest], cb.split])
        open_c = np.concatenate([open_c[rest], cb.centre])
        open_clo = np.concatenate([open_clo[rest], cb.centre_lo])

    bb_upper = max(discarded, float(np.max(open_b)) if open_b.size else 0.0)
    if not np.isfinite(bb_upper):
        raise InvalidParameterError("sigma", sigma, "gave a non-finite bound (over/underflow)")
    # the relative error model of the sums does not cover underflow: an absolute 1e-300 does
    upper_bound = float(_up(np.array(bb_upper * c)) * (1.0 + 2 * _U)) + 1e-300
    x, y = _pair_of(pb, best_delta)
    t = _t_interval(x, y, g, s)
    low_val, _ = _form_bounds(t, prec, cov, fac)
    low_val = min(low_val, upper_bound)
    gap = upper_bound / low_val - 1.0 if low_val > 0 else math.inf
    return BoxSup(
        upper=upper_bound, lower=low_val, x=x, y=y, gap=gap,
        converged=bool(gap <= tol), nodes=int(nodes), matrix_margin=c - 1.0,
        seconds=time.process_time() - cpu0,
    )
