r"""``design_covariance``: the least-error Gaussian noise covariance for a privacy budget.

Given sensitivity vectors :math:`s_j` (the worst-case changes of a release), a privacy budget (or
several: all must hold) and a weight :math:`W`, it solves seed 002's Theorem 3 program
(MATH.md §6)

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
>>> d = design_covariance(s, ZCDP(rho=0.5), weight=w)   # q = 2 rho = 1: MATH.md F1
>>> d.certified, round(d.value, 6), round(d.isotropic_value, 9)
(True, 9.742641, 10.5)
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.io import write_certificate
from certificates.problem import CovarianceProgram, VectorSource, check_norm_range
from certificates.validate import as_scalar
from dpopt.covariance.program import isotropic_baseline
from dpopt.errors import (
    AccuracyWarning,
    InfeasibleError,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)
from solvers._types import Solution
from solvers.api import AUTO_MAX_COUNT, AUTO_MAX_DIM, solve
from solvers.dask_passes import PassFailedError

__all__ = ["Design", "design_covariance"]


@dataclass(frozen=True)
class Design:
    """An optimal noise covariance with its certificate.

    Attributes
    ----------
    covariance : ndarray, shape (d, d)
        The repaired (strictly feasible) Sigma: release ``f(D) + N(0, covariance)``.
    value : float
        tr(W covariance) (= ``certificate.upper``).
    certificate : CovarianceCertificate
        Interval [lower, upper] on the optimal value, residuals, gap.
    privacy : object
        :func:`dpopt.covariance.privacy.privacy_of` of the covariance on the sensitivity set (or a
        :class:`dpopt.accounting.budgets.PrivacyReport` of its certified Mahalanobis bound).
    isotropic_value : float
        tr(W) c for the isotropic baseline c I, c = max(max_j |s_j|^2 / q, eta).
    bound : float
        The Mahalanobis bound q the budget(s) allow.
    solution : Solution
        The raw solver output the design was certified from.
    problem : CovarianceProgram
        The program's data (vectors, W, q, eta).
    """

    covariance: NDArray[np.float64]
    value: float
    certificate: CovarianceCertificate
    privacy: Any
    isotropic_value: float
    bound: float
    solution: Solution
    problem: CovarianceProgram

    def save(self, path: str | os.PathLike[str], *, description: str | None = None,
             overwrite: bool = False) -> str:
        """Write the certificate file (:func:`certificates.io.write_certificate`); return its
        sha256. ``description`` is required when the vectors came from a VectorSource; re-check
        the file with :func:`certificates.io.verify_file`."""
        if self.solution.dual is None:  # pragma: no cover - every solver returns a dual
            raise InfeasibleError("the design has no dual certificate to save")
        return write_certificate(path, self.problem, self.certificate, self.solution.dual,
                                 description=description, overwrite=overwrite)

    @property
    def certified(self) -> bool:
        return self.certificate.certified

    @property
    def improvement(self) -> float:
        """isotropic_value / value (> 1: the optimal covariance beats isotropic noise)."""
        return self.isotropic_value / self.value

    def __str__(self) -> str:
        return (
            f"Design: tr(W Sigma) = {self.value:.10g} (isotropic {self.isotropic_value:.10g}, "
            f"x{self.improvement:.4g}); q = {self.bound:.10g}; {self.certificate}"
        )


def _bound_of(budgets: Any) -> tuple[float, Any]:
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


def _vectors_of(sensitivity: Any) -> Any:
    if isinstance(sensitivity, VectorSource) and not isinstance(sensitivity, np.ndarray):
        return sensitivity
    if hasattr(sensitivity, "original_count") and hasattr(sensitivity, "vectors"):  # PrunedSet
        return np.asarray(sensitivity.vectors, dtype=np.float64)
    return sensitivity


def _attempts(problem: CovarianceProgram, solver: str) -> list[tuple[str, str]]:
    """Solver attempts in order; ``auto``: the structured solver, then Clarabel as a second
    opinion (natural form when small, N = Sigma^-1 form otherwise), then SCS when small."""
    if not isinstance(solver, str):
        raise InvalidTypeError("solver", solver, "a solver name string")
    if solver.lower() != "auto":
        return [(solver.lower(), "primal")]
    if problem.count <= AUTO_MAX_COUNT and problem.dim <= AUTO_MAX_DIM:
        return [("structured", "primal"), ("clarabel", "primal"), ("scs", "primal")]
    return [("structured", "primal"), ("clarabel", "inverse")]


def _privacy(covariance: NDArray[np.float64], sensitivity: Any, problem: CovarianceProgram,
             q: float) -> Any:
    try:
        from dpopt.covariance.privacy import privacy_of
    except ImportError:  # pragma: no cover - the privacy module is part of dpopt
        from certificates.covariance import primal_ratio
        from dpopt.accounting.budgets import privacy_report

        return privacy_report(min(q, primal_ratio(problem, covariance) * (1 + 1e-9)))
    priv = privacy_of(covariance, sensitivity)
    if bool(getattr(priv, "exact", False)) and priv.mahalanobis_bound > q * (1 + 1e-9):
        raise InfeasibleError(
            f"re-check failed: the design's Mahalanobis sup {priv.mahalanobis_bound!r} "
            f"exceeds the budget's bound {q!r}"
        )
    return priv


def design_covariance(
    sensitivity: Any,
    budgets: Any,
    weight: Any = None,
    noise_floor: float = 0.0,
    solver: str = "auto",
    tol: float = 1e-6,
    rigorous: bool = False,
    dask: Any = None,
) -> Design:
    r"""The least-error Gaussian covariance meeting a privacy budget, certified.

    Parameters
    ----------
    sensitivity : array_like, shape (J, d), VectorSource or PrunedSet
        Sensitivity vectors :math:`s_j`, e.g. ``dpopt.covariance.sensitivity.add_remove_set(grid,
        g, sigma)``
        (Theorem 1 two-record vectors) or ``uniform_query_set(domain)``.
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
        ``"auto"`` (the structured solver; if its certificate does not close, Clarabel and then
        SCS as second opinions, keeping the best certified result), ``"structured"`` or any
        backend of :func:`solvers.cvx.available_backends`.
    tol : float, default 1e-6
        Relative gap required for certification.
    rigorous : bool, default False
        Certify with every rounding error accounted for (:mod:`certificates.rigorous`).
    dask : None, "local", str or distributed.Client, optional
        Run the structured solver's passes over the vectors as Dask tasks
        (:class:`solvers.dask_passes.DaskPasses`): ``"local"`` starts a ``LocalCluster`` for this
        call and closes it, a scheduler address (``"tcp://host:8786"``) or a ``Client`` uses that
        cluster. The answer is the same as in process. The certificate check and the privacy
        re-check run in this process. Needs ``pip install dpopt[distributed]``; ``None``
        (default) never imports Dask.

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
    if dask is not None:
        from dpopt.parallel import dask_executor

        with dask_executor(dask) as executor:
            return _design(sensitivity, budgets, weight, noise_floor, solver, tol, rigorous,
                           executor)
    return _design(sensitivity, budgets, weight, noise_floor, solver, tol, rigorous, None)


def _executor_option(executor: Any, method: str) -> dict[str, Any]:
    """The pass executor goes to the structured solver only (the cvxpy backends hold the vectors
    in their own model)."""
    return {"executor": executor} if executor is not None and method == "structured" else {}


def _design(sensitivity: Any, budgets: Any, weight: Any, noise_floor: float, solver: str,
            tol: float, rigorous: bool, executor: Any) -> Design:
    q, _ = _bound_of(budgets)
    tol = as_scalar("tol", tol, low=0.0, high=1.0)
    problem = CovarianceProgram(_vectors_of(sensitivity), weight, q, noise_floor)
    if not isinstance(problem.vectors, np.ndarray):  # arrays are checked by CovarianceProgram
        check_norm_range(problem.max_norm())
    best: tuple[CovarianceCertificate, Solution] | None = None
    errors: list[str] = []
    solve_tol = max(1e-10, min(1e-8, tol / 100))
    for method, form in _attempts(problem, solver):
        try:
            sol = solve(problem, method=method, form=form, tol=solve_tol,
                        **_executor_option(executor, method))
        except SolverError as exc:
            if isinstance(exc, PassFailedError):
                raise  # a distributed pass could not complete: no fallback on a partial pass
            errors.append(str(exc))
            continue
        except InvalidParameterError:
            if solver.lower() != "auto":
                raise
            continue
        cert = check(problem, sol.covariance, sol.dual, tol=tol, rigorous=rigorous)
        if best is None or cert.gap < best[0].gap:
            best = (cert, sol)
        if cert.certified:
            break
    if best is None:
        raise SolverError("every solver attempt failed: " + " | ".join(errors))
    cert, sol = best
    if not math.isfinite(cert.upper):
        raise InfeasibleError(f"no strictly feasible covariance could be certified: {cert.message}")
    if not cert.certified:
        warnings.warn(
            f"design not certified to tol={tol:g}: {cert.message}; the covariance is private "
            f"(re-checked) but may be suboptimal by up to a factor {1 + cert.gap:.6g}",
            AccuracyWarning,
            stacklevel=2,
        )
    cov = cert.repaired_covariance
    privacy = _privacy(cov, sensitivity, problem, q)
    iso_value, _ = isotropic_baseline(problem)
    return Design(
        covariance=cov, value=cert.upper, certificate=cert, privacy=privacy,
        isotropic_value=iso_value, bound=q, solution=sol, problem=problem,
    )
