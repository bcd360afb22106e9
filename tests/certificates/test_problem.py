"""Validation of the shared program data."""

import numpy as np
import pytest

from certificates import ArrayVectors, CovarianceProgram, FactoredDual
from certificates.errors import DpoptError, InvalidParameterError, InvalidTypeError


def test_problem_defaults_and_source() -> None:
    p = CovarianceProgram(vectors=[[1.0, 0.0], [0.0, 2.0]], bound=2.0)
    assert p.dim == 2 and p.count == 2
    np.testing.assert_array_equal(p.weight, np.eye(2))
    chunks = list(p.source.chunks(1))
    assert [s for s, _ in chunks] == [0, 1]
    np.testing.assert_array_equal(p.dense_vectors(), np.array([[1.0, 0.0], [0.0, 2.0]]))


def test_problem_accepts_vector_source() -> None:
    arr = np.arange(12.0).reshape(6, 2) + 1
    p = CovarianceProgram(vectors=ArrayVectors(arr), bound=1.0)
    np.testing.assert_array_equal(p.dense_vectors(), arr)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"vectors": [[np.nan, 1.0]]}, "vectors"),
        ({"vectors": [[1.0, 1.0]], "bound": 0.0}, "bound"),
        ({"vectors": [[1.0, 1.0]], "bound": -1.0}, "bound"),
        ({"vectors": [[1.0, 1.0]], "noise_floor": -1e-3}, "noise_floor"),
        ({"vectors": [[1.0, 1.0]], "weight": [[1.0, 2.0], [0.0, 1.0]]}, "weight"),
        ({"vectors": [[1.0, 1.0]], "weight": [[1.0, 0.0], [0.0, -1.0]]}, "weight"),
        ({"vectors": [[1.0, 1.0]], "weight": np.eye(3)}, "weight"),
    ],
)
def test_problem_rejects_bad_input(kwargs: dict, name: str) -> None:
    kwargs.setdefault("bound", 1.0)
    with pytest.raises(InvalidParameterError, match=name):
        CovarianceProgram(**kwargs)


def test_bad_types_are_dpopt_errors() -> None:
    with pytest.raises(InvalidTypeError):
        CovarianceProgram(vectors="abc", bound=1.0)
    with pytest.raises(DpoptError):
        CovarianceProgram(vectors=[[1.0]], bound=True)


def test_factored_dual_validation() -> None:
    FactoredDual(np.array([0]), np.array([1.0]), np.ones((1, 2)), np.zeros((2, 0)))
    with pytest.raises(InvalidParameterError, match="multipliers"):
        FactoredDual(np.array([0]), np.array([-1.0]), np.ones((1, 2)), np.zeros((2, 0)))


def test_all_zero_and_out_of_range_vectors_are_named_errors() -> None:
    with pytest.raises(InvalidParameterError, match="no noise is needed"):
        CovarianceProgram(vectors=np.zeros((3, 2)), bound=1.0)
    with pytest.raises(InvalidParameterError, match="other units"):
        CovarianceProgram(vectors=1e-150 * np.ones((3, 2)), bound=1.0)
    with pytest.raises(InvalidParameterError, match="other units"):
        CovarianceProgram(vectors=1e150 * np.ones((3, 2)), bound=1.0)
    p = CovarianceProgram(vectors=[[3.0, 4.0], [0.0, 1.0]], bound=1.0)
    assert p.max_norm() == 5.0 and p.max_sq_norm() == 25.0
