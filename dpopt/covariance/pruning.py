r"""Pruning a sensitivity set to the vectors that can attain its Mahalanobis sup.

A vector inside the convex hull of the others (up to sign) never attains
:math:`\sup_s s^\top\Sigma^{-1}s` for any :math:`\Sigma`, so it can be dropped before the
covariance program is solved: :func:`prune` keeps the extreme points of the symmetric hull
(a convex-hull pass in low dimension, a linear-programming test otherwise).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.problem import VectorSource
from certificates.validate import as_scalar
from dpopt.covariance.sensitivity import PrunedSet, as_vector_source
from dpopt.errors import (
    InvalidParameterError,
)

__all__ = [
    "prune",
]


def _span_coordinates(s: NDArray[np.float64]) -> NDArray[np.float64]:
    _, sv, vt = np.linalg.svd(s, full_matrices=False)
    if sv.size == 0 or sv[0] == 0:
        return np.zeros((s.shape[0], 0))
    rank = int(np.sum(sv > sv[0] * max(s.shape) * np.finfo(float).eps * 10))
    return np.asarray(s @ vt[:rank].T, dtype=np.float64)


def _hull_keep(y: NDArray[np.float64], tol: float) -> NDArray[np.bool_]:
    from scipy.spatial import ConvexHull

    n = y.shape[0]
    hull = ConvexHull(np.vstack([y, -y]))
    keep = np.zeros(n, dtype=bool)
    keep[hull.vertices % n] = True
    # conservative: also keep every point within tol of a facet (never drop a boundary point
    # because of rounding); interior points satisfy normal . p + offset <= -tol * scale.
    scale = float(np.max(np.linalg.norm(y, axis=1)))
    eq = hull.equations
    worst = np.max(y @ eq[:, :-1].T + eq[:, -1][None, :], axis=1)
    keep |= worst > -tol * scale
    return keep


def _lp_keep(y: NDArray[np.float64], tol: float, rng: np.random.Generator) -> NDArray[np.bool_]:
    from scipy.optimize import linprog

    n, r = y.shape
    keep = np.ones(n, dtype=bool)
    # vectors maximising |w . y| for some direction w are vertices: keep them without an LP
    dirs = np.vstack([np.eye(r), rng.standard_normal((8 * r, r))])
    known = np.zeros(n, dtype=bool)
    known[np.unique(np.argmax(np.abs(y @ dirs.T), axis=0))] = True
    scale = float(np.max(np.linalg.norm(y, axis=1)))
    order = np.argsort(np.linalg.norm(y, axis=1), kind="stable")
    for j in order:
        if known[j]:
            continue
        others = np.flatnonzero(keep)
        others = others[others != j]
        if others.size == 0:
            continue
        yo = y[others]
        a_eq = np.hstack([yo.T, -yo.T])
        res = linprog(
            np.ones(2 * others.size),
            A_eq=a_eq,
            b_eq=y[j],
            bounds=(0, None),
            method="highs",
        )
        if res.status != 0:
            continue  # not representable (or LP trouble): keep, which is always safe
        lam = np.asarray(res.x)
        if float(np.sum(lam)) > 1.0 - tol / 2:
            continue
        # polish: re-solve the equality on the LP's support to machine precision, then re-check
        supp = np.flatnonzero(lam > 1e-12 * max(float(lam.max()), 1e-300))
        a_s = a_eq[:, supp]
        coef, *_ = np.linalg.lstsq(a_s, y[j], rcond=None)
        resid = float(np.max(np.abs(y[j] - a_s @ coef)))
        if float(np.sum(np.abs(coef))) <= 1.0 - tol and resid <= 1e-12 * r * scale:
            keep[j] = False
    return keep


def prune(
    vectors: ArrayLike | VectorSource,
    *,
    method: str = "auto",
    tol: float = 1e-9,
    rng: np.random.Generator | int | None = 0,
) -> PrunedSet:
    r"""Drop vectors inside the symmetric convex hull of the others.

    For every :math:`P \succeq 0`, :math:`s \mapsto s^\top P s` is convex and even, so its sup over
    a set equals its sup over the extreme points of :math:`\operatorname{conv}(S \cup -S)`;
    removing a vector that is a combination :math:`s = \sum_j c_j s_j` with
    :math:`\sum_j |c_j| \le 1` of the remaining ones leaves that hull, hence
    :math:`\rho^*(\Sigma)` for every :math:`\Sigma`, unchanged.
    Removal is sequential (each test is against the currently kept set), so duplicates and
    antiparallel pairs keep one member.

    Steps: drop zero vectors and exact (anti)duplicates; project onto the span of the set; then

    - ``"hull"`` (span dimension <= 6): Qhull vertices of :math:`\{\pm s_j\}`, plus every point
      within ``tol`` (relative) of a facet — conservative, never drops a boundary point;
    - ``"lp"``: for each candidate the linear program
      :math:`\min \sum_j (c^+_j + c^-_j)` s.t. :math:`\sum_j (c^+_j - c^-_j) s_j = s`,
      :math:`c^\pm \ge 0` (scipy HiGHS); dropped only if the optimum is :math:`\le 1 - ` ``tol``.

    Parameters
    ----------
    vectors : array_like, shape (J, d), or VectorSource
        The set (a source is materialised; for large J prefer a structure-exploiting solver).
    method : {"auto", "hull", "lp"}
    tol : float
        Relative safety tolerance (> 0): only points clearly inside are dropped.
    rng : numpy Generator or seed
        For the random screening directions of the LP method (the result is a valid pruning for
        any seed).

    Returns
    -------
    PrunedSet
    """
    src = as_vector_source(vectors)
    s = np.concatenate([np.asarray(b, dtype=np.float64) for _, b in src.chunks()], axis=0)
    tol = as_scalar("tol", tol, low=0.0, high=0.1)
    if method not in ("auto", "hull", "lp"):
        raise InvalidParameterError("method", method, "must be 'auto', 'hull' or 'lp'")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = s.shape[0]
    nonzero = np.flatnonzero(np.any(s != 0, axis=1))
    if nonzero.size == 0:
        return PrunedSet(s[:1].copy(), np.array([0], dtype=np.intp), n, "trivial")
    # canonical sign (first nonzero coordinate positive) to merge exact antiparallel duplicates
    cand = s[nonzero]
    first = np.argmax(cand != 0, axis=1)
    sign = np.sign(cand[np.arange(cand.shape[0]), first])
    canon = cand * sign[:, None]
    _, uniq = np.unique(canon, axis=0, return_index=True)
    uniq = np.sort(uniq)
    idx = nonzero[uniq]
    y = _span_coordinates(s[idx])
    r = y.shape[1]
    used = method
    if r == 1:
        keep = np.zeros(idx.size, dtype=bool)
        keep[int(np.argmax(np.abs(y[:, 0])))] = True
        used = "hull"
    else:
        if method == "auto":
            used = "hull" if r <= 6 else "lp"
        keep = None
        if used == "hull":
            try:
                keep = _hull_keep(y, tol)
            except Exception:  # Qhull precision/degeneracy trouble: fall back to LPs
                used = "lp"
        if keep is None:
            keep = _lp_keep(y, tol, gen)
    kept = idx[keep]
    return PrunedSet(s[kept].copy(), kept.astype(np.intp), n, used)
