r"""Conic backends for the optimal-covariance program, via cvxpy.

One adapter per backend behind :class:`CvxBackend` (lazy imports, the native tolerance options
of :data:`solvers.api.TOLERANCE_OPTIONS`, the one place a tolerance is mapped, a per-backend
status map into :data:`solvers._types.STATUSES`, unknown codes to
``"solver_error"``). :func:`solve_cvx` builds a form (:mod:`solvers.cvx_forms`), solves it,
and converts the solver's duals into a :class:`~certificates.problem.FactoredDual`:

* from conic blocks :math:`Z_j = [[A_j, b_j],[b_j^\top, g_j]]`: :math:`\lambda_j = g_j`,
  :math:`u_j = -b_j/g_j` on blocks with :math:`g_j` above a threshold;
* from the :math:`N` form: :math:`\lambda_j` = multiplier of row j, :math:`u_j = N s_j`,
  :math:`H = N K N` with ``K`` the multiplier of :math:`N \preceq I/\eta`;
* :math:`H = GG^\top` from the eigen-decomposition of the dual H, negatives clipped.

Whatever the solver's accuracy, the factored dual is PSD by construction and the equality residual
:math:`E = W - H - \sum_j \lambda_j u_j u_j^\top` absorbs any mismatch; the certificate
(:func:`certificates.covariance.check`) stays valid. Nothing here is trusted: statuses are
reported, never used as proof.

For :math:`\eta = 0` and vectors that do not span :math:`\mathbb R^d` the program is solved in the
span (basis ``B``, :math:`W_r = B^\top W B`) and the dual is lifted with the Schur-complement
correction (:class:`solvers.reductions.SpanReduction`, the reduction both solvers use):
:math:`u_j = (B + C C^\top W B W_r^{-1}) u_j^r` and
:math:`H = C(C^\top W C - C^\top W B W_r^{-1} B^\top W C)C^\top`. The singular optimum
:math:`B\Sigma_r B^\top` is returned with a tiny ridge :math:`\tau CC^\top` on the complement
(relative cost ``RIDGE_RELATIVE``) so that the returned covariance is positive definite.
"""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

from certificates.covariance import dual_lower_bound
from certificates.errors import InvalidParameterError, SolverError
from certificates.problem import CovarianceProgram, FactoredDual
from solvers._types import CVXPY_STATUS_MAP, Solution, SolverStats
from solvers.cvx_forms import FORMS, CvxForm, build_form
from solvers.reductions import SpanReduction, psd_factor
from solvers.scaling import Normalisation

__all__ = [
    "BACKENDS",
    "ClarabelBackend",
    "CvxBackend",
    "SCSBackend",
    "available_backends",
    "get_backend",
    "solve_cvx",
]

#: Blocks with g_j <= SUPPORT_RTOL * max_j g_j are dropped from the factored dual.
SUPPORT_RTOL = 1e-10
#: Eigenvalues of the dual H below EIG_RTOL * (largest |eigenvalue|) are dropped from G.
EIG_RTOL = 1e-13
#: Ridge on the complement of the span for rank-deficient sets: relative cost added to the value.
RIDGE_RELATIVE = 1e-10


class CvxBackend:
    """Adapter of one cvxpy conic solver: name, version, status map, time limit, stats (its
    tolerance options are :func:`solvers.api.native_options` of its name)."""

    #: Our name of the backend (lower case).
    name: ClassVar[str]
    #: cvxpy's name of the solver.
    cvxpy_name: ClassVar[str]
    #: cvxpy status -> our vocabulary; anything else maps to ``"solver_error"``.
    status_map: ClassVar[dict[str, str]] = CVXPY_STATUS_MAP
    #: The solver's option for a wall-clock limit in seconds (None: not supported).
    time_limit_option: ClassVar[str | None] = None
    #: The Python module whose ``__version__`` is the solver's version (None: unknown).
    module: ClassVar[str | None] = None

    def options(self, tol: float) -> dict[str, Any]:
        """Solver keyword arguments for a requested relative accuracy ``tol``: this backend's
        row of :data:`solvers.api.TOLERANCE_OPTIONS`."""
        from solvers.api import native_options  # the owner of the mapping (imports this module)

        return native_options(self.name, tol)

    def version(self) -> str:
        """The installed solver's version string (``""`` when unknown)."""
        if self.module is None:
            return ""
        import importlib

        return str(getattr(importlib.import_module(self.module), "__version__", ""))

    def available(self) -> bool:
        """Whether cvxpy can use this solver here."""
        return self.cvxpy_name in _installed_solvers()

    def map_status(self, status: str | None) -> str:
        """Map a cvxpy status into :data:`solvers._types.STATUSES` (unknown -> solver_error)."""
        return self.status_map.get(str(status), "solver_error")

    def run(
        self, form: CvxForm, tol: float, verbose: bool = False, time_limit: float | None = None
    ) -> tuple[str, SolverStats]:
        """Solve ``form.problem``; return (our status, stats). Raises SolverError on a crash
        (including a panic of a compiled solver, which Python sees as a ``BaseException``)."""

        if not self.available():
            raise SolverError(
                f"solver {self.name!r} is not installed; install it (pip install {self.name}) "
                f"or choose one of {available_backends()}"
            )
        options = self.options(tol)
        if time_limit is not None and self.time_limit_option is not None:
            options[self.time_limit_option] = float(time_limit)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # cvxpy's notes on its canonicalization backend and on inaccurate solutions: the
                # latter is reported as status "optimal_inaccurate"; the certificate decides
                warnings.filterwarnings("ignore", message=".*CPP backend.*", category=UserWarning)
                warnings.filterwarnings("ignore", message=".*may be inaccurate.*",
                                        category=UserWarning)
                form.problem.solve(solver=self.cvxpy_name, verbose=verbose, **options)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # cvxpy's SolverError, numerical errors, a Rust panic
            raise SolverError(
                f"{self.name} failed on the {form.form} form ({type(exc).__name__}: {exc}); "
                f"remedy: try another backend (e.g. solver='scs' / 'clarabel'), "
                f"form='inverse', or the structured solver for large problems"
            ) from exc
        wall = time.perf_counter() - start
        st = form.problem.solver_stats
        stats = SolverStats(
            solver=self.name,
            version=self.version(),
            setup_time=float(st.setup_time or 0.0),
            solve_time=float(st.solve_time or 0.0),
            iterations=int(st.num_iters or 0),
            extra={"wall_time": wall, "cvxpy_status": str(form.problem.status), "form": form.form},
        )
        return self.map_status(form.problem.status), stats


class ClarabelBackend(CvxBackend):
    """Clarabel (interior point; default)."""

    name = "clarabel"
    cvxpy_name = "CLARABEL"
    time_limit_option = "time_limit"
    module = "clarabel"


class SCSBackend(CvxBackend):
    """SCS (first order; least accurate)."""

    name = "scs"
    cvxpy_name = "SCS"
    time_limit_option = "time_limit_secs"
    module = "scs"


class _GenericBackend(CvxBackend):
    """Any other installed cvxpy solver that handles PSD cones (solver defaults)."""

    def __init__(self, cvxpy_name: str) -> None:
        self.cvxpy_name = cvxpy_name  # type: ignore[misc]
        self.name = cvxpy_name.lower()  # type: ignore[misc]


#: Our built-in adapters, by name.
BACKENDS: dict[str, type[CvxBackend]] = {"clarabel": ClarabelBackend, "scs": SCSBackend}


def _psd_solvers() -> list[str]:
    """cvxpy names of the installed conic solvers that accept PSD cones."""
    try:
        from cvxpy.reductions.solvers import defines
    except ImportError:  # pragma: no cover
        return []
    solver_map: dict[str, Any] = getattr(defines, "SOLVER_MAP_CONIC", {})
    out = []
    for name in getattr(defines, "INSTALLED_CONIC_SOLVERS", []):
        supported = getattr(solver_map.get(name), "SUPPORTED_CONSTRAINTS", [])
        if any("PSD" in getattr(c, "__name__", "") for c in supported):
            out.append(name)
    return out


@functools.cache
def _installed_solvers() -> frozenset[str]:
    """cvxpy's installed solvers, asked once per process: cvxpy finds them by trying to import
    every solver it knows (several ms per call, most of a small design's time when asked on
    every call)."""
    try:
        import cvxpy as cp
    except ImportError:  # pragma: no cover - cvxpy is a dependency
        return frozenset()
    return frozenset(cp.installed_solvers())


def available_backends() -> list[str]:
    """Names of the installed backends that handle PSD cones (``clarabel`` first)."""
    return list(_backend_names())


@functools.cache
def _backend_names() -> tuple[str, ...]:
    """:func:`available_backends`, found once per process (from the installed solvers)."""
    names = [n for n, cls in BACKENDS.items() if cls().available()]
    for cv in _psd_solvers():
        if cv.lower() not in names:
            names.append(cv.lower())
    return tuple(names)


def get_backend(name: str) -> CvxBackend:
    """The adapter called ``name`` (case-insensitive)."""
    if not isinstance(name, str):
        raise InvalidParameterError("solver", name, "must be a solver name string")
    key = name.lower()
    if key in BACKENDS:
        return BACKENDS[key]()
    for cv in _psd_solvers():
        if cv.lower() == key:
            return _GenericBackend(cv)
    raise InvalidParameterError(
        "solver", name, f"must be one of the installed PSD-capable backends {available_backends()}"
    )


# ----------------------------------------------------------------------------------------------
# extraction of primal and factored dual


def _from_blocks(
    zs: list[NDArray[np.float64]], d: int
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    g = np.array([float(z[d, d]) for z in zs])
    top = float(np.max(g)) if g.size else 0.0
    sup = np.flatnonzero(g > SUPPORT_RTOL * top) if top > 0 else np.zeros(0, dtype=np.intp)
    lam = g[sup]
    u = np.array([-np.asarray(zs[j][:d, d], dtype=float) / g[j] for j in sup]).reshape(-1, d)
    return sup.astype(np.intp), lam, u


def _from_rows(
    mult: NDArray[np.float64], n: NDArray[np.float64], vectors: NDArray[np.float64]
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    mult = np.clip(np.asarray(mult, dtype=float).ravel(), 0.0, None)
    top = float(np.max(mult)) if mult.size else 0.0
    sup = np.flatnonzero(mult > SUPPORT_RTOL * top) if top > 0 else np.zeros(0, dtype=np.intp)
    u = vectors[sup] @ n
    return sup.astype(np.intp), mult[sup], u


def _sym(x: Any) -> NDArray[np.float64]:
    if x is None:
        raise ValueError("the solver returned no value")
    a = np.asarray(x, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {a.shape}")
    return 0.5 * (a + a.T)


def _extract(
    form: CvxForm, vectors: NDArray[np.float64], d: int
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64], NDArray[np.float64],
           NDArray[np.float64], dict[str, Any]]:
    """(Sigma, support, lambda, u, H, raw) from a solved form (values may be None -> error)."""
    raw: dict[str, Any] = {}
    if form.form == "primal":
        sigma = _sym(form.variables["covariance"].value)
        zs = [_sym(c.dual_value) for c in form.constraints["blocks"]]
        floor = form.constraints["floor"]
        h = _sym(floor.dual_value) if floor is not None else np.zeros((d, d))
        sup, lam, u = _from_blocks(zs, d)
        raw = {"blocks": zs, "floor": h}
    elif form.form == "dual":
        diag = np.asarray(form.constraints["equality_diag"].dual_value, dtype=float).ravel()
        sigma = np.diag(diag)
        off_c = form.constraints["equality_offdiag"]
        if off_c is not None:
            off = np.asarray(off_c.dual_value, dtype=float).ravel() / 2.0
            iu = np.triu_indices(d, 1)
            sigma[iu] = off
            sigma[(iu[1], iu[0])] = off
        if np.trace(sigma) < 0:  # cvxpy's sign convention for equality multipliers
            sigma = -sigma
        zs = [_sym(z.value) for z in form.variables["blocks"]]
        hv = form.variables["floor"]
        h = _sym(hv.value) if hv is not None else np.zeros((d, d))
        sup, lam, u = _from_blocks(zs, d)
        raw = {"blocks": zs, "floor": h}
    else:
        n = _sym(form.variables["precision"].value)
        chol = sla.cho_factor(n, lower=True)
        sigma = _sym(sla.cho_solve(chol, np.eye(d)))
        sup, lam, u = _from_rows(form.constraints["rows"].dual_value, n, vectors)
        cap = form.constraints["cap"]
        if cap is not None:
            k = _sym(cap.dual_value)
            h = _sym(n @ k @ n)
        else:
            h = np.zeros((d, d))
        raw = {"precision": n, "row_multipliers": form.constraints["rows"].dual_value, "floor": h}
    return sigma, sup, lam, u, h, raw


def _polish(
    vectors: NDArray[np.float64],
    weight: NDArray[np.float64],
    bound: float,
    eta: float,
    sigma: NDArray[np.float64],
    sup: NDArray[np.intp],
    lam: NDArray[np.float64],
    u: NDArray[np.float64],
    h: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    r"""Tighten the factored dual; returns (lambda, u, H), the candidate with the best bound.

    Candidates: the solver's own; a refit at the solver's Sigma (:math:`u_j = \Sigma^{-1}s_j`,
    :math:`\lambda = \arg\min_{\lambda\ge 0}\|W - H - \sum_j\lambda_ju_ju_j^\top\|_F` by NNLS);
    and the reduced-dual map applied to the solver's multipliers
    (:func:`_dual_from_mu`; for eta > 0 the eigenvectors of H become floor atoms
    :math:`\sqrt{q\eta}\,v_i` with weights :math:`h_i\eta/q`). Every candidate is a valid factored
    dual, so the choice only tightens the certificate.
    """
    from scipy.optimize import nnls

    if sup.size == 0:
        return lam, u, h
    candidates = [(lam, u, h)]
    try:
        chol = sla.cho_factor(sigma, lower=True)
    except (np.linalg.LinAlgError, ValueError):
        chol = None
    if chol is not None:
        u2 = sla.cho_solve(chol, vectors[sup].T).T
        d = weight.shape[0]
        iu = np.triu_indices(d)
        scale = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))
        design = np.stack([np.outer(v, v)[iu] * scale for v in u2], axis=1)
        target = (weight - h)[iu] * scale
        lam2, _ = nnls(design, target, maxiter=50 * max(1, sup.size))
        candidates.append((np.asarray(lam2, dtype=float), np.asarray(u2, dtype=float), h))
    atoms, weights = vectors[sup], lam
    n_floor = 0
    if eta > 0:
        ev, vec = sla.eigh(0.5 * (h + h.T))
        keep = ev > EIG_RTOL * max(float(np.max(np.abs(ev))), 1e-300)
        n_floor = int(np.sum(keep))
        atoms = np.vstack([atoms, np.sqrt(bound * eta) * vec[:, keep].T])
        weights = np.concatenate([lam, ev[keep] * eta / bound])
    mapped = _dual_from_mu(atoms, weight, bound, weights)
    if mapped is not None:
        lam3, u3 = mapped
        k = sup.size
        fl, fu = lam3[k:], u3[k:]
        h3 = (fu.T * fl) @ fu if n_floor else np.zeros_like(h)
        candidates.append((lam3[:k], u3[:k], h3))
    w_min = float(sla.eigvalsh(weight)[0])
    scores = [
        dual_lower_bound(vectors[sup], weight, bound, eta, cl, cu, ch, w_min)[0]
        if np.all(np.isfinite(cu)) and np.all(np.isfinite(cl)) and np.all(np.isfinite(ch))
        else -np.inf
        for cl, cu, ch in candidates
    ]
    return candidates[int(np.argmax(scores))]


def _dual_from_mu(
    support_vectors: NDArray[np.float64],
    weight: NDArray[np.float64],
    bound: float,
    weights: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    r"""the theory page map from reduced-dual weights :math:`\mu` (any solver's multipliers,
    normalised) to a factored dual with :math:`E = 0` up to rounding (eta = 0):
    :math:`\lambda = (T/q)^2\mu`, :math:`u_j = \Sigma_*^{-1}s_j`,
    :math:`\Sigma_*^{-1} = (q/T)W^{1/2}R^{-1}W^{1/2}`, :math:`R = (W^{1/2}MW^{1/2})^{1/2}`.
    Its bound T^2/q is accurate to second order in the error of mu. None if M is singular."""
    total = float(np.sum(weights))
    if total <= 0:
        return None
    mu = weights / total
    m = (support_vectors.T * mu) @ support_vectors
    ev_w, vec_w = sla.eigh(weight)
    wh = (vec_w * np.sqrt(ev_w)) @ vec_w.T
    a_ev, a_vec = sla.eigh(wh @ m @ wh)
    if a_ev[0] <= 1e-12 * a_ev[-1]:
        return None
    roots = np.sqrt(a_ev)
    trace_r = float(np.sum(roots))
    r_inv = (a_vec / roots) @ a_vec.T
    n_star = (bound / trace_r) * (wh @ r_inv @ wh)
    u = support_vectors @ n_star
    lam = (trace_r / bound) ** 2 * mu
    return np.asarray(lam, dtype=float), np.asarray(u, dtype=float)


def _lift(
    red: SpanReduction,
    weight: NDArray[np.float64],
    weight_r: NDArray[np.float64],
    sigma_r: NDArray[np.float64],
    u_r: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Lift (Sigma_r, u_r) from the span to R^d (:meth:`SpanReduction.lift_dual`), the
    covariance with a ridge of relative cost ``RIDGE_RELATIVE`` on the complement."""
    u, g = red.lift_dual(weight, u_r, EIG_RTOL)
    tau = red.ridge(weight, float(np.sum(weight_r * sigma_r)), RIDGE_RELATIVE)
    if tau <= 0:
        tau = RIDGE_RELATIVE * max(float(np.max(np.abs(sigma_r))), 1e-300)
    return red.lift_covariance(sigma_r, tau), u, g


def solve_cvx(
    problem: CovarianceProgram,
    *,
    solver: str = "clarabel",
    form: str = "primal",
    tol: float = 1e-8,
    polish: bool = True,
    verbose: bool = False,
    time_limit: float | None = None,
) -> Solution:
    r"""Solve the covariance program with a cvxpy backend.

    Parameters
    ----------
    problem : CovarianceProgram
        The data (vectors are materialised: keep ``J`` moderate, a few thousand at most).
    solver : str, default "clarabel"
        A name from :func:`available_backends`.
    form : {"primal", "dual", "inverse", "both"}
        Which cvxpy form to solve; ``"both"`` solves the primal and the dual and returns the
        primal's Sigma with the dual form's certificate (``stats.extra`` holds both values).
    tol : float
        Requested relative accuracy, spelled in the backend's option names by
        :func:`solvers.api.native_options` (Clarabel: gap and feasibility
        ``min(tol, 1e-8) / 100``; SCS: ``min(tol, 1e-7) / 100``; other backends: defaults).
    polish : bool, default True
        Also refit the dual at the solver's Sigma (:func:`_polish`) and keep the better one.
    time_limit : float, optional
        Wall-clock limit in seconds passed to the backend (Clarabel, SCS); cvxpy's compilation
        is not included.

    The program is solved normalised (:mod:`solvers.scaling`): vectors of unit RMS norm,
    bound 1, W of unit largest eigenvalue; ``raw_duals`` are in those units.

    Returns
    -------
    Solution
        ``covariance`` (the solver's Sigma, lifted and ridged for rank-deficient sets), ``value``
        = tr(W Sigma), ``dual`` (a :class:`FactoredDual`), ``status``, ``stats``, ``raw_duals``.

    Raises
    ------
    SolverError
        If the backend crashes or returns no usable values (the message names a remedy).
    """
    if not isinstance(problem, CovarianceProgram):
        raise InvalidParameterError("problem", problem, "must be a CovarianceProgram")
    if form not in (*FORMS, "both"):
        raise InvalidParameterError("form", form, f"must be one of {(*FORMS, 'both')}")
    backend = get_backend(solver)
    if form == "both":
        p = solve_cvx(problem, solver=solver, form="primal", tol=tol, polish=polish,
                      verbose=verbose, time_limit=time_limit)
        dsol = solve_cvx(problem, solver=solver, form="dual", tol=tol, polish=polish,
                         verbose=verbose, time_limit=time_limit)
        stats = SolverStats(
            solver=p.stats.solver,
            version=p.stats.version,
            setup_time=p.stats.setup_time + dsol.stats.setup_time,
            solve_time=p.stats.solve_time + dsol.stats.solve_time,
            iterations=p.stats.iterations + dsol.stats.iterations,
            extra={"primal_value": p.value, "dual_value": dsol.stats.extra.get("objective"),
                   "primal": p.stats, "dual": dsol.stats},
        )
        worst = p.status if p.status != "optimal" else dsol.status
        return Solution(p.covariance, p.value, dsol.dual, worst, stats,
                        {"primal": p.raw_duals, "dual": dsol.raw_duals})

    vectors_in = problem.dense_vectors()
    weight_in = np.asarray(problem.weight, dtype=float)
    d = problem.dim
    # solve the normalised program (unit RMS norm, q = 1, |W| = 1) and scale back
    norm = Normalisation.of(float(np.mean(np.einsum("ij,ij->i", vectors_in, vectors_in))),
                            float(problem.bound), weight_in, float(problem.noise_floor))
    vectors = vectors_in / norm.data
    weight = _sym(weight_in / norm.weight)
    q, eta = 1.0, float(problem.noise_floor) / norm.covariance_scale
    red = SpanReduction.of_vectors(vectors)
    if red.rank == 0:
        raise InvalidParameterError("vectors", "all zero", "must contain a nonzero vector")
    reduce = eta == 0 and red.deficient
    vec_s, w_s = red.apply(vectors, weight) if reduce else (vectors, weight)
    built = build_form(form, vec_s, w_s, q, eta)
    status, stats = backend.run(built, tol, verbose, time_limit)
    objective = built.problem.value
    try:
        sigma, sup, lam, u, h, raw = _extract(built, vec_s, vec_s.shape[1])
    except (TypeError, ValueError, IndexError, np.linalg.LinAlgError) as exc:
        raise SolverError(
            f"{backend.name} returned no usable solution for the {form} form (status "
            f"{built.problem.status!r}); remedy: try another backend or form, or loosen tol"
        ) from exc
    if not (np.all(np.isfinite(sigma)) and np.all(np.isfinite(u)) and np.all(np.isfinite(h))):
        raise SolverError(
            f"{backend.name} returned non-finite values for the {form} form; remedy: try "
            f"another backend or form"
        )
    if polish:
        lam, u, h = _polish(vec_s, w_s, q, eta, sigma, sup, lam, u, h)
        keep = lam > 0
        sup, lam, u = sup[keep], lam[keep], u[keep]
    if reduce:
        sigma, u, g = _lift(red, weight, w_s, sigma, u)
    else:
        g = psd_factor(h, EIG_RTOL) if np.any(h) else np.zeros((d, 0))
    dual = norm.dual(FactoredDual(support=sup, multipliers=lam, directions=u, floor_factor=g))
    sigma = _sym(norm.covariance_scale * sigma)
    value = float(np.sum(weight_in * sigma))
    stats = SolverStats(
        solver=stats.solver, version=stats.version, setup_time=stats.setup_time,
        solve_time=stats.solve_time, iterations=stats.iterations,
        extra={**stats.extra,
               "objective": None if objective is None else float(objective) * norm.value_scale,
               "span_rank": red.rank, "reduced": reduce, "normalisation": norm},
    )
    message = "" if status == "optimal" else f"{backend.name} reported {built.problem.status!r}"
    return Solution(sigma, value, dual, status, stats, raw, message=message)
