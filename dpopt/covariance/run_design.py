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
:math:`v_t(q)` is the optimal value of the covariance program of step t (theory page, "The
covariance program") at bound q:

* no noise floor (η = 0): :math:`v_t(q) = c_t/q` with :math:`c_t = v_t(1)` (scaling
  :math:`\Sigma \to \Sigma/q`), so by Cauchy–Schwarz the optimum is
  :math:`q_t = Q\sqrt{c_t}/\sum_s\sqrt{c_s}` and the optimal total is
  :math:`(\sum_t\sqrt{c_t})^2/Q`; with the certified interval :math:`c_t \in [\ell_t, u_t]` the
  optimal total lies in :math:`[(\sum_t\sqrt{\ell_t})^2/Q,\ \sum_t v_t(q_t)]`;
* a noise floor η > 0: each :math:`v_t` is convex and decreasing in q (the constraints are linear
  matrix inequalities jointly in :math:`(\Sigma, q)`), so the split is optimal iff the marginal
  values are equal: :math:`-v_t'(q_t) = \nu` for every release that is not on its floor (KKT).
  The marginal value of a design is read from its dual, :math:`-v_t'(q) = \sum_j\lambda_j`
  (the multipliers of the constraints :math:`s_j^\top\Sigma^{-1}s_j \le q`). Each round designs
  every release at its share, models :math:`q \mapsto -v_t'(q)` through the marginal values
  seen so far (piecewise power laws, :math:`q^{-2}` at the ends as without a floor) and moves
  to the shares where the modelled marginal values are equal and the shares sum to Q. Small runs
  start from the split of one joint convex program over every release and the split
  (:func:`solvers.run_split.joint_split`), where the marginal values are already equal.

  **Certified interval.** A dual of program t at any bound is a dual of program t at every
  bound q' (its feasibility does not involve q), so it gives an affine minorant
  :math:`v_t(q') \ge a - bq'` (:func:`certificates.covariance.dual_cut`); with the floor's
  :math:`\eta\operatorname{tr}W_t` and the tangents of the η = 0 bound :math:`\ell_t/q`, the
  minorants of every design made form a convex piecewise-linear model :math:`m_t \le v_t`, and
  for every :math:`\nu \ge 0` (Lagrangian duality of the split)

  .. math::

      \min_{\sum_t q_t = Q}\sum_t v_t(q_t) \;\ge\; \sum_t \min_{q \ge 0}\big(m_t(q) + \nu q\big)
      - \nu Q ,

  maximised over ν (each inner minimum is attained at a breakpoint of :math:`m_t`). At the
  equal-marginal split this bound meets the designs' own lower bounds, so the run's interval is
  about as wide as its designs' (their sum of gaps).

Returned designs are :func:`dpopt.covariance.design.design_covariance` results; their bounds sum
to at most Q in exact rational arithmetic.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from certificates.covariance import dual_cut
from certificates.rounding import sum_up
from certificates.validate import as_scalar
from dpopt.accounting.budgets import GDP, MIDP, RDP, ZCDP, AllOf, ApproxDP, Budget, PrivacyReport
from dpopt.covariance.design import Design, design_covariance
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import RelationLike

if TYPE_CHECKING:  # pragma: no cover
    from certificates.problem import VectorSource
    from dpopt.covariance.sensitivity import PrunedSet
    from dpopt.parallel import DaskOption

__all__ = ["MAX_ROUNDS", "RunDesign", "design_run", "split_for_scales"]


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
    marginal_values : tuple of float or None
        With a noise floor: each design's certified marginal value :math:`-dv_t/dq_t`
        (:math:`\\sum_j\\lambda_j` of its dual, scaled to feasibility); equal across the releases
        not on their floor at an optimal split. None without a floor (closed form).
    rounds : int
        Rounds of designs the split search took (1 without a floor).
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
    marginal_values: tuple[float, ...] | None = None
    rounds: int = 1

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


#: Rounds of the equal-marginal-value search with a noise floor (each designs every release once).
MAX_ROUNDS = 12

Cut = tuple[float, float]  # (a, b): v(q) >= a - b q for every q > 0


def _envelope(cuts: Sequence[Cut]) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints (q >= 0, with q = 0) of the upper envelope of the cuts and its values there;
    a convex piecewise-linear function's minimum plus a linear term is at one of them."""
    a = np.array([c[0] for c in cuts])
    b = np.array([c[1] for c in cuts])
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = (a[:, None] - a[None, :]) / (b[:, None] - b[None, :])
    qs = np.concatenate([[0.0], cross[np.isfinite(cross) & (cross > 0)]])
    vals = np.max(a[None, :] - b[None, :] * qs[:, None], axis=1)
    return qs, vals


def _split_lower(cuts: Sequence[Sequence[Cut]], total: float) -> tuple[float, float]:
    r"""``max_nu sum_t min_q (m_t(q) + nu q) - nu Q`` (golden section; the function is concave
    in nu) and the maximising nu."""
    env = [_envelope(c) for c in cuts]

    def dual(nu: float) -> float:
        return math.fsum(float(np.min(v + nu * q)) for q, v in env) - nu * total

    top = max(max(b for _, b in c) for c in cuts)
    lo, hi = 0.0, max(top, 1e-300)
    g = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = dual(x1), dual(x2)
    for _ in range(100):
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = dual(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = dual(x1)
    best = max((dual(0.0), 0.0), (f1, x1), (f2, x2))
    return best[0] * (1.0 - 1e-12) if best[0] > 0 else best[0], best[1]


def _marginal_model(samples: Sequence[tuple[float, float]], q_star: float,
                    scale: float) -> Callable[[float], float]:
    """q -> modelled marginal value -v'(q) for q < q_star through the positive (q, -v'(q))
    samples: a power law between neighbouring samples, q^-2 beyond the ends (the law without a
    floor); ``scale / q^2`` (the floor-free law) when there is no sample yet. At
    ``q_star = max_j |s_j|^2 / eta`` the floor alone becomes optimal: -v' jumps to 0 there."""
    pos = sorted((q, b) for q, b in samples if b > 0 and q < q_star)
    if not pos:
        return lambda q: scale / (q * q)
    lq = np.log([q for q, _ in pos])
    lb = np.log([b for _, b in pos])
    steps = np.diff(lq)
    slopes = np.diff(lb) / np.where(steps > 0, steps, 1.0)
    slopes = np.where((slopes < -1e-3) & (steps > 0), slopes, -2.0)  # -v' decreases

    # beyond the samples the curve keeps bending (-v' falls faster than the last power law
    # once the floor is near): with three samples or more, the parabola through the last three
    # in log-log extrapolates, as long as it keeps falling (secant-like convergence instead of
    # a one-sided linear approach)
    # between samples: the monotone cubic (Fritsch-Carlson) through all of them in log-log, so
    # that samples gathering near the answer carry the local curvature (a power law between
    # two fixed neighbours converges one-sidedly, like regula falsi)
    interior = None
    if lq.size >= 3 and np.all(np.diff(lq) > 0) and np.all(np.diff(lb) < 0):
        from scipy.interpolate import PchipInterpolator

        interior = PchipInterpolator(lq, lb, extrapolate=False)
    curve = (np.polyfit(lq[-3:], lb[-3:], 2) if lq.size >= 3 and np.all(np.diff(lq[-3:]) > 0)
             else None)

    def model(q: float) -> float:
        x = math.log(q)
        if x <= lq[0]:
            return float(math.exp(lb[0] - 2.0 * (x - lq[0])))
        if x >= lq[-1]:
            slope = float(slopes[-1]) if slopes.size else -2.0
            if curve is not None and curve[0] < 0 and 2 * curve[0] * x + curve[1] < -1e-3:
                return float(math.exp(np.polyval(curve, x)))
            return float(math.exp(lb[-1] + slope * (x - lq[-1])))
        if interior is not None:
            return float(math.exp(float(interior(x))))
        k = int(np.searchsorted(lq, x)) - 1
        return float(math.exp(lb[k] + slopes[k] * (x - lq[k])))

    return model


def _equal_marginal_split(models: Sequence[Callable[[float], float]], caps: Sequence[float],
                          total: float) -> list[float]:
    """Shares q_t <= caps_t (the floor points) with model_t(q_t) = nu, or q_t = cap_t when
    nu is within the jump there, for one nu with sum q_t = total (bisection in log nu; in log
    q for each inverse). When every release reaches its cap with budget to spare, the rest is
    spread evenly (beyond its cap a release's value no longer changes)."""
    low = total * 1e-12

    def share(t: int, nu: float) -> float:
        cap = min(caps[t], total)
        if models[t](cap * (1 - 1e-12)) >= nu:
            return cap
        lo, hi = math.log(low), math.log(cap)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if models[t](math.exp(mid)) >= nu else (lo, mid)
        return math.exp(lo)

    count = len(models)
    at_caps = [min(c, total) for c in caps]
    if sum(at_caps) <= total:
        spare = (total - sum(at_caps)) / count
        return [q + spare for q in at_caps]
    top = max(m(low) for m in models)
    lo, hi = math.log(top) - 300.0, math.log(top) + 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if sum(share(t, math.exp(mid)) for t in range(count)) > total:
            lo = mid
        else:
            hi = mid
    qs = [share(t, math.exp(hi)) for t in range(count)]
    rest = total - sum(qs)
    if rest > 0:  # nu sits in a jump: the releases at their caps stay, the others share
        free = [t for t in range(count) if qs[t] < min(caps[t], total) * (1 - 1e-12)]
        for t in free or range(count):
            qs[t] += rest * qs[t] / sum(qs[u] for u in (free or range(count)))
    return qs


def design_run(
    vector_sets: Sequence[ArrayLike | VectorSource | PrunedSet],
    weights: Sequence[ArrayLike | None] | None,
    budget: Budget,
    *,
    noise_floor: float = 0.0,
    solver: str = "auto",
    tol: float = 1e-6,
    compare: bool = True,
    grid_points: int | None = None,
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
    grid_points : int, optional
        Deprecated and ignored: the split with a floor is found from the designs' marginal
        values (at most ``MAX_ROUNDS`` rounds of T designs), not on a grid.
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
    if grid_points is not None:
        if isinstance(grid_points, bool) or not isinstance(grid_points, int) or grid_points < 3:
            raise InvalidParameterError("grid_points", grid_points, "must be an integer >= 3")
        warnings.warn("design_run(grid_points=...) is ignored and will be removed in the next "
                      "release: the split is found from the designs' marginal values",
                      DeprecationWarning, stacklevel=2)
    total = b.mahalanobis_bound()

    def design(t: int, q: float, floor: float) -> Design:
        return design_covariance(sets[t], ZCDP(rho=q / 2.0), weight=ws[t], noise_floor=floor,
                                 solver=solver, tol=tol, dask=dask, relation=relation)

    # c_t = v_t(1) without floor: the η = 0 split and the certified lower bound.
    unit = [design(t, 1.0, 0.0) for t in range(t_count)]
    c_up = [d.value for d in unit]
    c_lo = [max(d.certificate.lower, 0.0) for d in unit]
    shares = split_for_scales(c_up, total)
    marginal: tuple[float, ...] | None = None
    rounds = 1
    if eta == 0.0:
        final = [design(t, shares[t], 0.0) for t in range(t_count)]
        for t, d in enumerate(final):  # c_t >= lower(v_t(q_t)) q_t as well
            c_lo[t] = max(c_lo[t], d.certificate.lower * d.bound * (1.0 - 1e-12))
        lower = math.fsum(math.sqrt(c) for c in c_lo) ** 2 / total * (1.0 - 1e-12)
    else:
        traces = [float(np.trace(np.asarray(d.program.weight))) for d in unit]
        # the designs' programs have the bound of their relation, ratio * q (add/remove: 1,
        # replacement: 1/4); shares, caps and slopes below are in the budget's units
        ratio = unit[0].program.bound / unit[0].bound
        caps = [d.program.max_norm() ** 2 / eta / ratio for d in unit]
        shares = _joint_start(unit, eta, total, ratio) or shares
        final, lower, marginal, rounds = _floor_split(design, shares, c_lo, traces, caps, eta,
                                                      total, tol)
    value = math.fsum(d.value for d in final)
    bounds = tuple(d.bound for d in final)
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
        equal_split_designs=None if eq is None else tuple(eq), marginal_values=marginal,
        rounds=rounds,
    )


def _joint_start(unit: Sequence[Design], eta: float, total: float,
                 ratio: float) -> list[float] | None:
    """Small runs: the split of one joint convex program (:func:`solvers.run_split.joint_split`)
    as the starting split; at its optimum the marginal values are already equal, so one round
    of certified designs usually closes the interval. ``None`` when the run is too large or the
    joint program gives no usable split."""
    from certificates.errors import SolverError
    from solvers.run_split import JOINT_MAX_COUNT, JOINT_MAX_DIM, joint_split

    programs = [d.program for d in unit]
    if sum(p.count for p in programs) > JOINT_MAX_COUNT or max(p.dim for p in programs) > (
            JOINT_MAX_DIM):
        return None
    sets = [p.source.take(np.arange(p.count, dtype=np.intp)) for p in programs]
    try:
        q = joint_split(sets, [np.asarray(p.weight) for p in programs], total * ratio, eta)
    except SolverError:
        return None
    return None if q is None else [float(x) * total / float(np.sum(q)) for x in q]


def _floor_split(design: Callable[[int, float, float], Design], shares: list[float],
                 c_lo: list[float], traces: list[float], caps: list[float], eta: float,
                 total: float, tol: float) -> tuple[list[Design], float, tuple[float, ...], int]:
    """The equal-marginal-value search with a noise floor (module docstring): the best round's
    designs, the certified lower bound on the optimal run, their marginal values, the rounds.
    ``caps`` are the floor points max_j |s_j|^2 / eta, where -v_t' jumps to 0."""
    t_count = len(shares)
    left_done = [False] * t_count

    def add(t: int, d: Design) -> float:
        a, slope = (dual_cut(d.program, d.solution.dual) if d.solution.dual is not None
                    else (0.0, 0.0))
        slope *= d.program.bound / d.bound  # per unit of the budget's bound
        cuts[t].append((a, slope))
        samples[t].append((d.bound, slope))
        if c_lo[t] > 0:  # tangent of the eta = 0 bound c_t / q at this share
            qk = d.bound
            cuts[t].append((2.0 * c_lo[t] / qk * (1.0 - 1e-12), c_lo[t] / qk**2 * (1.0 + 1e-12)))
        return slope

    cuts: list[list[Cut]] = [[(eta * traces[t] * (1.0 - 1e-12), 0.0)] for t in range(t_count)]
    samples: list[list[tuple[float, float]]] = [[] for _ in range(t_count)]
    best: tuple[float, list[Design], tuple[float, ...]] | None = None
    lower = 0.0
    q = _fit(shares, total)
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):  # noqa: B007 - the count is returned
        designs = [design(t, q[t], eta) for t in range(t_count)]
        slopes = [add(t, d) for t, d in enumerate(designs)]
        for t in range(t_count):
            if q[t] >= caps[t] * (1 - 1e-9) and not left_done[t]:
                # at the floor point: the left derivative bounds the kink's subgradients
                add(t, design(t, caps[t] * (1 - 1e-6), eta))
                left_done[t] = True
        value = math.fsum(d.value for d in designs)
        if best is None or value < best[0]:
            best = (value, designs, tuple(slopes))
        lower, _ = _split_lower(cuts, total)
        if best[0] - lower <= tol * best[0]:
            break
        models = [_marginal_model(samples[t], caps[t], c_lo[t]) for t in range(t_count)]
        new = _fit(_equal_marginal_split(models, caps, total), total)
        if max(abs(x - y) / y for x, y in zip(new, q, strict=True)) < 1e-12:
            break
        q = new
    if best is None:  # pragma: no cover - MAX_ROUNDS >= 1
        raise InvalidParameterError("MAX_ROUNDS", MAX_ROUNDS, "must be >= 1")
    floor_lb = math.fsum(eta * tr for tr in traces) * (1.0 - 1e-12)
    old = math.fsum(math.sqrt(c) for c in c_lo) ** 2 / total * (1.0 - 1e-12)
    return best[1], max(lower, floor_lb, old), best[2], rounds


#: Names that moved to :mod:`dpopt.diffusion.trajectory` (the diffusion room owns sampling
#: trajectories); still importable from here, with a DeprecationWarning, until dpopt 0.6.
_MOVED = ("DiffusionRun", "diffusion_run")


def __getattr__(name: str) -> object:
    if name in _MOVED:
        from certificates._deprecated import moved

        return moved(f"{__name__}.{name}", "dpopt.diffusion.trajectory", name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
