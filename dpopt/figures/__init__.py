"""Reproduction figures, one registry entry each (``python -m dpopt.figures --list``).

Figures are written under ``results/`` (not committed). Plotting uses matplotlib's Agg backend.
"""

from __future__ import annotations

__all__: list[str] = []
