"""The ``dpopt`` command line: ``demo``, ``design``, ``verify``, ``account``, ``calibrate``,
``figures``.

``main(argv)`` is the console-script entry point (``dpopt = dpopt.cli:main``) and returns the exit
status instead of calling :func:`sys.exit`, so tests can drive it directly:

- 0: success (``verify``: the certificate holds);
- 1: ``verify`` only: the file was read but its certificate does not hold;
- 2: a user error (bad option or spec, missing file, output exists, any ``DpoptError``): one line
  ``dpopt: error: ...`` on stderr, no traceback;
- 3: an internal error (a bug): one line, plus the traceback with ``--debug``;
- 130: interrupted (Ctrl-C).

The commands live in :mod:`dpopt.cli.account` (``account``, ``calibrate``) and
:mod:`dpopt.cli.design` (``demo``, ``design``, ``verify``, ``figures``); backing modules are
imported lazily: ``dpopt --version`` and every command's ``--help`` import none of numpy,
scipy, cvxpy or pandas (``python -X importtime -m dpopt.cli design --help`` shows it).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from typing import TextIO

from dpopt.errors import DpoptError

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED_CHECK = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130

_FORMATTER = argparse.RawDescriptionHelpFormatter


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands are added by the command modules)."""
    from dpopt import __version__
    from dpopt.cli.account import add_account_parser, add_calibrate_parser
    from dpopt.cli.design import (
        add_demo_parser,
        add_design_parser,
        add_figures_parser,
        add_verify_parser,
    )
    from dpopt.cli.run_design import add_design_run_parser
    from dpopt.cli.sample import add_sample_parser

    parser = argparse.ArgumentParser(
        prog="dpopt",
        formatter_class=_FORMATTER,
        description=(
            "The least noise a privacy guarantee allows, with a certificate anyone can re-check."
        ),
        epilog=(
            "examples:\n"
            "  dpopt demo                                  # certified design on a built-in grid\n"
            "  dpopt design --domain grid:lo=0,hi=1,n=4,d=2 --uniform-query \\\n"
            "        --budget approx:epsilon=1,delta=1e-6 -o design.json\n"
            "  dpopt verify design.json                    # exit 0 if the certificate holds\n"
            "  dpopt sample --dataset heart --budget gdp:mu=1 -o run.json   # private samples\n"
            "  dpopt account convert gdp:mu=1 --delta 1e-5\n"
            "  dpopt calibrate gaussian --epsilon 1 --delta 1e-5 --sensitivity 1\n"
            "  dpopt figures --list\n"
            "\n"
            "Run 'dpopt COMMAND --help' for the options of a command.\n"
            "Exit status: 0 ok, 1 verification failed, 2 user error, 3 internal error."
        ),
    )
    parser.add_argument("--version", action="version", version=f"dpopt {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars on stderr")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks (for bug reports)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_demo_parser(sub)
    add_design_parser(sub)
    add_design_run_parser(sub)
    add_sample_parser(sub)
    add_verify_parser(sub)
    add_account_parser(sub)
    add_calibrate_parser(sub)
    add_figures_parser(sub)
    return parser


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " ".join(lines)


#: the thread-count variables of the BLAS libraries numpy and scipy may load
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def _one_blas_thread() -> None:
    """One BLAS thread for a command whose arrays are one-dimensional (the ``account``
    commands): a threaded BLAS starts its workers when numpy loads and they spin after each
    dot product, which costs CPU time and no wall time. Set only before numpy is first imported
    and only where the user has not chosen a value."""
    if "numpy" in sys.modules:
        return
    for name in _BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


def main(argv: list[str] | None = None) -> int:
    """Run the ``dpopt`` command line on ``argv`` (default ``sys.argv[1:]``); return the status."""
    out, err = sys.stdout, sys.stderr
    args_in = sys.argv[1:] if argv is None else list(argv)
    if args_in == ["--version"]:  # answered before anything heavy (numpy) is imported
        from dpopt import __version__

        print(f"dpopt {__version__}", file=out)
        return EXIT_OK
    for stream in (out, err):  # a non-UTF-8 terminal must not turn "ε" into a crash
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # pragma: no cover - exotic streams
                pass
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version or an argparse usage error
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    if getattr(args, "one_blas_thread", False):
        _one_blas_thread()
    from dpopt.cli.common import Context

    debug = bool(getattr(args, "debug", False))
    ctx = Context(out, err, bool(getattr(args, "quiet", False)))
    handler: Callable[[argparse.Namespace, Context], int] = args.handler

    def _show_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        ctx.warn(f"{_one_line(Exception(str(message)))} [{category.__name__}]")

    with warnings.catch_warnings():
        if not debug:
            warnings.showwarning = _show_warning
        try:
            from dpopt import progress

            with progress.displays(err if ctx.interactive else None):
                return int(handler(args, ctx))
        except KeyboardInterrupt:
            print("dpopt: interrupted", file=err)
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # e.g. `dpopt ... | head`
            return EXIT_OK
        except (DpoptError, OSError) as exc:
            if debug:
                traceback.print_exc(file=err)
            if isinstance(exc, OSError) and not isinstance(exc, DpoptError):
                where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
                msg = f"{exc.strerror or _one_line(exc)}{where}"
            else:
                msg = _one_line(exc)
            print(f"dpopt: error: {msg}", file=err)
            return EXIT_USAGE
        except Exception as exc:
            if debug:
                traceback.print_exc(file=err)
            print(
                f"dpopt: internal error: {type(exc).__name__}: {_one_line(exc)} "
                "(rerun with --debug for the traceback and please report it)",
                file=err,
            )
            return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
