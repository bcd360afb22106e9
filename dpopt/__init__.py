"""dpopt: the least noise a privacy guarantee allows, with certificates anyone can check.

The public names below are re-exported lazily (importing :mod:`dpopt` does not import cvxpy or
pandas); each lives in the module named in ``_EXPORTS``. Sub-packages: :mod:`dpopt.accounting`
(budgets, Gaussian DP, Rényi divergences), :mod:`dpopt.covariance` (sensitivity sets, the optimal
covariance, its privacy, release), :mod:`dpopt.diffusion` (private sampling with the ideal
denoiser), :mod:`dpopt.pufferfish` (Rényi Pufferfish calibration),
:mod:`dpopt.cli` (the command line), :mod:`dpopt.datasets` (UCI data), :mod:`dpopt.experiments`,
:mod:`dpopt.figures`.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports
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

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # budgets and accounting
    **{n: "dpopt.accounting.budgets" for n in (
        "AllOf", "ApproxDP", "Budget", "GDP", "MIDP", "PrivacyReport", "RDP", "ZCDP",
        "parse_budget", "privacy_report",
    )},
    # the optimal covariance
    **{n: "dpopt.covariance.design" for n in ("Design", "design_covariance")},
    "design_covariance_batch": "dpopt.covariance.batch",
    **{n: "dpopt.covariance.program" for n in ("CovarianceProgram", "isotropic_baseline")},
    # sensitivity geometry
    **{n: "dpopt.covariance.domains" for n in (
        "Ball", "Box", "Ellipsoid", "FinitePoints", "Grid", "SnapReport",
    )},
    **{n: "dpopt.covariance.sensitivity" for n in (
        "BoxTwoRecordSet", "TwoRecordVectors", "UniformQueryVectors", "add_remove_set",
        "uniform_query_set",
    )},
    "sup_mahalanobis": "dpopt.covariance.mahalanobis_sup",
    "prune": "dpopt.covariance.pruning",
    **{n: "dpopt.covariance.privacy" for n in ("CovariancePrivacy", "privacy_of")},
    # releasing noise
    **{n: "dpopt.covariance.mechanisms" for n in (
        "DenoiserMechanism", "GaussianMechanism", "LaplaceMechanism",
    )},
    # private sampling with the ideal denoiser
    **{n: "dpopt.diffusion.sampler" for n in ("PrivateSamples", "sample_private")},
    "verify_record": "dpopt.diffusion.record",
}

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
    *sorted(_EXPORTS),
]


__getattr__, __dir__ = lazy_exports("dpopt", _EXPORTS, globals())
