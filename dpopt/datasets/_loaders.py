"""Checksum-verified loaders for the packaged UCI files (format notes: ``data/PROVENANCE.md``)."""

from __future__ import annotations

import gzip
import hashlib
import io
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pandas as pd

from dpopt.errors import CertificateError, InvalidParameterError, InvalidTypeError

__all__ = [
    "ADULT_COLUMNS",
    "CHECKSUMS",
    "HEART_COLUMNS",
    "STUDENT_COLUMNS",
    "STUDENT_MERGE_KEYS",
    "ChecksumError",
    "data_path",
    "load_adult",
    "load_heart_disease",
    "load_student",
    "merge_student",
    "read_verified_bytes",
]

_DATA_DIR = Path(__file__).resolve().parent / "data"

#: SHA-256 of the UNCOMPRESSED bytes of every packaged file (from ``data/PROVENANCE.md``).
CHECKSUMS: dict[str, str] = {
    "adult.data": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "adult.test": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
    "adult.names": "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
    "processed.cleveland.data": "a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8",
    "student-mat.csv": "e47f9ee225e1ee6e69b7564e6dac7123e80b8486677fe111f351964cef5dec80",
    "student-por.csv": "a7594a11d7771c0efe1a740824e0e833da9c4cad07c39a9766a874575563fb3f",
}

#: Adult columns, in file order (``income`` is ``"<=50K"`` or ``">50K"``, test periods removed).
ADULT_COLUMNS: tuple[str, ...] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
_ADULT_INT = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")

#: Heart Disease (Cleveland) columns, in file order.
HEART_COLUMNS: tuple[str, ...] = (
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
    "num",
)
_HEART_INT = ("age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang",
              "slope", "num")

#: Student Performance columns, in file order.
STUDENT_COLUMNS: tuple[str, ...] = (
    "school", "sex", "age", "address", "famsize", "Pstatus", "Medu", "Fedu", "Mjob", "Fjob",
    "reason", "guardian", "traveltime", "studytime", "failures", "schoolsup", "famsup", "paid",
    "activities", "nursery", "higher", "internet", "romantic", "famrel", "freetime", "goout",
    "Dalc", "Walc", "health", "absences", "G1", "G2", "G3",
)  # fmt: skip
_STUDENT_INT = ("age", "Medu", "Fedu", "traveltime", "studytime", "failures", "famrel",
                "freetime", "goout", "Dalc", "Walc", "health", "absences", "G1", "G2", "G3")

#: The 13 attributes UCI's ``student-merge.R`` joins the two courses on (382 common students).
STUDENT_MERGE_KEYS: tuple[str, ...] = (
    "school", "sex", "age", "address", "famsize", "Pstatus", "Medu", "Fedu", "Mjob", "Fjob",
    "reason", "nursery", "internet",
)  # fmt: skip


class ChecksumError(CertificateError):
    """A packaged data file does not have the SHA-256 recorded in ``PROVENANCE.md``."""


def data_path(name: str, data_dir: str | Path | None = None) -> Path:
    """Return the path of a packaged data file (``name`` without ``.gz``).

    Parameters
    ----------
    name : str
        One of the keys of :data:`CHECKSUMS`, e.g. ``"adult.data"``.
    data_dir : str or Path, optional
        Directory to read from instead of the packaged ``data/`` folder (for tests and mirrors).
        The file is looked up as ``name`` and then as ``name + ".gz"``.
    """
    if not isinstance(name, str):
        raise InvalidTypeError("name", name, "a str")
    if name not in CHECKSUMS:
        raise InvalidParameterError("name", name, f"must be one of {sorted(CHECKSUMS)}")
    if data_dir is not None and not isinstance(data_dir, str | Path):
        raise InvalidTypeError("data_dir", data_dir, "a str or pathlib.Path")
    base = _DATA_DIR if data_dir is None else Path(data_dir)
    for candidate in (base / name, base / (name + ".gz")):
        if candidate.is_file():
            return candidate
    raise InvalidParameterError("data_dir", str(base), f"holds neither {name} nor {name}.gz")


@lru_cache(maxsize=16)
def _read_cached(path: str, mtime_ns: int, size: int) -> bytes:
    raw = Path(path).read_bytes()
    if path.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ChecksumError(f"{path}: not a valid gzip file ({exc})") from None
    return raw


def read_verified_bytes(name: str, data_dir: str | Path | None = None) -> bytes:
    """Read a packaged file (decompressing ``.gz``) and verify its SHA-256.

    Raises
    ------
    ChecksumError
        If the SHA-256 of the uncompressed bytes differs from :data:`CHECKSUMS`\\ ``[name]``
        (or a ``.gz`` file is not valid gzip).
    """
    path = data_path(name, data_dir)
    stat = path.stat()
    raw = _read_cached(str(path), stat.st_mtime_ns, stat.st_size)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CHECKSUMS[name]:
        raise ChecksumError(
            f"{path}: sha256 of the uncompressed bytes is {digest}, expected {CHECKSUMS[name]}; "
            "the file is corrupted or edited (restore it from the dpopt distribution)"
        )
    return raw


def _categorize(df: pd.DataFrame, columns: tuple[str, ...]) -> None:
    for col in columns:
        df[col] = df[col].astype("category")


def _read_adult_split(split: Literal["train", "test"], data_dir: str | Path | None) -> pd.DataFrame:
    name = "adult.data" if split == "train" else "adult.test"
    raw = read_verified_bytes(name, data_dir)
    df = pd.read_csv(
        io.BytesIO(raw),
        header=None,
        names=list(ADULT_COLUMNS),
        sep=",",
        skipinitialspace=True,  # the separator is ", "
        na_values=["?"],
        keep_default_na=False,
        skip_blank_lines=True,  # adult.data ends with an empty line
        skiprows=1 if split == "test" else 0,  # adult.test starts with "|1x3 Cross validator"
        dtype={c: "int64" for c in _ADULT_INT},
    )
    df["income"] = df["income"].str.rstrip(".")  # test labels end in a period
    return df


def load_adult(
    split: Literal["train", "test", "both"] = "train",
    *,
    data_dir: str | Path | None = None,
) -> pd.DataFrame:
    """Load the UCI Adult (Census Income) data, Becker & Kohavi (1996).

    Parameters
    ----------
    split : {"train", "test", "both"}
        ``"train"`` is ``adult.data`` (32561 rows), ``"test"`` is ``adult.test`` (16281 rows),
        ``"both"`` concatenates them (48842 rows) and adds a categorical ``split`` column.
    data_dir : str or Path, optional
        Read the raw files from this directory instead of the packaged copies.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ADULT_COLUMNS`. ``age, fnlwgt, education-num, capital-gain, capital-loss,
        hours-per-week`` are int64; the other columns are ``category``. ``?`` becomes missing
        (NaN; 2399 training rows have at least one). ``income`` is ``"<=50K"`` or ``">50K"`` in
        both splits (the test file's trailing periods are removed).

    Raises
    ------
    ChecksumError
        If a raw file's SHA-256 does not match.
    """
    if split not in ("train", "test", "both"):
        raise InvalidParameterError("split", split, "must be 'train', 'test' or 'both'")
    if split == "both":
        parts = []
        for part in ("train", "test"):
            df = _read_adult_split(part, data_dir)  # type: ignore[arg-type]
            df["split"] = part
            parts.append(df)
        out = pd.concat(parts, ignore_index=True)
        _categorize(out, ("split",))
    else:
        out = _read_adult_split(split, data_dir)
    _categorize(out, tuple(c for c in ADULT_COLUMNS if c not in _ADULT_INT))
    return out


def load_heart_disease(*, data_dir: str | Path | None = None) -> pd.DataFrame:
    """Load the processed Cleveland subset of UCI Heart Disease, Janosi et al. (1988).

    Returns
    -------
    pandas.DataFrame
        303 rows, columns :data:`HEART_COLUMNS` plus ``disease`` (bool, ``num > 0``; 139 True).
        ``oldpeak``, ``ca`` and ``thal`` are float64 (``ca`` has 4 and ``thal`` 2 missing values,
        written ``?`` in the file); every other column is int64 (the file writes ``63.0``; the
        values are integers, which is checked).

    Raises
    ------
    ChecksumError
        If the raw file's SHA-256 does not match.
    """
    raw = read_verified_bytes("processed.cleveland.data", data_dir)
    df = pd.read_csv(
        io.BytesIO(raw),
        header=None,
        names=list(HEART_COLUMNS),
        na_values=["?"],
        keep_default_na=False,
        dtype="float64",
    )
    for col in _HEART_INT:
        values = df[col]
        if values.isna().any() or (values != values.round()).any():
            raise ChecksumError(f"processed.cleveland.data: column {col!r} is not integer-valued")
        df[col] = values.astype("int64")
    df["disease"] = df["num"] > 0
    return df


def load_student(
    course: Literal["mat", "por"] = "mat",
    *,
    data_dir: str | Path | None = None,
) -> pd.DataFrame:
    """Load UCI Student Performance, Cortez & Silva (2008), for one course.

    Parameters
    ----------
    course : {"mat", "por"}
        Mathematics (395 students) or Portuguese (649 students).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`STUDENT_COLUMNS`. The file is ``;``-separated with double-quoted strings;
        ``G1`` and ``G2`` are also quoted in the file but are parsed, like every numeric column,
        as int64 (grades 0-20). The string columns are ``category``. No missing values.

    Raises
    ------
    ChecksumError
        If the raw file's SHA-256 does not match.
    """
    if course not in ("mat", "por"):
        raise InvalidParameterError("course", course, "must be 'mat' or 'por'")
    raw = read_verified_bytes(f"student-{course}.csv", data_dir)
    df = pd.read_csv(
        io.BytesIO(raw),
        sep=";",
        quotechar='"',
        keep_default_na=False,
        dtype={c: "int64" for c in _STUDENT_INT},
    )
    if tuple(df.columns) != STUDENT_COLUMNS:
        raise ChecksumError(f"student-{course}.csv: unexpected header {list(df.columns)}")
    _categorize(df, tuple(c for c in STUDENT_COLUMNS if c not in _STUDENT_INT))
    return df


def merge_student(*, data_dir: str | Path | None = None) -> pd.DataFrame:
    """Students present in both courses, joined as UCI's ``student-merge.R`` does.

    An inner join on :data:`STUDENT_MERGE_KEYS`; the other columns get the suffixes ``_mat`` and
    ``_por``. The dataset documentation states that the result has 382 rows.
    """
    keys = list(STUDENT_MERGE_KEYS)
    mat = load_student("mat", data_dir=data_dir)
    por = load_student("por", data_dir=data_dir)
    for df in (mat, por):
        for key in keys:
            if isinstance(df[key].dtype, pd.CategoricalDtype):
                df[key] = df[key].astype(str)
    merged = mat.merge(por, on=keys, how="inner", suffixes=("_mat", "_por"))
    _categorize(merged, tuple(k for k in keys if k not in _STUDENT_INT))
    return merged
