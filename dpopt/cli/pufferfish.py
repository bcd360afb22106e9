"""``dpopt calibrate pufferfish``: Rényi-Pufferfish calibration from a CSV (private to the CLI).

The CSV rows are observations (secret value, query value). For each secret value :math:`s` the
empirical conditional law :math:`P_s` of the query is formed
(:meth:`dpopt.pufferfish.Scenario.from_dataframe`); the noise scale is the least one whose
optimal-transport condition :math:`\\min_\\pi \\sum \\pi_{kl} M_\\alpha(x_k - y_l) \\le
e^{(\\alpha-1)\\varepsilon}` holds for every pair of secrets, compared with the
:math:`W_\\infty` baseline. With ``--tight`` the least scale itself is found within a
tolerance and proven (:func:`dpopt.pufferfish.calibrate_tight`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dpopt.cli.common import UsageError, read_table
from dpopt.errors import InvalidParameterError

__all__ = ["calibrate_csv"]


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def calibrate_csv(
    path: str,
    *,
    secret: str,
    query: list[str],
    prior: str | None,
    alpha: float,
    epsilon: float,
    noise: str,
    form: str,
    tight: bool = False,
    tol: float = 0.01,
    certificate: str | None = None,
) -> dict[str, Any]:
    """Calibrate from the CSV at ``path``; returns a JSON-ready dict (and ``lines`` for text)."""
    import pandas as pd

    from dpopt import pufferfish as pf
    cols = [secret, *query] + ([prior] if prior else [])
    table = read_table(path, cols)
    frame = pd.DataFrame({c: table[c] for c in dict.fromkeys(cols)})
    for q in query:
        num = pd.to_numeric(frame[q], errors="coerce")
        if num.isna().any():
            r = int(np.argmax(num.isna().to_numpy()))
            raise InvalidParameterError(
                f"{path}:{q}", f"{frame[q].iat[r]!s} at line {r + 2}", "must be a number"
            )
        if not np.isfinite(num.to_numpy(dtype=float)).all():
            raise InvalidParameterError(f"{path}:{q}", "inf", "must be finite")
        frame[q] = num.astype(float)
    if frame[secret].nunique() < 2:
        raise UsageError(f"column {secret!r} needs at least two distinct secret values")
    scenario = pf.Scenario.from_dataframe(
        frame, query[0] if len(query) == 1 else query, secret, prior=prior
    )
    options: dict[str, Any] = {"form": form} if noise == "laplace" else {}
    if noise != "laplace" and form != "exact":
        raise UsageError("--cost-form applies to Laplace noise only")
    cost = pf.make_cost(noise, alpha, **options)
    cal = pf.calibrate(scenario, cost, epsilon)
    base = pf.winf_baseline(scenario, cost, epsilon)
    what = "b (Laplace scale per coordinate)" if noise == "laplace" else "σ (Gaussian std dev)"
    pairs = [
        {
            "prior": _plain(p.prior),
            "secrets": [_plain(s) for s in p.secrets],
            "scale": float(p.scale),
            "w_inf": float(p.w_inf),
        }
        for p in cal.pairs
    ]
    binding = [_plain(v) for v in cal.binding_pair]
    lines = [
        f"{what}: {cal.scale:.10g}   (cost {cal.cost}, coupling {cal.method})",
        f"W_inf baseline scale: {base.scale:.10g}   (W_inf = {base.w_inf:.6g})",
        f"binding pair: {binding[1]!r} vs {binding[2]!r} (prior {binding[0]!r}); "
        f"{len(pairs)} pair(s) checked",
        "coupling certificates: " + ("all hold" if cal.certified else "NOT CERTIFIED"),
        "note: the laws are empirical estimates from the CSV; the guarantee is about them.",
    ]
    out: dict[str, Any] = {
        "secret": secret,
        "query": query,
        "prior": prior,
        "alpha": float(alpha),
        "epsilon": float(epsilon),
        "noise": noise,
        "cost": cal.cost,
        "method": cal.method,
        "scale": float(cal.scale),
        "certified": bool(cal.certified),
        "binding_pair": binding,
        "winf_baseline_scale": float(base.scale),
        "w_inf": float(base.w_inf),
        "pairs": pairs,
        "lines": lines,
    }
    if certificate is not None and not tight:
        raise UsageError("--certificate needs --tight")
    if tight:
        out |= _tight(scenario, pf, alpha, epsilon, noise, tol, certificate, lines)
    return out


def _tight(
    scenario: Any,
    pf: Any,
    alpha: float,
    epsilon: float,
    noise: str,
    tol: float,
    certificate: str | None,
    lines: list[str],
) -> dict[str, Any]:
    """The tight calibration's fields (and text lines); writes the certificate if asked."""
    if scenario.dim != 1:
        raise UsageError("--tight needs a single --query column (a 1-D query)")
    if not 0.0 < tol < 0.5:
        raise InvalidParameterError("--tol", tol, "must be in (0, 0.5)")
    if certificate is not None and os.path.exists(certificate):
        raise InvalidParameterError("--certificate", certificate, "exists; not overwritten")
    tc = pf.calibrate_tight(scenario, alpha, epsilon, noise, tol)
    digest = tc.write_certificate(certificate) if certificate is not None else None
    refuted = "" if tc.refuted_scale is None else f"; {tc.refuted_scale:.10g} proven NOT private"
    if tc.noise_needed:
        lines.insert(
            1,
            f"tight scale: {tc.scale:.10g}   (proven private{refuted}; "
            f"{tc.gain:.3g}x less than the transport bound)",
        )
    else:
        lines.insert(1, f"tight scale: 0   ({tc.message})")
    if digest is not None:
        lines.insert(2, f"certificate written to {certificate} (sha256 {digest[:16]}...)")
    return {
        "tight_scale": float(tc.scale),
        "tight_refuted_scale": None if tc.refuted_scale is None else float(tc.refuted_scale),
        "tight_within_tol": bool(tc.tight),
        "tight_message": tc.message,
        "tol": float(tol),
        "tight_certificate": certificate,
    }
