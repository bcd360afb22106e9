r"""The design description: what a design file's certificate is about, in one grammar.

A certificate file of :mod:`certificates.io` proves a statement about the vectors *stored in it*
(or given to the check): every :math:`s_j^\top\Sigma^{-1}s_j \le q` and the optimum of the program

.. math::

    \min_\Sigma \operatorname{tr}(W\Sigma)\quad\text{s.t.}\quad s_j^\top\Sigma^{-1}s_j \le q,
    \quad \Sigma \succeq \eta I

(the optimal-covariance program of the theory page) lies in the
claimed interval. It does not know what the vectors stand for. The *description*
says it, as a JSON object tagged :data:`DESCRIPTION_TAG`:

- the domain, as a spec (``grid:lo=0,hi=1,n=5,d=2``, ``box:lo=0,hi=1,d=3``; per-axis values
  separated by ``;``: ``box:lo=0;0,hi=1;2``) or as the points of a finite domain themselves;
- the sensitivity set: the two-record vectors of the ideal denoiser at a query point with its
  noise level (the two-record theorem), or the uniform-query differences (the uniform-query
  corollary);
  or ``two-record-box``: records anywhere in a box (the continuous set), with the ``pairs`` of
  records of the working set whose vectors the file stores (they carry the lower bound); the
  verifier then re-derives the certified sup over the whole box from (box, query, sigma,
  covariance) alone;
- the neighbouring relation the budget is stated for, and the budget specs of
  :func:`dpopt.accounting.budgets.parse_budget`, with the label and bound they define.

This module is the one owner of that grammar: it **parses** (:func:`parse_description`,
:func:`parse_spec`, :func:`domain_from_spec`), **writes** (:meth:`DesignDescription.to_json`,
:func:`domain_spec`, :func:`budget_specs`, :func:`describe`, :func:`describe_design`) and
**regenerates** (:func:`sensitivity_from_description`, :func:`budget_from_description`). The
command line (``dpopt design``/``demo``) and ``Design.save()`` write through it;
:func:`dpopt.covariance.design_file.verify_design_file` (and so ``Design.load()`` and
``dpopt verify``) read through it.

Every writer is checked against the reader: :func:`domain_spec` returns a spec only when the
domain it parses back to generates the same points bit for bit, and :func:`budget_specs` only
when the specs parse back to a budget with the same label and the same Mahalanobis bound.

Examples
--------
>>> from dpopt.covariance.domains import Grid
>>> domain_spec(Grid([0.0, 0.0], [1.0, 1.0], (5, 5)))
'grid:lo=0.0,hi=1.0,n=5,d=2'
>>> domain_from_spec("box:lo=0;0,hi=1;2").side_lengths
array([1., 2.])
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from dpopt.errors import CertificateError, InvalidParameterError
from dpopt.spec import parse_spec

if TYPE_CHECKING:  # pragma: no cover - imported lazily (the CLI's start-up stays light)
    from certificates.problem import VectorSource
    from dpopt.accounting.budgets import Budget
    from dpopt.covariance.design import Design
    from dpopt.covariance.domains import Box, Domain, Grid
    from dpopt.covariance.sensitivity import BoxTwoRecordSet
    from dpopt.relation import RelationLike

__all__ = [
    "COMMANDS",
    "DESCRIPTION_TAG",
    "SETS",
    "DesignDescription",
    "box_set_from_description",
    "budget_from_description",
    "budget_specs",
    "describe",
    "describe_design",
    "domain_from_spec",
    "domain_spec",
    "parse_description",
    "parse_spec",
    "sensitivity_from_description",
    "spec_float",
    "spec_floats",
    "spec_int",
]

#: Tag of the structured description written into a design file (the denoiser's noise level is
#: ``denoiser_sigma``, its name in every output).
DESCRIPTION_TAG = "dpopt-cli-design/3"
#: The previous tag: the same fields, the noise level spelt ``sigma``; still read.
_V2_TAG = "dpopt-cli-design/2"
#: The first tag (no embedded domain points): still read, for grid/box domains.
_OLD_TAG = "dpopt-cli-design/1"
#: Tags read, and the key each one spells the denoiser's noise level with.
_SIGMA_KEY = {DESCRIPTION_TAG: "denoiser_sigma", _V2_TAG: "sigma", _OLD_TAG: "sigma"}
#: Who wrote the description: the ``dpopt design``/``dpopt demo`` commands or
#: :meth:`Design.save() <dpopt.covariance.design.Design.save>` (``"python"``).
COMMANDS = ("design", "demo", "python")
#: The sensitivity sets a description can state.
SETS = ("two-record", "uniform-query", "two-record-box")
#: The set whose description also holds the working set's ``pairs`` (records in the box).
BOX_SET = "two-record-box"
_RELATIONS = ("add_remove", "replacement")
_KEYS = (
    "tag", "command", "domain", "domain_points", "header", "set", "query", "denoiser_sigma",
    "relation", "budget", "budget_bound", "budget_specs",
)
#: The previous tag's keys: the noise level spelt ``sigma``.
_V2_KEYS = tuple("sigma" if k == "denoiser_sigma" else k for k in _KEYS)
#: Earlier descriptions: no points, and the relation spelt ``adjacency`` (add-remove/replace) by
#: the first releases.
_OLD_KEYS = tuple(k for k in _V2_KEYS if k not in ("domain_points", "header"))
#: Every key a description of some tag may hold (what makes JSON text a description).
_ANY_KEYS = frozenset(_KEYS) | frozenset(_V2_KEYS)
_OLD_ADJACENCY = {"add-remove": "add_remove", "replace": "replacement"}
#: The label a described finite domain gets when it has no spec and no file name.
POINTS_LABEL = "points"


# ----------------------------------------------------------------------------- the spec grammar


# The grammar lives in :mod:`dpopt.spec`, the one parser budgets and domains share (imported
# above and re-exported here, where it was first defined).


def _float_of(key: str, value: str, spec: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InvalidParameterError(key, value, f"must be a number (in {spec!r})") from None
    if not math.isfinite(x):
        raise InvalidParameterError(key, value, f"must be finite (in {spec!r})")
    return x


def _int_of(key: str, value: str, spec: str, low: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise InvalidParameterError(key, value, f"must be an integer (in {spec!r})") from None
    if n < low:
        raise InvalidParameterError(key, n, f"must be >= {low} (in {spec!r})")
    return n


def spec_float(
    params: Mapping[str, str], key: str, spec: str, default: float | None = None
) -> float:
    """Read a finite float ``key`` from a parsed spec (``default`` when absent, if given)."""
    if key not in params:
        if default is None:
            raise InvalidParameterError("spec", spec, f"needs {key}=VALUE")
        return default
    return _float_of(key, params[key], spec)


def spec_int(
    params: Mapping[str, str], key: str, spec: str, default: int | None = None, low: int = 1
) -> int:
    """Read an integer ``key`` >= ``low`` from a parsed spec."""
    if key not in params:
        if default is None:
            raise InvalidParameterError("spec", spec, f"needs {key}=INTEGER")
        return default
    return _int_of(key, params[key], spec, low)


def spec_floats(params: Mapping[str, str], key: str, spec: str, default: float) -> list[float]:
    """Read ``key`` as one finite float or a ``;``-separated list of them (one per axis)."""
    if key not in params:
        return [default]
    return [_float_of(key, v.strip(), spec) for v in params[key].split(";")]


def _spec_ints(params: Mapping[str, str], key: str, spec: str, default: int,
               low: int) -> list[int]:
    if key not in params:
        return [default]
    return [_int_of(key, v.strip(), spec, low) for v in params[key].split(";")]


_DOMAIN_KEYS = {"grid": {"lo", "hi", "n", "d"}, "box": {"lo", "hi", "d"}}
_DOMAIN_FORMS = "grid:lo=..,hi=..,n=..,d=.., box:lo=..,hi=..,d=.. or a file"


def domain_from_spec(text: str) -> Grid | Box:
    """A :class:`~dpopt.covariance.domains.Grid` or :class:`~dpopt.covariance.domains.Box` from
    a spec (the grammar of ``--domain``).

    ``grid:lo=0,hi=1,n=5,d=2`` is the grid of ``n`` equally spaced values per axis in
    :math:`[lo, hi]^d`; ``box:lo=0,hi=1,d=3`` the box :math:`[lo, hi]^d`. ``lo``, ``hi`` and
    ``n`` may be per-axis lists separated by ``;`` (``box:lo=0;0,hi=1;2``); ``d`` then defaults
    to their length (else 2). Defaults: ``lo=0``, ``hi=1``, ``n=5``.

    Raises
    ------
    InvalidParameterError
        Naming ``domain`` (or the key) and echoing the spec.
    """
    from dpopt.covariance import domains

    kind, params = parse_spec(text, what="domain")
    if kind not in _DOMAIN_KEYS:
        raise InvalidParameterError("domain", text, f"must be {_DOMAIN_FORMS}")
    unknown = set(params) - _DOMAIN_KEYS[kind]
    if unknown:
        raise InvalidParameterError(
            "domain", text, f"unknown key(s) {', '.join(sorted(unknown))} for {kind}"
        )
    lo = spec_floats(params, "lo", text, 0.0)
    hi = spec_floats(params, "hi", text, 1.0)
    n = _spec_ints(params, "n", text, 5, low=2) if kind == "grid" else [1]
    lengths = {len(v) for v in (lo, hi, n)} - {1}
    if len(lengths) > 1:
        raise InvalidParameterError("domain", text, "per-axis lists of different lengths")
    d = spec_int(params, "d", text, lengths.pop() if lengths else 2)
    if any(len(v) not in (1, d) for v in (lo, hi, n)):
        raise InvalidParameterError("domain", text, f"per-axis lists must have d = {d} values")
    lower = np.broadcast_to(np.array(lo, dtype=np.float64), (d,)).copy()
    upper = np.broadcast_to(np.array(hi, dtype=np.float64), (d,)).copy()
    if not bool(np.all(upper > lower)):
        raise InvalidParameterError("domain", text, "needs hi > lo")
    if kind == "grid":
        shape = tuple(int(v) for v in np.broadcast_to(np.array(n), (d,)))
        return domains.Grid(lower, upper, shape)
    return domains.Box(lower, upper)


def _axis_values(values: NDArray[Any]) -> str:
    items = [repr(float(v)) if values.dtype.kind == "f" else str(int(v)) for v in values]
    return items[0] if len(set(items)) == 1 else ";".join(items)


def domain_spec(domain: Domain) -> str | None:
    """The spec of a grid or box (the inverse of :func:`domain_from_spec`), else ``None``.

    Bounds are written with ``repr`` (shortest round-tripping decimal), so the spec parses
    back to the same bounds; a grid's spec is returned only when the grid it parses back to has
    the same points bit for bit. ``None`` for a finite point set, an axis with one point, or a
    domain the grammar cannot state.
    """
    from dpopt.covariance import domains

    if isinstance(domain, domains.Grid):
        if min(domain.shape) < 2:
            return None
        text = (f"grid:lo={_axis_values(domain.lower)},hi={_axis_values(domain.upper)},"
                f"n={_axis_values(np.array(domain.shape))},d={domain.dim}")
    elif isinstance(domain, domains.Box):
        if not bool(np.all(domain.upper > domain.lower)):
            return None
        text = (f"box:lo={_axis_values(domain.lower)},hi={_axis_values(domain.upper)},"
                f"d={domain.dim}")
    else:
        return None
    back = domain_from_spec(text)
    same = (np.array_equal(back.lower, domain.lower) and np.array_equal(back.upper, domain.upper)
            and getattr(back, "shape", None) == getattr(domain, "shape", None))
    return text if same else None


def _grid_of_points(points: NDArray[np.float64]) -> Grid | None:
    """The grid whose points are exactly ``points`` (in the grid's order), if there is one."""
    from dpopt.covariance import domains

    m, d = points.shape
    axes = [np.unique(points[:, i]) for i in range(d)]
    shape = tuple(int(a.shape[0]) for a in axes)
    if min(shape) < 2 or math.prod(shape) != m:
        return None
    grid = domains.Grid(np.array([a[0] for a in axes]), np.array([a[-1] for a in axes]), shape)
    return grid if np.array_equal(grid.points, points) else None


# ----------------------------------------------------------------------------- the description


@dataclass(frozen=True)
class DesignDescription:
    """The parsed description of a design file (what the certificate is about).

    Attributes
    ----------
    command : {"design", "demo", "python"}
        Who wrote it (the CLI commands, or ``Design.save``).
    domain : str
        The domain spec (``grid:...``/``box:...``) or, for a finite point set, a label (its file
        name, or ``"points"``): the points themselves are ``domain_points``.
    domain_points : ndarray, shape (m, d), or None
        The points of a finite domain without a spec.
    header : bool or None
        Whether the domain CSV had a header line (informational).
    set : {"two-record", "uniform-query"}
    query : ndarray or None
        Query point of the ideal denoiser (two-record set).
    sigma : float or None
        Its noise level (the key ``denoiser_sigma`` of the JSON text; ``sigma`` in files
        tagged ``dpopt-cli-design/1`` and ``/2``).
    relation : {"add_remove", "replacement"}
        The neighbouring relation the budget is stated for (the vectors are the add/remove set).
    budget : str
        The budget label (must equal the one the specs define).
    budget_bound : float
        The budget's Mahalanobis bound (must equal the one the specs define).
    budget_specs : tuple of str
        Specs of :func:`dpopt.accounting.budgets.parse_budget`; several: all must hold.
    pairs : ndarray, shape (k, 2d), or None
        For ``set == "two-record-box"`` only: the working set, row ``[x, y]`` per pair of records
        in the box (the file's vectors are :math:`t_g(x, y)`).
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
    pairs: NDArray[np.float64] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the domain points and the tag)."""
        return {
            "command": self.command, "domain": self.domain, "set": self.set,
            "query": None if self.query is None else self.query.tolist(),
            "denoiser_sigma": self.sigma,
            "relation": self.relation, "budget": self.budget,
            "budget_bound": self.budget_bound, "budget_specs": list(self.budget_specs),
        }

    def to_json(self) -> str:
        """The tagged JSON text :func:`parse_description` reads back to this description."""
        raw = {
            **self.as_dict(),
            "tag": DESCRIPTION_TAG,
            "domain_points": None if self.domain_points is None else np.asarray(
                self.domain_points, dtype=np.float64).tolist(),
            "header": self.header,
        }
        if self.pairs is not None:
            raw["pairs"] = np.asarray(self.pairs, dtype=np.float64).tolist()
        return json.dumps(raw, sort_keys=True, allow_nan=False)


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
    if type(raw) is not dict or not set(raw) & _ANY_KEYS:
        return None
    try:
        if "tag" not in raw:
            _bad("tag", "missing (a JSON description with design fields must be tagged)")
        tag = raw["tag"]
        if type(tag) is not str or tag not in _SIGMA_KEY:
            _bad("tag", f"{str(tag)[:40]!r} is not a description this dpopt can check")
        keys = {DESCRIPTION_TAG: _KEYS, _V2_TAG: _V2_KEYS}.get(tag, _OLD_KEYS)
        if tag != _OLD_TAG and raw.get("set") == BOX_SET:
            keys = (*keys, "pairs")
        sigma_key = _SIGMA_KEY[tag]
        if tag == _OLD_TAG and "adjacency" in raw and "relation" not in raw:
            adj = raw.pop("adjacency")
            raw["relation"] = _OLD_ADJACENCY.get(adj, adj) if type(adj) is str else adj
        missing = [k for k in keys if k not in raw]
        extra = sorted(str(k)[:40] for k in raw if k not in keys)
        if missing or extra:
            _bad("fields", f"missing {missing}, unexpected {extra}")
        kind = _str("set", raw["set"], SETS)
        points = raw.get("domain_points")
        pts = None if points is None else _floats("domain_points", points, 2)
        header = raw.get("header")
        if header is not None and type(header) is not bool:
            _bad("header", "must be true, false or null")
        pairs = None
        if kind == BOX_SET:
            pairs = _floats("pairs", raw["pairs"], 2)
            if pts is not None:
                _bad("domain_points", "must be null for a box (the domain is its spec)")
        if kind in ("two-record", BOX_SET):
            query: NDArray[np.float64] | None = _floats("query", raw["query"], 1)
            sigma: float | None = _num(sigma_key, raw[sigma_key])
        else:
            if raw["query"] is not None or raw[sigma_key] is not None:
                _bad("query", f"must be null for the uniform-query set (and so must {sigma_key})")
            query, sigma = None, None
        specs = raw["budget_specs"]
        if type(specs) is not list or not specs or any(type(s) is not str for s in specs):
            _bad("budget_specs", "must be a non-empty array of budget strings")
        return DesignDescription(
            command=_str("command", raw["command"], COMMANDS),
            domain=_str("domain", raw["domain"]), domain_points=pts, header=header, set=kind,
            query=query, sigma=sigma,
            relation=_str("relation", raw["relation"], _RELATIONS),
            budget=_str("budget", raw["budget"]),
            budget_bound=_num("budget_bound", raw["budget_bound"]),
            budget_specs=tuple(specs), pairs=pairs,
        )
    except _Bad as exc:
        raise CertificateError(f"malformed design description: {exc}") from None


# ----------------------------------------------------------------------------- regenerate


def sensitivity_from_description(desc: DesignDescription) -> VectorSource:
    """Regenerate the sensitivity set a description states (a VectorSource).

    For ``two-record-box`` these are the working set's vectors :math:`t_g(x, y)` of the stored
    pairs (each pair must lie in the box); the continuous set itself is
    :func:`box_set_from_description`.

    Raises
    ------
    DpoptError
        The description names a domain or parameters dpopt cannot build.
    """
    from certificates.problem import ArrayVectors
    from dpopt.covariance import domains, sensitivity

    if desc.set == BOX_SET:
        sset = box_set_from_description(desc)
        pairs = desc.pairs
        d = sset.dim
        if pairs is None or pairs.ndim != 2 or pairs.shape[1] != 2 * d or pairs.shape[0] < 1:
            raise CertificateError(f"a box description needs pairs, rows of 2 d = {2 * d} numbers")
        return ArrayVectors(sset.vectors(pairs[:, :d], pairs[:, d:]))
    if desc.domain_points is not None:
        domain: Domain = domains.FinitePoints(desc.domain_points)
    else:
        domain = domain_from_spec(desc.domain)
    if desc.set == "uniform-query":
        uq = sensitivity.uniform_query_set(domain)
        if isinstance(uq, sensitivity.EllipsoidDifferences):  # pragma: no cover - no spec yet
            raise CertificateError("an ellipsoid has no description")
        return uq
    if desc.query is None or desc.sigma is None:
        raise CertificateError("a two-record description needs its query and sigma")
    if isinstance(domain, domains.Box):
        raise CertificateError(
            "a two-record description over a box must be a 'two-record-box' set (with its pairs)")
    return sensitivity.TwoRecordVectors(domain, desc.query, desc.sigma)


def box_set_from_description(desc: DesignDescription) -> BoxTwoRecordSet:
    """The continuous set (records anywhere in the box) of a ``two-record-box`` description."""
    from dpopt.covariance import domains, sensitivity

    if desc.set != BOX_SET:
        raise CertificateError(f"the description's set is {desc.set!r}, not {BOX_SET!r}")
    domain = domain_from_spec(desc.domain)
    if not isinstance(domain, domains.Box):
        raise CertificateError(f"a {BOX_SET} description needs a box: spec, got {desc.domain!r}")
    if desc.query is None or desc.sigma is None:
        raise CertificateError("a two-record description needs its query and sigma")
    return sensitivity.BoxTwoRecordSet(domain, desc.query, desc.sigma)


def budget_from_description(desc: DesignDescription) -> Budget:
    """The budget the description's specs define (several specs: all of them, ``AllOf``)."""
    return _budget_of(desc.budget_specs)


def _legacy_spec(spec: str) -> str:
    """A budget spec as files written before the one spec grammar may hold it: empty items
    (``epsilon=1,,delta=1e-6``, a trailing comma) were skipped then, so they are dropped here
    and such a file still verifies; new specs with empty items are refused when written."""
    kind, sep, rest = spec.partition(":")
    if not sep:
        return spec
    return kind + sep + ",".join(item for item in rest.split(",") if item.strip())


def _budget_of(specs: tuple[str, ...] | list[str]) -> Budget:
    from dpopt.accounting.budgets import AllOf, parse_budget

    parsed = [parse_budget("&".join(_legacy_spec(p) for p in s.split("&"))) for s in specs]
    return parsed[0] if len(parsed) == 1 else AllOf(*parsed)


# ----------------------------------------------------------------------------- write


def _budget_spec_items(budget: Budget) -> list[str] | None:
    from dpopt.accounting import budgets as b

    def num(x: float) -> str:
        return repr(float(x))

    if isinstance(budget, b.AllOf):
        out: list[str] = []
        for member in budget.budgets:
            items = _budget_spec_items(member)
            if items is None:
                return None
            out.extend(items)
        return out
    if isinstance(budget, b.RDP):
        return [f"rdp:alpha={';'.join(map(num, budget.alpha))},"
                f"epsilon={';'.join(map(num, budget.epsilon))}"]
    if isinstance(budget, b.ZCDP):
        return [f"zcdp:rho={num(budget.rho)}"]
    if isinstance(budget, b.GDP):
        return [f"gdp:mu={num(budget.mu)}"]
    if isinstance(budget, b.ApproxDP):
        return [f"approx:epsilon={num(budget.epsilon)},delta={num(budget.delta)}"]
    if isinstance(budget, b.MIDP):
        return [f"midp:kappa={num(budget.kappa)},relation={budget.relation.value}"]
    return None


def budget_specs(budget: Budget) -> tuple[str, ...] | None:
    """Specs of :func:`~dpopt.accounting.budgets.parse_budget` that state ``budget``, or ``None``.

    Returned only when they parse back to a budget with the same label and the same
    Mahalanobis bound (so a verifier recomputes exactly what the design was made for); ``None``
    for a budget type the grammar has no spec for.

    Examples
    --------
    >>> from dpopt.accounting.budgets import ZCDP, GDP, AllOf
    >>> budget_specs(AllOf(ZCDP(0.5), GDP(1.0)))
    ('zcdp:rho=0.5', 'gdp:mu=1.0')
    """
    from dpopt.errors import DpoptError

    items = _budget_spec_items(budget)
    if not items:
        return None
    try:
        back = _budget_of(items)
        same = (back.describe() == budget.describe()
                and float(back.mahalanobis_bound()) == float(budget.mahalanobis_bound()))
    except (DpoptError, ValueError, ArithmeticError):
        return None
    return tuple(items) if same else None


def describe(
    sensitivity: object,
    budget: Budget,
    *,
    relation: RelationLike = "add_remove",
    command: str = "python",
    domain_label: str | None = None,
    header: bool | None = None,
    pairs: NDArray[np.float64] | None = None,
) -> DesignDescription | None:
    """The description of a design over ``sensitivity`` for ``budget``, or ``None``.

    ``sensitivity`` must be a set this module regenerates: the two-record vectors
    (:class:`~dpopt.covariance.sensitivity.TwoRecordVectors`, from ``add_remove_set``) or the
    uniform-query sets (``uniform_query_set``: :class:`~dpopt.covariance.sensitivity.
    UniformQueryVectors` of a finite domain, :class:`~dpopt.covariance.sensitivity.
    BoxVertexDifferences` of a box or grid). A finite domain that is a grid is written as its
    spec, any other one as its points (labelled ``domain_label``, default ``"points"``). The
    result is checked: the set it regenerates has the same count and dimension, and the budget
    specs recompute the same label and bound; otherwise (also for plain arrays or a budget
    without a spec) ``None``. A :class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet` needs
    ``pairs`` (the working set, rows ``[x, y]``; see :attr:`DesignDescription.pairs`).
    """
    from dpopt.covariance import sensitivity as sens
    from dpopt.relation import as_relation

    specs = budget_specs(budget)
    if specs is None or command not in COMMANDS:
        return None
    query: NDArray[np.float64] | None = None
    sigma: float | None = None
    points: NDArray[np.float64] | None = None
    spec: str | None
    count = None
    if isinstance(sensitivity, sens.BoxTwoRecordSet):
        kind, spec = BOX_SET, domain_spec(sensitivity.box)
        if spec is None or pairs is None:
            return None
        pairs = np.array(pairs, dtype=np.float64)
        count = int(pairs.shape[0])
        query, sigma = np.array(sensitivity.query, dtype=np.float64), sensitivity.sigma
    elif isinstance(sensitivity, sens.BoxVertexDifferences):
        kind, spec = "uniform-query", domain_spec(sensitivity.box)
        if spec is None:
            return None
    elif isinstance(sensitivity, sens.TwoRecordVectors):
        kind = "two-record"
        grid = _grid_of_points(sensitivity.points)
        spec = domain_spec(grid) if grid is not None else None
        if spec is None:
            points = np.array(sensitivity.points, dtype=np.float64)
        query, sigma = np.array(sensitivity.query, dtype=np.float64), sensitivity.sigma
    elif isinstance(sensitivity, sens.UniformQueryVectors):
        # pairwise differences of a finite set: a spec would regenerate a box's vertex
        # differences instead, so the points are written
        kind, spec = "uniform-query", None
        points = np.array(sensitivity.points, dtype=np.float64)
    else:
        return None
    desc = DesignDescription(
        command=command, domain=spec if spec is not None else (domain_label or POINTS_LABEL),
        domain_points=points, header=header, set=kind, query=query, sigma=sigma,
        relation=as_relation(relation).value, budget=str(budget.describe()),
        budget_bound=float(budget.mahalanobis_bound()), budget_specs=specs,
        pairs=pairs if kind == BOX_SET else None,
    )
    back = sensitivity_from_description(desc)
    if count is None:
        count = int(getattr(sensitivity, "count", -1))
    if (int(back.count), int(back.dim)) != (count, int(getattr(sensitivity, "dim", -1))):
        return None
    return desc


def describe_design(design: Design) -> DesignDescription | None:
    """The description :meth:`Design.save() <dpopt.covariance.design.Design.save>` writes.

    ``None`` when the design's vectors are a plain array (they are stored in the file, which is
    then verified for them only) or its budget has no spec; see :func:`describe`.
    """
    budget = getattr(design, "budget", None)
    if budget is None:
        return None
    coverage = getattr(design, "coverage", None)
    if coverage is not None:
        if not hasattr(coverage, "pairs_x"):
            return None  # an ellipsoid: no description yet (Design.save refuses)
        return describe(coverage.sensitivity, budget, relation=design.relation,
                        pairs=np.hstack([coverage.pairs_x, coverage.pairs_y]))
    return describe(design.program.vectors, budget, relation=design.relation)
