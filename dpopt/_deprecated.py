"""Deprecated import paths: thin aliases that warn once per use and forward to the new home.

A public name that moves keeps its old path for one release (:data:`REMOVED_IN`): reading it
warns :class:`DeprecationWarning` naming the new path, then returns the very same object.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["REMOVED_IN", "moved", "warn_moved"]

#: The release in which the deprecated paths go (they work, with a warning, until then).
REMOVED_IN = "0.6"


def warn_moved(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``."""
    warnings.warn(
        f"{old} is deprecated and will be removed in dpopt {REMOVED_IN}; use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def moved(old: str, module: str, name: str) -> Any:
    """Warn that ``old`` moved to ``module.name`` and return that object.

    Called from a module's ``__getattr__`` (PEP 562), so the warning points at the caller's
    ``import``/attribute line.
    """
    warn_moved(old, f"{module}.{name}", stacklevel=4)
    return getattr(importlib.import_module(module), name)
