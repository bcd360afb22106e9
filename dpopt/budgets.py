"""Deprecated: the budgets moved to :mod:`dpopt.accounting.budgets`. This alias goes in
dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import warn_module

warn_module(__name__, "dpopt.accounting.budgets", __file__)

from dpopt.accounting.budgets import (  # noqa: E402
    GDP,
    MIDP,
    RDP,
    ZCDP,
    AllOf,
    ApproxDP,
    Budget,
    PrivacyReport,
    mi_binary,
    mi_binary_inverse,
    parse_budget,
    privacy_report,
)

__all__ = [
    "GDP",
    "MIDP",
    "RDP",
    "ZCDP",
    "AllOf",
    "ApproxDP",
    "Budget",
    "PrivacyReport",
    "mi_binary",
    "mi_binary_inverse",
    "parse_budget",
    "privacy_report",
]
