"""A griffe extension that lets the API reference render dpopt's reStructuredText-flavoured
docstrings as Markdown (mkdocs.yml: ``mkdocstrings`` → ``extensions``).

The docstrings are numpy style but use a few reST constructs that Markdown shows verbatim:

- roles ``:math:`x```, ``:func:`name```, ``:class:``, ``:mod:``, ``:meth:``, ``:data:``,
  ``:attr:``, ``:exc:`` become inline code (``~pkg.mod.name`` shows ``name``);
- ``.. math::`` blocks (content on the directive line or indented below it) become fenced
  code blocks;
- a section titled ``Example`` becomes ``Examples`` (so doctests render as code).

Only the rendered text changes; the source docstrings stay as they are. (Docstrings cite papers
by author and title themselves, so nothing here rewrites citations: a paper's "§2.2" renders as
written.)
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

_ROLE = re.compile(r":(?:math|func|class|mod|meth|data|attr|exc|obj):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    if short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _math_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(".. math::"):
            indent = len(line) - len(line.lstrip())
            i += 1
            body: list[str] = [line.strip()[len(".. math::"):]]  # content on the directive line
            while i < len(lines) and (not lines[i].strip()
                                      or len(lines[i]) - len(lines[i].lstrip()) > indent):
                body.append(lines[i])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            content = [b.strip() for b in body if b.strip()]
            out.extend([" " * indent + "```", *(" " * indent + c for c in content),
                        " " * indent + "```", ""])
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def rewrite(text: str) -> str:
    """The Markdown-friendly version of one docstring."""
    text = _math_blocks(text)
    text = _ROLE.sub(_role, text)
    return re.sub(r"^(\s*)Example\n(\s*)-------\n", r"\1Examples\n\2--------\n", text,
                  flags=re.M)


class ReadableDocstrings(Extension):
    """Rewrite every docstring with :func:`rewrite` as it is loaded."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and docstring.value:
            docstring.value = rewrite(docstring.value)
