"""Every code block of the README and of the documentation site runs as written, and the numbers
it shows are the numbers it prints.

Each Markdown file is one test: its blocks run in order in one temporary folder (a block may use
a file an earlier block wrote, as a reader following the page would).

- A ```python block is executed in the page's namespace (the blocks of a page share one, as in
  the session of a reader who runs them in order), its standard output captured. When the
  block guards its work with ``if __name__ == "__main__":`` (Dask examples: worker processes
  re-import the script) it is saved as a script and run with the interpreter, as a user would.
  An untagged block right after it (nothing, or a word such as "prints", between the two) is
  its expected output.
- A ```bash block runs its ``dpopt`` commands (in-process, as the console script does) and its
  ``printf`` lines; a ``# comment`` after a command (or on the next line) states what it prints,
  and every number in that comment must be in the command's output. Any other command (``make``,
  ``pip``, a cluster address) cannot run here: its block must be marked.
- An untagged block whose first line starts with ``$ dpopt`` is a transcript: the command runs
  and its output is compared with the lines below it.
- Expected and printed outputs are compared token by token; numbers must agree to the digits
  shown (a stale number fails), other words exactly, spacing ignored.

Markers, on the line before a block: ``<!-- no-test: REASON -->`` shows the block without running
it (the reason is required and reported as the skip reason); ``<!-- slow: REASON -->`` runs it
only with ``-m slow``.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap
import types
import warnings
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_FENCE = re.compile(r"(?:^[ \t]*<!--\s*(no-test|slow)(?::\s*(.*?))?\s*-->[ \t]*\n)?"
                    r"^([ \t]*)```(\w*)\n(.*?)^[ \t]*```", flags=re.S | re.M)
#: the prose allowed between a python block and its output block
_OUTPUT_WORDS = {"", "prints", "It prints", "which prints", "Output", "output"}
_OUTPUT_LEAD = re.compile(r"^(?:It |which )?prints\b.{0,300}$", re.S)
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file."""

    lang: str
    code: str
    marker: str | None      # "no-test", "slow" or None
    reason: str
    line: int
    expected: str | None    # the output block that follows a python block


def blocks(path: pathlib.Path) -> list[Block]:
    """The fenced blocks of ``path`` in order; output blocks are attached to their python block."""
    text = path.read_text(encoding="utf-8")
    found = list(_FENCE.finditer(text))
    out: list[Block] = []
    skip_next = False
    for n, m in enumerate(found):
        if skip_next:
            skip_next = False
            continue
        marker, reason, lang = m.group(1), m.group(2) or "", m.group(4)
        code = textwrap.dedent(m.group(5))  # a block inside a list item is indented
        expected = None
        if lang == "python" and n + 1 < len(found):
            nxt = found[n + 1]
            between = text[m.end():nxt.start()]
            words = " ".join(between.split()).rstrip(":")
            nxt_code = textwrap.dedent(nxt.group(5))
            if nxt.group(4) == "" and (words in _OUTPUT_WORDS or _OUTPUT_LEAD.match(words)) \
                    and nxt.group(1) is None and not nxt_code.startswith("$ "):
                expected, skip_next = nxt_code, True
        if marker == "no-test" and not reason:
            reason = "marked no-test"
        out.append(Block(lang, code, marker, reason, text.count("\n", 0, m.start()) + 1,
                         expected))
    return out


def python_blocks(path: pathlib.Path) -> list[tuple[str, bool]]:
    """The (code, skip) pairs of the ```python blocks of a Markdown file, in order."""
    return [(b.code, b.marker == "no-test") for b in blocks(path) if b.lang == "python"]


# ------------------------------------------------------------------------ comparing outputs
def _tokens(text: str) -> list[str]:
    return re.findall(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[^\s\d.+-]+|[.+-]", text)


def _digits_agree(shown: str, printed: str) -> bool:
    """``printed`` rounds to ``shown`` (to the digits shown)."""
    a, b = float(shown), float(printed)
    if a == b:
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    mantissa = re.split(r"[eE]", shown)[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(re.split(r"[eE]", shown)[1]) if re.search(r"[eE]", shown) else 0
    half_unit = 0.5 * 10.0 ** (exponent - decimals)
    return abs(a - b) <= half_unit * (1 + 1e-9) + 1e-15 * abs(a)


def same_output(expected: str, printed: str) -> str | None:
    """None when ``printed`` shows ``expected``; otherwise the first difference, in words."""
    want, got = _tokens(expected), _tokens(printed)
    for k, (w, g) in enumerate(zip(want, got, strict=False)):
        if _NUMBER.fullmatch(w) and _NUMBER.fullmatch(g):
            if not _digits_agree(w, g):
                return f"token {k}: the page shows {w}, the code prints {g}"
        elif w != g:
            return f"token {k}: the page shows {w!r}, the code prints {g!r}"
    if len(want) != len(got):
        return f"the page shows {len(want)} tokens, the code prints {len(got)}: {printed!r}"
    return None


def numbers_shown(comment: str, printed: str) -> list[str]:
    """The numbers of ``comment`` that ``printed`` does not contain (to the digits shown; a
    number written ``1.7989...`` is a truncation: the printed value may go on)."""
    have = _NUMBER.findall(printed)
    missing = []
    for m in re.finditer(r"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)(\.\.+|…)?", comment):
        shown, truncated = m.group(1).rstrip("."), bool(m.group(2))
        if truncated:
            ok = any(h.lstrip("+-").startswith(shown.lstrip("+-")) for h in have)
        else:
            ok = any(_digits_agree(shown, h) for h in have)
        if not ok:
            missing.append(m.group(0))
    return missing


# ------------------------------------------------------------------------------- running
def _run_python(block: Block, name: str, tmp: pathlib.Path, module: types.ModuleType) -> str:
    if "dpopt-demo.json" in block.code and not (tmp / "dpopt-demo.json").exists():
        _run_dpopt(["demo", "-q"], tmp)  # the example reads the demo's output: make it first
    if 'if __name__ == "__main__":' in block.code:
        script = tmp / f"example_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
        done = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"{name} exited {done.returncode}: {done.stderr[-2000:]}"
        return done.stdout
    sys.modules["__docs__"] = module  # a real module: dataclasses in examples need one
    out = io.StringIO()
    said = _print_comments(block.code)
    by_line: dict[int, str] = {}

    def doc_print(*args: object, **kwargs: object) -> None:
        frame = sys._getframe(1)
        line = frame.f_lineno if frame.f_code.co_filename == name else -1
        text = io.StringIO()
        print(*args, **kwargs, file=text)  # type: ignore[call-overload]
        by_line[line] = by_line.get(line, "") + text.getvalue()
        out.write(text.getvalue())

    module.__dict__["print"] = doc_print
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(out):
            warnings.simplefilter("ignore")
            exec(compile(block.code, name, "exec"), module.__dict__)
    finally:
        sys.modules.pop("__docs__", None)
        with contextlib.suppress(ImportError):
            import matplotlib.pyplot as plt

            plt.close("all")
    for line, comment in said.items():
        missing = numbers_shown(comment, by_line.get(line, ""))
        assert not missing, (f"{name}, line {line}: the comment shows {missing}, the print "
                             f"gives {by_line.get(line, '')!r}")
    return out.getvalue()


def _print_comments(code: str) -> dict[int, str]:
    """Line number -> the trailing comment of each one-line ``print(...)  # ...`` statement."""
    found: dict[int, str] = {}
    for number, line in enumerate(code.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("print(") and "#" in stripped:
            code_part, mark, comment = _split_comment(stripped)
            if mark and code_part.rstrip().endswith(")") and _NUMBER.search(comment):
                found[number] = comment
    return found


def _commands(code: str) -> list[tuple[str, str]]:
    """(command, what its comments say) for each logical line of a shell block."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in code.splitlines():
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if result:
                cmd, said = result[-1]
                result[-1] = (cmd, f"{said} {stripped[1:]}")
            continue
        cmd, _, comment = _split_comment(stripped)
        result.append((cmd.strip(), comment))
    return result


def _split_comment(line: str) -> tuple[str, str, str]:
    """Split a shell line at its first unquoted ``#``."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], "#", line[i + 1:]
    return line, "", ""


def _run_dpopt(argv: list[str], tmp: pathlib.Path, *, stderr: bool = True) -> tuple[int, str]:
    from dpopt.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(argv)
    return code, out.getvalue() + (err.getvalue() if stderr else "")


def _run_shell(block: Block, name: str, tmp: pathlib.Path) -> None:
    for cmd, comment in _commands(block.code):
        words = shlex.split(cmd)
        if words[0] in ("dpopt", ".venv/bin/dpopt"):
            if any(w.startswith("tcp://") for w in words):
                pytest.fail(f"{name}: {cmd!r} needs a cluster; mark the block no-test")
            code, printed = _run_dpopt(words[1:], tmp)
            assert code == 0, f"{name}: {cmd!r} exited {code}: {printed[-1500:]}"
            missing = numbers_shown(comment, printed)
            assert not missing, (f"{name}: {cmd!r}: the comment shows {missing}, not in the "
                                 f"output:\n{printed}")
        elif words[0] == "printf":
            subprocess.run(cmd, shell=True, cwd=tmp, check=True, timeout=30)
        else:
            pytest.fail(f"{name}: {cmd!r} cannot run in the doc test; mark the block "
                        "<!-- no-test: REASON -->")


def _run_transcript(block: Block, name: str, tmp: pathlib.Path) -> None:
    first, _, rest = block.code.partition("\n")
    words = shlex.split(first[2:])
    assert words[0] == "dpopt", f"{name}: a transcript runs dpopt commands only"
    code, printed = _run_dpopt(words[1:], tmp, stderr=False)  # a transcript shows stdout
    assert code == 0, f"{name}: exited {code}: {printed[-1500:]}"
    if rest.strip():
        diff = same_output(rest, printed)
        assert diff is None, f"{name}: {diff}\nprinted:\n{printed}"


def run_file(path: pathlib.Path, tmp: pathlib.Path, *, slow: bool) -> list[str]:
    """Run every block of ``path`` in ``tmp``; return the skip reasons of blocks not run."""
    skipped: list[str] = []
    module = types.ModuleType("__docs__")  # one session per page, as a reader runs it
    for block in blocks(path):
        name = f"{path.relative_to(ROOT)}:{block.line} ({block.lang or 'text'} block)"
        if block.marker == "no-test" or (block.marker == "slow" and not slow):
            skipped.append(f"{name}: {block.reason}")
            continue
        if block.lang == "python":
            printed = _run_python(block, name, tmp, module)
            if block.expected is not None:
                diff = same_output(block.expected, printed)
                assert diff is None, f"{name}: {diff}\nprinted:\n{printed}"
        elif block.lang in ("bash", "sh", "console"):
            _run_shell(block, name, tmp)
        elif block.lang == "" and block.code.startswith("$ dpopt"):
            _run_transcript(block, name, tmp)
    return skipped


FILES = [README, *sorted(DOCS.rglob("*.md"))]


def test_readme_has_examples() -> None:
    assert len(python_blocks(README)) >= 1
    assert sum(len(blocks(p)) for p in FILES) >= 40


def test_markers_and_output_blocks_are_recognised(tmp_path: pathlib.Path) -> None:
    text = ("a\n<!-- no-test -->\n```python\nraise SystemExit\n```\n```python\nprint(1.25)\n```\n"
            "\n```\n1.25\n```\n<!-- no-test: needs a cluster -->\n```bash\ndpopt x\n```\n"
            "<!-- slow: a minute -->\n```bash\nmake figures\n```\n")
    probe = tmp_path / "probe.md"
    probe.write_text(text, encoding="utf-8")
    found = blocks(probe)
    assert python_blocks(probe) == [("raise SystemExit\n", True), ("print(1.25)\n", False)]
    assert found[1].expected == "1.25\n" and len(found) == 4
    assert [(b.marker, b.reason) for b in found] == [
        ("no-test", "marked no-test"), (None, ""), ("no-test", "needs a cluster"),
        ("slow", "a minute")]


def test_a_stale_number_fails_the_comparison() -> None:
    assert same_output("mu = 0.573601\n", "mu = 0.57360149 (approximate)") is not None
    assert same_output("mu = 0.573601 (approximate)", "mu =   0.5736014  (approximate)") is None
    assert "0.573591" in (same_output("0.573591", "0.573601") or "")
    assert same_output("[[44.77 -7.49]]", "[[ 44.774 -7.491]]") is None
    assert same_output("1e-05 inf", "1e-5 inf") is None
    assert numbers_shown("q = 1, ε(1e-5) = 4.37718", "q = 1 ... δ=1e-05: ε=4.37718") == []
    assert numbers_shown("μ ≈ 0.573591", "μ = 0.573601") == ["0.573591"]
    assert numbers_shown("1.7989...", "1.79898") == [] and numbers_shown("1.7990..", "1.79898")
    assert _print_comments("x = 1\nprint(x)   # 1.25, two\nprint(y)  # words\n") == {
        2: " 1.25, two"}
    assert _commands("dpopt a \\\n  --b 1   # shows 2\n      # and 3\nprintf 'x#y' > f\n") == [
        ("dpopt a    --b 1", " shows 2  and 3"), ("printf 'x#y' > f", "")]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_markdown_file_runs_as_written(path: pathlib.Path, tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       request: pytest.FixtureRequest) -> None:
    if not blocks(path):
        pytest.skip("no code blocks")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    slow = "slow" in (request.config.getoption("-m") or "") and \
        "not slow" not in (request.config.getoption("-m") or "")
    skipped = run_file(path, tmp_path, slow=slow)
    if skipped and len(skipped) == len(blocks(path)):
        pytest.skip("; ".join(skipped))
