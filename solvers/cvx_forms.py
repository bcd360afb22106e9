r"""cvxpy builders of the optimal-covariance program and its duals.

Three equivalent forms of

.. math::

    v_\eta(q) = \min_{\Sigma} \operatorname{tr}(W\Sigma) \quad\text{s.t.}\quad
    F_j(\Sigma) = \begin{bmatrix}\Sigma & s_j\\ s_j^\top & q\end{bmatrix} \succeq 0\ (j=1..J),
    \qquad \Sigma - \eta I \succeq 0,

are built here from plain arrays (so that ``dpopt.covariance.program`` can delegate without
``solvers``
knowing about privacy):

``primal``
    the natural form of the covariance program (theory page): ``J`` blocks of size
    ``d + 1``.
``dual``
    its conic dual: :math:`\max\ \eta\operatorname{tr}H - 2\sum_j b_j^\top
    s_j - q\sum_j g_j` s.t. :math:`\sum_j A_j + H = W`, :math:`Z_j = [[A_j, b_j],[b_j^\top, g_j]]
    \succeq 0`, :math:`H \succeq 0`.
``inverse``
    the :math:`N = \Sigma^{-1}` form: :math:`\min \operatorname{tr}X` s.t.
    :math:`s_j^\top N s_j \le q`, :math:`[[X, W^{1/2}],[W^{1/2}, N]] \succeq 0` and
    :math:`N \preceq I/\eta` when :math:`\eta > 0`. It has ``J`` linear rows and one
    ``2d x 2d`` LMI, which generic conic solvers handle far better at moderate ``d``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

if TYPE_CHECKING:  # pragma: no cover - cvxpy is imported when a form is built
    import cvxpy as cp

__all__ = ["FORMS", "CvxForm", "build_dual", "build_form", "build_inverse", "build_primal"]

#: Names of the available forms.
FORMS: tuple[str, ...] = ("primal", "dual", "inverse")

#: Names that moved to :mod:`solvers.reductions` (the one owner of the span reduction and its
#: lift); still importable from here, with a DeprecationWarning, until dpopt 0.6.
_MOVED = ("SPAN_RTOL", "SpanReduction")


@dataclass(frozen=True)
class CvxForm:
    """A cvxpy problem together with handles to its variables and constraints.

    Attributes
    ----------
    form : str
        One of :data:`FORMS`.
    problem : cvxpy.Problem
        The problem, ready for ``problem.solve(solver=...)``.
    variables : dict
        ``"covariance"`` (primal Sigma), ``"blocks"`` (dual Z_j), ``"floor"`` (dual H),
        ``"precision"`` (N) and ``"epigraph"`` (X), as they exist in the form.
    constraints : dict
        ``"blocks"`` (list of the J PSD constraints F_j), ``"floor"``, ``"equality_diag"``,
        ``"equality_offdiag"``, ``"rows"``, ``"lmi"``, ``"cap"``, as they exist in the form.
    """

    form: str
    problem: cp.Problem
    variables: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, Any] = field(default_factory=dict)


def _sqrtm_psd(w: NDArray[np.float64]) -> NDArray[np.float64]:
    ev, vec = sla.eigh(w)
    root: NDArray[np.float64] = (vec * np.sqrt(np.clip(ev, 0.0, None))) @ vec.T
    return 0.5 * (root + root.T)


def build_primal(
    vectors: NDArray[np.float64], weight: NDArray[np.float64], bound: float, noise_floor: float
) -> CvxForm:
    r"""The primal (P): ``J`` PSD blocks :math:`F_j(\Sigma) \succeq 0` and :math:`\Sigma \succeq
    \eta I` (the floor constraint is added only when :math:`\eta > 0`)."""
    import cvxpy as cp

    _, d = vectors.shape
    sigma = cp.Variable((d, d), symmetric=True, name="Sigma")
    qq = np.array([[float(bound)]])
    blocks = [
        cp.bmat([[sigma, s.reshape(-1, 1)], [s.reshape(1, -1), qq]]) >> 0 for s in vectors
    ]
    cons: list[Any] = list(blocks)
    floor = None
    if noise_floor > 0:
        floor = sigma - float(noise_floor) * np.eye(d) >> 0
        cons.append(floor)
    problem = cp.Problem(cp.Minimize(cp.trace(weight @ sigma)), cons)
    return CvxForm(
        "primal", problem, {"covariance": sigma}, {"blocks": blocks, "floor": floor}
    )


def build_dual(
    vectors: NDArray[np.float64], weight: NDArray[np.float64], bound: float, noise_floor: float
) -> CvxForm:
    r"""The conic dual (D) of the covariance program with variables :math:`Z_j` and :math:`H`.

    The equality :math:`\sum_j A_j + H = W` is imposed on the diagonal and the strict upper
    triangle separately, so the primal Sigma is read off their multipliers.
    """
    import cvxpy as cp

    j_count, d = vectors.shape
    zs = [cp.Variable((d + 1, d + 1), symmetric=True, name=f"Z{j}") for j in range(j_count)]
    total = zs[0][:d, :d]
    for z in zs[1:]:
        total = total + z[:d, :d]
    cons: list[Any] = [z >> 0 for z in zs]
    h = None
    objective = 0.0
    if noise_floor > 0:
        h = cp.Variable((d, d), symmetric=True, name="H")
        cons.append(h >> 0)
        total = total + h
        objective = float(noise_floor) * cp.trace(h)
    objective = objective - 2 * sum(zs[j][:d, d] @ vectors[j] for j in range(j_count))
    objective = objective - float(bound) * sum(z[d, d] for z in zs)
    eq_diag = cp.diag(total) == np.diag(weight)
    cons.append(eq_diag)
    eq_off = None
    if d > 1:
        iu = np.triu_indices(d, 1)
        eq_off = total[iu] == weight[iu]
        cons.append(eq_off)
    problem = cp.Problem(cp.Maximize(objective), cons)
    return CvxForm(
        "dual",
        problem,
        {"blocks": zs, "floor": h},
        {"equality_diag": eq_diag, "equality_offdiag": eq_off},
    )


def build_inverse(
    vectors: NDArray[np.float64], weight: NDArray[np.float64], bound: float, noise_floor: float
) -> CvxForm:
    r"""The :math:`N = \Sigma^{-1}` form

    :math:`\min \operatorname{tr} X` s.t. :math:`\operatorname{diag}(S N S^\top) \le q`,
    :math:`[[X, W^{1/2}],[W^{1/2}, N]] \succeq 0` and, for :math:`\eta > 0`,
    :math:`I/\eta - N \succeq 0`. By the Schur complement :math:`X \succeq W^{1/2}N^{-1}W^{1/2}`,
    so the optimum is :math:`\operatorname{tr}(W N^{-1})`. Its optimum is not attained on
    rank-deficient data with :math:`\eta = 0` (solve in the span instead).
    """
    import cvxpy as cp

    _, d = vectors.shape
    n = cp.Variable((d, d), symmetric=True, name="N")
    x = cp.Variable((d, d), symmetric=True, name="X")
    root = _sqrtm_psd(weight)
    rows = cp.sum(cp.multiply(vectors @ n, vectors), axis=1) <= float(bound)
    lmi = cp.bmat([[x, root], [root, n]]) >> 0
    cons: list[Any] = [rows, lmi]
    cap = None
    if noise_floor > 0:
        cap = np.eye(d) / float(noise_floor) - n >> 0
        cons.append(cap)
    problem = cp.Problem(cp.Minimize(cp.trace(x)), cons)
    return CvxForm(
        "inverse",
        problem,
        {"precision": n, "epigraph": x},
        {"rows": rows, "lmi": lmi, "cap": cap},
    )


def build_form(
    form: str,
    vectors: NDArray[np.float64],
    weight: NDArray[np.float64],
    bound: float,
    noise_floor: float,
) -> CvxForm:
    """Dispatch to :func:`build_primal`, :func:`build_dual` or :func:`build_inverse`."""
    builders = {"primal": build_primal, "dual": build_dual, "inverse": build_inverse}
    return builders[form](vectors, weight, bound, noise_floor)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from certificates._deprecated import moved

        return moved(f"{__name__}.{name}", "solvers.reductions", name)
    if name == "span_reduction":
        from certificates._deprecated import warn_moved
        from solvers.reductions import SpanReduction

        warn_moved(f"{__name__}.span_reduction", "solvers.reductions.SpanReduction.of_vectors")
        return SpanReduction.of_vectors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
