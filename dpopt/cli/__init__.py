"""The ``dpopt`` command line, one module per command family.

- :mod:`dpopt.cli.main` — the parser, exit codes and :func:`main` (the console-script entry point);
- :mod:`dpopt.cli.design` — ``demo``, ``design``, ``verify``, ``figures``;
- :mod:`dpopt.cli.account` — ``account``, ``calibrate``;
- :mod:`dpopt.cli.pufferfish` — Pufferfish calibration from a CSV file;
- :mod:`dpopt.cli.common` — shared input parsing and output helpers, and the one JSON
  vocabulary of every ``--json`` output (:func:`output_schema` returns its JSON Schema).
"""

from typing import Any

from dpopt.cli.main import build_parser, main

__all__ = ["build_parser", "files_schema", "main", "output_schema"]


def output_schema() -> dict[str, Any]:
    """The JSON Schema of every ``dpopt ... --json`` output (see the JSON guide)."""
    from dpopt.cli.common import output_schema as schema

    return schema()


def files_schema() -> dict[str, Any]:
    """The JSON Schema of the files dpopt writes (see the JSON guide)."""
    from dpopt.cli.common import files_schema as schema

    return schema()
