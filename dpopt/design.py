"""Deprecated: the design moved to :mod:`dpopt.covariance.design`. This alias goes in
dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import warn_module

warn_module(__name__, "dpopt.covariance.design", __file__)

from dpopt.covariance.design import Design, design_covariance  # noqa: E402

__all__ = ["Design", "design_covariance"]
