"""Inputs are validated once, at the public boundary, and passed inward validated.

``CovarianceProgram.with_vectors`` shares a program's validated W with a program on other
vectors (a batch validates its weight once), still validating everything else a user passes;
one design enters the BLAS thread-limit context once and builds its dual certificate once.
Counting calls is what these tests assert (no timings); the designs are checked against the
constructor-built programs and by ``certificates.covariance.check``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import certificates.problem as problem_mod
import dpopt.covariance.design as design_mod
import solvers.structured as structured
from certificates.covariance import check
from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import CovarianceProgram, FactoredDual
from dpopt.accounting.budgets import ZCDP
from dpopt.covariance.batch import design_covariance_batch
from dpopt.covariance.design import design_covariance


def _sets(n: int, d: int = 3, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((40, d))
    return [base * (1.0 + 0.01 * i) for i in range(n)]


def _weight(d: int = 3) -> np.ndarray:
    rng = np.random.default_rng(7)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.geomspace(1.0, 30.0, d)) @ q.T


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_with_vectors_equals_the_constructor() -> None:
    w = _weight()
    s = _sets(2)
    base = CovarianceProgram(s[0], w, 2.0, 0.1)
    made = base.with_vectors(s[1], 3.0)
    ref = CovarianceProgram(s[1], w, 3.0, 0.1)
    assert made.weight is base.weight  # shared, not re-validated
    np.testing.assert_array_equal(made.weight, ref.weight)
    np.testing.assert_array_equal(made.vectors, ref.vectors)
    assert (made.bound, made.noise_floor, made.dim, made.count) == (3.0, 0.1, 3, 40)
    assert made.max_sq_norm() == ref.max_sq_norm()
    assert base.with_vectors(s[1]).bound == 2.0


@pytest.mark.parametrize(("vectors", "bound", "eta", "name"), [
    (np.array([[1.0, np.nan, 0.0]]), 1.0, 0.0, "vectors"),
    (np.array([[1.0, np.inf, 0.0]]), 1.0, 0.0, "vectors"),
    (np.zeros((2, 3)), 1.0, 0.0, "vectors"),  # all zero: no noise needed
    (np.ones((2, 3)) * 1e200, 1.0, 0.0, "vectors"),  # beyond the norm range
    (np.ones((2, 4)), 1.0, 0.0, "weight"),  # another dimension than W's
    (np.ones((2, 3)), -1.0, 0.0, "bound"),
    (np.ones((2, 3)), float("nan"), 0.0, "bound"),
    (np.ones((2, 3)), 1.0, -0.5, "noise_floor"),
])
def test_with_vectors_still_refuses_bad_input(vectors: np.ndarray, bound: float, eta: float,
                                              name: str) -> None:
    base = CovarianceProgram(_sets(1)[0], _weight(), 1.0)
    with pytest.raises(InvalidParameterError) as info:
        base.with_vectors(vectors, bound, eta)
    assert info.value.name == name


def test_with_vectors_refuses_a_string() -> None:
    base = CovarianceProgram(_sets(1)[0], _weight(), 1.0)
    with pytest.raises(InvalidTypeError):
        base.with_vectors("not vectors")  # type: ignore[arg-type]


def test_a_batch_validates_its_weight_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six items with a shared W: the boundary's check and the first program's, not one per
    item; every design certified by the independent check on a constructor-built program."""
    calls = _counting(monkeypatch, problem_mod, "as_psd_matrix")
    w = _weight()
    sets = _sets(6)
    designs = design_covariance_batch(sets, ZCDP(rho=0.5), weight=w)
    assert len(calls) <= 2
    for s, des in zip(sets, designs, strict=True):
        ref = CovarianceProgram(s, w, des.bound)
        cert = check(ref, des.covariance, des.solution.dual, tol=1e-6)
        assert cert.certified and cert.scale == 1.0, cert.message


def test_a_batch_still_refuses_a_bad_item_by_name() -> None:
    sets = _sets(4)
    sets[2] = sets[2].copy()
    sets[2][5, 1] = np.nan
    with pytest.raises(InvalidParameterError, match=r"sensitivities\[2\]"):
        design_covariance_batch(sets, ZCDP(rho=0.5), weight=_weight())
    wide = _sets(4)
    wide[3] = np.ones((40, 4))
    with pytest.raises(InvalidParameterError, match=r"sensitivities\[3\] \(weight\)"):
        design_covariance_batch(wide, ZCDP(rho=0.5), weight=_weight())


def test_one_design_limits_blas_once_and_builds_its_dual_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    entered = _counting(monkeypatch, structured, "blas_limits")
    entered_here = _counting(monkeypatch, design_mod, "blas_limits")
    duals = _counting(monkeypatch, FactoredDual, "__post_init__")
    s = _sets(1, d=10, seed=3)[0]
    des = design_covariance(s, ZCDP(rho=0.5))
    assert des.certified and des.path == "structured"
    assert len(entered) + len(entered_here) == 1
    assert len(duals) == 1  # the solver's dual, in the caller's units; the check takes it as is
    cert = check(CovarianceProgram(s, None, des.bound), des.covariance, des.solution.dual,
                 tol=1e-6)
    assert cert.certified and cert.scale == 1.0
