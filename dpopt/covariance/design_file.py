r"""Design files: a certificate bound to the sensitivity set and the budget it describes.

A certificate file of :mod:`certificates.io` proves a statement about the vectors *stored in it*
(or given to the check): every :math:`s_j^\top\Sigma^{-1}s_j < q` and the optimum lies in the
claimed interval. It does not know what the vectors stand for. ``dpopt design`` / ``dpopt demo``
therefore put a structured *description* in the file (JSON tagged :data:`DESCRIPTION_TAG`): the
domain (a ``grid:``/``box:`` spec, or the points of a domain file themselves), the query and noise
level of the ideal denoiser or the uniform query, the neighbouring relation and the budget specs.

:func:`verify_design_file` is the ``dpopt`` layer of the check, on top of
:func:`certificates.io.verify_certificate` (which re-checks the numbers and compares digests):

1. it parses the description strictly (unknown or missing fields, wrong types: rejected);
2. it **regenerates** the sensitivity vectors from the description and hands them to the
   certificates layer as ``source``, which compares their sha256 with the file's (stored vectors
   included): a file whose vectors are not the described set is rejected;
3. it **recomputes** the Mahalanobis bound of the described budget(s) (several specs: the
   strictest) and rejects the file unless the stored :math:`q` is at most that bound (a quarter of
   it for the replacement relation, the bound :math:`4q` of the ideal-denoiser paper), and unless
   the stored budget label and bound are exactly the recomputed ones.

A file with a free-text description (written from Python with ``Design.save``) is verified for its
stored vectors only; pass ``source=`` and/or ``budget=`` to bind it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.covariance import CovarianceCertificate
from certificates.io import (
    CertificateFile,
    parse_certificate,
    vectors_digest,
    verify_certificate,
)
from dpopt.errors import CertificateError, DpoptError

if TYPE_CHECKING:  # pragma: no cover - imported lazily below (the CLI's start-up stays light)
    from certificates.io import JSONValue
    from certificates.problem import VectorSource
    from dpopt.accounting.budgets import Budget
    from dpopt.covariance.domains import Box, Domain, Grid
    from dpopt.parallel import DaskOption

__all__ = [
    "DESCRIPTION_TAG",
    "DesignDescription",
    "VerifiedDesignFile",
    "domain_from_spec",
    "parse_description",
    "sensitivity_from_description",
    "verify_design_file",
]

#: Tag of the structured description ``dpopt design``/``dpopt demo`` write into a file.
DESCRIPTION_TAG = "dpopt-cli-design/2"
#: The earlier tag (no embedded domain points): still verified for grid/box domains.
_OLD_TAG = "dpopt-cli-design/1"
_KEYS = (
    "tag", "command", "domain", "domain_points", "header", "set", "query", "sigma", "relation",
    "budget", "budget_bound", "budget_specs",
)
#: Earlier descriptions: no points, and the relation spelt ``adjacency`` (add-remove/replace) by
#: the first releases.
_OLD_KEYS = tuple(k for k in _KEYS if k not in ("domain_points", "header"))
_OLD_ADJACENCY = {"add-remove": "add_remove", "replace": "replacement"}


@dataclass(frozen=True)
class DesignDescription:
    """The parsed description of a design file (what the certificate is about).

    Attributes
    ----------
    command : {"design", "demo"}
    domain : str
        The domain spec (``grid:...``/``box:...``) or, for a domain file, its name (a label: the
        points themselves are ``domain_points``).
    domain_points : ndarray, shape (m, d), or None
        The points of a domain read from a file.
    header : bool or None
        Whether the domain CSV had a header line (informational).
    set : {"two-record", "uniform-query"}
    query : ndarray or None
        Query point of the ideal denoiser (two-record set).
    sigma : float or None
        Its noise level.
    relation : {"add_remove", "replacement"}
        The neighbouring relation the budget is stated for (the vectors are the add/remove set).
    budget : str
        The budget label as written (must equal the recomputed one).
    budget_bound : float
        The budget's Mahalanobis bound as written (must equal the recomputed one).
    budget_specs : tuple of str
    """

    command: str
    domain: str
    domain_points: NDArray[np.float64] | None
    header: bool | None
    set: str
    query: NDArray[np.float64] | None
    sigma: float | None
    relation: str
    budget: str
    budget_bound: float
    budget_specs: tuple[str, ...]

    def as_dict(self) -> dict[str, JSONValue]:
        """JSON-ready summary (without the domain points)."""
        return {
            "command": self.command, "domain": self.domain, "set": self.set,
            "query": None if self.query is None else self.query.tolist(), "sigma": self.sigma,
            "relation": self.relation, "budget": self.budget,
            "budget_bound": self.budget_bound, "budget_specs": list(self.budget_specs),
        }


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
    """

    certificate: CovarianceCertificate
    file: CertificateFile
    description: DesignDescription | None
    vectors: NDArray[np.float64] | VectorSource
    budget: Budget | None
    budget_bound: float | None
    guaranteed_bound: float
    relation: str


class _Bad(Exception):
    pass


def _bad(field: str, reason: str) -> NoReturn:
    raise _Bad(f"description.{field}: {reason}")


def _str(field: str, v: Any, choices: tuple[str, ...] | None = None) -> str:
    if type(v) is not str or not v:
        _bad(field, "must be a non-empty string")
    if choices is not None and v not in choices:
        _bad(field, f"{v[:40]!r} must be one of {', '.join(choices)}")
    return v


def _num(field: str, v: Any) -> float:
    if type(v) not in (int, float):
        _bad(field, "must be a number")
    try:
        x = float(v)
    except OverflowError:
        _bad(field, "too large")
    if not math.isfinite(x):
        _bad(field, "must be finite")
    return x


def _floats(field: str, v: Any, ndim: int) -> NDArray[np.float64]:
    rows = v if ndim == 2 else [v]
    if type(rows) is not list or not rows:
        _bad(field, "must be a non-empty array")
    width = None
    for row in rows:
        if type(row) is not list or not row:
            _bad(field, "must be an array of non-empty arrays of numbers")
        if width is not None and len(row) != width:
            _bad(field, "rows of different lengths")
        width = len(row)
        for x in row:
            _num(field, x)
    arr = np.array(rows, dtype=np.float64)
    return arr if ndim == 2 else arr[0]


def parse_description(text: str | None) -> DesignDescription | None:
    """The structured description of a design file, or ``None`` for free text.

    Text that is a JSON object with any field of a design description (``tag``, ``domain``,
    ``budget_specs``, ...) must be a well-formed tagged description: every field present with its
    type, nothing else; so a description cannot be turned into "free text" by deleting its tag.

    Raises
    ------
    CertificateError
        A tagged description that is malformed (the message names the field).
    """
    if text is None:
        return None
    try:
        raw = json.loads(text, parse_constant=lambda c: math.nan)
    except (ValueError, RecursionError):
        return None
    if type(raw) is not dict or not set(raw) & set(_KEYS):
        return None
    try:
        if "tag" not in raw:
            _bad("tag", "missing (a JSON description with design fields must be tagged)")
        tag = raw["tag"]
        if tag not in (DESCRIPTION_TAG, _OLD_TAG):
            _bad("tag", f"{str(tag)[:40]!r} is not a description this dpopt can check")
        keys = _KEYS if tag == DESCRIPTION_TAG else _OLD_KEYS
        if tag == _OLD_TAG and "adjacency" in raw and "relation" not in raw:
            adj = raw.pop("adjacency")
            raw["relation"] = _OLD_ADJACENCY.get(adj, adj) if type(adj) is str else adj
        missing = [k for k in keys if k not in raw]
        extra = sorted(str(k)[:40] for k in raw if k not in keys)
        if missing or extra:
            _bad("fields", f"missing {missing}, unexpected {extra}")
        kind = _str("set", raw["set"], ("two-record", "uniform-query"))
        points = raw.get("domain_points")
        pts = None if points is None else _floats("domain_points", points, 2)
        header = raw.get("header")
        if header is not None and type(header) is not bool:
            _bad("header", "must be true, false or null")
        if kind == "two-record":
            query: NDArray[np.float64] | None = _floats("query", raw["query"], 1)
            sigma: float | None = _num("sigma", raw["sigma"])
        else:
            if raw["query"] is not None or raw["sigma"] is not None:
                _bad("query", "must be null for the uniform-query set (and so must sigma)")
            query, sigma = None, None
        specs = raw["budget_specs"]
        if type(specs) is not list or not specs or any(type(s) is not str for s in specs):
            _bad("budget_specs", "must be a non-empty array of budget strings")
        return DesignDescription(
            command=_str("command", raw["command"], ("design", "demo")),
            domain=_str("domain", raw["domain"]), domain_points=pts, header=header, set=kind,
            query=query, sigma=sigma,
            relation=_str("relation", raw["relation"], ("add_remove", "replacement")),
            budget=_str("budget", raw["budget"]),
            budget_bound=_num("budget_bound", raw["budget_bound"]),
            budget_specs=tuple(specs),
        )
    except _Bad as exc:
        raise CertificateError(f"malformed design description: {exc}") from None


def domain_from_spec(text: str) -> Grid | Box:
    """A :class:`~dpopt.covariance.domains.Grid` or :class:`~dpopt.covariance.domains.Box` from a
    spec ``grid:lo=0,hi=1,n=5,d=2`` / ``box:lo=0,hi=1,d=3`` (the grammar of ``--domain``)."""
    from dpopt.cli.common import parse_spec, spec_float, spec_int
    from dpopt.covariance import domains
    from dpopt.errors import InvalidParameterError

    kind, params = parse_spec(text, what="domain")
    allowed = {"grid": {"lo", "hi", "n", "d"}, "box": {"lo", "hi", "d"}}
    if kind not in allowed:
        raise InvalidParameterError(
            "domain", text, "must be grid:lo=..,hi=..,n=..,d=.., box:lo=..,hi=..,d=.. or a file"
        )
    unknown = set(params) - allowed[kind]
    if unknown:
        raise InvalidParameterError(
            "domain", text, f"unknown key(s) {', '.join(sorted(unknown))} for {kind}"
        )
    lo = spec_float(params, "lo", text, 0.0)
    hi = spec_float(params, "hi", text, 1.0)
    d = spec_int(params, "d", text, 2)
    if not hi > lo:
        raise InvalidParameterError("domain", text, "needs hi > lo")
    if kind == "grid":
        n = spec_int(params, "n", text, 5, low=2)
        return domains.Grid(np.full(d, lo), np.full(d, hi), (n,) * d)
    return domains.Box(np.full(d, lo), np.full(d, hi))


def sensitivity_from_description(desc: DesignDescription) -> VectorSource:
    """Regenerate the sensitivity set a description states (a VectorSource).

    Raises
    ------
    DpoptError
        The description names a domain or parameters dpopt cannot build.
    """
    from dpopt.covariance import domains, sensitivity

    if desc.domain_points is not None:
        domain: Domain = domains.FinitePoints(desc.domain_points)
    else:
        domain = domain_from_spec(desc.domain)
    if desc.set == "uniform-query":
        return sensitivity.uniform_query_set(domain)
    if desc.query is None or desc.sigma is None:
        raise CertificateError("a two-record description needs its query and sigma")
    return sensitivity.add_remove_set(domain, desc.query, desc.sigma)


def _legacy_spec(spec: str) -> str:
    """A budget spec as files written before the one spec grammar may hold it: empty items
    (``epsilon=1,,delta=1e-6``, a trailing comma) were skipped then, so they are dropped here
    and such a file still verifies; new specs with empty items are refused when written."""
    kind, sep, rest = spec.partition(":")
    if not sep:
        return spec
    return kind + sep + ",".join(item for item in rest.split(",") if item.strip())


def _budget_of(specs: tuple[str, ...]) -> Budget:
    from dpopt.accounting.budgets import AllOf, parse_budget

    parsed = [parse_budget("&".join(_legacy_spec(p) for p in s.split("&"))) for s in specs]
    return parsed[0] if len(parsed) == 1 else AllOf(*parsed)


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
    desc = parse_description(cf.vectors_description)
    given = None
    if source is not None:
        from dpopt.covariance.sensitivity import as_vector_source

        given = as_vector_source(source)
    regenerated = None
    if desc is not None:
        try:
            regenerated = sensitivity_from_description(desc)
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
            checked_budget = _budget_of(desc.budget_specs)
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
    if problems:
        raise CertificateError(f"{name} rejected: " + "; ".join(problems))
    vectors = cf.problem.vectors if cf.problem is not None else vectors_for_check
    if vectors is None:  # pragma: no cover - verify_certificate rejects a file without vectors
        raise CertificateError(f"{name} rejected: no sensitivity vectors to check it on")
    return VerifiedDesignFile(
        certificate=cert, file=replace(cf, certificate=cert), description=desc, vectors=vectors,
        budget=checked_budget, budget_bound=q_budget,
        guaranteed_bound=replacement_sup(cf.bound, relation), relation=relation.value,
    )
