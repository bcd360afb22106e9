"""One spec grammar: budgets and domains accept and refuse the same strings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpopt
from dpopt.errors import InvalidParameterError
from dpopt.spec import parse_spec


def test_one_parser_everywhere() -> None:
    from dpopt.covariance import description

    assert description.parse_spec is parse_spec


@pytest.mark.parametrize("bad", ["approx:epsilon=1,,delta=1e-6", "approx:epsilon=1,delta=1e-6,",
                                 ",approx:epsilon=1", "gdp:", "gdp:mu=1,mu=2", "gdp:mu",
                                 "gdp:=1", ":mu=1", "gdp:mu=1&", "approx:epsilon=1,sigma=3"])
def test_malformed_budgets_are_refused_naming_the_spec(bad: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        dpopt.parse_budget(bad)
    assert info.value.name == "spec" and repr(bad) in str(info.value)


def test_empty_items_refused_in_domains_too() -> None:
    from dpopt.covariance.description import domain_from_spec

    assert domain_from_spec("grid:lo=0,hi=1,n=3,d=2").shape == (3, 3)
    with pytest.raises(InvalidParameterError, match="empty item"):
        domain_from_spec("grid:lo=0,,hi=1,n=3,d=2")


_ATOM = st.sampled_from(["approx", "gdp", "zcdp", "epsilon", "delta", "mu", "rho", "=", ",",
                         ":", " ", "1", "1e-6", "0.5", ""])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_ATOM, max_size=9))
def test_a_budget_parses_only_if_its_spec_does(parts: list[str]) -> None:
    text = "".join(parts)
    try:
        kind, params = parse_spec(text)
    except InvalidParameterError:
        with pytest.raises(InvalidParameterError):
            dpopt.parse_budget(text)
        return
    try:
        budget = dpopt.parse_budget(text)
    except InvalidParameterError:
        return  # a well-formed spec may still name an unknown kind, key or value
    assert kind in {"approx", "gdp", "zcdp"}
    assert budget.mahalanobis_bound() > 0 and set(params) <= {"epsilon", "delta", "mu", "rho"}


def test_the_command_line_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.cli import main

    assert main(["account", "convert", "approx:epsilon=1,,delta=1e-6"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpopt: error: budget='approx:epsilon=1,,delta=1e-6'")
    assert main(["calibrate", "gaussian", "--budget", "gdp:mu=1,", "--sensitivity", "1"]) == 2
    assert "--budget='gdp:mu=1,': an empty item" in capsys.readouterr().err


def test_old_files_with_empty_items_still_read() -> None:
    from dpopt.covariance.description import _budget_of, _legacy_spec

    assert _legacy_spec("approx:epsilon=1,,delta=1e-6,") == "approx:epsilon=1,delta=1e-6"
    old = _budget_of(("approx:epsilon=1,,delta=1e-6", "gdp:mu=2,&zcdp:rho=1"))
    new = _budget_of(("approx:epsilon=1,delta=1e-6", "gdp:mu=2&zcdp:rho=1"))
    assert old.mahalanobis_bound() == new.mahalanobis_bound()


def test_messages_show_values_not_object_dumps() -> None:
    box = dpopt.Box(np.zeros(2), np.ones(2))
    assert str(InvalidParameterError("domain", box, "x")) == "domain=a Box in R^2: x"
    points = dpopt.FinitePoints(np.zeros((50, 2)))
    assert str(InvalidParameterError("domain", points, "x")).startswith("domain=a FinitePoints")
    with pytest.raises(InvalidParameterError) as info:
        dpopt.design_covariance(np.full((50, 2), np.nan), dpopt.GDP(1.0))
    assert "an array of shape (50, 2)" in str(info.value) and "array(" not in str(info.value)
    with pytest.raises(InvalidParameterError, match=r"query=\[0\.5, 0\.5, 0\.5\]"):
        dpopt.add_remove_set(dpopt.Grid(np.zeros(2), np.ones(2), (3, 3)), query=[0.5] * 3,
                             sigma=0.3)


def test_tiny_denoiser_sigma_gives_the_nearest_point_limit() -> None:
    """σ = 1e-300: σ² is below the doubles; the vectors are the σ → 0 limit, not NaN."""
    rng = np.random.default_rng(7)
    points, query = rng.random((25, 2)), np.array([0.4, 0.55])
    tiny = dpopt.add_remove_set(points, query=query, sigma=1e-300)
    got = np.concatenate([b for _, b in tiny.chunks()])
    expected = []
    for i in range(25):  # brute force: the farther point's record removed, full difference
        for k in range(i + 1, 25):
            di, dk = (np.sum((query - points[j]) ** 2) for j in (i, k))
            expected.append(points[i] - points[k] if dk >= di else points[k] - points[i])
    np.testing.assert_array_equal(got, np.array(expected))
    small = np.concatenate([b for _, b in dpopt.add_remove_set(points, query, 1e-3).chunks()])
    assert np.all(np.linalg.norm(got, axis=1) >= np.linalg.norm(small, axis=1))
