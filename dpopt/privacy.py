"""Deprecated: this module moved to :mod:`dpopt.covariance.privacy`.
This alias goes in dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import alias_module

__getattr__, __dir__, __all__ = alias_module(__name__, "dpopt.covariance.privacy", __file__)
