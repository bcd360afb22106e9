r"""Private sampling with the ideal denoiser: every step released at its optimal covariance.

A sampler draws :math:`G \sim N(0, I)` at the noisiest level and, at each of T levels
:math:`a_t` of a :class:`~dpopt.diffusion.schedules.Schedule`, queries the ideal denoiser at
:math:`g_t = G_t/\sqrt{a_t}`, :math:`\sigma_t^2 = (1 - a_t)/a_t` (the forward-process map of the
theory page, "The ideal denoiser and its two-record sensitivity") and moves to the next level. The
private sampler replaces the denoiser by the Gaussian release

.. math::

    \hat x_0 = m_{g_t}(D) + N(0, \Sigma_t)
    \qquad\text{or, in the noise-prediction form,}\qquad
    \hat\varepsilon = \varepsilon^*(G_t) + N(0, \Sigma^\varepsilon_t),

with :math:`\varepsilon^* = (g_t - m_{g_t}(D))/\sigma_t`, so :math:`\hat x_0 = g_t -
\sigma_t\hat\varepsilon` carries the noise :math:`\sigma_t^2\Sigma^\varepsilon_t`: the
:math:`(1 - a_t)/a_t` error factor of the noise-prediction form. :math:`\Sigma_t` is the
certified least-error covariance (:func:`~dpopt.covariance.design.design_covariance`) for the
sensitivity set of the release at its realised query (the two-record theorem of the theory page:
two-record vectors over the public domain; :mod:`dpopt.diffusion.sets`) and the bound :math:`q_t`
fixed before any private record is read (:func:`split_budget`).

Updates (Song, Meng and Ermon, "Denoising Diffusion Implicit Models"; Ho, Jain and Abbeel,
"Denoising Diffusion Probabilistic Models"), from level :math:`a` to the next level :math:`a'`
(:math:`a' = 1` after the last step):

- DDIM (deterministic): :math:`\hat\varepsilon = (G - \sqrt a\,\hat x_0)/\sqrt{1 - a}`,
  :math:`G' = \sqrt{a'}\,\hat x_0 + \sqrt{1 - a'}\,\hat\varepsilon`;
- DDPM (ancestral): with :math:`\beta = 1 - a/a'`,
  :math:`G' = \frac{\sqrt{a'}\beta}{1 - a}\hat x_0 + \frac{\sqrt{a/a'}(1 - a')}{1 - a}G
  + \sqrt{\tfrac{1 - a'}{1 - a}\beta}\,Z`, :math:`Z \sim N(0, I)` public noise.

**The guarantee.** Each release is a Gaussian mechanism whose Mahalanobis sup over its
sensitivity set is certified :math:`\le q_t`, i.e. it is :math:`\sqrt{q_t}`-GDP for add/remove
neighbours whatever public query it was asked at. The queries depend only on earlier releases
and public randomness, and the bounds are fixed in advance, so by the adaptive composition of
Gaussian differential privacy (Dong, Roth and Su, "Gaussian Differential Privacy", Cor. 3.3) the
whole run of K samples x T steps is :math:`\sqrt{\sum q}`-GDP, with
:math:`\sum q \le Q` = ``budget.mahalanobis_bound()`` checked in exact rational arithmetic.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import cholesky

from certificates.rounding import round_up
from certificates.validate import as_float_array
from dpopt.accounting.budgets import (
    GDP,
    RDP,
    ZCDP,
    AllOf,
    ApproxDP,
    Budget,
    PrivacyReport,
)
from dpopt.covariance.denoiser import posterior_mean
from dpopt.covariance.domains import Box, Domain, FinitePoints, Grid, SnapReport, as_domain
from dpopt.covariance.mechanisms import RngLike, as_generator
from dpopt.diffusion.schedules import Schedule, as_schedule
from dpopt.diffusion.sets import release_set
from dpopt.errors import DpoptError, InvalidParameterError

__all__ = [
    "ClampWarning",
    "PrivateSamples",
    "budget_spec",
    "propagation_factors",
    "sample_nonprivate",
    "sample_private",
    "snap_to_domain",
    "split_budget",
    "step_update",
]

SamplerName = Literal["ddim", "ddpm"]
Prediction = Literal["x0", "eps"]
NoiseKind = Literal["optimal", "isotropic"]

#: Points per axis of the public reference grid the pilot split uses in a box.
PILOT_BOX_POINTS = 11
#: Relative margin of the isotropic noise over the exact per-step sup (floating-point safety).
ISOTROPIC_MARGIN = 1e-9
#: The progress line shows a time left only while its range spans at most this factor (its
#: geometric middle is then within sqrt(3) = 1.73 of every time in the range).
SAMPLER_MAX_SPREAD = 3.0


class ClampWarning(UserWarning):
    """Records outside the public domain were moved onto it before sampling."""


# ---------------------------------------------------------------------------------- domain ---


def snap_to_domain(data: ArrayLike, domain: Domain) -> SnapReport:
    r"""Move every record onto the public domain (a :class:`SnapReport
    <dpopt.covariance.domains.SnapReport>`: records, clamped and moved counts).

    Uses the domain's own snapping (:meth:`Grid.snap <dpopt.covariance.domains.Grid.snap>`:
    clamp into the box, round to the nearest grid value; :meth:`FinitePoints.snap
    <dpopt.covariance.domains.FinitePoints.snap>`: the nearest domain point). Snapping is
    a fixed per-record map, so neighbouring datasets stay neighbouring and the guarantee on the
    domain covers the original records. The counts depend on the data: they are for the data
    holder only and are never written into a run record.
    """
    x = as_float_array("data", data)
    if x.ndim == 1:
        x = x[:, None]
    dom = as_domain(domain)
    if x.ndim != 2 or x.shape[1] != dom.dim or x.shape[0] < 1:
        raise InvalidParameterError(
            "data", f"array of shape {x.shape}", f"must be (n, {dom.dim}) with n >= 1"
        )
    return dom.snap(x)




SamplingDomain = FinitePoints | Box | Grid


def _sampling_domain(domain: Domain | ArrayLike) -> SamplingDomain:
    """The domain as a grid, finite set or box; other shapes are refused with the safe route."""
    dom = as_domain(domain)
    if isinstance(dom, Grid | FinitePoints | Box):
        return dom
    box = getattr(dom, "bounding_box", None)
    hint = f" (e.g. its bounding box {box()!r} or a Grid in it)" if callable(box) else ""
    raise InvalidParameterError(
        "domain", dom, "the sampler needs a Grid, FinitePoints or Box: each release has a fixed "
        f"query, whose two-record set is certified on those; use a box that contains it{hint}")


# ---------------------------------------------------------------------------------- budget ---


def budget_spec(budget: Budget) -> str | None:
    """The ``parse_budget`` string of ``budget`` (exact floats), or None when it has none."""
    if isinstance(budget, AllOf):
        parts = [budget_spec(b) for b in budget.budgets]
        return None if any(p is None for p in parts) else "&".join(str(p) for p in parts)
    if isinstance(budget, ApproxDP):
        return f"approx:epsilon={float(budget.epsilon)!r},delta={float(budget.delta)!r}"
    if isinstance(budget, GDP):
        return f"gdp:mu={float(budget.mu)!r}"
    if isinstance(budget, ZCDP):
        return f"zcdp:rho={float(budget.rho)!r}"
    if isinstance(budget, RDP):
        alphas = ";".join(repr(float(a)) for a in budget.alpha)
        epss = ";".join(repr(float(e)) for e in budget.epsilon)
        return f"rdp:alpha={alphas},epsilon={epss}"
    return None


def _total_bound(budget: object) -> tuple[Budget, float]:
    from dpopt.covariance.run_design import _check_budget

    b = _check_budget(budget)
    q = float(b.mahalanobis_bound())
    if not (math.isfinite(q) and q > 0.0):
        raise InvalidParameterError("budget", b.describe(), "must allow a positive bound")
    return b, q


def _fit_exact(per_step: NDArray[np.float64], samples: int, total: float) -> NDArray[np.float64]:
    """Shrink per-step bounds until samples * sum(q) <= total in exact rational arithmetic."""
    q = np.array(per_step, dtype=np.float64)
    limit = Fraction(total)
    for _ in range(400):
        if samples * sum((Fraction(float(v)) for v in q), Fraction(0)) <= limit:
            return q
        q = np.nextafter(q * (1.0 - 1e-15), 0.0)
    raise InvalidParameterError("budget", total, "could not split the bound in floating point")


def split_budget(
    budget: Budget,
    samples: int,
    steps: int,
    rule: str | ArrayLike = "equal",
    *,
    domain: Domain | None = None,
    schedule: Schedule | str = "cosine",
    weight: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    pilots: int = 4,
    seed: int = 0,
    sampler: str = "ddim",
) -> tuple[NDArray[np.float64], str]:
    r"""Per-step Mahalanobis bounds :math:`q_t` (the same for every sample), fixed in advance.

    The K*T releases share the run's bound Q = ``budget.mahalanobis_bound()``:
    :math:`K\sum_t q_t \le Q` exactly. Rules:

    - ``"equal"``: :math:`q_t = Q/(KT)`;
    - a sequence of T positive weights :math:`w_t` (a user schedule): :math:`q_t \propto w_t`;
    - ``"propagated"``: the schedule alone. Noise :math:`\xi_t` in the released
      :math:`\hat x_0` of step t enters the next state as :math:`c_t\xi_t`, with
      :math:`c_t = \sqrt{a_{t+1}} - \sqrt{1 - a_{t+1}}\sqrt{a_t/(1 - a_t)}` (DDIM) or
      :math:`c_t = \sqrt{a_{t+1}}\,\beta_t/(1 - a_t)`, :math:`\beta_t = 1 - a_t/a_{t+1}` (DDPM),
      and :math:`c_T = 1`; with the
      weights :math:`W_t = c_t^2 I` and comparable design values the Cauchy–Schwarz split is
      :math:`q_t \propto c_t`, which moves the budget to the late, low-noise steps whose noise
      reaches the sample undamped (the denoiser's own dependence on the state is ignored: a
      heuristic, but a public one);
    - ``"pilot"``: public information only. The optimal value of step t's design at bound q is
      :math:`v_t/q` (scaling), so for fixed :math:`v_t` the total :math:`\sum_t v_t/q_t` is least
      at :math:`q_t \propto \sqrt{v_t}` (Cauchy–Schwarz). :math:`v_t` depends on the realised
      query, so it is estimated on ``pilots`` non-private trajectories of the same sampler run
      on a PUBLIC reference dataset (``reference``; by default the domain's own points, i.e.
      the uniform distribution on the domain, or for a box the regular grid of
      ``PILOT_BOX_POINTS`` points per axis), never on the private records:
      :math:`\bar v_t` is the mean over pilots of the certified unit-bound design value at the
      pilot's query, and :math:`q_t \propto \sqrt{\bar v_t}`.

    Returns
    -------
    q : ndarray, shape (T,)
    rule : str
        ``"equal"``, ``"user"``, ``"propagated"`` or ``"pilot"``.
    """
    _, total = _total_bound(budget)
    k = _count("samples", samples)
    t = _count("steps", steps)
    if isinstance(rule, str):
        key = rule.strip().lower()
        if key == "equal":
            w = np.ones(t)
        elif key == "propagated":
            w = propagation_factors(as_schedule(schedule, t), sampler)
        elif key == "pilot":
            if domain is None:
                raise InvalidParameterError("domain", None, "the pilot split needs the domain")
            w = np.sqrt(_pilot_scales(_sampling_domain(domain), as_schedule(schedule, t), weight,
                                      reference, _count("pilots", pilots), seed))
        else:
            raise InvalidParameterError(
                "rule", rule, "must be 'equal', 'propagated', 'pilot' or T weights")
        name = key
    else:
        w = as_float_array("rule", rule)
        if w.ndim != 1 or w.shape[0] != t or np.any(w <= 0) or not np.all(np.isfinite(w)):
            raise InvalidParameterError(
                "rule", rule, f"a user schedule must be {t} finite positive weights"
            )
        name = "user"
    q = total * w / (k * float(np.sum(w)))
    return _fit_exact(q, k, total), name


def propagation_factors(schedule: Schedule, sampler: str = "ddim") -> NDArray[np.float64]:
    r"""The factors :math:`c_t` by which noise in step t's :math:`\hat x_0` enters the next
    state (see :func:`split_budget`, rule ``"propagated"``); :math:`c_T = 1`.

    Examples
    --------
    >>> from dpopt.diffusion.schedules import Schedule
    >>> [round(float(c), 6) for c in propagation_factors(Schedule([0.5, 0.8]))]
    [0.447214, 1.0]
    """
    a = schedule.alpha_bar
    a1 = schedule.next_alpha_bar
    if sampler == "ddim":
        c = np.sqrt(a1) - np.sqrt(1.0 - a1) * np.sqrt(a / (1.0 - a))
    elif sampler == "ddpm":
        c = np.sqrt(a1) * (1.0 - a / a1) / (1.0 - a)
    else:
        raise InvalidParameterError("sampler", sampler, "must be 'ddim' or 'ddpm'")
    return np.asarray(np.maximum(np.abs(c), 1e-12), dtype=np.float64)


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < 1:
        raise InvalidParameterError(name, value, "must be a positive integer")
    return int(value)


def _pilot_scales(domain: SamplingDomain, schedule: Schedule, weight: ArrayLike | None,
                  reference: ArrayLike | None, pilots: int, seed: int) -> NDArray[np.float64]:
    from dpopt.covariance.design import design_covariance

    if reference is None:  # public: the domain's own points (a box: a regular grid in it)
        ref = (Grid(domain.lower, domain.upper, (PILOT_BOX_POINTS,) * domain.dim).points
               if isinstance(domain, Box) else domain.points)
    else:
        ref = snap_to_domain(reference, domain).records
    rng = np.random.default_rng(seed)
    c = np.zeros(schedule.steps)
    d = domain.dim
    w = None if weight is None else np.asarray(weight, dtype=np.float64)
    for _ in range(pilots):
        state = rng.standard_normal(d)
        for s in range(schedule.steps):
            a = float(schedule.alpha_bar[s])
            a_next = float(schedule.next_alpha_bar[s])
            sig = float(schedule.sigma[s])
            g = state / math.sqrt(a)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sset: Any = release_set(domain, g, sig)
                des = design_covariance(sset, ZCDP(rho=0.5), weight=w)
            c[s] += des.value / pilots
            x0 = posterior_mean(ref, g, sig)
            state = step_update(state, x0, a, a_next, "ddim")
    return np.maximum(c, np.finfo(float).tiny)


# ------------------------------------------------------------------------------- sampling ---


def step_update(state: NDArray[np.float64], x0: NDArray[np.float64], alpha_bar: float,
                next_alpha_bar: float, sampler: str,
                noise: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    r"""One sampler move from level ``alpha_bar`` to ``next_alpha_bar`` given the denoised
    :math:`\hat x_0` (DDIM, or DDPM with the public Gaussian ``noise``)."""
    a, a1 = float(alpha_bar), float(next_alpha_bar)
    if sampler == "ddim":
        eps = (state - math.sqrt(a) * x0) / math.sqrt(1.0 - a)
        return np.asarray(math.sqrt(a1) * x0 + math.sqrt(1.0 - a1) * eps, dtype=np.float64)
    if sampler == "ddpm":
        beta = 1.0 - a / a1
        mean = (math.sqrt(a1) * beta / (1.0 - a)) * x0 + (
            math.sqrt(a / a1) * (1.0 - a1) / (1.0 - a)) * state
        if a1 >= 1.0 or noise is None:
            return np.asarray(mean, dtype=np.float64)
        return np.asarray(mean + math.sqrt((1.0 - a1) / (1.0 - a) * beta) * noise,
                          dtype=np.float64)
    raise InvalidParameterError("sampler", sampler, "must be 'ddim' or 'ddpm'")


@dataclass(frozen=True)
class PrivateSamples:
    r"""The result of :func:`sample_private`.

    Attributes
    ----------
    samples : ndarray, shape (K, d)
        The private samples (the last denoised release of each trajectory).
    record : dict
        The run record (JSON-ready; :func:`dpopt.diffusion.record.save_record`,
        re-checked by :func:`dpopt.diffusion.record.verify_record`).
    moved : int
        Records moved by the snapping onto the domain (rounded to the grid or clamped into its
        box; for the data holder only, not in the record).
    errors : dict of str to float
        Summed error :math:`\sum \operatorname{tr}(W\Sigma_t)` (in :math:`\hat x_0` units) of
        the released designs and of each baseline at the same :math:`q_t`.
    seconds : float
        CPU seconds of the run (``time.process_time``).
    trajectories : ndarray, shape (K, T, d)
        The denoised releases :math:`\hat x_0` along every trajectory.
    """

    samples: NDArray[np.float64]
    record: dict[str, Any]
    moved: int
    errors: dict[str, float]
    seconds: float
    trajectories: NDArray[np.float64] = field(repr=False)

    @property
    def releases(self) -> int:
        """Number of certified releases K*T."""
        return int(self.record["samples"]) * int(self.record["steps"])

    @property
    def privacy(self) -> PrivacyReport:
        """The run's guarantee: one Gaussian with bound :math:`\\sum q` (rounded up)."""
        return PrivacyReport(float(self.record["totals"]["bound"]))

    def ratios(self) -> dict[str, float]:
        """Each baseline's summed error over the optimal designs' (> 1: the design helps)."""
        opt = self.errors["released"]
        return {k: v / opt for k, v in self.errors.items() if k != "released"}


def _weight(weight: ArrayLike | None, d: int) -> NDArray[np.float64]:
    if weight is None:
        return np.eye(d)
    w = as_float_array("weight", weight)
    if w.shape != (d, d) or not np.allclose(w, w.T, rtol=0, atol=1e-12 * max(1.0, abs(w).max())):
        raise InvalidParameterError("weight", weight, f"must be a symmetric ({d}, {d}) matrix")
    w = 0.5 * (w + w.T)
    if float(np.linalg.eigvalsh(w)[0]) <= 0:
        raise InvalidParameterError("weight", weight, "must be positive definite")
    return np.asarray(w, dtype=np.float64)


def _domain_dict(dom: SamplingDomain) -> dict[str, Any]:
    if isinstance(dom, Grid):
        return {"kind": "grid", "lower": [float(v) for v in dom.lower],
                "upper": [float(v) for v in dom.upper], "shape": list(dom.shape)}
    if isinstance(dom, FinitePoints):
        return {"kind": "finite", "points": dom.points.tolist()}
    return {"kind": "box", "lower": [float(v) for v in dom.lower],
            "upper": [float(v) for v in dom.upper]}


def _uniform_query_value(dom: SamplingDomain, w: NDArray[np.float64]) -> float:
    """tr(W Sigma_U) of the certified uniform-query design at unit bound (the uniform-query
    corollary)."""
    from dpopt.covariance.design import design_covariance
    from dpopt.covariance.sensitivity import uniform_query_set

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        uq: Any = uniform_query_set(dom)
        return float(design_covariance(uq, ZCDP(rho=0.5), weight=w).value)


def sample_private(
    data: ArrayLike,
    domain: Domain | ArrayLike,
    budget: Budget,
    *,
    samples: int = 100,
    steps: int = 50,
    schedule: Schedule | str | ArrayLike = "cosine",
    sampler: SamplerName = "ddim",
    prediction: Prediction = "x0",
    noise: NoiseKind = "optimal",
    split: str | ArrayLike = "equal",
    weight: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    clip: bool = False,
    rng: RngLike = None,
    progress: bool = False,
    solver: str = "auto",
    tol: float = 1e-6,
) -> PrivateSamples:
    r"""Draw ``samples`` private samples from ``data`` with the ideal denoiser, certified.

    Parameters
    ----------
    data : array_like, shape (n, d)
        The private records. Records off the public domain are snapped onto it (a
        :class:`ClampWarning` says how many; the count is not written into the record).
    domain : Grid, FinitePoints (or an (m, d) array of points), or Box
        The PUBLIC domain the guarantee covers (add/remove neighbours). A grid or point set:
        records are snapped to their nearest point; a box: records anywhere in it (clamped
        into it), each release designed by exchange over every pair of records in the box
        (:class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet`; slower, ``prediction="x0"``
        only).
    budget : Budget
        The guarantee of the whole run (``ApproxDP``, ``GDP``, ``ZCDP``, ``RDP`` or
        ``AllOf``), split over the K*T releases by ``split``.
    samples, steps : int
        K trajectories of T denoiser releases each.
    schedule : "cosine", "linear", Schedule or array of levels
        The levels :math:`a_t`, noisiest first.
    sampler : {"ddim", "ddpm"}
    prediction : {"x0", "eps"}
        Release the posterior mean, or the noise prediction (same privacy; the noise reaching
        :math:`\hat x_0` is :math:`\sigma_t^2\Sigma^\varepsilon_t`).
    noise : {"optimal", "isotropic"}
        ``"optimal"``: the certified design at every release. ``"isotropic"``: the baseline
        :math:`cI`, :math:`c = \max_s |s|^2/q_t` (exact per-step sup, with a
        ``ISOTROPIC_MARGIN`` safety factor), also certified; for quality comparisons at equal
        budget.
    split : "equal", "propagated", "pilot" or T weights
        See :func:`split_budget` (decided before any private record is read).
    weight : array_like, shape (d, d), optional
        :math:`W` of the error :math:`\operatorname{tr}(W\Sigma_t)` of :math:`\hat x_0`.
    reference : array_like, optional
        Public reference points for ``split="pilot"``.
    clip : bool
        Clip the returned samples into the domain's box (post-processing, free of privacy cost).
    rng : None, int or numpy.random.Generator
        Randomness of the start points, the ancestral noise and the privacy noise (None: from
        the operating system, the right choice for real data).
    progress : bool
        Show a status line on stderr (when it is a terminal) with the steps done and the time
        left, measured on the steps done (:class:`dpopt.progress.Progress` with
        ``uneven=True``: the time left appears once the costliest steps of the schedule are
        behind, from the recent steps' cost).
    solver, tol
        Passed to :func:`~dpopt.covariance.design.design_covariance`.

    Returns
    -------
    PrivateSamples

    Examples
    --------
    >>> import numpy as np
    >>> from dpopt.accounting.budgets import ApproxDP
    >>> from dpopt.covariance.domains import Grid
    >>> data = np.random.default_rng(0).uniform(0, 1, (50, 2))
    >>> out = sample_private(data, Grid([0, 0], [1, 1], (5, 5)), ApproxDP(1.0, 1e-5),
    ...                      samples=2, steps=3, rng=1)
    >>> out.samples.shape, out.releases
    ((2, 2), 6)
    """
    started = time.process_time()
    dom = _sampling_domain(domain)
    k = _count("samples", samples)
    t = _count("steps", steps)
    sched = as_schedule(schedule, t)
    if sampler not in ("ddim", "ddpm"):
        raise InvalidParameterError("sampler", sampler, "must be 'ddim' or 'ddpm'")
    if prediction not in ("x0", "eps"):
        raise InvalidParameterError("prediction", prediction, "must be 'x0' or 'eps'")
    if noise not in ("optimal", "isotropic"):
        raise InvalidParameterError("noise", noise, "must be 'optimal' or 'isotropic'")
    d = dom.dim
    w = _weight(weight, d)
    b, total = _total_bound(budget)
    gen = as_generator(rng)
    # ---- public decisions, before any private record is read
    q, rule = split_budget(b, k, t, split, domain=dom, schedule=sched, weight=w,
                           reference=reference, sampler=sampler)
    diam2 = dom.diameter() ** 2
    uq_value = _uniform_query_value(dom, w)
    start_states = gen.standard_normal((k, d))
    # ---- the private records
    rep = snap_to_domain(data, dom)
    x, moved, outside = np.asarray(rep.records, dtype=np.float64), int(rep.moved), int(rep.clamped)
    if outside:
        warnings.warn(
            f"{outside} of {x.shape[0]} records lie outside the public domain's box and were "
            "clamped onto it (the guarantee covers the clamped records; this count is for the "
            "data holder and is not written into the run record)",
            ClampWarning, stacklevel=2,
        )
    releases = _run(x, dom, sched, q, w, start_states, sampler, prediction, noise, gen,
                    progress, solver, tol)
    errors = {
        "released": math.fsum(r["errors"]["released"] for r in releases),
        "isotropic_exact": math.fsum(r["errors"]["isotropic_exact"] for r in releases),
        "isotropic_diameter": math.fsum(k * diam2 * float(np.trace(w)) / float(v) for v in q),
        "uniform_query": math.fsum(k * uq_value / float(v) for v in q),
    }
    if noise == "optimal":
        errors["optimal"] = errors["released"]
    for r in releases:
        r["errors"]["isotropic_diameter"] = diam2 * float(np.trace(w)) / r["q"]
        r["errors"]["uniform_query"] = uq_value / r["q"]
    traj = np.array([[r["x0"] for r in releases[s * k:(s + 1) * k]] for s in range(t)])
    traj = np.transpose(traj, (1, 0, 2))
    out = traj[:, -1, :].copy()
    if clip:
        box = (dom.box if isinstance(dom, Grid) else dom if isinstance(dom, Box)
               else Box(dom.points.min(0), dom.points.max(0)))
        out = np.clip(out, box.lower, box.upper)
    exact = k * sum((Fraction(float(v)) for v in q), Fraction(0))
    bound = round_up(exact)
    report = PrivacyReport(bound)
    from dpopt import __version__
    from dpopt.diffusion.record import FORMAT

    record: dict[str, Any] = {
        "format": FORMAT,
        "domain": _domain_dict(dom),
        "relation": "add_remove",
        "schedule": sched.to_dict(),
        "sampler": sampler,
        "prediction": prediction,
        "noise": noise,
        "samples": k,
        "steps": t,
        "weight": w.tolist(),
        "budget": {"spec": budget_spec(b), "description": b.describe(),
                   "mahalanobis_bound": total},
        "split": {"rule": rule, "per_step_bound": [float(v) for v in q]},
        "initial_states": start_states.tolist(),
        "releases": [{key: val for key, val in r.items() if key != "x0"} for r in releases],
        "totals": {
            "bound": bound,
            "gdp_mu": report.gdp_mu,
            "epsilon": {f"{dl:g}": float(report.epsilon(dl)) for dl in (1e-5, 1e-6, 1e-8)},
            "errors": errors,
            "uniform_query_unit_value": uq_value,
            "diameter_squared": diam2,
        },
        "software": {"dpopt": __version__},
    }
    return PrivateSamples(samples=out, record=record, moved=moved, errors=errors,
                          seconds=time.process_time() - started, trajectories=traj)


def _run(x: NDArray[np.float64], dom: Domain, sched: Schedule, q: NDArray[np.float64],
         w: NDArray[np.float64], start: NDArray[np.float64], sampler: str, prediction: str,
         noise: str, gen: np.random.Generator, progress: bool, solver: str,
         tol: float) -> list[dict[str, Any]]:
    from dpopt.progress import Progress
    from solvers.threads import blas_limits

    k, d = start.shape
    state = start.copy()
    out: list[dict[str, Any]] = []
    # one report per step (its K designs and K releases): the time left is measured on the
    # steps done. Not made the active display, so the designs' own passes do not report to it.
    # The designs' cost rises and falls along the schedule (the uneven model: shown once past
    # the costliest steps, its range spanning at most x3); the isotropic baseline's steps
    # cost evenly.
    bar = Progress(f"private sampling ({k} samples)", total=sched.steps, unit="step",
                   enabled=None if progress else False, uneven=noise == "optimal",
                   max_spread=SAMPLER_MAX_SPREAD)
    # thousands of 2 x 2 designs: a multi-threaded BLAS only adds contention
    limits = blas_limits(1)
    limits.__enter__()  # restored in the finally below
    try:
        for s in range(sched.steps):
            a = float(sched.alpha_bar[s])
            a_next = float(sched.next_alpha_bar[s])
            sig = float(sched.sigma[s])
            qs = float(q[s])
            scale = 1.0 / sig if prediction == "eps" else 1.0
            w_design = w * (sig * sig) if prediction == "eps" else w
            # the K queries of this step are public (earlier releases): design them together
            queries = state / math.sqrt(a)
            sets = [_scaled(release_set(dom, queries[j], sig), scale) for j in range(k)]
            noises = _step_noise(sets, qs, w_design, noise, solver, tol, s)
            for j in range(k):
                g = queries[j]
                cov, cert, iso = noises[j]
                m = posterior_mean(x, g, sig)
                clean = (g - m) / sig if prediction == "eps" else m
                z = gen.standard_normal(d)
                released = clean + cholesky(cov, lower=True) @ z
                x0 = g - sig * released if prediction == "eps" else released
                anc: NDArray[np.float64] | None = (
                    gen.standard_normal((d,)) if sampler == "ddpm" and a_next < 1.0 else None)
                new_state = step_update(state[j], x0, a, a_next, sampler, anc)
                out.append({
                    "sample": j, "step": s, "alpha_bar": a, "denoiser_sigma": sig,
                    "query": g.tolist(), "q": qs, "covariance": cov.tolist(),
                    "release": released.tolist(),
                    "ancestral_noise": None if anc is None else anc.tolist(),
                    "certificate": cert,
                    "errors": {"released": float(np.trace(w_design @ cov)),
                               "isotropic_exact": iso},
                    "x0": x0,
                })
                state[j] = new_state
            bar.update(1)
    finally:
        bar.close()
        limits.__exit__(None, None, None)
    return out


Noise = tuple[NDArray[np.float64], dict[str, float | bool | None], float]


def _largest_square(vecs: Any) -> float:
    """max |s|^2 over the set (a certified upper bound for a box's continuous set)."""
    if isinstance(vecs, np.ndarray):
        return float(np.max(np.einsum("ij,ij->i", vecs, vecs)))
    from dpopt.covariance.mahalanobis_sup import sup_mahalanobis

    return float(sup_mahalanobis(vecs, np.eye(vecs.dim)).upper)


def _step_noise(sets: list[Any], q: float, w: NDArray[np.float64], noise: str,
                solver: str, tol: float, step: int) -> list[Noise]:
    """The certified covariance of every release of one step (and its summary, and the exact
    isotropic baseline's error)."""
    from dpopt.covariance.mahalanobis_sup import sup_mahalanobis

    d = w.shape[0]
    budget = ZCDP(rho=q / 2.0)
    if noise == "isotropic":
        out: list[Noise] = []
        for vecs in sets:
            c = _largest_square(vecs) / q
            c *= 1.0 + ISOTROPIC_MARGIN
            cov = c * np.eye(d)
            sup = sup_mahalanobis(vecs, cov)
            if not sup.upper <= q:
                raise DpoptError(f"isotropic release at step {step} failed its check")
            value = float(c * np.trace(w))
            out.append((cov, {"lower": None, "upper": value, "gap": None, "certified": True,
                              "mahalanobis_sup": float(sup.upper)}, value))
        return out
    if solver == "auto" and all(isinstance(v, np.ndarray) for v in sets):
        from dpopt.covariance.batch import design_covariance_batch

        designs = design_covariance_batch(sets, budget, weight=w, tol=tol)
    else:
        from dpopt.covariance.design import design_covariance

        designs = [design_covariance(v, budget, weight=w, solver=solver, tol=tol) for v in sets]
    return [(des.covariance,
             {"lower": float(des.certificate.lower), "upper": float(des.certificate.upper),
              "gap": float(des.certificate.gap), "certified": bool(des.certificate.certified),
              "mahalanobis_sup": float(des.privacy.mahalanobis_bound)},
             float(des.isotropic_value)) for des in designs]


def _scaled(src: Any, scale: float) -> Any:
    """The release's set, scaled (the noise-prediction form divides by sigma): arrays and
    finite sources densified; a box's continuous set kept as is (scaled by its own map)."""
    from dpopt.covariance.sensitivity import BoxTwoRecordSet

    if isinstance(src, BoxTwoRecordSet):
        if scale != 1.0:
            raise InvalidParameterError(
                "prediction", "eps", "the box route releases the posterior mean (x0) only")
        return src
    dense = src if isinstance(src, np.ndarray) else src.take(np.arange(src.count, dtype=np.intp))
    return np.asarray(np.asarray(dense, dtype=np.float64) * scale, dtype=np.float64)


def sample_nonprivate(data: ArrayLike, *, samples: int = 100, steps: int = 50,
                      schedule: Schedule | str | ArrayLike = "cosine",
                      sampler: SamplerName = "ddim", rng: RngLike = None) -> NDArray[np.float64]:
    """The same sampler with the exact ideal denoiser: NOT private (it copies records);
    the reference the private samples are compared with."""
    x = as_float_array("data", data)
    if x.ndim != 2 or x.shape[0] < 1:
        raise InvalidParameterError("data", f"shape {x.shape}", "must be an (n, d) array")
    k = _count("samples", samples)
    t = _count("steps", steps)
    sched = as_schedule(schedule, t)
    gen = as_generator(rng)
    state = gen.standard_normal((k, x.shape[1]))
    x0 = np.zeros_like(state)
    for s in range(t):
        a, a_next, sig = (float(sched.alpha_bar[s]), float(sched.next_alpha_bar[s]),
                          float(sched.sigma[s]))
        for j in range(k):
            g = state[j] / math.sqrt(a)
            x0[j] = posterior_mean(x, g, sig)
            anc: NDArray[np.float64] | None = (
                gen.standard_normal((x.shape[1],)) if sampler == "ddpm" and a_next < 1 else None)
            state[j] = step_update(state[j], x0[j], a, a_next, sampler, anc)
    return x0
