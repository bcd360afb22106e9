"""Count the public parameters and return types of dpopt, solvers and certificates that are typed
``Any`` or not annotated at all.

Public means: the module path has no component starting with ``_`` (``__init__.py`` counts as
its package) and neither the function, method nor any enclosing class does; ``__init__``,
``__new__`` and ``__call__`` of a public class are public. The fields of a public dataclass
(unless it declares ``init=False`` and writes its own ``__init__``) or ``NamedTuple`` are
``__init__`` parameters and are counted too. ``@overload`` signatures are checked like the others
(their parameters count once in the total). ``self``/``cls`` are skipped, and so is the return type
of ``__init__``. An annotation counts as ``Any`` when it is ``Any`` itself or a union of ``Any``
with other types (``Any | None``); a precise container of ``Any`` such as ``dict[str, Any]`` is
reported in its own column but does not fail the check. The check reads annotations as written:
an alias defined as ``Any`` elsewhere is not followed.

Usage::

    python scripts/public_any.py [--verbose] [ROOT]

prints one row per file and the totals, and exits 1 if an ``Any`` (or a missing annotation)
remains that is not in :data:`ALLOWED` below, or if an entry of :data:`ALLOWED` no longer matches
anything (so the list cannot go stale).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("dpopt", "solvers", "certificates")
PUBLIC_DUNDERS = {"__init__", "__new__", "__call__"}

#: ``path::Qualified.name(param)`` (``-> return`` for a return type) -> why ``Any`` is right there.
ALLOWED: dict[str, str] = {
    "dpopt/cli/options.py::add_renamed_option(**kwargs)":
        "forwarded to argparse's add_argument, whose keyword arguments typeshed types as Any",
    "dpopt/pufferfish/costs.py::make_cost(**options)":
        "forwarded to the cost class named by `mechanism`; each takes different keywords "
        "(form: str, covariance: array, norm: float)",
    "solvers/api.py::solve(**options)":
        "forwarded to solve_structured or solve_cvx, whose keyword options differ by method",
    "solvers/api.py::attempts(**options)":
        "forwarded to solve_structured or solve_cvx (checked by name against STRUCTURED_OPTIONS "
        "and BACKEND_OPTIONS), whose keyword options differ by method",
}


@dataclass(frozen=True)
class Finding:
    """One public parameter or return type and how it is annotated."""

    key: str          # path::qualname(param) or path::qualname(-> return)
    kind: str         # "any" (typed Any), "missing" (no annotation), "nested" (e.g. dict[str, Any])


def _is_any(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _is_any(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_any(node.left) or _is_any(node.right)
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] in {
            "Optional", "Union"}:
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(_is_any(e) for e in elts)
    return False


def _mentions_any(node: ast.expr) -> bool:
    text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else ast.unparse(node)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return any(_is_any(n) for n in ast.walk(tree) if isinstance(n, ast.expr))


def _classify(annotation: ast.expr | None) -> str | None:
    if annotation is None:
        return "missing"
    if _is_any(annotation):
        return "any"
    if _mentions_any(annotation):
        return "nested"
    return None


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.add(ast.unparse(target).split(".")[-1])
    return names


def _is_record_class(node: ast.ClassDef) -> bool:
    """A dataclass (with a generated ``__init__``) or a ``NamedTuple``: its fields are
    ``__init__`` parameters."""
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if ast.unparse(target).split(".")[-1] == "dataclass":
            return not (isinstance(dec, ast.Call) and any(
                kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
                for kw in dec.keywords))
    return any(ast.unparse(base).split(".")[-1] == "NamedTuple" for base in node.bases)


def _field_is_init_param(stmt: ast.AnnAssign) -> bool:
    if "ClassVar" in ast.unparse(stmt.annotation):
        return False
    value = stmt.value
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "field":
        for kw in value.keywords:
            if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                return False
    return True


def _function(path: str, qualname: str, node: ast.FunctionDef | ast.AsyncFunctionDef,
              is_method: bool) -> Iterator[Finding]:
    decorators = _decorators(node)
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    if is_method and "staticmethod" not in decorators and positional:
        positional = positional[1:]  # self / cls
    params = [*positional, *args.kwonlyargs]
    if args.vararg is not None:
        params.append(args.vararg)
    if args.kwarg is not None:
        params.append(args.kwarg)
    for arg in params:
        star = "*" if arg is args.vararg else "**" if arg is args.kwarg else ""
        kind = _classify(arg.annotation)
        if kind is not None:
            yield Finding(f"{path}::{qualname}({star}{arg.arg})", kind)
    if node.name != "__init__":
        kind = _classify(node.returns)
        if kind is not None:
            yield Finding(f"{path}::{qualname}(-> return)", kind)


def _body(path: str, prefix: str, body: list[ast.stmt], in_class: ast.ClassDef | None
          ) -> Iterator[Finding]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("_") and not (in_class and node.name in PUBLIC_DUNDERS):
                continue
            yield from _function(path, prefix + node.name, node, in_class is not None)
        elif isinstance(node, ast.ClassDef):
            if node.name.startswith("_"):
                continue
            if _is_record_class(node):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                            and _field_is_init_param(stmt):
                        kind = _classify(stmt.annotation)
                        if kind is not None:
                            yield Finding(f"{path}::{prefix}{node.name}({stmt.target.id})", kind)
            yield from _body(path, f"{prefix}{node.name}.", node.body, node)
        elif isinstance(node, ast.If):  # e.g. `if TYPE_CHECKING:` / version switches
            yield from _body(path, prefix, node.body, in_class)
            yield from _body(path, prefix, node.orelse, in_class)


def public_modules(root: Path) -> Iterator[Path]:
    """The ``.py`` files of the packages whose module path is public."""
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")):
            parts = file.relative_to(root).with_suffix("").parts
            if any(p.startswith("_") and p != "__init__" for p in parts):
                continue
            yield file


def count_parameters(root: Path) -> int:
    """How many public parameters (excluding ``self``/``cls``) the packages have in all."""
    total = 0
    for file in public_modules(root):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        total += _count(tree.body, False)
    return total


def _count(body: list[ast.stmt], in_class: bool) -> int:
    total = 0
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if (node.name.startswith("_") and not (in_class and node.name in PUBLIC_DUNDERS)) \
                    or "overload" in _decorators(node):  # an overload's parameters count once
                continue
            a = node.args
            n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) \
                + (a.vararg is not None) + (a.kwarg is not None)
            if in_class and "staticmethod" not in _decorators(node) \
                    and (a.posonlyargs or a.args):
                n -= 1
            total += n
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            if _is_record_class(node):
                total += sum(1 for s in node.body if isinstance(s, ast.AnnAssign)
                             and isinstance(s.target, ast.Name) and _field_is_init_param(s))
            total += _count(node.body, True)
        elif isinstance(node, ast.If):
            total += _count(node.body, in_class) + _count(node.orelse, in_class)
    return total


def findings(root: Path) -> list[Finding]:
    """Every public parameter or return type of the packages typed ``Any`` or not annotated."""
    out: list[Finding] = []
    for file in public_modules(root):
        rel = file.relative_to(root).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=rel)
        out.extend(_body(rel, "", tree.body, None))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every finding, not only the ones that fail the check")
    args = parser.parse_args(argv)
    root = Path(args.root)
    found = findings(root)
    per_file: dict[str, dict[str, int]] = {}
    for f in found:
        row = per_file.setdefault(f.key.split("::")[0], {})
        is_param = not f.key.endswith("(-> return)")
        column = {"any": "param Any" if is_param else "return Any",
                  "missing": "param missing" if is_param else "return missing",
                  "nested": "nested Any"}[f.kind]
        row[column] = row.get(column, 0) + 1
        if f.kind != "nested" and f.key in ALLOWED:
            row["allowed"] = row.get("allowed", 0) + 1
    columns = ["param Any", "param missing", "return Any", "return missing", "allowed",
               "nested Any"]
    width = max([len("file"), *map(len, per_file)])
    print(f"{'file':<{width}}  " + "  ".join(f"{c:>14}" for c in columns))
    totals = dict.fromkeys(columns, 0)
    for name in sorted(per_file):
        row = per_file[name]
        for c in columns:
            totals[c] += row.get(c, 0)
        print(f"{name:<{width}}  " + "  ".join(f"{row.get(c, 0):>14}" for c in columns))
    print(f"{'total':<{width}}  " + "  ".join(f"{totals[c]:>14}" for c in columns))
    print(f"public parameters in all: {count_parameters(root)}")

    failing = [f for f in found if f.kind != "nested" and f.key not in ALLOWED]
    matched = {f.key for f in found if f.kind != "nested"}
    stale = sorted(set(ALLOWED) - matched)
    if args.verbose:
        for f in found:
            tag = "allowed" if f.key in ALLOWED else f.kind
            print(f"  [{tag}] {f.key}")
    for f in failing:
        print(f"NOT ALLOWED ({f.kind}): {f.key}", file=sys.stderr)
    for key in stale:
        print(f"STALE allow-list entry (matches nothing): {key}", file=sys.stderr)
    return 1 if failing or stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
