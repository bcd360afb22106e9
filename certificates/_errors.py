"""Deprecated: the exception family is :mod:`certificates.errors` (public since the package
layout; ``dpopt.errors`` re-exports it). This alias goes in dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import warn_module

warn_module(__name__, "certificates.errors", __file__)

from certificates.errors import (  # noqa: E402
    AccuracyWarning,
    ApproximationWarning,
    CertificateError,
    DpoptError,
    InfeasibleError,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)

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
