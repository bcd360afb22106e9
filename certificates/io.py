"""JSON certificate files for the optimal covariance (no pickle), re-checked from scratch.

A file holds the program (the sensitivity vectors, or for a :class:`VectorSource` a description
and a sha256 of its vectors), W, q, eta, the certified covariance (the *repaired* Sigma), the
factored dual, the claimed interval, library versions and a sha256 of the canonical numeric
content. Floats are written with ``repr`` (shortest round-trip), so reading gives back the very
same doubles.

:func:`verify_file` rejects a file (``CertificateError``) when

* the stored sha256 does not match the content (any edited digit), or
* re-running :func:`certificates.covariance.check` on the stored data does not reproduce the
  claim: the recomputed interval must lie inside the claimed one up to ``1e-9`` relative, the
  covariance must be strictly feasible as stored (no rescaling needed) and the claimed
  certification must hold.

Example
-------
>>> import numpy as np, tempfile, os
>>> from certificates.problem import CovarianceProgram, FactoredDual
>>> from certificates.covariance import check
>>> p = CovarianceProgram(np.eye(2), np.eye(2), 2.0)
>>> dual = FactoredDual(np.array([0, 1]), np.array([0.25, 0.25]), 2 * np.eye(2), np.zeros((2, 0)))
>>> cert = check(p, 0.5 * np.eye(2), dual)
>>> path = os.path.join(tempfile.mkdtemp(), "c.json")
>>> _ = write_certificate(path, p, cert, dual)
>>> verify_file(path).certified
True
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
from numpy.typing import NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.errors import CertificateError, InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProgram, FactoredDual, VectorSource

__all__ = [
    "FORMAT",
    "CertificateFile",
    "read_certificate",
    "vectors_digest",
    "verify_file",
    "write_certificate",
]

#: Format tag stored in every file.
FORMAT = "dpopt-covariance-certificate/1"
#: Relative slack allowed between a recomputed and a claimed bound (BLAS differences).
CLAIM_RTOL = 1e-9


@dataclass(frozen=True)
class CertificateFile:
    """The content of a certificate file (hash already verified)."""

    problem: CovarianceProgram | None
    covariance: NDArray[np.float64]
    dual: FactoredDual
    claim: dict[str, Any]
    versions: dict[str, str]
    sha256: str
    vectors_description: str | None
    vectors_sha256: str
    weight: NDArray[np.float64]
    bound: float
    noise_floor: float


def vectors_digest(source: VectorSource | NDArray[np.float64]) -> str:
    """sha256 of the vectors (shape, then float64 little-endian bytes chunk by chunk)."""
    if isinstance(source, np.ndarray):
        arr = np.ascontiguousarray(source, dtype="<f8")
        h = hashlib.sha256(f"{arr.shape[0]}x{arr.shape[1]}".encode())
        h.update(arr.tobytes())
        return h.hexdigest()
    h = hashlib.sha256(f"{source.count}x{source.dim}".encode())
    for _, block in source.chunks():
        h.update(np.ascontiguousarray(block, dtype="<f8").tobytes())
    return h.hexdigest()


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for pkg in ("scipy", "dpopt", "cvxpy", "clarabel", "scs"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def _canonical(content: dict[str, Any]) -> str:
    body = {k: v for k, v in content.items() if k != "sha256"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    ).hexdigest()


def _floats(a: Any) -> Any:
    arr = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise CertificateError("cannot write non-finite numbers to a certificate file")
    return arr.tolist()


def write_certificate(
    path: str | os.PathLike[str],
    problem: CovarianceProgram,
    certificate: CovarianceCertificate,
    dual: FactoredDual,
    *,
    description: str | None = None,
    overwrite: bool = False,
) -> str:
    """Write a certificate file; return its sha256.

    Parameters
    ----------
    path : path-like
        Target file; an existing file is never overwritten unless ``overwrite=True``.
    problem : CovarianceProgram
        Array vectors are stored; a VectorSource is stored as ``description`` + its sha256.
    certificate : CovarianceCertificate
        From :func:`certificates.covariance.check`; its ``repaired_covariance`` is what the file
        certifies.
    dual : FactoredDual
        The dual that was checked.
    description : str, optional
        How to regenerate the vectors of a VectorSource (required for one).
    """
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    if not isinstance(certificate, CovarianceCertificate):
        raise InvalidTypeError("certificate", certificate, "a CovarianceCertificate")
    if not isinstance(dual, FactoredDual):
        raise InvalidTypeError("dual", dual, "a FactoredDual")
    if not math.isfinite(certificate.upper):
        raise CertificateError("refusing to write a certificate without a finite upper bound")
    stored = isinstance(problem.vectors, np.ndarray)
    if not stored and not description:
        raise InvalidParameterError(
            "description", description, "is required when the vectors come from a VectorSource"
        )
    content: dict[str, Any] = {
        "format": FORMAT,
        "problem": {
            "dim": problem.dim,
            "count": problem.count,
            "vectors": _floats(problem.vectors) if stored else None,
            "vectors_description": description,
            "vectors_sha256": vectors_digest(problem.vectors if stored else problem.source),
            "weight": _floats(problem.weight),
            "bound": float(problem.bound),
            "noise_floor": float(problem.noise_floor),
        },
        "covariance": _floats(certificate.repaired_covariance),
        "dual": {
            "support": [int(i) for i in dual.support],
            "multipliers": _floats(dual.multipliers),
            "directions": _floats(dual.directions),
            "floor_factor": _floats(dual.floor_factor),
            "floor_rank": int(dual.floor_factor.shape[1]),
        },
        "claim": {
            "lower": float(certificate.lower),
            "upper": float(certificate.upper),
            "gap": float(certificate.gap),
            "certified": bool(certificate.certified),
            "rigorous": bool(certificate.rigorous),
            "tol": float(certificate.tol),
        },
        "versions": _versions(),
    }
    content["sha256"] = _canonical(content)
    mode = "w" if overwrite else "x"
    try:
        with open(path, mode, encoding="utf-8") as fh:
            json.dump(content, fh, indent=1, allow_nan=False)
    except FileExistsError:
        raise InvalidParameterError(
            "path", os.fspath(path), "exists; pass overwrite=True to replace it"
        ) from None
    return str(content["sha256"])


def _matrix(rows: Any, shape: tuple[int, int]) -> NDArray[np.float64]:
    arr = np.asarray(rows, dtype=np.float64).reshape(shape)
    if not np.all(np.isfinite(arr)):
        raise CertificateError("non-finite number in certificate file")
    return arr


def read_certificate(path: str | os.PathLike[str]) -> CertificateFile:
    """Read a certificate file and verify its sha256 (raises CertificateError)."""
    try:
        with open(path, encoding="utf-8") as fh:
            content = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise CertificateError(f"cannot read certificate file {os.fspath(path)!r}: {exc}") from exc
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise CertificateError(f"not a {FORMAT} file: {os.fspath(path)!r}")
    if content.get("sha256") != _canonical(content):
        raise CertificateError(
            f"sha256 mismatch in {os.fspath(path)!r}: the file was modified after writing"
        )
    try:
        pr = content["problem"]
        d, count = int(pr["dim"]), int(pr["count"])
        weight = _matrix(pr["weight"], (d, d))
        problem = None
        if pr["vectors"] is not None:
            vec = _matrix(pr["vectors"], (count, d))
            if vectors_digest(vec) != pr["vectors_sha256"]:
                raise CertificateError("stored vectors do not match their sha256")
            problem = CovarianceProgram(vec, weight, pr["bound"], pr["noise_floor"])
        du = content["dual"]
        k = len(du["support"])
        dual = FactoredDual(
            np.asarray(du["support"], dtype=np.intp),
            np.asarray(du["multipliers"], dtype=np.float64).reshape(k),
            _matrix(du["directions"], (k, d)),
            _matrix(du["floor_factor"], (d, int(du["floor_rank"]))),
        )
        cov = _matrix(content["covariance"], (d, d))
    except (KeyError, TypeError, ValueError) as exc:
        raise CertificateError(f"malformed certificate file {os.fspath(path)!r}: {exc}") from exc
    return CertificateFile(
        problem=problem, covariance=cov, dual=dual, claim=dict(content["claim"]),
        versions=dict(content.get("versions", {})), sha256=str(content["sha256"]),
        vectors_description=pr.get("vectors_description"),
        vectors_sha256=str(pr["vectors_sha256"]), weight=weight, bound=float(pr["bound"]),
        noise_floor=float(pr["noise_floor"]),
    )


def verify_file(
    path: str | os.PathLike[str],
    *,
    source: VectorSource | None = None,
    rigorous: bool | None = None,
) -> CovarianceCertificate:
    """Load a certificate file and re-check it from scratch.

    Parameters
    ----------
    path : path-like
    source : VectorSource, optional
        Required when the file does not store the vectors; its sha256 must match the file's.
    rigorous : bool, optional
        Re-check mode (default: the claimed one).

    Returns
    -------
    CovarianceCertificate
        The fresh certificate (its ``repaired_covariance`` equals the stored covariance).

    Raises
    ------
    CertificateError
        Hash mismatch, malformed content, or the re-check does not reproduce the claim.
    """
    cf = read_certificate(path)
    problem = cf.problem
    if problem is None:
        if source is None:
            raise CertificateError(
                f"{os.fspath(path)!r} does not store its vectors ({cf.vectors_description!r}); "
                "pass source=..."
            )
        if vectors_digest(source) != cf.vectors_sha256:
            raise CertificateError("the given source's vectors do not match the file's sha256")
        problem = CovarianceProgram(source, cf.weight, cf.bound, cf.noise_floor)
    claim = cf.claim
    mode = bool(claim.get("rigorous", False)) if rigorous is None else rigorous
    cert = check(problem, cf.covariance, cf.dual, tol=float(claim["tol"]), rigorous=mode)
    problems = []
    if cert.scale != 1.0:
        problems.append("the stored covariance is not strictly feasible")
    if cert.lower < float(claim["lower"]) * (1 - CLAIM_RTOL) - 1e-300:
        problems.append(f"recomputed lower {cert.lower!r} < claimed {claim['lower']!r}")
    if cert.upper > float(claim["upper"]) * (1 + CLAIM_RTOL):
        problems.append(f"recomputed upper {cert.upper!r} > claimed {claim['upper']!r}")
    if bool(claim["certified"]) and not cert.certified:
        problems.append("claimed certified but the re-check is not")
    if problems:
        raise CertificateError(f"certificate {os.fspath(path)!r} rejected: " + "; ".join(problems))
    return cert
