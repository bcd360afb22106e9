"""Lazy re-exports for dpopt's package ``__init__`` modules (PEP 562).

Importing :mod:`dpopt` or one of its rooms does not import cvxpy, pandas or scipy's heavier
parts: a public name is imported from its defining module the first time it is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose public names live in other modules.

    Parameters
    ----------
    package : str
        The package's dotted name (for the error message).
    exports : dict
        Public name -> dotted name of the module defining it.
    namespace : dict
        The package's ``globals()``; a name, once imported, is cached there.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
