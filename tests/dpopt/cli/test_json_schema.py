"""Every ``--json`` output validates against the one schema, in the one vocabulary.

Each command with a ``--json`` option runs once with cheap parameters; its output must validate
against ``dpopt/schemas/cli-output.schema.json`` (with ``jsonschema`` when it is installed, else
with the small validator below, which knows the keywords the schema uses), use no retired key
name anywhere, and contain no infinite or NaN number (JSON has none: they are null). A command
added without a case here fails :func:`test_every_json_command_is_covered`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from dpopt.accounting.budgets import privacy_report
from dpopt.cli import build_parser, main
from dpopt.cli.common import (
    SCHEMA_VERSION,
    VOCABULARY,
    dump_json,
    files_schema,
    output_schema,
)

#: names a quantity had before the vocabulary (outside the privacy report: never a key)
RETIRED = {"sigma", "rate", "interval", "report"}

CSV = "group,value\na,0\na,0\na,1\nb,1\nb,2\nb,2\n"


def _cases(tmp: Path) -> dict[str, list[list[str]]]:
    design = str(tmp / "d.json")
    return {
        "demo": [["demo", "-q", "--json", "-o", str(tmp / "demo.json")]],
        "design": [["design", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--query", "0.3,0.6",
                    "--denoiser-sigma", "0.4", "--budget", "gdp:mu=1", "-o", design, "--json",
                    "-q"],
                   ["design", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--uniform-query",
                    "--budget", "zcdp:rho=0.5", "-o", str(tmp / "u.json"), "--json", "-q"]],
        "verify": [["verify", design, "--json"], ["verify", str(tmp / "u.json"), "--json"],
                   ["verify", str(tmp / "tampered.json"), "--json"]],
        "design-run": [["design-run", "--steps", "2", "--epsilon", "1", "--delta", "1e-5",
                        "--json", "-q"]],
        "account convert": [["account", "convert", "gdp:mu=1", "rdp:alpha=2,epsilon=1",
                             "--json"]],
        "account compose": [["account", "compose", "0.5", "1", "--json"]],
        "account subsample": [["account", "subsample", "--rate", "0.1", "--noise-multiplier",
                               "1.1", "--steps", "10", "--sampling", "poisson", "--json"]],
        "account dpsgd": [["account", "dpsgd", "--dataset-size", "1000", "--batch-size", "100",
                           "--steps", "5", "--epsilon", "3", "--delta", "1e-5",
                           "--sampling", "poisson", "--json"]],
        "account schedule": [["account", "schedule", "--epsilon", "3", "--delta", "1e-5",
                              "--steps", "5", "--rate", "0.1", "--sampling", "poisson",
                              "--json"]],
        "calibrate gaussian": [["calibrate", "gaussian", "--epsilon", "1", "--delta", "1e-5",
                                "--sensitivity", "1", "--json"],
                               ["calibrate", "gaussian", "--budget", "gdp:mu=1",
                                "--sensitivity", "2", "--json"]],
        "calibrate pufferfish": [["calibrate", "pufferfish", str(tmp / "data.csv"), "--secret",
                                  "group", "--query", "value", "--alpha", "2", "--epsilon", "1",
                                  "--json"],
                                 ["calibrate", "pufferfish", str(tmp / "data.csv"), "--secret",
                                  "group", "--query", "value", "--alpha", "2", "--epsilon", "1",
                                  "--tight", "--certificate", str(tmp / "t.json"), "--json"]],
        "figures": [["figures", "--list", "--json"]],
        "sample": [["sample", "--dataset", "mixture", "--domain", "grid:lo=0,hi=1,n=5,d=2",
                    "--budget", "gdp:mu=1", "--steps", "3", "--samples", "4", "-o",
                    str(tmp / "run.json"), "--json", "-q"]],
        "verify-run": [["verify", str(tmp / "run.json"), "--json"]],  # a sampling run record
        "verify-tight": [["verify", str(tmp / "t.json"), "--json"]],  # a tight Pufferfish one
    }


def json_commands() -> set[str]:
    """Every leaf command of the parser that has a ``--json`` option."""
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
                return
        if any("--json" in a.option_strings for a in parser._actions):
            found.add(" ".join(prefix))

    walk(build_parser(), [])
    return found


# ------------------------------------------------------------ a small validator (fallback)
_TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                          "null": type(None)}


def _is(value: object, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def small_validate(value: object, schema: dict[str, Any], root: dict[str, Any],
                   where: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` for the keywords the output schema uses."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return small_validate(value, root["$defs"][name], root, where)
    errors: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{where}: {value!r:.60} is not {kinds}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:  # type: ignore[operator]
        errors.append(f"{where}: {value!r} < {schema['minimum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: missing {k!r}" for k in schema.get("required", [])
                   if k not in value]
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errors += small_validate(v, props[k], root, f"{where}.{k}")
            elif extra is False:
                errors.append(f"{where}: unexpected key {k!r}")
            elif isinstance(extra, dict):
                errors += small_validate(v, extra, root, f"{where}.{k}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        if isinstance(schema.get("items"), dict):
            for i, v in enumerate(value):
                errors += small_validate(v, schema["items"], root, f"{where}[{i}]")
    for part in schema.get("allOf", []):
        cond = part.get("if")
        if cond is not None:
            if not small_validate(value, cond, root, where):
                errors += small_validate(value, part["then"], root, where)
        else:
            errors += small_validate(value, part, root, where)
    return errors


def validate(output: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema comes with the notebooks extra
        return small_validate(output, schema, schema)
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(output)]


def retired_keys(obj: object, where: str = "$") -> list[str]:
    """Retired key names and non-finite values anywhere outside the privacy report."""
    found: list[str] = []
    if isinstance(obj, dict):
        if obj.get("schema") == "dpopt.privacy-report/1":
            return found
        for k, v in obj.items():
            if k in RETIRED:
                found.append(f"{where}.{k}")
            found += retired_keys(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += retired_keys(v, f"{where}[{i}]")
    elif isinstance(obj, str) and obj in ("inf", "-inf", "nan", "Infinity", "NaN"):
        found.append(f"{where}={obj!r}")
    return found


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("json")
    (tmp / "data.csv").write_text(CSV, encoding="utf-8")
    results: dict[str, list[dict[str, Any]]] = {}
    for command, runs in _cases(tmp).items():
        for argv in runs:
            if argv[1:2] == [str(tmp / "tampered.json")]:
                data = json.loads((tmp / "d.json").read_text())
                data["covariance"][0][0] *= 0.5  # under-noised: the check must fail
                (tmp / "tampered.json").write_text(json.dumps(data))
            code, text = _run(argv)
            assert code in (0, 1), f"{argv}: exit {code}"
            results.setdefault(command, []).append(json.loads(text))
    return results


def test_every_json_command_is_covered(tmp_path: Path) -> None:
    assert set(_cases(tmp_path)) - {"verify-run", "verify-tight"} == json_commands()
    assert set(output_schema()["properties"]["command"]["enum"]) == json_commands()


def test_every_output_validates(outputs: dict[str, list[dict[str, Any]]]) -> None:
    schema = output_schema()
    for command, results in outputs.items():
        for result in results:
            assert result["command"] == {"verify-run": "verify", "verify-tight": "verify"}.get(
                command, command)
            assert result["schema_version"] == SCHEMA_VERSION
            assert validate(result, schema) == [], command
            assert small_validate(result, schema, schema) == [], command
            assert retired_keys(result) == [], command


def test_the_vocabulary_names_each_quantity_once(
        outputs: dict[str, list[dict[str, Any]]]) -> None:
    design = outputs["design"][0]
    assert design["denoiser_sigma"] == 0.4 and "privacy" in design
    assert outputs["account subsample"][0]["noise_multiplier"] == 1.1
    assert outputs["account subsample"][0]["sampling_rate"] == 0.1
    assert outputs["calibrate gaussian"][1]["noise_std"] > 0
    schedule = outputs["account schedule"][0]
    assert "noise_std_per_sensitivity" not in schedule  # a second name of noise_multiplier
    low, high = schedule["certified_interval"]  # the least certified noise multiplier's bracket
    assert low <= schedule["noise_multiplier"] <= high
    held, tampered = outputs["verify"][0], outputs["verify"][2]
    assert held["holds"] and held["design"]["denoiser_sigma"] == 0.4
    assert held["certified_interval"] == pytest.approx(design["certified_interval"], rel=1e-9)
    assert tampered["holds"] is False and tampered["reason"]
    # a sampling run's guarantee is in its one privacy report (schema 2): no gdp_mu or epsilon
    # beside it, in the output of the run and in the verify of its record
    for run in (outputs["sample"][0], outputs["verify-run"][0]):
        assert not {"gdp_mu", "epsilon"} & set(run), sorted(run)
        eps_at = {r["delta"]: r["epsilon"] for r in run["privacy"]["epsilon_for_delta"]}
        assert sorted(eps_at) == [1e-8, 1e-6, 1e-5]
        assert run["privacy"]["gdp_mu"] == pytest.approx(1.0, rel=1e-9)
        assert eps_at[1e-5] == pytest.approx(privacy_report(1.0).epsilon(1e-5), rel=1e-9)
    # every accountant's figure is a finite number or null (never the string "inf"); the exact
    # GDP without amplification is finite under subsampling and never below the answer
    line = outputs["account subsample"][0]["certified"][0]
    candidates = line["candidates"]
    assert all(v is None or (type(v) is float and v == v and abs(v) < float("inf"))
               for v in candidates.values()), candidates
    assert candidates["gdp-exact"] >= line["epsilon"]


def test_the_validators_catch_what_they_must() -> None:
    schema = output_schema()
    good = {"schema_version": SCHEMA_VERSION, "command": "account compose", "mus": [1.0], "mu": 1.0,
            "privacy": {"schema": "dpopt.privacy-report/1", "approximate": False,
                        "mahalanobis_bound": 1.0, "zcdp_rho": 0.5, "gdp_mu": 1.0, "rdp": [],
                        "epsilon_for_delta": [], "delta_for_epsilon": [], "mi_nats": 0.1}}
    assert validate(good, schema) == [] and small_validate(good, schema, schema) == []
    for bad in ({**good, "sigma": 1.0}, {**good, "mu": "inf"}, {**good, "schema_version": 1},
                {k: v for k, v in good.items() if k != "privacy"}):
        assert validate(bad, schema) and small_validate(bad, schema, schema)
    assert retired_keys({"a": {"rate": 1}, "b": ["inf"]}) == ["$.a.rate", "$.b[0]='inf'"]


def test_dump_json_writes_no_infinity_and_renames_in_one_place() -> None:
    text = dump_json({"command": "account subsample", "sigma": 2.0, "rate": 0.5,
                      "x": float("inf"), "y": [float("nan")], "report": {"mu": 1}})
    assert re.search(r"Infinity|NaN|\"inf\"", text) is None
    data = json.loads(text)
    assert data == {"schema_version": SCHEMA_VERSION, "command": "account subsample",
                    "noise_multiplier": 2.0, "sampling_rate": 0.5, "x": None, "y": [None],
                    "privacy": {"mu": 1}}
    assert set(VOCABULARY["*"]) | {"sigma"} == RETIRED


def _no_constants(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-finite number {name} in a file")

    return json.loads(text, parse_constant=refuse)


def _def(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return {**schema["$defs"][name], "$defs": schema["$defs"]}


def test_every_file_dpopt_writes_validates(outputs: dict[str, list[dict[str, Any]]]) -> None:
    """The files the commands above wrote: a design file with a description, a demo file with
    stored vectors, a uniform-query design and a tight Pufferfish certificate."""
    schema = files_schema()
    paths = [Path(outputs[c][i]["output"]) for c, i in (("design", 0), ("design", 1),
                                                         ("demo", 0))]
    paths.append(Path(outputs["calibrate pufferfish"][1]["tight_certificate"]))
    paths.append(Path(outputs["sample"][0]["output"]))
    formats = set()
    for path in paths:
        data = _no_constants(path.read_text(encoding="utf-8"))
        assert validate(data, schema) == [], path.name
        formats.add(data["format"])
        text = data.get("problem", {}).get("vectors_description")
        if text is not None:
            desc = json.loads(text)
            assert desc["tag"] == "dpopt-cli-design/3" and "sigma" not in desc
            assert validate(desc, _def(schema, "design_description")) == [], path.name
            # the previous tag (the key sigma) has its own definition, still read
            v2 = {("sigma" if k == "denoiser_sigma" else k): v for k, v in desc.items()}
            v2["tag"] = "dpopt-cli-design/2"
            assert validate(v2, _def(schema, "design_description_v2")) == [], path.name
            assert validate(v2, _def(schema, "design_description")), path.name
    assert formats == {"dpopt-covariance-certificate/1", "dpopt-renyi-mixture-certificate/2",
                       "dpopt-diffusion-run/2"}
    broken = _no_constants(paths[0].read_text(encoding="utf-8"))
    del broken["claim"]
    assert validate(broken, schema)
