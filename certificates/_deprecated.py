"""Deprecated import paths: thin aliases that warn and forward to the new home (dpopt-wide).

A public name that moves keeps its old path for one release (:data:`REMOVED_IN`): reading it
warns :class:`DeprecationWarning` naming the new path, then returns the very same object.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

__all__ = ["REMOVED_IN", "moved", "warn_module", "warn_moved"]

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


def _caller_level(skip_files: tuple[str, ...]) -> int:
    """The ``stacklevel`` of the first frame outside the import machinery and ``skip_files``
    (so the warning names the line of the user's ``import``)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name  # warnings skips these itself
        if not (internal or name == __file__ or name in skip_files):
            return level
        frame = frame.f_back  # type: ignore[assignment]
        level += 0 if internal else 1
    return 1


def warn_module(old: str, new: str, module_file: str) -> None:
    """Warn, from the module-level code of a deprecated module, that ``old`` moved to ``new``.

    Called once, when the old module is first imported; the warning points at the importing
    line.
    """
    warnings.warn(
        f"the module {old} is deprecated and will be removed in dpopt {REMOVED_IN}; "
        f"import from {new}",
        DeprecationWarning,
        stacklevel=_caller_level((module_file,)),
    )


def alias_module(old: str, new: str, module_file: str) -> tuple[Any, Any, list[str]]:
    """``(__getattr__, __dir__, __all__)`` of a deprecated module that forwards every name to
    ``new``; warns (:func:`warn_module`) when called, i.e. when the old module is imported."""
    warn_module(old, new, module_file)
    target = importlib.import_module(new)

    def __getattr__(name: str) -> Any:
        try:
            return getattr(target, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r}") from None

    def __dir__() -> list[str]:
        return sorted(set(dir(target)))

    return __getattr__, __dir__, list(getattr(target, "__all__", []))
