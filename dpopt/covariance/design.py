r"""``design_covariance``: the least-error Gaussian noise covariance for a privacy budget.

Given sensitivity vectors :math:`s_j` (the worst-case changes of a release), a privacy budget (or
several: all must hold) and a weight :math:`W`, it solves the covariance program
(theory page, "The covariance program")

.. math::

    \min_\Sigma \operatorname{tr}(W\Sigma)\quad\text{s.t.}\quad s_j^\top\Sigma^{-1}s_j \le q,\quad
    \Sigma \succeq \eta I,

with :math:`q` = ``budget.mahalanobis_bound()``, certifies the result independently
(:func:`certificates.covariance.check`: an interval ``[lower, upper]`` on the optimal value) and
returns the *repaired* covariance (scaled to strict feasibility), which always satisfies the
budget when re-checked.

Example
-------
>>> import numpy as np
>>> from dpopt.accounting.budgets import ZCDP
>>> s = np.array([[1., 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
>>> w = np.array([[2, .5, 0], [.5, 1, .2], [0, .2, .5]])
>>> d = design_covariance(s, ZCDP(rho=0.5), weight=w)   # q = 2 rho = 1: a closed-form test problem
>>> d.certified, round(d.value, 6), round(d.isotropic_value, 9)
(True, 9.742641, 10.5)
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.io import write_certificate
from certificates.problem import CovarianceProgram, VectorSource, check_norm_range
from certificates.validate import as_scalar
from dpopt import progress
from dpopt.covariance.mahalanobis_sup import MahalanobisSup
from dpopt.covariance.privacy import CovariancePrivacy, privacy_from_sup
from dpopt.covariance.program import isotropic_baseline
from dpopt.errors import (
    AccuracyWarning,
    InfeasibleError,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)
from dpopt.progress import watch_passes
from dpopt.relation import NeighbouringRelation, RelationLike, add_remove_bound, as_relation
from solvers._types import Solution
from solvers.api import Attempt, attempts, methods
from solvers.structured import blas_limits

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from dpopt.accounting.budgets import Budget
    from dpopt.covariance.continuous import BoxCoverage, EllipsoidCoverage
    from dpopt.covariance.description import DesignDescription
    from dpopt.covariance.sensitivity import BoxTwoRecordSet, EllipsoidDifferences, PrunedSet
    from dpopt.parallel import DaskOption

__all__ = ["Design", "design_covariance"]


@dataclass(frozen=True)
class Design:
    r"""An optimal noise covariance with its certificate (the result of :func:`design_covariance`).

    Attributes
    ----------
    covariance : ndarray, shape (d, d)
        The repaired (strictly feasible) :math:`\Sigma`: release ``f(D) + N(0, covariance)``.
    value : float
        :math:`\operatorname{tr}(W\Sigma)` (= ``certificate.upper``).
    certificate : CovarianceCertificate
        Interval [lower, upper] on the optimal value, residuals, gap, and the certified
        Mahalanobis sup of ``covariance`` over every vector.
    privacy : CovariancePrivacy
        What ``covariance`` guarantees under ``relation``, derived from the certificate's
        Mahalanobis sup (no second pass over the vectors).
    isotropic_value : float
        :math:`c\operatorname{tr}W` for the isotropic baseline :math:`cI`,
        :math:`c = \max(\max_j |s_j|^2 / q, \eta)`.
    bound : float
        The Mahalanobis bound :math:`q` the budget(s) allow for ``relation``.
    solution : Solution
        The raw solver output the design was certified from.
    program : CovarianceProgram
        The program that was solved (vectors, W, the add/remove bound, eta).
    relation : NeighbouringRelation
        The neighbouring relation the budget is stated for.
    status : str
        ``"optimal"`` when certified to ``tol``, ``"optimal_inaccurate"`` otherwise (private, but
        possibly suboptimal by up to a factor ``1 + certificate.gap``).
    message : str
        Human-readable account of how the design was obtained and certified.
    coverage : BoxCoverage or None
        For a design on records anywhere in a box
        (:class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet`): the box, query and sigma
        covered, the certified sup over every pair of records in the box at ``covariance``, and
        the exchange's working set (``program`` holds its vectors; the certificate's lower bound
        is that relaxation's dual bound). None for a finite sensitivity set, whose guarantee
        covers the vectors of ``program`` only (for a grid: records snapped to the grid).
    budget : Budget or None
        The budget the design was made for (several: their ``AllOf``); what :meth:`save`
        describes in the file so that the verifier recomputes its bound.
    path : str
        Which step of the solver plan produced the answer (``"structured"``, ``"structured,
        closed form (eta I)"``, ``"clarabel (primal form)"``, ...) and, when the plan went past
        its first step, every step tried with its outcome and time. Printed by ``str(design)``
        and saved in the certificate file (``versions["produced_by"]``).
    """

    covariance: NDArray[np.float64]
    value: float
    certificate: CovarianceCertificate
    privacy: CovariancePrivacy
    isotropic_value: float
    bound: float
    solution: Solution
    program: CovarianceProgram
    relation: NeighbouringRelation = NeighbouringRelation.ADD_REMOVE
    status: str = "optimal"
    message: str = ""
    coverage: BoxCoverage | EllipsoidCoverage | None = None
    budget: Budget | None = None
    path: str = ""

    def save(self, path: str | os.PathLike[str], *,
             description: str | DesignDescription | None = None,
             overwrite: bool = False) -> str:
        """Write the certificate file (:func:`certificates.io.write_certificate`); return the
        sha256 of its content (an integrity check against accidental corruption, not a
        signature).

        By default the file carries the design's description
        (:func:`dpopt.covariance.description.describe_design`: the domain, the sensitivity set,
        the relation and the budget specs) whenever the vectors came from ``add_remove_set`` or
        ``uniform_query_set`` and the budget has a spec; ``dpopt verify`` and :meth:`load` then
        regenerate the vectors and recompute the budget's bound from it. A
        :class:`~dpopt.covariance.description.DesignDescription` is written as given; a string
        is free text (the file is then verified for its vectors only). A design over a plain
        array stores the array; one over any other VectorSource needs ``description``."""
        if self.solution.dual is None:
            raise InfeasibleError("the design has no dual certificate to save")
        from dpopt.covariance.description import DesignDescription, describe_design

        if description is None:
            description = describe_design(self)
            if description is None and self.coverage is not None:
                raise InvalidParameterError(
                    "description", None, "a design over a ball or an ellipsoid cannot be "
                    "described in a file yet (the file would cover its working vectors only); "
                    "design on the bounding box, or pass a free-text description knowingly")
        text = description.to_json() if isinstance(description, DesignDescription) else description
        return write_certificate(path, self.program, self.certificate, self.solution.dual,
                                 description=text, overwrite=overwrite,
                                 produced_by=self.path or None)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *,
             source: ArrayLike | VectorSource | None = None, budget: Budget | None = None,
             rigorous: bool | None = None) -> Design:
        """Load a design file, **re-verifying it from scratch** before returning it.

        Runs :func:`dpopt.covariance.design_file.verify_design_file`: strict parsing, the
        re-check of the stored covariance and of the claimed interval, the vectors regenerated
        from a ``dpopt design`` description (or ``source``) and compared with the file's, the
        described budget's Mahalanobis bound recomputed, and ``budget`` (if given) checked against
        the stored ``q``. Nothing in the file is trusted; a file that fails any check raises.

        Parameters
        ----------
        path : path-like
        source : VectorSource or array_like, optional
            The sensitivity vectors the file must be about (needed when it neither stores them
            nor describes them in a form dpopt regenerates).
        budget : Budget, optional
            A budget the design must meet.
        rigorous : bool, optional
            Re-check with every rounding error accounted for (default: the file's mode).

        Returns
        -------
        Design
            ``covariance`` is the stored Σ (strictly feasible as stored); ``privacy`` comes from
            the fresh certificate's Mahalanobis sup over every verified vector; ``bound`` is the
            described (or given) budget's bound, else the one the file's ``q`` guarantees;
            ``solution`` holds the file's dual with solver name ``"file"``.

        Raises
        ------
        CertificateError
            The file is malformed or any of its claims fails.
        """
        from dpopt.covariance.design_file import verify_design_file
        from solvers._types import SolverStats

        vf = verify_design_file(path, source=source, budget=budget, rigorous=rigorous)
        cert, cf = vf.certificate, vf.file
        rel = as_relation(vf.relation)
        program = CovarianceProgram(vf.vectors, cf.weight, cf.bound, cf.noise_floor)
        cov = np.array(cert.repaired_covariance, dtype=np.float64)
        coverage = None
        if vf.box_sup is not None and vf.description is not None:
            from dpopt.covariance.continuous import BoxCoverage, box_sup_as_mahalanobis
            from dpopt.covariance.description import box_set_from_description

            sset = box_set_from_description(vf.description)
            pairs = np.asarray(vf.description.pairs, dtype=np.float64)
            coverage = BoxCoverage(
                sensitivity=sset, sup=vf.box_sup, pairs_x=pairs[:, :sset.dim],
                pairs_y=pairs[:, sset.dim:], iterations=0, history=(),
                uniform_query_value=None, method="file")
            privacy = privacy_from_sup(box_sup_as_mahalanobis(sset, vf.box_sup), cov,
                                       sset.box.diameter(), rel)
        else:
            privacy = privacy_from_sup(_certified_sup(program, cert), cov, program.max_norm(),
                                       rel)
        iso_value, _ = isotropic_baseline(program)
        status = "optimal" if cert.certified else "optimal_inaccurate"
        solution = Solution(
            covariance=cov, value=cert.upper, dual=cf.dual, status=status,
            stats=SolverStats(solver="file", extra={"path": os.fspath(path)}),
        )
        bound = vf.budget_bound if vf.budget_bound is not None else vf.guaranteed_bound
        return cls(
            covariance=cov, value=cert.upper, certificate=cert, privacy=privacy,
            isotropic_value=iso_value, bound=bound, solution=solution, program=program,
            relation=rel, status=status,
            message=f"loaded from {os.fspath(path)!r} and re-verified: {cert.message}",
            budget=vf.budget, coverage=coverage, path=cf.versions.get("produced_by", ""),
        )

    @property
    def problem(self) -> CovarianceProgram:
        """Deprecated alias of :attr:`program` (removed in dpopt 0.6)."""
        from certificates._deprecated import warn_moved

        warn_moved("Design.problem", "Design.program")
        return self.program

    @property
    def certified(self) -> bool:
        """Whether the optimality gap closed to the requested tolerance."""
        return self.certificate.certified

    @property
    def success(self) -> bool:
        """Same as :attr:`certified` (the name :class:`scipy.optimize.OptimizeResult` uses)."""
        return self.certificate.certified

    @property
    def improvement(self) -> float:
        """isotropic_value / value (> 1: the optimal covariance beats isotropic noise)."""
        return self.isotropic_value / self.value

    def plot(self, ax: Axes | None = None, *, max_points: int = 2000,
             show_isotropic: bool = True) -> Axes:
        """Draw the noise ellipse {x : xᵀΣ⁻¹x = q} against the best isotropic noise.

        Every sensitivity vector lies inside the ellipse (that is the privacy guarantee); the
        binding ones, which touch it, are drawn in red. For d > 2 the picture is the projection
        onto the top two principal directions of Σ. See
        :func:`dpopt.covariance.plotting.plot_design` (matplotlib is imported only here).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; a new figure is created when omitted.
        max_points : int
            At most this many sensitivity vectors are drawn (the binding ones first).
        show_isotropic : bool
            Also draw the circle of the best isotropic noise c·I.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from dpopt.covariance.plotting import plot_design

        return plot_design(self, ax, max_points=max_points, show_isotropic=show_isotropic)

    def __str__(self) -> str:
        covers = f"; {self.coverage.describe()}" if self.coverage is not None else ""
        return (
            f"Design: tr(W Sigma) = {self.value:.10g} (isotropic {self.isotropic_value:.10g}, "
            f"{self.improvement:.4g} times the error); q = {self.bound:.10g} ({self.relation}); "
            f"{self.certificate}{covers}" + (f"; answer from {self.path}" if self.path else "")
        )


def _bound_of(budgets: Budget | Sequence[Budget]) -> tuple[float, Budget]:
    if isinstance(budgets, Sequence) and not isinstance(budgets, str | bytes):
        items = list(budgets)
        if not items:
            raise InvalidParameterError("budgets", budgets, "must contain at least one budget")
        for b in items:
            if not callable(getattr(b, "mahalanobis_bound", None)):
                raise InvalidTypeError("budgets", b, "a dpopt.accounting.budgets.Budget")
        if len(items) == 1:
            budget = items[0]
        else:
            from dpopt.accounting.budgets import AllOf

            budget = AllOf(*items)
    else:
        budget = budgets
    if not callable(getattr(budget, "mahalanobis_bound", None)):
        raise InvalidTypeError(
            "budgets", budgets, "a dpopt.accounting.budgets.Budget or a sequence of them"
        )
    q = as_scalar("mahalanobis_bound", budget.mahalanobis_bound(), low=0.0)
    return q, budget


def _vectors_of(sensitivity: ArrayLike | VectorSource | PrunedSet) -> ArrayLike | VectorSource:
    if not isinstance(sensitivity, np.ndarray) and isinstance(sensitivity, VectorSource):
        return sensitivity
    if hasattr(sensitivity, "original_count") and hasattr(sensitivity, "vectors"):  # PrunedSet
        return np.asarray(sensitivity.vectors, dtype=np.float64)
    return sensitivity


_MOVED = ("FALLBACK_TIME_FACTOR", "FALLBACK_MIN_SECONDS", "FALLBACK_MAX_SECONDS")


def __getattr__(name: str) -> object:
    """The fallback budget moved to :mod:`solvers.api` (which owns ``solver="auto"``)."""
    if name in _MOVED:
        import solvers.api

        warnings.warn(f"dpopt.covariance.design.{name} moved to solvers.api.{name}; the old "
                      "path will be removed in the next release", DeprecationWarning,
                      stacklevel=2)
        return getattr(solvers.api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _better(new: CovarianceCertificate, old: CovarianceCertificate | None) -> bool:
    """The best certified VALUE wins: a certified design over an uncertified one, then the
    smaller certified upper bound (the value of the repaired, strictly feasible covariance)."""
    if old is None:
        return True
    if new.certified != old.certified:
        return new.certified
    return new.upper < old.upper


def design_covariance(
    sensitivity: ArrayLike | VectorSource | PrunedSet | BoxTwoRecordSet | EllipsoidDifferences,
    budgets: Budget | Sequence[Budget],
    weight: ArrayLike | None = None,
    noise_floor: float = 0.0,
    solver: str = "auto",
    tol: float = 1e-6,
    rigorous: bool = False,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
    dask: DaskOption = None,
) -> Design:
    r"""The least-error Gaussian covariance meeting a privacy budget, certified.

    Parameters
    ----------
    sensitivity : array_like, VectorSource, PrunedSet, BoxTwoRecordSet or EllipsoidDifferences
        Sensitivity vectors :math:`s_j` (an array of shape (J, d)), e.g.
        ``add_remove_set(grid, g, sigma)`` (the two-record vectors; covers records on the
        grid, so snap real-valued records) or ``uniform_query_set(domain)``.
        ``add_remove_set(Box(lo, hi), g, sigma)`` (a
        :class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet`) covers every record in the box:
        the semi-infinite program is solved by exchange
        (:func:`dpopt.covariance.continuous.design_box`) and ``tol`` is the relative gap of its
        certified interval. ``uniform_query_set(ball or ellipsoid)`` (an
        :class:`~dpopt.covariance.sensitivity.EllipsoidDifferences`) has a closed-form design
        (:func:`dpopt.covariance.continuous.design_ellipsoid`).
    budgets : Budget or sequence of Budget
        ``RDP``, ``ZCDP``, ``GDP``, ``ApproxDP``, ``MIDP``, ``AllOf`` from
        :mod:`dpopt.accounting.budgets`;
        a sequence means all must hold (the minimum bound).
    weight : array_like, shape (d, d), optional
        W (positive definite; identity by default): the objective is tr(W Sigma), e.g. the
        expected squared error of the noisy release when W = I.
    noise_floor : float, default 0
        eta: require Sigma >= eta I.
    solver : str, default "auto"
        ``"auto"`` (the plan of :func:`solvers.api.plan`: the structured solver; if its
        certificate does not close, Clarabel and then SCS as second opinions, together under
        ``solvers.api.FALLBACK_TIME_FACTOR`` times the structured solve; the best certified
        value is kept and ``design.path`` says which step produced it), ``"structured"`` or
        any backend of :func:`solvers.cvx.available_backends`.
    tol : float, default 1e-6
        Relative gap required for certification.
    rigorous : bool, default False
        Certify with every rounding error accounted for (:mod:`certificates.rigorous`).
    relation : {"add_remove", "replacement"} or NeighbouringRelation, default "add_remove"
        The neighbouring relation the budget is stated for. ``sensitivity`` is always the
        add/remove set; for ``"replacement"`` the program's bound is
        :func:`dpopt.relation.add_remove_bound` of the budget's (a quarter of it).
    dask : None, "local", str or distributed.Client, optional
        Run the structured solver's passes over the vectors as Dask tasks
        (:class:`solvers.dask_passes.DaskPasses`): ``"local"`` starts a ``LocalCluster`` for this
        call and closes it, a scheduler address (``"tcp://host:8786"``) or a ``Client`` uses that
        cluster. The answer is the same as in process. The certificate check and the privacy
        re-check run in this process. Needs Dask (from a clone:
        ``pip install -e '.[distributed]'``); ``None`` (default) never imports Dask.

    Returns
    -------
    Design

    Raises
    ------
    SolverError
        Every solver attempt failed.
    InfeasibleError
        No strictly feasible covariance could be produced (never returned as if it were).

    Warns
    -----
    AccuracyWarning
        The design is private (strictly feasible, re-checked) but its optimality gap exceeds
        ``tol``; ``design.certified`` is False.
    """
    from dpopt.covariance.sensitivity import BoxTwoRecordSet, EllipsoidDifferences

    if isinstance(sensitivity, EllipsoidDifferences):
        from dpopt.covariance.continuous import design_ellipsoid

        return design_ellipsoid(sensitivity, budgets, weight, noise_floor, solver, tol, rigorous,
                                relation)
    if isinstance(sensitivity, BoxTwoRecordSet):
        from dpopt.covariance.continuous import design_box

        return design_box(sensitivity, budgets, weight, noise_floor, solver, tol, rigorous,
                          relation)
    if dask is not None:
        from dpopt.parallel import dask_executor

        with dask_executor(dask) as executor:
            return _design(sensitivity, budgets, weight, noise_floor, solver, tol, rigorous,
                           relation, executor)
    return _design(sensitivity, budgets, weight, noise_floor, solver, tol, rigorous, relation,
                   None)


def _design(sensitivity: ArrayLike | VectorSource | PrunedSet, budgets: Budget | Sequence[Budget],
            weight: ArrayLike | None, noise_floor: float, solver: str,
            tol: float, rigorous: bool, relation: RelationLike, executor: Any) -> Design:
    q, stated = _bound_of(budgets)
    rel = as_relation(relation)
    tol = as_scalar("tol", tol, low=0.0, high=1.0)
    problem = CovarianceProgram(_vectors_of(sensitivity), weight, add_remove_bound(q, rel),
                                noise_floor)
    if not isinstance(solver, str):
        raise InvalidTypeError("solver", solver, "a solver name string")
    if solver.lower() not in methods():
        raise InvalidParameterError("solver", solver, f"must be one of {methods()}")
    best: tuple[CovarianceCertificate, Attempt] | None = None
    strongest: tuple[CovarianceCertificate, Attempt] | None = None  # the best lower bound
    mixed: tuple[CovarianceCertificate, Solution] | None = None
    tried: list[str] = []
    errors: list[str] = []
    # the pass executor serves the structured solver only (a backend holds the vectors itself)
    structured = solver.lower() in ("auto", "structured")
    watched = watch_passes(executor)  # a cluster's passes tick the progress line
    options: dict[str, Any] = (
        {"executor": watched} if watched is not None and structured else {})
    if structured:
        options["blas_threads"] = None  # the solve runs inside the one limit entered below
    # solvers.api owns the plan, the fallbacks' time budget and the tol mapping; here each
    # answer is certified and the best certified one kept; the plan stops at the first
    # certified answer (the fallbacks then never start)
    # one BLAS thread-limit context for the plan and every check (small matrices: threaded
    # BLAS only adds contention), entered here once; a named cvxpy backend solves under its
    # own settings and only its checks are limited
    with blas_limits(1) if structured else nullcontext():
        for att in attempts(problem, solver, tol=tol, **options):
            if att.solution is None:
                errors.append(f"{att.step.label}: {att.error}")
                tried.append(f"{att.step.label} (failed)")
                continue
            sol = att.solution
            progress.phase("certificate", total=1)  # the check's own pass over the vectors
            with nullcontext() if structured else blas_limits(1):
                cert = check(problem, sol.covariance, sol.dual, tol=tol, rigorous=rigorous)
            if _better(cert, best[0] if best is not None else None):
                best = (cert, att)
            if strongest is None or cert.lower > strongest[0].lower:
                strongest = (cert, att)
            tried.append(f"{att.label} ({'certified' if cert.certified else f'gap {cert.gap:.2g}'}"
                         f", {att.seconds:.3g} s)")
            if cert.certified:
                break
            # every dual bounds the same program: the best covariance with the strongest dual
            mixed = _mixed(problem, best, strongest, tol, rigorous, limited=structured) or mixed
            if mixed is not None and mixed[0].certified:
                break
    # arrays were range-checked by CovarianceProgram; a source's largest norm was recorded by the
    # first pass over it, so this costs no pass of its own
    check_norm_range(problem.max_norm())
    if best is None:
        raise SolverError("every solver attempt failed: " + " | ".join(errors))
    cert, chosen = best
    if chosen.solution is None:  # pragma: no cover - attempts without a solution are never kept
        raise SolverError("internal error: a failed attempt was kept")
    sol = chosen.solution
    label = chosen.label
    if mixed is not None and not cert.certified and mixed[0].lower > cert.lower:
        cert, sol = mixed
        if strongest is not None:
            label = f"{chosen.label}, with the dual of {strongest[1].label}"
    path = label if len(tried) == 1 else f"{label}; tried {', '.join(tried)}"
    if not math.isfinite(cert.upper):
        raise InfeasibleError(f"no strictly feasible covariance could be certified: {cert.message}")
    if cert.certified:
        status = "optimal"
        message = f"certified optimal to tol={tol:g} by {label}: {cert.message}"
    else:
        status = "optimal_inaccurate"
        why = f" (solver {sol.stats.solver}: {sol.status}; {sol.message})" if sol.message else ""
        message = (
            f"design not certified to tol={tol:g}: {cert.message}{why}; the covariance is private "
            f"(re-checked) but may be suboptimal by up to a factor {1 + cert.gap:.6g}"
        )
        warnings.warn(message, AccuracyWarning, stacklevel=2)
    cov = cert.repaired_covariance
    privacy = privacy_from_sup(_certified_sup(problem, cert), cov, problem.max_norm(), rel)
    if not privacy.mahalanobis_bound <= q:  # the repair guarantees it; never release otherwise
        raise InfeasibleError(
            f"re-check failed: the design's Mahalanobis sup {privacy.mahalanobis_bound!r} "
            f"exceeds the budget's bound {q!r} ({rel})"
        )
    iso_value, _ = isotropic_baseline(problem)
    return Design(
        covariance=cov, value=cert.upper, certificate=cert, privacy=privacy,
        isotropic_value=iso_value, bound=q, solution=sol, program=problem, relation=rel,
        status=status, message=message, budget=stated, path=path,
    )


def _mixed(problem: CovarianceProgram, best: tuple[CovarianceCertificate, Attempt] | None,
           strongest: tuple[CovarianceCertificate, Attempt] | None, tol: float,
           rigorous: bool, limited: bool = False) -> tuple[CovarianceCertificate, Solution] | None:
    """The covariance of the best attempt certified with the dual of the attempt with the best
    lower bound (a certificate is any covariance with any dual of the program), when those are
    two attempts; ``None`` otherwise. ``limited``: the caller holds the BLAS limit already."""
    if best is None or strongest is None or best[1] is strongest[1]:
        return None
    sol, other = best[1].solution, strongest[1].solution
    if sol is None or other is None or other.dual is None:
        return None
    with nullcontext() if limited else blas_limits(1):
        cert = check(problem, sol.covariance, other.dual, tol=tol, rigorous=rigorous)
    return cert, replace(sol, dual=other.dual)


def _certified_sup(problem: CovarianceProgram, cert: CovarianceCertificate) -> MahalanobisSup:
    """The certificate's verification pass as a :class:`MahalanobisSup` (every vector checked,
    so exact up to the certified rounding margin)."""
    value = min(cert.attained_sup, cert.mahalanobis_sup)
    vector = (problem.source.take(np.array([cert.argmax], dtype=np.intp))[0]
              if cert.argmax >= 0 else np.zeros(problem.dim))
    return MahalanobisSup(
        value=value, upper=cert.mahalanobis_sup, lower=value, exact=True,
        method="certificate", index=cert.argmax if cert.argmax >= 0 else None, vector=vector,
        margin=cert.mahalanobis_sup / value - 1.0 if value > 0 else 0.0,
    )
