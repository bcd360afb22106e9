"""Audit of dpopt's certificates at the numerical edges: the figures of the certificates guide.

Run from a clone's root (it uses the independent references of the test suite)::

    python scripts/audit_certificates.py            # the full audit (a few minutes)
    python scripts/audit_certificates.py --small    # the form the test suite runs
    python scripts/audit_certificates.py --json     # the counts as JSON

Suites, and what each counts:

``offsets``
    Calibrations of laws shifted by 1e12 .. 1e16 (timestamps, IDs): the coupling route
    (Laplace and Gaussian at α = 2, Laplace at α = ∞) and the tight route. Each released scale
    is re-checked against the true divergence of the noisy laws, integrated by mpmath after an
    exact shift; each "not private" claim of the tight route too. Point masses at the same
    offsets give the pure loss |x - y|/b exactly: checked in rational arithmetic.
``tampered``
    Every field of a real file of every kind ``dpopt verify`` reads (covariance design, tight
    Pufferfish certificate at α = 2 and α = ∞, sampling run record) edited every way (numbers
    nudged both ways, non-finite values, type swaps, deletions, added fields, huge arrays),
    digests recomputed, then verified through the same dispatcher as ``dpopt verify``. An
    accepted edit's claim is re-derived independently (exact rationals for a covariance design,
    mpmath for a tight certificate, a brute-force sup over every pair of domain points and exact
    composition for a run record).
``malformed``
    Random text edits of the same files (characters replaced, spans deleted or repeated) run
    through ``dpopt verify`` itself: the exit status must be 0 or 1, never a traceback. A draw
    that leaves the text as it was (a character replaced by itself) is not an edit: it is drawn
    again.
``ill_conditioned``
    ``design_covariance`` on rotated weights of condition up to 1e12: the relative gap proven by
    the independent check in rigorous mode, and the privacy of Σ (max sᵀΣ⁻¹s <= q in exact
    rationals).
``trivial``
    Closed-form instances (ηI optimal, a line of vectors, a single vector): found before any
    iterative solve and certified exactly.
``writers``
    Every place in the package that writes a file, found by scanning the source: each must be
    the writer of a kind ``dpopt verify`` reads (one real file of each is written and read back
    with its kind) or a declared non-certificate output (figures, plots, the samples CSV).

The audit passes when false claims accepted, crashes, under-noised scales and unclassified
writers are all 0, every trivial instance is certified exactly and the proven gap at condition
1e12 is at most 1e-8.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import itertools
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from certificates.errors import CertificateError  # noqa: E402
from dpopt.verification import BUILTIN_KINDS, verify  # noqa: E402
from tests.certificates import mutations as mu  # noqa: E402
from tests.certificates.io_reference import check_accepted, exact_sup, fmat  # noqa: E402
from tests.dpopt.test_certificate_numerical_edges import LAW_P, LAW_Q, reference  # noqa: E402
from tests.dpopt.test_mixture_adversarial import _claim_is_true  # noqa: E402

Counts = dict[str, Any]


# ----------------------------------------------------------------------------- offsets
def _true_worst(sc: Any, noise: str, alpha: float, scale: float) -> float:
    worst = 0.0
    for _, _, _, pl, ql in sc.iter_pairs():
        x, p = pl.support[:, 0].tolist(), pl.probabilities.tolist()
        y, q = ql.support[:, 0].tolist(), ql.probabilities.tolist()
        worst = max(worst, reference(x, p, y, q, noise, scale, alpha),
                    reference(y, q, x, p, noise, scale, alpha))
    return worst


def suite_offsets(small: bool) -> Counts:
    from dpopt.pufferfish import Scenario, calibrate, calibrate_tight, make_cost

    offsets = [1.7e15, 1e16] if small else [0.0, 1e12, 1.7e12, 1e15, 1.7e15, 8e15, 1e16, -1e16]
    routes = [("laplace", 2.0), ("laplace", math.inf)] if small else [
        ("laplace", 2.0), ("gaussian", 2.0), ("laplace", math.inf)]
    out: Counter[str] = Counter()
    eps = 1.0
    for off in offsets:
        sc = Scenario.from_laws({"a": (np.array(LAW_P[0]) + off, LAW_P[1]),
                                 "b": (np.array(LAW_Q[0]) + off, LAW_Q[1])})
        for noise, alpha in routes:
            cal = calibrate(sc, make_cost(noise, alpha), eps)
            out["scales"] += 1
            if _true_worst(sc, noise, alpha, cal.scale) > eps * (1 + 1e-9):
                out["under_noise"] += 1
            tc = calibrate_tight(sc, alpha, eps, noise)
            out["scales"] += 1
            if _true_worst(sc, noise, alpha, tc.scale) > eps * (1 + 1e-9):
                out["under_noise"] += 1
            if tc.refuted_scale is not None:
                out["refutations"] += 1
                if _true_worst(sc, noise, alpha, tc.refuted_scale) <= eps * (1 - 1e-9):
                    out["false_claims"] += 1
        for gap in (1.0, 3.0, 0.37):
            x = off + gap * max(1.0, 4096.0 * math.ulp(off))
            pm = Scenario.from_laws({"a": ([x], [1.0]), "b": ([off], [1.0])})
            for e in (1.0, 0.1, 7.0):
                b = calibrate(pm, make_cost("laplace", math.inf), e).scale
                out["point_masses"] += 1
                if abs(Fraction(x) - Fraction(off)) > Fraction(b) * Fraction(e):
                    out["under_noise"] += 1
    return {"offsets": offsets, **dict(out), "under_noise": out["under_noise"],
            "false_claims": out["false_claims"]}


# ----------------------------------------------------------------------------- base files
def _grid() -> Any:
    from dpopt.covariance.domains import Grid

    return Grid(np.zeros(2), np.ones(2), (3, 3))


#: What the audit writes in place of the software versions a file records (``versions`` of the
#: certificate formats, ``software`` of a run record): they are reports, not claims, and they
#: differ between machines and between an installed and a source checkout, so left as written
#: they would change the edits drawn and the counts the certificates guide quotes.
PINNED_VERSIONS = {"python": "3", "numpy": "2"}


def _pin_versions(path: Path) -> dict[str, Any]:
    """Rewrite the file at ``path`` with its version fields pinned (digests recomputed)."""
    content = json.loads(path.read_text())
    for key in ("versions", "software"):
        if isinstance(content.get(key), dict):
            kept = {k: v for k, v in content[key].items() if k == "produced_by"}
            content[key] = {**PINNED_VERSIONS, **kept} if key == "versions" else {"dpopt": "0"}
    path.write_text(mu.render(content))
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def base_files(tmp: Path) -> dict[str, tuple[Path, dict[str, Any], Any]]:
    """One real file of each kind, written by its public writer: name -> (path, content, aux),
    with the version fields pinned (:data:`PINNED_VERSIONS`)."""
    from dpopt import GDP, design_covariance
    from dpopt.accounting.budgets import ApproxDP
    from dpopt.diffusion.record import save_record
    from dpopt.diffusion.sampler import sample_private
    from dpopt.pufferfish import Scenario, calibrate_tight

    out: dict[str, tuple[Path, dict[str, Any], Any]] = {}
    vectors = np.array([[1.0, 0.5], [-0.3, 2.0], [0.7, -1.1], [2.0, 0.1]])
    design = design_covariance(vectors, GDP(1.0), weight=np.array([[2.0, 0.3], [0.3, 1.0]]))
    path = tmp / "design.json"
    design.save(path)
    out["covariance design"] = (path, _pin_versions(path), vectors)
    sc = Scenario.from_laws({"a": LAW_P, "b": LAW_Q})
    for name, alpha in (("tight Pufferfish (alpha 2)", 2.0),
                        ("tight Pufferfish (alpha inf)", math.inf)):
        path = tmp / f"tight-{alpha}.json"
        calibrate_tight(sc, alpha, 1.0, "laplace").write_certificate(path)
        out[name] = (path, _pin_versions(path), None)
    rng = np.random.default_rng(0)
    data = np.clip(rng.normal([0.3, 0.6], 0.15, (20, 2)), 0.0, 1.0)
    run = sample_private(data, _grid(), ApproxDP(3.0, 1e-5), samples=1, steps=2, rng=3)
    path = tmp / "run.json"
    save_record(run.record, path)
    out["sampling run record"] = (path, _pin_versions(path), None)
    return out


# ----------------------------------------------------------------------------- independent checks
#: Fields of a run record that are reports, not part of its guarantee (the error baselines, the
#: per-release design summaries, the software version): an accepted edit of them is no claim.
RUN_INFORMATIONAL = re.compile(
    r"^(software|releases/\d+/(errors|certificate)|totals/(errors|uniform_query_unit_value|"
    r"diameter_squared))(/|:|$)")


def _run_claim_holds(content: dict[str, Any]) -> bool:
    """A run record's privacy claim, by brute force: at every release the covariance meets its
    q over every ordered pair of grid points, sum q_t <= Q exactly, and the stated totals
    (bound, mu, epsilon(delta) of mu-GDP, Dong, Roth and Su's formula written out here) claim
    no more than sqrt(sum q_t)-GDP."""
    from scipy.special import expit
    from scipy.stats import norm

    from dpopt.accounting.budgets import parse_budget

    points = _grid().points
    total = Fraction(0)
    # each record format spells the denoiser's noise level its own way (written out here, not
    # read from dpopt): a file whose key does not match its format makes no claim that holds
    sigma_key = {"dpopt-diffusion-run/2": "denoiser_sigma",
                 "dpopt-diffusion-run/1": "sigma"}.get(content.get("format", ""))
    if sigma_key is None or any(sigma_key not in r for r in content["releases"]):
        return False
    for r in content["releases"]:
        g, sigma = np.array(r["query"], dtype=float), float(r[sigma_key])
        prec = np.linalg.inv(np.array(r["covariance"], dtype=float))
        best = 0.0
        for x, y in itertools.permutations(points, 2):
            z = (np.sum((g - y) ** 2) - np.sum((g - x) ** 2)) / (2.0 * sigma**2)
            t = expit(z) * (x - y)
            best = max(best, float(t @ prec @ t))
        if best > float(r["q"]) * (1 + 1e-9):
            return False
        total += Fraction(float(r["q"]))
    spec = content["budget"].get("spec")
    cap = (parse_budget(spec).mahalanobis_bound() if spec is not None
           else content["budget"]["mahalanobis_bound"])
    if total > Fraction(float(cap)):
        return False
    tot = content["totals"]
    mu = math.sqrt(float(total))
    if Fraction(float(tot["bound"])) < total or float(tot["gdp_mu"]) < mu * (1 - 1e-15):
        return False
    for key, eps in tot["epsilon"].items():
        delta = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        if delta > float(key) * (1 + 1e-9):
            return False
    return True


def claim_holds(kind: str, content: Any, aux: Any) -> bool:
    """Whether what an accepted file claims is true, by a computation independent of dpopt's
    checkers."""
    if kind == "covariance design":
        vecs = content["problem"]["vectors"]
        try:
            check_accepted(content, np.asarray(vecs if vecs is not None else aux, dtype=float),
                           rigorous_slack=1e-12)
        except AssertionError:
            return False
        return True
    if kind.startswith("tight"):
        return bool(_claim_is_true(content))
    return _run_claim_holds(content)


def _verify(path: Path) -> str:
    try:
        verify(path)
    except CertificateError as exc:
        return "rejected" if str(exc) else "crash"
    except Exception:  # a crash is what this audit counts
        return "crash"
    return "accepted"


# ----------------------------------------------------------------------------- tampered
def _first_entries(label: str) -> bool:
    return not any(part.isdigit() and int(part) > 0 for part in label.split(":")[0].split("/"))


def suite_tampered(bases: dict[str, tuple[Path, dict[str, Any], Any]], tmp: Path,
                   small: bool) -> Counts:
    rng = np.random.default_rng(1)
    out: dict[str, Counter[str]] = {}
    for kind, (_, content, aux) in bases.items():
        edits = [e for e in mu.edits(content) if _first_entries(e[1])
                 and not e[1].endswith("huge-array")]
        if small:
            edits = [edits[int(i)] for i in rng.choice(len(edits), min(25, len(edits)),
                                                       replace=False)]
        seen: Counter[str] = Counter()
        for family, label, edited in edits:
            if kind == "sampling run record" and RUN_INFORMATIONAL.match(label):
                family = "informational"
            path = tmp / "edited.json"
            path.write_text(mu.render(copy.deepcopy(edited), label=label))
            result = _verify(path)
            seen["edits"] += 1
            seen[result] += 1
            if result == "accepted" and family != "informational":
                if not claim_holds(kind, json.loads(path.read_text()), aux):
                    seen["false_claims_accepted"] += 1
        out[kind] = seen
    return _total(out)


def _total(per_kind: dict[str, Counter[str]]) -> Counts:
    keys = ("edits", "rejected", "accepted", "crash", "false_claims_accepted")
    total = {k: sum(c[k] for c in per_kind.values()) for k in keys}
    return {**total, "per_kind": {k: {kk: c[kk] for kk in keys} for k, c in per_kind.items()}}


# ----------------------------------------------------------------------------- malformed
def _text_edits(text: str, rng: np.random.Generator, n: int) -> Iterator[str]:
    alphabet = list('0123456789-+.eE"{}[],: ntruefalsNI')
    for _ in range(n):
        t = text
        while t == text:  # an unchanged file is no edit (verify rightly accepts it)
            for _ in range(int(rng.integers(1, 4))):
                i = int(rng.integers(0, max(1, len(t))))
                op = int(rng.integers(0, 3))
                if op == 0:
                    t = t[:i] + str(rng.choice(alphabet)) + t[i + 1:]
                elif op == 1:
                    t = t[:i] + t[i + int(rng.integers(1, 40)):]
                else:
                    j = i + int(rng.integers(1, 40))
                    t = t[:j] + t[i:j] + t[j:]
        yield t


def suite_malformed(bases: dict[str, tuple[Path, dict[str, Any], Any]], tmp: Path,
                    small: bool) -> Counts:
    from dpopt.cli.main import main

    rng = np.random.default_rng(2)
    out: dict[str, Counter[str]] = {}
    for kind, (src, _, aux) in bases.items():
        seen: Counter[str] = Counter()
        for text in _text_edits(src.read_text(), rng, 15 if small else 200):
            path = tmp / "fuzzed.json"
            path.write_text(text)
            seen["edits"] += 1
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    code = main(["verify", str(path)])
            except BaseException:  # a traceback is the failure counted
                seen["crash"] += 1
                continue
            if code not in (0, 1):
                seen["crash"] += 1
            elif code == 1:
                seen["rejected"] += 1
            else:
                seen["accepted"] += 1
                try:
                    content = json.loads(text)
                    ok = claim_holds(kind, content, aux)
                except (ValueError, KeyError, TypeError):
                    ok = False
                if not ok:
                    seen["false_claims_accepted"] += 1
        out[kind] = seen
    return _total(out)


# ----------------------------------------------------------------------------- ill-conditioned W
def _rotated(seed: int, d: int, cond: float, *, grow: bool = False) -> np.ndarray:
    """A rotated weight of condition ``cond`` (eigenvalues 1 .. 1/cond, or 1 .. cond)."""
    r = np.random.default_rng(1000 + seed)
    qm, _ = np.linalg.qr(r.standard_normal((d, d)))
    w = (qm * np.geomspace(1.0, cond if grow else 1.0 / cond, d)) @ qm.T
    return np.asarray(0.5 * (w + w.T))


def suite_ill_conditioned(tmp: Path, small: bool) -> Counts:
    import warnings

    from dpopt import GDP, design_covariance

    conds = [1e12] if small else [1e6, 1e9, 1e12]
    seeds = range(1) if small else range(3)
    d, count = (6, 200) if small else (10, 1000)
    rows = []
    for cond, seed in itertools.product(conds, seeds):
        r = np.random.default_rng(seed)
        vectors = r.standard_normal((count, d)) * r.uniform(0.2, 2.0, (count, 1))
        weight = _rotated(40 + seed, d, cond)
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            des = design_covariance(vectors, GDP(1.0), weight=weight)
        path = tmp / f"ill-{cond:g}-{seed}.json"
        des.save(path, overwrite=True)
        ver = verify(path, rigorous=True)
        gap = float(ver.summary["gap"])  # type: ignore[arg-type]
        sup = exact_sup(vectors, fmat(des.covariance))
        rows.append({"cond": cond, "seed": seed, "proven_gap": gap,
                     "certified": bool(ver.summary["certified"]),
                     "under_noise": bool(sup > Fraction(float(des.program.bound))),
                     "cpu_s": round(time.process_time() - t0, 2)})
    worst = max(r["proven_gap"] for r in rows if r["cond"] == max(conds))
    return {"instances": len(rows), "under_noise": sum(r["under_noise"] for r in rows),
            "uncertified": sum(not r["certified"] for r in rows),
            "worst_proven_gap_at_1e12": worst, "rows": rows}


# ----------------------------------------------------------------------------- trivial
def suite_trivial(small: bool) -> Counts:
    from dpopt.accounting.budgets import ZCDP
    from dpopt.covariance.design import design_covariance

    seeds = range(2) if small else range(4)
    out: Counter[str] = Counter()
    worst: dict[str, float] = {}

    def record(name: str, des: Any, tol: float) -> None:
        out["instances"] += 1
        ok = des.certified and "closed form" in des.path and des.certificate.gap <= tol
        out["certified_exactly"] += int(ok)
        worst[name] = max(worst.get(name, 0.0), float(des.certificate.gap))

    for seed, cond in itertools.product(seeds, (1.0, 1e6, 1e12)):
        r = np.random.default_rng(seed)
        w = _rotated(seed, 3, cond, grow=True)
        s = r.standard_normal((5, 3))
        eta = 1.5 * float(np.max(np.sum(s**2, axis=1)))
        record("eta_identity", design_covariance(s, ZCDP(rho=0.5), weight=w, noise_floor=eta),
               3e-12)
        v = r.standard_normal(4)
        line = np.outer(r.standard_normal(6), v)
        record("line", design_covariance(line, ZCDP(rho=0.5),
                                         weight=_rotated(seed + 10, 4, cond, grow=True)),
               1e-9)
        record("single", design_covariance(v[None, :], ZCDP(rho=0.5),
                                           weight=_rotated(seed + 20, 4, cond, grow=True)),
               1e-9)
    return {**dict(out), "worst_gap": worst}


# ----------------------------------------------------------------------------- writers
#: Every call that writes a file in the package, by file: what it writes. A new writer fails the
#: audit until it is listed here (and, if it writes a certificate, registered with dpopt verify).
WRITERS: dict[str, str] = {
    "certificates/io.py": "certificate:dpopt-covariance-certificate/1",
    "certificates/renyi_mixture.py": "certificate:dpopt-renyi-mixture-certificate/2",
    "dpopt/diffusion/record.py": "certificate:dpopt-diffusion-run/2",
    "dpopt/cli/sample.py": "certificate:dpopt-diffusion-run/2 (-o); data: --samples-out CSV",
    "dpopt/cli/common.py": "helper: write_text_safely (used by the writers above)",
    "certificates/strict_json.py": "helper: write_signed (the digest-stamped certificate files "
                                   "of certificates/io.py and certificates/renyi_mixture.py)",
    "dpopt/cli/design.py": "plot: --plot image of a design",
    "dpopt/experiments/tables.py": "data: write_table (the figures' CSV tables, finite or empty)",
    "dpopt/figures/denoiser.py": "figure: CSV table and PNG",
    "dpopt/figures/rpp.py": "figure: CSV tables and PNG",
    "dpopt/figures/fig1.py": "figure: PNG",
    "dpopt/figures/dpsgd.py": "figure: CSV tables and PNG",
    "dpopt/figures/sampler.py": "figure: CSV tables and PNG",
}
_WRITE = re.compile(r"json\.dump\(|\.write_text\(|write_text_safely\(|write_signed\(|"
                    r"\.write_bytes\(|"
                    r"\.to_csv\(|\.savefig\(|open\([^)]*['\"][wax]b?['\"]|os\.open\(")


def suite_writers(bases: dict[str, tuple[Path, dict[str, Any], Any]]) -> Counts:
    sites: dict[str, int] = {}
    for pkg in ("dpopt", "certificates", "solvers"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            n = sum(1 for line in f.read_text().splitlines()
                    if _WRITE.search(line)
                    and not line.lstrip().startswith(("#", ">>>", "...")))
            if n:
                sites[f.relative_to(ROOT).as_posix()] = n
    unclassified = sorted(set(sites) - set(WRITERS))
    tags = {v.split(":", 1)[1].split()[0] for v in WRITERS.values()
            if v.startswith("certificate:")}
    unread = sorted(tags - set(BUILTIN_KINDS))
    read_back = {}
    for kind, (path, content, _) in bases.items():
        ver = verify(path)
        read_back[kind] = ver.format == content["format"]
    return {"write_sites": sites, "unclassified": unclassified,
            "certificate_formats_not_read_by_verify": unread,
            "written_and_read_back": read_back,
            "unclassified_count": len(unclassified) + len(unread)
            + sum(not v for v in read_back.values())}


# ----------------------------------------------------------------------------- main
def audit(small: bool = False, progress: Callable[[str], None] | None = None) -> Counts:
    """Run every suite; return the counts (see the module docstring)."""
    say = progress or (lambda _msg: None)
    with tempfile.TemporaryDirectory(prefix="dpopt-audit-") as d:
        tmp = Path(d)
        result: Counts = {"small": small}
        t0 = time.process_time()
        bases = base_files(tmp)
        for name, fn in (
            ("writers", lambda: suite_writers(bases)),
            ("tampered", lambda: suite_tampered(bases, tmp, small)),
            ("malformed", lambda: suite_malformed(bases, tmp, small)),
            ("offsets", lambda: suite_offsets(small)),
            ("trivial", lambda: suite_trivial(small)),
            ("ill_conditioned", lambda: suite_ill_conditioned(tmp, small)),
        ):
            s0 = time.process_time()
            result[name] = fn()
            result[name]["cpu_s"] = round(time.process_time() - s0, 1)
            say(f"{name}: done in {result[name]['cpu_s']} CPU-s")
        result["cpu_s"] = round(time.process_time() - t0, 1)
    result["passed"] = passed(result)
    return result


def passed(r: Counts) -> bool:
    """Every count the audit's verdict rests on is 0 / all / <= 1e-8."""
    return bool(
        r["tampered"]["false_claims_accepted"] == 0 and r["tampered"]["crash"] == 0
        and r["malformed"]["false_claims_accepted"] == 0 and r["malformed"]["crash"] == 0
        and r["offsets"]["under_noise"] == 0 and r["offsets"]["false_claims"] == 0
        and r["ill_conditioned"]["under_noise"] == 0
        and r["ill_conditioned"]["worst_proven_gap_at_1e12"] <= 1e-8
        and r["trivial"]["certified_exactly"] == r["trivial"]["instances"]
        and r["writers"]["unclassified_count"] == 0
    )


def render(r: Counts) -> str:
    t, m, o = r["tampered"], r["malformed"], r["offsets"]
    ill, tr, w = r["ill_conditioned"], r["trivial"], r["writers"]
    lines = [
        f"tampered files (digests recomputed): {t['edits']} edits, {t['rejected']} rejected, "
        f"{t['accepted']} accepted, {t['false_claims_accepted']} false claims accepted, "
        f"{t['crash']} crashes",
        *(f"  {k}: {v['edits']} edits, {v['accepted']} accepted, "
          f"{v['false_claims_accepted']} false" for k, v in t["per_kind"].items()),
        f"malformed files (dpopt verify): {m['edits']} edits, {m['rejected']} exit 1, "
        f"{m['accepted']} exit 0, {m['false_claims_accepted']} false claims accepted, "
        f"{m['crash']} crashes",
        f"offsets {', '.join(f'{v:g}' for v in o['offsets'])}: {o['scales']} scales and "
        f"{o['point_masses']} point-mass "
        f"scales, {o['under_noise']} under-noised; {o.get('refutations', 0)} 'not private' "
        f"claims, {o['false_claims']} false",
        f"ill-conditioned W: {ill['instances']} designs, worst proven gap at condition 1e12 "
        f"{ill['worst_proven_gap_at_1e12']:.2e}, {ill['uncertified']} uncertified, "
        f"{ill['under_noise']} under-noised",
        f"trivial instances: {tr['certified_exactly']} of {tr['instances']} certified exactly "
        f"(worst gap {', '.join(f'{k} {v:.1e}' for k, v in tr['worst_gap'].items())})",
        f"writers: {len(w['write_sites'])} modules write files, {w['unclassified_count']} "
        f"unclassified; {sum(w['written_and_read_back'].values())} of "
        f"{len(w['written_and_read_back'])} certificate files written and read back by "
        "dpopt verify with their kind",
        f"audit {'PASSED' if r['passed'] else 'FAILED'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--small", action="store_true", help="the short form the tests run")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args(argv)
    r = audit(small=args.small, progress=lambda msg: print(msg, file=sys.stderr))
    print(json.dumps(r, indent=1, default=float) if args.json else render(r))
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
