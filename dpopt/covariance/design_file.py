r"""Design files: a certificate bound to the sensitivity set and the budget it describes.

A certificate file of :mod:`certificates.io` proves a statement about the vectors *stored in it*
(or given to the check): every :math:`s_j^\top\Sigma^{-1}s_j < q` and the optimum lies in the
claimed interval. It does not know what the vectors stand for. ``dpopt design`` / ``dpopt demo``
and :meth:`Design.save() <dpopt.covariance.design.Design.save>` therefore put a structured
*description* in the file (the grammar of :mod:`dpopt.covariance.description`, which owns it):
the domain (a ``grid:``/``box:`` spec, or the points of a finite domain themselves), the query and
noise level of the ideal denoiser or the uniform query, the neighbouring relation and the budget
specs.

:func:`verify_design_file` is the ``dpopt`` layer of the check, on top of
:func:`certificates.io.verify_certificate` (which re-checks the numbers and compares digests):

1. it parses the description strictly (unknown or missing fields, wrong types: rejected);
2. it **regenerates** the sensitivity vectors from the description and hands them to the
   certificates layer as ``source``, which compares their sha256 with the file's (stored vectors
   included): a file whose vectors are not the described set is rejected;
3. it **recomputes** the Mahalanobis bound of the described budget(s) (several specs: the
   strictest) and rejects the file unless the stored :math:`q` is at most that bound (a quarter of
   it for the replacement relation, the replacement bound :math:`4q` of the theory page), and unless
   the stored budget label and bound are exactly the recomputed ones.

A file with a free-text description (``Design.save(description="...")``, or a design over a plain
array of vectors) is verified for its stored vectors only; pass ``source=`` and/or ``budget=`` to
bind it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.covariance import CovarianceCertificate
from certificates.io import (
    CertificateFile,
    parse_certificate,
    vectors_digest,
    verify_certificate,
)
from dpopt.covariance import description
from dpopt.errors import CertificateError, DpoptError

if TYPE_CHECKING:  # pragma: no cover - imported lazily below (the CLI's start-up stays light)
    from certificates.box_sup import BoxSup
    from certificates.problem import VectorSource
    from dpopt.accounting.budgets import Budget
    from dpopt.covariance.description import DesignDescription
    from dpopt.parallel import DaskOption

__all__ = [
    "VerifiedDesignFile",
    "verify_design_file",
]

#: Names that moved to :mod:`dpopt.covariance.description` (the one owner of the description
#: grammar); still importable from here, with a DeprecationWarning, until dpopt 0.6.
_MOVED = (
    "DESCRIPTION_TAG", "DesignDescription", "domain_from_spec", "parse_description",
    "sensitivity_from_description",
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from certificates._deprecated import moved

        return moved(f"{__name__}.{name}", "dpopt.covariance.description", name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class VerifiedDesignFile:
    """What :func:`verify_design_file` established.

    Attributes
    ----------
    certificate : CovarianceCertificate
        The fresh re-check (interval inside the file's claim, Σ strictly feasible as stored).
    file : CertificateFile
        The parsed file (``file.certificate`` is ``certificate``).
    description : DesignDescription or None
        The structured description, regenerated and matched; ``None`` for free text.
    vectors : ndarray or VectorSource
        The sensitivity vectors the certificate was checked on.
    budget : object or None
        The budget checked against ``q`` (from the description, else the caller's).
    budget_bound : float or None
        Its recomputed Mahalanobis bound.
    guaranteed_bound : float
        The Mahalanobis bound the design guarantees for its neighbouring relation:
        :func:`dpopt.relation.replacement_sup` of the stored ``q`` (times 4 for replacement).
    relation : {"add_remove", "replacement"}
    box_sup : BoxSup or None
        For a ``two-record-box`` description (records anywhere in a box): the certified sup over
        every pair of records in the box at the file's covariance, re-derived from the box, the
        query, sigma and the covariance alone (``box_sup.upper <= q``).
    """

    certificate: CovarianceCertificate
    file: CertificateFile
    description: DesignDescription | None
    vectors: NDArray[np.float64] | VectorSource
    budget: Budget | None
    budget_bound: float | None
    guaranteed_bound: float
    relation: str
    box_sup: BoxSup | None = None


def verify_design_file(
    path: str | os.PathLike[str],
    *,
    source: ArrayLike | VectorSource | None = None,
    budget: Budget | None = None,
    rigorous: bool | None = None,
    dask: DaskOption = None,
) -> VerifiedDesignFile:
    """Re-check a design/certificate file and bind it to what it describes.

    Parameters
    ----------
    path : path-like
    source : VectorSource or array_like, optional
        The sensitivity vectors the file must be about (required for a file that neither stores
        them nor describes them in a form dpopt can regenerate).
    budget : Budget, optional
        A budget the file must meet: the stored ``q`` must be at most its Mahalanobis bound (a
        quarter of it when the description says ``replace``).
    rigorous : bool, optional
        Re-check with every rounding error accounted for (default: the file's mode).
    dask : None, "local", str or distributed.Client, optional
        Run the verification pass (the bound on max_j s_jᵀ Σ⁻¹ s_j over all J
        vectors, float or rigorous as the check is) as Dask tasks: each task regenerates its
        block of vectors from the description on a worker and applies the certificate checker's
        own per-chunk function (:func:`certificates.rigorous.ratio_chunk`); the checker combines
        the chunks and derives every bound here, so the verdict and the certificate are the same
        as in process. ``"local"`` starts a ``LocalCluster`` for the call, an address or a
        ``Client`` uses that cluster. The sha256 comparison of the regenerated vectors with the
        file's digest stays one sequential pass in this process (a digest cannot be split); it
        costs about a third of the check pass. ``None`` (default): everything here, no Dask
        import.

    Returns
    -------
    VerifiedDesignFile

    Raises
    ------
    CertificateError
        Anything the file claims that does not hold, or malformed content (never another
        exception for a malformed file).
    """
    if dask is not None:
        from dpopt.parallel import dask_executor

        with dask_executor(dask) as executor:
            chunk_map = executor.map_chunks if executor is not None else None
            return _verify_design_file(path, source, budget, rigorous, chunk_map)
    return _verify_design_file(path, source, budget, rigorous, None)


def _verify_design_file(path: str | os.PathLike[str], source: Any, budget: Any,
                        rigorous: bool | None, chunk_map: Any) -> VerifiedDesignFile:
    name = f"design file {os.fspath(path)!r}"
    cf = parse_certificate(path)
    desc = description.parse_description(cf.vectors_description)
    given = None
    if source is not None:
        from dpopt.covariance.sensitivity import as_vector_source

        given = as_vector_source(source)
    regenerated = None
    if desc is not None:
        try:
            regenerated = description.sensitivity_from_description(desc)
        except (DpoptError, ValueError, TypeError, ArithmeticError, MemoryError) as exc:
            raise CertificateError(
                f"{name} rejected: cannot regenerate the described sensitivity set: {exc}"
            ) from None
        if given is not None and (
            (int(regenerated.count), int(regenerated.dim)) != (cf.count, cf.dim)
            or vectors_digest(regenerated) != cf.vectors_sha256
        ):  # both the caller's and the described vectors must be the file's
            raise CertificateError(
                f"{name} rejected: the described sensitivity set is not the file's vectors"
            )
    vectors_for_check = given if given is not None else regenerated
    cert = verify_certificate(cf, source=vectors_for_check, rigorous=rigorous, name=name,
                              chunk_map=chunk_map)
    from dpopt.relation import add_remove_bound, as_relation, replacement_sup

    relation = as_relation(desc.relation if desc is not None else "add_remove")
    replacement = relation.value == "replacement"
    checked_budget, q_budget = None, None
    problems: list[str] = []
    if desc is not None:
        try:
            checked_budget = description.budget_from_description(desc)
            q_budget = float(checked_budget.mahalanobis_bound())
            label = str(checked_budget.describe())
            q_target = add_remove_bound(q_budget, relation)
        except DpoptError as exc:
            raise CertificateError(
                f"{name} rejected: its budget specs do not parse: {exc}"
            ) from None
        if desc.budget != label:
            problems.append(f"budget label {desc.budget[:60]!r} is not {label!r}, the budget its "
                            "specs define")
        if desc.budget_bound != q_budget:
            problems.append(f"budget_bound {desc.budget_bound!r} is not {q_budget!r}, the bound "
                            "its specs define")
        if not cf.bound <= q_target:
            problems.append(f"the stored q = {cf.bound!r} exceeds the bound {q_target!r} "
                            f"of the described budget {label}"
                            + (" under the replacement relation" if replacement else ""))
    if budget is not None:
        if not callable(getattr(budget, "mahalanobis_bound", None)):
            from dpopt.errors import InvalidTypeError

            raise InvalidTypeError("budget", budget, "a dpopt.accounting.budgets.Budget")
        q_user = float(budget.mahalanobis_bound())
        q_user_target = add_remove_bound(q_user, relation)
        if not cf.bound <= q_user_target:
            problems.append(f"the stored q = {cf.bound!r} exceeds the bound {q_user_target!r} "
                            f"of the given budget {budget.describe()} ({relation.value})")
        if checked_budget is None:
            checked_budget, q_budget = budget, q_user
    box_sup = None
    if desc is not None and desc.set == description.BOX_SET and not problems:
        box_sup = _check_box(desc, cert, cf.bound, name)
    if problems:
        raise CertificateError(f"{name} rejected: " + "; ".join(problems))
    vectors = cf.problem.vectors if cf.problem is not None else vectors_for_check
    if vectors is None:  # pragma: no cover - verify_certificate rejects a file without vectors
        raise CertificateError(f"{name} rejected: no sensitivity vectors to check it on")
    return VerifiedDesignFile(
        certificate=cert, file=replace(cf, certificate=cert), description=desc, vectors=vectors,
        budget=checked_budget, budget_bound=q_budget,
        guaranteed_bound=replacement_sup(cf.bound, relation), relation=relation.value,
        box_sup=box_sup,
    )


def _check_box(desc: DesignDescription, cert: CovarianceCertificate, bound: float,
               name: str) -> BoxSup:
    """Re-derive the certified sup over every pair of records in the described box at the
    file's covariance (from the box, query, sigma and covariance alone) and require it <= q."""
    try:
        sset = description.box_set_from_description(desc)
        res = sset.sup(np.array(cert.repaired_covariance, dtype=np.float64), tol=0.0,
                       stop_below=bound)
    except (DpoptError, ValueError, ArithmeticError) as exc:
        raise CertificateError(f"{name} rejected: cannot bound the box sup: {exc}") from None
    if not res.upper <= bound:
        raise CertificateError(
            f"{name} rejected: the certified sup over the box {res.upper!r} exceeds q = "
            f"{bound!r}: records in the box are not covered by the stored covariance")
    return res
