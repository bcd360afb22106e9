"""CSV tables with finite numbers or empty cells only (the tables of the figures).

Every file dpopt writes holds finite numbers or nulls: JSON has no infinity or NaN, and in a
CSV table a null is an empty cell. :func:`write_table` is the one writer of the figures'
tables.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["write_table"]


def write_table(table: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    r"""Write ``table`` as CSV with finite numbers or empty cells (nulls) only.

    JSON and CSV files dpopt writes hold no infinity or NaN: here every non-finite number is an
    empty cell, which for the ``alpha`` column means :math:`\alpha = \infty` (pure Pufferfish)
    and elsewhere a value that does not exist (a Gaussian scale at :math:`\alpha = \infty`).
    Read a sweep table back with :func:`dpopt.experiments.rpp.read_sweep_table` (which
    turns an empty ``alpha`` back into infinity). Returns the path.
    """
    out = table.copy()
    for col in out.columns:
        if pd.api.types.is_numeric_dtype(out[col]) and not pd.api.types.is_bool_dtype(out[col]):
            values = out[col].to_numpy(dtype=float)
            if not np.isfinite(values).all():
                out[col] = np.where(np.isfinite(values), values, np.nan)
    target = Path(path)
    out.to_csv(target, index=False, na_rep="")
    return target
