"""``dpopt --version`` and ``--help`` start fast because they import little.

Measured times are noisy on a shared machine, so the tests check what the cause of a slow start
would be instead: the modules a fresh interpreter has loaded after the command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("numpy", "scipy", "cvxpy", "pandas", "matplotlib", "dask", "certificates.covariance")


def _loaded_after(argv: list[str]) -> tuple[str, list[str]]:
    code = (
        "import contextlib, io, json, sys\n"
        "from dpopt.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    status = main({argv!r})\n"
        f"print(json.dumps([out.getvalue(), [m for m in {HEAVY!r} if m in sys.modules]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=True)
    text, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return text, loaded


def test_version_imports_no_numerics() -> None:
    from dpopt import __version__

    text, loaded = _loaded_after(["--version"])
    assert text.strip() == f"dpopt {__version__}"
    assert loaded == []


def test_every_help_imports_no_numerics() -> None:
    """Every command's and subcommand's ``--help``, in one fresh interpreter: none of them
    loads numpy, scipy, cvxpy, pandas or matplotlib (each is imported where it is used)."""
    code = (
        "import argparse, contextlib, io, json, sys\n"
        "from dpopt.cli import build_parser, main\n"
        "def walk(parser, prefix):\n"
        "    yield prefix\n"
        "    for action in parser._actions:\n"
        "        if isinstance(action, argparse._SubParsersAction):\n"
        "            for name, sub in action.choices.items():\n"
        "                yield from walk(sub, [*prefix, name])\n"
        "found = {}\n"
        "for argv in list(walk(build_parser(), [])):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        status = main([*argv, '--help'])\n"
        "    assert status == 0 and out.getvalue().startswith('usage: dpopt'), argv\n"
        f"    found[' '.join(argv)] = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps(found))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"", "design", "sample", "account dpsgd", "calibrate pufferfish"} <= set(found)
    assert {cmd: mods for cmd, mods in found.items() if mods} == {}


def test_import_certificates_errors_stays_light() -> None:
    code = ("import sys, certificates.errors, dpopt, certificates\n"
            "print(sorted(m for m in ('scipy', 'certificates.covariance') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
    import certificates

    assert callable(certificates.check) and "check" in dir(certificates)
    with pytest.raises(AttributeError, match="no_such_name"):
        certificates.no_such_name  # noqa: B018


def _blas_after(argv: list[str], env_extra: dict[str, str]) -> dict[str, object]:
    """A fresh interpreter runs ``main(argv)``: the BLAS variables and thread counts after it."""
    code = (
        "import contextlib, io, json, os\n"
        "from dpopt.cli import main\n"
        "sink = io.StringIO()\n"
        "with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):\n"
        f"    main({argv!r})\n"
        "import numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "print(json.dumps({'env': os.environ.get('OPENBLAS_NUM_THREADS'),\n"
        "                  'threads': [i['num_threads'] for i in threadpool_info()\n"
        "                              if i['user_api'] == 'blas']}))\n"
    )
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update({"PYTHONPATH": str(ROOT), **env_extra})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=True)
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_account_commands_run_on_one_blas_thread() -> None:
    """``dpopt account …`` works on one-dimensional arrays: it starts numpy with one BLAS
    thread (worker threads would only spin), unless the user chose a count."""
    got = _blas_after(["account", "convert", "gdp:mu=1"], {})
    assert got["env"] == "1"
    assert got["threads"] and set(got["threads"]) == {1}  # type: ignore[arg-type]
    mine = _blas_after(["account", "convert", "gdp:mu=1"], {"OPENBLAS_NUM_THREADS": "2"})
    assert mine["env"] == "2"


def test_other_commands_leave_the_blas_threads_alone() -> None:
    got = _blas_after(["verify", str(ROOT / "no-such-file.json")], {})
    assert got["env"] is None
