"""The documentation site: its configuration, and (with Chromium) the rendered pages.

The browser test serves the built site (``site/``, from ``make docs``; built here into a
temporary folder when absent) on localhost, opens it in headless Chromium and checks that the
pages render, the API reference is not empty and the notebooks carry their figures. It runs only
where ``/usr/bin/chromium`` exists (Debian package ``chromium``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"


def _load(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def _nav_paths(items: list) -> list[str]:  # type: ignore[type-arg]
    out: list[str] = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out.extend(_nav_paths(value) if isinstance(value, list) else [value])
    return out


def test_nav_hook_drops_only_missing_pages(tmp_path: Path) -> None:
    hooks = _load("mkdocs_hooks")
    (tmp_path / "guide").mkdir()
    (tmp_path / "index.md").write_text("# x\n")
    (tmp_path / "guide" / "a.md").write_text("# a\n")
    nav = [{"Home": "index.md"},
           {"Guide": [{"A": "guide/a.md"}, {"B": "guide/b.md"}]},
           {"Later": [{"C": "guide/c.md"}]},
           {"Out": "https://example.org/x.md"}]
    config = hooks.on_config({"nav": nav, "docs_dir": str(tmp_path)})
    assert config["nav"] == [{"Home": "index.md"}, {"Guide": [{"A": "guide/a.md"}]},
                             {"Out": "https://example.org/x.md"}]


def test_every_page_of_this_branch_is_in_the_nav() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = set(_nav_paths(config["nav"]))
    docs = ROOT / "docs"
    pages = {p.relative_to(docs).as_posix() for p in docs.rglob("*")
             if p.suffix in {".md", ".ipynb"}}
    assert pages <= listed, f"pages missing from mkdocs.yml nav: {sorted(pages - listed)}"


def test_executed_notebooks_match_the_sources_and_have_figures() -> None:
    import json

    for source in sorted((ROOT / "notebooks").glob("*.ipynb")):
        executed = ROOT / "docs" / "notebooks" / source.name
        assert executed.is_file(), f"run 'make notebooks': {executed} is missing"
        src = json.loads(source.read_text())
        run = json.loads(executed.read_text())
        assert ["".join(c["source"]) for c in src["cells"]] == \
            ["".join(c["source"]) for c in run["cells"]], f"{source.name}: re-run 'make notebooks'"
        outputs = [o for c in run["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
        assert not [o for o in outputs if o["output_type"] == "error"], source.name
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{source.name}: no figure"


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM),
                    reason="needs headless Chromium at /usr/bin/chromium "
                    "(apt-get install chromium)")
def test_site_renders_in_chromium(tmp_path: Path) -> None:
    site = ROOT / "site"
    if not (site / "index.html").is_file():
        mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
        pytest.importorskip("mkdocs")
        site = tmp_path / "site"
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
        subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                       check=True, env=env, capture_output=True, timeout=600)
    check = _load("docs_check")
    shot = tmp_path / "front.png"
    failures = check.check_site(site, CHROMIUM, shot, quick=True)
    assert failures == []
    assert shot.stat().st_size > 10_000   # a real picture, not a blank page


#: team-internal vocabulary that must never reach a user (README, docs, notebooks)
INTERNAL = re.compile(r"MATH\.md|§\s?\d|\b[Ss]eed 00\d")


def _user_facing_files() -> list[Path]:
    docs = ROOT / "docs"
    return [ROOT / "README.md", *sorted(docs.rglob("*.md")), *sorted(docs.rglob("*.ipynb")),
            *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def test_no_internal_references_in_user_facing_text() -> None:
    found = {str(p.relative_to(ROOT)): INTERNAL.findall(p.read_text(encoding="utf-8"))
             for p in _user_facing_files()}
    assert {k: v for k, v in found.items() if v} == {}


def test_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 12 * 1024
    assert "make run" in text and "make test" in text and ".venv/bin/dpopt" in text
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert "docs/assets/design.png" in local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def test_docstrings_render_as_markdown() -> None:
    pytest.importorskip("griffe")
    rewrite = _load("griffe_docstrings").rewrite
    text = ("Given :math:`s_j` and :func:`~certificates.covariance.check` it solves\n"
            "(Santambrogio, Section 2.2).\n"
            "\n.. math::\n\n    \\min_\\Sigma x\n\n"
            ".. math:: a = b\n          + c\n\nExample\n-------\n>>> 1\n1\n")
    out = rewrite(text)
    assert "\\(s_j\\)" in out and "`check`" in out and ":math:" not in out and ":func:" not in out
    assert "$$\n\\min_\\Sigma x\n$$" in out and "$$\na = b\n+ c\n$$" in out
    assert "Examples\n--------\n>>> 1" in out and ".. math" not in out
    assert "(Santambrogio, Section 2.2)" in out  # citations render as written


def test_docstring_math_stays_in_its_list_item() -> None:
    """Math in a reST list item (3-space continuation) stays inside the item in Markdown."""
    markdown = pytest.importorskip("markdown")
    rewrite = _load("griffe_docstrings").rewrite
    text = ("1. First, with :math:`a\n   + b`.\n\n   .. math:: x_1 = y_1\n\n"
            "   Still the first item.\n2. Second.\n")
    html = markdown.markdown(rewrite(text), extensions=["pymdownx.arithmatex"],
                             extension_configs={"pymdownx.arithmatex": {"generic": True}})
    first = html.split("<li>")[1]
    assert "\\(a + b\\)" in first and '<div class="arithmatex">' in first
    assert "Still the first item." in first and "Second." not in first
    assert html.count("<li>") == 2


def test_site_serves_its_own_mathjax_and_search() -> None:
    """MathJax comes from an installed package, copied in by the hook; nothing from a CDN."""
    yaml = pytest.importorskip("yaml")
    hooks = _load("mkdocs_hooks")
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    assert hooks.MATHJAX_DEST in config["extra_javascript"]
    assert not [s for s in config["extra_javascript"] if "://" in s]
    assert any("offline" in p for p in config["plugins"])
    assert [p for p in config["extra"]["polyfills"] if "iframe-worker" in p] == \
        ["javascripts/iframe-worker.js"]
    for script in ("javascripts/mathjax-config.js", "javascripts/iframe-worker.js"):
        assert (ROOT / "docs" / script).is_file()
    source = hooks.mathjax_source()
    assert source.stat().st_size > 1_000_000   # the full MathJax bundle, not a stub
    assert "django-static-mathjax" in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("package", ["dpopt", "solvers", "certificates"])
def test_docstrings_cite_no_team_notes(package: str) -> None:
    """The API reference renders the docstrings as written: none may cite the team's notes."""
    found = {str(p.relative_to(ROOT)): INTERNAL.findall(p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / package).rglob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}
