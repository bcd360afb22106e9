"""A griffe extension that lets the API reference render dpopt's reStructuredText-flavoured
docstrings as Markdown (mkdocs.yml: ``mkdocstrings`` → ``extensions``).

The docstrings are numpy style but use a few reST constructs that Markdown shows verbatim:

- roles ``:math:`x```, ``:func:`name```, ``:class:``, ``:mod:``, ``:meth:``, ``:data:``,
  ``:attr:``, ``:exc:`` become inline code (``~pkg.mod.name`` shows ``name``);
- ``.. math::`` blocks become fenced code blocks;
- a section titled ``Example`` becomes ``Examples`` (so doctests render as code);
- citations of team-internal notes are rewritten for readers: a parenthetical reference to the
  team's math notes is dropped, and "seed 000/001/002" become the papers' names.

Only the rendered text changes; the source docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

_ROLE = re.compile(r":(?:math|func|class|mod|meth|data|attr|exc|obj):`(~?)([^`]+)`")
_SEC = r"§\s?\d+(?:\.\d+)*(?:\s?[–-]\s?§?\d+(?:\.\d+)*)?"
_SECS = rf"{_SEC}(?:(?:,|\s+and|\s*/)\s*{_SEC})*"
_NOTES = re.compile(
    rf"\s*\((?:see )?MATH\.md[^()]*(?:\([^()]*\)[^()]*)*\)|,?\s*MATH\.md(?:\s*{_SECS})?")
_SECTION_SIGN = re.compile(rf"\s*\({_SECS}\)|{_SECS}")
_SEEDS = {
    "seed 000": "the α-Wasserstein paper (Ding, Yang, Zhang)",
    "seed 001": "the Gaussian-DP paper (Dong, Roth, Su)",
    "seed 002": "the optimal-covariance paper",
}


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
        if line.strip() == ".. math::":
            indent = len(line) - len(line.lstrip())
            i += 1
            body: list[str] = []
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
    text = re.sub(r"^(\s*)Example\n(\s*)-------\n", r"\1Examples\n\2--------\n", text,
                  flags=re.M)
    text = re.sub(r"§\s?([IVX]+)\b", r"Section \1", text)
    text = re.sub(rf"(?:see )?MATH\.md(?:\s*{_SECS})?: ", "", text)  # "(notes §4: formula)"
    text = _NOTES.sub("", text)
    text = _SECTION_SIGN.sub("", text)
    for seed, name in _SEEDS.items():
        text = re.sub(rf"\b{seed}'s\b", f"{name}'s", text, flags=re.I)
        text = re.sub(rf"\b{seed}\b", name, text, flags=re.I)
    return text


class ReadableDocstrings(Extension):
    """Rewrite every docstring with :func:`rewrite` as it is loaded."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and docstring.value:
            docstring.value = rewrite(docstring.value)
