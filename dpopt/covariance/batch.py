r"""``design_covariance_batch``: many certified designs at once (one domain, many queries).

A trajectory of releases (a private sampler, a sweep over budgets, a grid of queries) asks for
hundreds or thousands of small programs

.. math::

    \min_\Sigma \operatorname{tr}(W\Sigma)\quad\text{s.t.}\quad s_{j}^{(i)\top}\Sigma^{-1}
    s_{j}^{(i)} \le q_i,\quad \Sigma \succeq \eta I, \qquad i = 1..n,

that share a domain, a weight and often their active constraints: consecutive queries that are
close have nearly the same optimal support. :func:`design_covariance_batch` solves them in one
call with one BLAS thread-limit context, the weight validated once, each distinct budget's bound
computed once, and a warm start of each problem from its predecessor's support and dual weights
(:class:`solvers.structured.WarmStart`), and certifies **every** answer
independently with the certificate of :func:`certificates.covariance.check`, exactly as
:func:`~dpopt.covariance.design.design_covariance` does. When :math:`\eta = 0`, the items of
the batch's most common shape (arrays, or small sources) are solved in waves: item 0 on its
own, then the next unsolved items all at once (:func:`solvers.stacked.solve_on_support`, every
small linear system of the items in one stacked LAPACK call), each started on its nearest
solved predecessor's support and dual weights, and certified at once
(:func:`certificates.stacked.check_stacked`, each item's proof complete on its own); an item
the stack leaves open is tried again from a nearer predecessor, and alone (warm-started) from
its immediate one. Items of other shapes go one by one. An item
whose certificate does not close is re-designed by
:func:`~dpopt.covariance.design.design_covariance` (its generic fallbacks included), so the
batch is never less accurate, and never less private, than a loop; ``design.path`` says which
route answered.

Example
-------
>>> import numpy as np
>>> from dpopt.accounting.budgets import ZCDP
>>> rng = np.random.default_rng(0)
>>> sets = [rng.standard_normal((200, 2)) * [1.0, 0.5 + 0.1 * i] for i in range(5)]
>>> designs = design_covariance_batch(sets, ZCDP(rho=0.5))
>>> len(designs), all(d.certified for d in designs)
(5, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.problem import CovarianceProgram, VectorSource, check_norm_range
from certificates.stacked import check_stacked
from certificates.validate import as_psd_matrix, as_scalar
from dpopt.covariance.design import (
    Design,
    _bound_of,
    _certified_sup,
    _vectors_of,
    design_covariance,
)
from dpopt.covariance.privacy import privacy_from_sup
from dpopt.covariance.program import isotropic_baseline
from dpopt.errors import InfeasibleError, InvalidParameterError, InvalidTypeError, SolverError
from dpopt.relation import NeighbouringRelation, RelationLike, add_remove_bound, as_relation
from solvers._types import Solution
from solvers.api import method_tolerance
from solvers.stacked import solve_on_support
from solvers.structured import WarmStart, blas_limits, solve_structured

if TYPE_CHECKING:  # pragma: no cover
    from dpopt.accounting.budgets import Budget
    from dpopt.covariance.sensitivity import PrunedSet

__all__ = ["SMALL_VECTORS", "STACK_NUMBERS", "design_covariance_batch"]

#: A vector source of at most this many numbers (J d) is generated once into an array.
SMALL_VECTORS = 2**18
#: The most numbers (n J d) the items of a batch may hold together to be solved stacked.
STACK_NUMBERS = 2**24
#: Items tried at once on one support: the first window, and the most.
_WINDOW_START = 4
_WINDOW_MAX = 64
#: ... and at most this many numbers (n J d) of vectors in one wave.
_WINDOW_NUMBERS = 2**22


def _items(sensitivities: Sequence[ArrayLike | VectorSource | PrunedSet] | ArrayLike,
           ) -> list[ArrayLike | VectorSource]:
    """The batch's vector sets: a sequence of (J_i, d) arrays, vector sources or pruned sets,
    or one (n, J, d) array."""
    if isinstance(sensitivities, np.ndarray):
        if sensitivities.ndim != 3:
            raise InvalidParameterError(
                "sensitivities", f"array of shape {sensitivities.shape}",
                "must be an (n, J, d) array or a sequence of (J_i, d) arrays")
        return list(sensitivities)
    if isinstance(sensitivities, str | bytes) or not isinstance(sensitivities, Sequence):
        raise InvalidTypeError("sensitivities", sensitivities,
                               "a sequence of (J_i, d) arrays or an (n, J, d) array")
    items = [_vectors_of(item) for item in sensitivities]
    if not items:
        raise InvalidParameterError("sensitivities", sensitivities, "must hold at least one set")
    return items


def _materialised(item: ArrayLike | VectorSource) -> ArrayLike | VectorSource:
    """A small vector source as one array (J d <= SMALL_VECTORS), else unchanged: every pass of
    the solve and of its certificate then reads the same in-memory vectors, generated once."""
    if isinstance(item, np.ndarray) or not isinstance(item, VectorSource):
        return item
    if item.count * item.dim > SMALL_VECTORS:
        return item
    return np.concatenate([np.asarray(b, dtype=np.float64) for _, b in item.chunks(65536)])


def _dim_of(item: ArrayLike | VectorSource, index: int) -> int:
    if not isinstance(item, np.ndarray) and isinstance(item, VectorSource):
        return int(item.dim)
    arr = np.asarray(item, dtype=np.float64)
    if arr.ndim != 2:
        raise InvalidParameterError(f"sensitivities[{index}]", f"array of shape {arr.shape}",
                                    "must be a (J, d) array")
    return int(arr.shape[1])


def _budgets_of(budgets: Budget | Sequence[Budget | Sequence[Budget]],
                n: int) -> list[Budget | Sequence[Budget]]:
    """One budget for every item, or one each (each may itself be a sequence: all must hold)."""
    if callable(getattr(budgets, "mahalanobis_bound", None)):
        return [budgets] * n  # type: ignore[list-item]
    if isinstance(budgets, str | bytes) or not isinstance(budgets, Sequence):
        raise InvalidTypeError("budgets", budgets,
                               "a Budget, or a sequence of one Budget per problem")
    items = list(budgets)
    if len(items) != n:
        raise InvalidParameterError(
            "budgets", f"a sequence of {len(items)} budgets",
            f"must be one Budget for all {n} problems or exactly {n} (one per problem); to "
            "require several budgets at once pass AllOf(...) or a nested list")
    return items


def design_covariance_batch(
    sensitivities: Sequence[ArrayLike | VectorSource | PrunedSet] | ArrayLike,
    budgets: Budget | Sequence[Budget | Sequence[Budget]],
    weight: ArrayLike | None = None,
    noise_floor: float = 0.0,
    tol: float = 1e-6,
    rigorous: bool = False,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
    warm_start: bool = True,
) -> list[Design]:
    r"""Certified optimal covariances for a batch of programs sharing a domain.

    Item ``i`` is the program of :func:`~dpopt.covariance.design.design_covariance` for the
    vectors ``sensitivities[i]`` and the budget ``budgets[i]`` (or the one shared budget):
    :math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s_j^\top\Sigma^{-1}s_j \le q_i`,
    :math:`\Sigma\succeq\eta I`, with :math:`q_i` the budget's Mahalanobis bound (the covariance
    program of the theory page). Every returned design carries its own certificate from
    :func:`certificates.covariance.check` (an interval on its optimal value and the certified
    Mahalanobis sup of its repaired covariance over all of its vectors); no design is trusted
    because of its neighbour.

    Parameters
    ----------
    sensitivities : sequence of array_like (J_i, d), VectorSource or PrunedSet; or (n, J, d)
        The sensitivity vectors of each problem (same dimension d; the counts may differ), as
        ``design_covariance`` takes them. A source of at most ``SMALL_VECTORS`` numbers is
        generated once into an array, which the solve and the certificate then both read (one
        set at a time; the design's ``program`` keeps the source).
        Consecutive problems that are close (a trajectory of queries) profit most from the warm
        start; a vector set's row order should be the same from one problem to the next (the
        same record pairs in the same order) for the support to carry over.
    budgets : Budget, or sequence of n Budgets
        One budget for every problem, or one per problem (an item may be a sequence of budgets
        that must all hold, as in ``design_covariance``).
    weight : array_like, shape (d, d), optional
        W, shared by every problem (identity by default).
    noise_floor : float, default 0
        eta, shared by every problem.
    tol : float, default 1e-6
        Relative gap required for each certificate.
    rigorous : bool, default False
        Certify every item with all rounding errors accounted for.
    relation : {"add_remove", "replacement"} or NeighbouringRelation
        The neighbouring relation the budgets are stated for.
    warm_start : bool, default True
        Start each problem from the previous problem's support and dual weights.

    Returns
    -------
    list of Design
        In the order of ``sensitivities``; each exactly what ``design_covariance`` documents
        (``design.certificate`` re-checked independently, ``design.privacy`` from it).

    Raises
    ------
    InvalidParameterError, InvalidTypeError
        Malformed batch (naming the parameter and the offending item).
    SolverError, InfeasibleError
        As for ``design_covariance``, for the first item that fails.

    Warns
    -----
    AccuracyWarning
        For every item whose certificate does not close to ``tol``.
    """
    items = _items(sensitivities)
    per_item = _budgets_of(budgets, len(items))
    if not isinstance(warm_start, bool):
        raise InvalidTypeError("warm_start", warm_start, "a bool")
    rel = as_relation(relation)
    tol = as_scalar("tol", tol, low=0.0, high=1.0)
    eta = as_scalar("noise_floor", noise_floor, low=0.0, low_open=False)
    # the shared data are validated once; the budgets' bounds once per distinct budget
    shared_weight = None if weight is None else as_psd_matrix("weight", weight,
                                                              dim=_dim_of(items[0], 0))
    bounds: dict[int, tuple[float, Budget]] = {}
    for bud in per_item:
        key = id(bud)  # the per-item list holds every budget, so ids stay distinct
        if key not in bounds:
            bounds[key] = _bound_of(bud)
    job = _Batch(items, per_item, [bounds[id(b)] for b in per_item], shared_weight, eta, tol,
                 rigorous, rel)
    with blas_limits(1):  # one thread-limit context for the whole batch
        done: list[Design | None] = [None] * len(items)
        group = _stack(job) if warm_start and eta == 0.0 and len(items) > 2 else None
        if group is not None:  # the items of the most common shape, in waves
            members, problems = group
            for index, design in zip(members, _waves(job.subset(members), problems),
                                     strict=True):
                done[index] = design
        # the others one by one, each warm-started from the item before it
        designs: list[Design] = []
        warm: tuple[WarmStart, int] | None = None  # the previous support and its set's size
        for i in range(len(items)):
            sol: Solution | None
            if done[i] is None:
                design, sol = _design_one(job, i, warm if warm_start else None)
            else:
                design = done[i]  # type: ignore[assignment]
                sol = design.solution
            designs.append(design)
            start = WarmStart.from_solution(sol) if sol is not None else None
            warm = (start, design.program.count) if start is not None else None
    return designs


@dataclass(frozen=True)
class _Batch:
    """A batch's validated inputs: the items, their budgets with their bounds, and the shared
    weight, floor, tolerance, mode and relation."""

    items: list[ArrayLike | VectorSource]
    budgets: list[Budget | Sequence[Budget]]
    bounds: list[tuple[float, Budget]]  # (q, the budget as stated) per item
    weight: NDArray[np.float64] | None
    eta: float
    tol: float
    rigorous: bool
    relation: NeighbouringRelation
    labels: tuple[int, ...] = ()  # the caller's index of each item (when a subset)
    # the first program made over ``weight``: the others share its validated W (with_vectors)
    shared: list[CovarianceProgram] = field(default_factory=list, compare=False, repr=False)

    @property
    def solve_tol(self) -> float:
        return method_tolerance("structured", self.tol)

    def name(self, index: int) -> int:
        """The caller's index of item ``index`` (what paths and errors name)."""
        return self.labels[index] if self.labels else index

    def subset(self, indices: Sequence[int]) -> _Batch:
        """The batch of the items ``indices`` (named by their index in this batch)."""
        return replace(self, items=[self.items[i] for i in indices],
                       budgets=[self.budgets[i] for i in indices],
                       bounds=[self.bounds[i] for i in indices],
                       labels=tuple(self.name(i) for i in indices), shared=self.shared)

    def program(self, index: int, dense: ArrayLike | VectorSource) -> CovarianceProgram:
        """Item ``index``'s program (its vectors and bound validated, errors naming the item;
        the shared W validated by the first program only, the others share it)."""
        bound = add_remove_bound(self.bounds[index][0], self.relation)
        try:
            if self.weight is None or not self.shared:
                made = CovarianceProgram(dense, self.weight, bound, self.eta)
                if self.weight is not None:
                    self.shared.append(made)
                return made
            return self.shared[0].with_vectors(dense, bound, self.eta)
        except InvalidParameterError as exc:  # name the item
            raise InvalidParameterError(f"sensitivities[{self.name(index)}] ({exc.name})",
                                        exc.value,
                                        exc.requirement) from None


def _stack(job: _Batch) -> tuple[list[int], list[CovarianceProgram]] | None:
    """The items of the batch's most common shape (J, d), d >= 2, with their programs (over
    in-memory arrays): arrays, and sources of at most ``SMALL_VECTORS`` numbers (generated
    here), in order while they hold at most ``STACK_NUMBERS`` numbers together; ``None`` when
    fewer than three items share a shape. The other items (another
    size, larger sources, anything malformed, to be refused by name) go one by one."""
    shapes: list[tuple[int, int] | None] = []
    for item in job.items:
        if not isinstance(item, np.ndarray) and isinstance(item, VectorSource):
            small = item.count * item.dim <= SMALL_VECTORS
            shapes.append((int(item.count), int(item.dim)) if small else None)
            continue
        try:
            dims = np.shape(item)
        except (TypeError, ValueError):
            dims = ()
        shapes.append((int(dims[0]), int(dims[1])) if len(dims) == 2 else None)
    counts: dict[tuple[int, int], int] = {}
    for shape in shapes:
        if shape is not None and shape[1] >= 2:
            counts[shape] = counts.get(shape, 0) + 1
    if not counts:
        return None
    common = max(counts, key=lambda sh: counts[sh])  # the first of the most frequent
    per_item = common[0] * common[1]
    members = [i for i, shape in enumerate(shapes) if shape == common]
    members = members[:max(1, STACK_NUMBERS // max(1, per_item))]
    if len(members) < 3:
        return None
    problems = [job.program(i, np.asarray(_materialised(job.items[i]), dtype=np.float64))
                for i in members]
    return members, problems


def _described(job: _Batch, index: int, problem: CovarianceProgram) -> CovarianceProgram:
    """The program a design describes: on the caller's set (a source stays a source; a design
    does not keep a generated copy of its vectors)."""
    item = job.items[index]
    if isinstance(item, np.ndarray) or not isinstance(item, VectorSource):
        return problem
    return problem.with_vectors(item)  # the item's source, the program's validated W


def _waves(job: _Batch, problems: list[CovarianceProgram]) -> list[Design]:
    """The batch in waves: item 0 is solved on its own; then the next unsolved items (a window)
    are solved all at once (:func:`solvers.stacked.solve_on_support`), each item started on
    the support and the dual weights of its nearest solved predecessor, and certified all at
    once (:func:`certificates.stacked.check_stacked`: each item's proof complete). An item the
    stack leaves open is tried again in a later wave from a nearer predecessor; one that
    fails from its immediate predecessor is solved on its own (warm-started from it), so
    every wave makes progress. The window doubles while every item of a wave closes and
    shrinks to twice the leading items that did, so a trajectory whose support changes often
    costs little stacked work that is thrown away."""
    n = len(problems)
    designs: list[Design | None] = [None] * n
    sols: list[Solution | None] = [None] * n
    bounds = np.array([p.bound for p in problems])
    weight = np.asarray(problems[0].weight, dtype=np.float64)
    window = _WINDOW_START
    # the most items a wave may hold at once: their vectors are copied for the stacked solve
    # and its certificate (about 32 MB at most, however large the sets)
    most = max(2, min(_WINDOW_MAX, _WINDOW_NUMBERS // max(1, problems[0].count
                                                          * problems[0].dim)))
    designs[0], sols[0] = _design_one(job, 0, None, problems[0])
    while True:
        pending = [j for j in range(1, n) if designs[j] is None]
        if not pending:
            break
        wave = pending[:min(window, most)]
        # each item's start: its nearest solved predecessor (every item before pending[0] is)
        starts: list[tuple[int, WarmStart | None]] = []
        last = wave[0] - 1
        for j in wave:
            while last + 1 < j and designs[last + 1] is not None:
                last += 1
            here = sols[last]
            starts.append((last, WarmStart.from_solution(here) if here is not None else None))
        on = [pos for pos, (_, st) in enumerate(starts) if st is not None]
        closed = _stacked_wave(job, problems, bounds, weight,
                               [wave[pos] for pos in on], [starts[pos] for pos in on],
                               designs, sols)
        # an item left open from its immediate predecessor (or with no support to start
        # from) is solved on its own; the others wait for a nearer start
        for j, (origin, start) in zip(wave, starts, strict=True):
            if designs[j] is None and (origin == j - 1 or start is None):
                if designs[j - 1] is None:
                    continue
                prev = sols[j - 1]
                warm = WarmStart.from_solution(prev) if prev is not None else None
                designs[j], sols[j] = _design_one(
                    job, j, (warm, problems[j].count) if warm is not None else None,
                    problems[j])
        lead = 0
        while lead < len(wave) and wave[lead] in closed:
            lead += 1
        window = (min(_WINDOW_MAX, 2 * window) if lead == len(wave)
                  else max(_WINDOW_START // 2, 2 * lead))
    return [d for d in designs if d is not None]


def _stacked_wave(job: _Batch, problems: list[CovarianceProgram], bounds: NDArray[np.float64],
                  weight: NDArray[np.float64], todo: list[int],
                  starts: list[tuple[int, WarmStart | None]], designs: list[Design | None],
                  sols: list[Solution | None]) -> set[int]:
    """Items ``todo`` solved at once, each from its start (``(origin, support)``), certified
    at once; the certified ones are entered in ``designs`` / ``sols``. Returns them."""
    if not todo:
        return set()
    width = max(st.indices.size for _, st in starts if st is not None)
    support = np.full((len(todo), width), -1, dtype=np.intp)
    weights = np.zeros((len(todo), width))
    for row, (_, st) in enumerate(starts):
        if st is not None:
            support[row, :st.indices.size] = st.indices
            weights[row, :st.indices.size] = st.weights
    # the wave's vectors stacked (the programs' validated arrays, copied once per wave)
    stack = np.stack([np.asarray(problems[j].vectors, dtype=np.float64) for j in todo])
    res = solve_on_support(stack, weight, bounds[todo], support, weights,
                           job.solve_tol)
    got = [pos for pos, ok in enumerate(res.solved.tolist()) if ok]
    found = [res.solutions[pos] for pos in got]
    good = [(pos, s) for pos, s in zip(got, found, strict=True)
            if s is not None and s.dual is not None]
    certs = check_stacked([problems[todo[pos]] for pos, _ in good],
                          [s.covariance for _, s in good],
                          [s.dual for _, s in good if s.dual is not None], tol=job.tol,
                          rigorous=job.rigorous)
    closed: set[int] = set()
    for (pos, sol), cert in zip(good, certs, strict=True):
        j, origin = todo[pos], starts[pos][0]
        if cert.certified and math.isfinite(cert.upper):
            path = (f"structured, stacked (batch item {job.name(j)}, on the support of item "
                    f"{job.name(origin)})")
            designs[j] = _assemble(problems[j], _described(job, j, problems[j]),
                                   job.bounds[j][0], job.relation, cert, sol, job.tol, path,
                                   job.bounds[j][1])
            sols[j] = sol
            closed.add(j)
    return closed


def _design_one(job: _Batch, index: int, warm: tuple[WarmStart, int] | None,
                problem: CovarianceProgram | None = None) -> tuple[Design, Solution | None]:
    """One item: the structured solver (warm-started), the independent certificate check and
    the privacy re-check, exactly as ``design_covariance`` makes them; an item whose
    certificate does not close goes through ``design_covariance`` itself (its fallbacks).
    ``problem``: the item's program when already built (from its materialised vectors)."""
    vectors = job.items[index]
    budget = job.budgets[index]
    q, stated = job.bounds[index]
    weight, eta, tol, rigorous, rel = job.weight, job.eta, job.tol, job.rigorous, job.relation
    dense = _materialised(vectors) if problem is None else problem.vectors
    if problem is None:
        problem = job.program(index, dense)
    # a set of another size starts cold: its indices would not name the same record pairs
    start = warm[0] if warm is not None and warm[1] == problem.count else None
    sol: Solution | None
    try:
        sol = solve_structured(problem, tol=job.solve_tol, blas_threads=None, warm_start=start)
        cert = check(problem, sol.covariance, sol.dual, tol=tol, rigorous=rigorous)
    except SolverError:
        sol, cert = None, None
    # a source's largest norm was recorded by the solve's first pass (no pass of its own)
    check_norm_range(problem.max_norm())
    if sol is None or cert is None or not cert.certified or not math.isfinite(cert.upper):
        # the generic route with its fallbacks (and warnings), exactly as a loop would take it
        design = design_covariance(vectors, budget, weight=weight, noise_floor=eta, tol=tol,
                                   rigorous=rigorous, relation=rel)
        why = ("failed" if sol is None or cert is None
               else f"was not certified (gap {cert.gap:.2g})")
        path = (f"{design.path or 'design_covariance'} (batch item {job.name(index)}: the "
                f"batch's "
                f"structured answer {why}, so design_covariance designed it)")
        return replace(design, path=path), design.solution
    # the design describes the caller's set (a source stays a source: a design does not keep
    # a generated copy of its vectors); solve and certificate read the same vectors in order
    described = (problem if dense is vectors or problem.vectors is vectors
                 else problem.with_vectors(vectors))
    form = sol.stats.extra.get("closed_form")
    path = ("structured" + (f", closed form ({form})" if form else "")
            + f" (batch item {job.name(index)}, "
            + (f"warm start from item {job.name(index - 1)})" if start is not None
               else "cold start)"))
    return _assemble(problem, described, q, rel, cert, sol, tol, path, stated), sol


def _assemble(problem: CovarianceProgram, described: CovarianceProgram, q: float,
              rel: NeighbouringRelation, cert: CovarianceCertificate, sol: Solution,
              tol: float, path: str, budget: Budget) -> Design:
    """The Design of a certified structured solution (what ``design_covariance`` returns);
    ``problem`` is what was solved and checked, ``described`` the same program on the caller's
    vector set (the design's ``program``); ``path`` says which solver path answered."""
    cov = cert.repaired_covariance
    privacy = privacy_from_sup(_certified_sup(problem, cert), cov, problem.max_norm(), rel)
    if not privacy.mahalanobis_bound <= q:  # the repair guarantees it; never release otherwise
        raise InfeasibleError(
            f"re-check failed: the design's Mahalanobis sup {privacy.mahalanobis_bound!r} "
            f"exceeds the budget's bound {q!r} ({rel})")
    iso_value, _ = isotropic_baseline(problem)
    message = f"certified optimal to tol={tol:g} by {path}: {cert.message}"
    return Design(
        covariance=cov, value=cert.upper, certificate=cert, privacy=privacy,
        isotropic_value=iso_value, bound=q, solution=sol, program=described, relation=rel,
        status="optimal", message=message, path=path, budget=budget,
    )
