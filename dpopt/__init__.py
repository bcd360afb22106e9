"""dpopt: the least noise a privacy guarantee allows, with certificates anyone can check."""

from dpopt.errors import (
    AccuracyWarning,
    ApproximationWarning,
    CertificateError,
    DpoptError,
    InfeasibleError,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)

__version__ = "0.1.0"

__all__ = [
    "AccuracyWarning",
    "ApproximationWarning",
    "CertificateError",
    "DpoptError",
    "InfeasibleError",
    "InvalidParameterError",
    "InvalidTypeError",
    "SolverError",
    "__version__",
]
