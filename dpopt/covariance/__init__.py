"""The optimal Gaussian noise covariance: sensitivity geometry, the program, its privacy, release.

Modules, in the order data flows through them:

- :mod:`~dpopt.covariance.domains` — data domains (finite points, boxes, grids);
- :mod:`~dpopt.covariance.denoiser` — the ideal diffusion denoiser and its two-record vectors;
- :mod:`~dpopt.covariance.sensitivity` — sensitivity sets (two-record, uniform-query, box vertices);
- :mod:`~dpopt.covariance.relation` — the neighbouring relation (add/remove, replacement);
- :mod:`~dpopt.covariance.mahalanobis_sup` — the sup of :math:`s^\\top\\Sigma^{-1}s` over a set;
- :mod:`~dpopt.covariance.pruning` — dropping vectors that can never attain that sup;
- :mod:`~dpopt.covariance.program` — the covariance program and its cvxpy views;
- :mod:`~dpopt.covariance.design` — :func:`design_covariance`, the certified optimum;
- :mod:`~dpopt.covariance.batch` — :func:`design_covariance_batch`, many certified optima at once;
- :mod:`~dpopt.covariance.privacy` — the privacy of any covariance on a set;
- :mod:`~dpopt.covariance.mechanisms` — releasing noise.

Names are re-exported lazily, so importing this package does not import cvxpy.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    **{n: "dpopt.covariance.domains" for n in ("Box", "Domain", "FinitePoints", "Grid",
                                                "SnapReport", "as_domain", "snap",
                                                "Ball", "Ellipsoid")},
    **{n: "dpopt.covariance.sensitivity" for n in (
        "BoxTwoRecordSet", "BoxVertexDifferences", "EllipsoidDifferences", "PrunedSet",
        "TwoRecordVectors", "UniformQueryVectors",
        "add_remove_set", "uniform_query_set",
    )},
    **{n: "dpopt.covariance.mahalanobis_sup" for n in ("MahalanobisSup", "sup_mahalanobis")},
    "prune": "dpopt.covariance.pruning",
    **{n: "dpopt.covariance.program" for n in ("CovarianceProgram", "isotropic_baseline")},
    **{n: "dpopt.covariance.design" for n in ("Design", "design_covariance")},
    "design_covariance_batch": "dpopt.covariance.batch",
    **{n: "dpopt.covariance.privacy" for n in ("CovariancePrivacy", "privacy_of")},
    **{n: "dpopt.covariance.mechanisms" for n in (
        "DenoiserMechanism", "DenoiserRelease", "GaussianMechanism", "LaplaceMechanism",
    )},
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports("dpopt.covariance", _EXPORTS, globals())
