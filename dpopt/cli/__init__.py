"""The ``dpopt`` command line, one module per command family.

- :mod:`dpopt.cli.main` — the parser, exit codes and :func:`main` (the console-script entry point);
- :mod:`dpopt.cli.design` — ``demo``, ``design``, ``verify``, ``figures``;
- :mod:`dpopt.cli.account` — ``account``, ``calibrate``;
- :mod:`dpopt.cli.pufferfish` — Pufferfish calibration from a CSV file;
- :mod:`dpopt.cli.common` — shared input parsing and output helpers.
"""

from dpopt.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
