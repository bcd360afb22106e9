"""Deprecated: the domains moved to :mod:`dpopt.covariance.domains`. This alias goes in
dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import warn_module

warn_module(__name__, "dpopt.covariance.domains", __file__)

from dpopt.covariance.domains import Box, Domain, FinitePoints, Grid, as_domain  # noqa: E402

__all__ = ["Box", "Domain", "FinitePoints", "Grid", "as_domain"]
