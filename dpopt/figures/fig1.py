r"""The cube figure (``fig1``): how loose the naive sensitivity bound is for the cube.

For :math:`K = [0, 1]^d` and a uniform query (the uniform-query corollary of the theory page) the
exact Mahalanobis sup of a covariance :math:`\Sigma` is
:math:`\rho^* = \max_{v \in \{\pm 1\}^d,\, v_1 = 1} v^\top P v` with :math:`P = \Sigma^{-1}` (a
convex function on the difference body :math:`[-1, 1]^d` peaks at a vertex), while the naive
bound is :math:`\operatorname{diam}(K)^2 \lambda_{\max}(P) = d\,\lambda_{\max}(P)`. The ratio
naive / exact lies in :math:`[1, d]`.

The figure being reproduced does not say how its covariances were drawn. The default generator,
``"wishart"`` (:math:`\Sigma = AA^\top`, :math:`A` a :math:`d \times (d+1)` standard Gaussian
matrix) at :math:`d = 10`, gives a mean ratio of about 1.45 (the value the figure is known for);
the figure states the generator, d, the number of draws and the seed. The maximum is a sample
maximum of a heavy tail and depends on the number of draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpopt.errors import InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover - Dask is optional
    from distributed import Client

__all__ = [
    "GENERATORS",
    "Fig1Summary",
    "draw_covariances",
    "fig1_figure",
    "fig1_ratios",
    "fig1_summary",
    "plot_fig1",
]

Generator = Callable[[int, int, np.random.Generator], NDArray[np.float64]]


def _wishart(extra: int) -> Generator:
    def draw(d: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        a = rng.standard_normal((n, d, d + extra))
        return np.asarray(a @ np.swapaxes(a, 1, 2), dtype=np.float64)

    return draw


def _wishart_mult(mult: int) -> Generator:
    def draw(d: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        a = rng.standard_normal((n, d, mult * d))
        return np.asarray(a @ np.swapaxes(a, 1, 2), dtype=np.float64)

    return draw


def _inverse_wishart(d: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    p = _wishart(1)(d, n, rng)
    return np.asarray(np.linalg.inv(p), dtype=np.float64)


def _haar(d: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    q, r = np.linalg.qr(rng.standard_normal((n, d, d)))
    q = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]  # Haar measure
    lam = rng.uniform(0.0, 1.0, size=(n, d))
    return np.asarray((q * lam[:, None, :]) @ np.swapaxes(q, 1, 2), dtype=np.float64)


def _ridge(d: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    a = rng.standard_normal((n, d, d))
    return np.asarray(a @ np.swapaxes(a, 1, 2) + 0.1 * np.eye(d), dtype=np.float64)


def _uniform_factor(d: int, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    a = rng.uniform(0.0, 1.0, size=(n, d, d))
    return np.asarray(a @ np.swapaxes(a, 1, 2), dtype=np.float64)


#: Covariance generators: name -> (description shown on the figure, sampler(d, n, rng)).
GENERATORS: dict[str, tuple[str, Generator]] = {
    "wishart": ("Wishart: Σ = AAᵀ, A a d×(d+1) N(0,1) matrix", _wishart(1)),
    "wishart_d": ("Wishart d dof: Σ = AAᵀ, A a d×d N(0,1) matrix", _wishart(0)),
    "wishart_2d": ("Wishart 2d dof: Σ = AAᵀ, A a d×2d N(0,1) matrix", _wishart_mult(2)),
    "inverse_wishart": ("inverse Wishart: Σ⁻¹ = AAᵀ, A a d×(d+1) N(0,1) matrix", _inverse_wishart),
    "haar_uniform": ("Σ = Q diag(U(0,1)) Qᵀ, Q Haar", _haar),
    "ridge": ("Σ = AAᵀ + 0.1 I, A a d×d N(0,1) matrix", _ridge),
    "uniform_factor": ("Σ = AAᵀ, A a d×d U(0,1) matrix", _uniform_factor),
}

#: Largest d enumerated (2^(d-1) sign patterns per draw).
MAX_DIM = 16


def _rng(rng: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int | np.integer) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InvalidTypeError("rng", rng, "a numpy Generator, an integer seed or None")


def _check(d: int, n_draws: int, generator: str | Generator) -> tuple[int, int, Generator]:
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or not 2 <= int(d) <= MAX_DIM:
        raise InvalidParameterError("d", d, f"must be an integer in [2, {MAX_DIM}]")
    if isinstance(n_draws, bool) or not isinstance(n_draws, int | np.integer) or n_draws < 1:
        raise InvalidParameterError("n_draws", n_draws, "must be a positive integer")
    if callable(generator):
        return int(d), int(n_draws), generator
    if generator not in GENERATORS:
        raise InvalidParameterError("generator", generator, f"must be one of {sorted(GENERATORS)}")
    return int(d), int(n_draws), GENERATORS[generator][1]


def draw_covariances(
    d: int = 10, n_draws: int = 2000, generator: str = "wishart",
    rng: int | np.random.Generator | None = 0,
) -> NDArray[np.float64]:
    """Draw ``n_draws`` covariance matrices, shape (n_draws, d, d), from a named generator."""
    dd, n, gen = _check(d, n_draws, generator)
    return gen(dd, n, _rng(rng))


#: Draws per batch of the enumeration (one task per batch when the draws run on Dask).
BATCH = 256


def _ratios_of(cov: NDArray[np.float64], batch: int = BATCH) -> NDArray[np.float64]:
    n, d, _ = cov.shape
    j = np.arange(1 << (d - 1))
    signs = np.ones((j.size, d))
    signs[:, 1:] = 1.0 - 2.0 * ((j[:, None] >> np.arange(d - 1)[None, :]) & 1)
    out = np.empty(n)
    eye = np.eye(d)
    for start in range(0, n, batch):
        c = cov[start : start + batch]
        chol = np.linalg.cholesky(c)
        linv = np.linalg.solve(chol, np.broadcast_to(eye, c.shape))
        prec = np.swapaxes(linv, 1, 2) @ linv  # P = L^-T L^-1
        prec = 0.5 * (prec + np.swapaxes(prec, 1, 2))
        lam_max = np.linalg.eigvalsh(prec)[:, -1]
        z = linv @ signs.T  # |L^-1 v|^2 = v^T P v
        exact = np.max(np.einsum("nik,nik->nk", z, z), axis=1)
        out[start : start + batch] = d * lam_max / exact
    return out


def fig1_ratios(
    d: int = 10,
    n_draws: int = 2000,
    generator: str | Generator = "wishart",
    rng: int | np.random.Generator | None = 0,
    *,
    client: Client | None = None,
    progress: bool | None = False,
) -> NDArray[np.float64]:
    r"""Ratios naive / exact sensitivity for :math:`K = [0,1]^d` over random covariances.

    .. math::

        \text{ratio}(\Sigma) = \frac{d\,\lambda_{\max}(\Sigma^{-1})}
        {\max_{v \in \{\pm1\}^d} v^\top \Sigma^{-1} v} \in [1, d]

    (exact enumeration of the :math:`2^{d-1}` sign patterns with
    :math:`v_1 = 1`, Cholesky solves).

    Parameters
    ----------
    d : int
        Dimension, 2 <= d <= 16.
    n_draws : int
        Number of covariance draws.
    generator : str or callable
        A key of :data:`GENERATORS` or ``sampler(d, n, rng) -> (n, d, d)``.
    rng : numpy Generator, int seed or None
    client : distributed.Client, optional
        Enumerate the draws as Dask tasks (batches of :data:`BATCH` covariances, drawn here from
        ``rng`` so the result is the same as in process). Needs Dask (from a clone:
        ``pip install -e '.[distributed]'``).
    progress : bool or None
        Progress bar over the batches (drawn only when stderr is a terminal; ``False``: none).

    Returns
    -------
    ndarray, shape (n_draws,)
    """
    dd, n, gen = _check(d, n_draws, generator)
    cov = np.asarray(gen(dd, n, _rng(rng)), dtype=np.float64)
    if cov.shape != (n, dd, dd) or not np.all(np.isfinite(cov)):
        raise InvalidParameterError(
            "generator", generator, f"must return finite arrays of shape {(n, dd, dd)}"
        )
    from dpopt.parallel import map_ordered

    batches = [cov[i : i + BATCH] for i in range(0, n, BATCH)]
    try:
        parts = map_ordered(_ratios_of, batches, client=client, desc="fig1 draws",
                            progress=progress)
        return np.concatenate(parts)
    except np.linalg.LinAlgError:
        raise InvalidParameterError(
            "generator", generator, "drew a covariance that is not positive definite"
        ) from None


@dataclass(frozen=True)
class Fig1Summary:
    """Mean, median, 99th percentile and maximum of the cube figure's ratios."""

    mean: float
    median: float
    p99: float
    max: float
    n_draws: int

    def __str__(self) -> str:
        return (
            f"mean {self.mean:.3f}, median {self.median:.3f}, p99 {self.p99:.3f}, "
            f"max {self.max:.3f} ({self.n_draws} draws)"
        )


def fig1_summary(ratios: ArrayLike) -> Fig1Summary:
    """Summary statistics of :func:`fig1_ratios` output."""
    r = np.asarray(ratios, dtype=np.float64).ravel()
    if r.size == 0 or not np.all(np.isfinite(r)):
        raise InvalidParameterError("ratios", ratios, "must be a non-empty finite array")
    return Fig1Summary(
        mean=float(np.mean(r)),
        median=float(np.median(r)),
        p99=float(np.quantile(r, 0.99)),
        max=float(np.max(r)),
        n_draws=int(r.size),
    )


def plot_fig1(
    ratios: ArrayLike,
    path: str | Path,
    *,
    d: int,
    generator: str,
    seed: int | None = None,
) -> Path:
    """Histogram of the ratios with the summary and the generator stated; saves a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = np.asarray(ratios, dtype=np.float64)
    summ = fig1_summary(r)
    desc = GENERATORS[generator][0] if generator in GENERATORS else str(generator)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.hist(r, bins=60, color="#4477aa", edgecolor="white", linewidth=0.4)
    for val, style, label in (
        (summ.mean, "-", f"mean {summ.mean:.2f}"),
        (summ.median, "--", f"median {summ.median:.2f}"),
        (summ.p99, ":", f"p99 {summ.p99:.2f}"),
    ):
        ax.axvline(val, color="k", linestyle=style, linewidth=1.0, label=label)
    ax.set_xlabel(r"naive / exact sensitivity  $d\,\lambda_{\max}(\Sigma^{-1})\,/\,\rho^*(\Sigma)$")
    ax.set_ylabel("count")
    ax.set_title(
        f"$K = [0,1]^{{{d}}}$, uniform query: max {summ.max:.2f}", fontsize=10
    )
    ax.legend(frameon=False, fontsize=8)
    fig.text(
        0.01,
        0.01,
        f"generator: {desc}; {summ.n_draws} draws, seed {seed}",
        fontsize=7,
        color="0.3",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def fig1_figure(
    out_dir: str | Path = "results",
    *,
    d: int = 10,
    n_draws: int = 2000,
    generator: str = "wishart",
    seed: int = 0,
    verbose: bool = True,
    client: Client | None = None,
    progress: bool | None = None,
) -> list[Path]:
    """Compute the ratios, write ``fig1.csv`` and ``fig1.png`` under ``out_dir``, print stats.

    ``client`` (a ``distributed.Client``) runs the draws as Dask tasks (same ratios);
    ``progress`` (default: ``verbose``) draws a bar over the batches, on a terminal only.
    Returns the written paths.
    """
    ratios = fig1_ratios(d, n_draws, generator, seed, client=client,
                         progress=verbose if progress is None else progress)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "fig1.csv"
    with csv.open("w", encoding="utf-8") as fh:
        fh.write(f"# cube figure (fig1), naive / exact sensitivity ratio: K=[0,1]^{d}, "
                 f"generator={generator}, seed={seed}\n")
        fh.write("draw,ratio\n")
        for i, v in enumerate(ratios):
            fh.write(f"{i},{v:.12g}\n")
    png = plot_fig1(ratios, out / "fig1.png", d=d, generator=generator, seed=seed)
    if verbose:
        print(f"fig1 (d={d}, generator={generator}, seed={seed}): {fig1_summary(ratios)}")
        print(f"wrote {png} and {csv}")
    return [png, csv]
