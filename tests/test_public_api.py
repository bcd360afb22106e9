"""Every name a package advertises in ``__all__`` resolves, and the layering holds."""

import ast
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("package", ["dpopt", "solvers", "certificates", "dpopt.pufferfish",
                                     "dpopt.datasets", "dpopt.experiments"])
def test_all_names_resolve(package: str) -> None:
    mod = importlib.import_module(package)
    missing = [n for n in mod.__all__ if getattr(mod, n, None) is None]
    assert not missing, f"{package}: {missing}"


def test_unknown_attribute_raises() -> None:
    import dpopt
    import solvers

    with pytest.raises(AttributeError):
        dpopt.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        solvers.no_such_name  # noqa: B018


def _imported_roots(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("certificates", {"dpopt", "solvers", "cvxpy", "ot", "clarabel", "scs"}),
     ("solvers", {"dpopt"})],
)
def test_layering(package: str, forbidden: set[str]) -> None:
    """dpopt -> solvers -> certificates; certificates uses numpy/scipy only (DESIGN.md §2)."""
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imported_roots(path) & forbidden
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_certificates_tests_stand_alone() -> None:
    """The checker is tested on its own: tests/certificates imports neither solvers nor dpopt
    (nor the shared test modules that would)."""
    for path in sorted((ROOT / "tests" / "certificates").rglob("*.py")):
        bad = _imported_roots(path) & {"dpopt", "solvers", "cvxpy"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
    assert not _imported_roots(ROOT / "tests" / "canonical.py") & {"dpopt", "solvers"}
