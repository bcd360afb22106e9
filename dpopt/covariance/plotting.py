r"""Pictures of a covariance design: the noise ellipse against isotropic noise.

A Gaussian release :math:`f(D) + N(0, \Sigma)` meets a budget with Mahalanobis bound :math:`q`
exactly when every sensitivity vector lies in the ellipse

.. math::

    E(\Sigma) = \{x : x^\top \Sigma^{-1} x \le q\},

the noise's standard-deviation ellipse stretched by :math:`\sqrt q`. :func:`plot_design` draws
:math:`E(\Sigma)` for the optimal covariance, :math:`E(cI)` for the best isotropic noise (a
circle), the sensitivity vectors :math:`\pm s_j` and, highlighted, the *binding* ones that touch
the boundary of :math:`E(\Sigma)` (those with :math:`s_j^\top\Sigma^{-1}s_j \ge q(1 - 10^{-6})`).

In dimension :math:`d > 2` the picture is the projection onto the top two principal directions
:math:`u_1, u_2` of :math:`\Sigma`: because they are eigenvectors, the projected ellipse has
semi-axes :math:`\sqrt{q\lambda_1}, \sqrt{q\lambda_2}` exactly, and the projected vectors
:math:`(u_1^\top s_j, u_2^\top s_j)` lie inside it. matplotlib is imported only when a picture
is drawn (``pip install 'dpopt[figures]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from certificates.problem import ArrayVectors, VectorSource
from dpopt.errors import InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from dpopt.covariance.design import Design

__all__ = ["binding_mask", "plot_design", "principal_frame"]

#: relative slack under which a vector counts as binding (touching the ellipse)
BINDING_RTOL = 1e-6


def principal_frame(covariance: NDArray[np.float64]) -> tuple[NDArray[np.float64],
                                                               NDArray[np.float64]]:
    """The top two principal directions of a covariance and their variances.

    Parameters
    ----------
    covariance : ndarray, shape (d, d)
        A symmetric positive semidefinite matrix, d >= 1.

    Returns
    -------
    basis : ndarray, shape (d, 2) (or (1, 1) when d = 1)
        Orthonormal eigenvectors of the largest eigenvalues, largest first; in d = 2 the
        coordinate axes, so that the picture keeps the data's own coordinates.
    variances : ndarray, shape (2,) (or (1,))
        The eigenvalues along ``basis`` (in d = 2 the diagonal is not used: see ``basis``).
    """
    cov = np.asarray(covariance, dtype=np.float64)
    dim = cov.shape[0]
    if dim <= 2:
        return np.eye(dim), np.clip(np.linalg.eigvalsh(cov)[::-1], 0.0, None)
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:2]
    return vectors[:, order], np.clip(values[order], 0.0, None)


def binding_mask(vectors: NDArray[np.float64], covariance: NDArray[np.float64], bound: float,
                 rtol: float = BINDING_RTOL) -> NDArray[np.bool_]:
    """Which rows s of ``vectors`` have sᵀΣ⁻¹s ≥ bound·(1 − rtol) (pseudo-inverse if singular)."""
    cov = np.asarray(covariance, dtype=np.float64)
    inv = np.linalg.pinv(cov, hermitian=True)
    maha = np.einsum("ij,jk,ik->i", vectors, inv, vectors)
    return np.asarray(maha >= bound * (1.0 - rtol))


def _sample(source: VectorSource, covariance: NDArray[np.float64], bound: float,
            max_points: int, rng: np.random.Generator) -> tuple[NDArray[np.float64],
                                                                 NDArray[np.bool_]]:
    """At most ``max_points`` vectors of ``source`` (every binding one first), with the mask."""
    keep_binding: list[NDArray[np.float64]] = []
    keep_other: list[NDArray[np.float64]] = []
    fraction = min(1.0, max_points / max(source.count, 1))
    for _, block in source.chunks():
        mask = binding_mask(block, covariance, bound)
        keep_binding.append(block[mask][:max_points])
        rest = block[~mask]
        if fraction < 1.0 and len(rest):
            rest = rest[rng.random(len(rest)) < fraction]
        keep_other.append(rest)
    binding = np.concatenate(keep_binding)[:max_points] if keep_binding else np.empty((0, 0))
    other = np.concatenate(keep_other)[: max(max_points - len(binding), 0)]
    points = np.concatenate([binding, other]) if len(other) else binding
    mask = np.zeros(len(points), dtype=bool)
    mask[: len(binding)] = True
    return points, mask


def _ellipse(basis_cov: NDArray[np.float64], bound: float, n: int = 361) -> NDArray[np.float64]:
    """Boundary points of {x in R^2 : xᵀ C⁻¹ x = bound} for a 2x2 PSD C (a segment if singular)."""
    values, vectors = np.linalg.eigh(basis_cov)
    radii = np.sqrt(bound * np.clip(values, 0.0, None))
    t = np.linspace(0.0, 2.0 * np.pi, n)
    circle = np.stack([np.cos(t), np.sin(t)])
    return np.asarray((vectors @ (radii[:, None] * circle)).T)


def plot_design(design: Design, ax: Axes | None = None, *, max_points: int = 2000,
                show_isotropic: bool = True, seed: int = 0) -> Axes:
    """Draw a design's noise ellipse, the isotropic baseline and the sensitivity vectors.

    Parameters
    ----------
    design : Design
        A result of :func:`dpopt.covariance.design.design_covariance`.
    ax : matplotlib Axes, optional
        Where to draw; a new figure is created when omitted.
    max_points : int
        At most this many sensitivity vectors are drawn (every binding vector first, then a
        uniform sample of the others); each is drawn with its mirror image -s.
    show_isotropic : bool
        Also draw the circle of the best isotropic noise c·I.
    seed : int
        Seed of the sample drawn when there are more than ``max_points`` vectors.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "Design.plot needs matplotlib: pip install 'dpopt[figures]'") from exc
    if not isinstance(max_points, int | np.integer) or isinstance(max_points, bool):
        raise InvalidTypeError("max_points", max_points, "int")
    if max_points < 1:
        raise InvalidParameterError("max_points", max_points, "must be >= 1")

    cov = np.asarray(design.covariance, dtype=np.float64)
    program = design.program
    bound = float(program.bound)  # the bound on s^T Sigma^-1 s the vectors are held to
    vectors = program.vectors
    source = vectors if isinstance(vectors, VectorSource) else ArrayVectors(np.asarray(vectors))
    points, mask = _sample(source, cov, bound, int(max_points), np.random.default_rng(seed))

    dim = cov.shape[0]
    basis, variances = principal_frame(cov)
    if dim == 1:
        basis = np.array([[1.0, 0.0]])
        projected_cov = np.diag([float(cov[0, 0]), 0.0])
    else:
        projected_cov = basis.T @ cov @ basis
    projected = points @ basis if len(points) else np.empty((0, 2))

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 6.0), layout="constrained")
    weight = program.weight
    weight_trace = float(np.trace(weight)) if weight is not None else float(dim)
    iso_c = design.isotropic_value / weight_trace if weight_trace > 0 else 0.0
    boundary = _ellipse(projected_cov, bound)
    ax.fill(boundary[:, 0], boundary[:, 1], color="tab:blue", alpha=0.12, lw=0)
    ax.plot(boundary[:, 0], boundary[:, 1], color="tab:blue", lw=2.0,
            label=f"optimal Σ (tr WΣ = {design.value:.4g})")
    if show_isotropic and iso_c > 0:
        circle = _ellipse(np.eye(2) * iso_c, bound)
        ax.plot(circle[:, 0], circle[:, 1], color="0.45", lw=1.5, ls="--",
                label=f"isotropic cI (tr WΣ = {design.isotropic_value:.4g})")
    free = projected[~mask]
    tight = projected[mask]
    if len(free):
        ax.scatter(np.r_[free[:, 0], -free[:, 0]], np.r_[free[:, 1], -free[:, 1]], s=6,
                   color="0.3", alpha=0.5, lw=0, label="sensitivity vectors ±s")
    if len(tight):
        ax.scatter(np.r_[tight[:, 0], -tight[:, 0]], np.r_[tight[:, 1], -tight[:, 1]], s=28,
                   color="tab:red", zorder=3, label=f"binding ±s ({len(tight)} vectors)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.axhline(0.0, color="0.85", lw=0.8, zorder=0)
    ax.axvline(0.0, color="0.85", lw=0.8, zorder=0)
    if dim > 2:
        ax.set_xlabel(f"principal direction 1 (variance {variances[0]:.4g})")
        ax.set_ylabel(f"principal direction 2 (variance {variances[1]:.4g})")
    else:
        ax.set_xlabel("coordinate 1")
        ax.set_ylabel("coordinate 2" if dim == 2 else "")
    saving = 100.0 * (1.0 - 1.0 / design.improvement)
    ax.set_title(f"noise ellipse xᵀΣ⁻¹x = q (q = {bound:.4g}):\n"
                 f"{saving:.1f} % less error than the best isotropic noise", fontsize="medium")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize="small",
              frameon=False)
    return ax
