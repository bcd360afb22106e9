"""Dask tasks for the experiment sweeps and the fig1 draws; the block generator of the
on-the-fly sensitivity sets; the ``dask=`` argument helpers.

References: the in-process sweep / draws (identical tables), and for ``block`` a brute-force
construction of the two-record vectors from their formula, pair by pair.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from certificates.errors import InvalidParameterError, InvalidTypeError
from dpopt.covariance.domains import Box
from dpopt.covariance.sensitivity import (
    BoxVertexDifferences,
    TwoRecordVectors,
    UniformQueryVectors,
)
from dpopt.experiments.rpp import SCENARIOS, rpp_sweep
from dpopt.figures.fig1 import fig1_ratios
from dpopt.parallel import dask_client, map_ordered, show_progress


@pytest.fixture(scope="module")
def client() -> Any:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


# ------------------------------------------------------------------------------------------------
# sweeps and draws as tasks
# ------------------------------------------------------------------------------------------------
def test_rpp_sweep_on_dask_is_the_in_process_table(client: Any) -> None:
    spec = SCENARIOS["heart-disease-chol"]
    kw: dict[str, Any] = {"epsilons": [0.5, 2.0], "alphas": [float("inf")]}
    ref = rpp_sweep(spec, **kw)
    got = rpp_sweep(spec, client=client, progress=True, **kw)
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert list(got["epsilon"]) == [0.5, 2.0]  # input order, whatever finished first


def test_fig1_draws_on_dask_are_the_in_process_ratios(client: Any) -> None:
    ref = fig1_ratios(6, 600, "wishart", 11)
    got = fig1_ratios(6, 600, "wishart", 11, client=client)
    np.testing.assert_array_equal(got, ref)
    # independent check of one ratio: d lambda_max(P) / max over sign vectors of v^T P v
    cov = np.random.default_rng(11).standard_normal((600, 6, 7))
    cov = cov @ np.swapaxes(cov, 1, 2)
    p = np.linalg.inv(cov[599])
    signs = np.array([[1, *v] for v in np.ndindex(*(2,) * 5)]) * -2 + 1
    signs[:, 0] = 1
    exact = max(float(v @ p @ v) for v in signs)
    assert math.isclose(got[599], 6 * np.linalg.eigvalsh(p)[-1] / exact, rel_tol=1e-9)


def test_map_ordered_keeps_order_and_errors(client: Any) -> None:
    items = list(range(23))
    assert map_ordered(pow, items, client=client, args=(2,)) == [i * i for i in items]
    assert map_ordered(pow, items, args=(2,)) == [i * i for i in items]
    with pytest.raises(ZeroDivisionError):
        map_ordered(divmod, [1, 2], client=client, args=(0,))


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    assert show_progress(False) is False
    monkeypatch.setattr("sys.stderr", Tty())
    assert show_progress(None) and show_progress(True)
    monkeypatch.setattr("sys.stderr", None)
    assert not show_progress(True)


def test_dask_client_arguments(client: Any) -> None:
    with dask_client(None) as c:
        assert c is None
    with dask_client(client) as c:
        assert c is client
    with pytest.raises(InvalidTypeError, match="dask"):
        with dask_client(3.5):
            pass
    with pytest.raises(InvalidParameterError, match="dask"):
        with dask_client("somewhere"):
            pass


# ------------------------------------------------------------------------------------------------
# block(start, stop): the generator the workers use
# ------------------------------------------------------------------------------------------------
def _brute_two_record(points: np.ndarray, g: np.ndarray, sigma: float) -> np.ndarray:
    m = points.shape[0]
    out = []
    for i in range(m):
        for k in range(i + 1, m):
            z = (np.sum((g - points[k]) ** 2) - np.sum((g - points[i]) ** 2)) / (2 * sigma**2)
            c = expit(abs(z))
            out.append((c if z >= 0 else -c) * (points[i] - points[k]))
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 14), d=st.integers(1, 3), data=st.data())
def test_block_matches_formula_and_chunks(m: int, d: int, data: Any) -> None:
    rng = np.random.default_rng(m * 7 + d)
    pts = rng.integers(-3, 4, size=(m, d)).astype(float)  # ties and z = 0 cases
    g = rng.integers(-2, 3, size=d).astype(float)
    src = TwoRecordVectors(pts, g, 1.3)
    n = src.count
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    brute = _brute_two_record(pts, g, 1.3)
    np.testing.assert_allclose(src.block(start, stop), brute[start:stop], rtol=1e-14, atol=0)
    size = data.draw(st.integers(1, n + 2))
    for s, blk in src.chunks(size):
        np.testing.assert_array_equal(blk, src.block(s, s + blk.shape[0]))


def test_block_of_other_sets_and_range_errors() -> None:
    pts = np.random.default_rng(2).random((9, 3))
    uq = UniformQueryVectors(pts)
    np.testing.assert_array_equal(uq.block(5, 20), uq.dense()[5:20])
    bv = BoxVertexDifferences(Box([0, 0, 0, 0], [1, 2, 3, 4]))
    np.testing.assert_array_equal(bv.block(2, 7), bv.dense()[2:7])
    assert uq.block(4, 4).shape == (0, 3)
    src = TwoRecordVectors(pts, [0.5] * 3, 1.0)
    for bad in ((-1, 3), (5, 2), (0, src.count + 1), (True, 3)):
        with pytest.raises(InvalidParameterError, match="start, stop"):
            src.block(*bad)
    with pytest.raises(InvalidParameterError, match="start, stop"):
        bv.block(0, 99)
