"""Independent checks of dpopt's results, with numpy/scipy (and exact arithmetic) only.

Imports nothing from ``dpopt`` or ``solvers`` and never trusts a solver's status string:

- :func:`check` certifies a candidate optimal covariance with a factored dual,
  returning an interval [lower, upper] on the optimum and the covariance repaired to strict
  feasibility; ``rigorous=True`` accounts for every rounding error.
- :func:`write_certificate` / :func:`read_certificate` / :func:`verify_file`: JSON certificate
  files, re-checked from scratch on load (:func:`parse_certificate`: the unverified parse).
- :func:`certified_box_sup` proves an upper bound (and an attained lower bound) on the sup of
  the two-record form :math:`t_g(x, y)^\\top A\\, t_g(x, y)` over every pair of records in a box.
- :func:`check_coupling` certifies an optimal-transport coupling used by Rényi Pufferfish
  calibration (exact marginals, log-domain average cost).
- :func:`divergence_bounds` proves two-sided bounds on the Rényi divergence of two noisy discrete
  laws (Laplace / Gaussian noise, 1-D); :func:`check_calibration` and
  :func:`verify_mixture_file` check a tight Pufferfish calibration and its JSON file.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> module that defines it; imported on first use (PEP 562), so that
#: ``import certificates.errors`` (which every dpopt import needs) does not load scipy
_EXPORTS: dict[str, str] = {
    **{n: "certificates.box_sup" for n in (
        "BoxSup", "certified_box_sup", "two_record_form_bounds")},
    **{n: "certificates.coupling" for n in (
        "CouplingCertificate", "check_coupling", "log_average", "round_to_marginals")},
    **{n: "certificates.covariance" for n in (
        "CovarianceCertificate", "check", "primal_ratio")},
    **{n: "certificates.io" for n in (
        "CertificateFile", "parse_certificate", "read_certificate", "verify_file",
        "write_certificate")},
    **{n: "certificates.problem" for n in (
        "ArrayVectors", "CovarianceProgram", "FactoredDual", "VectorSource")},
    **{n: "certificates.renyi_mixture" for n in (
        "DivergenceBounds", "MixtureCertificate", "check_calibration", "divergence_bounds",
        "verify_mixture_file", "write_mixture_certificate")},
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from certificates.box_sup import BoxSup, certified_box_sup, two_record_form_bounds
    from certificates.coupling import (
        CouplingCertificate,
        check_coupling,
        log_average,
        round_to_marginals,
    )
    from certificates.covariance import CovarianceCertificate, check, primal_ratio
    from certificates.io import (
        CertificateFile,
        parse_certificate,
        read_certificate,
        verify_file,
        write_certificate,
    )
    from certificates.problem import ArrayVectors, CovarianceProgram, FactoredDual, VectorSource
    from certificates.renyi_mixture import (
        DivergenceBounds,
        MixtureCertificate,
        check_calibration,
        divergence_bounds,
        verify_mixture_file,
        write_mixture_certificate,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'certificates' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "ArrayVectors",
    "BoxSup",
    "CertificateFile",
    "CouplingCertificate",
    "CovarianceCertificate",
    "CovarianceProgram",
    "DivergenceBounds",
    "FactoredDual",
    "MixtureCertificate",
    "VectorSource",
    "certified_box_sup",
    "check",
    "check_calibration",
    "check_coupling",
    "divergence_bounds",
    "log_average",
    "parse_certificate",
    "primal_ratio",
    "read_certificate",
    "round_to_marginals",
    "two_record_form_bounds",
    "verify_file",
    "verify_mixture_file",
    "write_certificate",
    "write_mixture_certificate",
]
