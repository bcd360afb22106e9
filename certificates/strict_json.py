r"""The strict JSON reader (and the digest-stamped writer) shared by every certificate file dpopt
writes.

Certificate files are read by a verifier that must trust nothing in them, so a malformed file is
*rejected with the offending field named*, never turned into a Python exception from deep inside
a computation. This module is that one reader, used by the covariance certificates
(:mod:`certificates.io`), the tight Pufferfish certificates (:mod:`certificates.renyi_mixture`)
and, through ``dpopt verify``, by every other kind registered there.

Decoding (:func:`load_json`)
    * the file must be UTF-8 text of at most ``max_bytes`` bytes and valid JSON;
    * ``NaN``, ``Infinity`` and ``-Infinity`` are refused, and so is a number literal that
      overflows the double range (``1e999``);
    * a key repeated inside one object is refused (the last one would silently win);
    * nesting too deep for the parser is refused.

Fields (:func:`obj`, :func:`integer`, :func:`number`, :func:`boolean`, :func:`string`,
:func:`hex64`, :func:`matrix`, :func:`vector`)
    * exact JSON types: ``true`` is not ``1``, ``"1.0"`` is not a number, ``1`` is an integer
      (and also accepted where a number is expected);
    * integers are range-checked; numbers must be finite as doubles (an integer literal too large
      for a double is refused) and may be range-checked;
    * arrays must have exactly the declared shape, every entry a number.

Digest and versions (:func:`digest`, :func:`versions`, :func:`write_signed`,
:func:`check_versions`, :func:`check_digest`)
    * a file carries the sha256 of its canonical content (sorted keys, no spaces, without the
      ``sha256`` field itself) and the versions of the packages that wrote it; the writer refuses
      to replace an existing file unless asked to.

Every rejection raises :class:`FieldError` whose message starts with the field's dotted path,
e.g. ``claim.gap: must be a number, got a string``; callers turn it into a
:class:`~certificates.errors.CertificateError` naming the file (:func:`rejection`).

Example
-------
>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "f.json")
>>> with open(path, "w") as fh:
...     _ = fh.write('{"scale": "1.0"}')
>>> content = load_json(path)
>>> try:
...     number("scale", content["scale"])
... except FieldError as exc:
...     print(exc)
scale: must be a number, got a string
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
from importlib import metadata
from typing import Any, NoReturn, TypeAlias, cast

import numpy as np
from numpy.typing import NDArray

from certificates.errors import CertificateError

__all__ = [
    "MAX_FILE_BYTES",
    "FieldError",
    "JSONValue",
    "boolean",
    "check_digest",
    "check_versions",
    "digest",
    "fail",
    "hex64",
    "integer",
    "kind_of",
    "load_json",
    "matrix",
    "number",
    "obj",
    "rejection",
    "string",
    "vector",
    "versions",
    "write_signed",
]

#: Largest certificate file read (bytes); a larger file is rejected before parsing.
MAX_FILE_BYTES = 1 << 30

_HEX64 = re.compile(r"[0-9a-f]{64}")

#: A JSON value, as :func:`json.loads` returns it.
JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"


class FieldError(Exception):
    """A malformed field of a certificate file (the message starts with the field's path)."""


def fail(field: str, reason: str) -> NoReturn:
    """Reject ``field`` with ``reason``."""
    raise FieldError(f"{field}: {reason}")


def rejection(path: str | os.PathLike[str], exc: FieldError,
              what: str = "certificate file") -> CertificateError:
    """The CertificateError for a :class:`FieldError` met while reading ``path``:
    ``malformed certificate file 'x.json': claim.gap: must be a number, got a string``."""
    return CertificateError(f"malformed {what} {os.fspath(path)!r}: {exc}")


def _no_constant(name: str) -> NoReturn:
    raise FieldError(f"file: non-finite number {name} (NaN/Infinity are not allowed)")


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise FieldError(f"file: number {text[:40]} overflows the double range")
    return x


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise FieldError(f"file: duplicate key {key[:40]!r}")
        out[key] = value
    return out


def load_json(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> JSONValue:
    """Decode a certificate file strictly (see the module notes).

    Raises
    ------
    CertificateError
        The file cannot be read (an OS error).
    FieldError
        The content is not strict JSON (field ``file``).
    """
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            fail("file", f"{size} bytes, more than the {max_bytes} a certificate may have")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise CertificateError(f"cannot read certificate file {os.fspath(path)!r}: {exc}") from exc
    except UnicodeDecodeError as exc:
        fail("file", f"not UTF-8 text ({exc.reason})")
    try:
        return json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        fail("file", "JSON nested too deeply")
    except (json.JSONDecodeError, ValueError) as exc:  # ValueError: int literal too long
        fail("file", f"not valid JSON ({exc})")


def kind_of(value: object) -> str:
    """The JSON kind of a decoded value, for messages (``"a string"``, ``"an array"`` ...)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value), "?")


def obj(field: str, value: object, keys: tuple[str, ...],
        optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """``value`` as a JSON object with exactly the fields ``keys`` (plus any of ``optional``)."""
    if type(value) is not dict:
        fail(field, f"must be a JSON object, got {kind_of(value)}")
    missing = [k for k in keys if k not in value]
    if missing:
        fail(field, f"missing field(s) {', '.join(missing)}")
    extra = sorted(str(k)[:40] for k in value if k not in keys and k not in optional)
    if extra:
        fail(field, f"unexpected field(s) {', '.join(extra)}")
    return value


def integer(field: str, value: object, low: int, high: int | None = None) -> int:
    """A JSON integer (not a boolean, not a number with a fraction) in ``[low, high]``."""
    if type(value) is not int:
        fail(field, f"must be an integer, got {kind_of(value)}")
    if value < low or (high is not None and value > high):
        fail(field, f"{value} out of range [{low}, {high if high is not None else 'inf'}]")
    return value


def number(field: str, value: object, low: float | None = None, low_open: bool = False,
           high: float | None = None, high_open: bool = False) -> float:
    """A finite JSON number (integer or float, never a string or boolean) as a double, optionally
    inside ``[low, high]`` (open ends with ``low_open`` / ``high_open``)."""
    if type(value) is not int and type(value) is not float:
        fail(field, f"must be a number, got {kind_of(value)}")
    try:
        x = float(cast("int | float", value))  # the exact types checked above
    except OverflowError:
        fail(field, "integer too large for a double")
    if not math.isfinite(x):
        fail(field, "must be finite")
    if low is not None and (x <= low if low_open else x < low):
        fail(field, f"{x!r} must be {'>' if low_open else '>='} {low!r}")
    if high is not None and (x >= high if high_open else x > high):
        fail(field, f"{x!r} must be {'<' if high_open else '<='} {high!r}")
    return x


def boolean(field: str, value: object) -> bool:
    """A JSON ``true`` / ``false`` (not ``1``, not ``"yes"``)."""
    if type(value) is not bool:
        fail(field, f"must be true or false, got {kind_of(value)}")
    return value


def string(field: str, value: object, *, max_len: int = 10_000,
           choices: tuple[str, ...] | None = None) -> str:
    """A JSON string of at most ``max_len`` characters (one of ``choices`` when given)."""
    if type(value) is not str:
        fail(field, f"must be a string, got {kind_of(value)}")
    if len(value) > max_len:
        fail(field, f"longer than {max_len} characters")
    if choices is not None and value not in choices:
        fail(field, f"{value[:40]!r} must be one of {', '.join(choices)}")
    return value


def hex64(field: str, value: object) -> str:
    """64 lower-case hexadecimal digits (a sha256)."""
    if type(value) is not str or not _HEX64.fullmatch(value):
        fail(field, "must be 64 lower-case hexadecimal digits")
    return value


def matrix(field: str, rows: object, nrows: int, ncols: int) -> NDArray[np.float64]:
    """A finite ``(nrows, ncols)`` float array from nested JSON lists of numbers (strict)."""
    if type(rows) is not list:
        fail(field, f"must be an array, got {kind_of(rows)}")
    if len(rows) != nrows:
        fail(field, f"has {len(rows)} rows, expected {nrows}")
    for i, row in enumerate(rows):
        if type(row) is not list:
            fail(f"{field}[{i}]", f"must be an array, got {kind_of(row)}")
        if len(row) != ncols:
            fail(f"{field}[{i}]", f"has {len(row)} entries, expected {ncols}")
        for j, v in enumerate(row):
            if type(v) is not float and type(v) is not int:
                fail(f"{field}[{i}][{j}]", f"must be a number, got {kind_of(v)}")
    try:
        arr = np.array(rows, dtype=np.float64).reshape(nrows, ncols)
    except OverflowError:
        fail(field, "integer too large for a double")
    if not np.all(np.isfinite(arr)):
        fail(field, "non-finite number")
    return arr


def vector(field: str, items: object, n: int | None = None, *,
           min_len: int = 0) -> NDArray[np.float64]:
    """A finite float vector of length ``n`` (any length >= ``min_len`` when ``n`` is None)."""
    if type(items) is not list:
        fail(field, f"must be an array, got {kind_of(items)}")
    if n is None:
        if len(items) < min_len:
            fail(field, f"has {len(items)} entries, needs at least {min_len}")
        n = len(items)
    if len(items) != n:
        fail(field, f"has {len(items)} entries, expected {n}")
    out = np.empty(n, dtype=np.float64)
    for i, v in enumerate(items):
        if type(v) is not float and type(v) is not int:
            fail(f"{field}[{i}]", f"must be a number, got {kind_of(v)}")
        try:
            out[i] = float(v)
        except OverflowError:
            fail(f"{field}[{i}]", "integer too large for a double")
    if not np.all(np.isfinite(out)):
        fail(field, "non-finite number")
    return out


# ------------------------------------------------------------------- digest and versions
def digest(content: dict[str, Any]) -> str:
    """sha256 of ``content`` without its ``sha256`` field (sorted keys, no spaces)."""
    body = {k: v for k, v in content.items() if k != "sha256"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError) as exc:
        raise CertificateError(f"content cannot be digested: {exc}") from None
    return hashlib.sha256(text.encode()).hexdigest()


def versions(*packages: str) -> dict[str, str]:
    """Python's, numpy's, scipy's and dpopt's versions, and those of ``packages`` that are
    installed (the ``versions`` field of a file)."""
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for pkg in ("scipy", "dpopt", *packages):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def write_signed(path: str | os.PathLike[str], content: dict[str, Any], *,
                 overwrite: bool) -> str:
    """Stamp ``content`` with its :func:`digest` (field ``sha256``) and write it to ``path`` as
    JSON; an existing file is replaced only with ``overwrite``. Returns the digest."""
    from certificates.errors import InvalidParameterError

    content["sha256"] = digest(content)
    try:
        with open(path, "w" if overwrite else "x", encoding="utf-8") as fh:
            json.dump(content, fh, indent=1, allow_nan=False)
    except FileExistsError:
        raise InvalidParameterError(
            "path", os.fspath(path), "exists; pass overwrite=True to replace it"
        ) from None
    return str(content["sha256"])


def check_versions(value: object) -> None:
    """The ``versions`` field: an object of at most 64 short strings."""
    if type(value) is not dict or len(value) > 64 or not all(
        type(v) is str and len(v) <= 200 and len(k) <= 200 for k, v in value.items()
    ):
        fail("versions", "must be an object of at most 64 short strings")


def check_digest(content: dict[str, Any], sha: str) -> None:
    """The stored ``sha`` must be the :func:`digest` of the file's ``content``."""
    if sha != digest(content):
        fail("sha256", "does not match the content (the file is corrupted or was edited "
                       "without updating its digest)")
