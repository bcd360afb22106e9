"""``dpopt verify`` and ``Design.load`` bind a design file to what it describes (regressions of
an adversarial audit), and domain CSVs never lose a row silently."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from certificates.errors import CertificateError
from certificates.strict_json import digest
from dpopt.cli import main
from dpopt.covariance.design import Design


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def design(tmp: Path, name: str, *args: str) -> Path:
    path = tmp / name
    code, _, err = run(["-q", "design", *args, "-o", str(path)])
    assert code == 0, err
    return path


def rewrite(path: Path, content: dict[str, Any], desc: dict[str, Any] | None = None) -> Path:
    if desc is not None:
        content["problem"]["vectors_description"] = json.dumps(desc, sort_keys=True)
    content["sha256"] = digest(content)
    out = path.with_name("edited-" + path.name)
    out.write_text(json.dumps(content))
    return out


def load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    content = json.loads(path.read_text())
    return content, json.loads(content["problem"]["vectors_description"])


GRID = ["--domain", "grid:lo=0,hi=1,n=4,d=2", "--query", "0.2,0.7", "--sigma", "0.5"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("verify")
    return {
        "eps1": design(tmp, "eps1.json", *GRID, "--budget", "approx:epsilon=1,delta=1e-6"),
        "eps8": design(tmp, "eps8.json", *GRID, "--budget", "approx:epsilon=8,delta=1e-6"),
        # the same design on a 10x smaller grid (and query, σ): far less noise
        "small": design(tmp, "small.json", "--domain", "grid:lo=0,hi=0.1,n=4,d=2", "--query",
                        "0.02,0.07", "--sigma", "0.05", "--budget",
                        "approx:epsilon=1,delta=1e-6"),
    }


def test_good_file_holds_and_says_what_was_checked(files: dict[str, Path]) -> None:
    code, out, err = run(["verify", str(files["eps1"])])
    assert code == 0, err
    assert "regenerated from the description" in out and "recomputed from the specs" in out
    code, out, _ = run(["verify", str(files["eps1"]), "--json"])
    res = json.loads(out)
    assert code == 0 and res["holds"] and res["described"]
    assert res["budget"] == "(1, 1e-06)-DP" and res["bound"] <= res["budget_bound"]
    eps_at = {row["delta"]: row["epsilon"] for row in res["privacy"]["epsilon_for_delta"]}
    assert eps_at[1e-6] <= 1.0


def test_description_copied_onto_a_smaller_grid_design_rejected(files: dict[str, Path]) -> None:
    """The audit: design on a 10x smaller grid, copy the original description in, recompute the
    sha256 -> exit 0 'privacy guaranteed ... ε=1' while the described set has ε = 13.5."""
    small, _ = load(files["small"])
    _, desc = load(files["eps1"])
    path = rewrite(files["small"], small, desc)
    code, out, _ = run(["verify", str(path)])
    assert code == 1 and "does NOT hold" in out and "do not match" in out
    with pytest.raises(CertificateError, match="do not match"):
        Design.load(path)
    # and its Σ really is too small for the described set (the reason it must be rejected)
    from dpopt.covariance.domains import Grid
    from dpopt.covariance.privacy import privacy_of
    from dpopt.covariance.sensitivity import add_remove_set

    grid = Grid(np.zeros(2), np.ones(2), (4, 4))
    priv = privacy_of(np.asarray(small["covariance"]), add_remove_set(grid, [0.2, 0.7], 0.5))
    assert priv.epsilon(1e-6) > 5


@pytest.mark.parametrize(
    ("specs", "label", "needle"),
    [
        (["approx:epsilon=1,delta=1e-06"], "(1, 1e-06)-DP", "exceeds the bound"),  # relabel
        (None, "(1, 1e-06)-DP", "budget label"),  # the label alone
        (None, "(0.01, 1e-12)-DP", "budget label"),
        (["approx:epsilon=0.01,delta=1e-12"], "(0.01, 1e-12)-DP", "exceeds the bound"),
        (["rdp:alpha=8,epsilon=1"], None, "exceeds the bound"),
        (["not a budget"], None, "do not parse"),
    ],
)
def test_relabelled_budget_rejected(files: dict[str, Path], specs: list[str] | None,
                                    label: str | None, needle: str) -> None:
    """The audit: an ε = 8 design relabelled '(1, 1e-06)-DP' printed that budget, exit 0."""
    content, desc = load(files["eps8"])
    if specs is not None:
        desc["budget_specs"] = specs
    if label is not None:
        desc["budget"] = label
    code, out, _ = run(["verify", str(rewrite(files["eps8"], content, desc))])
    assert code == 1 and needle in out


def test_budget_bound_label_and_stored_q_checked(files: dict[str, Path]) -> None:
    content, desc = load(files["eps1"])
    desc["budget_bound"] = desc["budget_bound"] * 2
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, desc))])
    assert code == 1 and "budget_bound" in out
    content, desc = load(files["eps1"])
    content["problem"]["bound"] = content["problem"]["bound"] * (1 + 1e-15)
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, desc))])
    assert code == 1  # q above the budget's bound (and the claim no longer re-derives)


def test_relation_relabelled_to_replacement_rejected(files: dict[str, Path]) -> None:
    content, desc = load(files["eps1"])
    desc["relation"] = "replacement"
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, desc))])
    assert code == 1 and "replacement" in out


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda c: c["claim"].__setitem__("certified", "yes"), "claim.certified"),
        (lambda c: c["claim"].__delitem__("lower"), "missing field"),
        (lambda c: c["problem"].__setitem__("dim", "2"), "problem.dim"),
        (lambda c: c.__setitem__("covariance", None), "covariance"),
    ],
)
def test_malformed_file_is_exit_1_with_a_reason(files: dict[str, Path], edit: Any,
                                                needle: str) -> None:
    content, _ = load(files["eps1"])
    edit(content)
    code, out, err = run(["verify", str(rewrite(files["eps1"], content))])
    assert code == 1 and needle in out and "internal error" not in err


@pytest.mark.parametrize("token", ["NaN", "Infinity", "1e999"])
def test_nonfinite_number_is_a_rejection_not_an_internal_error(files: dict[str, Path],
                                                                token: str) -> None:
    """The audit: a NaN in the file gave exit 3 'internal error ... please report'."""
    text = files["eps1"].read_text().replace('"tol": 1e-06', f'"tol": {token}')
    bad = files["eps1"].with_name(f"nan-{token}.json")
    bad.write_text(text)
    code, out, err = run(["verify", str(bad)])
    assert code == 1 and err == ""
    assert "non-finite" in out or "overflows" in out


def test_edited_description_fields_rejected(files: dict[str, Path]) -> None:
    for field, value in (("denoiser_sigma", 0.25), ("query", [0.2, 0.6]), ("domain",
                         "grid:lo=0,hi=1,n=5,d=2"), ("set", "uniform-query")):
        content, desc = load(files["eps1"])
        desc[field] = value
        if field == "set":
            desc["query"], desc["denoiser_sigma"] = None, None
        code, out, _ = run(["verify", str(rewrite(files["eps1"], content, desc))])
        assert code == 1, field
    content, desc = load(files["eps1"])
    desc["extra"] = 1
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, desc))])
    assert code == 1 and "unexpected" in out


@pytest.mark.parametrize("relation_key", ["relation", "adjacency"])
def test_earlier_description_format_still_verified(files: dict[str, Path],
                                                   relation_key: str) -> None:
    """Files of earlier releases (tag /1, no embedded points; first releases spelt the relation
    'adjacency': add-remove/replace) are still bound to their grid and budget."""
    content, desc = load(files["eps1"])
    assert desc["tag"] == "dpopt-cli-design/3" and "sigma" not in desc
    old = {k: v for k, v in desc.items()
           if k not in ("domain_points", "header", "relation", "denoiser_sigma")}
    old["tag"], old["sigma"] = "dpopt-cli-design/1", desc["denoiser_sigma"]
    old[relation_key] = "add_remove" if relation_key == "relation" else "add-remove"
    code, out, err = run(["verify", str(rewrite(files["eps1"], content, old))])
    assert code == 0, out + err
    old["domain"] = "grid:lo=0,hi=1,n=5,d=2"
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, old))])
    assert code == 1 and "are not the file's" in out
    old["domain"] = "grid:lo=0,hi=2,n=4,d=2"
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, old))])
    assert code == 1 and "do not match" in out


def test_previous_description_tag_still_verified(files: dict[str, Path]) -> None:
    """Files written with tag /2 spell the denoiser's noise level ``sigma``: still read, still
    bound to it (an edited sigma fails), and reported as ``denoiser_sigma``."""
    content, desc = load(files["eps1"])
    v2 = {("sigma" if k == "denoiser_sigma" else k): v for k, v in desc.items()}
    v2["tag"] = "dpopt-cli-design/2"
    code, out, err = run(["verify", str(rewrite(files["eps1"], content, v2)), "--json"])
    assert code == 0, out + err
    assert json.loads(out)["design"]["denoiser_sigma"] == desc["denoiser_sigma"]
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, {**v2, "sigma": 0.25}))])
    assert code == 1
    mixed = {**v2, "tag": "dpopt-cli-design/3"}  # the new tag with the old key: malformed
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content, mixed))])
    assert code == 1 and "unexpected ['sigma']" in out


def test_free_text_description_is_not_presented_as_bound(files: dict[str, Path]) -> None:
    content, _ = load(files["eps1"])
    content["problem"]["vectors_description"] = "my favourite grid"
    code, out, _ = run(["verify", str(rewrite(files["eps1"], content))])
    assert code == 0
    assert "free text" in out and "described sensitivity set" not in out
    assert "stored sensitivity vectors" in out


def test_unstored_vectors_bound_to_description(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import dpopt.cli.design as cd

    monkeypatch.setattr(cd, "MAX_STORED_FLOATS", 4)
    path = design(tmp_path, "s.json", *GRID, "--budget", "gdp:mu=0.5")
    content, desc = load(path)
    assert content["problem"]["vectors"] is None
    assert run(["verify", str(path)])[0] == 0
    assert Design.load(path).certified
    desc["denoiser_sigma"] = 0.5 * (1 + 1e-12)
    code, out, _ = run(["verify", str(rewrite(path, content, desc))])
    assert code == 1 and "do not match" in out


# ----------------------------------------------------------------------------- Design.load


def test_design_load_reverifies(files: dict[str, Path], tmp_path: Path) -> None:
    d = Design.load(files["eps1"])
    content, _ = load(files["eps1"])
    assert np.array_equal(d.covariance, np.asarray(content["covariance"]))
    assert d.privacy.mahalanobis_bound <= content["problem"]["bound"] * (1 + 1e-12)
    assert d.value <= content["claim"]["upper"] and d.certified
    from dpopt.accounting.budgets import ApproxDP

    Design.load(files["eps1"], budget=ApproxDP(1.0, 1e-6))
    with pytest.raises(CertificateError, match="given budget"):
        Design.load(files["eps1"], budget=ApproxDP(0.5, 1e-6))
    # Σ halved, every digest recomputed: loads no more (it did with read_certificate)
    content["covariance"] = (0.5 * np.asarray(content["covariance"])).tolist()
    with pytest.raises(CertificateError, match="not strictly feasible"):
        Design.load(rewrite(files["eps1"], content))


def test_design_save_load_round_trip_with_source(tmp_path: Path) -> None:
    from dpopt.accounting.budgets import ZCDP
    from dpopt.covariance.design import design_covariance
    from dpopt.covariance.domains import Grid
    from dpopt.covariance.sensitivity import add_remove_set

    src = add_remove_set(Grid([0, 0], [1, 1], (3, 3)), [0.5, 0.4], 0.4)
    d = design_covariance(src, ZCDP(0.5))
    d.save(tmp_path / "d.json", description="3x3 grid, g = (0.5, 0.4), σ = 0.4")
    with pytest.raises(CertificateError, match="pass source"):
        Design.load(tmp_path / "d.json")
    again = Design.load(tmp_path / "d.json", source=src, budget=ZCDP(0.5))
    assert np.array_equal(again.covariance, d.covariance)
    with pytest.raises(CertificateError, match="do not match"):
        Design.load(tmp_path / "d.json",
                    source=add_remove_set(Grid([0, 0], [1, 1], (3, 3)), [0.5, 0.4], 0.5))


# ----------------------------------------------------------------------------- domain CSV


def test_csv_first_row_with_text_is_an_error_not_a_dropped_header(tmp_path: Path) -> None:
    """The audit: a domain CSV whose first row is `0,abc` was taken as a header and dropped."""
    csv = tmp_path / "pts.csv"
    csv.write_text("0,abc\n1,0\n0,1\n1,1\n")
    args = ["--domain", str(csv), "--uniform-query", "--budget", "gdp:mu=1"]
    code, _, err = run(["-q", "design", *args, "-o", str(tmp_path / "x.json")])
    assert code == 2 and "line 1, column 2" in err and "must be a number" in err
    assert not (tmp_path / "x.json").exists()


def test_csv_header_is_explicit(tmp_path: Path) -> None:
    csv = tmp_path / "pts.csv"
    csv.write_text("x,y\n0,0\n1,0\n0,1\n1,1\n")
    args = ["--domain", str(csv), "--uniform-query", "--budget", "gdp:mu=1"]
    code, _, err = run(["-q", "design", *args, "-o", str(tmp_path / "x.json")])
    assert code == 2 and "--header" in err  # no silent guess
    code, out, err = run(["-q", "design", *args, "--header", "--json", "-o",
                          str(tmp_path / "h.json")])
    assert code == 0, err
    assert json.loads(out)["count"] == 6  # 4 points: all 4·3/2 pairs, none dropped
    _, desc = load(tmp_path / "h.json")
    assert desc["domain_points"] == [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    assert desc["header"] is True
    # the file binds the points themselves: editing the CSV later changes nothing, editing the
    # embedded points is rejected
    csv.write_text("x,y\n0,0\n")
    assert run(["verify", str(tmp_path / "h.json")])[0] == 0
    content, desc = load(tmp_path / "h.json")
    desc["domain_points"] = desc["domain_points"][:3]
    assert run(["verify", str(rewrite(tmp_path / "h.json", content, desc))])[0] == 1
    code, _, err = run(["-q", "design", "--domain", "grid:lo=0,hi=1,n=3,d=2", "--header",
                        "--uniform-query", "--budget", "gdp:mu=1", "-o", str(tmp_path / "g.json")])
    assert code == 2 and "--header" in err


@pytest.mark.parametrize(
    ("text", "needle"),
    [("0,1\n1,\n", "empty cell at line 2, column 2"), ("0,1\n1,2,3\n", "line 2"),
     ("0,1\nnan,2\n", "finite"), ("0,1\n1_0,2\n", "must be a number"),
     ("0,1\n# comment\n0x1,2\n", "line 3, column 1")],
)
def test_csv_errors_name_line_and_column(tmp_path: Path, text: str, needle: str) -> None:
    from dpopt.cli.common import read_points

    f = tmp_path / "p.csv"
    f.write_text(text)
    with pytest.raises(Exception, match=needle):
        read_points(f)


def test_csv_reads_every_row(tmp_path: Path) -> None:
    from dpopt.cli.common import read_points

    f = tmp_path / "p.csv"
    f.write_text("# points\n0, 1\n\n2.5e-3,-4\n+1,.5\n")
    assert read_points(f).tolist() == [[0.0, 1.0], [2.5e-3, -4.0], [1.0, 0.5]]
