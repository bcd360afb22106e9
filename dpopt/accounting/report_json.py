"""One JSON shape for a privacy report, used everywhere dpopt writes one.

:meth:`dpopt.accounting.budgets.PrivacyReport.to_dict`, ``dpopt account … --json``,
``dpopt design/demo --json`` and ``dpopt verify --json`` (under ``"privacy"``) all produce
:func:`report_dict`, whose schema (``dpopt.privacy-report/1``) is::

    {
      "schema": "dpopt.privacy-report/1",
      "approximate": false,            # true: q came from an approximation (e.g. the CLT)
      "mahalanobis_bound": q,          # sup of s^T Sigma^-1 s the guarantee is computed from
      "zcdp_rho": q / 2,
      "gdp_mu": sqrt(q),
      "rdp": [{"alpha": a, "epsilon": a q / 2}, ...],
      "epsilon_for_delta": [{"delta": d, "epsilon": eps(d)}, ...],   # exact (eps, delta) curve
      "delta_for_epsilon": [{"epsilon": e, "delta": delta(e)}, ...],
      "mi_nats": psi(q)                # binary-record mutual information (replacement), nats
    }

Every value is a plain JSON number; a value that double precision cannot represent (for
example an RDP ε beyond 1.8e308) is ``null``. Lists keep the order in which the orders,
δs and εs were asked for.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpopt.errors import DpoptError

if TYPE_CHECKING:  # pragma: no cover
    from certificates.io import JSONValue
    from dpopt.accounting.budgets import PrivacyReport

__all__ = ["DEFAULT_ALPHAS", "DEFAULT_DELTAS", "DEFAULT_EPSILONS", "SCHEMA", "report_dict"]

#: identifier of the JSON shape, written into every report
SCHEMA = "dpopt.privacy-report/1"
#: Rényi orders reported when none are given
DEFAULT_ALPHAS: tuple[float, ...] = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: δ values at which ε is reported when none are given
DEFAULT_DELTAS: tuple[float, ...] = (1e-5, 1e-6, 1e-9)
#: ε values at which δ is reported when none are given
DEFAULT_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)


def _number(compute: Callable[..., Any], *args: float) -> float | None:
    """``float(compute(*args))``, or None when it is not finite or cannot be represented."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            value = float(compute(*args))
    except (DpoptError, OverflowError, ValueError):
        return None
    return value if math.isfinite(value) else None


def report_dict(
    report: PrivacyReport,
    *,
    alphas: Iterable[float] | None = None,
    deltas: Iterable[float] | None = None,
    epsilons: Iterable[float] | None = None,
    approximate: bool = False,
) -> dict[str, JSONValue]:
    """The report as JSON-ready data in the shape ``dpopt.privacy-report/1`` (module docstring).

    Parameters
    ----------
    report : PrivacyReport
        The report of a Gaussian mechanism with Mahalanobis bound q.
    alphas, deltas, epsilons : iterables of float, optional
        Rényi orders, δs for ε(δ) and εs for δ(ε); the module's defaults when omitted.
    approximate : bool
        Mark the report as computed from an approximation rather than a bound.
    """
    orders = [float(a) for a in (DEFAULT_ALPHAS if alphas is None else alphas)]
    at_deltas = [float(d) for d in (DEFAULT_DELTAS if deltas is None else deltas)]
    at_epsilons = [float(e) for e in (DEFAULT_EPSILONS if epsilons is None else epsilons)]
    return {
        "schema": SCHEMA,
        "approximate": bool(approximate),
        "mahalanobis_bound": _number(lambda: report.bound),
        "zcdp_rho": _number(lambda: report.zcdp_rho),
        "gdp_mu": _number(lambda: report.gdp_mu),
        "rdp": [{"alpha": a, "epsilon": _number(report.rdp_epsilon, a)} for a in orders],
        "epsilon_for_delta": [{"delta": d, "epsilon": _number(report.epsilon, d)}
                              for d in at_deltas],
        "delta_for_epsilon": [{"epsilon": e, "delta": _number(report.delta, e)}
                              for e in at_epsilons],
        "mi_nats": _number(lambda: report.mi_nats),
    }
