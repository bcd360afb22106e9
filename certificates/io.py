r"""JSON certificate files for the optimal covariance (no pickle), re-checked from scratch.

A file holds the program (the sensitivity vectors, or for a :class:`VectorSource` a description
and a sha256 of its vectors), :math:`W`, :math:`q`, :math:`\eta`, the certified covariance (the
*repaired* :math:`\Sigma`), the factored dual, the claimed interval on the optimum, library
versions and a sha256 of the canonical content. Floats are written with ``repr`` (shortest round
trip), so reading gives back the very same doubles.

What the file claims
--------------------
*Every* sensitivity vector :math:`s_j` of the stored (or described) set satisfies
:math:`s_j^\top\Sigma^{-1}s_j < q` for the stored :math:`\Sigma` as written (no rescaling), and the
optimum :math:`v_\eta(q)` of the program lies in ``[claim.lower, claim.upper]``. The writer widens
the certified interval outward by :data:`CLAIM_MARGIN` (relative) before storing it: a weaker
statement, still true, that a re-check on another BLAS or in rigorous mode reproduces.

What :func:`verify_file` checks (everything, trusting nothing)
--------------------------------------------------------------
* strict structure and types: exactly the expected fields, integers where integers belong
  (``true`` is not ``1``), JSON booleans for flags (``"yes"`` is not ``true``), finite numbers
  only (``NaN``/``Infinity``/overflowing literals are refused), arrays of exactly the declared
  shapes, exactly symmetric ``W`` and :math:`\Sigma`, duplicate keys refused, bounded file size;
  any violation is a
  :class:`~certificates.errors.CertificateError` naming the field;
* the sha256 of the canonical content and the sha256 of the vectors (stored ones, or the
  ``source`` given by the caller, which must match the file's digest);
* the claim's own consistency: ``lower <= upper``, ``gap`` is the gap of ``[lower, upper]``,
  ``certified`` only if that gap is at most ``tol``;
* a fresh :func:`certificates.covariance.check` of the stored data (rigorous when the file claims
  rigour or the caller asks for it): the stored covariance must be strictly feasible as written,
  and the re-derived interval must lie *inside* the claimed one, with no slack in either mode.

What it does not check
----------------------
The sha256 fields are unkeyed digests: they detect accidental corruption (a truncated copy, a
flipped bit), **not** deliberate edits, since whoever edits the file can recompute them. The
protection against a deliberate edit is the re-check itself: an edited file either fails it or
still proves what it claims. The file says nothing about *which* sensitivity set the vectors
stand for: this module treats ``vectors_description`` as opaque text. Binding a description to
the vectors (regenerating them and comparing digests) and checking a privacy budget against
:math:`q` is done one layer up, by ``dpopt`` (``Design.load`` and ``dpopt verify``), which passes
the regenerated vectors in as ``source``.

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
import math
import os
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from certificates.covariance import CovarianceCertificate, check
from certificates.errors import (
    CertificateError,
    DpoptError,
    InvalidParameterError,
    InvalidTypeError,
    SolverError,
)
from certificates.problem import ArrayVectors, CovarianceProgram, FactoredDual, VectorSource
from certificates.rigorous import ChunkMap
from certificates.strict_json import (
    MAX_FILE_BYTES,
    FieldError,
    JSONValue,
    boolean,
    check_digest,
    check_versions,
    digest,
    fail,
    hex64,
    integer,
    kind_of,
    load_json,
    matrix,
    number,
    obj,
    rejection,
    vector,
    versions,
    write_signed,
)
from certificates.validate import as_vectors

__all__ = [
    "CLAIM_MARGIN",
    "FORMAT",
    "MAX_FILE_BYTES",
    "CertificateFile",
    "Claim",
    "JSONValue",
    "parse_certificate",
    "read_certificate",
    "vectors_digest",
    "verify_certificate",
    "verify_file",
    "write_certificate",
]

#: Format tag stored in every file.
FORMAT = "dpopt-covariance-certificate/1"
#: Relative outward widening of the certified interval before it is stored as the claim.
CLAIM_MARGIN = 1e-8
#: The digest of a file's content, under the name earlier versions of the certificates guide
#: imported (its owner is :func:`certificates.strict_json.digest`).
_canonical = digest

_TOP = ("format", "problem", "covariance", "dual", "claim", "versions", "sha256")
_PROBLEM = (
    "dim", "count", "vectors", "vectors_description", "vectors_sha256", "weight", "bound",
    "noise_floor",
)
_DUAL = ("support", "multipliers", "directions", "floor_factor", "floor_rank")
_CLAIM = ("lower", "upper", "gap", "certified", "rigorous", "tol")

#: A JSON value, as :func:`json.loads` returns it (the ``to_dict`` summaries of dpopt's reports
#: are objects of these); defined in :mod:`certificates.strict_json`.


class Claim(TypedDict):
    """What a certificate file claims: the optimum lies in ``[lower, upper]`` (relative gap
    ``gap``), certified at tolerance ``tol`` when ``certified``, by a rigorous re-check when
    ``rigorous``."""

    lower: float
    upper: float
    gap: float
    certified: bool
    rigorous: bool
    tol: float


@dataclass(frozen=True)
class CertificateFile:
    """The parsed content of a certificate file.

    From :func:`parse_certificate` only the structure, the types and the two sha256 digests have
    been checked (``certificate`` is ``None``: **unverified**, do not use the covariance). From
    :func:`read_certificate` the claim has been re-checked from scratch and ``certificate`` holds
    the fresh :class:`~certificates.covariance.CovarianceCertificate`.
    """

    problem: CovarianceProgram | None
    covariance: NDArray[np.float64]
    dual: FactoredDual
    claim: Claim
    versions: dict[str, str]
    sha256: str
    vectors_description: str | None
    vectors_sha256: str
    weight: NDArray[np.float64]
    bound: float
    noise_floor: float
    dim: int = 0
    count: int = 0
    certificate: CovarianceCertificate | None = None

    @property
    def verified(self) -> bool:
        """Whether the claim was re-checked (the file came from :func:`read_certificate`)."""
        return self.certificate is not None


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




def _floats(a: Any) -> Any:
    arr = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise CertificateError("cannot write non-finite numbers to a certificate file")
    return arr.tolist()


def _claim_gap(lower: float, upper: float) -> float:
    """The relative gap of a claimed interval, computed the same way by writer and verifier."""
    return (upper - lower) / upper


def write_certificate(
    path: str | os.PathLike[str],
    problem: CovarianceProgram,
    certificate: CovarianceCertificate,
    dual: FactoredDual,
    *,
    description: str | None = None,
    overwrite: bool = False,
    produced_by: str | None = None,
) -> str:
    """Write a certificate file; return its sha256.

    The stored claim is ``certificate``'s interval widened outward by :data:`CLAIM_MARGIN`
    (relative); ``certified`` is stored true only when the widened interval's gap is at most
    ``certificate.tol``.

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
        How to regenerate the vectors (required for a VectorSource). This module stores it as
        opaque text; ``dpopt`` writes and checks a structured one.
    produced_by : str, optional
        Which solver path produced the answer (free text, stored as ``versions["produced_by"]``,
        at most 200 characters; informative only, nothing is verified from it).
    """
    if not isinstance(problem, CovarianceProgram):
        raise InvalidTypeError("problem", problem, "a CovarianceProgram")
    if not isinstance(certificate, CovarianceCertificate):
        raise InvalidTypeError("certificate", certificate, "a CovarianceCertificate")
    if not isinstance(dual, FactoredDual):
        raise InvalidTypeError("dual", dual, "a FactoredDual")
    if description is not None and not isinstance(description, str):
        raise InvalidTypeError("description", description, "a string")
    if produced_by is not None and not isinstance(produced_by, str):
        raise InvalidTypeError("produced_by", produced_by, "a string")
    if not (math.isfinite(certificate.upper) and certificate.upper > 0):
        raise CertificateError("refusing to write a certificate without a finite upper bound")
    stored = isinstance(problem.vectors, np.ndarray)
    if not stored and not description:
        raise InvalidParameterError(
            "description", description, "is required when the vectors come from a VectorSource"
        )
    lower = max(0.0, float(certificate.lower)) * (1.0 - CLAIM_MARGIN)
    upper = float(certificate.upper) * (1.0 + CLAIM_MARGIN)
    gap = _claim_gap(lower, upper)
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
            "directions": _floats(dual.directions.reshape(-1, problem.dim)),
            "floor_factor": _floats(dual.floor_factor.reshape(problem.dim, -1)),
            "floor_rank": int(dual.floor_factor.reshape(problem.dim, -1).shape[1]),
        },
        "claim": {
            "lower": lower,
            "upper": upper,
            "gap": gap,
            "certified": bool(certificate.certified and gap <= certificate.tol),
            "rigorous": bool(certificate.rigorous),
            "tol": float(certificate.tol),
        },
        "versions": {**versions("cvxpy", "clarabel", "scs"),
                     **({"produced_by": produced_by[:200]} if produced_by else {})},
    }
    return write_signed(path, content, overwrite=overwrite)


# ----------------------------------------------------------------------------- strict parsing


# The strict reader shared by every certificate kind (certificates.strict_json).
_Reject = FieldError
_fail = fail
_object = obj
_kind = kind_of
_int = integer
_number = number
_bool = boolean
_hex = hex64
_matrix = matrix


def _vector(field: str, items: Any, n: int) -> NDArray[np.float64]:
    return vector(field, items, n)


def _parse(content: Any) -> CertificateFile:
    """Strict structural parse of the decoded JSON (raises _Reject)."""
    top = _object("file", content, _TOP)
    if top["format"] != FORMAT:
        _fail("format", f"must be {FORMAT!r}")
    sha = _hex("sha256", top["sha256"])
    pr = _object("problem", top["problem"], _PROBLEM)
    d = _int("problem.dim", pr["dim"], 1)
    count = _int("problem.count", pr["count"], 1)
    desc = pr["vectors_description"]
    if desc is not None and type(desc) is not str:
        _fail("problem.vectors_description", f"must be a string or null, got {_kind(desc)}")
    vec_sha = _hex("problem.vectors_sha256", pr["vectors_sha256"])
    weight = _matrix("problem.weight", pr["weight"], d, d)
    bound = _number("problem.bound", pr["bound"], 0.0, low_open=True)
    eta = _number("problem.noise_floor", pr["noise_floor"], 0.0)
    vec = None
    if pr["vectors"] is None:
        if not desc:
            _fail("problem.vectors", "null, but there is no description of the vectors either")
    else:
        vec = _matrix("problem.vectors", pr["vectors"], count, d)
    cov = _matrix("covariance", top["covariance"], d, d)
    for field, mat in (("problem.weight", weight), ("covariance", cov)):
        if not np.array_equal(mat, mat.T):
            _fail(field, "must be exactly symmetric (the writer stores symmetric matrices)")
    du = _object("dual", top["dual"], _DUAL)
    support = du["support"]
    if type(support) is not list:
        _fail("dual.support", f"must be an array, got {_kind(support)}")
    k = len(support)
    for i, j in enumerate(support):
        _int(f"dual.support[{i}]", j, 0, count - 1)
    mult = _vector("dual.multipliers", du["multipliers"], k)
    if np.any(mult < 0):
        _fail("dual.multipliers", "must be >= 0")
    directions = _matrix("dual.directions", du["directions"], k, d)
    rank = _int("dual.floor_rank", du["floor_rank"], 0, d)
    floor = _matrix("dual.floor_factor", du["floor_factor"], d, rank)
    cl = _object("claim", top["claim"], _CLAIM)
    claim: Claim = {
        "lower": _number("claim.lower", cl["lower"]),
        "upper": _number("claim.upper", cl["upper"], 0.0, low_open=True),
        "gap": _number("claim.gap", cl["gap"]),
        "certified": _bool("claim.certified", cl["certified"]),
        "rigorous": _bool("claim.rigorous", cl["rigorous"]),
        "tol": _number("claim.tol", cl["tol"], 0.0, low_open=True),
    }
    check_versions(top["versions"])
    check_digest(top, sha)
    if vec is not None and vectors_digest(vec) != vec_sha:
        _fail("problem.vectors_sha256", "does not match the stored vectors")
    try:
        problem = None if vec is None else CovarianceProgram(vec, weight, bound, eta)
        dual = FactoredDual(np.asarray(support, dtype=np.intp), mult, directions, floor)
    except (DpoptError, ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError) as exc:
        _fail("problem", str(exc))
    return CertificateFile(
        problem=problem, covariance=cov, dual=dual, claim=claim, versions=dict(top["versions"]),
        sha256=sha, vectors_description=desc, vectors_sha256=vec_sha, weight=weight,
        bound=bound, noise_floor=eta, dim=d, count=count,
    )


def parse_certificate(path: str | os.PathLike[str]) -> CertificateFile:
    """**Unverified** parse of a certificate file: structure, types and sha256 digests only.

    The claim is *not* re-checked: the returned covariance may be anything a file's author wrote
    (with recomputed digests). Use :func:`read_certificate` or :func:`verify_file` before relying
    on it, or ``dpopt.covariance.design.Design.load``.

    Raises
    ------
    CertificateError
        The file cannot be read or is malformed (the message names the field).
    """
    try:
        return _parse(load_json(path, max_bytes=MAX_FILE_BYTES))
    except FieldError as exc:
        raise rejection(path, exc) from None


def verify_certificate(
    cf: CertificateFile,
    *,
    source: VectorSource | NDArray[np.float64] | None = None,
    rigorous: bool | None = None,
    name: str = "certificate",
    chunk_map: ChunkMap | None = None,
) -> CovarianceCertificate:
    """Re-check a parsed file's claim from scratch (see the module notes); return the fresh
    certificate. ``name`` labels the messages. Raises CertificateError when the claim fails.

    ``chunk_map`` runs the verification pass over the vectors elsewhere (see
    :func:`certificates.covariance.check`); the sha256 comparison of ``source`` with the file's
    digest is one sequential pass here (a digest cannot be split into parts)."""
    where = f"{name} rejected"
    problem = cf.problem
    if isinstance(source, np.ndarray):
        source = ArrayVectors(as_vectors("source", source))
    if source is not None:
        if not isinstance(source, VectorSource):
            raise InvalidTypeError("source", source, "a VectorSource or a (J, d) array")
        if (int(source.count), int(source.dim)) != (cf.count, cf.dim):
            raise CertificateError(
                f"{where}: the given vectors ({source.count} x {source.dim}) are not the file's "
                f"({cf.count} x {cf.dim})"
            )
        if vectors_digest(source) != cf.vectors_sha256:
            raise CertificateError(
                f"{where}: the given (or regenerated) vectors do not match the file's sha256"
            )
    if problem is None:
        if source is None:
            raise CertificateError(
                f"{where}: the file does not store its vectors "
                f"({(cf.vectors_description or '')[:80]!r}); pass source=..."
            )
        try:
            problem = CovarianceProgram(source, cf.weight, cf.bound, cf.noise_floor)
        except (DpoptError, ValueError) as exc:
            raise CertificateError(f"{where}: {exc}") from None
    claim = cf.claim
    lo_c, up_c, tol = claim["lower"], claim["upper"], claim["tol"]
    problems: list[str] = []
    if not lo_c <= up_c:
        problems.append(f"claimed lower {lo_c!r} > claimed upper {up_c!r}")
    elif claim["gap"] != _claim_gap(lo_c, up_c):
        problems.append(f"claimed gap {claim['gap']!r} is not the gap of the claimed interval")
    elif claim["certified"] and not claim["gap"] <= tol:
        problems.append(f"claimed certified with gap {claim['gap']!r} > tol {tol!r}")
    if problems:
        raise CertificateError(f"{where}: " + "; ".join(problems))
    mode = bool(claim["rigorous"]) or bool(rigorous)
    try:
        cert = check(problem, cf.covariance, cf.dual, tol=tol, rigorous=mode, chunk_map=chunk_map)
    except SolverError:  # a chunk_map that could not complete its pass: no verdict either way
        raise
    except (DpoptError, ValueError, TypeError, ArithmeticError, np.linalg.LinAlgError) as exc:
        raise CertificateError(f"{where}: the re-check cannot run on this data: {exc}") from None
    if cert.scale != 1.0 or not math.isfinite(cert.upper):
        problems.append(_infeasibility(cert, cf.noise_floor))
    else:
        if not lo_c <= cert.lower:
            problems.append(f"claimed lower {lo_c!r} > re-derived lower {cert.lower!r}")
        if not cert.upper <= up_c:
            problems.append(f"claimed upper {up_c!r} < re-derived upper {cert.upper!r}")
        if not cert.lower <= cert.upper:
            problems.append("re-derived lower exceeds upper: inconsistent data")
        if claim["certified"] and not cert.certified:
            problems.append("claimed certified but the re-check is not")
    if problems:
        raise CertificateError(f"{where}: " + "; ".join(problems))
    return cert


def _infeasibility(cert: CovarianceCertificate, eta: float) -> str:
    r"""Why the stored covariance is not strictly feasible as written: the noise floor
    (:math:`\Sigma \succeq \eta I`), the Mahalanobis bound (:math:`s_j^\top\Sigma^{-1}s_j < q`),
    or both; or neither could be proven despite floating point saying they hold."""
    lam_min = cert.floor_residual + eta
    reasons = []
    if eta > 0 and not cert.floor_residual > 0:
        reasons.append(
            f"the noise floor eta = {eta!r} exceeds lambda_min(Sigma) = {lam_min!r} of the "
            "stored covariance (Sigma >= eta I fails)"
        )
    if not cert.primal_residual < 0:
        reasons.append(
            "the Mahalanobis bound fails: max_j s_j^T Sigma^-1 s_j / q - 1 = "
            f"{cert.primal_residual:.3g} >= 0"
        )
    if not reasons:
        what = (f"lambda_min(Sigma) - eta = {cert.floor_residual:.3g}, " if eta > 0 else "")
        reasons.append(
            "it could not be proven strictly feasible despite floating point "
            f"({what}max_j s_j^T Sigma^-1 s_j / q - 1 = {cert.primal_residual:.3g})"
        )
    return "the stored covariance is not strictly feasible as written: " + "; ".join(reasons)


def read_certificate(
    path: str | os.PathLike[str],
    *,
    source: VectorSource | None = None,
    rigorous: bool | None = None,
) -> CertificateFile:
    """Read a certificate file **and re-check it** (:func:`verify_file`); return its content with
    the fresh certificate attached (``.certificate``). Raises CertificateError when it fails.
    For the unverified parse alone use :func:`parse_certificate`."""
    cf = parse_certificate(path)
    cert = verify_certificate(cf, source=source, rigorous=rigorous,
                              name=f"certificate {os.fspath(path)!r}")
    return replace(cf, certificate=cert)


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
        When the file does store them, a given ``source`` must match them too (this is how a
        caller binds the file to a set it regenerated from the description).
    rigorous : bool, optional
        Re-check with every rounding error accounted for. A file that claims rigour is always
        re-checked rigorously; ``None`` (default) uses the file's mode.

    Returns
    -------
    CovarianceCertificate
        The fresh certificate (its ``repaired_covariance`` equals the stored covariance).

    Raises
    ------
    CertificateError
        Unreadable or malformed file (naming the field), digest mismatch, or the re-check does
        not reproduce the claim (naming what failed).
    """
    cf = parse_certificate(path)
    return verify_certificate(cf, source=source, rigorous=rigorous,
                              name=f"certificate {os.fspath(path)!r}")
