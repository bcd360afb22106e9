"""dpopt's exception family (public home; defined in the lowest layer, ``certificates``)."""

from certificates.errors import (
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
