"""The one grammar of dpopt's spec strings: ``KIND:KEY=VALUE,KEY=VALUE,...``.

Budgets (``approx:epsilon=1,delta=1e-6``, ``--budget``) and domains (``grid:lo=0,hi=1,n=5,d=2``,
``--domain``) are both written in it, and both are read by :func:`parse_spec`, so a string is
accepted or refused the same way everywhere (a budget file re-read by ``dpopt verify``
included). The rules:

- ``KIND`` is case-insensitive and must not be empty; a bare ``KIND`` has no items;
- items are separated by single commas; an empty item (``a=1,,b=2``, a trailing comma) is an
  error, not skipped;
- each item is ``KEY=VALUE`` with a non-empty key (case-insensitive) and a non-empty value;
  spaces around keys and values are ignored;
- a key may appear once.

What a value means (a number, a ``;``-separated list of RDP orders, a relation) is for the
caller to check.
"""

from __future__ import annotations

from dpopt.errors import InvalidParameterError

__all__ = ["parse_spec"]


def parse_spec(text: str, *, what: str = "spec") -> tuple[str, dict[str, str]]:
    """Split ``KIND:KEY=VALUE,...`` into ``(kind, {key: value})`` (kind and keys lower-cased).

    Parameters
    ----------
    text : str
        The spec as the user wrote it.
    what : str, default "spec"
        The name the error message gives the spec (``"--budget"``, ``"domain"``).

    Raises
    ------
    InvalidParameterError
        Naming ``what`` and echoing ``text``, with the offending item.

    Examples
    --------
    >>> parse_spec("approx:epsilon=1, delta=1e-6")
    ('approx', {'epsilon': '1', 'delta': '1e-6'})
    >>> parse_spec("approx:epsilon=1,,delta=1e-6", what="--budget")
    Traceback (most recent call last):
    ...
    certificates.errors.InvalidParameterError: --budget='approx:epsilon=1,,delta=1e-6': ...
    """
    if not isinstance(text, str):
        from dpopt.errors import InvalidTypeError

        raise InvalidTypeError(what, text, "a string such as 'gdp:mu=1'")
    kind, sep, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if not kind:
        raise InvalidParameterError(what, text, "must look like KIND:KEY=VALUE,... (empty kind)")
    params: dict[str, str] = {}
    if sep and rest.strip():
        for item in rest.split(","):
            if not item.strip():
                raise InvalidParameterError(
                    what, text, "an empty item between commas (write KEY=VALUE,KEY=VALUE)")
            key, eq, val = item.partition("=")
            key, val = key.strip().lower(), val.strip()
            if not eq or not key or not val:
                raise InvalidParameterError(
                    what, text, f"item {item.strip()!r} must look like KEY=VALUE"
                )
            if key in params:
                raise InvalidParameterError(what, text, f"key {key!r} is given twice")
            params[key] = val
    elif sep:
        raise InvalidParameterError(what, text, "nothing after the colon (write KIND:KEY=VALUE)")
    return kind, params
