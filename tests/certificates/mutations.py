"""Adversarial edits of certificate files (test helper): every field, every way.

An edit is applied to the decoded JSON; :func:`render` writes it back with *both* digests
recomputed (so the hash check cannot be what rejects it: the re-check must) and can inject raw
text JSON cannot express through :mod:`json` (NaN, overflowing literals, deep nesting).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

Path_ = tuple[Any, ...]

#: Placeholders replaced by raw text after serialisation.
BIG = "@@BIG@@"
DEEP = "@@DEEP@@"

#: Numeric edits: name -> function of the old value (relative nudges both ways: the unsafe
#: direction for a lower bound is up, for an upper bound down, for q up, for Σ down ...).
NUDGES = {
    "up-9e-10": lambda x: x * (1 + 9e-10) if x else 1e-300,
    "down-9e-10": lambda x: x * (1 - 9e-10),
    "up-1e-8": lambda x: x * (1 + 1e-8) if x else 1e-300,
    "down-1e-8": lambda x: x * (1 - 1e-8),
    "up-ulp": lambda x: math.nextafter(x, math.inf),
    "down-ulp": lambda x: math.nextafter(x, -math.inf),
    "up-1e-6": lambda x: x * (1 + 1e-6) if x else 1e-6,
    "down-1e-6": lambda x: x * (1 - 1e-6),
    "half": lambda x: x / 2,
    "double": lambda x: x * 2,
    "negate": lambda x: -x,
    "zero": lambda x: 0.0,
}
FAST_NUDGES = ("up-9e-10", "down-9e-10", "up-1e-6", "down-1e-6")

#: Type swaps.
SWAPS = {
    "str": lambda v: str(v),
    "bool": lambda v: True,
    "null": lambda v: None,
    "list": lambda v: [v],
    "dict": lambda v: {"v": v},
    "int": lambda v: int(v) if isinstance(v, float) and math.isfinite(v) else 1,
}
NONFINITE = ("nan", "inf", "-inf", "big")


def walk(obj: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every node (path, value), depth first, containers included."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk(v, (*path, i))


def get(obj: Any, path: Path_) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def put(obj: Any, path: Path_, value: Any) -> None:
    get(obj, path[:-1])[path[-1]] = value


def delete(obj: Any, path: Path_) -> None:
    del get(obj, path[:-1])[path[-1]]


def _sha(body: Any) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _vectors_sha(rows: Any) -> str | None:
    try:
        arr = np.ascontiguousarray(np.asarray(rows, dtype=np.float64), dtype="<f8")
    except (TypeError, ValueError, OverflowError):
        return None
    if arr.ndim != 2:
        return None
    h = hashlib.sha256(f"{arr.shape[0]}x{arr.shape[1]}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def render(content: Any, *, rehash: bool = True, label: str = "") -> str:
    """Serialise an edited file with its digests recomputed (where the edit left them
    computable and did not target the digest itself) and the raw-text placeholders expanded."""
    if rehash and isinstance(content, dict):
        pr = content.get("problem")
        if (isinstance(pr, dict) and isinstance(pr.get("vectors"), list)
                and not label.startswith("problem/vectors_sha256")):
            sha = _vectors_sha(pr["vectors"])
            if sha is not None and "vectors_sha256" in pr:
                pr["vectors_sha256"] = sha
        if "sha256" in content and not label.startswith("sha256"):
            content["sha256"] = _sha({k: v for k, v in content.items() if k != "sha256"})
    text = json.dumps(content, allow_nan=True)
    text = text.replace(f'"{BIG}"', "1e400").replace(f'"{DEEP}"', "[" * 100_000 + "]" * 100_000)
    return text


class Families:
    """Counts of edited files per family (reported by the tests)."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()

    def add(self, family: str) -> None:
        self.count[family] += 1


def edits(content: dict[str, Any], *, nudges: tuple[str, ...] = FAST_NUDGES,
          swaps: bool = True) -> Iterator[tuple[str, str, Any]]:
    """Deterministic sweep: (family, label, edited content) for every node of the file, without
    the edits that leave the content equal (``1.0`` -> ``1``); an integer replacing a float is
    counted as a ``numbers`` edit, and edits of the informational fields (``versions``, a free
    text ``vectors_description``) as ``informational``."""
    for family, label, new in _edits(content, nudges, swaps):
        if new == content:
            continue
        if label.startswith(("versions", "problem/vectors_description")):
            family = "informational"
        elif label.endswith(":int"):
            family = "numbers"
        yield family, label, new


def _edits(content: dict[str, Any], nudges: tuple[str, ...],
           swaps: bool) -> Iterator[tuple[str, str, Any]]:
    for path, value in list(walk(content)):
        if not path:
            continue
        label = "/".join(map(str, path))
        if type(value) is int:
            for step in (1, -1):
                new = copy.deepcopy(content)
                put(new, path, value + step)
                yield "numbers", f"{label}:{step:+d}", new
        if type(value) is float:
            for name in nudges:
                new = copy.deepcopy(content)
                put(new, path, NUDGES[name](value))
                yield "numbers", f"{label}:{name}", new
        if type(value) in (int, float):
            for name in NONFINITE:
                new = copy.deepcopy(content)
                put(new, path, {"nan": math.nan, "inf": math.inf, "-inf": -math.inf,
                                "big": BIG}[name])
                yield "nonfinite", f"{label}:{name}", new
        if swaps:
            for name, fn in SWAPS.items():
                if name == "int" and type(value) is not float:
                    continue
                new = copy.deepcopy(content)
                put(new, path, fn(value))
                same_type = type(fn(value)) is type(value)
                yield ("claims" if same_type else "types"), f"{label}:{name}", new
        if isinstance(get(content, path[:-1]), dict):
            new = copy.deepcopy(content)
            delete(new, path)
            yield "structure", f"{label}:delete", new
        if isinstance(value, dict):
            new = copy.deepcopy(content)
            value_new = get(new, path)
            value_new["extra_field"] = 1.0
            yield "structure", f"{label}:add-field", new
        if isinstance(value, list):
            new = copy.deepcopy(content)
            lst = get(new, path)
            lst.extend(copy.deepcopy(lst[:1]) * 1000 if lst else [0.0] * 1000)
            yield "huge", f"{label}:huge-array", new
            new = copy.deepcopy(content)
            put(new, path, DEEP)
            yield "huge", f"{label}:deep-nesting", new
