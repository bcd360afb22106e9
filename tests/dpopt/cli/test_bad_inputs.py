"""Every command, fed bad input, answers in the user's words.

A table of bad inputs per command (negative, zero, NaN, infinite and non-numeric values,
missing, empty and malformed files, wrong shapes, missing columns): each must exit with status 2
(a usage error; 1 for ``verify`` of a file that does not hold) and print one ``dpopt: error:``
line that names the flag (or file) the user gave and the value, never a traceback, an internal
error or an object dump (``array(...)``, ``<... object at 0x...>``).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

from dpopt.cli import main

GRID = "grid:lo=0,hi=1,n=3,d=2"
#: what a message must never contain: tracebacks, internal errors, reprs of objects and arrays
DUMPS = re.compile(r"Traceback|internal error|array\(|object at 0x|<class |FinitePoints\(|Grid\(")


def _files(tmp: Path) -> dict[str, Path]:
    files = {
        "empty.csv": "",
        "blank.csv": "\n# a comment only\n\n",
        "text.csv": "a,b\nc,d\n",
        "nan.csv": "0.1,0.2\nnan,0.3\n",
        "ragged.csv": "0.1,0.2\n0.3\n",
        "three.csv": "0.1,0.2,0.3\n0.4,0.5,0.6\n",
        "w3.csv": "1,0,0\n0,1,0\n0,0,1\n",
        "wrect.csv": "1,0\n0,1\n1,1\n",
        "puff.csv": "group,value\na,0\na,1\nb,1\nb,2\n",
        "puffnan.csv": "group,value\na,0\na,\nb,1\nb,2\n",
        "notjson.json": "{not json",
        "emptyjson.json": "",
        "otherjson.json": json.dumps({"format": "someone-else/1"}),
        "list.json": "[1, 2, 3]",
    }
    out = {}
    for name, text in files.items():
        (tmp / name).write_text(text, encoding="utf-8")
        out[name] = tmp / name
    return out


def _table(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(label, argv, a word the message must contain: the user's flag, file or value)."""
    f = _files(tmp)
    out = str(tmp / "out.json")
    design = ["design", "--domain", GRID, "--query", "0.5,0.5", "--denoiser-sigma", "0.5",
              "--budget", "gdp:mu=1", "-o", out, "-q"]

    def swap(argv: list[str], flag: str, value: str) -> list[str]:
        i = argv.index(flag)
        return [*argv[:i + 1], value, *argv[i + 2:]]

    rows: list[tuple[str, list[str], str]] = []
    # ---- design: every numeric flag, the domain, the query, the budget and the weight
    for v in ("0", "-1", "nan", "inf", "abc", "1e-400"):
        rows.append((f"design sigma {v}", swap(design, "--denoiser-sigma", v), "sigma"))
    for v in ("0.5", "0.5,nan", "0.5,inf", "x,y", "", "0.5,0.5,0.5"):
        rows.append((f"design query {v!r}", swap(design, "--query", v), "query"))
    for v in ("grid:lo=0,hi=1,n=0,d=2", "grid:lo=1,hi=0", "grid:lo=nan", "ball:r=1", "",
              "grid:lo=0,,hi=1", "grid:n=3,d=-2", str(f["empty.csv"]), str(f["text.csv"]),
              str(f["nan.csv"]), str(f["ragged.csv"]), str(f["three.csv"]),
              str(tmp / "missing.csv"), str(tmp)):
        word = {"three.csv": "query"}.get(Path(v).name, Path(v).name) if v.startswith(
            str(tmp)) else "domain"  # three columns: the 2-D query no longer fits
        rows.append((f"design domain {Path(v).name or v!r}", swap(design, "--domain", v), word))
    for v in ("approx:epsilon=-1,delta=1e-6", "approx:epsilon=1,delta=2", "gdp:mu=nan",
              "gdp:mu=inf", "gdp:mu=0", "zcdp:rho=abc", "rdp:alpha=1,epsilon=1", "nope:x=1", "",
              "approx:epsilon=1,,delta=1e-6", "gdp"):
        rows.append((f"design budget {v!r}", swap(design, "--budget", v), "budget"))
    for name in ("w3.csv", "wrect.csv", "nan.csv", "empty.csv"):
        rows.append((f"design weight {name}", [*design, "--weight", str(f[name])], name))
    rows.append(("design weight missing", [*design, "--weight", str(tmp / "nowhere.npy")],
                 "nowhere.npy"))
    for v in ("-1", "nan", "inf", "abc"):
        rows.append((f"design noise floor {v}", [*design, "--noise-floor", v], "noise"))
    rows.append(("design solver", [*design, "--solver", "nope"], "solver"))
    rows.append(("design output dir", swap(design, "-o", str(tmp / "no" / "such.json")), "no"))
    # ---- demo
    demo = ["demo", "--no-save", "-q"]
    for flag in ("--epsilon", "--delta", "--denoiser-sigma"):  # (0, delta)-DP is a guarantee
        for v in ("0", "-1", "nan", "inf", "abc") if flag != "--epsilon" else ("-1", "nan", "x"):
            rows.append((f"demo {flag} {v}", [*demo, flag, v], flag.strip("-").split("-")[-1]))
    rows.append(("demo delta 1", [*demo, "--delta", "1"], "delta"))
    # ---- design-run
    run = ["design-run", "--steps", "2", "--epsilon", "1", "--delta", "1e-5", "-q"]
    for flag, values in (("--steps", ("0", "-3", "abc", "1.5")),
                         ("--epsilon", ("-1", "nan", "inf")),
                         ("--delta", ("0", "1", "nan", "-1e-5")),
                         ("--sigma-max", ("0", "-1", "nan")), ("--sigma-min", ("-1", "nan")),
                         ("--data-size", ("0", "-1")), ("--noise-floor", ("-1", "nan")),
                         ("--domain", ("grid:lo=0,hi=1,n=1", "box:lo=0,hi=1,d=2"))):
        for v in values:
            argv = swap(run, flag, v) if flag in run else [*run, flag, v]
            rows.append((f"design-run {flag} {v}", argv, flag.strip("-").split("-")[-1]))
    rows.append(("design-run sigma order", [*run, "--sigma-min", "2", "--sigma-max", "1"],
                 "sigma"))
    # ---- sample
    sample = ["sample", "--dataset", "mixture", "--domain", "grid:lo=0,hi=1,n=4,d=2",
              "--budget", "gdp:mu=1", "--steps", "2", "--samples", "2", "-o",
              str(tmp / "run.json"), "-q"]
    for flag, values in (("--steps", ("0", "-1", "abc")), ("--samples", ("0", "-2", "x")),
                         ("--budget", ("gdp:mu=-1", "approx:epsilon=1", "")),
                         ("--split", ("a,b", "1,2,3", "1,-1", "nan,1", "0,0")),
                         ("--domain", ("grid:lo=0,hi=1,n=1,d=2", str(f["three.csv"])))):
        for v in values:
            argv = swap(sample, flag, v) if flag in sample else [*sample, flag, v]
            word = flag.strip("-") if not v.startswith(str(tmp)) else Path(v).name
            rows.append((f"sample {flag} {v!r}", argv, word))
    data = ["sample", "--domain", "grid:lo=0,hi=1,n=4,d=2", "--budget", "gdp:mu=1", "--steps",
            "2", "--samples", "2", "-o", str(tmp / "run2.json"), "-q", "--data"]
    for name in ("empty.csv", "blank.csv", "text.csv", "nan.csv", "ragged.csv", "three.csv"):
        rows.append((f"sample data {name}", [*data, str(f[name])], name))
    rows.append(("sample data missing", [*data, str(tmp / "gone.csv")], "gone.csv"))
    # ---- verify
    for name in ("empty.csv", "notjson.json", "emptyjson.json", "otherjson.json", "list.json"):
        rows.append((f"verify {name}", ["verify", str(f[name])], name))
    rows.append(("verify missing", ["verify", str(tmp / "absent.json")], "absent.json"))
    rows.append(("verify directory", ["verify", str(tmp)], tmp.name))
    # ---- account
    for v in ("gdp:mu=-1", "rdp:alpha=0.5,epsilon=1", "zcdp:rho=nan", "approx:epsilon=inf",
              "", "hello"):
        rows.append((f"convert {v!r}", ["account", "convert", v], "budget"))
    for flag, v in (("--delta", "2"), ("--delta", "nan"), ("--epsilon", "-1"),
                    ("--alpha", "1"), ("--alpha", "abc")):
        rows.append((f"convert {flag} {v}", ["account", "convert", "gdp:mu=1", flag, v],
                     flag.strip("-")))
    for v in ("-1", "nan", "inf", "abc"):
        rows.append((f"compose {v}", ["account", "compose", "1", v], v))
    sub = ["account", "subsample", "--rate", "0.1", "--noise-multiplier", "1.1", "--steps",
           "10", "--sampling", "poisson"]
    for flag, values in (("--rate", ("0", "2", "nan", "-0.1", "x")),
                         ("--noise-multiplier", ("0", "-1", "nan", "inf")),
                         ("--steps", ("0", "-1", "2.5", "abc"))):
        for v in values:
            rows.append((f"subsample {flag} {v}", swap(sub, flag, v), flag.strip("-")))
    dpsgd = ["account", "dpsgd", "--dataset-size", "1000", "--batch-size", "100", "--steps",
             "5", "--epsilon", "3", "--delta", "1e-5", "--sampling", "poisson"]
    for flag, values in (("--dataset-size", ("0", "-5", "abc")),
                         ("--batch-size", ("0", "2000")),
                         ("--steps", ("0", "x")), ("--epsilon", ("0", "-1", "nan", "inf")),
                         ("--delta", ("0", "1", "nan"))):
        for v in values:
            rows.append((f"dpsgd {flag} {v}", swap(dpsgd, flag, v), flag.strip("-")))
    sched = ["account", "schedule", "--epsilon", "3", "--delta", "1e-5", "--steps", "5",
             "--rate", "0.1", "--sampling", "poisson"]
    for base, label in ((sub, "subsample"), (sched, "schedule")):
        rows.append((f"{label} without --sampling", base[:-2], "sampling"))
    rows.append(("dpsgd --sampling shuffle", swap(dpsgd, "--sampling", "shuffle"), "sampling"))
    for flag, values in (("--epsilon", ("0", "nan")), ("--delta", ("1", "-1")),
                         ("--steps", ("0", "abc")), ("--rate", ("1.5", "0", "nan"))):
        for v in values:
            rows.append((f"schedule {flag} {v}", swap(sched, flag, v), flag.strip("-")))
    # ---- calibrate
    gauss = ["calibrate", "gaussian", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "1"]
    for flag, values in (("--epsilon", ("-1", "nan", "inf", "x")),
                         ("--delta", ("0", "1", "nan")),
                         ("--sensitivity", ("0", "-1", "nan", "inf"))):
        for v in values:
            rows.append((f"gaussian {flag} {v}", swap(gauss, flag, v), flag.strip("-")))
    rows.append(("gaussian budget", ["calibrate", "gaussian", "--budget", "gdp:mu=-2",
                                     "--sensitivity", "1"], "budget"))
    puff = ["calibrate", "pufferfish", str(f["puff.csv"]), "--secret", "group", "--query",
            "value", "--alpha", "2", "--epsilon", "1"]
    for flag, values in (("--alpha", ("1", "0.5", "nan", "x")),
                         ("--epsilon", ("0", "-1", "nan", "inf")),
                         ("--secret", ("nosuch",)), ("--query", ("nosuch", "group"))):
        for v in values:
            word = v if v in ("nosuch", "group") else flag.strip("-")
            rows.append((f"pufferfish {flag} {v}", swap(puff, flag, v), word))
    for name in ("empty.csv", "puffnan.csv", "text.csv"):
        argv = ["calibrate", "pufferfish", str(f[name]), *puff[3:]]
        rows.append((f"pufferfish file {name}", argv, name))
    rows.append(("pufferfish tol", [*puff, "--tight", "--tol", "-1"], "tol"))
    # ---- figures
    rows.append(("figures unknown", ["figures", "no-such-figure"], "no-such-figure"))
    return rows


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def answered(argv: list[str], word: str) -> str | None:
    """None when ``argv`` is answered as it must be, else what went wrong."""
    code, out, err = _run(argv)
    if argv[0] == "verify" and code == 1:
        # a file that cannot be verified: "FILE: certificate does NOT hold", with the reason
        text = out + err
        ok = "does NOT hold" in out and "reason:" in out
    else:
        text = err
        # argparse's usage errors are "dpopt COMMAND: error: ...", dpopt's "dpopt: error: ..."
        ok = code == 2 and re.search(r"^dpopt[^\n]*: error: ", err, re.MULTILINE) is not None
    def plain(t: str) -> str:  # batch_size and --batch-size name the same flag
        return t.lower().replace("_", "-")

    if ok and DUMPS.search(text) is None and plain(word) in plain(text):
        return None
    return f"exit {code}: {text.strip()[-300:]!r}"


def test_every_bad_input_is_answered_in_the_users_words(tmp_path: Path) -> None:
    rows = _table(tmp_path)
    assert len(rows) > 180
    failures = [f"{label}: {why}" for label, argv, word in rows
                if (why := answered(argv, word)) is not None]
    assert failures == [], "\n".join(failures)


def test_the_check_can_fail(tmp_path: Path) -> None:
    """A valid command, a message without the flag and a traceback are all caught."""
    assert answered(["account", "compose", "1", "2"], "2") is not None  # exit 0
    assert answered(["account", "compose", "1", "-1"], "no-such-word") is not None
    assert DUMPS.search("FinitePoints(points=array([[0.]]))") is not None
