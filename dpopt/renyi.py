"""Deprecated: this module moved to :mod:`dpopt.accounting.renyi`.
This alias goes in dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import alias_module

__getattr__, __dir__, __all__ = alias_module(__name__, "dpopt.accounting.renyi", __file__)
