"""Draw the pictures the README and the documentation site show (``docs/assets/``).

``design.png`` is ``Design.plot()`` of the design ``dpopt demo`` makes: the ideal denoiser at the
query g = (0.2, 0.7) on the 5 x 5 grid of [0, 1]^2, denoiser noise level 0.5, under
(ε = 1, δ = 1e-6)-DP with add/remove adjacency.

Usage::

    python scripts/docs_assets.py [--out docs/assets]
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    import dpopt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    grid = dpopt.Grid(np.zeros(2), np.ones(2), (5, 5))
    vectors = dpopt.add_remove_set(grid, query=[0.2, 0.7], sigma=0.5)
    design = dpopt.design_covariance(vectors, dpopt.ApproxDP(epsilon=1.0, delta=1e-6))
    ax = design.plot()
    path = args.out / "design.png"
    ax.figure.savefig(path, dpi=90, metadata={"Software": None})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
