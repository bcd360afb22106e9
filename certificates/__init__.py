"""Independent checks of dpopt's results, with numpy/scipy (and exact arithmetic) only.

Imports nothing from ``dpopt`` or ``solvers`` and never trusts a solver's status string:

- :func:`check` certifies a candidate optimal covariance with a factored dual (MATH.md §12),
  returning an interval [lower, upper] on the optimum and the covariance repaired to strict
  feasibility; ``rigorous=True`` accounts for every rounding error.
- :func:`write_certificate` / :func:`read_certificate` / :func:`verify_file`: JSON certificate
  files, re-checked from scratch on load (:func:`parse_certificate`: the unverified parse).
- :func:`check_coupling` certifies an optimal-transport coupling used by Rényi Pufferfish
  calibration (exact marginals, log-domain average cost).
"""

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

__all__ = [
    "ArrayVectors",
    "CertificateFile",
    "CouplingCertificate",
    "CovarianceCertificate",
    "CovarianceProgram",
    "FactoredDual",
    "VectorSource",
    "check",
    "check_coupling",
    "log_average",
    "parse_certificate",
    "primal_ratio",
    "read_certificate",
    "round_to_marginals",
    "verify_file",
    "write_certificate",
]
