"""UCI loaders: facts from the UCI documentation / PROVENANCE.md, quirks, checksum rejection."""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpopt.datasets import (
    ADULT_COLUMNS,
    CHECKSUMS,
    HEART_COLUMNS,
    STUDENT_COLUMNS,
    ChecksumError,
    data_path,
    load_adult,
    load_heart_disease,
    load_student,
    merge_student,
    read_verified_bytes,
)
from dpopt.errors import CertificateError, DpoptError, InvalidParameterError

DATA = Path(data_path("adult.names")).parent


def test_packaged_files_present_and_compressed_ones_stay_compressed() -> None:
    for name in CHECKSUMS:
        path = data_path(name)
        assert path.is_file()
        big = name.startswith("adult.") and name != "adult.names"
        assert path.name.endswith(".gz") == big
    assert (DATA / "PROVENANCE.md").is_file()
    assert (DATA / "LICENSE.md").is_file()
    assert "CC BY 4.0" in (DATA / "LICENSE.md").read_text()


def test_checksums_match_provenance_document() -> None:
    text = (DATA / "PROVENANCE.md").read_text()
    for digest in CHECKSUMS.values():
        assert digest in text


def test_verified_bytes_hash_independently() -> None:
    raw = read_verified_bytes("adult.data")
    assert len(raw) == 3974305
    assert hashlib.sha256(raw).hexdigest() == CHECKSUMS["adult.data"]
    with gzip.open(data_path("adult.test"), "rb") as fh:
        assert fh.read() == read_verified_bytes("adult.test")


def test_adult_train() -> None:
    df = load_adult("train")
    assert df.shape == (32561, 15)
    assert tuple(df.columns) == ADULT_COLUMNS
    assert df["income"].value_counts().to_dict() == {"<=50K": 24720, ">50K": 7841}
    assert int(df.isna().any(axis=1).sum()) == 2399
    assert df["age"].dtype == np.int64 and df["hours-per-week"].dtype == np.int64
    assert isinstance(df["sex"].dtype, pd.CategoricalDtype)
    # separator ", " handled: no leading spaces in strings, '?' is missing, not a category
    assert set(df["sex"].cat.categories) == {"Female", "Male"}
    assert "?" not in set(df["workclass"].cat.categories)
    assert df.iloc[0]["workclass"] == "State-gov" and df.iloc[0]["age"] == 39


def test_adult_test_and_both() -> None:
    test = load_adult("test")
    assert test.shape == (16281, 15)
    assert set(test["income"].cat.categories) == {"<=50K", ">50K"}  # periods removed
    assert test.iloc[0]["age"] == 25  # "|1x3 Cross validator" skipped
    both = load_adult("both")
    assert len(both) == 48842
    assert both["split"].value_counts().to_dict() == {"train": 32561, "test": 16281}
    assert (both["income"] == ">50K").sum() == 7841 + int((test["income"] == ">50K").sum())


def test_heart_disease() -> None:
    df = load_heart_disease()
    assert df.shape == (303, 15)
    assert tuple(df.columns) == (*HEART_COLUMNS, "disease")
    assert df["num"].value_counts().sort_index().tolist() == [164, 55, 36, 35, 13]
    assert df.isna().sum().to_dict() == {c: {"ca": 4, "thal": 2}.get(c, 0) for c in df.columns}
    assert int(df["disease"].sum()) == 139
    assert df["chol"].dtype == np.int64 and df["thal"].dtype == np.float64
    assert df.iloc[0][["age", "chol", "thalach"]].tolist() == [63, 233, 150]


@pytest.mark.parametrize(("course", "rows", "g3"), [("mat", 395, 10.415), ("por", 649, 11.906)])
def test_student(course: str, rows: int, g3: float) -> None:
    df = load_student(course)  # type: ignore[arg-type]
    assert df.shape == (rows, 33)
    assert tuple(df.columns) == STUDENT_COLUMNS
    assert round(float(df["G3"].mean()), 3) == g3
    for col in ("G1", "G2", "G3", "age", "absences"):  # G1, G2 are quoted in the file
        assert df[col].dtype == np.int64
    assert df[["G1", "G2", "G3"]].to_numpy().min() >= 0
    assert df[["G1", "G2", "G3"]].to_numpy().max() <= 20
    assert set(df["school"].cat.categories) == {"GP", "MS"}  # quotes stripped
    assert not df.isna().any().any()


def test_student_merge_has_382_rows() -> None:
    merged = merge_student()
    assert len(merged) == 382
    assert {"G3_mat", "G3_por", "school"} <= set(merged.columns)


def _corrupt_copy(tmp_path: Path, name: str) -> Path:
    src = data_path(name)
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    if dst.suffix == ".gz":
        raw = bytearray(gzip.decompress(dst.read_bytes()))
        raw[1000] ^= 0x01
        dst.write_bytes(gzip.compress(bytes(raw)))
    else:
        raw = bytearray(dst.read_bytes())
        raw[100] = ord("9") if raw[100] != ord("9") else ord("8")
        dst.write_bytes(bytes(raw))
    return tmp_path


def test_corrupted_copies_are_rejected(tmp_path: Path) -> None:
    for name, loader in [
        ("adult.data", lambda d: load_adult("train", data_dir=d)),
        ("processed.cleveland.data", lambda d: load_heart_disease(data_dir=d)),
        ("student-por.csv", lambda d: load_student("por", data_dir=d)),
    ]:
        sub = tmp_path / name
        sub.mkdir()
        _corrupt_copy(sub, name)
        with pytest.raises(ChecksumError, match="sha256"):
            loader(sub)
    assert issubclass(ChecksumError, CertificateError)
    assert issubclass(ChecksumError, DpoptError)


def test_truncated_gzip_rejected(tmp_path: Path) -> None:
    raw = data_path("adult.test").read_bytes()
    (tmp_path / "adult.test.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ChecksumError):
        load_adult("test", data_dir=tmp_path)


def test_intact_copy_in_other_dir_loads(tmp_path: Path) -> None:
    shutil.copyfile(data_path("student-mat.csv"), tmp_path / "student-mat.csv")
    assert len(load_student("mat", data_dir=tmp_path)) == 395


def test_bad_arguments() -> None:
    with pytest.raises(InvalidParameterError, match="split"):
        load_adult("validation")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="course"):
        load_student("bio")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="name"):
        data_path("iris.data")
    with pytest.raises(InvalidParameterError, match="data_dir"):
        load_heart_disease(data_dir="/nonexistent-dir")
