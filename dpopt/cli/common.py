"""Input parsing and output helpers of the ``dpopt`` command line (private to :mod:`dpopt.cli`).

Every function turns a malformed input into a :class:`~dpopt.errors.DpoptError` whose message fits
on one line (the CLI prints it and exits with status 2); nothing here prints.

The domain spec grammar of ``--domain`` (``grid:lo=0,hi=1,n=5,d=2``, ``box:lo=0,hi=1,d=3``) and
the description a design file carries are :mod:`dpopt.covariance.description`'s.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias, TypeVar

from dpopt.errors import DpoptError, InvalidParameterError

if TYPE_CHECKING:  # pragma: no cover - numpy is imported where used: `--help` stays light
    import numpy as np
    from numpy.typing import NDArray

    from dpopt.progress import Progress

__all__ = [
    "COMMON",
    "SCHEMA_VERSION",
    "VOCABULARY",
    "Context",
    "Subparsers",
    "UsageError",
    "dump_json",
    "format_float",
    "parse_float_list",
    "read_matrix",
    "read_points",
    "read_table",
    "to_vocabulary",
    "write_text_safely",
]

#: The ``add_subparsers()`` action on which every ``add_*_parser`` function registers its command.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _common_parent() -> argparse.ArgumentParser:
    """Options every (sub)command accepts, also after the command name (``dpopt demo -q``)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no progress bars on stderr",
    )
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show full tracebacks (for bug reports)",
    )
    return p


#: Parent parser with ``-q/--quiet`` and ``--debug`` for every subcommand.
COMMON = _common_parent()


class UsageError(DpoptError):
    """A command-line input is unusable (missing file, file exists, bad spec ...)."""


def parse_float_list(name: str, text: str) -> NDArray[np.float64]:
    """Parse ``"0.5,0.5"`` (commas and/or spaces) into a finite 1-D float array."""
    from certificates.validate import as_float_array

    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InvalidParameterError(name, text, "must be a comma-separated list of numbers")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise InvalidParameterError(
            name, text, "must be a comma-separated list of numbers"
        ) from None
    return as_float_array(name, vals, ndim=1)


def _existing(path: str | os.PathLike[str], what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what} file not found: {p}")
    if p.is_dir():
        raise UsageError(f"{what} path is a directory, not a file: {p}")
    return p


def _check_finite(arr: NDArray[np.float64], path: Path, header: bool) -> None:
    import numpy as np

    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        r, c = (int(v) for v in bad[0])
        line = r + 1 + (1 if header else 0)
        raise InvalidParameterError(
            str(path),
            f"{arr[r, c]} at line {line}, column {c + 1}",
            f"must contain only finite numbers ({len(bad)} bad entries)",
        )


#: A decimal number as a CSV cell may spell it (no underscores, hex or Python-only forms).
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NONFINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


def _csv_cell(cell: str, p: Path, line: int, col: int, header_hint: bool) -> float:
    text = cell.strip()
    where = f"{text!r} at line {line}, column {col}"
    if not text:
        raise InvalidParameterError(
            str(p), f"empty cell at line {line}, column {col}", "must be a finite number"
        )
    if text.lower() in _NONFINITE:
        raise InvalidParameterError(str(p), where, "must be a finite number")
    if not _NUMBER.fullmatch(text):
        hint = " (if the first line is a header, pass --header)" if header_hint else ""
        raise InvalidParameterError(str(p), where, "must be a number" + hint)
    x = float(text)
    if not math.isfinite(x):
        raise InvalidParameterError(str(p), where, "must be a finite number (overflows)")
    return x


def _read_csv_numeric(
    p: Path, *, header: bool = False
) -> tuple[NDArray[np.float64], list[str] | None]:
    """Read a numeric CSV: one row per line, comma-separated; blank lines and lines starting with
    ``#`` are skipped. With ``header`` the first remaining line holds column names (returned);
    without it every cell must be a finite number, and a cell that is not one is an error naming
    its line and column (nothing is ever dropped silently)."""
    import numpy as np

    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot parse CSV file {p}: not UTF-8 text ({exc.reason})") from None
    rows: list[list[float]] = []
    names: list[str] | None = None
    width = 0
    seen_any = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        seen_any = True
        cells = next(csv.reader([raw]))
        if header and names is None:
            names = [c.strip() for c in cells]
            width = len(names)
            continue
        if not width:
            width = len(cells)
        if len(cells) != width:
            raise InvalidParameterError(
                str(p), f"line {lineno}", f"has {len(cells)} values, expected {width}"
            )
        rows.append(
            [
                _csv_cell(c, p, lineno, j + 1, header_hint=not header and not rows)
                for j, c in enumerate(cells)
            ]
        )
    if not seen_any:
        raise UsageError(f"file is empty: {p}")
    if not rows:
        raise UsageError(f"file has no data rows: {p}")
    return np.array(rows, dtype=np.float64), names


def read_points(
    path: str | os.PathLike[str], *, what: str = "domain", header: bool = False
) -> NDArray[np.float64]:
    """Read points (one per row) from ``.npy`` or ``.csv``/``.txt`` as a finite ``(m, d)`` array.

    ``header``: the CSV's first line is a header and is skipped; by default there is none and a
    non-numeric cell is an error naming its line and column.
    """
    import numpy as np

    from certificates.validate import as_float_array

    p = _existing(path, what)
    if p.suffix.lower() == ".npy":
        try:
            raw = np.load(p, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise UsageError(f"cannot read NPY file {p}: {exc}") from None
        arr = as_float_array(str(p), raw, allow_inf=True)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise InvalidParameterError(str(p), arr.shape, "must hold a 1-D or 2-D array")
        _check_finite(arr, p, False)
        return arr
    arr, _ = _read_csv_numeric(p, header=header)
    return arr


def read_matrix(path: str | os.PathLike[str], *, what: str = "weight") -> NDArray[np.float64]:
    """Read a square matrix from ``.npy`` or ``.csv`` (no header); symmetry is checked later."""
    arr = read_points(path, what=what)
    if arr.shape[0] != arr.shape[1]:
        raise InvalidParameterError(str(path), arr.shape, "must hold a square matrix")
    return arr


def read_table(path: str | os.PathLike[str], columns: Sequence[str]) -> dict[str, NDArray[Any]]:
    """Read named columns of a CSV with a header. Numeric columns must be finite (no NaN)."""
    import numpy as np
    import pandas as pd

    p = _existing(path, "data")
    try:
        df = pd.read_csv(p, skipinitialspace=True, comment="#")
    except pd.errors.EmptyDataError:
        raise UsageError(f"file is empty: {p}") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot parse CSV file {p}: {first}") from None
    df.columns = [str(c).strip() for c in df.columns]
    out: dict[str, NDArray[Any]] = {}
    for col in columns:
        if col not in df.columns:
            raise UsageError(f"column {col!r} not in {p} (columns: {', '.join(df.columns)})")
        series = df[col]
        if series.isna().any():
            r = int(np.argmax(series.isna().to_numpy()))
            raise InvalidParameterError(
                f"{p}:{col}", f"missing/NaN at line {r + 2}", "must not contain missing values"
            )
        out[col] = series.to_numpy()
    return out


def write_text_safely(path: str | os.PathLike[str], text: str, *, force: bool) -> Path:
    """Write ``text`` to ``path``; refuse to replace an existing file unless ``force``.

    Without ``force`` the file is created exclusively (``open(..., 'x')``), so a file that appears
    between the check and the write is never clobbered.
    """
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"output path is a directory: {p}")
    if not p.parent.exists():
        raise UsageError(f"output directory does not exist: {p.parent}")
    try:
        with open(p, "w" if force else "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UsageError(f"{p} already exists; use --force to overwrite it") from None
    return p


def _jsonable(obj: object) -> object:
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else None  # JSON has no inf or NaN: null, documented
    return obj


#: Version of the JSON vocabulary of every ``--json`` output (``schema_version`` in each
#: output; the schema is ``dpopt/schemas/cli-output.schema.json``, documented in the JSON guide).
SCHEMA_VERSION = 2

#: One name per quantity. Keys the commands build -> the key of the vocabulary (None: a second
#: name of a quantity already present, dropped), for every command (``"*"``) or for one (its
#: ``command`` value). Applied at every depth of an output except inside the privacy report,
#: which has a schema of its own.
VOCABULARY: dict[str, dict[str, str | None]] = {
    "*": {"interval": "certified_interval", "rate": "sampling_rate", "report": "privacy"},
    "design": {"sigma": "denoiser_sigma"},
    "demo": {"sigma": "denoiser_sigma"},
    "verify": {"sigma": "denoiser_sigma"},
    "design-run": {"sigma": "denoiser_sigma"},
    "account subsample": {"sigma": "noise_multiplier"},
    "account schedule": {"noise_std_per_sensitivity": None},  # is the noise_multiplier
    "calibrate gaussian": {"sigma": "noise_std"},
}


def _renamed(obj: object, names: Mapping[str, str | None]) -> object:
    if isinstance(obj, dict):
        if obj.get("schema") == "dpopt.privacy-report/1":
            return obj
        out: dict[str, object] = {}
        for k, v in obj.items():
            new = names.get(k, k)
            if new is not None:
                out[new] = _renamed(v, names)
        return out
    if isinstance(obj, list):
        return [_renamed(v, names) for v in obj]
    return obj


def to_vocabulary(result: Mapping[str, Any]) -> dict[str, Any]:
    """A command's result in the one JSON vocabulary: keys renamed by :data:`VOCABULARY`,
    numpy values converted, inf and NaN as null, ``schema_version`` first."""
    plain = _jsonable(dict(result))
    assert isinstance(plain, dict)
    names = {**VOCABULARY["*"], **VOCABULARY.get(str(plain.get("command")), {})}
    renamed = _renamed(plain, names)
    assert isinstance(renamed, dict)
    return {"schema_version": SCHEMA_VERSION, **renamed}


def _schema(name: str) -> dict[str, Any]:
    from importlib import resources

    text = resources.files("dpopt").joinpath(f"schemas/{name}").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def output_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of every ``--json`` output, version
    :data:`SCHEMA_VERSION` (``dpopt/schemas/cli-output.schema.json``)."""
    return _schema("cli-output.schema.json")


def files_schema() -> dict[str, Any]:
    """The JSON Schema of the files dpopt writes (design/certificate files and tight Pufferfish
    certificates, each naming its ``format``; ``dpopt/schemas/files.schema.json``)."""
    return _schema("files.schema.json")


def dump_json(obj: object) -> str:
    """Serialize to strict JSON: numpy types converted, inf and NaN as null; a command's result
    (a mapping with a ``command`` key) goes through :func:`to_vocabulary` first."""
    if isinstance(obj, Mapping) and "command" in obj:
        return json.dumps(to_vocabulary(obj), indent=2, allow_nan=False)
    return json.dumps(_jsonable(obj), indent=2, allow_nan=False)


def format_float(x: float | None, digits: int = 6) -> str:
    """Compact human formatting: ``0.0718514``, ``1.2e-08``, ``inf``; None (a report value
    beyond double precision) prints as ``beyond double range``."""
    if x is None:
        return "beyond double range"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


T = TypeVar("T")


class Context:
    """What every command gets besides its arguments: output streams and the progress switch."""

    def __init__(self, out: TextIO, err: TextIO, quiet: bool) -> None:
        self.out = out
        self.err = err
        self.quiet = quiet

    def print(self, *parts: object) -> None:
        print(*parts, file=self.out)

    def warn(self, message: str) -> None:
        print(f"dpopt: warning: {message}", file=self.err)

    def progress(
        self, iterable: Iterable[T], *, desc: str, total: int | None = None
    ) -> Iterator[T]:
        """Wrap ``iterable`` in a tqdm bar on stderr (off with ``--quiet`` or when not a tty)."""
        from tqdm import tqdm

        yield from tqdm(
            iterable, desc=desc, total=total, file=self.err, disable=not self.interactive,
            leave=False,
        )

    @property
    def interactive(self) -> bool:
        """Whether progress may be shown: stderr is a terminal and ``--quiet`` is off."""
        isatty = getattr(self.err, "isatty", None)
        return not self.quiet and bool(isatty and isatty())

    def steps(self, desc: str, *, unit: str, total: float | None = None,
              expected: tuple[float, float] | None = None,
              tail: tuple[float, float] | None = None,
              max_spread: float | None = None, eta_after: float = 0.0) -> Progress:
        """A :class:`dpopt.progress.Progress` line on stderr (a terminal only, not with
        ``--quiet``) with the steps done and the time left from the measured step times; use it
        as a context manager, library code inside reports with :func:`dpopt.progress.tick`."""
        from dpopt.progress import Progress

        return Progress(desc, unit=unit, total=total, expected=expected, tail=tail,
                        stream=self.err, enabled=self.interactive, max_spread=max_spread,
                        eta_after=eta_after)

    @contextmanager
    def stage(self, desc: str) -> Iterator[None]:
        """A status line for a long single call (e.g. a solve), on a terminal only.

        Shows ``desc …`` while the call runs and erases it afterwards; nothing is written when
        stderr is not a terminal (logs, pipes) or with ``--quiet``.
        """
        if not self.interactive:
            yield
            return
        line = f"{desc} …"
        print(line, end="", file=self.err, flush=True)
        try:
            yield
        finally:
            print("\r" + " " * len(line) + "\r", end="", file=self.err, flush=True)
