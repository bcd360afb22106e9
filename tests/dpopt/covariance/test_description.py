"""The design description: one grammar read and written by the CLI and by ``Design.save/load``.

Each writer is tested against the independent construction of what it describes: the vectors a
description regenerates are compared bit for bit with the set the design was made from (built
directly by ``add_remove_set``/``uniform_query_set``), the budget it names is re-parsed and its
bound compared with the original budget's, and files written by ``Design.save()`` are verified
by ``dpopt verify`` from the description alone.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting.budgets import GDP, MIDP, RDP, ZCDP, AllOf, ApproxDP, Budget
from dpopt.cli import main
from dpopt.covariance import description as dd
from dpopt.covariance import sensitivity as sens
from dpopt.covariance.design import Design, design_covariance
from dpopt.covariance.design_file import verify_design_file
from dpopt.covariance.domains import Box, FinitePoints, Grid
from dpopt.errors import CertificateError, InvalidParameterError

ROOT = Path(__file__).resolve().parents[3]


def _dense(src: object) -> np.ndarray:
    return np.concatenate([b for _, b in src.chunks()], axis=0)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- spec grammar


def test_parse_spec_splits_and_rejects() -> None:
    assert dd.parse_spec("Grid:lo=0, hi=1,n=5") == ("grid", {"lo": "0", "hi": "1", "n": "5"})
    assert dd.parse_spec("box") == ("box", {})
    for bad in ("", ":a=1", "grid:lo", "grid:lo=1,lo=2", "grid:=3", "grid:a=1,,b=2"):
        with pytest.raises(InvalidParameterError, match="spec"):
            dd.parse_spec(bad)


def test_domain_from_spec_matches_direct_construction() -> None:
    g = dd.domain_from_spec("grid:lo=-1,hi=2,n=3,d=2")
    assert isinstance(g, Grid)
    np.testing.assert_array_equal(g.points, Grid([-1.0, -1.0], [2.0, 2.0], (3, 3)).points)
    b = dd.domain_from_spec("box:lo=0;1,hi=1;3")
    assert isinstance(b, Box) and b.dim == 2
    np.testing.assert_array_equal(b.side_lengths, [1.0, 2.0])
    g2 = dd.domain_from_spec("grid:lo=0,hi=1;2,n=2;3")
    assert isinstance(g2, Grid) and g2.shape == (2, 3)


@pytest.mark.parametrize("spec, needle", [
    ("ball:r=1", "domain"), ("grid:lo=0,hi=1,m=3", "unknown"), ("box:lo=1,hi=0", "hi > lo"),
    ("grid:lo=0;0;0,hi=1;1", "different lengths"), ("box:lo=0;0,d=3", "d = 3"),
    ("grid:n=1", "n"), ("box:lo=x", "number"), ("box:hi=inf", "finite"),
])
def test_domain_from_spec_rejects_by_name(spec: str, needle: str) -> None:
    with pytest.raises(InvalidParameterError, match=needle):
        dd.domain_from_spec(spec)


_BOUND = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(lo=st.lists(_BOUND, min_size=1, max_size=4), width=st.floats(1e-3, 1e3),
       n=st.integers(2, 4), uniform=st.booleans())
def test_domain_spec_round_trips_bit_for_bit(lo: list[float], width: float, n: int,
                                             uniform: bool) -> None:
    lower = np.full(len(lo), lo[0]) if uniform else np.array(lo)
    upper = lower + width
    if not np.all(upper > lower):  # the width vanished in rounding
        return
    grid = Grid(lower, upper, (n,) * len(lo))
    spec = dd.domain_spec(grid)
    assert spec is not None
    back = dd.domain_from_spec(spec)
    assert isinstance(back, Grid)
    np.testing.assert_array_equal(back.points, grid.points)
    box_spec = dd.domain_spec(grid.box)
    assert box_spec is not None and box_spec.startswith("box:")
    np.testing.assert_array_equal(dd.domain_from_spec(box_spec).lower, lower)


def test_domain_spec_none_where_the_grammar_cannot_state_it() -> None:
    assert dd.domain_spec(FinitePoints([[0.0], [1.0]])) is None
    assert dd.domain_spec(Grid([0.0, 0.0], [1.0, 0.0], (3, 1))) is None  # a one-point axis


# ----------------------------------------------------------------------------- budget specs


@pytest.mark.parametrize("budget", [
    ZCDP(0.5), GDP(1.25), ApproxDP(1.0, 1e-6), ApproxDP(0.3, 1e-9), RDP([2.0, 8.0], [1.0, 3.0]),
    MIDP(0.1), MIDP(0.2, "add_remove"), AllOf(ZCDP(0.5), ApproxDP(2.0, 1e-5)),
])
def test_budget_specs_parse_back_to_the_same_bound(budget: Budget) -> None:
    from dpopt.accounting.budgets import parse_budget

    specs = dd.budget_specs(budget)
    assert specs is not None
    parsed = [parse_budget(s) for s in specs]
    back = parsed[0] if len(parsed) == 1 else AllOf(*parsed)
    assert back.mahalanobis_bound() == budget.mahalanobis_bound()
    assert back.describe() == budget.describe()


def test_budget_specs_none_for_a_budget_without_grammar() -> None:
    class Custom(ZCDP):
        def describe(self) -> str:
            return "custom"

    assert dd.budget_specs(Custom(0.5)) is None


# ----------------------------------------------------------------------------- describe


def test_describe_a_grid_two_record_set_as_its_spec() -> None:
    grid = Grid([0.0, -1.0], [1.0, 2.0], (4, 3))
    src = sens.add_remove_set(grid, [0.2, 0.5], 0.7)
    desc = dd.describe(src, ZCDP(0.5))
    assert desc is not None and desc.domain.startswith("grid:") and desc.domain_points is None
    back = dd.sensitivity_from_description(dd.parse_description(desc.to_json()))  # type: ignore[arg-type]
    np.testing.assert_array_equal(_dense(back), _dense(src))


def test_describe_a_point_set_by_its_points() -> None:
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(7, 3))
    for src in (sens.add_remove_set(pts, pts[0], 1.5), sens.uniform_query_set(pts)):
        desc = dd.describe(src, GDP(1.0), relation="replacement")
        assert desc is not None and desc.domain == dd.POINTS_LABEL
        parsed = dd.parse_description(desc.to_json())
        assert parsed is not None and parsed.relation == "replacement"
        np.testing.assert_array_equal(_dense(dd.sensitivity_from_description(parsed)), _dense(src))


def test_describe_a_box_uniform_query_set() -> None:
    src = sens.uniform_query_set(Box([0.0, 0.0, 1.0], [1.0, 2.0, 1.5]))
    desc = dd.describe(src, ApproxDP(1.0, 1e-6))
    assert desc is not None and desc.domain.startswith("box:")
    np.testing.assert_array_equal(_dense(dd.sensitivity_from_description(desc)), _dense(src))


def test_describe_refuses_what_it_cannot_regenerate() -> None:
    assert dd.describe(np.eye(3), ZCDP(0.5)) is None
    src = sens.add_remove_set(Grid([0.0], [1.0], (3,)), [0.5], 1.0)
    assert dd.describe(src, ZCDP(0.5), command="nobody") is None


def test_description_json_round_trip_is_exact() -> None:
    src = sens.add_remove_set(np.array([[0.1, 0.2], [0.3, 1e-300], [2.0, -5.5]]), [0.1, 0.0], 0.3)
    desc = dd.describe(src, RDP(2.0, 0.75))
    assert desc is not None
    back = dd.parse_description(desc.to_json())
    assert back is not None
    assert back.as_dict() == desc.as_dict()
    np.testing.assert_array_equal(back.domain_points, desc.domain_points)  # type: ignore[arg-type]


@pytest.mark.parametrize("edit, field", [
    ({"tag": "other/1"}, "tag"), ({"set": "three-record"}, "set"), ({"extra": 1}, "fields"),
    ({"denoiser_sigma": "0.5"}, "denoiser_sigma"), ({"command": "shell"}, "command"),
    ({"tag": "dpopt-cli-design/2"}, "fields"),  # the previous tag spells it sigma
])
def test_parse_description_rejects_malformed_fields(edit: dict[str, object], field: str) -> None:
    src = sens.add_remove_set(Grid([0.0], [1.0], (3,)), [0.5], 1.0)
    desc = dd.describe(src, ZCDP(0.5))
    assert desc is not None
    raw = {**json.loads(desc.to_json()), **edit}
    with pytest.raises(CertificateError, match=f"description.{field}"):
        dd.parse_description(json.dumps(raw))


# ----------------------------------------------------------------------------- Design.save / load


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("relation", ["add_remove", "replacement"])
def test_design_save_writes_a_description_verify_regenerates(tmp_path: Path,
                                                              relation: str) -> None:
    grid = Grid([0.0, 0.0], [1.0, 1.0], (4, 4))
    src = sens.add_remove_set(grid, [0.2, 0.7], 0.5)
    budget = ApproxDP(1.0, 1e-6)
    design = design_covariance(src, budget, relation=relation)
    path = tmp_path / "d.json"
    design.save(path)
    vf = verify_design_file(path)
    assert vf.description is not None and vf.description.command == "python"
    assert vf.description.domain == "grid:lo=0.0,hi=1.0,n=4,d=2"
    assert vf.budget_bound == budget.mahalanobis_bound()  # recomputed from the specs
    np.testing.assert_array_equal(_dense(vf.vectors), _dense(src))
    code, text = _run(["verify", str(path), "--json"])
    assert code == 0, text
    report = json.loads(text)
    assert report["described"] and report["design"]["relation"] == relation
    loaded = Design.load(path)
    assert loaded.budget is not None and loaded.budget.describe() == budget.describe()
    np.testing.assert_array_equal(loaded.covariance, vf.certificate.repaired_covariance)


def test_a_saved_description_binds_the_design(tmp_path: Path) -> None:
    """Editing the description's sigma (a different set) or budget (a looser one) is caught."""
    from certificates.strict_json import digest

    src = sens.add_remove_set(Grid([0.0, 0.0], [1.0, 1.0], (3, 3)), [0.5, 0.5], 0.5)
    path = tmp_path / "d.json"
    design_covariance(src, ZCDP(0.5)).save(path)
    content = json.loads(path.read_text())
    for key, value in (("denoiser_sigma", 0.25), ("budget_specs", ["zcdp:rho=5.0"])):
        raw = json.loads(content["problem"]["vectors_description"])
        raw[key] = value
        edited = json.loads(json.dumps(content))
        edited["problem"]["vectors_description"] = json.dumps(raw, sort_keys=True)
        edited["sha256"] = digest(edited)
        out = tmp_path / f"edited-{key}.json"
        out.write_text(json.dumps(edited))
        with pytest.raises(CertificateError, match="rejected"):
            verify_design_file(out)


def test_design_save_of_a_plain_array_stays_free_of_description(tmp_path: Path) -> None:
    s = np.array([[1.0, 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1]])
    path = tmp_path / "a.json"
    design_covariance(s, ZCDP(0.5)).save(path)
    vf = verify_design_file(path)
    assert vf.description is None
    np.testing.assert_array_equal(vf.vectors, s)


# ----------------------------------------------------------------------------- ownership


def test_moved_names_warn_and_are_the_same_objects() -> None:
    from dpopt.covariance import design_file

    for name in ("DESCRIPTION_TAG", "DesignDescription", "domain_from_spec",
                 "parse_description", "sensitivity_from_description"):
        with pytest.warns(DeprecationWarning, match="dpopt.covariance.description"):
            value = getattr(design_file, name)
        assert value is getattr(dd, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert design_file.verify_design_file is verify_design_file


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_covariance_module_imports_the_cli() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.startswith("dpopt.cli"))
        for p in (ROOT / "dpopt" / "covariance").glob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_cli_writes_its_description_through_the_module() -> None:
    """No hand-written tag: the design commands use DesignDescription.to_json."""
    text = (ROOT / "dpopt" / "cli" / "design.py").read_text()
    assert dd.DESCRIPTION_TAG not in text
    assert "DesignDescription(" in text
