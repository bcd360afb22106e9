"""``dpopt calibrate pufferfish``: Rényi-Pufferfish calibration from a CSV (private to the CLI).

The CSV rows are observations (secret value, query value). For each secret value :math:`s` the
empirical conditional law :math:`P_s` of the query is formed
(:meth:`dpopt.pufferfish.Scenario.from_dataframe`); the noise scale is the least one whose
optimal-transport condition :math:`\\min_\\pi \\sum \\pi_{kl} M_\\alpha(x_k - y_l) \\le
e^{(\\alpha-1)\\varepsilon}` holds for every pair of secrets (MATH.md §2.2, §3), compared with the
:math:`W_\\infty` baseline (MATH.md §2.4).
"""

from __future__ import annotations

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
    return {
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
