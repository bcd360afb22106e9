"""The Dask pass executor: same answers as the in-process passes, fault behaviour, lazy import.

One 2-worker ``LocalCluster`` (processes, one thread each) serves the module. References: the
in-process executor (bit-for-bit equality: blocks are whole solver chunks), a dense numpy
brute force of every q_j, and ``certificates.covariance.check`` on both solutions.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certificates.covariance import check
from certificates.errors import InvalidParameterError, InvalidTypeError
from certificates.problem import ArrayVectors, CovarianceProgram
from dpopt.accounting.budgets import ZCDP
from dpopt.covariance.design import design_covariance
from dpopt.covariance.sensitivity import TwoRecordVectors
from solvers.dask_passes import BlockSource, DaskPasses, PassFailedError
from solvers.passes import IN_PROCESS
from solvers.structured import solve_structured

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client() -> Any:
    # one retry after a lost worker (Dask's default is 3): keeps the "cannot complete" test short
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
    ) as cluster, Client(cluster) as c:
        yield c


def _two_record(m: int, d: int, seed: int = 1) -> TwoRecordVectors:
    rng = np.random.default_rng(seed)
    return TwoRecordVectors(rng.random((m, d)), np.full(d, 0.5), math.sqrt(d / 12.0))


# ------------------------------------------------------------------------------------------------
# sources that misbehave on the workers (module level so the workers can unpickle them)
# ------------------------------------------------------------------------------------------------
class _Wrapped:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def count(self) -> int:
        return int(self.inner.count)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def chunks(self, size: int = 65536) -> Any:
        return self.inner.chunks(size)

    def take(self, indices: Any) -> Any:
        return self.inner.take(indices)


class KillOnce(_Wrapped):
    """Kills the worker process the first time the block holding vector ``at`` is generated."""

    def __init__(self, inner: Any, marker: str, at: int) -> None:
        super().__init__(inner)
        self.marker, self.at = marker, at

    def block(self, start: int, stop: int) -> Any:
        if start <= self.at < stop and not os.path.exists(self.marker):
            Path(self.marker).write_text("killed")
            os._exit(1)  # the worker dies mid-pass
        return self.inner.block(start, stop)


class KillAlways(_Wrapped):
    """Kills every worker that generates the block holding vector ``at``."""

    def __init__(self, inner: Any, at: int) -> None:
        super().__init__(inner)
        self.at = at

    def block(self, start: int, stop: int) -> Any:
        if start <= self.at < stop:
            os._exit(1)
        return self.inner.block(start, stop)


class Broken(_Wrapped):
    """Fails (an exception, the worker survives) on the block holding vector ``at``."""

    def __init__(self, inner: Any, at: int) -> None:
        super().__init__(inner)
        self.at = at

    def block(self, start: int, stop: int) -> Any:
        if start <= self.at < stop:
            raise RuntimeError("disk unavailable")
        return self.inner.block(start, stop)


class Slow(_Wrapped):
    def block(self, start: int, stop: int) -> Any:
        time.sleep(1.0)
        return self.inner.block(start, stop)


def _same(a: Any, b: Any) -> None:
    assert a.qmax == b.qmax and a.argmax == b.argmax
    np.testing.assert_array_equal(a.top_idx, b.top_idx)
    np.testing.assert_array_equal(a.top_q, b.top_q)
    np.testing.assert_array_equal(a.top_vecs, b.top_vecs)


# ------------------------------------------------------------------------------------------------
# passes
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("blocks", [None, 1, 3, 1000])
def test_passes_identical_to_in_process(client: Any, blocks: int | None) -> None:
    src = _two_record(300, 6)  # J = 44850
    chunk = 4096  # does not divide J: the last block is short
    ex = DaskPasses(client, blocks=blocks)
    g_in, n_in = IN_PROCESS.gram(src, chunk)
    g_dk, n_dk = ex.gram(src, chunk)
    assert n_in == n_dk == src.count
    np.testing.assert_array_equal(g_in, g_dk)
    rng = np.random.default_rng(0)
    bmat = rng.standard_normal((6, 4))
    for keep, thr in ((0, np.inf), (25, -np.inf), (40, 0.5)):
        _same(IN_PROCESS.score(src, bmat, chunk, keep, thr), ex.score(src, bmat, chunk, keep, thr))
    # independent reference: the dense brute force
    dense = src.dense()
    q = np.einsum("ij,ij->i", dense @ bmat, dense @ bmat)
    res = ex.score(src, bmat, chunk, 25, -np.inf)
    assert res.argmax == int(np.argmax(q))
    np.testing.assert_allclose(res.qmax, q.max(), rtol=1e-13)
    assert set(res.top_idx.tolist()) == set(np.argsort(-q)[:25].tolist())
    np.testing.assert_allclose(dense.T @ dense, g_dk, rtol=1e-11, atol=1e-11 * np.abs(g_dk).max())


@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(
    n=st.integers(1, 400), d=st.integers(1, 4), chunk=st.integers(1, 97),
    keep=st.integers(0, 12), ties=st.booleans(), blocks=st.integers(1, 9),
)
def test_score_identical_with_ties(client: Any, n: int, d: int, chunk: int, keep: int,
                                   ties: bool, blocks: int) -> None:
    """Adversarial: repeated rows (exact ties in q) and tiny chunks; still bit-identical."""
    rng = np.random.default_rng(n * 31 + d)
    base = rng.integers(-2, 3, size=(n, d)).astype(float) if ties else rng.standard_normal((n, d))
    src = ArrayVectors(base)
    bmat = np.eye(d) if ties else rng.standard_normal((d, d))
    ex = DaskPasses(client, blocks=blocks)
    thr = 1.0 if ties else -np.inf
    _same(IN_PROCESS.score(src, bmat, chunk, keep, thr), ex.score(src, bmat, chunk, keep, thr))
    np.testing.assert_array_equal(IN_PROCESS.gram(src, chunk)[0], ex.gram(src, chunk)[0])


def test_two_record_vectors_are_block_sources() -> None:
    src = _two_record(20, 3)
    assert isinstance(src, BlockSource)
    assert not isinstance(ArrayVectors(np.ones((2, 2))), BlockSource)


# ------------------------------------------------------------------------------------------------
# the solver and the design through the executor
# ------------------------------------------------------------------------------------------------
def test_solver_same_certificate(client: Any) -> None:
    """J ~ 1e5: the same iterates, covariance, dual and certificate, to the last digit."""
    src = _two_record(450, 5)  # J = 101025
    w = np.diag(np.linspace(1.0, 3.0, 5))
    prob = CovarianceProgram(src, weight=w, bound=1.0)
    ref = solve_structured(prob, chunk_size=8192)
    ex = DaskPasses(client)
    sol = solve_structured(prob, chunk_size=8192, executor=ex)
    assert sol.stats.passes == ref.stats.passes == len(ex.pass_seconds)
    np.testing.assert_array_equal(sol.covariance, ref.covariance)
    assert sol.value == ref.value
    assert sol.dual is not None and ref.dual is not None
    np.testing.assert_array_equal(sol.dual.support, ref.dual.support)
    np.testing.assert_array_equal(sol.dual.multipliers, ref.dual.multipliers)
    np.testing.assert_array_equal(sol.dual.directions, ref.dual.directions)
    c1 = check(prob, sol.covariance, sol.dual, tol=1e-6)
    c2 = check(prob, ref.covariance, ref.dual, tol=1e-6)
    assert c1.certified and (c1.lower, c1.upper, c1.gap) == (c2.lower, c2.upper, c2.gap)


def test_solver_floor_and_array_source(client: Any) -> None:
    """Noise floor (floor block) on an in-memory array source: same answer."""
    rng = np.random.default_rng(5)
    s = rng.standard_normal((3000, 4)) * np.array([3.0, 1.0, 0.3, 0.1])
    prob = CovarianceProgram(s, bound=2.0, noise_floor=0.5)
    ref = solve_structured(prob, chunk_size=512)
    sol = solve_structured(prob, chunk_size=512, executor=DaskPasses(client, blocks=5))
    np.testing.assert_array_equal(sol.covariance, ref.covariance)


def test_design_covariance_with_client(client: Any) -> None:
    src = _two_record(120, 3)
    budget = ZCDP(rho=0.5)
    ref = design_covariance(src, budget)
    dsg = design_covariance(src, budget, dask=client)
    assert dsg.certified
    np.testing.assert_array_equal(dsg.covariance, ref.covariance)
    assert dsg.certificate.upper == ref.certificate.upper
    assert client.status == "running"  # a caller's client is left open


def test_design_covariance_local_cluster() -> None:
    src = _two_record(60, 2)
    budget = ZCDP(rho=0.5)
    ref = design_covariance(src, budget)
    dsg = design_covariance(src, budget, dask="local")
    np.testing.assert_array_equal(dsg.covariance, ref.covariance)


def test_no_dask_import_by_default() -> None:
    code = (
        "import sys, numpy as np, dpopt, solvers, certificates\n"
        "from dpopt.covariance.design import design_covariance\n"
        "from dpopt.covariance.sensitivity import TwoRecordVectors\n"
        "from dpopt.accounting.budgets import ZCDP\n"
        "src = TwoRecordVectors(np.random.default_rng(0).random((30, 2)), [0.5, 0.5], 0.4)\n"
        "assert design_covariance(src, ZCDP(rho=0.5)).certified\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "print(','.join(bad))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120, check=True)
    assert out.stdout.strip() == ""


# ------------------------------------------------------------------------------------------------
# faults
# ------------------------------------------------------------------------------------------------
def test_worker_lost_mid_pass_same_answer(client: Any, tmp_path: Path) -> None:
    """A worker killed while it computes a block: Dask reruns the block, the answer is unchanged."""
    inner = _two_record(450, 4)  # J = 101025
    marker = tmp_path / "killed"
    src = KillOnce(inner, str(marker), at=inner.count // 2)
    prob_ref = CovarianceProgram(inner, bound=1.0)
    ref = solve_structured(prob_ref, chunk_size=8192)
    sol = solve_structured(CovarianceProgram(src, bound=1.0), chunk_size=8192,
                           executor=DaskPasses(client))
    assert marker.exists()  # the worker really died
    np.testing.assert_array_equal(sol.covariance, ref.covariance)
    assert sol.value == ref.value
    client.wait_for_workers(2, timeout=60)


@pytest.mark.slow
def test_block_that_kills_every_worker_names_a_block(client: Any) -> None:
    """A block whose every attempt kills its worker: PassFailedError naming a block (Dask may
    also give up on a block queued behind it on the dying workers), never a partial result."""
    inner = _two_record(100, 3)  # J = 4950
    src = KillAlways(inner, at=4000)
    ex = DaskPasses(client, blocks=5)  # blocks of 1024: block 3 holds vector 4000
    with pytest.raises(PassFailedError) as err:
        solve_structured(CovarianceProgram(src, bound=1.0), chunk_size=1024, executor=ex)
    msg = str(err.value)
    b, lo, hi = (int(x) for x in re.search(r"block (\d) \(vectors (\d+)\.\.(\d+)\)", msg).groups())
    assert (lo, hi) == (1024 * b, min(1024 * b + 1023, inner.count - 1))
    assert "of the Gram pass could not be computed (its worker was lost" in msg
    client.wait_for_workers(2, timeout=120)


def test_failing_block_names_the_block(client: Any) -> None:
    inner = _two_record(100, 3)
    with pytest.raises(PassFailedError, match=r"block 1 \(vectors 1024\.\..*RuntimeError: disk"):
        DaskPasses(client, blocks=5).gram(Broken(inner, at=1500), 1024)


def test_design_does_not_fall_back_after_a_lost_pass(client: Any) -> None:
    inner = _two_record(40, 2)
    with pytest.raises(PassFailedError, match="block"):
        design_covariance(Broken(inner, at=100), ZCDP(rho=0.5), dask=client)


def test_timeout_names_the_missing_blocks(client: Any) -> None:
    src = Slow(_two_record(30, 2))
    with pytest.raises(PassFailedError, match=r"did not complete within 0.2 s: block \d"):
        DaskPasses(client, blocks=2, timeout=0.2).gram(src, 256)


def test_invalid_data_is_the_in_process_error(client: Any) -> None:
    arr = np.ones((50, 2))
    arr[37, 1] = np.nan
    with pytest.raises(InvalidParameterError, match="finite"):
        DaskPasses(client, blocks=3).gram(ArrayVectors(arr), 8)


def test_bad_arguments(client: Any) -> None:
    with pytest.raises(InvalidTypeError, match="client"):
        DaskPasses("tcp://nowhere")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidParameterError, match="blocks"):
            DaskPasses(client, blocks=bad)
    with pytest.raises(InvalidParameterError, match="timeout"):
        DaskPasses(client, timeout=-1.0)
    with pytest.raises(InvalidParameterError, match="chunk"):
        DaskPasses(client).gram(_two_record(5, 2), 0)
    with pytest.raises(InvalidTypeError, match="dask"):
        design_covariance(np.eye(2), ZCDP(rho=0.5), dask=42)
    with pytest.raises(InvalidParameterError, match="dask"):
        design_covariance(np.eye(2), ZCDP(rho=0.5), dask="everywhere")


def test_unaligned_arrays_are_realigned() -> None:
    """Arrays unpickled on a worker can sit at an odd address; numpy then multiplies them without
    BLAS. ``_aligned`` copies exactly those (same values, aligned), and leaves aligned ones alone;
    an unaligned chunk realigned gives the in-process Gram bit for bit. (Both sides form
    ``a.T @ a`` from one array, as the passes do: numpy 2.4 computes that product by a symmetric
    rank-k update, whose rounding differs from a general product of two copies.)"""
    from solvers.dask_passes import _aligned

    rng = np.random.default_rng(3)
    x = rng.standard_normal((700, 5))
    buf = np.empty(x.nbytes + 8, dtype=np.uint8)
    start = (3 - buf.ctypes.data) % 8 or 3  # an address that is not a multiple of 8
    odd = buf[start:start + x.nbytes].view(np.float64).reshape(x.shape)
    odd[...] = x
    assert not odd.flags.aligned
    fixed = _aligned(odd)
    assert fixed.flags.aligned and fixed is not odd
    np.testing.assert_array_equal(fixed, x)
    assert _aligned(x) is x
    assert _aligned(3.0) == 3.0
    np.testing.assert_array_equal(fixed.T @ fixed, x.T @ x)
    src = ArrayVectors(odd)
    np.testing.assert_array_equal(
        np.sum([(a := _aligned(b)).T @ a for _, b in src.chunks(128)], axis=0),
        np.sum([b.T @ b for _, b in ArrayVectors(x).chunks(128)], axis=0),
    )


def test_small_array_source_same_answer(client: Any) -> None:
    """A small in-memory array without a floor: with an executor, the same answer as in process
    to the last digit (both take the in-memory path), certified by the checker."""
    rng = np.random.default_rng(11)
    s = rng.standard_normal((400, 3)) * np.array([2.0, 1.0, 0.5])
    prob = CovarianceProgram(s, weight=np.diag([1.0, 2.0, 0.5]), bound=1.5)
    ref = solve_structured(prob)
    sol = solve_structured(prob, executor=DaskPasses(client, blocks=3))
    np.testing.assert_array_equal(sol.covariance, ref.covariance)
    assert sol.value == ref.value
    cert = check(prob, sol.covariance, sol.dual, tol=1e-6)
    assert cert.certified, cert.message
