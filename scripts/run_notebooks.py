"""Execute every notebook under ``notebooks/`` (``make notebooks``).

The committed notebooks carry no outputs. This script runs each one top to bottom with nbclient
and writes the executed copy to ``results/notebooks/`` (never back into ``notebooks/``), so the
repository stays output-free. ``--small`` sets ``DPOPT_NOTEBOOK_SMALL=1``, which the notebooks'
parameter cell reads to shrink their grids (the test suite uses it).

Usage::

    python scripts/run_notebooks.py [--small] [--timeout SECONDS] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def execute_notebook(
    path: Path, *, small: bool = False, timeout: int = 600, out_dir: Path | None = None,
    workdir: Path | None = None,
) -> Path | None:
    """Execute one notebook in its own kernel; return the path of the executed copy (or None).

    Raises ``nbclient.exceptions.CellExecutionError`` if a cell fails.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    previous = os.environ.get("DPOPT_NOTEBOOK_SMALL")
    os.environ["DPOPT_NOTEBOOK_SMALL"] = "1" if small else "0"
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(workdir or ROOT)}},
        )
        client.execute()
    finally:
        if previous is None:
            os.environ.pop("DPOPT_NOTEBOOK_SMALL", None)
        else:
            os.environ["DPOPT_NOTEBOOK_SMALL"] = previous
    if out_dir is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    nbformat.write(nb, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook file names (default: all)")
    parser.add_argument("--small", action="store_true", help="small settings (as in the tests)")
    parser.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "notebooks")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.names:
        wanted = {Path(n).name for n in args.names}
        paths = [p for p in paths if p.name in wanted]
        missing = wanted - {p.name for p in paths}
        if missing:
            print(f"unknown notebook(s): {sorted(missing)}", file=sys.stderr)
            return 2
    failures = 0
    for path in paths:
        start = time.perf_counter()
        try:
            out = execute_notebook(path, small=args.small, timeout=args.timeout, out_dir=args.out)
        except Exception as exc:  # report every notebook, then fail
            failures += 1
            print(f"FAILED {path.name}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
            continue
        print(f"ok     {path.name} ({time.perf_counter() - start:.1f} s) -> {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
