r"""The run record of a private sampling run and its independent re-check.

A record (JSON, format tag ``"dpopt-diffusion-run/2"``) lists every release — sample, step, level
:math:`a_t`, the denoiser's noise level :math:`\sigma_t` (key ``denoiser_sigma``; records of
format ``/1``, still read, spell it ``sigma``), query :math:`g_t`, bound :math:`q_t`, covariance
:math:`\Sigma_t`, the released value, the public ancestral noise, the design's certificate
summary and the baselines' errors — with the public start points, the schedule, the domain, the
budget and the composed guarantee. It holds no private record and no data-dependent count
(the dataset size and the number of clamped records stay with the data holder).

:func:`verify_record` trusts none of the numbers that matter for privacy:

1. it replays every trajectory from the stored start points, releases and public noise with
   the stated sampler and schedule, and requires each stored query and :math:`\sigma_t` to be
   the one the sampler derives (the queries are public functions of earlier releases);
2. at each query it regenerates the sensitivity set on the stated domain (the exact grid
   corner reduction of :mod:`dpopt.diffusion.sets`, or with ``full=True`` every pair of domain
   points; for a box, every pair of records in it, whose sup :mod:`certificates.box_sup`
   bounds) and bounds :math:`\sup_s s^\top\Sigma_t^{-1}s` with the rounding-error-bounded pass
   of :func:`dpopt.covariance.mahalanobis_sup.sup_mahalanobis`; it must be :math:`\le q_t`;
3. it recomputes the budget's bound Q from its spec and checks :math:`\sum q_t \le Q` in exact
   rational arithmetic; the run is then :math:`\sqrt{\sum q_t}`-GDP (Dong, Roth and Su,
   "Gaussian Differential Privacy", adaptive composition), reported with its
   :math:`(\varepsilon, \delta)` curve.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from certificates.errors import CertificateError
from certificates.rounding import round_up
from dpopt.accounting.budgets import PrivacyReport, parse_budget
from dpopt.covariance.domains import Box, Domain, FinitePoints, Grid
from dpopt.covariance.sensitivity import BoxTwoRecordSet
from dpopt.diffusion.sampler import step_update
from dpopt.diffusion.schedules import Schedule
from dpopt.diffusion.sets import release_set

if TYPE_CHECKING:
    from dpopt.verification import Verification, VerifyOptions


__all__ = ["FORMAT", "RunVerification", "load_record", "save_record", "verify_record",
           "verify_run_file"]

#: The ``format`` field of a run record (the kind ``dpopt verify`` dispatches on).
FORMAT = "dpopt-diffusion-run/2"
#: Formats read, and the key each spells a release's denoiser noise level with (``/1``: sigma).
SIGMA_KEYS = {FORMAT: "denoiser_sigma", "dpopt-diffusion-run/1": "sigma"}
#: Relative tolerance of the trajectory replay (queries are re-derived in floating point).
REPLAY_RTOL = 1e-9
#: Relative gap of the certified sup over a box when re-checking a box release.
BOX_TOL = 1e-9


@dataclass(frozen=True)
class _Upper:
    upper: float


def save_record(record: dict[str, Any], path: str | os.PathLike[str], *,
                overwrite: bool = False) -> None:
    """Write ``record`` as JSON (refuses to overwrite unless asked)."""
    p = Path(path)
    if p.exists() and not overwrite:
        raise FileExistsError(f"{p} exists (pass overwrite=True to replace it)")
    text = json.dumps(record, allow_nan=False, separators=(",", ":"))
    p.write_text(text + "\n", encoding="utf-8")


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a run record with the strict JSON reader of :mod:`certificates.strict_json` (no
    NaN/Infinity, no duplicate key); raises :class:`CertificateError`."""
    from certificates import strict_json as sj

    try:
        data = sj.load_json(path)
    except sj.FieldError as exc:
        raise sj.rejection(path, exc, "run record") from None
    if type(data) is not dict or data.get("format") not in SIGMA_KEYS:
        raise CertificateError(f"{os.fspath(path)!r}: not a run record (format must be "
                               f"{FORMAT!r})")
    return data


@dataclass(frozen=True)
class RunVerification:
    """Outcome of :func:`verify_record`.

    Attributes
    ----------
    holds : bool
        Every check passed.
    reasons : tuple of str
        Why it does not hold (empty when it does).
    releases : int
        Releases re-checked.
    worst_ratio : float
        :math:`\\max_t \\sup_s s^\\top\\Sigma_t^{-1}s / q_t` (<= 1 when it holds).
    bound : float
        :math:`\\sum q_t` (rounded up), the run's Mahalanobis bound.
    budget_bound : float
        Q recomputed from the budget spec (or the stored Q when the budget has no spec).
    privacy : PrivacyReport
        The run's guarantee, :math:`\\sqrt{\\sum q_t}`-GDP and its curves.
    """

    holds: bool
    reasons: tuple[str, ...]
    releases: int
    worst_ratio: float
    bound: float
    budget_bound: float
    privacy: PrivacyReport = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "holds": self.holds, "reasons": list(self.reasons), "releases": self.releases,
            "worst_ratio": self.worst_ratio, "bound": self.bound,
            "budget_bound": self.budget_bound, "gdp_mu": self.privacy.gdp_mu,
            "epsilon": {f"{d:g}": float(self.privacy.epsilon(d)) for d in (1e-5, 1e-6, 1e-8)},
        }


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise CertificateError(f"{where}: missing field {key!r}")
    val = obj[key]
    if isinstance(val, bool) and kind is not bool:
        raise CertificateError(f"{where}: field {key!r} has the wrong type")
    if not isinstance(val, kind):
        raise CertificateError(f"{where}: field {key!r} has the wrong type")
    return val


def _array(value: Any, shape: tuple[int, ...], where: str) -> NDArray[np.float64]:
    """A finite array of ``shape`` from JSON numbers only (a string or a boolean is rejected,
    not converted), by the strict reader shared with the other certificate kinds."""
    from certificates import strict_json as sj

    try:
        if len(shape) == 1:
            return sj.vector(where, value, shape[0])
        if len(shape) == 2:
            return sj.matrix(where, value, shape[0], shape[1])
    except sj.FieldError as exc:
        raise CertificateError(str(exc)) from None
    raise CertificateError(f"{where}: must be an array of shape {shape}")  # pragma: no cover


def _check_totals(rec: dict[str, Any], bound: float, report: PrivacyReport,
                  reasons: list[str]) -> None:
    """The record's stated guarantee (``totals``) may claim less privacy than the one recomputed
    from its releases, never more: its bound, mu and every epsilon(delta) are at least the
    recomputed ones (which the sampler computes the same way)."""
    from certificates import strict_json as sj

    totals = _need(rec, "totals", dict, "record")
    try:
        stated = [("totals.bound", sj.number("totals.bound", totals.get("bound")), bound),
                  ("totals.gdp_mu", sj.number("totals.gdp_mu", totals.get("gdp_mu")),
                   report.gdp_mu)]
        eps = totals.get("epsilon")
        if type(eps) is not dict:
            sj.fail("totals.epsilon", f"must be an object, got {sj.kind_of(eps)}")
        for key, val in eps.items():
            field_name = f"totals.epsilon[{key[:20]!r}]"
            try:
                delta = float(key)
            except ValueError:
                sj.fail(field_name, "the key must be a delta in (0, 1)")
            if not 0.0 < delta < 1.0:
                sj.fail(field_name, "the key must be a delta in (0, 1)")
            stated.append((field_name, sj.number(field_name, val), float(report.epsilon(delta))))
    except sj.FieldError as exc:
        raise CertificateError(str(exc)) from None
    for name, value, proven in stated:
        if value < proven:
            reasons.append(f"{name} = {value!r} claims more privacy than the releases prove "
                           f"({proven!r})")


def _domain(spec: Any) -> Domain:
    if not isinstance(spec, dict):
        raise CertificateError("domain: must be an object")
    from certificates import strict_json as sj
    from dpopt.errors import DpoptError

    kind = spec.get("kind")
    try:
        if kind == "grid":
            shape = spec.get("shape")
            if type(shape) is not list:
                sj.fail("domain.shape", f"must be an array, got {sj.kind_of(shape)}")
            return Grid(sj.vector("domain.lower", spec.get("lower"), min_len=1),
                        sj.vector("domain.upper", spec.get("upper"), min_len=1),
                        tuple(sj.integer(f"domain.shape[{i}]", v, 1)
                              for i, v in enumerate(shape)))
        if kind == "finite":
            pts: Any = spec.get("points")
            n = len(pts) if type(pts) is list else 0
            m = len(pts[0]) if n and type(pts[0]) is list else 0
            return FinitePoints(sj.matrix("domain.points", pts, n, m))
        if kind == "box":
            return Box(sj.vector("domain.lower", spec.get("lower"), min_len=1),
                       sj.vector("domain.upper", spec.get("upper"), min_len=1))
    except sj.FieldError as exc:
        raise CertificateError(str(exc)) from None
    except (DpoptError, TypeError, ValueError) as exc:
        raise CertificateError(f"domain: malformed ({exc})") from None
    raise CertificateError(f"domain: kind {kind!r} cannot be re-checked (grid, finite or box)")


def verify_record(record: dict[str, Any] | str | os.PathLike[str], *, full: bool = False,
                  progress: bool = False) -> RunVerification:
    """Re-check a run record from the file alone (see the module notes).

    Parameters
    ----------
    record : dict or path
    full : bool
        Regenerate every pair of domain points at each query instead of the grid corner
        reduction (slower; the same sup).
    progress : bool
        tqdm bar over the releases.

    Returns
    -------
    RunVerification

    Raises
    ------
    CertificateError
        The record is malformed (a well-formed record whose checks fail returns
        ``holds=False`` with the reasons).
    """
    from tqdm import tqdm

    from dpopt.covariance.mahalanobis_sup import sup_mahalanobis
    from dpopt.errors import DpoptError

    sup: _Upper | None
    rec = load_record(record) if not isinstance(record, dict) else record
    if rec.get("format") not in SIGMA_KEYS:
        raise CertificateError(f"not a run record (format must be {FORMAT!r})")
    sigma_key = SIGMA_KEYS[rec["format"]]
    if rec.get("relation") != "add_remove":
        raise CertificateError("record: relation must be 'add_remove'")
    dom = _domain(rec.get("domain"))
    d = dom.dim
    k = _need(rec, "samples", int, "record")
    t = _need(rec, "steps", int, "record")
    if k < 1 or t < 1:
        raise CertificateError("record: samples and steps must be >= 1")
    sampler = _need(rec, "sampler", str, "record")
    prediction = _need(rec, "prediction", str, "record")
    if sampler not in ("ddim", "ddpm") or prediction not in ("x0", "eps"):
        raise CertificateError("record: sampler must be ddim/ddpm and prediction x0/eps")
    if _need(rec, "noise", str, "record") not in ("optimal", "isotropic"):
        raise CertificateError("record: noise must be 'optimal' or 'isotropic'")
    _array(rec.get("weight"), (d, d), "weight")
    sched_spec = _need(rec, "schedule", dict, "record")
    _need(sched_spec, "name", str, "schedule")
    try:
        sched = Schedule(_array(sched_spec.get("alpha_bar"), (t,), "schedule.alpha_bar"))
    except DpoptError as exc:
        raise CertificateError(f"schedule: {exc}") from None
    starts = _array(rec.get("initial_states"), (k, d), "initial_states")
    split = _need(rec, "split", dict, "record")
    _need(split, "rule", str, "split")
    per_step = _array(split.get("per_step_bound"), (t,), "split.per_step_bound")
    budget = _need(rec, "budget", dict, "record")
    _need(budget, "description", str, "budget")
    reasons: list[str] = []
    spec = budget.get("spec")
    stored_q = budget.get("mahalanobis_bound")
    if spec is not None:
        try:
            budget_q = float(parse_budget(str(spec)).mahalanobis_bound())
        except DpoptError as exc:
            raise CertificateError(f"budget: spec {spec!r} does not parse ({exc})") from None
    elif isinstance(stored_q, float | int) and not isinstance(stored_q, bool):
        budget_q = float(stored_q)
    else:
        raise CertificateError("budget: needs a spec or a mahalanobis_bound")
    rels = _need(rec, "releases", list, "record")
    if len(rels) != k * t:
        raise CertificateError(f"releases: {len(rels)} entries, expected samples*steps = {k * t}")
    table: dict[tuple[int, int], dict[str, Any]] = {}
    for i, r in enumerate(rels):
        if not isinstance(r, dict):
            raise CertificateError(f"releases[{i}]: must be an object")
        key = (_need(r, "sample", int, f"releases[{i}]"), _need(r, "step", int, f"releases[{i}]"))
        if key in table or not (0 <= key[0] < k and 0 <= key[1] < t):
            raise CertificateError(
                f"releases[{i}]: (sample, step) = {key} repeated or out of range")
        table[key] = r
    exact = Fraction(0)
    worst = 0.0
    bar = tqdm(total=k * t, desc="re-checking releases", unit="release", disable=not progress)
    from solvers.threads import blas_limits

    # thousands of tiny triangular solves: a multi-threaded BLAS only adds contention
    limits = blas_limits(1)
    limits.__enter__()  # restored in the finally below
    try:
        for j in range(k):
            state = starts[j].copy()
            for s in range(t):
                r = table[(j, s)]
                where = f"release (sample {j}, step {s})"
                a = float(sched.alpha_bar[s])
                a_next = float(sched.next_alpha_bar[s])
                sig = float(sched.sigma[s])
                g = state / math.sqrt(a)
                g_stored = _array(r.get("query"), (d,), f"{where}: query")
                q = _need(r, "q", float, where)
                cov = _array(r.get("covariance"), (d, d), f"{where}: covariance")
                rel_val = _array(r.get("release"), (d,), f"{where}: release")
                if not np.allclose(g_stored, g, rtol=REPLAY_RTOL, atol=REPLAY_RTOL):
                    reasons.append(f"{where}: the stored query is not the one the sampler "
                                   "derives from the earlier releases")
                sig_stored = r.get(sigma_key)
                if not isinstance(sig_stored, float) or not math.isclose(
                        sig_stored, sig, rel_tol=REPLAY_RTOL):
                    reasons.append(f"{where}: {sigma_key} does not match the schedule")
                if q != float(per_step[s]):
                    reasons.append(f"{where}: q differs from the split's bound for step {s}")
                vecs = release_set(dom, g_stored, sig, reduce=not full)
                dense: Any
                if isinstance(vecs, BoxTwoRecordSet):  # certified sup over the whole box
                    dense = vecs
                    if prediction == "eps":
                        raise CertificateError(f"{where}: the box route releases x0 only")
                else:
                    dense = (vecs if isinstance(vecs, np.ndarray)
                             else np.asarray(vecs.take(np.arange(vecs.count, dtype=np.intp))))
                    if prediction == "eps":
                        dense = dense / sig
                try:
                    if isinstance(dense, BoxTwoRecordSet):
                        # branch and bound to well inside the design's final scaling margin
                        box_sup = dense.sup(cov, tol=BOX_TOL, stop_below=q)
                        sup = _Upper(float(box_sup.upper))
                    else:
                        sup = _Upper(float(sup_mahalanobis(dense, cov).upper))
                except DpoptError as exc:
                    reasons.append(f"{where}: covariance rejected ({exc})")
                    sup = None
                if sup is not None:
                    ratio = float(sup.upper) / q if q > 0 else math.inf
                    worst = max(worst, ratio)
                    if not sup.upper <= q:
                        reasons.append(f"{where}: Mahalanobis sup {sup.upper!r} exceeds q = {q!r}")
                exact += Fraction(q)
                x0 = g_stored - sig * rel_val if prediction == "eps" else rel_val
                anc = r.get("ancestral_noise")
                noise = None if anc is None else _array(anc, (d,), f"{where}: ancestral_noise")
                if sampler == "ddpm" and a_next < 1.0 and noise is None:
                    reasons.append(f"{where}: DDPM step without its ancestral noise")
                state = step_update(state, x0, a, a_next, sampler, noise)
                bar.update(1)
    finally:
        bar.close()
        limits.__exit__(None, None, None)
    if not exact <= Fraction(budget_q):
        reasons.append(f"composition: sum of q_t = {float(exact)!r} exceeds the budget's bound "
                       f"Q = {budget_q!r}")
    bound = round_up(exact)
    report = PrivacyReport(bound)
    _check_totals(rec, bound, report, reasons)
    return RunVerification(holds=not reasons, reasons=tuple(reasons[:20]), releases=k * t,
                           worst_ratio=worst, bound=bound, budget_bound=budget_q,
                           privacy=report)


def verify_run_file(path: Path, content: dict[str, Any],
                    options: VerifyOptions) -> Verification:
    """Verifier of ``dpopt-diffusion-run/2`` (and ``/1``) files for
    :func:`dpopt.verification.verify` (``dpopt verify run.json``): :func:`verify_record` on the
    decoded file; raises
    :class:`CertificateError` naming the first failed release when the record does not hold."""
    from dpopt.verification import Verification

    v = verify_record(content)
    if not v.holds:
        raise CertificateError(f"run record {os.fspath(path)!r} does not hold: "
                               + "; ".join(v.reasons[:3]))
    rec = content
    rep = v.privacy
    # one privacy report, as every command prints it (to_dict's gdp_mu and epsilon are in it)
    summary = {k: val for k, val in v.to_dict().items() if k not in ("gdp_mu", "epsilon")}
    summary["privacy"] = rep.to_dict(deltas=(1e-5, 1e-6, 1e-8))
    lines = (
        f"{rec['samples']} samples x {rec['steps']} steps = {v.releases} releases "
        f"({rec['sampler']}, {rec['prediction']}-prediction, {rec['noise']} noise) on the "
        f"{rec['domain']['kind']} domain, add/remove relation",
        "every query re-derived from the start points and the earlier releases; every "
        "covariance re-checked at its query over the whole two-record set: "
        f"max sup/q_t = {v.worst_ratio!r} <= 1 (rounding accounted for)",
        f"composition: sum of q_t = {v.bound:.10g} <= Q = {v.budget_bound:.10g} of the budget "
        f"{rec['budget'].get('description', '')} (exact rational arithmetic)",
        f"the run is mu = {rep.gdp_mu:.6g}-GDP (adaptive composition of Gaussian mechanisms); "
        + ", ".join(f"delta={d:g}: eps={float(rep.epsilon(d)):.6g}" for d in (1e-5, 1e-6, 1e-8)),
        "the record's stated totals claim no more privacy than that; its error figures and "
        "per-release design reports are informational (not part of the guarantee)",
    )
    return Verification(kind="private sampling run", format=str(rec["format"]), path=str(path),
                        summary=summary, lines=lines, result=v)
