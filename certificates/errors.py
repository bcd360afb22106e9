"""The exception family shared by dpopt, solvers and certificates.

It lives in the lowest layer (``certificates``) so that every package can raise it without
import cycles; ``dpopt.errors`` re-exports it as the public home.
"""

from __future__ import annotations

__all__ = [
    "AccuracyWarning",
    "ApproximationWarning",
    "CertificateError",
    "DpoptError",
    "InfeasibleError",
    "InvalidParameterError",
    "InvalidTypeError",
    "SolverError",
]


def _show(value: object) -> str:
    """The value as a user would recognise it: numbers and short lists as written, arrays by a
    few entries or their shape, other objects by their kind and size (never a repr dump)."""
    shape, tolist = getattr(value, "shape", None), getattr(value, "tolist", None)
    if isinstance(shape, tuple) and callable(tolist):  # a numpy array or scalar
        size = 1
        for n in shape:
            size *= int(n)
        if size <= 6:
            return repr(tolist())
        return f"an array of shape {shape}" if shape else repr(tolist())
    text = repr(value)
    if "array(" in text or (len(text) > 120 and not isinstance(value, (str, list, tuple))):
        name = type(value).__name__
        dim, count = getattr(value, "dim", None), getattr(value, "count", None)
        where = f" in R^{dim}" if isinstance(dim, int) else ""
        many = f" of {count} points" if isinstance(count, int) else ""
        return f"a {name}{many}{where}"
    return text if len(text) <= 120 else text[:117] + "..."


class DpoptError(Exception):
    """Base class of every error dpopt raises on purpose."""


class InvalidParameterError(DpoptError, ValueError):
    """A parameter has an invalid value.

    Parameters
    ----------
    name : str
        The parameter's name as the user wrote it.
    value : object
        The offending value (echoed, shortened).
    requirement : str
        What the value must satisfy, e.g. ``"must be > 0"``.
    """

    def __init__(self, name: str, value: object, requirement: str) -> None:
        self.name = name
        self.value = value
        self.requirement = requirement
        super().__init__(f"{name}={_show(value)}: {requirement}")


class InvalidTypeError(DpoptError, TypeError):
    """A parameter has the wrong type."""

    def __init__(self, name: str, value: object, expected: str) -> None:
        self.name = name
        self.value = value
        super().__init__(f"{name} must be {expected}, got {type(value).__name__} {_show(value)}")


class SolverError(DpoptError, RuntimeError):
    """A solver failed; the message names the solver and a remedy."""


class InfeasibleError(DpoptError):
    """No design satisfying the stated guarantee could be produced or certified."""


class CertificateError(DpoptError, ValueError):
    """A certificate (or certificate file) is malformed, tampered with, or does not hold."""


class AccuracyWarning(UserWarning):
    """A result is returned but could not be certified to the requested accuracy."""


class ApproximationWarning(UserWarning):
    """A quantity is an approximation (e.g. a CLT), not a guarantee."""
