r"""Two-column private datasets for the sampler, rescaled to :math:`[0, 1]^2` by PUBLIC bounds.

The bounds are fixed from public knowledge, never from the records (a data-derived box would
itself leak): ages in [0, 100] years, weekly working hours in [0, 100], a maximum heart rate in
[50, 220] beats per minute (220 is the textbook age-0 maximum). Records are split at random into
a private training part (what the sampler reads) and a held-out part (for quality measures).

- ``"adult"``: UCI Adult, ``age`` and ``hours-per-week`` (training file, 32,561 rows);
- ``"heart"``: UCI Heart Disease (Cleveland), ``age`` and ``thalach`` (303 rows);
- ``"mixture"``: a synthetic mixture of three Gaussians in the unit square.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpopt.errors import InvalidParameterError

__all__ = ["DATASETS", "PUBLIC_BOUNDS", "PairData", "load_pair"]

#: Public bounds of every column used (lower, upper).
PUBLIC_BOUNDS: dict[str, dict[str, tuple[float, float]]] = {
    "adult": {"age": (0.0, 100.0), "hours-per-week": (0.0, 100.0)},
    "heart": {"age": (0.0, 100.0), "thalach": (50.0, 220.0)},
    "mixture": {"x": (0.0, 1.0), "y": (0.0, 1.0)},
}
DATASETS = tuple(PUBLIC_BOUNDS)


@dataclass(frozen=True)
class PairData:
    """A two-column dataset in the unit square.

    Attributes
    ----------
    train, holdout : ndarray, shape (n, 2)
        Private records (rescaled) and the held-out split.
    columns : tuple of str
    bounds : tuple of (float, float)
        The public bounds that map each column onto [0, 1].
    name : str
    """

    train: NDArray[np.float64]
    holdout: NDArray[np.float64]
    columns: tuple[str, str]
    bounds: tuple[tuple[float, float], tuple[float, float]]
    name: str

    def to_original(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """Map unit-square points back to the columns' units."""
        lo = np.array([b[0] for b in self.bounds])
        hi = np.array([b[1] for b in self.bounds])
        return np.asarray(lo + np.asarray(points) * (hi - lo), dtype=np.float64)


def _mixture(n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    centres = np.array([[0.25, 0.3], [0.7, 0.7], [0.75, 0.25]])
    scales = np.array([0.06, 0.08, 0.05])
    comp = rng.choice(3, size=n, p=[0.4, 0.35, 0.25])
    pts = centres[comp] + scales[comp, None] * rng.standard_normal((n, 2))
    return np.asarray(np.clip(pts, 0.0, 1.0), dtype=np.float64)


def load_pair(name: str, *, holdout: float = 0.3, seed: int = 0,
              size: int | None = None) -> PairData:
    """Load one of :data:`DATASETS`, rescaled by its public bounds and split.

    Parameters
    ----------
    name : {"adult", "heart", "mixture"}
    holdout : float
        Fraction held out, in (0, 1).
    seed : int
        Seed of the split (and of the synthetic mixture).
    size : int, optional
        Keep a random subset of this many records before splitting (the mixture: its size,
        default 600).
    """
    key = str(name).strip().lower()
    if key not in PUBLIC_BOUNDS:
        raise InvalidParameterError("name", name, f"must be one of {DATASETS}")
    if not 0.0 < float(holdout) < 1.0:
        raise InvalidParameterError("holdout", holdout, "must lie in (0, 1)")
    rng = np.random.default_rng(seed)
    cols = tuple(PUBLIC_BOUNDS[key])
    if key == "mixture":
        raw = _mixture(600 if size is None else int(size), rng)
    else:
        from dpopt.datasets import load_adult, load_heart_disease

        df = load_adult("train") if key == "adult" else load_heart_disease()
        raw = df[list(cols)].to_numpy(dtype=np.float64)
        raw = raw[np.all(np.isfinite(raw), axis=1)]
    if size is not None and key != "mixture":
        if int(size) < 2:
            raise InvalidParameterError("size", size, "must be >= 2")
        raw = raw[rng.choice(raw.shape[0], size=min(int(size), raw.shape[0]), replace=False)]
    lo = np.array([PUBLIC_BOUNDS[key][c][0] for c in cols])
    hi = np.array([PUBLIC_BOUNDS[key][c][1] for c in cols])
    unit = np.clip((raw - lo) / (hi - lo), 0.0, 1.0)
    perm = rng.permutation(unit.shape[0])
    cut = max(1, round(unit.shape[0] * (1.0 - float(holdout))))
    bounds = tuple((float(a), float(b)) for a, b in zip(lo, hi, strict=True))
    return PairData(train=unit[perm[:cut]], holdout=unit[perm[cut:]],
                    columns=(cols[0], cols[1]), bounds=(bounds[0], bounds[1]), name=key)
