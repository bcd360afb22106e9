"""The certificate check's verification pass as Dask tasks (``chunk_map=DaskPasses.map_chunks``),
``verify_design_file(..., dask=...)`` and ``dpopt verify --dask``.

References: the single-process check on the same inputs (every field of the certificate must be
equal, bit for bit, in float and rigorous mode, with and without the repair loop), and for the
pass itself a brute-force maximum of sᵀΣ⁻¹s (explicit inverse, every vector) which the bound must
cover. A chunk map that does not tile the vectors, or that fails, must never yield a verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certificates.covariance import CovarianceCertificate, check
from certificates.errors import CertificateError, SolverError
from certificates.io import parse_certificate, verify_certificate
from certificates.problem import ArrayVectors, CovarianceProgram
from certificates.rigorous import combine_ratio_chunks, ratio_chunk, ratio_upper_bound
from dpopt.cli import main
from dpopt.covariance.design_file import verify_design_file
from dpopt.covariance.sensitivity import TwoRecordVectors
from solvers.structured import solve_structured
from tests.certificates import mutations as mu

distributed = pytest.importorskip("distributed")
from solvers.dask_passes import DaskPasses, PassFailedError  # noqa: E402


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster: Any) -> Iterator[Any]:
    with distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def solved() -> tuple[CovarianceProgram, Any]:
    """J = 130,816 two-record vectors in R^3 (two default chunks), solved in process."""
    rng = np.random.default_rng(5)
    src = TwoRecordVectors(rng.random((512, 3)), np.array([0.3, 0.6, 0.5]), 0.4)
    prob = CovarianceProgram(src, np.diag([1.0, 2.0, 0.5]), 0.7)
    return prob, solve_structured(prob, tol=1e-8)


def assert_same_certificate(a: CovarianceCertificate, b: CovarianceCertificate) -> None:
    for f in dataclasses.fields(CovarianceCertificate):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        elif isinstance(x, float) and math.isnan(x):
            assert math.isnan(y), f.name
        else:
            assert x == y, (f.name, x, y)


def brute_max(vectors: np.ndarray, sigma: np.ndarray) -> float:
    inv = np.linalg.inv(sigma)
    return float(np.max(np.einsum("ij,jk,ik->i", vectors, inv, vectors)))


# ----------------------------------------------------------------------------- the check


@pytest.mark.parametrize("rigorous", [False, True])
@pytest.mark.parametrize("factor", [1.0, 0.97])  # 0.97: infeasible as given, repaired by scaling
def test_distributed_check_is_the_single_process_check(
    client: Any, solved: tuple[CovarianceProgram, Any], rigorous: bool, factor: float
) -> None:
    prob, sol = solved
    cov = sol.covariance * factor
    ref = check(prob, cov, sol.dual, tol=1e-6, rigorous=rigorous)
    with DaskPasses(client) as ex:
        got = check(prob, cov, sol.dual, tol=1e-6, rigorous=rigorous, chunk_map=ex.map_chunks)
        assert len(ex.pass_seconds) >= 1  # the pass really ran on the cluster
    assert_same_certificate(got, ref)
    if factor == 1.0:
        assert ref.certified and ref.scale == 1.0
    else:
        assert ref.scale > 1.0  # the repair loop made more than one pass


def test_distributed_pass_covers_the_brute_force_maximum(client: Any) -> None:
    rng = np.random.default_rng(9)
    arr = rng.standard_normal((5003, 4))
    a = rng.standard_normal((4, 4))
    sigma = a @ a.T + 0.1 * np.eye(4)
    chol = sla.cholesky(sigma, lower=True)
    lam = float(np.linalg.eigvalsh(sigma)[0]) * (1 - 1e-9)
    src = ArrayVectors(arr)
    ref = ratio_upper_bound(src, sigma, chol, lam, chunk=700)
    with DaskPasses(client, blocks=3) as ex:
        got = ratio_upper_bound(src, sigma, chol, lam, chunk=700, chunk_map=ex.map_chunks)
    assert got == ref
    exact = brute_max(arr, sigma)
    assert ref[0] >= exact and math.isclose(ref[1], exact, rel_tol=1e-10)
    assert ref[2] == int(np.argmax(np.einsum("ij,jk,ik->i", arr, np.linalg.inv(sigma), arr)))


def _local_map(order: str) -> Any:
    """A chunk map run here that fetches each block with ``take`` (not ``chunks``), in a
    scrambled order, and returns the results in chunk order: what a cluster does."""
    def chunk_map(fn: Any, source: Any, chunk: int, args: tuple[Any, ...]) -> list[Any]:
        starts = list(range(0, source.count, chunk))
        todo = starts[::-1] if order == "reverse" else starts
        done = {s: fn(source.take(np.arange(s, min(source.count, s + chunk))), s, *args)
                for s in todo}
        return [done[s] for s in starts]
    return chunk_map


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 300), d=st.integers(1, 5), chunk=st.integers(1, 120),
       seed=st.integers(0, 2**32 - 1), order=st.sampled_from(["forward", "reverse"]),
       tie=st.booleans())
def test_chunk_map_order_and_ties_do_not_change_the_bound(
    n: int, d: int, chunk: int, seed: int, order: str, tie: bool
) -> None:
    rng = np.random.default_rng(seed)
    arr = rng.standard_normal((n, d))
    if tie and n > 1:  # the largest vector repeated: the first index must win everywhere
        arr[rng.integers(0, n, size=3)] = arr[0] * 5
    sigma = np.diag(rng.uniform(0.5, 2.0, d))
    chol = sla.cholesky(sigma, lower=True)
    src = ArrayVectors(arr)
    lam = float(np.min(np.diag(sigma))) * (1 - 1e-12)
    ref = ratio_upper_bound(src, sigma, chol, lam, chunk=chunk)
    got = ratio_upper_bound(src, sigma, chol, lam, chunk=chunk, chunk_map=_local_map(order))
    assert got == ref
    exact = brute_max(arr, sigma)
    assert ref[0] >= exact


def test_chunks_that_do_not_tile_are_rejected() -> None:
    arr = np.random.default_rng(1).standard_normal((10, 2))
    sigma, chol = np.eye(2), np.eye(2)
    parts = [ratio_chunk(arr[s:s + 4], s, sigma, chol, 1.0) for s in (0, 4, 8)]
    assert combine_ratio_chunks(parts, 10)[0] >= brute_max(arr, sigma)
    for bad, count in ((parts[:2], 10), ([parts[0], parts[2]], 10), (parts[::-1], 10),
                       ([parts[0], parts[0], parts[1], parts[2]], 10), (parts, 11)):
        with pytest.raises(ValueError, match="verification pass"):
            combine_ratio_chunks(bad, count)
    # a NaN anywhere makes the bound infinite (never a finite bound that skips a vector)
    nan = arr.copy()
    nan[5, 1] = np.nan
    assert ratio_upper_bound(ArrayVectors(nan), sigma, chol, 1.0, chunk=4)[0] == math.inf


# ----------------------------------------------------------------------------- design files


@pytest.fixture(scope="module")
def design_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """CLI design files whose vectors are NOT stored (only the generator description)."""
    import dpopt.cli.design as cli_design

    tmp = tmp_path_factory.mktemp("dv")
    specs = {
        "float": ["--domain", "grid:lo=0,hi=1,n=5,d=3", "--query", "0.3,0.6,0.5",
                  "--denoiser-sigma", "0.4", "--budget", "approx:epsilon=1,delta=1e-6"],
        "rigorous": ["--domain", "grid:lo=0,hi=1,n=4,d=2", "--query", "0.2,0.7",
                     "--denoiser-sigma", "0.5", "--budget", "gdp:mu=1", "--relation",
                     "replacement", "--rigorous"],
    }
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli_design, "MAX_STORED_FLOATS", 10)  # description only, at CI size
        for name, argv in specs.items():
            path = tmp / f"{name}.json"
            assert _cli(["-q", "design", *argv, "-o", str(path)])[0] == 0
            assert json.loads(path.read_text())["problem"]["vectors"] is None
            out[name] = path
    return out


@pytest.mark.parametrize("name", ["float", "rigorous"])
def test_verify_design_file_on_a_cluster_is_the_single_process_verdict(
    client: Any, cluster: Any, design_files: dict[str, Path], name: str
) -> None:
    path = design_files[name]
    ref = verify_design_file(path)
    got = verify_design_file(path, dask=client)
    assert_same_certificate(got.certificate, ref.certificate)
    assert (got.budget_bound, got.guaranteed_bound, got.relation) == (
        ref.budget_bound, ref.guaranteed_bound, ref.relation)
    by_address = verify_design_file(path, dask=cluster.scheduler_address, rigorous=True)
    assert_same_certificate(by_address.certificate,
                            verify_design_file(path, rigorous=True).certificate)


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_cli_verify_dask_prints_the_same_check(
    cluster: Any, design_files: dict[str, Path], tmp_path: Path
) -> None:
    path = design_files["float"]
    code, ref, err = _cli(["-q", "verify", str(path), "--json"])
    assert code == 0, err
    code, got, err = _cli(["-q", "verify", str(path), "--json", "--dask",
                           cluster.scheduler_address])
    assert code == 0, err
    assert json.loads(got) == json.loads(ref)
    # an edited file (Σ shrunk below feasibility, digests recomputed) is rejected alike
    content = json.loads(path.read_text())
    content["covariance"] = (np.asarray(content["covariance"]) * 0.9).tolist()
    bad = tmp_path / "bad.json"
    bad.write_text(mu.render(content))
    code_ref, out_ref, _ = _cli(["-q", "verify", str(bad), "--json"])
    code, out, _ = _cli(["-q", "verify", str(bad), "--json", "--dask", cluster.scheduler_address])
    assert code == code_ref == 1
    assert json.loads(out) == json.loads(out_ref)
    assert "not strictly feasible" in json.loads(out)["reason"]
    code, out, _ = _cli(["verify", "--help"])
    assert code == 0 and "--dask local|ADDRESS" in out and "sha256" in out


def test_a_failed_distributed_pass_is_no_verdict(design_files: dict[str, Path]) -> None:
    cf = parse_certificate(design_files["float"])
    from dpopt.covariance.description import parse_description, sensitivity_from_description

    src = sensitivity_from_description(parse_description(cf.vectors_description))

    def failing(fn: Any, source: Any, chunk: int, args: tuple[Any, ...]) -> list[Any]:
        raise PassFailedError("block 0 (vectors 0..9) of the verification pass was lost")

    def dropping(fn: Any, source: Any, chunk: int, args: tuple[Any, ...]) -> list[Any]:
        return _local_map("forward")(fn, source, chunk, args)[:-1] or [None]

    with pytest.raises(SolverError, match="block 0"):  # neither "holds" nor "does not hold"
        verify_certificate(cf, source=src, chunk_map=failing)
    with pytest.raises(CertificateError, match="cannot run"):
        verify_certificate(cf, source=src, chunk_map=dropping)
    assert isinstance(verify_certificate(cf, source=src), CovarianceCertificate)
