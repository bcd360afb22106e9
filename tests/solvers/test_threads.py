"""The one owner of BLAS thread limits: inside, one thread; outside, the caller's setting."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from solvers.threads import blas_limits, single_blas_thread


def _blas_threads() -> list[int]:
    return [int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_threads():  # type: ignore[no-untyped-def]
    if not _blas_threads():
        pytest.skip("no BLAS library with a thread pool is loaded")
    with threadpool_limits(limits=2, user_api="blas"):
        if max(_blas_threads()) < 2:
            pytest.skip("the BLAS library runs one thread here")
        yield


def test_blas_limits_sets_and_restores(two_threads: None) -> None:
    before = _blas_threads()
    with blas_limits(1):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


def test_single_blas_thread_restores_after_an_exception(two_threads: None) -> None:
    before = _blas_threads()
    seen: list[list[int]] = []

    @single_blas_thread
    def boom() -> None:
        seen.append(_blas_threads())
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        boom()
    assert seen == [[1] * len(before)]
    assert _blas_threads() == before


def test_accounting_entry_points_run_on_one_thread(two_threads: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The accountants' 1-D work runs with one BLAS thread (spinning workers only cost CPU)."""
    from dpopt.accounting import _lower, composition

    seen: list[list[int]] = []
    real = _lower.sum_test_epsilon_lower

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(_lower, "sum_test_epsilon_lower", spy)
    run = composition.GaussianSteps(0.5, 50, 0.05, "poisson")
    composition.lower_epsilon(run, 1e-5)
    assert seen and all(max(s) == 1 for s in seen)
    assert max(_blas_threads()) >= 2
