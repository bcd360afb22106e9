"""The three UCI datasets of the α-Wasserstein RPP experiments, shipped with the package.

Loaders return :class:`pandas.DataFrame` objects with documented column names and dtypes. Every
loader reads the packaged raw file (byte-identical to UCI's distribution, gzip-compressed when it
is over 100 KB), checks the SHA-256 of the **uncompressed** bytes against the digest recorded in
``data/PROVENANCE.md`` and raises :class:`ChecksumError` on a mismatch, so a silently corrupted or
edited copy can never feed an experiment.

Data licence: CC BY 4.0 (UCI Machine Learning Repository); see ``data/LICENSE.md`` for the
required citations.

Examples
--------
>>> from dpopt.datasets import load_adult, load_heart_disease, load_student
>>> len(load_adult("train")), len(load_heart_disease()), len(load_student("mat"))
(32561, 303, 395)
"""

from dpopt.datasets._loaders import (
    ADULT_COLUMNS,
    CHECKSUMS,
    HEART_COLUMNS,
    STUDENT_COLUMNS,
    STUDENT_MERGE_KEYS,
    ChecksumError,
    data_path,
    load_adult,
    load_heart_disease,
    load_student,
    merge_student,
    read_verified_bytes,
)

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
