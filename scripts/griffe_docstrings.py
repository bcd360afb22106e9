"""A griffe extension that lets the API reference render dpopt's reStructuredText-flavoured
docstrings as Markdown (mkdocs.yml: ``mkdocstrings`` → ``extensions``).

The docstrings are numpy style but use a few reST constructs that Markdown shows verbatim:

- the role ``:math:`x``` becomes inline math ``\\(x\\)`` and ``.. math::`` blocks (content on
  the directive line or indented below it) become display math ``$$ … $$``; pymdownx.arithmatex
  marks both and MathJax typesets them (mkdocs.yml);
- roles ``:func:`name```, ``:class:``, ``:mod:``, ``:meth:``, ``:data:``, ``:attr:``,
  ``:exc:`` become inline code (``~pkg.mod.name`` shows ``name``);
- a section titled ``Example`` becomes ``Examples`` (so doctests render as code).

Only the rendered text changes; the source docstrings stay as they are. (Docstrings cite papers
by author and title themselves, so nothing here rewrites citations: a paper's "§2.2" renders as
written.)
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj):`(~?)([^`]+)`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")


def _role(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    if short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _math_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    shift: tuple[int, str] | None = None  # (reST indent, Markdown pad) of the list item text
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(".. math::"):
            indent = _indent(line)
            i += 1
            body: list[str] = [line.strip()[len(".. math::"):]]  # content on the directive line
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
                body.append(lines[i])
                i += 1
            content = [b.strip() for b in body if b.strip()]
            # Markdown continues a list item at 4 spaces, reST at the item's text (3 for "1. "):
            # the block and the rest of its item move to the next multiple of 4
            pad = " " * (-(-indent // 4) * 4)
            shift = (indent, pad) if len(pad) != indent else None
            if out and out[-1].strip():
                out.append("")
            out.extend([pad + "$$", *(pad + c for c in content), pad + "$$", ""])
            continue
        if shift is not None and line.strip():
            if _indent(line) < shift[0]:  # the next item: a blank line keeps it out of the text
                shift = None
                if out and out[-1].strip():
                    out.append("")
            elif _indent(line) == shift[0]:
                line = shift[1] + line.lstrip()
        out.append(line)
        i += 1
    return "\n".join(out)


def rewrite(text: str) -> str:
    """The Markdown-friendly version of one docstring."""
    text = _math_blocks(text)
    # one line: a continuation line starting with "+" or "-" would open a Markdown list
    text = _MATH_ROLE.sub(lambda m: "\\(" + " ".join(m.group(1).split()) + "\\)", text)
    text = _ROLE.sub(_role, text)
    return re.sub(r"^(\s*)Example\n(\s*)-------\n", r"\1Examples\n\2--------\n", text,
                  flags=re.M)


class ReadableDocstrings(Extension):
    """Rewrite every docstring with :func:`rewrite` as it is loaded."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and docstring.value:
            docstring.value = rewrite(docstring.value)
