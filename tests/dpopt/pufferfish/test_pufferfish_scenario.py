"""Pufferfish scenarios: validation, constructors (arrays, DataFrame), priors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.pufferfish.scenario import DiscreteLaw, Scenario


def test_law_normalises_and_drops_zero_mass() -> None:
    law = DiscreteLaw([3.0, 1.0, 2.0], [0.5, 0.5 - 1e-12, 0.0])
    assert law.size == 2 and law.dim == 1
    assert law.probabilities.sum() == pytest.approx(1.0, abs=1e-16)
    np.testing.assert_allclose(law.mean, [2.0], rtol=1e-11)


def test_law_vector_support() -> None:
    law = DiscreteLaw([[0, 0], [1, 2]], [0.25, 0.75])
    assert law.dim == 2
    np.testing.assert_allclose(law.mean, [0.75, 1.5])


@pytest.mark.parametrize(
    ("support", "probs", "fragment"),
    [
        ([0, 1], [0.5, 0.6], "sum to 1"),
        ([0, 1], [1.5, -0.5], "non-negative"),
        ([], [], "empty"),
        ([0, np.inf], [0.5, 0.5], "finite"),
        ([0, 1], [0.5, np.nan], "NaN"),
        ([0, 1, 2], [0.5, 0.5], "one entry per atom"),
    ],
)
def test_law_bad_inputs(support, probs, fragment) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        DiscreteLaw(support, probs)


def test_empirical_law() -> None:
    law = DiscreteLaw.empirical([2, 1, 2, 2])
    np.testing.assert_array_equal(law.support.ravel(), [1.0, 2.0])
    np.testing.assert_allclose(law.probabilities, [0.25, 0.75])


def test_scenario_default_pairs_and_access() -> None:
    sc = Scenario.from_laws({"a": ([0], [1.0]), "b": ([1], [1.0]), "c": ([2], [1.0])})
    assert sc.pairs == (("a", "b"), ("a", "c"), ("b", "c"))
    assert sc.dim == 1 and len(list(sc.iter_pairs())) == 3
    assert sc.law("b").support[0, 0] == 1.0


def test_scenario_from_arrays_and_explicit_pairs() -> None:
    sc = Scenario.from_arrays([[0, 1], [1, 2]], [[0.5, 0.5], [0.1, 0.9]], pairs=[(0, 1)])
    assert sc.pairs == ((0, 1),)
    with pytest.raises(InvalidParameterError, match="one array per support"):
        Scenario.from_arrays([[0, 1]], [[0.5, 0.5], [1.0]])


def test_scenario_priors() -> None:
    laws = {
        "theta1": {"a": ([0], [1.0]), "b": ([1], [1.0])},
        "theta2": {"a": ([0, 1], [0.5, 0.5]), "b": ([2], [1.0])},
    }
    sc = Scenario(laws)
    assert sc.priors == ("theta1", "theta2")
    assert [(t, i, j) for t, i, j, _, _ in sc.iter_pairs()] == [
        ("theta1", "a", "b"),
        ("theta2", "a", "b"),
    ]
    with pytest.raises(InvalidParameterError, match="several"):
        sc.law("a")


@pytest.mark.parametrize(
    ("laws", "pairs", "fragment"),
    [
        ({}, None, "non-empty"),
        ({"p": {"a": ([0], [1.0]), "b": ([[0, 1]], [1.0])}}, None, "same dim"),
        ({"p": {"a": ([0], [1.0]), "b": ([1], [1.0])}}, [("a", "a")], "distinct"),
        ({"p": {"a": ([0], [1.0]), "b": ([1], [1.0])}}, [("a", "z")], "no law"),
        ({"p": {"a": ([0], [1.0])}}, None, "at least one pair"),
    ],
)
def test_scenario_bad_inputs(laws, pairs, fragment) -> None:
    with pytest.raises(InvalidParameterError, match=fragment):
        Scenario(laws, pairs)


def test_scenario_bad_law_type() -> None:
    with pytest.raises(InvalidTypeError):
        Scenario.from_laws({"a": "not a law", "b": ([0], [1.0])})


def test_from_dataframe_empirical_conditionals() -> None:
    df = pd.DataFrame(
        {
            "smoker": ["y", "y", "y", "n", "n", "n", "n"],
            "visits": [1, 2, 2, 0, 0, 1, 3],
            "site": ["A", "A", "B", "A", "B", "A", "B"],
        }
    )
    sc = Scenario.from_dataframe(df, "visits", "smoker")
    np.testing.assert_array_equal(sc.law("y").support.ravel(), [1, 2])
    np.testing.assert_allclose(sc.law("y").probabilities, [1 / 3, 2 / 3])
    np.testing.assert_allclose(sc.law("n").probabilities, [0.5, 0.25, 0.25])
    # callable query and vector query
    sc2 = Scenario.from_dataframe(df, lambda f: 2 * f["visits"], "smoker")
    np.testing.assert_array_equal(sc2.law("y").support.ravel(), [2, 4])
    sc3 = Scenario.from_dataframe(df.assign(w=1.0), ["visits", "w"], "smoker")
    assert sc3.dim == 2
    # priors from a column
    sc4 = Scenario.from_dataframe(df, "visits", "smoker", prior="site")
    assert set(sc4.priors) == {"A", "B"}
    np.testing.assert_allclose(sc4.law("n", "A").probabilities, [0.5, 0.5])


def test_from_dataframe_bad_inputs() -> None:
    df = pd.DataFrame({"s": [0, 1], "v": [1.0, 2.0]})
    with pytest.raises(InvalidParameterError, match="not a column"):
        Scenario.from_dataframe(df, "nope", "s")
    with pytest.raises(InvalidParameterError, match="not a column"):
        Scenario.from_dataframe(df, "v", "nope")
    with pytest.raises(InvalidTypeError):
        Scenario.from_dataframe({"s": [0]}, "v", "s")
    with pytest.raises(InvalidParameterError, match="at least one row"):
        Scenario.from_dataframe(df.iloc[:0], "v", "s")
    with pytest.raises(InvalidParameterError, match="NaN"):
        Scenario.from_dataframe(df.assign(v=[1.0, np.nan]), "v", "s")
