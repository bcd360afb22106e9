r"""Structure-exploiting solver for the optimal-covariance program.

The program (the covariance program, derived on the theory page) is

.. math::

    v_\eta(q) = \min_{\Sigma \succeq \eta I} \operatorname{tr}(W\Sigma)
    \quad\text{s.t.}\quad s_j^\top \Sigma^{-1} s_j \le q,\quad j = 1..J .

**Reduced dual.** For weights :math:`\mu` on the probability simplex let
:math:`M(\mu) = \sum_j \mu_j s_j s_j^\top` and, with any factor :math:`W = LL^\top`,
:math:`A(\mu) = L^\top M(\mu) L`, :math:`T(\mu) = \operatorname{tr} A(\mu)^{1/2}` and
:math:`\Sigma_\mu = L^{-\top} A(\mu)^{1/2} L^{-1}`. Then :math:`T` is concave,
:math:`\partial T/\partial\mu_j = q_j/2` with :math:`q_j = s_j^\top\Sigma_\mu^{-1}s_j`,
:math:`\sum_j \mu_j q_j = T`, and for *every* :math:`\mu`, with :math:`r = \max_j q_j`,

.. math::

    T(\mu)^2/q \;\le\; v_0(q) \;\le\; \operatorname{tr}\!\big(W\,(r/q)\Sigma_\mu\big) = rT/q ,

so every iterate carries the certified relative gap :math:`r/T - 1` (the analogue of the
Kiefer–Wolfowitz equivalence theorem of optimal design).

**Noise floor.** :math:`\Sigma \succeq \eta I` is the constraint :math:`x^\top\Sigma^{-1}x \le q`
for every :math:`|x|^2 = q\eta`; the dual gains a PSD block,
:math:`M = \sum_j \mu_j s_j s_j^\top + q\eta P`, :math:`\sum_j\mu_j + \operatorname{tr}P = 1`,
and the certificate uses :math:`r = \max(\max_j q_j,\; q\eta/\lambda_{\min}(\Sigma_\mu))`. The block
is kept as :math:`P = E\Pi E^\top` on an explicit orthonormal basis :math:`E` of the clamped
eigenspace (Newton on the entries of :math:`\Pi`; directions whose weight vanishes are
eliminated).

**Rank-deficient sets.** With :math:`\eta = 0` the problem is solved in the span :math:`U` of the
vectors (weight :math:`U^\top W U`); the optimal :math:`\Sigma` is singular on the complement and
the dual carries a Schur-complement block. With :math:`\eta > 0` the complement is a clamped floor
direction from the start.

**Algorithm** (:func:`_solve`, in phases). *Setup*: one Gram pass gives the span and the scale
the data are normalised by (vectors to unit RMS norm, :math:`q \to 1`, :math:`W` to unit largest
eigenvalue; the result is scaled back, so the solver behaves identically from 1e-100 to 1e100).
*Trivial cases* are detected and answered exactly: :math:`\eta I` is optimal when
:math:`\eta q \ge \max_j|s_j|^2`; a single direction :math:`v` that is an eigenvector of
:math:`W` has the closed form :math:`\Sigma = \eta I + (a^2/q - \eta)_+ vv^\top`.
*Seeding*: a working set of the vectors with the largest scores under the uniform-weight
covariance, completed until it spans. *Column generation*: on the working set a damped
active-set Newton method maximises :math:`T` (:mod:`solvers.restricted`); one full pass computes
every :math:`q_j`, the certified gap and the most violated vectors, which join the working set;
when the floor binds the solver switches to the floor block. *Finish*: of the candidates a
pass certified, the covariance of least cost and the dual of the largest :math:`T` are kept
(column generation does not improve monotonically, :func:`_keep`); the returned matrix is
re-verified by its own pass (a factor :math:`B` of :math:`\Sigma^{-1}` checked by its residual
:math:`\|B^\top\Sigma B - I\|`) and scaled to feasibility; with a floor, a candidate below it in
some eigendirections only is lifted there (:func:`solvers.floor_block.lift_to_floor`) rather
than scaled as a whole.

Every full pass goes through a :class:`~solvers.passes.PassExecutor`.

*Small in-memory programs* (an array with :math:`Jd \le 2^{18}`, :math:`\eta = 0`) skip the
pass machinery: the vectors are normalised and whitened once and every pricing is one product
with :math:`A^{-1/4}` (:func:`_small`; the general path takes over for rank-deficient data).
*Warm starts* (:class:`WarmStart`: a neighbouring problem's support and weights) seed the first
working set; a vector parallel to a working-set atom and longer replaces it.

**Dual certificate**: :math:`\lambda_j = (T/q)^2\mu_j`, :math:`u_j = S^{-1}s_j` with
:math:`S = (T/q)\Sigma_\mu`, floor factor :math:`G = \sqrt{q\eta}\,\Sigma_\mu^{-1}E\Pi^{1/2}` (so
:math:`H = GG^\top` and :math:`W - H - \sum_j\lambda_j u_ju_j^\top = 0` exactly); rank-deficient
:math:`\eta = 0`: corrected :math:`u_j` and the Schur-complement :math:`H`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy
from numpy.typing import NDArray
from scipy import linalg
from scipy.linalg import lapack

from certificates.errors import InvalidTypeError, SolverError
from certificates.problem import (
    ArrayVectors,
    CovarianceProgram,
    FactoredDual,
    VectorSource,
    check_norm_range,
)
from certificates.validate import as_int, as_scalar
from solvers._types import Solution, SolverStats
from solvers.floor_block import FloorBlock, floor_block_solve, lift_to_floor
from solvers.floored import FlooredPoint, floored_solve
from solvers.passes import IN_PROCESS, PassExecutor, PassResult
from solvers.reductions import SpanReduction, column_generation, psd_factor, top_k
from solvers.restricted import (
    SOLVER_NAME,
    Restricted,
    RestrictedPoint,
    evaluate,
    inner_solve,
    priced_newton,
)
from solvers.scaling import Normalisation
from solvers.threads import blas_limits

__all__ = ["WarmStart", "blas_limits", "solve_structured"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

#: Relative eigenvalue threshold (of the Gram matrix) below which a direction is outside the span.
_SPAN_RTOL = 1e-13
#: Components of the vectors off the Gram span above this (relative to their RMS norm) join the
#: span; smaller ones are covered by the ridge.
_OUT_OF_SPAN = 1e-9
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
#: The floor block spans every direction when d <= _FLOOR_FULL_SMALL, or d <= _FLOOR_FULL_MAX
#: and the data are rank-deficient: d(d+1)/2 floor weights, but no column generation over floor
#: directions (which costs a restricted solve per round); unclamped directions start at
#: _FLOOR_FULL_ENTRY of a clamped one's weight. (At d = 20 with few clamped directions the
#: growing block is faster; the clamped count at the switch, an early candidate's, does not
#: tell the two apart.)
_FLOOR_FULL_MAX = 30
_FLOOR_FULL_SMALL = 10
_FLOOR_FULL_ENTRY = 1e-3
#: Binding floors with W != I are solved by projected Newton on the floor block
#: (solvers.floor_block) when lambda_min(W) / lambda_max(W) is at least this; below it the
#: whitened block A is too ill-conditioned (cond(A) ~ cond(W)^2) for its eigen-decomposition to
#: drive Newton steps, and the log-det barrier path (the floor block grown by column generation
#: or spanning every direction) takes over.
_FLOOR_NEWTON_MIN_RCOND = 1e-8
#: Up to this dimension a floor-block restricted solve that stalls continues by the log-det
#: barrier on a floor block spanning every direction (d(d+1)/2 floor weights).
_FLOOR_BARRIER_MAX = 30
#: Relative tolerance of the parallel/antiparallel test of new working-set atoms.
_PARALLEL_RTOL = 1e-12
#: The candidate pool: every full pass keeps its ``pool`` highest-scoring vectors in memory, and
#: the working set grows from the pool (no pass) until the pool holds no violated vector. Size:
#: at least _POOL_MIN, at least twice the largest possible support p(p+1)/2 of a basic optimum,
#: at most _POOL_BYTES of vectors.
_POOL_MIN = 4096
#: W = I floors from this level (normalised units: vectors of unit RMS norm, q = 1) are
#: eliminated in closed form (solvers.floored); below it eta^2 drowns in the rounding of the
#: eigenvalues of M, and the floor block path handles the floor.
_FLOORED_MIN = 1e-5
_POOL_BYTES = 64 * 2**20
#: Machine epsilon of float64.
_EPS = float(np.finfo(np.float64).eps)
#: The in-memory path (:func:`_small`) serves array inputs with J d at most this and no noise
#: floor: every pricing is one GEMM on the whitened array, with no executor, pool or chunks.
_SMALL_MAX = 2**18
#: ... and, in dimension 3 to _PRICED_NEWTON_DIM, up to this many vectors by projected Newton
#: over all of them, priced at every step (:func:`solvers.restricted.priced_newton`): one
#: J x p product per step is cheaper than the restricted solves and pricing rounds of column
#: generation (in the plane the restricted solves are closed forms, one step each).
_PRICED_NEWTON_MAX = 4096
#: Newton steps of that path at most (measured: 7-14 on J ~ 10^3, d = 3..20).
_PRICED_NEWTON_STEPS = 60
#: ... up to this dimension: each step prices every vector (J d^2 flops), which column generation
#: does once per restricted solve; at J = 4,005 the priced route took x0.50 column generation's
#: CPU time at d = 10, x0.77 at d = 20, x0.99 at d = 30 (and x1.07 at d = 50, J = 1,770).
_PRICED_NEWTON_DIM = 25


# ------------------------------------------------------------------------------------------------
# warm start
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WarmStart:
    r"""A starting point for the reduced dual: vector indices and their weights :math:`\mu`.

    Typically the support of a neighbouring problem's solution (:meth:`from_solution`): a
    trajectory of close queries keeps most of its active constraints. The warm start only
    chooses where column generation begins (the first working set and the covariance of the
    first pricing pass); every answer is priced and verified over all vectors as without it,
    so a poor warm start costs time, never accuracy.

    Attributes
    ----------
    indices : ndarray of int, shape (k,)
        Rows of the next problem's vectors (must index ``0 .. J - 1``; others are ignored).
    weights : ndarray, shape (k,)
        Positive weights (any scale: they are renormalised).
    """

    indices: IntArray
    weights: FloatArray

    @classmethod
    def from_solution(cls, solution: Solution) -> WarmStart | None:
        """The support and dual multipliers of a structured solution (``None`` without a
        vector support, e.g. a closed form ``eta I``)."""
        dual = solution.dual
        if dual is None or not dual.support.size:
            return None
        return cls(np.asarray(dual.support, dtype=np.intp),
                   np.asarray(dual.multipliers, dtype=np.float64))

    def usable(self, count: int) -> tuple[IntArray, FloatArray]:
        """The entries that index ``count`` vectors with a positive finite weight, normalised
        to sum 1 (empty when none do)."""
        idx = np.asarray(self.indices, dtype=np.intp).ravel()
        w = np.asarray(self.weights, dtype=np.float64).ravel()
        if idx.shape != w.shape:
            return np.zeros(0, dtype=np.intp), np.zeros(0)
        ok = (idx >= 0) & (idx < count) & np.isfinite(w) & (w > 0)
        idx, w = idx[ok], w[ok]
        idx, first = np.unique(idx, return_index=True)
        w = w[first]
        total = float(w.sum())
        if not idx.size or not total > 0:
            return np.zeros(0, dtype=np.intp), np.zeros(0)
        return idx, w / total


# ------------------------------------------------------------------------------------------------
# typed state of one solve
# ------------------------------------------------------------------------------------------------
class _Dual(NamedTuple):
    """The parts of the factored dual of the normalised program (a
    :class:`~certificates.problem.FactoredDual` is made once, in the caller's units, by
    :func:`_scaled_dual`)."""

    support: IntArray
    multipliers: FloatArray
    directions: FloatArray
    floor_factor: FloatArray


@dataclass(frozen=True)
class _Geometry:
    """Whitened coordinates of one phase: ``y = whiten^T s``; ``Sigma = unwhiten Sigma_w
    unwhiten^T`` (``whiten = basis L``, ``unwhiten = basis L^{-T}`` for ``basis^T W basis = LL^T``).
    """

    whiten: FloatArray  # (d, p)
    unwhiten: FloatArray  # (d, p)

    @property
    def dim(self) -> int:
        return int(self.whiten.shape[1])

    @classmethod
    def of(cls, weight: FloatArray, basis: FloatArray) -> _Geometry:
        wr = basis.T @ weight @ basis
        lr = np.asarray(np.linalg.cholesky(0.5 * (wr + wr.T)), dtype=np.float64)
        unwhiten = basis @ _lower_inverse(lr).T  # basis @ L^{-T}
        return cls(whiten=basis @ lr, unwhiten=unwhiten)


@dataclass
class _Candidate:
    """An evaluated reduced-dual point and its bound ``r`` (certified when a pricing pass over
    every vector gave it), with the value ``upper`` of the covariance it stands for."""

    point: RestrictedPoint
    max_score: float  # r = max(max_j q_j, q eta / lambda_min(Sigma_mu)), or the lifted r
    upper: float  # tr(W Sigma) of the covariance _finish would return from it (normalised)
    sigma_mu: FloatArray  # Sigma_mu in the original coordinates
    mu: FloatArray
    indices: IntArray
    vectors: FloatArray
    floor_weights: FloatArray
    floor_basis: FloatArray  # (d, kE) E of the floor block
    floor_mode: bool
    geometry: _Geometry
    sigma_eig: tuple[FloatArray, FloatArray]  # eigen-decomposition of sigma_mu
    floor_score: float  # q eta / lambda_min(Sigma_mu) in floor mode, else 0
    lifted: FloatArray | None = None  # floor mode: the feasible candidate (lift_to_floor)


@dataclass
class _Run:
    """Everything one structured solve carries between its phases."""

    # fixed data (normalised: see _setup)
    source: VectorSource
    executor: PassExecutor
    chunk: int
    weight: FloatArray  # normalised W (largest eigenvalue 1)
    bound: float  # the caller's q
    eta: float  # noise floor in normalised units (bound q = 1)
    tol: float
    max_passes: int
    atoms_per_pass: int | None  # user's working_set option
    verbose: bool
    warm_idx: IntArray  # warm-start indices (empty: cold start)
    warm_mu: FloatArray  # their weights, summing to 1
    data_scale: float  # normalised vectors = original vectors / data_scale
    value_scale: float  # original Sigma = value_scale * normalised Sigma
    weight_scale: float  # normalised W = W / weight_scale
    # cost accounting
    started: float
    passes: int = 0
    pass_seconds: list[float] = field(default_factory=list)
    newton_iterations: int = 0
    newton_seconds: float = 0.0
    # geometry of the data
    span: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    complement: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    geometry: _Geometry | None = None
    floor_mode: bool = False
    atoms_added: int = 16
    # candidate pool: the top-scoring vectors of the last full pass (normalised)
    pool_keep: int = 0
    pool_idx: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    pool_vecs: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    out_of_span: float = 0.0  # largest squared component of a vector off the span (normalised)
    # working set
    indices: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    vectors: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    restricted: Restricted | None = None
    floor_basis: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    floor_full: bool = False  # the floor block spans every direction (see _enter_floor_mode)
    floor_newton: bool = False  # projected Newton on the floor block (see _enter_floor_block)
    floor_barrier: int = 0  # floor-block restricted solves finished by the barrier
    # outcome: of the certified candidates, the one whose covariance costs least (returned) and
    # the one with the largest lower bound T^2 (its dual is returned); see _keep
    best: _Candidate | None = None
    strongest: _Candidate | None = None
    top_trace: float = 0.0  # the largest T of a certified candidate
    status: str = "iteration_limit"
    message: str = ""
    log: list[str] = field(default_factory=list)

    def say(self, msg: str) -> None:
        self.log.append(msg)
        if self.verbose:
            print(msg)

    @property
    def dim(self) -> int:
        return self.source.dim

    @property
    def rank(self) -> int:
        return int(self.span.shape[1])

    def whitening(self) -> _Geometry:
        if self.geometry is None:  # pragma: no cover - set by the span phase
            raise SolverError(f"{SOLVER_NAME}: internal error (geometry used before the span pass)")
        return self.geometry

    def state(self) -> Restricted:
        if self.restricted is None:  # pragma: no cover - set by the seeding phase
            raise SolverError(f"{SOLVER_NAME}: internal error (no working set)")
        return self.restricted

    def gram(self) -> FloatArray:
        """One pass: Gram matrix of the normalised vectors."""
        t0 = time.perf_counter()
        gram, _ = self.executor.gram(self.source, self.chunk)
        self.passes += 1
        self.pass_seconds.append(time.perf_counter() - t0)
        return np.asarray(gram, dtype=np.float64) / self.data_scale**2

    def score(self, bmat: FloatArray, keep: int, threshold: float) -> PassResult:
        """One pass: ``q_j = |B^T s_j|^2`` of the normalised vectors (returned normalised)."""
        res = self.executor.score(self.source, bmat / self.data_scale, self.chunk, keep, threshold)
        self.passes += 1
        self.pass_seconds.append(res.seconds)
        res.top_vecs = res.top_vecs / self.data_scale
        return res


# ------------------------------------------------------------------------------------------------
# small helpers
# ------------------------------------------------------------------------------------------------
def _dedupe(new: FloatArray, old: FloatArray) -> NDArray[np.bool_]:
    """Mask of rows of ``new`` not parallel/antiparallel to a row of ``old`` or an earlier row."""
    n_old = old.shape[0]
    rows = np.concatenate([old, new]) if n_old else new
    unit = rows / np.maximum(np.sqrt(np.einsum("ij,ij->i", rows, rows)), 1e-300)[:, None]
    # a row parallel to ANY earlier row goes (one Gram matrix of old and new rows; comparing
    # with the kept rows only would keep a row whose parallel predecessor was itself dropped,
    # but such a row is within twice the tolerance angle, about 3e-6 rad, of a kept one: the
    # same direction)
    cos = np.tril(np.abs(unit[n_old:] @ unit.T), n_old - 1)
    return np.asarray(~np.any(cos >= 1.0 - _PARALLEL_RTOL, axis=1))


def _not_in(values: IntArray, pool: IntArray) -> NDArray[np.bool_]:
    """``~np.isin(values, pool)`` for the short index arrays of the working set (a set lookup
    costs less than isin's sorting at these sizes)."""
    if values.size * pool.size > 1 << 16:
        return ~np.isin(values, pool)
    members = set(pool.tolist())
    return np.fromiter((v not in members for v in values.tolist()), dtype=bool,
                       count=values.size)


def _sym(mat: FloatArray) -> FloatArray:
    return 0.5 * mat + 0.5 * mat.T


def _lower_inverse(chol: FloatArray) -> FloatArray:
    """The inverse of a lower-triangular factor (LAPACK trtri: the small matrices of the solver
    pay scipy's per-call overhead of ``solve_triangular`` many times over)."""
    inv, info = lapack.dtrtri(chol, lower=1)
    if info != 0:
        raise linalg.LinAlgError(f"singular triangular factor (trtri info {info})")
    return np.asarray(inv, dtype=np.float64)




# ------------------------------------------------------------------------------------------------
# public entry point
# ------------------------------------------------------------------------------------------------
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
    warm_start: WarmStart | None = None,
) -> Solution:
    r"""Solve :math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s_j^\top\Sigma^{-1}s_j\le q`,
    :math:`\Sigma\succeq\eta I` by column generation on the reduced dual.

    Parameters
    ----------
    problem : CovarianceProgram
        Vectors (array or chunked :class:`~certificates.problem.VectorSource`), weight
        :math:`W \succ 0`, bound :math:`q`, noise floor :math:`\eta`.
    tol : float, default 1e-8
        Target certified relative gap ``upper / lower - 1``; in [1e-11, 1).
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
        default. A small in-memory array without a noise floor (``J d`` at most ``2**18``) is
        solved in memory whatever the executor (it has no passes worth distributing), so the
        answer is the in-process one to the last digit.
    warm_start : WarmStart, optional
        Start column generation from these vectors and weights (e.g.
        ``WarmStart.from_solution`` of a neighbouring problem): the first working set holds
        them with their weights (and, unless they span by themselves, the vectors scoring
        highest at their covariance), and the first restricted solve is tight. The answer is
        certified the same way (every vector priced and verified), so it equals the
        cold-started one to ``tol``.

    Returns
    -------
    Solution
        ``covariance`` feasible as returned (scaled by the verification pass), ``value`` =
        tr(W Sigma), ``dual`` the factored certificate, ``status`` (``"optimal"`` when the
        certified gap is at most ``tol``) with a ``message``, and ``stats.extra`` with ``lower``,
        ``upper``, ``gap`` (certified relative gap in float64), ``support`` and timings. The
        solver never warns: the caller decides (``dpopt.design_covariance`` does).

    Examples
    --------
    >>> import numpy as np
    >>> from certificates.problem import CovarianceProgram
    >>> s = np.array([[1., 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
    >>> w = np.array([[2, .5, 0], [.5, 1, .2], [0, .2, .5]])
    >>> sol = solve_structured(CovarianceProgram(s, weight=w, bound=1.0))
    >>> round(sol.value, 8)  # (sqrt 2 + 1 + sqrt .5)^2
    9.74264069
    """
    if warm_start is not None and not isinstance(warm_start, WarmStart):
        raise InvalidTypeError("warm_start", warm_start, "a solvers.structured.WarmStart")
    options = (tol, max_passes, chunk_size, memory_budget_bytes, working_set, verbose,
               executor or IN_PROCESS, warm_start)
    if blas_threads is None:
        return _solve(problem, *options)
    threads = as_int("blas_threads", blas_threads, low=1)
    with blas_limits(threads):
        return _solve(problem, *options)


def _solve(
    problem: CovarianceProgram,
    tol: float,
    max_passes: int,
    chunk_size: int | None,
    memory_budget_bytes: int,
    working_set: int | None,
    verbose: bool,
    executor: PassExecutor,
    warm_start: WarmStart | None = None,
) -> Solution:
    """The phases of one solve: setup, span, seeding, column generation, finish."""
    run = _setup(problem, tol, max_passes, chunk_size, memory_budget_bytes, working_set, verbose,
                 executor, warm_start)
    earlier: _Run | None = None  # an in-memory run that stopped short (its candidates count)
    # whatever the executor: a small in-memory array has nothing worth distributing, and one path
    # for it keeps a distributed solve bit-for-bit the in-process one
    if (run.eta == 0 and run.dim > 1
            and isinstance(run.source, ArrayVectors) and run.source.count * run.dim <= _SMALL_MAX):
        small = _small(run, problem)
        if small is not None:
            return small
        earlier = run
        run = _setup(problem, tol, max_passes, chunk_size, memory_budget_bytes, working_set,
                     verbose, executor, warm_start)
    gram = _span_pass(run)
    exact = _trivial_solution(run)
    if exact is not None:
        return exact
    if run.eta >= _FLOORED_MIN and np.array_equal(run.weight, np.eye(run.dim)):
        return _floored(run, gram)
    _seed_working_set(run, gram)
    _column_generation(run)
    if earlier is not None and run.status != "optimal" and _better_run(earlier, run):
        # the general path ended short of the in-memory run's best certified candidate
        earlier.status, earlier.message = run.status, run.message
        earlier.passes += run.passes
        earlier.log.extend(run.log)
        return _finish(earlier)
    return _finish(run)


def _better_run(earlier: _Run, run: _Run) -> bool:
    """Does ``earlier`` hold a certified candidate cheaper than ``run``'s best (compared in the
    caller's units: the two runs normalise the same data by separately computed scales)?"""
    if earlier.best is None:
        return False
    if run.best is None:
        return True
    return bool(earlier.best.upper * earlier.value_scale * earlier.weight_scale
                < run.best.upper * run.value_scale * run.weight_scale)


# ------------------------------------------------------------------------------------------------
# small in-memory programs: the same column generation without the pass machinery
# ------------------------------------------------------------------------------------------------
def _small(run: _Run, problem: CovarianceProgram) -> Solution | None:
    r"""Column generation for a small in-memory program with :math:`\eta = 0` (the regime of
    single small designs and of batches): the vectors are normalised and whitened once, and
    every pricing is one product of the whitened array with :math:`A^{-1/4}` -- the same
    restricted Newton solves, candidates, working-set growth and verified finish as the general
    path, without its per-pass bookkeeping (Gram eigen-decomposition, span analysis, executor
    calls, candidate pool). Returns ``None`` when the data need the general path (rank-deficient
    or degenerate working sets, a stalled growth), which then solves from scratch."""
    raw = run.source.array  # type: ignore[attr-defined]
    count, d = raw.shape
    started = time.perf_counter()
    mean_sq = float(np.einsum("ij,ij->", raw, raw)) / count
    if not mean_sq > 0.0:
        check_norm_range(0.0)  # raises: all vectors are zero, no noise is needed
    norm = Normalisation.of(mean_sq, run.bound, run.weight, run.eta)
    run.data_scale, run.value_scale, run.weight_scale = (norm.data, norm.covariance_scale,
                                                         norm.weight)
    run.weight = _sym(run.weight / norm.weight)
    run.span, run.complement = np.eye(d), np.zeros((d, 0))
    try:
        run.geometry = geo = _Geometry.of(run.weight, run.span)
    except linalg.LinAlgError:
        return None
    whitened = raw @ (geo.whiten / norm.data)  # the normalised vectors, whitened
    run.passes += 1
    run.pass_seconds.append(time.perf_counter() - started)

    def priced(q: FloatArray, keep: int, threshold: float) -> PassResult:
        """The maximum of q and the keep largest entries above threshold, with their
        normalised vectors (only the selected rows are scaled)."""
        sel = top_k(q, keep, threshold)
        arg = int(np.argmax(q))
        return PassResult(float(q[arg]), arg, sel, q[sel], raw[sel] / norm.data, 0.0)

    run.atoms_added = run.atoms_per_pass if run.atoms_per_pass is not None else max(2 * d, 16)
    # first working set: the top scores at the warm start's dual point (or at uniform weights)
    a0 = whitened.T @ whitened / count
    a0w, a0v = np.linalg.eigh(_sym(a0))
    if not a0w[0] > 1e-12 * a0w[-1]:
        return None  # (nearly) rank-deficient data: the general path finds the span
    warm_vecs = _warm_vectors(run)
    yw = warm_vecs @ geo.whiten
    sw = np.linalg.svd(yw, compute_uv=False) if yw.shape[0] >= d else np.zeros(1)
    if sw.size >= d and sw[d - 1] > 1e-6 * sw[0]:
        # the neighbour's support spans: it is the first working set, and the first pricing
        # (after a restricted solve from its weights) brings whatever the new program adds
        run.indices, run.vectors = run.warm_idx.copy(), warm_vecs
    else:
        if warm_vecs.shape[0]:
            aw = (yw.T * run.warm_mu) @ yw
            a0w, a0v = np.linalg.eigh(_sym(0.9 * aw / max(float(np.trace(aw)), 1e-300)
                                           + 0.1 * a0 / float(np.trace(a0))))
            a0w = np.maximum(a0w, 1e-15 * a0w[-1])
        zs = whitened @ (a0v * a0w**-0.25)
        q0 = np.einsum("ij,ij->i", zs, zs)
        # twice the vectors a pass adds: one restricted solve fewer on small cold starts
        # (measured over d = 3..20, J ~ 10^3: 19-28 % less CPU than one pass's worth)
        first = min(count, max(2 * run.atoms_added, d))
        top = priced(q0, first, -np.inf)
        fresh = _not_in(top.top_idx, run.warm_idx)
        new = _dedupe(top.top_vecs[fresh], warm_vecs)
        run.indices = np.concatenate([run.warm_idx, top.top_idx[fresh][new]])
        run.vectors = np.concatenate([warm_vecs, top.top_vecs[fresh][new]])
    run.floor_basis = np.zeros((d, 0))
    if count <= _PRICED_NEWTON_MAX and 2 < d <= _PRICED_NEWTON_DIM and run.indices.size >= d:
        # (priced_newton stops on a first working set that does not span)
        fused = _priced_small(run, raw, norm.data, whitened, _initial_weights(run))
        if fused is not None:
            return fused
    atoms = run.vectors @ geo.whiten
    sv = np.linalg.svd(atoms, compute_uv=False)
    if atoms.shape[0] < d or not sv[d - 1] > 1e-10 * sv[0]:
        return None
    run.restricted = Restricted(atoms=atoms, mu=_initial_weights(run),
                                floor_atoms=np.zeros((d, 0)), floor_weights=np.zeros((0, 0)),
                                floor_rotation=np.zeros((0, 0)))
    outcome = column_generation(_InMemory(run, whitened, priced), run.tol,
                                warm=bool(run.warm_idx.size), pooled=False)
    if outcome != "optimal":
        return None  # a stalled growth or a failed restricted solve: the general path decides
    run.status = "optimal"
    return _finish(run)


def _priced_small(run: _Run, raw: FloatArray, data_scale: float, whitened: FloatArray,
                  weights: FloatArray) -> Solution | None:
    """:func:`_small` by projected Newton over all vectors priced at every step
    (:func:`solvers.restricted.priced_newton`) from the first working set and its weights;
    ``None`` when that stops short (the column generation of :func:`_small` then solves)."""
    started = time.perf_counter()
    mu = np.zeros(whitened.shape[0])
    mu[run.indices] = weights
    # every step prices every vector: a pass each, one kept for the verification
    steps = min(_PRICED_NEWTON_STEPS, run.max_passes - run.passes - 2)
    out = (priced_newton(whitened, mu, max(0.1 * run.tol, 1e-13), run.atoms_added, steps)
           if steps > 0 else None)
    run.newton_seconds += time.perf_counter() - started
    if out is None:
        return None
    mu, point, qmax, iterations = out
    run.newton_iterations += iterations
    run.passes += iterations + 1  # every step priced every vector
    sup = np.flatnonzero(mu > 0)
    run.indices, run.vectors = sup, raw[sup] / data_scale
    run.restricted = Restricted(atoms=whitened[sup], mu=mu[sup], floor_atoms=np.zeros((run.dim, 0)),
                                floor_weights=np.zeros((0, 0)), floor_rotation=np.zeros((0, 0)))
    _keep(run, _candidate(run, point, qmax))
    run.say(f"priced Newton: {iterations} steps, T={point.root_trace:.12g} r={qmax:.12g} "
            f"gap={qmax / point.root_trace - 1.0:.3e} support={sup.size} (in memory)")
    run.status = "optimal"
    return _finish(run)


# ------------------------------------------------------------------------------------------------
# phase 1: setup and the span pass
# ------------------------------------------------------------------------------------------------
def _setup(
    problem: CovarianceProgram,
    tol: float,
    max_passes: int,
    chunk_size: int | None,
    memory_budget_bytes: int,
    working_set: int | None,
    verbose: bool,
    executor: PassExecutor,
    warm_start: WarmStart | None = None,
) -> _Run:
    started = time.perf_counter()
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    tol = as_scalar("tol", tol, low=1e-11, high=1.0, low_open=False)
    max_passes = as_int("max_passes", max_passes, low=3)
    memory_budget_bytes = as_int("memory_budget_bytes", memory_budget_bytes, low=2**16)
    d = problem.dim
    if chunk_size is None:
        chunk = int(max(256, min(262144, memory_budget_bytes // (8 * 3 * (2 * d + 1)))))
    else:
        chunk = as_int("chunk_size", chunk_size, low=1)
    if working_set is not None:
        as_int("working_set", working_set, low=1)
    warm_idx, warm_mu = (warm_start.usable(problem.count) if warm_start is not None
                         else (np.zeros(0, dtype=np.intp), np.zeros(0)))
    run = _Run(
        source=problem.source, executor=executor, chunk=chunk,
        weight=np.asarray(problem.weight, dtype=np.float64), bound=float(problem.bound),
        eta=float(problem.noise_floor),
        tol=tol, max_passes=max_passes, atoms_per_pass=working_set, verbose=verbose,
        warm_idx=warm_idx, warm_mu=warm_mu, data_scale=1.0,
        value_scale=1.0, weight_scale=1.0, started=started,
    )
    return run


def _span_pass(run: _Run) -> FloatArray:
    """Pass 1 (Gram): normalise the data, find the span of the vectors and its whitening."""
    gram_raw = run.gram()
    count = run.source.count
    mean_sq = float(np.trace(gram_raw)) / count
    if not mean_sq > 0.0:
        check_norm_range(0.0)  # raises: all vectors are zero, no noise is needed
    norm = Normalisation.of(mean_sq, run.bound, run.weight, run.eta)
    run.data_scale = norm.data
    run.value_scale = norm.covariance_scale
    run.weight_scale = norm.weight
    run.weight = _sym(run.weight / norm.weight)
    run.eta = run.eta / norm.covariance_scale
    gram = _sym(gram_raw / mean_sq)
    # full rank: the identity basis, so the whitening is by the Cholesky factor of W itself, not
    # of a rotated copy (a diagonal W keeps an exact diagonal factor, so its tiny entries keep
    # their relative accuracy)
    span = SpanReduction.of_gram(gram, _SPAN_RTOL)
    run.span, run.complement = span.basis, span.complement
    if run.complement.shape[1] and run.eta == 0:
        _confirm_span(run)
    run.geometry = _Geometry.of(run.weight, run.span)
    p = run.geometry.dim
    run.atoms_added = run.atoms_per_pass if run.atoms_per_pass is not None else max(2 * p, 16)
    pool = max(_POOL_MIN, p * (p + 1), 2 * run.atoms_added)
    pool = min(pool, _POOL_BYTES // (8 * run.dim))
    # the pool only pays when it is much smaller than the data
    run.pool_keep = pool if 2 * pool <= count else 0
    return gram


def _confirm_span(run: _Run) -> None:
    """Passes over the complement of the Gram span (rank-deficient data, eta = 0 only).

    The Gram matrix sums over all J vectors, so a direction carried by a few vectors can fall
    below its eigenvalue threshold. One pass measures every vector's component off the span;
    components above ``_OUT_OF_SPAN`` (relative to the RMS norm) join the span, smaller ones
    stay off it and are covered by the ridge, which is sized to keep their scores below tol/20.
    """
    for _ in range(run.dim):
        comp = run.complement
        res = run.score(comp, 4 * comp.shape[1], _OUT_OF_SPAN**2)
        run.out_of_span = float(res.qmax)
        if res.qmax <= _OUT_OF_SPAN**2 or res.top_vecs.shape[0] == 0:
            return
        off = (res.top_vecs @ comp).T  # components off the span, in complement coordinates
        qmat, rmat = linalg.qr(off, mode="economic")
        grown = np.abs(np.diag(rmat)) > _OUT_OF_SPAN * float(np.max(np.abs(np.diag(rmat))))
        if not np.any(grown):  # pragma: no cover - qmax > threshold implies a nonzero column
            return
        added = comp @ qmat[:, grown]
        run.span = np.concatenate([run.span, added], axis=1)
        basis, _ = linalg.qr(run.span, mode="full")
        run.span, run.complement = basis[:, : run.span.shape[1]], basis[:, run.span.shape[1]:]
        run.say(f"span grown by {added.shape[1]} direction(s) carried by few vectors")
        if not run.complement.shape[1]:
            run.out_of_span = 0.0
            return


# ------------------------------------------------------------------------------------------------
# phase 2: seeding the working set
# ------------------------------------------------------------------------------------------------
def _seed_pass(run: _Run, gram: FloatArray, low: float) -> None:
    """One pass: the working set starts from the vectors with the largest scores under the
    uniform-weight covariance (whitened eigenvalues kept above ``low``); with a pool, the pass
    also fills the pool."""
    geo = run.whitening()
    a0 = _sym(geo.whiten.T @ gram @ geo.whiten / run.source.count)
    warm_vecs = _warm_vectors(run)
    if warm_vecs.shape[0]:
        # warm start: price at (mostly) the neighbouring problem's dual point, mixed with the
        # uniform weights so that A stays positive definite on the span
        yw = warm_vecs @ geo.whiten
        aw = (yw.T * run.warm_mu) @ yw
        a0 = _sym(0.9 * aw / max(float(np.trace(aw)), 1e-300)
                  + 0.1 * a0 / max(float(np.trace(a0)), 1e-300))
    a0w, a0v = np.linalg.eigh(a0)
    a0w = np.maximum(a0w, max(low, 1e-300 + 1e-15 * float(a0w[-1])))
    first = max(run.atoms_added, geo.dim)
    res = run.score(geo.whiten @ (a0v * a0w**-0.25), max(first, run.pool_keep), -np.inf)
    if run.pool_keep:
        run.pool_idx, run.pool_vecs = res.top_idx, res.top_vecs
    top_idx, top_vecs = res.top_idx[:first], res.top_vecs[:first]
    if warm_vecs.shape[0]:
        fresh = ~np.isin(top_idx, run.warm_idx)
        top_idx, top_vecs = top_idx[fresh], top_vecs[fresh]
        new = _dedupe(top_vecs, warm_vecs) if top_idx.size else np.zeros(0, dtype=bool)
        run.indices = np.concatenate([run.warm_idx, top_idx[new]])
        run.vectors = np.concatenate([warm_vecs, top_vecs[new]])
        return
    keep = _dedupe(top_vecs, np.empty((0, run.dim)))
    run.indices, run.vectors = top_idx[keep], top_vecs[keep]


def _warm_vectors(run: _Run) -> FloatArray:
    """The warm-start vectors (normalised), pairwise non-parallel; ``run.warm_idx`` and
    ``run.warm_mu`` are reduced to them (empty on a cold start)."""
    if not run.warm_idx.size:
        return np.zeros((0, run.dim))
    vecs = np.asarray(run.source.take(run.warm_idx), dtype=np.float64) / run.data_scale
    keep = _dedupe(vecs, np.empty((0, run.dim)))
    keep &= np.einsum("ij,ij->i", vecs, vecs) > 0
    run.warm_idx, vecs = run.warm_idx[keep], vecs[keep]
    mu = run.warm_mu[keep]
    run.warm_mu = mu / float(mu.sum()) if mu.size else mu
    return vecs


def _initial_weights(run: _Run) -> FloatArray:
    """Weights of the first working set on the simplex: uniform on a cold start; 0.9 on the
    warm-start vectors (their own proportions) and 0.1 spread over the others on a warm one."""
    k = run.indices.size
    n_warm = run.warm_idx.size
    if not n_warm or n_warm > k or not np.array_equal(run.indices[:n_warm], run.warm_idx):
        return np.full(k, 1.0 / k)
    if n_warm == k:
        return run.warm_mu.copy()
    # when the warm vectors span by themselves, the others start at zero weight (the projected
    # Newton step frees those whose score exceeds T): with at most p(p+1)/2 free weights its
    # Hessian is nonsingular and it converges quadratically from the neighbour's optimum
    whitened = run.vectors[:n_warm] @ run.whitening().whiten
    sv = np.linalg.svd(whitened, compute_uv=False)
    if sv.size >= whitened.shape[1] and sv[-1] > 1e-6 * sv[0]:
        return np.concatenate([run.warm_mu, np.zeros(k - n_warm)])
    return np.concatenate([0.9 * run.warm_mu, np.full(k - n_warm, 0.1 / (k - n_warm))])


def _seed_working_set(run: _Run, gram: FloatArray) -> None:
    """Pass 2: the vectors with the largest scores under the uniform-weight covariance, then
    residual passes until the working set spans the data."""
    geo = run.whitening()
    p = geo.dim
    _seed_pass(run, gram, 0.0)
    while True:
        whitened = run.vectors @ geo.whiten
        sv = np.linalg.svd(whitened, compute_uv=False) if whitened.shape[0] else np.zeros(1)
        if whitened.shape[0] >= p and sv[min(p, sv.size) - 1] > 1e-10 * sv[0]:
            break
        if run.passes >= run.max_passes:
            raise SolverError(
                f"{SOLVER_NAME}: could not build a spanning working set within max_passes; "
                "remedy: raise max_passes"
            )
        _, _, vt = linalg.svd(whitened, full_matrices=True)
        spanned = int(np.sum(sv > 1e-10 * sv[0]))
        missing = vt[spanned:].T  # complement of the working set, in whitened span coordinates
        pooled = _pool_scores(run, geo.whiten @ missing, max(run.atoms_added, p), 0.0)
        if pooled is None or not np.any(~np.isin(pooled.top_idx, run.indices)):
            res = run.score(geo.whiten @ missing, max(run.atoms_added, p), 0.0)
        else:
            res = pooled
        fresh = ~np.isin(res.top_idx, run.indices)
        new = _dedupe(res.top_vecs[fresh], run.vectors)
        if not np.any(new):
            raise SolverError(f"{SOLVER_NAME}: failed to span the vectors (degenerate data)")
        run.indices = np.concatenate([run.indices, res.top_idx[fresh][new]])
        run.vectors = np.concatenate([run.vectors, res.top_vecs[fresh][new]])
    run.restricted = Restricted(
        atoms=run.vectors @ geo.whiten,
        mu=_initial_weights(run),
        floor_atoms=np.zeros((p, 0)),
        floor_weights=np.zeros((0, 0)),
        floor_rotation=np.zeros((0, 0)),
    )
    run.floor_basis = np.zeros((run.dim, 0))


# ------------------------------------------------------------------------------------------------
# phase 3: column generation
# ------------------------------------------------------------------------------------------------
def _column_generation(run: _Run) -> None:
    """Restricted Newton solve, pricing pass, working-set growth, until the gap closes
    (:func:`solvers.reductions.column_generation` over :class:`_WorkingSet`). With a noise floor
    and W conditioned for it, every restricted solve carries the floor block from the start
    (:func:`_enter_floor_block`)."""
    if run.eta > 0 and _floor_newton_applies(run):
        _enter_floor_block(run)
    outcome = column_generation(_WorkingSet(run), run.tol, warm=bool(run.warm_idx.size),
                                pooled=bool(run.pool_keep))
    _conclude(run, outcome)


def _conclude(run: _Run, outcome: str) -> None:
    """Status and message of a column-generation outcome (a stopped loop has set its own)."""
    if outcome == "optimal":
        run.status = "optimal"
    elif outcome == "stalled":
        run.say("no new violated atoms; stopping")
        run.status = "optimal_inaccurate"
        run.message = "no violated vector left to add before the gap closed"
    elif outcome == "limit":
        run.message = f"max_passes = {run.max_passes} reached"


class _WorkingSet:
    """The inner model of the general path: the restricted reduced dual on the working set
    (:mod:`solvers.restricted`, with the floor block once the floor binds), priced by full
    passes and rounds over the candidate pool."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.last_point: RestrictedPoint | None = None
        self.iterations = 0
        self.cand: _Candidate | None = None
        self.pricing: PassResult | None = None

    def passes_left(self) -> bool:
        return self.run.passes < self.run.max_passes - 1

    def solve(self, inner_tol: float) -> RestrictedPoint | None:
        run = self.run
        started = time.perf_counter()
        try:
            if run.floor_newton:
                # floor-block iterations cost more: while the gap is large the solve stops at
                # 10 % of it (at most 1e-2) instead of the loop's 1 % (at most 1e-3)
                tight = inner_tol <= max(0.1 * run.tol, 1e-13)
                loose = inner_tol if tight else min(1e-2, 10.0 * inner_tol)
                point, self.iterations = _floor_inner(run, loose)
            else:
                point, self.iterations = inner_solve(run.state(), inner_tol, 200)
        except SolverError as exc:
            if run.best is None and self.last_point is not None:
                _price(run, self.last_point, inner_tol)  # certify the last pool-round point
            if run.best is None:
                raise
            run.status, run.message = "optimal_inaccurate", f"restricted solve stopped: {exc}"
            return None
        self.last_point = point
        run.newton_seconds += time.perf_counter() - started
        run.newton_iterations += self.iterations
        return point

    def price(self, point: RestrictedPoint, inner_tol: float, certified: bool) -> float:
        run = self.run
        pricer = _price if certified else _price_pool
        cand, self.pricing = pricer(run, point, inner_tol)
        self.cand = cand
        t = point.root_trace
        gap = cand.max_score / t - 1.0
        state = run.state()
        run.say(
            f"{'pass' if certified else 'pool'} {run.passes:3d}: T={t:.12g} "
            f"r={cand.max_score:.12g} gap={gap:.3e} "
            f"ws={state.mu.size} support={int(np.sum(state.mu > 0))} "
            f"floor={state.floor_weights.shape[0]} newton={self.iterations}"
        )
        return gap

    def _priced(self) -> tuple[_Candidate, PassResult]:
        if self.cand is None or self.pricing is None:  # pragma: no cover - price comes first
            raise SolverError(f"{SOLVER_NAME}: internal error (growth before pricing)")
        return self.cand, self.pricing

    def switch(self, point: RestrictedPoint) -> bool:
        run = self.run
        cand, _ = self._priced()
        if run.eta > 0 and not run.floor_mode and _floor_binds(run, cand):
            _enter_floor_mode(run, cand)
            return True
        return False

    def grow(self, point: RestrictedPoint, inner_tol: float, gap: float) -> bool:
        run = self.run
        cand, pricing = self._priced()
        state = run.state()
        grew = _add_violated_atoms(run, point, pricing)
        # (projected Newton on the floor block prices the whole floor in every restricted solve)
        barrier = run.floor_mode and not run.floor_newton
        if barrier and state.floor_weights.shape[0] and not run.floor_full:
            grew |= _drop_slack_floor_directions(run, point)
        if barrier and cand.floor_score > point.root_trace * (1.0 + 0.5 * inner_tol):
            grew |= _add_floor_directions(run, cand, gap, inner_tol)
        return grew


class _InMemory(_WorkingSet):
    """The inner model of :func:`_small`: the same restricted solves and growth, priced by one
    product of the whitened array (no pool, no floor); a failed restricted solve stops the
    loop (the general path then solves from scratch)."""

    def __init__(self, run: _Run, whitened: FloatArray,
                 priced: Callable[[FloatArray, int, float], PassResult]) -> None:
        super().__init__(run)
        self.whitened = whitened
        self.priced = priced

    def solve(self, inner_tol: float) -> RestrictedPoint | None:
        run = self.run
        t0 = time.perf_counter()
        try:
            point, self.iterations = inner_solve(run.state(), inner_tol, 200)
        except SolverError:
            return None
        run.newton_seconds += time.perf_counter() - t0
        run.newton_iterations += self.iterations
        return point

    def price(self, point: RestrictedPoint, inner_tol: float, certified: bool) -> float:
        run = self.run
        t0 = time.perf_counter()
        zs = self.whitened @ (point.eigvecs * point.eigvals**-0.25)
        q = np.einsum("ij,ij->i", zs, zs)
        t = point.root_trace
        self.pricing = self.priced(q, run.atoms_added, t * (1.0 + 0.5 * inner_tol))
        run.passes += 1
        run.pass_seconds.append(time.perf_counter() - t0)
        self.cand = cand = _candidate(run, point, self.pricing.qmax)
        _keep(run, cand)  # every vector priced: certified
        gap = cand.max_score / t - 1.0
        run.say(f"pass {run.passes:3d}: T={t:.12g} r={cand.max_score:.12g} gap={gap:.3e} "
                f"ws={point.scores.size} newton={self.iterations} (in memory)")
        return gap

    def switch(self, point: RestrictedPoint) -> bool:
        return False

    def grow(self, point: RestrictedPoint, inner_tol: float, gap: float) -> bool:
        return _add_violated_atoms(self.run, point, self._priced()[1])


def _pool_scores(run: _Run, bmat: FloatArray, keep: int, threshold: float) -> PassResult | None:
    """``q = |B^T s|^2`` over the candidate pool (no pass), reduced like a pass: the maximum and
    the ``keep`` largest scores above ``threshold`` (``None`` without a pool)."""
    if not run.pool_keep or not run.pool_idx.size:
        return None
    z = run.pool_vecs @ bmat
    q = np.einsum("ij,ij->i", z, z)
    return _select(run.pool_idx, q, run.pool_vecs, keep, threshold)


def _select(idx: IntArray, q: FloatArray, vecs: FloatArray, keep: int,
            threshold: float) -> PassResult:
    """The maximum of ``q`` and the ``keep`` largest entries above ``threshold``, sorted (the
    top-k reduction of a pass, :func:`solvers.reductions.top_k`, ties by index)."""
    sel = top_k(q, keep, threshold, idx)
    arg = int(np.argmax(q))
    return PassResult(float(q[arg]), int(idx[arg]), idx[sel], q[sel], vecs[sel], 0.0)


def _pricing(run: _Run, bmat: FloatArray, threshold: float, certified: bool) -> PassResult:
    """``q_j = |B^T s_j|^2``: over every vector by a full pass (``certified``; with a pool the
    pass also refreshes the pool with its highest-scoring vectors), else over the pool only
    (its largest q_j is then a lower estimate of r, not a certificate). Returns the maximum
    and the most violated vectors (scores above ``threshold``)."""
    if not certified:
        res = _pool_scores(run, bmat, run.atoms_added, threshold)
        if res is None:  # pragma: no cover - pool rounds only run with a pool
            raise SolverError(f"{SOLVER_NAME}: internal error (pool pricing without a pool)")
        return res
    if not run.pool_keep:
        return run.score(bmat, run.atoms_added, threshold)
    full = run.score(bmat, run.pool_keep, -np.inf)
    run.pool_idx, run.pool_vecs = full.top_idx, full.top_vecs
    res = _select(full.top_idx, full.top_q, full.top_vecs, run.atoms_added, threshold)
    res.qmax, res.argmax, res.seconds = full.qmax, full.argmax, full.seconds
    return res


def _price_pool(run: _Run, point: RestrictedPoint,
                inner_tol: float) -> tuple[_Candidate, PassResult]:
    """Pricing on the candidate pool only (no pass, no certificate)."""
    inverse_factor = run.whitening().whiten @ (point.eigvecs * point.eigvals**-0.25)
    res = _pricing(run, inverse_factor, point.root_trace * (1.0 + 0.5 * inner_tol), False)
    return _candidate(run, point, res.qmax), res


def _price(run: _Run, point: RestrictedPoint, inner_tol: float) -> tuple[_Candidate, PassResult]:
    """Pricing pass: every q_j at Sigma_mu, the certified bound r, the most violated vectors."""
    inverse_factor = run.whitening().whiten @ (point.eigvecs * point.eigvals**-0.25)
    res = _pricing(run, inverse_factor, point.root_trace * (1.0 + 0.5 * inner_tol), True)
    cand = _candidate(run, point, res.qmax)
    _keep(run, cand)
    return cand, res


def _keep(run: _Run, cand: _Candidate) -> None:
    r"""Record a certified candidate (its ``r`` from a pricing of every vector).

    Column generation does not improve monotonically: an inexact restricted solve, a working
    set that dropped atoms, or a stopped or stalled loop can leave the latest candidate worse
    than an earlier one. Both halves of the answer are kept at their best over the certified
    candidates: the covariance of least cost ``upper`` (:math:`\operatorname{tr}(W\Sigma)` of
    the matrix :func:`_finish` verifies and returns) and, since every reduced-dual point bounds
    the optimum from below (:math:`T(\mu)^2/q \le v_0(q) \le v_\eta(q)`), the dual of the
    largest :math:`T` -- up to the requested accuracy: a later candidate whose :math:`T` is
    within a relative ``tol`` of the largest seen replaces the kept dual (the later point is
    the more refined one, and with an ill-conditioned W the check's bound depends on the
    dual's accuracy more than on a difference of :math:`T` that small). A pool round's
    candidate (priced over the pool only) never comes here."""
    if run.best is None or cand.upper < run.best.upper:
        run.best = cand
    t = cand.point.root_trace
    run.top_trace = max(run.top_trace, t)
    if run.strongest is None or t >= run.top_trace * (1.0 - run.tol):
        run.strongest = cand


def _candidate(run: _Run, point: RestrictedPoint, qmax: float) -> _Candidate:
    """The candidate at ``point`` with the bound ``r = max(qmax, floor score)``."""
    geo = run.whitening()
    root = (point.eigvecs * np.sqrt(point.eigvals)) @ point.eigvecs.T
    sigma_mu = _sym(geo.unwhiten @ root @ geo.unwhiten.T)
    sig_w, sig_v = np.linalg.eigh(sigma_mu)
    floor_score = run.eta / sig_w[0] if run.floor_mode else 0.0
    max_score, lifted = max(qmax, floor_score), None
    cost = float(np.einsum("ij,ji->", run.weight, sigma_mu))  # tr(W Sigma_mu)
    # the value of the covariance _finish returns: r Sigma_mu, which the verification raises to
    # the floor when a candidate outside floor mode is below it (eta > 0): scaled as a whole,
    # or, singular on a direction, plus eta I (_verified_solution)
    upper = cost * max_score
    if run.eta > 0 and not run.floor_mode:
        low = max_score * float(sig_w[0])
        upper = (upper * max(1.0, run.eta / low) if low > 0
                 else upper + run.eta * float(np.trace(run.weight)))
    if run.floor_mode and qmax < floor_score:
        # the floor violated along some eigenvectors only: lift those (r = cost / tr W Sigma_mu)
        lift, cost, extra = lift_to_floor(sig_w, sig_v, run.weight, run.eta, qmax)
        if qmax + extra / cost < max_score:
            max_score = qmax + extra / cost
            lifted = _sym(qmax * sigma_mu + (sig_v * lift) @ sig_v.T)
            upper = qmax * cost + extra
    state = run.state()
    floor_basis = (run.floor_basis @ state.floor_rotation if run.floor_basis.shape[1]
                   else run.floor_basis)
    return _Candidate(
        point=point, max_score=max_score, upper=upper, sigma_mu=sigma_mu, lifted=lifted,
        mu=state.mu.copy(), indices=run.indices.copy(), vectors=run.vectors.copy(),
        floor_weights=state.floor_weights.copy(), floor_basis=floor_basis,
        floor_mode=run.floor_mode, geometry=geo, sigma_eig=(sig_w, sig_v),
        floor_score=floor_score,
    )


def _floor_binds(run: _Run, cand: _Candidate) -> bool:
    """Is the eta = 0 style candidate, scaled to feasibility, below the floor?"""
    lam_min = cand.max_score * cand.sigma_eig[0][0] if run.rank == run.dim else 0.0
    return bool(lam_min < run.eta)


def _enter_floor_mode(run: _Run, cand: _Candidate) -> None:
    """Switch to the floor block in full coordinates. The floor basis E is either every
    eigendirection of the candidate (``_Run.floor_full``: d <= _FLOOR_FULL_SMALL, or
    rank-deficient data up to _FLOOR_FULL_MAX; the block then never changes and only its
    weights Pi move, no direction enters or leaves), or the complement of the span and the
    violated eigendirections (directions enter and leave by column generation)."""
    run.floor_mode = True
    d = run.dim
    run.geometry = geo = _Geometry.of(run.weight, np.eye(d))
    if run.atoms_per_pass is None:
        run.atoms_added = max(2 * d, 16)
    t = cand.point.root_trace
    sig_w, sig_v = cand.sigma_eig
    clamped = run.eta / np.maximum(sig_w, 1e-300) > t
    n_clamped = int(np.sum(clamped)) + (d - run.rank)
    run.floor_full = d <= _FLOOR_FULL_SMALL or (d <= _FLOOR_FULL_MAX and run.rank < d)
    entry = np.ones(0)
    if run.floor_full:
        run.floor_basis = sig_v
        entry = np.where(clamped, 1.0, _FLOOR_FULL_ENTRY)
    else:
        violated = sig_v[:, clamped]
        if run.rank < d:
            violated = violated - run.complement @ (run.complement.T @ violated)
            violated = violated[:, np.linalg.norm(violated, axis=0) > 1e-6]
        candidates = np.concatenate([run.complement if run.rank < d else np.zeros((d, 0)),
                                     violated], axis=1)
        if candidates.shape[1]:
            qmat, rmat = linalg.qr(candidates, mode="economic")
            run.floor_basis = qmat[:, np.abs(np.diag(rmat)) > 1e-8]
        entry = np.ones(run.floor_basis.shape[1])
    n_floor = run.floor_basis.shape[1]
    state = run.state()
    share = max(n_clamped, 1) / (max(n_clamped, 1) + max(int(np.sum(state.mu > 0)), 1))
    run.restricted = Restricted(
        atoms=run.vectors @ geo.whiten,
        mu=state.mu * (1.0 - share),
        floor_atoms=np.sqrt(run.eta) * (geo.whiten.T @ run.floor_basis),
        floor_weights=np.diag(entry * (share / max(float(entry.sum()), 1e-300))),
        floor_rotation=np.eye(n_floor),
    )
    run.say(f"floor binds: switching to the floor block with {n_floor} directions"
            f"{' (all)' if run.floor_full else ''}")


def _floor_newton_applies(run: _Run) -> bool:
    """Projected Newton on the floor block (:mod:`solvers.floor_block`) unless W is too
    ill-conditioned for it (``_FLOOR_NEWTON_MIN_RCOND``)."""
    ev = np.linalg.eigvalsh(run.weight)
    return bool(ev[0] >= _FLOOR_NEWTON_MIN_RCOND * ev[-1])


def _enter_floor_block(run: _Run) -> None:
    """With a noise floor (W not the identity, lambda_min(W) >= _FLOOR_NEWTON_MIN_RCOND
    lambda_max(W)) every restricted solve carries the floor block in full coordinates
    (:mod:`solvers.floor_block`): the block spans every direction (E = I), so the floor is
    priced inside each restricted solve and no floor direction enters by column generation.
    It starts empty when the vectors span (the projected Newton step frees the clamped
    directions, whose floor gradient is positive: without a binding floor the solve is the
    eta = 0 one), and on the complement of the span otherwise."""
    run.floor_mode = True
    run.floor_newton = True
    d = run.dim
    run.geometry = geo = _Geometry.of(run.weight, np.eye(d))
    if run.atoms_per_pass is None:
        run.atoms_added = max(2 * d, 16)
    state = run.state()
    comp = run.complement if run.rank < d else np.zeros((d, 0))
    share = comp.shape[1] / d
    run.floor_basis = np.eye(d)
    run.restricted = Restricted(
        atoms=run.vectors @ geo.whiten,
        mu=state.mu * (1.0 - share),
        floor_atoms=np.sqrt(run.eta) * (geo.whiten.T @ comp),
        floor_weights=np.eye(comp.shape[1]) / d,
        floor_rotation=comp.copy(),
    )
    run.say("noise floor: restricted solves carry the floor block")


def _floor_inner(run: _Run, tol: float) -> tuple[RestrictedPoint, int]:
    """The restricted solve in floor mode (:func:`solvers.floor_block.floor_block_solve`) on the
    working set; the state is written back normalised (sum of the weights 1) for the pricing
    and the dual of the column-generation loop. Should the projected Newton method stall short
    of ``tol`` (seen with ill-conditioned W and the floor over most directions), the
    log-det barrier on a floor block spanning every direction (:func:`solvers.restricted.
    inner_solve`) continues from its point, for d <= _FLOOR_BARRIER_MAX."""
    state = run.state()
    floor = np.sqrt(run.eta) * run.whitening().whiten.T  # (p, d): the d coordinate directions
    block = FloorBlock(atoms=state.atoms, mu=state.mu.copy(), floor=floor,
                       basis=state.floor_rotation, weights=np.diag(state.floor_weights).copy())
    block, iterations, converged = floor_block_solve(block, tol, 200,
                                                     seed=run.newton_iterations == 0)
    total = block.total()
    state.mu = block.mu / total
    pi = (block.basis * (block.weights / total)) @ block.basis.T
    d = run.dim
    if not converged and d <= _FLOOR_BARRIER_MAX:
        run.floor_barrier += 1
        spread = 1e-3 * max(float(np.trace(pi)), 1e-3 * float(state.mu.sum())) / d
        mass = 1.0 + d * spread
        state.mu = state.mu / mass
        state.floor_atoms, state.floor_weights = floor, (_sym(pi) + spread * np.eye(d)) / mass
        state.floor_rotation = np.eye(d)
        _, more = inner_solve(state, tol, 200)
        iterations += more
        fw, fv = np.linalg.eigh(_sym(state.floor_weights))
        keep = fw > 0
        basis, weights = state.floor_rotation @ fv[:, keep], fw[keep]
    else:
        basis, weights = block.basis, block.weights / total
    # on the simplex exactly (T^2 is the certified lower bound only there)
    mass = float(state.mu.sum() + weights.sum())
    state.mu, weights = state.mu / mass, weights / mass
    state.floor_weights = np.diag(weights)
    state.floor_rotation = basis
    state.floor_atoms = floor @ basis
    return evaluate(state), iterations


def _add_violated_atoms(run: _Run, point: RestrictedPoint, pricing: PassResult) -> bool:
    """The pricing pass's most violated vectors join the working set (clearly inactive atoms
    leave it when it has grown large). A violated vector parallel to a working-set atom but
    longer replaces it (its constraint implies the atom's): a warm start may bring the shorter
    of two parallel vectors."""
    fresh = _not_in(pricing.top_idx, run.indices)
    if not np.any(fresh):
        return False
    new = _dedupe(pricing.top_vecs[fresh], run.vectors)
    replaced = _replace_dominated(run, pricing.top_idx[fresh][~new], pricing.top_vecs[fresh][~new])
    if not np.any(new):
        return replaced
    geo = run.whitening()
    state = run.state()
    new_idx = pricing.top_idx[fresh][new]
    new_vec = pricing.top_vecs[fresh][new]
    inactive = (state.mu == 0) & (point.scores < point.root_trace * (1 - 1e-2))
    if np.any(inactive) and state.mu.size > 4 * geo.dim:
        kept = ~inactive
        run.indices, run.vectors = run.indices[kept], run.vectors[kept]
        state.atoms, state.mu = state.atoms[kept], state.mu[kept]
    run.indices = np.concatenate([run.indices, new_idx])
    run.vectors = np.concatenate([run.vectors, new_vec])
    state.atoms = np.concatenate([state.atoms, new_vec @ geo.whiten])
    state.mu = np.concatenate([state.mu, np.zeros(new_idx.size)])
    return True


def _replace_dominated(run: _Run, idx: IntArray, vecs: FloatArray) -> bool:
    """Working-set atoms parallel to a longer vector of ``vecs`` are replaced by it (same
    weight): ``s_j = c s_i`` with ``|c| > 1`` makes the constraint of ``i`` redundant."""
    if not idx.size or not run.vectors.shape[0]:
        return False
    norms = np.linalg.norm(run.vectors, axis=1)
    lengths = np.linalg.norm(vecs, axis=1)
    cos = np.abs(vecs @ run.vectors.T) / np.maximum(np.outer(lengths, norms), 1e-300)
    replaced = False
    state = run.restricted  # None on the W = I floor path, which keeps no whitened atoms
    geo = run.whitening()
    for i in np.argsort(-lengths):
        j = int(np.argmax(cos[i]))
        if cos[i, j] >= 1.0 - _PARALLEL_RTOL and lengths[i] > norms[j] * (1.0 + 1e-12):
            run.indices[j], run.vectors[j] = idx[i], vecs[i]
            if state is not None:
                state.atoms[j] = vecs[i] @ geo.whiten
            norms[j] = lengths[i]
            replaced = True
    return replaced


def _drop_slack_floor_directions(run: _Run, point: RestrictedPoint) -> bool:
    """Drop floor directions that are clearly not clamped (floor value well below T and a
    negligible weight: by complementary slackness their weight is only the barrier's); they
    re-enter through :func:`_add_floor_directions` if they become violated again. The Newton
    system grows with the square of the block size; only the clamped eigenspace belongs in it."""
    state = run.state()
    fw, fv = np.linalg.eigh(_sym(state.floor_weights))
    floor_values = np.einsum("ia,ij,ja->a", fv, point.floor_scores, fv)
    keep = (floor_values >= point.root_trace * (1.0 - _FLOOR_DROP)) | (
        fw >= _FLOOR_WREL * float(fw[-1]))
    if np.all(keep):
        return False
    # the remaining atoms (positive weights) and floor directions must still span: a dropped
    # direction that no vector covers would leave A singular
    rest = np.concatenate([state.atoms[state.mu > 0].T, state.floor_atoms @ fv[:, keep]], axis=1)
    sv = linalg.svdvals(rest) if rest.shape[1] else np.zeros(1)
    if sv.size < rest.shape[0] or not sv[-1] > 1e-7 * sv[0]:
        return False
    state.floor_weights = np.diag(fw[keep])
    state.floor_atoms = state.floor_atoms @ fv[:, keep]
    state.floor_rotation = state.floor_rotation @ fv[:, keep]
    total = float(state.mu.sum() + np.trace(state.floor_weights))
    state.mu, state.floor_weights = state.mu / total, state.floor_weights / total
    return True


def _add_floor_directions(run: _Run, cand: _Candidate, gap: float, inner_tol: float) -> bool:
    """Eigendirections of Sigma_mu below the floor enter the floor block with a small weight."""
    state = run.state()
    geo = run.whitening()
    current = run.floor_basis @ state.floor_rotation if state.floor_rotation.size else (
        np.zeros((run.dim, 0)))
    n_current = current.shape[1]
    t = cand.point.root_trace
    sig_w, sig_v = cand.sigma_eig
    violated = sig_v[:, run.eta / np.maximum(sig_w, 1e-300) > t * (1.0 + 0.5 * inner_tol)]
    violated = violated - current @ (current.T @ violated)
    qmat, rmat = linalg.qr(violated, mode="economic")
    independent = np.abs(np.diag(rmat)) > 1e-6
    if not np.any(independent):
        return False
    new_dirs = qmat[:, independent]
    # enter just inside the cone with a small weight: most new directions are only the
    # out-of-block residuals of violated eigenvectors and need little weight (a large entry
    # weight costs Newton steps to undo); the barrier restart of the inner solve lifts them
    entry = _FLOOR_ENTRY * float(np.trace(state.floor_weights)) / max(n_current, 1) + 1e-3 * (
        n_current == 0)
    run.floor_basis = np.concatenate([current, new_dirs], axis=1)
    weights = linalg.block_diag(state.floor_weights, entry * np.eye(new_dirs.shape[1]))
    total = float(state.mu.sum() + np.trace(weights))
    state.mu = state.mu / total
    state.floor_weights = weights / total
    state.floor_rotation = np.eye(run.floor_basis.shape[1])
    state.floor_atoms = np.sqrt(run.eta) * (geo.whiten.T @ run.floor_basis)
    state.barrier = max(state.barrier, min(1e-3, 0.1 * gap) * t / run.floor_basis.shape[1])
    return True


# ------------------------------------------------------------------------------------------------
# W = I with a noise floor: the floor block eliminated in closed form (solvers.floored)
# ------------------------------------------------------------------------------------------------
def _floored(run: _Run, gram: FloatArray) -> Solution:
    r"""Column generation on :math:`g(\mu)` of :mod:`solvers.floored` (``W = I``, ``eta > 0``):
    no floor block, no barrier, no span bookkeeping (directions no vector reaches sit on the
    floor by themselves)."""
    d = run.dim
    eta = run.eta
    run.geometry = _Geometry.of(run.weight, np.eye(d))
    run.span, run.complement = np.eye(d), np.zeros((d, 0))
    if run.atoms_per_pass is None:
        run.atoms_added = max(2 * d, 16)
    _seed_pass(run, gram, eta * eta)
    mu = _initial_weights(run)
    mmat = (run.vectors.T * mu) @ run.vectors
    scale = float(np.sum(np.sqrt(np.clip(linalg.eigvalsh(_sym(mmat)), 0.0, None)))) ** 2
    mu = max(scale, eta * eta) * mu
    model = _Floored(run, mu)
    _conclude(run, column_generation(model, run.tol, warm=bool(run.warm_idx.size),
                                     pooled=bool(run.pool_keep)))
    if model.best is None or model.strongest is None:
        raise SolverError(f"{SOLVER_NAME}: max_passes too small to evaluate a candidate")
    point, r, _, _ = model.best
    sigma = r * point.covariance(eta)
    strong, _, indices, vectors = model.strongest
    on = strong.mu > 0
    u, g = strong.dual(vectors[on], eta)
    dual = _Dual(support=indices[on], multipliers=strong.mu[on], directions=u,
                 floor_factor=g)
    details = {"support": int(np.sum(on)), "working_set": int(strong.mu.size),
               "floor_block": int(g.shape[1]), "ridge": 0.0,
               "floor": "eliminated in closed form (W = I)"}
    return _verified_solution(run, _sym(sigma), dual, strong.lower, details)


class _Floored:
    r"""The inner model of :func:`_floored`: :math:`\max_{\mu\ge 0} g(\mu)` on the working set
    (:func:`solvers.floored.floored_solve`), priced by full passes and pool rounds; of the
    certified points (priced by a full pass) the one whose covariance costs least
    (``r tr Sigma(mu)``, ``best``) and the one with the largest lower bound ``g(mu)`` up to a
    relative ``tol`` (``strongest``, whose dual is returned) are kept, as :func:`_keep` does."""

    def __init__(self, run: _Run, mu: FloatArray) -> None:
        self.run = run
        self.mu = mu
        self.iterations = 0
        self.pricing: PassResult | None = None
        self.best: tuple[FlooredPoint, float, IntArray, FloatArray] | None = None
        self.strongest: tuple[FlooredPoint, float, IntArray, FloatArray] | None = None
        self.top_lower = 0.0

    def passes_left(self) -> bool:
        return self.run.passes < self.run.max_passes - 1

    def solve(self, inner_tol: float) -> FlooredPoint:
        run = self.run
        started = time.perf_counter()
        point, self.iterations = floored_solve(run.vectors, self.mu, run.eta, inner_tol, 200)
        run.newton_seconds += time.perf_counter() - started
        run.newton_iterations += self.iterations
        self.mu = point.mu
        return point

    def price(self, point: FlooredPoint, inner_tol: float, certified: bool) -> float:
        run = self.run
        self.pricing = pricing = _pricing(run, point.inverse_factor(run.eta),
                                          1.0 + 0.5 * inner_tol, certified)
        r = max(1.0, float(pricing.qmax))
        gap = r * point.trace_sigma / point.lower - 1.0 if point.lower > 0 else np.inf
        if certified:
            here = (point, r, run.indices.copy(), run.vectors.copy())
            if self.best is None or r * point.trace_sigma < self.best[1] * self.best[0].trace_sigma:
                self.best = here
            self.top_lower = max(self.top_lower, point.lower)
            if self.strongest is None or point.lower >= self.top_lower * (1.0 - run.tol):
                self.strongest = here  # (near-ties to the later point, as _keep)
        run.say(f"{'pass' if certified else 'pool'} {run.passes:3d}: g={point.lower:.12g} "
                f"r={r:.12g} gap={gap:.3e} ws={self.mu.size} "
                f"support={int(np.sum(self.mu > 0))} newton={self.iterations} "
                "(floor eliminated)")
        return gap

    def switch(self, point: FlooredPoint) -> bool:
        return False

    def grow(self, point: FlooredPoint, inner_tol: float, gap: float) -> bool:
        run = self.run
        pricing = self.pricing
        if pricing is None:  # pragma: no cover - price comes first
            raise SolverError(f"{SOLVER_NAME}: internal error (growth before pricing)")
        fresh = ~np.isin(pricing.top_idx, run.indices)
        if not np.any(fresh):
            return False
        new = _dedupe(pricing.top_vecs[fresh], run.vectors)
        replaced = _replace_dominated(run, pricing.top_idx[fresh][~new],
                                      pricing.top_vecs[fresh][~new])
        if not np.any(new) and not replaced:
            return False
        mu = self.mu
        inactive = (mu == 0) & (point.scores < 1.0 - 1e-2)
        if np.any(inactive) and mu.size > 4 * run.dim:
            run.indices, run.vectors, mu = (run.indices[~inactive], run.vectors[~inactive],
                                            mu[~inactive])
        run.indices = np.concatenate([run.indices, pricing.top_idx[fresh][new]])
        run.vectors = np.concatenate([run.vectors, pricing.top_vecs[fresh][new]])
        self.mu = np.concatenate([mu, np.zeros(int(np.sum(new)))])
        return True


# ------------------------------------------------------------------------------------------------
# trivial cases, answered exactly
# ------------------------------------------------------------------------------------------------
def _trivial_solution(run: _Run) -> Solution | None:
    r"""Closed forms, detected after the Gram pass (one extra pass when they may apply).

    * :math:`\eta q \ge (1 - \mathrm{tol}/10)\max_j |s_j|^2`: :math:`\eta I`, scaled to
      feasibility, is optimal to within tol/10, since every feasible :math:`\Sigma \succeq \eta
      I` costs at least :math:`\eta\operatorname{tr}W` (dual: :math:`H = W`).
    * one direction :math:`v` (rank 1) that is an eigenvector of :math:`W` (eigenvalue
      :math:`w_v`), :math:`a^2 = \max_j |s_j|^2`: :math:`\Sigma = \eta I + (a^2/q - \eta)vv^\top`,
      value :math:`\eta(\operatorname{tr}W - w_v) + w_v a^2/q`; dual :math:`H = W - w_v vv^\top`,
      one atom :math:`u = (q/a^2)s`, :math:`\lambda = w_v a^2/q^2`.
    """
    d = run.dim
    rank_one = run.rank == 1
    # the vectors have unit mean square norm, so eta I can only be optimal when eta >= 1
    if not (run.eta >= 1.0 - 0.1 * run.tol or rank_one):
        return None
    res = run.score(np.eye(d), 0, np.inf)
    top = float(res.qmax)
    weight = run.weight
    # eta I scaled to feasibility costs at most a factor top / eta more than the bound
    # eta tr(W): within tol / 10 of the optimum, certified as such
    if run.eta >= top * (1.0 - 0.1 * run.tol):
        dual = _Dual(np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros((0, d)),
                     _psd_factor(weight))
        run.status = "optimal"
        run.message = "eta I is optimal (eta q >= max_j |s_j|^2, within tol/10)"
        return _verified_solution(run, run.eta * np.eye(d), dual, run.eta * float(np.trace(weight)),
                                  {"support": 0, "closed_form": "eta I"}, exact_floor=True)
    if not rank_one:
        return None
    v = run.span[:, 0]
    w_v = float(v @ weight @ v)
    if float(np.linalg.norm(weight @ v - w_v * v)) > 1e-13:
        return _rank_one_any_weight(run, res) if run.eta == 0 else None
    excess = top - run.eta
    sigma = run.eta * np.eye(d) + excess * np.outer(v, v)
    ridge = 0.0
    if run.eta == 0 and d > 1:
        rest = float(np.trace(weight)) - w_v
        ridge = max(_RIDGE, 0.05 * run.tol) * w_v * top / max(rest, 1e-300)
        sigma = sigma + ridge * (np.eye(d) - np.outer(v, v))
    s_top = run.source.take(np.array([res.argmax], dtype=np.intp)) / run.data_scale
    dual = _Dual(np.array([res.argmax], dtype=np.intp), np.array([w_v * top]),
                 s_top / top, _psd_factor(weight - w_v * np.outer(v, v)))
    lower = run.eta * (float(np.trace(weight)) - w_v) + w_v * top
    run.status, run.message = "optimal", "one direction, an eigenvector of W (closed form)"
    return _verified_solution(run, _sym(sigma), dual, lower,
                              {"support": 1, "ridge": ridge, "closed_form": "rank one"},
                              exact_floor=True)


def _rank_one_any_weight(run: _Run, res: PassResult) -> Solution:
    r"""Vectors on one line :math:`s = a v` without a floor, any :math:`W`: the infimum is
    :math:`s^\top Ws/q` (:math:`\Sigma \succeq ss^\top/q` for every feasible :math:`\Sigma`),
    approached by :math:`ss^\top/q` plus a tiny ridge off the line; the dual
    :math:`u = qWs/(s^\top Ws)`, :math:`\lambda = s^\top Ws/q^2`,
    :math:`H = W - Wss^\top W/(s^\top Ws) \succeq 0` attains it (normalised units, q = 1)."""
    d = run.dim
    weight = run.weight
    v = run.span[:, 0]
    top = float(res.qmax)
    s_top = run.source.take(np.array([res.argmax], dtype=np.intp)) / run.data_scale
    ws = weight @ s_top[0]
    sws = float(s_top[0] @ ws)
    rest = float(np.trace(weight)) - float(v @ weight @ v)
    ridge = max(_RIDGE, 0.05 * run.tol) * sws / max(rest, 1e-300) if d > 1 else 0.0
    sigma = top * np.outer(v, v) + ridge * (np.eye(d) - np.outer(v, v))
    dual = _Dual(np.array([res.argmax], dtype=np.intp), np.array([sws]),
                 (ws / sws)[None, :], _psd_factor(weight - np.outer(ws, ws) / sws))
    run.status, run.message = "optimal", "one direction, no floor (closed form)"
    return _verified_solution(run, _sym(sigma), dual, sws,
                              {"support": 1, "ridge": ridge, "closed_form": "rank one"},
                              exact_floor=True)


def _psd_factor(mat: FloatArray) -> FloatArray:
    """G with GG^T = (mat)_+ (:func:`solvers.reductions.psd_factor`, eigenvalues below 1e-15 of
    the largest dropped)."""
    return psd_factor(mat, 1e-15)


# ------------------------------------------------------------------------------------------------
# phase 4: the covariance, verified by its own pass, and its dual certificate
# ------------------------------------------------------------------------------------------------
def _finish(run: _Run) -> Solution:
    """The covariance of the least costly certified candidate, with the dual of the one with
    the largest lower bound (:func:`_keep`; the same candidate unless the loop went back)."""
    cand, dual_cand = run.best, run.strongest
    if cand is None or dual_cand is None:
        raise SolverError(f"{SOLVER_NAME}: max_passes too small to evaluate a candidate")
    t = cand.point.root_trace
    sigma = cand.max_score * cand.sigma_mu if cand.lifted is None else cand.lifted
    ridge = 0.0
    comp = run.complement
    if not cand.floor_mode and comp.shape[1]:
        # rank-deficient, eta = 0: the optimum is singular on the complement of the span; add a
        # tiny ridge (relative cost max(_RIDGE, tol / 20), within the requested gap) so Sigma is
        # invertible and any residual out-of-span component of the data is checked by the pass
        span = SpanReduction(run.span, comp)
        ridge = span.ridge(run.weight, cand.max_score * t, max(_RIDGE, 0.05 * run.tol))
        # components off the span score out_of_span / ridge: keep that below tol / 20
        ridge = max(ridge, 20.0 * run.out_of_span / run.tol)
        sigma = span.ridged(sigma, ridge)
    details = {
        "support": int(np.sum(dual_cand.mu > 0)),
        "working_set": int(dual_cand.mu.size),
        "floor_block": int(dual_cand.floor_weights.shape[0]),
        "floor_full": bool(run.floor_full),
        **({"floor": ("floor block by projected Newton (solvers.floor_block)"
                      if run.floor_newton else "floor block by the log-det barrier"),
            "floor_barrier_solves": run.floor_barrier} if dual_cand.floor_mode else {}),
        "ridge": ridge,
    }
    t_dual = dual_cand.point.root_trace
    return _verified_solution(run, _sym(sigma), _factored_dual(run, dual_cand), t_dual * t_dual,
                              details)


def _inverse_factor(run: _Run, sigma: FloatArray, ridged: bool) -> tuple[FloatArray, float]:
    """A factor B with BB^T = Sigma^{-1} for the verification pass, and the condition number
    that governs its rounding. With a ridge on the complement of the span the factor is taken
    blockwise (span part by Cholesky, complement by the ridge), so the tiny ridge does not spoil
    the accuracy of the scores of vectors that lie in the span."""
    if ridged:
        span, comp = run.span, run.complement
        part = _sym(span.T @ sigma @ span)
        blocks = [(span, part), (comp, _sym(comp.T @ sigma @ comp))]
    else:
        blocks = [(np.eye(sigma.shape[0]), sigma)]
    factors, cond = [], 1.0
    for basis, block in blocks:
        try:
            chol = np.asarray(np.linalg.cholesky(block), dtype=np.float64)
        except linalg.LinAlgError:
            raise SolverError(
                f"{SOLVER_NAME}: the candidate covariance is not positive definite; remedy: "
                "try solver='clarabel'"
            ) from None
        ev = np.linalg.eigvalsh(block)
        cond = max(cond, float(ev[-1] / max(float(ev[0]), 1e-300)))
        factors.append(basis @ _lower_inverse(chol).T)
    return np.concatenate(factors, axis=1), cond


def _trace_upper(weight: FloatArray, sigma: FloatArray) -> float:
    """An upper bound on tr(W Sigma) from its float sum (error <= gamma_n sum |W_ik S_ik|)."""
    n = weight.size
    unit = _EPS / 2
    gamma = n * unit / (1 - n * unit)
    total = float(np.sum(weight * sigma))
    return float(np.nextafter(total + gamma * float(np.sum(np.abs(weight * sigma))) * 1.01, np.inf))


def _floor_lower_bound(sigma: FloatArray, eta: float, exact_floor: bool) -> float:
    """A lower bound on lambda_min(sigma) in float64. ``exact_floor``: sigma is the rounding of
    a matrix known to be >= eta I (a closed form), so Weyl's inequality with the rounding error
    (at most one unit in the last place per entry) gives ``eta - u ||sigma||_F``; otherwise the
    computed lambda_min less the eigensolver's backward error ``4 d u lambda_max``."""
    unit = _EPS / 2
    if exact_floor:
        top = float(np.max(np.abs(sigma)))
        return eta - 2.0 * unit * top * float(np.linalg.norm(sigma / top))
    ev = np.linalg.eigvalsh(sigma)
    return float(ev[0]) - 4.0 * sigma.shape[0] * unit * float(ev[-1])


def _verified_solution(
    run: _Run, sigma_n: FloatArray, dual_n: _Dual, lower_n: float, details: dict[str, Any],
    exact_floor: bool = False,
) -> Solution:
    """Scale back to the caller's units, verify the returned matrix by its own pass (float64)
    and scale it to feasibility with a safety margin; the dual is scaled back too."""
    d = run.dim
    bound = run.bound
    eta = run.eta * run.value_scale  # the caller's floor
    weight = run.weight * run.weight_scale
    sigma = _sym(run.value_scale * sigma_n)
    ridged = bool(details.get("ridge", 0.0)) and run.complement.shape[1] > 0
    bmat, cond = _inverse_factor(run, sigma, ridged)
    check = run.executor.score(run.source, bmat, run.chunk, 0, np.inf)
    run.passes += 1
    run.pass_seconds.append(check.seconds)
    # floating-point margins (err on the side of more noise): the float q_j carry a relative
    # error of order d eps sqrt(cond) (triangular solve), lambda_min one of d eps lambda_max
    unit = _EPS * (d + 2)
    margin = max(_SAFETY, 16.0 * unit * float(np.sqrt(cond)))
    scale = float(max(1.0, check.qmax / bound)) * (1.0 + margin)
    if eta > 0:
        lam_low = _floor_lower_bound(sigma, eta, exact_floor)
        if lam_low <= 0:  # too ill-conditioned to resolve lambda_min: lift by the floor itself
            sigma = _sym(sigma + eta * np.eye(d))
            lam_low = max(_floor_lower_bound(sigma, eta, False), eta)
        scale = max(scale, eta / lam_low * (1.0 + _SAFETY))
    sigma = scale * sigma
    value = _trace_upper(weight, sigma)
    lower = lower_n * run.weight_scale * run.value_scale
    gap = value / lower - 1.0 if lower > 0 else np.inf
    if run.status == "optimal" and gap > run.tol:
        run.status = "optimal_inaccurate"
        run.message = (f"certified relative gap {gap:.3g} > tol {run.tol:.3g} after the "
                       "verification pass")
    if run.status != "optimal" and not run.message.startswith("certified"):
        run.message = (f"certified relative gap {gap:.3g} (tol {run.tol:.3g}) after {run.passes} "
                       f"passes: {run.message}; the covariance is feasible but not certified "
                       "optimal to tol (remedy: raise max_passes)")
    elapsed = time.perf_counter() - run.started
    median_pass = _median(run.pass_seconds)
    extra = {
        "lower": lower, "upper": value, "gap": gap, "tol": run.tol,
        "support": 0, "working_set": 0, "floor_block": 0, "ridge": 0.0,
        **details,
        "floor_rank": int(np.sum(np.linalg.eigvalsh(sigma) <= eta * (1 + 1e-6))) if eta > 0 else 0,
        "rank": run.rank,
        "newton_seconds": run.newton_seconds,
        "pass_seconds": float(np.sum(run.pass_seconds)),
        "pass_median_seconds": median_pass,
        "pass_equivalents": elapsed / median_pass if median_pass > 0 else float(run.passes),
        "verification_ratio": check.qmax / bound,
        "scales": {"data": run.data_scale, "value": run.value_scale, "weight": run.weight_scale},
        "log": run.log,
    }
    stats = SolverStats(
        solver=SOLVER_NAME, version=f"numpy {np.__version__}, scipy {scipy.__version__}",
        setup_time=0.0, solve_time=elapsed, iterations=run.newton_iterations, passes=run.passes,
        extra=extra,
    )
    strongest = run.strongest  # the reduced-dual point of the returned dual
    raw: dict[str, Any] = {}
    if strongest is not None:
        raw = {"mu": strongest.mu, "support_indices": strongest.indices,
               "floor_basis": strongest.floor_basis, "floor_weights": strongest.floor_weights,
               "whiten": strongest.geometry.whiten, "unwhiten": strongest.geometry.unwhiten}
    return Solution(covariance=sigma, value=value, dual=_scaled_dual(run, dual_n),
                    status=run.status, stats=stats, raw_duals=raw, message=run.message)


def _median(values: list[float]) -> float:
    """The median of a short list (0.0 when empty), without numpy's per-call cost."""
    if not values:
        return 0.0
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else 0.5 * (ordered[half - 1] + ordered[half])


def _scaled_dual(run: _Run, dual: _Dual) -> FactoredDual:
    """The factored dual of the normalised program in the caller's units (the one
    :class:`FactoredDual` of the solve, validated once)."""
    return Normalisation(run.data_scale, run.bound, run.weight_scale).dual_of(*dual)


def _factored_dual(run: _Run, cand: _Candidate) -> _Dual:
    """Map the reduced-dual weights to the factored dual (normalised units, q = 1)."""
    point = cand.point
    t = point.root_trace
    whiten = cand.geometry.whiten
    on = cand.mu > 0
    lam = t * t * cand.mu[on]
    d = run.dim
    weight = run.weight
    span, comp = run.span, run.complement
    # In whitened coordinates the dual directions are x_j = A^{-1/2} y_j (u_j = L x_j / T) and
    # the floor factor is A^{-1/2} B Pi^{1/2}; with Y the stacked rows sqrt(mu_j) y_j and
    # (B Pi^{1/2})^T, A = Y^T Y, and A^{-1/2} Y^T is the transposed polar factor U V^T of the
    # thin SVD Y = U S V^T. Its rows are orthonormal to rounding whatever the conditioning of A
    # (ill-conditioned W), so sum_j lam_j x_j x_j^T + floor part = I holds to ~k u in the
    # whitened metric that the certificate checks; A^{-1/2} from the eigenvalues would lose
    # u cond(A).
    root_mu = np.sqrt(cand.mu[on])
    rows = [(cand.vectors[on] @ whiten) * root_mu[:, None]]
    basis = cand.floor_basis if cand.floor_mode else np.zeros((d, 0))
    if basis.shape[1]:
        pw, pv = linalg.eigh(_sym(cand.floor_weights))
        half = pv * np.sqrt(np.clip(pw, 0.0, None))
        rows.append((np.sqrt(run.eta) * ((whiten.T @ basis) @ half)).T)
    stacked = np.concatenate(rows)
    left, _, right = np.linalg.svd(stacked, full_matrices=False)
    polar = left @ right  # rows: A^{-1/2} applied to each stacked row
    n_on = int(np.sum(on))
    u = (polar[:n_on] / root_mu[:, None]) @ whiten.T / t
    if cand.floor_mode:
        g = whiten @ polar[n_on:].T if basis.shape[1] else np.zeros((d, 0))
    elif comp.shape[1]:
        # rank-deficient, eta = 0: the directions solved in the span, lifted to R^d with the
        # Schur complement of W on the complement as the floor block
        u, g = SpanReduction(span, comp).lift_dual(weight, u @ span)
    else:
        g = np.zeros((d, 0))
    return _Dual(support=cand.indices[on], multipliers=lam, directions=u, floor_factor=g)
