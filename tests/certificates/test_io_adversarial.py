"""Adversarial certificate files: every field of several real files edited every way, digests
recomputed. Each edited file must be rejected with a CertificateError (never another exception),
or, if accepted, every claim it makes must hold by an independent exact computation
(:mod:`tests.certificates.io_reference`: brute-force sup of sᵀΣ⁻¹s and the file's dual bound in
rational arithmetic, and the known closed-form optimum of the canonical problems).

Families: ``numbers`` (nudges of every number both ways: 9e-10, 1e-8, ulp, 1e-6, ×2, ½, sign,
0; ±1 on integers), ``nonfinite`` (NaN, ±inf, 1e400), ``types`` (every value as string,
boolean, null, array, object, int), ``structure`` (every field deleted, a field added to every
object), ``huge`` (every array made 1000× longer, every array replaced by 100000-deep nesting),
``claims`` (claimed interval and flags rewritten), ``sigma`` (Σ swapped, scaled, permuted).
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.errors import CertificateError
from certificates.io import verify_file, write_certificate
from certificates.problem import CovarianceProgram
from tests.canonical import F1, F1_HALF, F3, CanonicalCase, ChunkedArray
from tests.certificates import mutations as mu
from tests.certificates.closed_form import kkt_dual
from tests.certificates.io_reference import check_accepted


@dataclass
class Base:
    content: dict[str, Any]
    vectors: NDArray[np.float64]
    source: ChunkedArray | None
    known: float


def _make(tmp: Path, name: str, vectors: NDArray[np.float64], weight: NDArray[np.float64],
          q: float, eta: float, rigorous: bool, known: float, sigma: NDArray[np.float64],
          unstored: bool = False) -> Base:
    """A file of the closed-form optimum ``sigma`` with its stationarity dual."""
    src = ChunkedArray(vectors) if unstored else None
    prob = CovarianceProgram(src if src is not None else vectors, weight, q, eta)
    dual = kkt_dual(CovarianceProgram(vectors, weight, q, eta), sigma)
    cert = check(prob, sigma, dual, rigorous=rigorous)
    assert cert.certified
    path = tmp / f"{name}.json"
    write_certificate(path, prob, cert, dual,
                      description="F1 cube vectors" if unstored else None)
    return Base(json.loads(path.read_text()), vectors, src, known)


def _sigma(case: CanonicalCase) -> NDArray[np.float64]:
    assert case.covariance is not None
    return np.array(case.covariance)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Base]:
    tmp = tmp_path_factory.mktemp("bases")
    one_d = np.array([[1.0], [-3.0], [2.0]])
    return {
        # the F1 cube (closed-form optimum (√2 + 1 + √½)²/q), floor η = 0.3 inactive
        "F1-rigorous": _make(tmp, "f1r", F1.vectors, F1.weight, 1.0, 0.3, True, F1.value,
                             _sigma(F1)),
        "F1half-float": _make(tmp, "f1h", F1_HALF.vectors, F1_HALF.weight, 0.5, 0.0, False,
                              F1_HALF.value, _sigma(F1_HALF)),
        "F3-rigorous": _make(tmp, "f3", F3.vectors, F3.weight, 2.0, 0.0, True, F3.value,
                             _sigma(F3)),
        # d = 1: optimum Σ = max_j s_j² / q = 18, value w Σ = 2 · 9 / 0.5 = 36 exactly
        "1D-rigorous": _make(tmp, "d1", one_d, np.array([[2.0]]), 0.5, 0.0, True, 36.0,
                             np.array([[18.0]])),
        "F1-source-float": _make(tmp, "f1s", F1.vectors, F1.weight, 1.0, 0.0, False, F1.value,
                                 _sigma(F1), unstored=True),
    }


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A scratch folder in memory when the machine has one (thousands of small files)."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(dir=shm, prefix="dpopt-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _outcome(base: Base, text: str, path: Path) -> str:
    """'rejected' or 'accepted' (accepted files are re-derived independently)."""
    path.write_text(text)
    try:
        verify_file(path, source=base.source)
    except CertificateError as exc:
        assert str(exc)  # a reason is given
        return "rejected"
    content = json.loads(text)  # an accepted file must be plain, finite JSON
    vectors = (np.asarray(content["problem"]["vectors"], dtype=np.float64)
               if content["problem"]["vectors"] is not None else base.vectors)
    same = content["problem"] == base.content["problem"]
    check_accepted(content, vectors, known_optimum=base.known if same else None,
                   rigorous_slack=1e-12)
    return "accepted"


def test_unedited_files_verify_and_hold(bases: dict[str, Base], tmp_path: Path) -> None:
    for name, base in bases.items():
        assert _outcome(base, mu.render(copy.deepcopy(base.content)), tmp_path / name) == (
            "accepted"
        )
        lo, up = base.content["claim"]["lower"], base.content["claim"]["upper"]
        assert lo <= base.known <= up  # the claim contains the closed-form optimum


def _sweep(base: Base, tmp_path: Path, nudges: tuple[str, ...]) -> Counter[str]:
    seen: Counter[str] = Counter()
    for family, label, edited in mu.edits(base.content, nudges=nudges):
        result = _outcome(base, mu.render(edited, label=label), tmp_path / "e.json")
        seen[f"{family}:{result}"] += 1
        # claims that are false by construction must never be accepted
        if label.startswith(("claim/certified:str", "claim/lower:nan")):
            assert result == "rejected", label
    return seen


@pytest.mark.parametrize("name", ["F1-rigorous", "1D-rigorous"])
def test_every_field_edited(name: str, bases: dict[str, Base], fast_dir: Path) -> None:
    seen = _sweep(bases[name], fast_dir, mu.FAST_NUDGES)
    print(f"\n{name}: {dict(sorted(seen.items()))}")
    for family in ("numbers", "nonfinite", "types", "structure", "huge"):
        assert sum(v for k, v in seen.items() if k.startswith(family)) > 0
    # malformed files are always rejected
    for family in ("nonfinite", "types", "structure", "huge"):
        assert seen[f"{family}:accepted"] == 0, family


@pytest.mark.slow
@pytest.mark.parametrize("name", ["F1-rigorous", "F1half-float", "F3-rigorous", "1D-rigorous",
                                  "F1-source-float"])
def test_every_field_edited_all_nudges(name: str, bases: dict[str, Base],
                                       fast_dir: Path) -> None:
    seen = _sweep(bases[name], fast_dir, tuple(mu.NUDGES))
    print(f"\n{name} (all nudges): {dict(sorted(seen.items()))}")


# ----------------------------------------------------------------------------- hypothesis

_KINDS = ("factor", "nonfinite", "swap", "delete", "add", "huge", "claims", "sigma")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_edits(bases: dict[str, Base], fast_dir: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(bases)), label="base")
    base = bases[name]
    content = copy.deepcopy(base.content)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        kind = data.draw(st.sampled_from(_KINDS), label="kind")
        if kind == "claims":
            if not isinstance(content.get("claim"), dict):
                continue  # an earlier edit replaced the claim itself: nothing to edit inside
            up = base.content["claim"]["upper"]
            field = data.draw(st.sampled_from(["lower", "upper", "gap", "certified", "rigorous",
                                               "tol"]))
            if field in ("certified", "rigorous"):
                content["claim"][field] = data.draw(st.booleans())
            else:
                content["claim"][field] = data.draw(
                    st.floats(0.0, 2 * up, allow_nan=False) | st.floats(allow_nan=False))
            if data.draw(st.booleans()):  # keep the claim self-consistent
                lo_c, up_c = content["claim"]["lower"], content["claim"]["upper"]
                if isinstance(lo_c, float) and isinstance(up_c, float) and up_c > 0:
                    content["claim"]["gap"] = (up_c - lo_c) / up_c
            continue
        if kind == "sigma":
            sig = np.asarray(base.content["covariance"])
            how = data.draw(st.sampled_from(["scale", "permute", "other", "rank-one"]))
            if how == "scale":
                sig = sig * data.draw(st.floats(0.5, 1.0, exclude_max=True))
            elif how == "permute" and sig.shape[0] > 1:
                perm = np.roll(np.arange(sig.shape[0]), 1)
                sig = sig[np.ix_(perm, perm)]
            elif how == "other":
                others = [b for b in bases.values()
                          if np.asarray(b.content["covariance"]).shape == sig.shape]
                sig = np.asarray(data.draw(st.sampled_from(others)).content["covariance"])
            else:
                v = np.ones(sig.shape[0])
                sig = sig - data.draw(st.floats(1e-9, 1e-3)) * np.outer(v, v)
            content["covariance"] = sig.tolist()
            continue
        nodes = [p for p, _ in mu.walk(content) if p]
        path = data.draw(st.sampled_from(nodes), label="path")
        value = mu.get(content, path)
        if kind == "factor":
            if type(value) is float:
                mu.put(content, path, value * data.draw(st.floats(1 - 1e-6, 1 + 1e-6)))
            elif type(value) is int:
                mu.put(content, path, value + data.draw(st.integers(-2, 2)))
        elif kind == "nonfinite":
            mu.put(content, path, data.draw(st.sampled_from([math.nan, math.inf, -math.inf,
                                                             mu.BIG])))
        elif kind == "swap":
            mu.put(content, path, data.draw(st.sampled_from(list(mu.SWAPS.values())))(value))
        elif kind == "delete" and isinstance(mu.get(content, path[:-1]), dict):
            mu.delete(content, path)
        elif kind == "add" and isinstance(value, dict):
            value[data.draw(st.text(min_size=1, max_size=5))] = 0.0
        elif kind == "huge" and isinstance(value, list):
            mu.put(content, path, value * 500 if value else [0.0] * 500)
    rehash = data.draw(st.booleans() | st.just(True), label="rehash")
    _outcome(base, mu.render(content, rehash=rehash), fast_dir / "h.json")
