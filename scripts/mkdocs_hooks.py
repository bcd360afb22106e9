"""mkdocs hooks for the dpopt site (``mkdocs.yml``: ``hooks:``).

``on_config`` drops every nav entry whose Markdown or notebook file does not exist under
``docs/``: the nav lists pages that are written on other branches, and a strict build must not
fail while one of them has not been merged yet. Each dropped entry is logged at INFO level.

``on_files`` adds MathJax to the site: ``assets/mathjax/tex-svg-full.js`` is copied from the
installed package ``django-static-mathjax`` (the ``docs`` extra of ``pyproject.toml``), so the
formulas render without a network and no third-party script is kept in the repository. A build
without the package fails with a message naming it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

#: where the site serves MathJax from (``extra_javascript`` in mkdocs.yml)
MATHJAX_DEST = "assets/mathjax/tex-svg-full.js"

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


def mathjax_source() -> Path:
    """The ``tex-svg-full.js`` of the installed ``django-static-mathjax`` package."""
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the documentation needs MathJax from the package "
                           "'django-static-mathjax': pip install -e '.[docs]'")
    for location in spec.submodule_search_locations:
        path = Path(location) / "static" / "mathjax" / "es5" / "tex-svg-full.js"
        if path.is_file():
            return path
    raise RuntimeError("the installed 'mathjax' package has no static/mathjax/es5/"
                       "tex-svg-full.js: reinstall 'django-static-mathjax'")


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    if files.get_file_from_path(MATHJAX_DEST) is None:
        files.append(File.generated(config, MATHJAX_DEST, abs_src_path=str(mathjax_source())))
    return files
