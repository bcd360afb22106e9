"""Open the built documentation site in headless Chromium and check that it renders.

Serves ``SITE`` (default ``site/``, as built by ``make docs``) on a free localhost port, loads
pages in a headless Chromium with a fresh profile, and checks the rendered DOM:

- the getting-started page shows its title, the set-up commands and the design picture;
- every API reference page renders documented objects (the reference is not empty);
- every notebook page carries its figures (inline PNG images);
- the theory page and the command-line guide render;
- no page carries team-internal references (checked in every HTML file of the site).

It also saves a screenshot of the front page (``--screenshot``, default
``SITE/../docs-check.png``). Exit status 0 when every check passes, 1 otherwise, 2 when
Chromium or the site is missing.

Usage::

    python scripts/docs_check.py [SITE] [--chromium PATH] [--screenshot FILE]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--virtual-time-budget=2000",
)

#: API reference pages; each must show at least two documented objects
REFERENCE_PAGES = ("accounting", "covariance", "pufferfish", "solvers", "certificates", "data",
                   "errors")
NOTEBOOK_PAGES = ("denoiser_covariance", "gdp_tour", "rpp_experiments")
#: further pages and a text each must show
OTHER_PAGES = (("theory/", "The covariance program"), ("guide/cli/", "JSON output"),
               ("guide/covariance-design/", "Design.plot()"))


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium executable: ``explicit``, /usr/bin/chromium, or one on PATH."""
    for candidate in (explicit, "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 and a free port for the duration of the block."""
    handler = functools.partial(_Quiet, directory=str(site))
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()


def _chromium(chromium: str, profile: Path, *args: str, timeout: float = 120.0) -> str:
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-1500:]}")
    return done.stdout


def dump_dom(chromium: str, profile: Path, url: str) -> str:
    """The DOM of ``url`` after its scripts ran, as serialised by ``--dump-dom``."""
    return _chromium(chromium, profile, "--dump-dom", url)


def screenshot(chromium: str, profile: Path, url: str, path: Path) -> None:
    """Save a 1280 x 1000 screenshot of ``url`` to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _chromium(chromium, profile, f"--screenshot={path}", "--window-size=1280,1000", url)
    if not path.is_file() or path.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot to {path}")


def check_site(site: Path, chromium: str, shot: Path | None = None, *,
               quick: bool = False) -> list[str]:
    """Run the checks; return the list of failures (empty when the site renders).

    ``quick`` checks one page of each kind (front, two reference pages, one notebook) instead of
    every page: each page costs one Chromium start, several seconds on a loaded machine.
    """
    failures: list[str] = []
    internal = re.compile(r"MATH\.md|§\s?\d|\b[Ss]eed 00\d")
    for html in sorted(site.rglob("*.html")):
        hits = internal.findall(html.read_text(encoding="utf-8", errors="replace"))
        if hits:
            failures.append(f"{html.relative_to(site)}: team-internal references {hits[:3]}")
    reference = REFERENCE_PAGES[:2] if quick else REFERENCE_PAGES
    notebooks = NOTEBOOK_PAGES[:1] if quick else NOTEBOOK_PAGES
    others = OTHER_PAGES[:0] if quick else OTHER_PAGES
    with tempfile.TemporaryDirectory(prefix="dpopt-chromium-") as tmp, serve(site) as base:
        profile = Path(tmp) / "profile"

        def page(path: str) -> str:
            return dump_dom(chromium, profile, base + path)

        front = page("")
        for needle in ("Getting started", "make run", ".venv/bin/dpopt", "assets/design.png"):
            if needle not in front:
                failures.append(f"front page: {needle!r} not rendered")
        for name in reference:
            dom = page(f"reference/{name}/")
            objects = len(re.findall(r'class="doc doc-object doc-', dom))
            if objects < 2:
                failures.append(f"reference/{name}: {objects} documented objects (expected >= 2)")
        for name in notebooks:
            dom = page(f"notebooks/{name}/")
            images = len(re.findall(r"<img[^>]+src=\"data:image/png", dom))
            if images < 1:
                failures.append(f"notebooks/{name}: no figure rendered")
        for path, needle in others:
            if needle not in page(path):
                failures.append(f"{path}: {needle!r} not rendered")
        if shot is not None:
            screenshot(chromium, profile, base, shot)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "site")
    parser.add_argument("--chromium", help="path of the Chromium executable")
    parser.add_argument("--screenshot", type=Path, help="where to save the front page's picture")
    args = parser.parse_args(argv)
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("docs-check: Chromium not found (Debian: apt-get install chromium)",
              file=sys.stderr)
        return 2
    if not (args.site / "index.html").is_file():
        print(f"docs-check: no built site at {args.site} (run 'make docs')", file=sys.stderr)
        return 2
    shot = args.screenshot or args.site.resolve().parent / "docs-check.png"
    failures = check_site(args.site, chromium, shot)
    for failure in failures:
        print(f"FAILED {failure}")
    if failures:
        return 1
    print(f"docs-check: every page renders; screenshot of the front page: {shot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
