r"""The reductions the solvers share, each with its inverse: the span reduction and its lift,
the top-k reduction of a pass, and the column-generation loop over an inner model.

**Span reduction** (:class:`SpanReduction`). Vectors :math:`s_j` that span only a subspace
:math:`U = \operatorname{span}\{s_j\}` of dimension :math:`r < d`, without a noise floor
(:math:`\eta = 0`), give a program whose optimum is singular off :math:`U`. With an orthonormal
basis :math:`B` of :math:`U` and :math:`C` of its complement, :meth:`SpanReduction.apply`
maps the data to the span, :math:`s_j \mapsto B^\top s_j` and :math:`W \mapsto W_r = B^\top W B`;
the reduced program

.. math::

    \min_{\Sigma_r \succ 0} \operatorname{tr}(W_r\Sigma_r)
    \quad\text{s.t.}\quad (B^\top s_j)^\top\Sigma_r^{-1}(B^\top s_j) \le q

has the value of the original (any :math:`\Sigma` restricted to :math:`U` is feasible for it,
and :math:`B\Sigma_rB^\top + \tau CC^\top` is feasible for the original with cost
:math:`\operatorname{tr}(W_r\Sigma_r) + \tau\operatorname{tr}(C^\top WC)`). The inverse,
:meth:`SpanReduction.lift_covariance` and :meth:`SpanReduction.lift_dual`, maps a reduced
solution back: the covariance with a small ridge :math:`\tau CC^\top` on the complement (so it
is positive definite), and a reduced factored dual :math:`(\lambda_j, u^r_j)` with
:math:`\sum_j\lambda_ju^r_j{u^r_j}^\top = W_r` to one of the original program through the Schur
complement of :math:`W` in the basis :math:`[B, C]`:

.. math::

    u_j = (B + CK)\,u^r_j,\quad K = C^\top WB\,W_r^{-1},\qquad
    H = C\,(C^\top WC - C^\top WB\,W_r^{-1}B^\top WC)\,C^\top \succeq 0,

for which :math:`W - H - \sum_j\lambda_ju_ju_j^\top = (B + CK)(W_r - \sum_j\lambda_j
u^r_j{u^r_j}^\top)(B + CK)^\top`: the lift keeps the reduced residual, so a reduced certificate
stays a certificate (:func:`certificates.covariance.check` re-verifies the lifted one).

**Top-k reduction** (:func:`top_k`, :class:`TopK`). A pass prices every vector, :math:`q_j =
|B^\top s_j|^2`, and keeps the maximum with its index and the ``keep`` largest scores above a
threshold. The order is strict: by score, ties by the smaller index, so the reduction of a
pass does not depend on how the vectors were chunked or on which worker priced them (the merge
of chunk reductions equals the reduction of the whole array). A NaN or infinite score is
refused (:class:`~certificates.errors.SolverError`): a maximum over numbers that are not all
finite is not a bound.

**Column generation** (:func:`column_generation`). The loop of the structured solver over an
:class:`InnerModel` -- a restricted problem on a working set (solved inexactly while the
certified gap is large), a pricing step (a full pass that certifies, or a cheaper round over a
candidate pool that does not) and a growth step -- until a certified gap is at most ``0.9 tol``.
The inner models are the restricted reduced dual (:mod:`solvers.restricted`), its in-memory
variant and the :math:`W = I` floor elimination (:mod:`solvers.floored`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

from certificates.errors import InvalidParameterError, SolverError

__all__ = [
    "SPAN_RTOL",
    "InnerModel",
    "SpanReduction",
    "TopK",
    "column_generation",
    "psd_factor",
    "top_k",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

#: Singular values below ``SPAN_RTOL * sigma_max`` count as zero when finding the span of the s_j.
SPAN_RTOL = 1e-10


def _sym(mat: FloatArray) -> FloatArray:
    return 0.5 * mat + 0.5 * mat.T


def psd_factor(mat: FloatArray, rtol: float) -> FloatArray:
    r"""A factor :math:`G` with :math:`GG^\top = (M)_+`, the PSD part of the symmetrised ``mat``.

    Eigen-decomposition; eigenvalues at most ``rtol`` times the largest absolute eigenvalue are
    dropped (``rtol = 0``: only the nonpositive ones), so :math:`GG^\top \succeq 0` by
    construction whatever the rounding of ``mat``.
    """
    ev, vec = sla.eigh(_sym(np.asarray(mat, dtype=np.float64)))
    top = float(np.max(np.abs(ev))) if ev.size else 0.0
    keep = ev > rtol * top if top > 0 else np.zeros(ev.shape, dtype=bool)
    return np.asarray(vec[:, keep] * np.sqrt(ev[keep]), dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# the span reduction and its lift
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpanReduction:
    r"""Orthonormal bases of the span of the vectors (``basis``, d x r) and of its complement
    (``complement``, d x (d - r)), with the reduction to the span and its lift.

    Build it with :meth:`of_vectors` (SVD of the vectors) or :meth:`of_gram` (eigenvalues of
    their Gram matrix :math:`\sum_j s_js_j^\top`, for vectors seen only through passes).
    """

    basis: FloatArray
    complement: FloatArray

    @classmethod
    def of_vectors(cls, vectors: FloatArray, rtol: float = SPAN_RTOL) -> SpanReduction:
        """The span of the rows of ``vectors``: singular values above ``rtol`` times the
        largest."""
        vecs = np.asarray(vectors, dtype=np.float64)
        d = vecs.shape[1]
        _, sv, vt = np.linalg.svd(vecs, full_matrices=True)
        top = float(sv[0]) if sv.size else 0.0
        rank = int(np.sum(sv > rtol * top)) if top > 0 else 0
        return cls(basis=vt[:rank].T.copy(), complement=vt[rank:d].T.copy())

    @classmethod
    def of_gram(cls, gram: FloatArray, rtol: float) -> SpanReduction:
        """The span of vectors with Gram matrix ``gram``: eigenvalues above ``rtol`` times the
        largest. Full rank gives the identity basis (not a rotation of it), so coordinates that
        are exact stay exact."""
        gw, gv = np.linalg.eigh(np.asarray(gram, dtype=np.float64))
        d = gw.size
        top = float(gw[-1]) if d else 0.0
        in_span = gw > rtol * top if top > 0 else np.zeros(d, dtype=bool)
        if np.all(in_span):
            return cls(basis=np.eye(d), complement=np.zeros((d, 0)))
        return cls(basis=gv[:, in_span], complement=gv[:, ~in_span])

    @property
    def dim(self) -> int:
        """The dimension d of the original space."""
        return int(self.basis.shape[0])

    @property
    def rank(self) -> int:
        """The dimension r of the span."""
        return int(self.basis.shape[1])

    @property
    def deficient(self) -> bool:
        """Whether the vectors miss some direction (r < d)."""
        return self.complement.shape[1] > 0

    def apply(self, vectors: FloatArray, weight: FloatArray) -> tuple[FloatArray, FloatArray]:
        r"""The reduced data: :math:`(S B,\ W_r = B^\top W B)` (``W_r`` symmetrised)."""
        b = self.basis
        return np.asarray(vectors, dtype=np.float64) @ b, _sym(b.T @ weight @ b)

    def ridge(self, weight: FloatArray, cost: float, relative: float) -> float:
        r"""The ridge :math:`\tau` whose complement term :math:`\tau\operatorname{tr}(C^\top WC)`
        costs ``relative * cost`` (0 without a complement or when ``cost <= 0``)."""
        c = self.complement
        denom = float(np.trace(c.T @ weight @ c)) if c.shape[1] else 0.0
        return relative * max(float(cost), 0.0) / denom if denom > 0 else 0.0

    def ridged(self, sigma: FloatArray, tau: float) -> FloatArray:
        r""":math:`\Sigma + \tau CC^\top` (symmetrised), ``sigma`` in the original coordinates."""
        c = self.complement
        return _sym(sigma + tau * (c @ c.T)) if c.shape[1] else _sym(sigma)

    def lift_covariance(self, sigma_r: FloatArray, tau: float) -> FloatArray:
        r"""The lift :math:`B\Sigma_rB^\top + \tau CC^\top` of a reduced covariance."""
        b = self.basis
        return self.ridged(b @ sigma_r @ b.T, tau)

    def lift_dual(
        self, weight: FloatArray, directions_r: FloatArray, rtol: float = 0.0
    ) -> tuple[FloatArray, FloatArray]:
        r"""The lift of reduced dual directions: ``(u, G)`` with :math:`u_j = (B + CK)u^r_j`
        (rows of ``directions_r``, span coordinates) and :math:`GG^\top = H`, the factored
        Schur complement of :math:`W` on the complement (:func:`psd_factor` with ``rtol``)."""
        b, c = self.basis, self.complement
        u_r = np.asarray(directions_r, dtype=np.float64)
        if not c.shape[1]:
            return u_r @ b.T, np.zeros((self.dim, 0))
        w_r = _sym(b.T @ weight @ b)
        wcb = c.T @ weight @ b  # C^T W B
        k = sla.solve(w_r, wcb.T, assume_a="pos").T  # C^T W B W_r^{-1}
        u = u_r @ (b + c @ k).T
        schur = c.T @ weight @ c - k @ wcb.T
        return np.asarray(u, dtype=np.float64), c @ psd_factor(schur, rtol)


# ------------------------------------------------------------------------------------------------
# the top-k reduction of a pass
# ------------------------------------------------------------------------------------------------
def _refuse_non_finite(scores: FloatArray, index: IntArray | None) -> None:
    bad = np.flatnonzero(~np.isfinite(scores))
    at = int(bad[0]) if index is None else int(index[bad[0]])
    raise SolverError(
        f"non-finite constraint value {float(scores[bad[0]])!r} in a pass (entry {at}); the "
        "data or the working covariance is degenerate (remedy: check the vectors for NaN/inf "
        "or huge ranges)"
    )


def top_k(
    scores: FloatArray, keep: int, threshold: float = -np.inf, index: IntArray | None = None
) -> IntArray:
    """Positions of the ``keep`` largest ``scores`` above ``threshold``, best first.

    The order is strict: larger score first, equal scores by the smaller ``index`` (default: the
    position), so a selection merged from parts equals the selection of the whole. Scores must
    be finite (NaN or inf: :class:`~certificates.errors.SolverError`).

    Parameters
    ----------
    scores : ndarray, shape (n,)
    keep : int
        At most this many positions (0: none).
    threshold : float, default -inf
        Only scores strictly above it qualify.
    index : ndarray of int, shape (n,), optional
        The tie-breaking key (global vector indices), all distinct.
    """
    if keep < 0:
        raise InvalidParameterError("keep", keep, "must be a nonnegative integer")
    q = np.asarray(scores, dtype=np.float64)
    if q.size and not (np.isfinite(np.max(q)) and np.isfinite(np.min(q))):  # NaN propagates
        _refuse_non_finite(q, index)
    if keep == 0:
        return np.zeros(0, dtype=np.intp)
    pos = np.flatnonzero(q > threshold) if threshold > -np.inf else np.arange(q.size)
    if pos.size > keep:
        vals = q[pos]
        cut = float(np.partition(vals, vals.size - keep)[vals.size - keep])  # keep-th largest
        strict = pos[vals > cut]
        tied = pos[vals == cut]
        if index is not None:
            tied = tied[np.argsort(index[tied], kind="stable")]
        pos = np.concatenate([strict, tied[: keep - strict.size]])
    key = pos if index is None else index[pos]
    return np.asarray(pos[np.lexsort((key, -q[pos]))], dtype=np.intp)


class TopK:
    r"""The running top-k reduction of a pass: the maximum score, its index, and the ``keep``
    largest scores above ``threshold`` with their indices and vectors.

    Feed it whole chunks (:meth:`add`) or chunk reductions made elsewhere (:meth:`merge`, e.g.
    by a worker with :func:`top_k`); in any order and any chunking, :meth:`result` is the
    reduction of all the scores at once (the maximum's index is the smallest among equal
    maxima).
    """

    def __init__(self, keep: int, dim: int, threshold: float = -np.inf) -> None:
        self.keep = int(keep)
        self.threshold = float(threshold)
        self.qmax = -np.inf
        self.argmax = -1
        self.idx = np.zeros(0, dtype=np.intp)
        self.q = np.zeros(0)
        self.vecs = np.zeros((0, dim))

    def add(self, start: int, scores: FloatArray, vectors: FloatArray) -> None:
        """A chunk: ``scores`` of the vectors ``start, start + 1, ...`` (rows of ``vectors``)."""
        if not scores.size:
            return
        sel = top_k(scores, self.keep, self.threshold)  # refuses NaN / inf scores
        i = int(np.argmax(scores))
        self.merge(float(scores[i]), start + i, start + sel, scores[sel], vectors[sel])

    def merge(self, qmax: float, argmax: int, idx: IntArray, q: FloatArray,
              vecs: FloatArray) -> None:
        """A chunk's reduction: its maximum and index, and its selected indices, scores and
        vectors (at most ``keep`` of them, all above ``threshold``)."""
        if not np.isfinite(qmax):
            raise SolverError(
                f"non-finite constraint value {qmax!r} in a pass (vector {argmax}); the data or "
                "the working covariance is degenerate (remedy: check the vectors for NaN/inf "
                "or huge ranges)"
            )
        if qmax > self.qmax or (qmax == self.qmax and argmax < self.argmax):
            self.qmax, self.argmax = float(qmax), int(argmax)
        if self.keep <= 0 or not idx.size:
            return
        self.idx = np.concatenate([self.idx, idx])
        self.q = np.concatenate([self.q, q])
        self.vecs = np.concatenate([self.vecs, vecs])
        if self.idx.size > self.keep:
            self._reselect()

    def _reselect(self) -> None:
        best = top_k(self.q, self.keep, -np.inf, self.idx)
        self.idx, self.q, self.vecs = self.idx[best], self.q[best], self.vecs[best]

    def result(self) -> tuple[float, int, IntArray, FloatArray, FloatArray]:
        """``(qmax, argmax, indices, scores, vectors)``, the selection best first; refuses an
        empty pass."""
        if self.argmax < 0:
            raise SolverError(
                "non-finite constraint values in a pass (no score was finite); the data or the "
                "working covariance is degenerate (remedy: check the vectors for NaN/inf or "
                "huge ranges)"
            )
        self._reselect()
        return self.qmax, self.argmax, self.idx, self.q, self.vecs


# ------------------------------------------------------------------------------------------------
# the column-generation loop
# ------------------------------------------------------------------------------------------------
Point = TypeVar("Point")


class InnerModel(Protocol[Point]):
    """What :func:`column_generation` drives: a restricted problem on a working set, its pricing
    and its growth. Implementations keep their own state (working set, best candidate)."""

    def passes_left(self) -> bool:
        """Whether another round may run (the pass budget keeps one pass for the finish)."""
        ...

    def solve(self, inner_tol: float) -> Point | None:
        """The restricted problem solved to relative accuracy ``inner_tol``; ``None`` stops the
        loop (the model has recorded why)."""
        ...

    def price(self, point: Point, inner_tol: float, certified: bool) -> float:
        """Price every vector (``certified``: a full pass, whose gap certifies) or only the
        candidate pool; return the relative gap at ``point``."""
        ...

    def switch(self, point: Point) -> bool:
        """Whether the model changed itself after pricing (e.g. a noise floor that binds
        brings in the floor block); the loop then solves again."""
        ...

    def grow(self, point: Point, inner_tol: float, gap: float) -> bool:
        """Add the priced violated vectors (and drop clearly inactive ones); whether the
        working set changed."""
        ...


def column_generation(model: InnerModel[Point], tol: float, *, warm: bool, pooled: bool) -> str:
    r"""Column generation over ``model`` until a certified gap of at most ``0.9 tol``.

    Restricted solves are inexact while the gap is large (inner tolerance 1 % of the last gap,
    at most 1e-3, at least ``max(tol/10, 1e-13)``) and tight when a loose solve added nothing.
    With a candidate pool (``pooled``), uncertified rounds over the pool alternate with full
    passes: a full pass runs once the pool's gap is below ``tol/2`` or the pool has nothing
    left to add. A warm start (``warm``) solves its first working set tightly.

    Returns
    -------
    str
        ``"optimal"`` (certified gap reached), ``"stalled"`` (a tight certified round found no
        violated vector to add), ``"stopped"`` (the model's solve returned ``None``) or
        ``"limit"`` (no passes left).
    """
    tight = max(0.1 * tol, 1e-13)
    gap = 0.0 if warm else np.inf
    tighten = False
    full_next = not pooled
    while model.passes_left():
        inner_tol = max(tight, min(1e-3, 0.01 * gap if not tighten else 0.0))
        point = model.solve(inner_tol)
        if point is None:
            return "stopped"
        certified = full_next
        gap = model.price(point, inner_tol, certified)
        if model.switch(point):
            continue
        if certified and gap <= 0.9 * tol:  # room for the final ridge / safety margin
            return "optimal"
        if pooled:
            full_next = not certified and gap <= 0.5 * tol
            if full_next:
                continue
        grew = model.grow(point, inner_tol, gap)
        if not grew and inner_tol > tight:
            tighten = True  # the restricted problem was solved loosely: solve it tightly
            continue
        tighten = False
        if not grew and not certified:
            full_next = True  # the pool is exhausted: a full pass prices every vector
            continue
        if not grew:
            return "stalled"
    return "limit"
