"""Deprecated: the input cleaning is :mod:`certificates.validate`. This alias goes in dpopt 0.6."""

from __future__ import annotations

from certificates._deprecated import warn_module

warn_module(__name__, "certificates.validate", __file__)

from certificates.validate import (  # noqa: E402
    as_float_array,
    as_int,
    as_matrix,
    as_psd_matrix,
    as_scalar,
    as_vectors,
)

__all__ = ["as_float_array", "as_int", "as_matrix", "as_psd_matrix", "as_scalar", "as_vectors"]
