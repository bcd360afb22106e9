r"""Optimal noise for a whole run: T releases, T sensitivity sets, one composed budget.

A run releases :math:`f_t(D) + N(0, \Sigma_t)` for :math:`t = 1..T` (e.g. the ideal denoiser
queried at T steps of a diffusion schedule, each with its own query :math:`g_t` and noise level
:math:`\sigma_t`). If release t has Mahalanobis bound :math:`q_t` on its sensitivity set, then for
every neighbouring pair the joint release is one Gaussian mechanism whose squared Mahalanobis
shift is at most :math:`\sum_t q_t`, so the run is exactly :math:`\sqrt{\sum_t q_t}`-GDP (Dong,
Roth & Su, "Gaussian Differential Privacy", Cor. 3.3). Every budget that is a function of the
Gaussian's Mahalanobis bound alone (``ApproxDP``, ``GDP``, ``ZCDP``, ``RDP`` and ``AllOf`` of them)
therefore holds for the run iff :math:`\sum_t q_t \le Q` with ``Q = budget.mahalanobis_bound()``.

The best run minimises :math:`\sum_t v_t(q_t)` subject to :math:`\sum_t q_t = Q`, where
:math:`v_t(q)` is the optimal value of the covariance program of step t (the optimal Gaussian
covariance for the ideal denoiser, Theorem 3) at bound q:

* no noise floor (η = 0): :math:`v_t(q) = c_t/q` with :math:`c_t = v_t(1)` (scaling
  :math:`\Sigma \to \Sigma/q`), so by Cauchy–Schwarz the optimum is
  :math:`q_t = Q\sqrt{c_t}/\sum_s\sqrt{c_s}` and the optimal total is
  :math:`(\sum_t\sqrt{c_t})^2/Q`; with the certified interval :math:`c_t \in [\ell_t, u_t]` the
  optimal total lies in :math:`[(\sum_t\sqrt{\ell_t})^2/Q,\ \sum_t v_t(q_t)]`;
* a noise floor η > 0: each :math:`v_t` is convex and decreasing in q (the constraints are linear
  matrix inequalities jointly in :math:`(\Sigma, q)`). It is evaluated by certified designs on a
  geometric grid around the η = 0 split; the split minimises the piecewise-linear interpolation of
  the certified upper values (an achievable value: mixing two feasible designs is feasible by
  joint convexity) by the greedy rule for separable convex resource allocation, and each step is
  then re-designed at its share. The certified lower bound is
  :math:`\max\{(\sum_t\sqrt{\ell_t})^2/Q,\ \sum_t \eta\operatorname{tr}W_t\}` (the floor only
  adds constraints), valid but looser than for η = 0.

Returned designs are :func:`dpopt.covariance.design.design_covariance` results; their bounds sum
to at most Q in exact rational arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from certificates.rounding import sum_up
from certificates.validate import as_scalar
from dpopt.accounting.budgets import GDP, MIDP, RDP, ZCDP, AllOf, ApproxDP, Budget, PrivacyReport
from dpopt.covariance.design import Design, design_covariance
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import RelationLike

if TYPE_CHECKING:  # pragma: no cover
    from certificates.problem import VectorSource
    from dpopt.covariance.domains import Domain
    from dpopt.covariance.sensitivity import PrunedSet, TwoRecordVectors
    from dpopt.parallel import DaskOption

__all__ = ["DiffusionRun", "RunDesign", "design_run", "diffusion_run", "split_for_scales"]


@dataclass(frozen=True)
class RunDesign:
    """T certified designs and the budget split of a run.

    Attributes
    ----------
    designs : tuple of Design
        One certified design per release (its ``bound`` is the share :math:`q_t`).
    bounds : tuple of float
        The split :math:`q_t` (their exact sum is at most ``total_bound``).
    total_bound : float
        Q, the composed budget's Mahalanobis bound.
    value : float
        :math:`\\sum_t \\operatorname{tr}(W_t\\Sigma_t)` of the returned designs (achieved).
    lower : float
        Certified lower bound on the optimal total over every split and every covariance.
    equal_split_value : float or None
        Total of certified designs with the equal split Q/T (for comparison).
    isotropic_value : float or None
        Total of isotropic noise :math:`c_tI` with the equal split (for comparison).
    budget : Budget
        The run's budget.
    equal_split_designs : tuple of Design or None
        The certified designs of the equal split (when compared).
    """

    designs: tuple[Design, ...]
    bounds: tuple[float, ...]
    total_bound: float
    value: float
    lower: float
    equal_split_value: float | None
    isotropic_value: float | None
    budget: Budget
    equal_split_designs: tuple[Design, ...] | None = None

    @property
    def gap(self) -> float:
        """(value - lower) / value: how far from the optimal run the returned one can be."""
        return (self.value - self.lower) / self.value if self.value > 0 else 0.0

    @property
    def gain_over_equal_split(self) -> float | None:
        """equal_split_value / value (> 1: the optimal split helps)."""
        return None if self.equal_split_value is None else self.equal_split_value / self.value

    @property
    def gain_over_isotropic(self) -> float | None:
        """isotropic_value / value."""
        return None if self.isotropic_value is None else self.isotropic_value / self.value

    def privacy(self) -> PrivacyReport:
        """Every guarantee of the whole run (one Gaussian with bound Σ q_t, rounded up)."""
        return PrivacyReport(sum_up(self.bounds))

    def __str__(self) -> str:
        parts = [
            f"Run of {len(self.designs)} releases under {self.budget.describe()} "
            f"(total Mahalanobis bound Q = {self.total_bound:.6g}):",
            f"  total error {self.value:.6g}, optimal run in [{self.lower:.6g}, {self.value:.6g}]",
        ]
        if self.equal_split_value is not None:
            parts.append(f"  equal split {self.equal_split_value:.6g} "
                         f"(x{self.gain_over_equal_split:.4g})")
        if self.isotropic_value is not None:
            parts.append(f"  isotropic noise, equal split {self.isotropic_value:.6g} "
                         f"(x{self.gain_over_isotropic:.4g})")
        parts.append("  split q_t = " + ", ".join(f"{q:.4g}" for q in self.bounds))
        return "\n".join(parts)


def _check_budget(budget: object) -> Budget:
    if not isinstance(budget, Budget):
        raise InvalidTypeError("budget", budget, "a Budget (ApproxDP, GDP, ZCDP, RDP or AllOf)")

    def ok(b: Budget) -> bool:
        if isinstance(b, AllOf):
            return all(ok(x) for x in b.budgets)
        return isinstance(b, ApproxDP | GDP | ZCDP | RDP) and not isinstance(b, MIDP)

    if not ok(budget):
        raise InvalidParameterError(
            "budget", budget.describe(),
            "must be ApproxDP, GDP, ZCDP, RDP or an AllOf of them: the run's guarantee is that "
            "of one Gaussian with bound Σ q_t (mutual information and schedules do not compose "
            "this way)",
        )
    return budget


def _fit(shares: Sequence[float], total: float) -> list[float]:
    """Scale the shares down until their exact rational sum is <= total."""
    out = [float(s) for s in shares]
    limit = Fraction(total)
    for _ in range(200):
        if sum((Fraction(s) for s in out), Fraction(0)) <= limit:
            return out
        out = [math.nextafter(s * (1.0 - 1e-15), 0.0) for s in out]
    raise InvalidParameterError("budget", total, "could not split the bound in floating point")


def split_for_scales(scales: Sequence[float], total: float) -> list[float]:
    r"""The η = 0 optimal split :math:`q_t = Q\sqrt{c_t}/\sum_s\sqrt{c_s}` (exact sum <= Q).

    >>> [round(q, 6) for q in split_for_scales([1.0, 4.0], 3.0)]
    [1.0, 2.0]
    """
    c = np.asarray(scales, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise InvalidParameterError("scales", scales, "must be finite values > 0")
    q = as_scalar("total", total, low=0.0)
    r = np.sqrt(c)
    return _fit(list(q * r / r.sum()), q)


def _greedy(grids: list[np.ndarray], values: list[np.ndarray], total: float) -> list[float]:
    """Minimise Σ U_t(q_t), Σ q_t = total, U_t the piecewise-linear interpolation of (grid,
    values): start at every grid's left end, then spend the rest on the steepest segments."""
    q = [float(g[0]) for g in grids]
    rest = total - sum(q)
    segs = []
    for t, (g, v) in enumerate(zip(grids, values, strict=True)):
        for k in range(len(g) - 1):
            segs.append(((v[k + 1] - v[k]) / (g[k + 1] - g[k]), t, k))
    segs.sort()
    for slope, t, k in segs:
        if rest <= 0 or slope >= 0:
            break
        if q[t] < grids[t][k] - 1e-300:  # segments of one step are taken in order
            continue
        take = min(float(grids[t][k + 1] - grids[t][k]), rest)
        q[t] += take
        rest -= take
    if rest > 0:  # every step at its grid's right end: give the rest proportionally
        q = [x * total / sum(q) for x in q]
    return q


def design_run(
    vector_sets: Sequence[ArrayLike | VectorSource | PrunedSet],
    weights: Sequence[ArrayLike | None] | None,
    budget: Budget,
    *,
    noise_floor: float = 0.0,
    solver: str = "auto",
    tol: float = 1e-6,
    compare: bool = True,
    grid_points: int = 7,
    dask: DaskOption = None,
    relation: RelationLike = "add_remove",
) -> RunDesign:
    r"""The least-total-error noise for T releases under one composed budget, certified.

    Parameters
    ----------
    vector_sets : sequence of sensitivity sets
        One per release (arrays of shape (J_t, d_t), VectorSources such as
        :class:`~dpopt.covariance.sensitivity.TwoRecordVectors`, or PrunedSets), all built for
        the same neighbouring relation.
    weights : sequence of (d_t, d_t) arrays or None
        :math:`W_t` (identity when None or when an entry is None).
    budget : Budget
        The guarantee of the whole run (``ApproxDP``, ``GDP``, ``ZCDP``, ``RDP`` or ``AllOf``).
    noise_floor : float
        η >= 0: every :math:`\Sigma_t \succeq \eta I`.
    solver, tol
        Passed to :func:`~dpopt.covariance.design.design_covariance`.
    compare : bool
        Also design the equal split and the isotropic baseline (T more solves).
    grid_points : int
        η > 0 only: grid size per step for the convex split search.
    dask : None, "local", str or distributed.Client, optional
        Run every design's passes over the vectors as Dask tasks (see
        :func:`~dpopt.covariance.design.design_covariance`); ``"local"`` or an address opens
        one cluster connection for the whole run. Same answer as in process.
    relation : {"add_remove", "replacement"}
        The neighbouring relation the budget is stated for, passed to every design (the sets
        are add/remove sets; under ``"replacement"`` each release meets a quarter of its bound
        on them, see :mod:`dpopt.relation`). A run of fixed-size batches drawn without
        replacement needs ``"replacement"``.

    Returns
    -------
    RunDesign

    Examples
    --------
    >>> import numpy as np
    >>> from dpopt.accounting.budgets import GDP
    >>> sets = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[3.0, 0.0], [0.0, 3.0]])]
    >>> run = design_run(sets, None, GDP(mu=2.0))
    >>> [round(q, 6) for q in run.bounds]     # q_t ∝ sqrt(c_t), c = (2, 18): 1 : 3
    [1.0, 3.0]
    >>> round(run.value, 6), round(run.equal_split_value, 6)
    (8.0, 10.0)
    """
    if isinstance(dask, str):  # one cluster (connection) for every design of the run
        from dpopt.parallel import dask_client

        with dask_client(dask) as client:
            return design_run(vector_sets, weights, budget, noise_floor=noise_floor,
                              solver=solver, tol=tol, compare=compare, grid_points=grid_points,
                              dask=client, relation=relation)
    if isinstance(vector_sets, str | bytes) or not isinstance(vector_sets, Sequence):
        raise InvalidTypeError("vector_sets", vector_sets, "a sequence of sensitivity sets")
    sets = list(vector_sets)
    if not sets:
        raise InvalidParameterError("vector_sets", vector_sets, "needs at least one release")
    t_count = len(sets)
    if weights is None:
        ws: list[ArrayLike | None] = [None] * t_count
    else:
        if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
            raise InvalidTypeError("weights", weights, "a sequence of matrices (or None)")
        ws = list(weights)
        if len(ws) != t_count:
            raise InvalidParameterError(
                "weights", f"{len(ws)} matrices", f"must give one per release ({t_count})"
            )
    b = _check_budget(budget)
    eta = as_scalar("noise_floor", noise_floor, low=0.0, low_open=False)
    if isinstance(grid_points, bool) or not isinstance(grid_points, int) or grid_points < 3:
        raise InvalidParameterError("grid_points", grid_points, "must be an integer >= 3")
    total = b.mahalanobis_bound()

    def design(t: int, q: float, floor: float) -> Design:
        return design_covariance(sets[t], ZCDP(rho=q / 2.0), weight=ws[t], noise_floor=floor,
                                 solver=solver, tol=tol, dask=dask, relation=relation)

    # c_t = v_t(1) without floor: the η = 0 split and the certified lower bound.
    unit = [design(t, 1.0, 0.0) for t in range(t_count)]
    c_up = [d.value for d in unit]
    c_lo = [max(d.certificate.lower, 0.0) for d in unit]
    shares = split_for_scales(c_up, total)
    if eta > 0.0:
        factors = 2.0 ** np.linspace(-1.5, 1.5, grid_points)
        grids = [shares[t] * factors for t in range(t_count)]
        values = [np.array([design(t, float(q), eta).value for q in grids[t]])
                  for t in range(t_count)]
        shares = _fit(_greedy(grids, values, total), total)
    final = [design(t, shares[t], eta) for t in range(t_count)]
    bounds = tuple(d.bound for d in final)
    value = math.fsum(d.value for d in final)
    for t, d in enumerate(final):
        if eta == 0.0:  # c_t >= lower(v_t(q_t)) q_t as well
            c_lo[t] = max(c_lo[t], d.certificate.lower * d.bound * (1.0 - 1e-12))
    lower = math.fsum(math.sqrt(c) for c in c_lo) ** 2 / total * (1.0 - 1e-12)
    if eta > 0.0:
        floor_lb = math.fsum(
            eta * float(np.trace(np.asarray(d.program.weight))) for d in final
        )
        lower = max(lower, floor_lb * (1.0 - 1e-12))
    lower = min(lower, value)
    equal = iso = None
    eq: list[Design] | None = None
    if compare:
        eq_q = _fit([total / t_count] * t_count, total)
        eq = [design(t, eq_q[t], eta) for t in range(t_count)]
        equal = math.fsum(d.value for d in eq)
        iso = math.fsum(d.isotropic_value for d in eq)
    return RunDesign(
        designs=tuple(final), bounds=bounds, total_bound=total, value=value, lower=lower,
        equal_split_value=equal, isotropic_value=iso, budget=b,
        equal_split_designs=None if eq is None else tuple(eq),
    )


# --------------------------------------------------------------------------------------------
# The example of the CLI, the figure and the notebook: a denoiser queried along a sampling run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffusionRun:
    r"""T denoiser releases along a deterministic sampling trajectory.

    Attributes
    ----------
    sets : list of TwoRecordVectors
        Step t's sensitivity set: the two-record vectors of the ideal denoiser at query
        :math:`g_t` and noise level :math:`\sigma_t` (add/remove neighbours).
    weights : list of ndarray
        :math:`W_t = c_t^2 I` with :math:`c_t` the factor by which noise in the t-th denoiser
        output reaches the final sample (see :func:`diffusion_run`).
    sigmas, queries : ndarray
        The noise levels and query points.
    """

    sets: list[TwoRecordVectors]
    weights: list[np.ndarray]
    sigmas: np.ndarray
    queries: np.ndarray


def diffusion_run(domain: Domain | ArrayLike, data: ArrayLike, steps: int, *,
                  sigma_max: float = 2.0,
                  sigma_min: float = 0.05, seed: int = 0) -> DiffusionRun:
    r"""The ideal denoiser queried at ``steps`` noise levels of a deterministic sampler.

    Noise levels are geometric from ``sigma_max`` down to ``sigma_min``; the trajectory starts at
    a random point :math:`x_1` and follows the deterministic (DDIM-type, variance-exploding)
    update :math:`x_{t+1} = m_t + (\sigma_{t+1}/\sigma_t)(x_t - m_t)` with
    :math:`m_t = m_{x_t}(D)` the ideal denoiser at noise level :math:`\sigma_t`, and the last
    step releases :math:`m_T`. Independent noise :math:`\xi_t` added to :math:`m_t` reaches the
    final sample multiplied by :math:`c_t = (1 - \sigma_{t+1}/\sigma_t)\,\sigma_T/\sigma_{t+1}`
    (:math:`c_T = 1`), so the expected squared error of the sample is
    :math:`\sum_t c_t^2\operatorname{tr}\Sigma_t` — the weights :math:`W_t = c_t^2 I`.

    Parameters
    ----------
    domain : FinitePoints, Grid or array_like
        The finite data domain (the sensitivity sets range over it).
    data : array_like, shape (n, d)
        The dataset the trajectory is computed on (the queries).
    steps : int
        T >= 1.
    """
    from dpopt.accounting.composition import as_steps
    from dpopt.covariance.denoiser import posterior_mean
    from dpopt.covariance.sensitivity import TwoRecordVectors, add_remove_set

    t_count = as_steps("steps", steps)
    s_hi = as_scalar("sigma_max", sigma_max, low=0.0)
    s_lo = as_scalar("sigma_min", sigma_min, low=0.0, high=s_hi, high_open=False)
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise InvalidParameterError("data", data, "must be an (n, d) array with n >= 1")
    sig = np.geomspace(s_hi, s_lo, t_count) if t_count > 1 else np.array([s_lo])
    rng = np.random.default_rng(seed)
    point = x.mean(axis=0) + s_hi * rng.standard_normal(x.shape[1])
    queries, sets = [], []
    for t in range(t_count):
        queries.append(point.copy())
        step_set = add_remove_set(domain, point, float(sig[t]))
        if not isinstance(step_set, TwoRecordVectors):
            raise InvalidParameterError(
                "domain", domain, "a diffusion run needs a finite domain here (a Grid, with the "
                "records snapped to it: Grid.snap); per-step box designs are "
                "design_covariance(add_remove_set(box, query, sigma), ...)")
        sets.append(step_set)
        m = posterior_mean(x, point, float(sig[t]))
        if t + 1 < t_count:
            point = m + (sig[t + 1] / sig[t]) * (point - m)
    coef = np.ones(t_count)
    for t in range(t_count - 1):
        coef[t] = (1.0 - sig[t + 1] / sig[t]) * sig[-1] / sig[t + 1]
    weights = [float(c * c) * np.eye(x.shape[1]) for c in coef]
    return DiffusionRun(sets=sets, weights=weights, sigmas=sig, queries=np.array(queries))
