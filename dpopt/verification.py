r"""One verifier for every certificate file dpopt writes: the kind registry behind ``dpopt verify``.

Every certificate file dpopt writes is a JSON object whose ``"format"`` field names its kind
(``"dpopt-covariance-certificate/1"``, ``"dpopt-renyi-mixture-certificate/2"``, ...).
:func:`verify` reads that field with the strict reader shared by all kinds
(:mod:`certificates.strict_json`: exact JSON types, no NaN/Infinity, no overflowing literal, no
duplicate key), looks the kind up in a small registry (format tag -> verifier) and runs the
kind's verifier, which re-derives the claim from the file's inputs alone. Whatever goes wrong with
a file (unknown kind, malformed field, failed re-check) is a
:class:`~dpopt.errors.CertificateError` whose message names the field or the failed claim: the
command line turns it into exit status 1.

Registered kinds
----------------
``dpopt-covariance-certificate/1`` — *covariance design*
    Written by ``dpopt design`` / ``dpopt demo`` and ``Design.save``: the optimal covariance and
    its factored dual. Checked by :func:`dpopt.covariance.design_file.verify_design_file` (the
    sensitivity vectors regenerated from the description, the budget's bound recomputed, the
    covariance and the interval re-checked).
``dpopt-renyi-mixture-certificate/2`` (and ``/1``) — *tight Pufferfish calibration*
    Written by ``dpopt calibrate pufferfish ... --tight --certificate FILE`` and
    :meth:`dpopt.pufferfish.TightCalibration.write_certificate`: the laws of every secret pair,
    α, ε and the released and refuted scales (``/1``, still read, spelt an infinite α or
    upper bound as the string ``"inf"``; ``/2`` writes ``null``). Checked by
    :func:`certificates.renyi_mixture.verify_mixture_file` (every Rényi divergence bound
    re-proved from the stored laws).

``dpopt-diffusion-run/2`` (and ``/1``) — *private sampling run*
    Written by ``dpopt sample -o run.json`` and :func:`dpopt.diffusion.record.save_record`:
    every release of a private diffusion sampling run (``/1``, still read, spelt a release's
    ``denoiser_sigma`` as ``sigma``). Checked by
    :func:`dpopt.diffusion.record.verify_run_file` (queries replayed, each covariance
    re-checked at its query over the domain's two-record set, the composition recomputed).

Adding a kind
-------------
A kind is a format tag, a human name and a verifier ``verifier(path, content, options) ->
Verification`` that raises :class:`~dpopt.errors.CertificateError` when the file's claim does
not hold. Register it with :func:`register_kind`; to keep ``dpopt --help`` fast, give the
verifier as a ``"package.module:function"`` string (imported on first use) and add the line to
:data:`BUILTIN_KINDS`:

>>> from dpopt.verification import (Verification, register_kind, registered_kinds,
...                                 unregister_kind)
>>> def check_note(path, content, options):
...     return Verification(kind="note", format="example-note/1", path=str(path),
...                         summary={}, lines=("nothing to re-derive",))
>>> _ = register_kind("example-note/1", "note", check_note)
>>> "example-note/1" in {k.format for k in registered_kinds()}
True
>>> unregister_kind("example-note/1")
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from certificates import strict_json as sj
from dpopt.errors import InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    from certificates.io import JSONValue
    from dpopt.parallel import DaskOption

__all__ = [
    "BUILTIN_KINDS",
    "CertificateKind",
    "Verification",
    "Verifier",
    "VerifyOptions",
    "read_kind",
    "register_kind",
    "registered_kinds",
    "unregister_kind",
    "verify",
]


@dataclass(frozen=True)
class VerifyOptions:
    """Options a verifier may use (each kind ignores those that do not apply to it).

    Attributes
    ----------
    rigorous : bool or None
        Covariance designs: re-check with every rounding error accounted for (``None``: the
        file's own mode).
    dask : None, "local", str or distributed.Client
        Covariance designs: run the pass over the sensitivity vectors as Dask tasks.
    """

    rigorous: bool | None = None
    dask: DaskOption = None


@dataclass(frozen=True)
class Verification:
    """What a verifier proved about a file (returned only when the file's claim holds).

    Attributes
    ----------
    kind : str
        Human name of the kind (``"covariance design"``).
    format : str
        The file's format tag.
    path : str
    summary : dict
        JSON-ready figures re-derived from the file (``dpopt verify --json`` prints them).
    lines : tuple of str
        The human-readable report, one line each.
    result : object
        The kind's own verified object (e.g. a ``VerifiedDesignFile``), for Python callers.
    """

    kind: str
    format: str
    path: str
    summary: dict[str, JSONValue]
    lines: tuple[str, ...]
    result: object = field(default=None, compare=False, repr=False)


#: ``verifier(path, content, options)``: ``content`` is the file strictly decoded (a dict with a
#: registered ``"format"``); raise CertificateError when the claim does not hold.
Verifier: TypeAlias = Callable[[Path, dict[str, Any], VerifyOptions], Verification]


@dataclass(frozen=True)
class CertificateKind:
    """A registered kind: its format tag, its human name and its verifier (a callable, or a
    ``"module:function"`` string imported on first use)."""

    format: str
    name: str
    verifier: str | Verifier

    def load(self) -> Verifier:
        """The verifier callable (importing it if it was registered by name)."""
        if callable(self.verifier):
            return self.verifier
        module, _, attr = self.verifier.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        if not callable(fn):  # pragma: no cover - a registration mistake
            raise InvalidTypeError("verifier", fn, "a callable")
        return fn  # type: ignore[no-any-return]


#: The kinds dpopt itself writes: format tag -> (name, "module:function").
BUILTIN_KINDS: Mapping[str, tuple[str, str]] = {
    "dpopt-covariance-certificate/1": (
        "covariance design", "dpopt.verification:verify_covariance_design"),
    "dpopt-renyi-mixture-certificate/2": (
        "tight Pufferfish calibration", "dpopt.verification:verify_tight_pufferfish"),
    "dpopt-renyi-mixture-certificate/1": (  # the previous format (infinity as the string "inf")
        "tight Pufferfish calibration", "dpopt.verification:verify_tight_pufferfish"),
    "dpopt-diffusion-run/2": (
        "private sampling run", "dpopt.diffusion.record:verify_run_file"),
    "dpopt-diffusion-run/1": (  # the previous format (a release's sigma not yet denoiser_sigma)
        "private sampling run", "dpopt.diffusion.record:verify_run_file"),
}

_REGISTRY: dict[str, CertificateKind] = {
    tag: CertificateKind(tag, name, target) for tag, (name, target) in BUILTIN_KINDS.items()
}


def register_kind(format: str, name: str, verifier: str | Verifier, *,
                  replace: bool = False) -> CertificateKind:
    """Register a certificate kind for :func:`verify` and ``dpopt verify``.

    Parameters
    ----------
    format : str
        The tag the files of this kind carry in their ``"format"`` field.
    name : str
        Human name (printed by ``dpopt verify``).
    verifier : callable or str
        ``verifier(path, content, options) -> Verification`` raising CertificateError when the
        claim does not hold, or ``"package.module:function"`` naming it (imported lazily).
    replace : bool, default False
        Allow replacing an existing registration of ``format``.

    Raises
    ------
    InvalidParameterError
        ``format`` is already registered (and ``replace`` is False), or empty.
    """
    if not isinstance(format, str) or not format:
        raise InvalidParameterError("format", format, "must be a non-empty string")
    if not isinstance(name, str) or not name:
        raise InvalidParameterError("name", name, "must be a non-empty string")
    if not (callable(verifier) or (isinstance(verifier, str) and ":" in verifier)):
        raise InvalidTypeError("verifier", verifier, "a callable or a 'module:function' string")
    if format in _REGISTRY and not replace:
        raise InvalidParameterError("format", format, "is already registered (replace=True)")
    kind = CertificateKind(format, name, verifier)
    _REGISTRY[format] = kind
    return kind


def unregister_kind(format: str) -> None:
    """Remove a registered kind (built-in kinds included; mainly for tests)."""
    if format not in _REGISTRY:
        raise InvalidParameterError("format", format, "is not registered")
    del _REGISTRY[format]


def registered_kinds() -> tuple[CertificateKind, ...]:
    """Every registered kind, in registration order."""
    return tuple(_REGISTRY.values())


def read_kind(path: str | os.PathLike[str]) -> tuple[CertificateKind, dict[str, Any]]:
    """Decode ``path`` strictly and find its kind from its ``"format"`` field.

    Raises
    ------
    CertificateError
        The file is unreadable, not strict JSON, not an object, has no string ``format``, or a
        format no registered kind reads (the message names the field).
    """
    try:
        content = sj.load_json(path)
        if not isinstance(content, dict):
            sj.fail("file", f"must be a JSON object, got {sj.kind_of(content)}")
        if "format" not in content:
            sj.fail("format", "missing (every certificate file names its kind)")
        tag = sj.string("format", content["format"], max_len=200)
        kind = _REGISTRY.get(tag)
        if kind is None:
            known = ", ".join(sorted(_REGISTRY))
            sj.fail("format", f"{tag[:60]!r} is not a certificate kind dpopt reads "
                              f"(known: {known})")
    except sj.FieldError as exc:
        raise sj.rejection(path, exc) from None
    return kind, content


def verify(path: str | os.PathLike[str], *, rigorous: bool | None = None,
           dask: DaskOption = None) -> Verification:
    """Re-check any certificate file dpopt writes; its kind is read from the file.

    Parameters
    ----------
    path : path-like
    rigorous : bool, optional
        Passed to kinds that have a rigorous mode (covariance designs).
    dask : optional
        Passed to kinds whose check can run on Dask (covariance designs).

    Returns
    -------
    Verification
        Only when the claim holds.

    Raises
    ------
    CertificateError
        Malformed file (the field is named), unknown kind, or a claim that does not hold.

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> from dpopt.pufferfish import Scenario, calibrate_tight
    >>> sc = Scenario.from_laws({"a": ([0, 1], [.5, .5]), "b": ([0, 2], [.5, .5])})
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> _ = calibrate_tight(sc, 2.0, 1.0).write_certificate(path)
    >>> verify(path).kind
    'tight Pufferfish calibration'
    """
    kind, content = read_kind(path)
    result = kind.load()(Path(path), content, VerifyOptions(rigorous=rigorous, dask=dask))
    if not isinstance(result, Verification):  # pragma: no cover - a verifier bug
        raise InvalidTypeError("verifier result", result, "a Verification")
    return result


# ----------------------------------------------------------------------------- built-in kinds


def _f(x: float | None) -> str:
    """Compact: 6 significant digits; None (beyond double precision) named as such."""
    if x is None:
        return "beyond double range"
    return f"{x:.6g}" if math.isfinite(x) else str(x)


def _verified_covers(vf: Any) -> str:
    """What a verified design file's guarantee covers (the domain and the relation)."""
    desc = vf.description
    rel = vf.relation.replace("_", "/")
    if desc is None:
        return f"the sensitivity vectors stored in the file only ({rel} relation)"
    if vf.box_sup is not None:
        return (f"every dataset of records anywhere in the box {desc.domain} ({rel}): the sup "
                f"over every pair of records in the box, re-derived from the box, the query, σ "
                f"and Σ, is <= {vf.box_sup.upper!r} <= q")
    if desc.set == "uniform-query":
        where = ("every record in the box of" if desc.domain_points is None
                 else "records taking the values of")
        return f"every query point, and datasets with {where} {desc.domain} ({rel})"
    return (f"datasets whose records take the values of the finite domain {desc.domain} only "
            f"({rel}): real-valued records must be snapped to it before the release")


def verify_covariance_design(path: Path, content: dict[str, Any],
                             options: VerifyOptions) -> Verification:
    """Verifier of ``dpopt-covariance-certificate/1`` files (covariance designs)."""
    from dpopt.accounting.budgets import privacy_report
    from dpopt.accounting.report_json import report_dict
    from dpopt.covariance import design_file as df

    vf = df.verify_design_file(path, rigorous=options.rigorous, dask=options.dask)
    cert, desc = vf.certificate, vf.description
    stored_bound = float(vf.file.bound)
    privacy = report_dict(privacy_report(vf.guaranteed_bound), alphas=(2.0, 8.0, 32.0),
                          deltas=(1e-5, 1e-6, 1e-8), epsilons=())
    summary: dict[str, JSONValue] = {
        "certified": bool(cert.certified),
        "rigorous": bool(cert.rigorous),
        "interval": [float(cert.lower), float(cert.upper)],
        "gap": float(cert.gap),
        "primal_residual": float(cert.primal_residual),
        "mahalanobis_sup": float(cert.mahalanobis_sup),
        "bound": stored_bound,
        "described": desc is not None,
        "design": None if desc is None else desc.as_dict(),
        "budget": None if vf.budget is None else vf.budget.describe(),
        "budget_bound": vf.budget_bound,
        "relation": vf.relation,
        "privacy": privacy,
        "covers": _verified_covers(vf),
        "box_sup": None if vf.box_sup is None else float(vf.box_sup.upper),
    }
    lines: list[str] = []
    if desc is not None:
        extra = (
            f" at query {desc.query.tolist()} with σ = {desc.sigma:g}"
            if desc.query is not None and desc.sigma is not None
            else ""
        )
        lines.append(
            f"design: {desc.set} sensitivity set of domain {desc.domain}{extra}, "
            f"{desc.relation} relation: regenerated from the description, identical to the "
            "file's vectors"
        )
        lines.append(
            f"budget {summary['budget']}: q = {_f(float(vf.budget_bound or 0.0))} recomputed "
            "from the specs; "
            f"the stored q = {_f(stored_bound)} is within it"
            + (" (a quarter of it: replacement relation)" if vf.relation == "replacement" else "")
        )
    else:
        lines.append(
            "the file's description is free text: the certificate is about the sensitivity "
            "vectors stored in the file, not bound to a named set or budget"
        )
    lines.append(f"covers: {summary['covers']}")
    lines.append(
        f"Σ is strictly feasible as stored: max_j s_j^T Σ^-1 s_j <= "
        f"{cert.mahalanobis_sup!r} < q = {stored_bound!r} (all {vf.file.count} "
        "vectors, rounding accounted for)"
    )
    mode = "rigorous" if cert.rigorous else "floating-point"
    lines.append(
        f"optimal value in [{cert.lower:.10g}, {cert.upper:.10g}] ({mode}), relative gap "
        f"{cert.gap:.2e}" + ("" if cert.certified else "  (gap above the file's tolerance)")
    )
    what = "described sensitivity set" if desc is not None else "stored sensitivity vectors"
    lines.append(f"privacy guaranteed for the {what} ({vf.relation.replace('_', '/')} relation):")
    rep: Any = privacy  # the one JSON shape of dpopt.accounting.report_json
    lines.append(
        f"  Mahalanobis sensitivity sup s^T Σ^-1 s <= {_f(rep['mahalanobis_bound'])}:  "
        f"zCDP ρ = {_f(rep['zcdp_rho'])},  GDP μ = {_f(rep['gdp_mu'])}"
    )
    lines.append("  RDP ε_α: " + ", ".join(
        f"α={r['alpha']:g}: {_f(r['epsilon'])}" for r in rep["rdp"]))
    lines.append("  (ε, δ)-DP: " + ", ".join(
        f"δ={r['delta']:g}: ε={_f(r['epsilon'])}" for r in rep["epsilon_for_delta"]))
    return Verification(kind="covariance design", format=str(content["format"]),
                        path=str(path), summary=summary, lines=tuple(lines), result=vf)


def verify_tight_pufferfish(path: Path, content: dict[str, Any],
                            options: VerifyOptions) -> Verification:
    """Verifier of ``dpopt-renyi-mixture-certificate/2`` (and ``/1``) files (tight Pufferfish)."""
    from certificates.renyi_mixture import verify_mixture_file

    cert = verify_mixture_file(path)
    what = "b (Laplace scale)" if cert.noise == "laplace" else "σ (Gaussian std dev)"
    order = "∞ (pure)" if math.isinf(cert.alpha) else f"{cert.alpha:g}"
    summary: dict[str, JSONValue] = {
        "noise": cert.noise,
        "alpha": None if math.isinf(cert.alpha) else cert.alpha,  # null: alpha = inf (pure)
        "epsilon": cert.epsilon,
        "scale": cert.scale,
        "refuted_scale": cert.refuted_scale,
        "certified": bool(cert.certified),
        "tight": bool(cert.tight),
        "upper": cert.upper,
        "lower_below": None if math.isinf(cert.lower_below) else cert.lower_below,
        "pairs": len(cert.pairs),
    }
    lines = [
        f"{cert.noise} noise, Rényi order α = {order}, ε = {cert.epsilon:g}; "
        f"{len(cert.pairs)} (prior, secret pair) law pair(s), both orders, re-proved from the "
        "stored laws",
    ]
    if cert.scale == 0.0:
        lines.append("no noise is needed: every pair's D_α of the laws themselves is <= "
                     f"{cert.upper:.10g} <= ε (least scale 0, exact)")
    else:
        lines.append(f"{what} = {cert.scale!r} is private: every D_α <= {cert.upper:.10g} "
                     "<= ε" if cert.certified else
                     f"{what} = {cert.scale!r} is NOT proven private (the file does not claim "
                     f"it): D_α <= {cert.upper:.10g}")
    if cert.refuted_scale is not None:
        lines.append(
            f"{cert.refuted_scale!r} is NOT private: some D_α >= {cert.lower_below:.10g} > ε, "
            "so the least private scale lies in "
            f"({cert.refuted_scale:.10g}, {cert.scale:.10g}]"
        )
    return Verification(kind="tight Pufferfish calibration", format=str(content["format"]),
                        path=str(path), summary=summary, lines=tuple(lines), result=cert)
