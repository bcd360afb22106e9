"""Open the built documentation site in headless Chromium and check that it renders.

Serves ``SITE`` (default ``site/``, as built by ``make docs``) on a free localhost port, loads
pages in a headless Chromium with a fresh profile, and checks the rendered DOM:

- the getting-started page shows its title, the set-up commands and the design picture;
- every API reference page renders documented objects (the reference is not empty);
- every notebook page carries its figures (inline PNG images);
- the theory page and the command-line guide render;
- opened from ``file://`` (no server, as a user opens ``site/index.html``): the formulas of the
  API reference and the theory page are typeset by the site's own MathJax (every ``arithmatex``
  element becomes a MathJax SVG, none reports an error), and the search box finds pages;
- no page loads a script, style or font from another host (the site works offline);
- no page carries team-internal references (checked in every HTML file of the site).

The ``file://`` checks drive Chromium through its DevTools protocol on a pipe
(``--remote-debugging-pipe``), so they need nothing beyond the standard library.

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
import json
import os
import re
import select
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.request import url2pathname

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
OTHER_PAGES = (("theory.html", "The covariance program"), ("guide/cli.html", "JSON output"),
               ("guide/covariance-design.html", "Design.plot()"))
#: pages whose formulas must be typeset when opened from file://, with the least formula count
MATH_PAGES = (("reference/accounting.html", 50), ("reference/covariance.html", 50),
              ("theory.html", 3))
#: a search from file:// and a page it must find among its results
SEARCH = ("mahalanobis", "guide/accounting.html")
#: an element loading from another host (a CDN): the site must not need one
_REMOTE = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)


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


class DevTools:
    """A headless Chromium driven through the DevTools protocol on a pipe.

    Chromium started with ``--remote-debugging-pipe`` reads commands from file descriptor 3 and
    writes replies to 4, one JSON message each, terminated by a NUL byte.
    """

    def __init__(self, chromium: str, profile: Path) -> None:
        to_chromium, self._writer = os.pipe()
        self._reader, from_chromium = os.pipe()

        def wire() -> None:  # in the child, before exec: the pipes become fds 3 and 4
            os.dup2(to_chromium, 3)
            os.dup2(from_chromium, 4)

        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--remote-debugging-pipe",
               f"--user-data-dir={profile}", "about:blank"]
        self._proc = subprocess.Popen(cmd, pass_fds=(3, 4), preexec_fn=wire,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chromium)
        os.close(from_chromium)
        self._buffer = b""
        self._id = 0
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget",
                                  {"targetId": target, "flatten": True})["sessionId"]

    def send(self, method: str, params: dict[str, object] | None = None, *,
             session: bool = False, timeout: float = 60.0) -> dict[str, object]:
        """Send one command and return its result (raise on an error reply or a timeout)."""
        self._id += 1
        message: dict[str, object] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._writer, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"chromium: {method}: {reply['error']}")
                    result: dict[str, object] = reply.get("result", {})
                    return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"chromium did not answer {method} within {timeout:g} s")
            ready, _, _ = select.select([self._reader], [], [], left)
            if ready:
                chunk = os.read(self._reader, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buffer += chunk

    def open(self, url: str) -> None:
        """Navigate the page to ``url``."""
        self.send("Page.navigate", {"url": url}, session=True)

    def evaluate(self, expression: str) -> object:
        """The JSON value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True}, session=True)
        value = result.get("result", {})
        return value.get("value") if isinstance(value, dict) else None

    def wait_for(self, expression: str, timeout: float = 30.0) -> object:
        """Poll ``expression`` until it is truthy; return its last value."""
        deadline = time.monotonic() + timeout
        value = self.evaluate(expression)
        while not value and time.monotonic() < deadline:
            time.sleep(0.2)
            value = self.evaluate(expression)
        return value

    def close(self) -> None:
        """Close the browser (kill it if it does not exit)."""
        try:
            self.send("Browser.close", timeout=5)
            self._proc.wait(timeout=10)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        finally:
            os.close(self._writer)
            os.close(self._reader)


_MATH_STATE = ("(() => { const m = document.querySelectorAll('.arithmatex').length;"
               " const done = document.querySelectorAll('.arithmatex mjx-container').length;"
               " const bad = document.querySelectorAll('mjx-merror, [data-mjx-error]').length;"
               " return document.readyState === 'complete' && done === m"
               " ? {formulas: m, typeset: done, errors: bad} : null; })()")
_SEARCH_STATE = ("(() => { const items = [...document.querySelectorAll("
                 "'.md-search-result__item a')].map(a => a.getAttribute('href'));"
                 " return items.length ? items : null; })()")


def check_offline(site: Path, chromium: str, profile: Path) -> list[str]:
    """Math and search on the site opened from ``file://``; return the failures."""
    failures: list[str] = []
    root = site.resolve().as_uri() + "/"
    browser = DevTools(chromium, profile)
    try:
        for path, least in MATH_PAGES:
            browser.open(root + path)
            state = browser.wait_for(_MATH_STATE, timeout=60.0)
            if not isinstance(state, dict):
                failures.append(f"{path} (file://): formulas not typeset by MathJax")
            elif state["formulas"] < least or state["errors"]:
                failures.append(f"{path} (file://): {state['typeset']} formulas typeset "
                                f"(expected >= {least}), {state['errors']} MathJax errors")
        query, expected = SEARCH
        browser.open(root + f"index.html?q={query}")
        hits = browser.wait_for(_SEARCH_STATE, timeout=60.0)
        if not isinstance(hits, list):
            failures.append(f"search (file://): no result for {query!r}")
        else:
            pages = {str(h).split("#")[0].split("?")[0] for h in hits}
            if root + expected not in pages:
                failures.append(f"search (file://): {query!r} does not find {expected}: "
                                f"{sorted(pages)[:5]}")
            missing = [p for p in pages
                       if not Path(url2pathname(p.removeprefix("file://"))).is_file()]
            if missing:
                failures.append(f"search (file://): results link to missing pages {missing[:3]}")
    finally:
        browser.close()
    return failures


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
        remote = _REMOTE.findall(html.read_text(encoding="utf-8", errors="replace"))
        if remote:
            failures.append(f"{html.relative_to(site)}: loads from another host {remote[:2]}")
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
            dom = page(f"reference/{name}.html")
            objects = len(re.findall(r'class="doc doc-object doc-', dom))
            if objects < 2:
                failures.append(f"reference/{name}: {objects} documented objects (expected >= 2)")
        for name in notebooks:
            dom = page(f"notebooks/{name}.html")
            images = len(re.findall(r"<img[^>]+src=\"data:image/png", dom))
            if images < 1:
                failures.append(f"notebooks/{name}: no figure rendered")
        for path, needle in others:
            if needle not in page(path):
                failures.append(f"{path}: {needle!r} not rendered")
        if shot is not None:
            screenshot(chromium, profile, base, shot)
        failures.extend(check_offline(site, chromium, Path(tmp) / "devtools"))
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
