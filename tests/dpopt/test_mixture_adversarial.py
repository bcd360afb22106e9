"""Adversarial edits of tight Pufferfish certificate files: every field, every way.

Each edit is written back with its sha256 recomputed (so the digest cannot be what rejects it)
by the shared helper :mod:`tests.certificates.mutations`. Outcomes: *accepted* (the re-check
proves what the edited file claims), *rejected* (a CertificateError naming the field or the
failed claim) or *crash* (any other exception: never allowed). Every accepted edit that changes
what the file claims about privacy is re-checked against the independent mpmath reference of
:mod:`tests.dpopt.test_certificate_numerical_edges` (0 false claims accepted).
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certificates.errors import CertificateError
from certificates.renyi_mixture import verify_mixture_file
from dpopt.cli.main import main
from dpopt.pufferfish import Scenario, calibrate_tight
from tests.certificates import mutations as mu
from tests.dpopt.test_certificate_numerical_edges import LAW_P, LAW_Q, reference

COUNTS: Counter[str] = Counter()

#: Edits of a type or of the structure that leave a valid claim (accepted correctly):
#: dropping the optional lower bound, and the pair list repeated 1000 times (the same true claim,
#: skipped in the fast sweep: it is 1000 re-checks).
LEGIT = {"claim/lower_below:null", "pairs:huge-array"}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    tmp = tmp_path_factory.mktemp("mixture-bases")
    sc = Scenario.from_laws({"a": LAW_P, "b": LAW_Q})
    for name, noise, alpha in (("lap2", "laplace", 2.0), ("lapinf", "laplace", math.inf),
                               ("gauss2", "gaussian", 2.0)):
        path = tmp / f"{name}.json"
        calibrate_tight(sc, alpha, 1.0, noise).write_certificate(path)
        out[name] = json.loads(path.read_text())
    return out


_TRUTH: dict[str, bool] = {}


def _claim_is_true(content: dict[str, Any]) -> bool:
    """Independent check of what an accepted file claims (mpmath, exact shift)."""
    key = json.dumps({k: content[k] for k in ("noise", "alpha", "epsilon", "scale",
                                              "refuted_scale", "pairs", "claim")},
                     sort_keys=True)
    if key in _TRUTH:
        return _TRUTH[key]
    # alpha = infinity is null in format /2 and the string "inf" in format /1
    alpha = math.inf if content["alpha"] in (None, "inf") else float(content["alpha"])
    eps = float(content["epsilon"])
    ok = True
    for pr in content["pairs"]:
        x, p, y, q = pr["p"]["atoms"], pr["p"]["probs"], pr["q"]["atoms"], pr["q"]["probs"]
        if content["claim"]["certified"] and content["scale"] > 0:
            worst = max(reference(x, p, y, q, content["noise"], content["scale"], alpha),
                        reference(y, q, x, p, content["noise"], content["scale"], alpha))
            ok = ok and worst <= eps * (1 + 1e-9)
    if content["claim"]["tight"]:
        below = max(
            max(reference(pr["p"]["atoms"], pr["p"]["probs"], pr["q"]["atoms"],
                          pr["q"]["probs"], content["noise"], content["refuted_scale"], alpha),
                reference(pr["q"]["atoms"], pr["q"]["probs"], pr["p"]["atoms"],
                          pr["p"]["probs"], content["noise"], content["refuted_scale"], alpha))
            for pr in content["pairs"]
        )
        ok = ok and below > eps * (1 - 1e-9)
    _TRUTH[key] = ok
    return ok


def _outcome(content: Any, path: Path, label: str = "") -> str:
    path.write_text(mu.render(copy.deepcopy(content), label=label))
    try:
        verify_mixture_file(path)
    except CertificateError as exc:
        assert str(exc), label
        return "rejected"
    except Exception as exc:  # pragma: no cover - the failure this suite looks for
        raise AssertionError(f"{label}: crashed with {type(exc).__name__}: {exc}") from exc
    return "accepted"


def _first_entries_only(label: str) -> bool:
    return not any(part.isdigit() and int(part) > 0
                   for part in label.split(":")[0].split("/"))


def _sweep(base: dict[str, Any], tmp: Path, nudges: tuple[str, ...],
           families: tuple[str, ...] | None = None) -> Counter[str]:
    seen: Counter[str] = Counter()
    for family, label, edited in mu.edits(base, nudges=nudges):
        if not _first_entries_only(label) or label == "pairs:huge-array":
            continue
        if families is not None and family not in families:
            continue
        result = _outcome(edited, tmp / "e.json", label)
        seen[f"{family}:{result}"] += 1
        COUNTS[family] += 1
        if family in ("nonfinite", "types", "structure", "huge") and label not in LEGIT:
            assert result == "rejected", label
        if result == "accepted" and family != "informational":
            rendered = json.loads((tmp / "e.json").read_text())
            assert _claim_is_true(rendered), f"false claim accepted: {label}"
    return seen


def test_every_field_malformed_laplace(bases: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """Every field of a real file made non-finite, of the wrong type, missing, extra or huge:
    all rejected naming the field, none crashes (the cheap families: rejected by the reader)."""
    seen = _sweep(bases["lap2"], tmp_path, (),
                  families=("nonfinite", "types", "structure", "huge", "claims"))
    print(f"\nlap2: {dict(sorted(seen.items()))}")
    assert sum(v for k, v in seen.items() if k.endswith("rejected")) > 150


@pytest.mark.slow
def test_every_field_edited_laplace(bases: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """All families, numbers included (each accepted edit checked against mpmath)."""
    seen = _sweep(bases["lap2"], tmp_path, ("up-1e-6", "down-1e-6"))
    print(f"\nlap2: {dict(sorted(seen.items()))}")
    assert sum(v for k, v in seen.items() if k.endswith("rejected")) > 50


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lapinf", "gauss2"])
def test_every_field_edited_slow(name: str, bases: dict[str, dict[str, Any]],
                                 tmp_path: Path) -> None:
    seen = _sweep(bases[name], tmp_path, mu.FAST_NUDGES)
    print(f"\n{name}: {dict(sorted(seen.items()))}")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda c: c.update(scale="1.0"), "scale: must be a number, got a string"),
        (lambda c: c.update(gap=1e6), "gap: 1000000.0 must be <= 10.0"),
        (lambda c: c.update(epsilon=True), "epsilon: must be a number, got a boolean"),
        (lambda c: c.update(alpha="2"), "alpha: must be a number, got a string"),
        (lambda c: c.update(noise="cauchy"), "noise: 'cauchy' must be one of"),
        (lambda c: c["pairs"][0]["p"].update(probs=[0.5, 0.5, 0.5]), "must sum to 1"),
        (lambda c: c["pairs"][0]["p"].update(atoms=[0.0, 1.0]),
         "p.probs: has 3 entries, expected 2"),
        (lambda c: c.update(refuted_scale=c["scale"] * 2), "refuted_scale"),
        (lambda c: c["claim"].update(tight="yes"), "claim.tight: must be true or false"),
        (lambda c: c.pop("claim"), "missing field(s) claim"),
        (lambda c: c.update(pairs=[]), "pairs: must hold 1 to"),
    ],
)
def test_malformed_fields_are_named(bases: dict[str, dict[str, Any]], tmp_path: Path,
                                    edit: Any, field: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    content = copy.deepcopy(bases["lap2"])
    edit(content)
    path = tmp_path / "m.json"
    path.write_text(mu.render(content))
    with pytest.raises(CertificateError) as info:
        verify_mixture_file(path)
    assert field in str(info.value)
    assert main(["verify", str(path)]) == 1
    assert field in capsys.readouterr().out


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_literals(bases: dict[str, dict[str, Any]], tmp_path: Path, raw: str) -> None:
    text = json.dumps(bases["lap2"]).replace(f'"epsilon": {bases["lap2"]["epsilon"]!r}',
                                             f'"epsilon": {raw}')
    assert raw in text
    path = tmp_path / "n.json"
    path.write_text(text)
    with pytest.raises(CertificateError, match="file: "):
        verify_mixture_file(path)
    assert main(["verify", str(path)]) == 1


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_edits_through_the_cli(bases: dict[str, dict[str, Any]], tmp_path: Path,
                                      data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["lap2", "lapinf"]), label="base")
    content = copy.deepcopy(bases[name])
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        kind = data.draw(st.sampled_from(["number", "swap", "delete", "offset"]))
        COUNTS[f"hyp-{kind}"] += 1
        nodes = [p for p, v in mu.walk(content) if p and p[0] != "versions"]
        if kind == "number":
            nums = [p for p in nodes if type(mu.get(content, p)) is float]
            if not nums:
                continue
            path = data.draw(st.sampled_from(nums))
            mu.put(content, path, mu.get(content, path) * data.draw(st.floats(0.9, 1.1)))
        elif kind == "swap":
            path = data.draw(st.sampled_from(nodes))
            fn = data.draw(st.sampled_from(list(mu.SWAPS.values())))
            mu.put(content, path, fn(mu.get(content, path)))
        elif kind == "delete":
            path = data.draw(st.sampled_from(nodes))
            if isinstance(mu.get(content, path[:-1]), dict):
                mu.delete(content, path)
        else:
            off = data.draw(st.sampled_from([1e12, 1.7e15, 1e16, -3e15]))
            for pr in content.get("pairs", []) if isinstance(content.get("pairs"), list) else []:
                for side in ("p", "q"):
                    try:
                        pr[side]["atoms"] = [v + off for v in pr[side]["atoms"]]
                    except (TypeError, KeyError):
                        pass
    target = tmp_path / "h.json"
    target.write_text(mu.render(content))
    code = main(["verify", str(target)])
    assert code in (0, 1)
    if code == 0:
        assert _claim_is_true(json.loads(target.read_text()))


def test_zz_report_counts() -> None:
    print("\nedited tight certificate files per family:", dict(sorted(COUNTS.items())))
