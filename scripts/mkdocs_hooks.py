"""mkdocs hooks for the dpopt site (``mkdocs.yml``: ``hooks:``).

``on_config`` drops every nav entry whose Markdown or notebook file does not exist under
``docs/``: the nav lists pages that are written on other branches, and a strict build must not
fail while one of them has not been merged yet. Each dropped entry is logged at INFO level.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.dpopt")


def _prune(items: list[Any], docs_dir: Path) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, list):
                children = _prune(value, docs_dir)
                if children:
                    kept.append({title: children})
                continue
            item_path = value
        else:
            item_path = item
        if isinstance(item_path, str) and "://" not in item_path \
                and not (docs_dir / item_path).is_file():
            log.info("nav: %s is not written yet; entry left out", item_path)
            continue
        kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    nav = config.get("nav")
    if nav:
        config["nav"] = _prune(nav, Path(config["docs_dir"]))
    return config
