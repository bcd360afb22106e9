"""Sensitivity sets and the Mahalanobis sup, verified by brute force over datasets (the two-record
theorem)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.problem import VectorSource
from dpopt.covariance import (
    BoxVertexDifferences,
    TwoRecordVectors,
    UniformQueryVectors,
    add_remove_set,
    prune,
    sup_mahalanobis,
    uniform_query_set,
)
from dpopt.covariance.denoiser import deletion_shifts, posterior_mean, two_record_vector
from dpopt.covariance.domains import Box, FinitePoints, Grid
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import replacement_sup


def _random_spd(rng: np.random.Generator, d: int, ridge: float = 0.05) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return a @ a.T + ridge * np.eye(d)


def _brute_quadratic_sup(vectors: np.ndarray, prec: np.ndarray) -> float:
    return float(max(v @ prec @ v for v in vectors))


# ------------------------------------------------------------------------------------------
# the vector sources


def test_two_record_vectors_are_the_longer_of_each_pair() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 3))
    g = rng.normal(size=3)
    src = TwoRecordVectors(x, g, 0.6)
    assert isinstance(src, VectorSource)
    assert (src.count, src.dim) == (21, 3)
    dense = src.dense()
    for j, (i, k) in enumerate(itertools.combinations(range(7), 2)):
        a = two_record_vector(x[i], x[k], g, 0.6)
        b = two_record_vector(x[k], x[i], g, 0.6)
        longer = a if np.linalg.norm(a) >= np.linalg.norm(b) else b
        np.testing.assert_allclose(dense[j], longer, atol=1e-15)
        # antiparallel: a and b are opposite multiples of x_i - x_k
        assert np.dot(a, b) <= 0
    xi, yi = src.ordered_pairs(np.arange(src.count))
    np.testing.assert_allclose(dense, two_record_vector(x[xi], x[yi], g, 0.6), atol=1e-15)


def test_chunks_deterministic_and_take_consistent() -> None:
    rng = np.random.default_rng(1)
    src = TwoRecordVectors(rng.normal(size=(30, 2)), [0.1, 0.2], 0.5)
    whole = src.dense()
    for size in (1, 7, 64, 10_000):
        starts, blocks = zip(*src.chunks(size), strict=True)
        assert starts[0] == 0 and all(b.shape[0] <= size for b in blocks)
        np.testing.assert_array_equal(np.concatenate(blocks), whole)
    idx = np.array([0, 5, 434, 17], dtype=np.intp)
    np.testing.assert_array_equal(src.take(idx), whole[idx])
    with pytest.raises(InvalidParameterError):
        src.take(np.array([435]))
    with pytest.raises(InvalidParameterError):
        list(src.chunks(0))


def test_two_record_pass_covers_every_pair_once() -> None:
    rng = np.random.default_rng(2)
    src = TwoRecordVectors(rng.random((1000, 20)), rng.random(20), 0.3)
    assert src.count == 499_500
    starts, total = [], 0
    for start, b in src.chunks(100_000):
        assert start == total and b.shape[1] == 20
        starts.append(start)
        total += b.shape[0]
    assert total == src.count and len(starts) >= 5
    # chunks at any size give the same vectors (spot check against take)
    idx = np.array([0, 1, 99_999, 100_000, 499_499])
    by_chunks = np.concatenate([b for _, b in src.chunks(100_000)])[idx]
    assert np.array_equal(by_chunks, src.take(idx))


def test_uniform_query_vectors_and_box_vertices() -> None:
    rng = np.random.default_rng(3)
    p = rng.normal(size=(6, 2))
    uq = uniform_query_set(p)
    assert isinstance(uq, UniformQueryVectors)
    diffs = np.array([a - b for a, b in itertools.combinations(p, 2)])
    np.testing.assert_allclose(uq.dense(), diffs)
    box = Box([0.0, 1.0, -1.0], [1.0, 3.0, 0.5])
    bv = uniform_query_set(box)
    assert isinstance(bv, BoxVertexDifferences) and bv.count == 4
    verts = box.vertices()
    all_diffs = np.array([a - b for a in verts for b in verts])
    prec = np.linalg.inv(_random_spd(rng, 3))
    assert sup_mahalanobis(bv, np.linalg.inv(prec)).value == pytest.approx(
        _brute_quadratic_sup(all_diffs, prec), rel=1e-12
    )
    # a grid has the same uniform-query sup as its box (it contains the vertices)
    grid = Grid(box.lower, box.upper, (3, 2, 4))
    assert isinstance(uniform_query_set(grid), BoxVertexDifferences)
    cov = np.linalg.inv(prec)
    grid_pairs = UniformQueryVectors(grid)
    assert sup_mahalanobis(grid_pairs, cov).value == pytest.approx(
        sup_mahalanobis(bv, cov).value, rel=1e-12
    )


# ------------------------------------------------------------------------------------------
# the two-record theorem / the uniform-query corollary / replacement by brute force over datasets


def test_theorem1_brute_force_over_multisets() -> None:
    rng = np.random.default_rng(4)
    worst = {2: 0.0, 3: 0.0}
    for _ in range(60):
        m = int(rng.integers(2, 7))
        d = int(rng.integers(1, 4))
        dom = rng.normal(size=(m, d))
        g = rng.normal(size=d) * 1.5
        sigma = float(rng.uniform(0.3, 2.0))
        src = add_remove_set(FinitePoints(dom), g, sigma)
        for _ in range(3):
            cov = _random_spd(rng, d)
            prec = np.linalg.inv(cov)
            sup = sup_mahalanobis(src, cov)
            # attained by a two-point dataset: the maximiser is a deletion shift of {x, y}
            x_i, y_i = src.ordered_pairs(np.array([sup.index]))
            pair = np.stack([dom[x_i[0]], dom[y_i[0]]])
            shift = deletion_shifts(pair, g, sigma)[0]
            assert shift @ prec @ shift == pytest.approx(sup.value, rel=1e-10)
            for n in range(2, 9):
                data = dom[rng.integers(0, m, size=n)]
                shifts = deletion_shifts(data, g, sigma)  # checked in test_denoiser
                vals = np.einsum("ij,jk,ik->i", shifts, prec, shifts)
                assert np.all(vals <= sup.value * (1 + 1e-10))
                if sup.value > 0:
                    worst[min(n, 3)] = max(worst[min(n, 3)], float(vals.max()) / sup.value)
    assert max(worst.values()) <= 1.0 + 1e-10
    print(
        f"largest ratio s^T P s / two-record sup: n = 2: {worst[2]:.12f}, n >= 3: {worst[3]:.12f}"
    )


def test_corollary1_uniform_query_dominates_and_is_approached() -> None:
    rng = np.random.default_rng(5)
    dom = rng.normal(size=(5, 2))
    cov = _random_spd(rng, 2)
    uni = sup_mahalanobis(uniform_query_set(dom), cov).value
    for _ in range(20):
        fixed = sup_mahalanobis(add_remove_set(dom, rng.normal(size=2) * 3, 0.7), cov).value
        assert fixed <= uni * (1 + 1e-12)
    # along g_gamma = x + gamma (x - y) the two-record vector tends to x - y
    best = sup_mahalanobis(uniform_query_set(dom), cov)
    x_y = best.vector
    i, k = next(
        (i, k)
        for i, k in itertools.permutations(range(5), 2)
        if np.allclose(dom[i] - dom[k], x_y, atol=1e-15)
    )
    prec = np.linalg.inv(cov)
    vals = []
    for gamma in (0.0, 1.0, 5.0, 50.0):
        t = two_record_vector(dom[i], dom[k], dom[i] + gamma * (dom[i] - dom[k]), 0.7)
        vals.append(float(t @ prec @ t))
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(vals))
    assert vals[-1] == pytest.approx(uni, rel=1e-12)


def test_replacement_bound_holds_by_brute_force() -> None:
    rng = np.random.default_rng(6)
    worst = 0.0
    for _ in range(15):
        dom = rng.normal(size=(4, 2))
        g = rng.normal(size=2)
        cov = _random_spd(rng, 2)
        prec = np.linalg.inv(cov)
        rho_ar = sup_mahalanobis(add_remove_set(dom, g, 0.8), cov).value
        bound = replacement_sup(rho_ar, "replacement")
        assert bound >= 4 * rho_ar and bound == pytest.approx(4 * rho_ar, rel=1e-15)
        for n in range(2, 6):
            data = dom[rng.integers(0, 4, size=n)]
            for k in range(n):
                for new in dom:
                    other = data.copy()
                    other[k] = new
                    v = posterior_mean(data, g, 0.8) - posterior_mean(other, g, 0.8)
                    worst = max(worst, float(v @ prec @ v) / bound)
    assert worst <= 1 + 1e-10
    with pytest.raises(InvalidParameterError):
        replacement_sup(-1.0, "replacement")


# ------------------------------------------------------------------------------------------
# Mahalanobis sup


def test_sup_isotropic_closed_form_and_chunking() -> None:
    rng = np.random.default_rng(7)
    v = rng.normal(size=(500, 4))
    res = sup_mahalanobis(v, 2.5 * np.eye(4), chunk_size=37)
    assert res.value == pytest.approx(np.max(np.sum(v**2, axis=1)) / 2.5, rel=1e-13)
    assert res.exact and res.method == "enumeration"
    np.testing.assert_array_equal(res.vector, v[res.index])
    assert res.value <= res.upper <= res.value * (1 + 1e-9)
    assert float(res) == res.upper
    cov = _random_spd(rng, 4)
    brute = _brute_quadratic_sup(v, np.linalg.inv(cov))
    assert sup_mahalanobis(v, cov, chunk_size=1).value == pytest.approx(brute, rel=1e-11)


def test_box_sdp_bound_is_valid() -> None:
    rng = np.random.default_rng(8)
    for d in (6, 9):
        box = Box(np.zeros(d), rng.uniform(0.5, 2.0, size=d))
        src = BoxVertexDifferences(box)
        for _ in range(3):
            cov = _random_spd(rng, d, ridge=0.1)
            exact = sup_mahalanobis(src, cov)
            bound = sup_mahalanobis(src, cov, max_enumeration_dim=3)
            assert exact.exact and not bound.exact and bound.method == "sdp_relaxation"
            assert bound.value >= exact.value * (1 - 1e-12)
            assert bound.lower <= exact.value * (1 + 1e-12)
            prec = np.linalg.inv(cov)
            assert bound.vector @ prec @ bound.vector == pytest.approx(bound.lower, rel=1e-9)
            naive = np.sum(box.side_lengths**2) * np.linalg.eigvalsh(prec)[-1]
            assert bound.value <= naive * (1 + 1e-9)


def test_box_high_dimension_falls_back_to_bound() -> None:
    rng = np.random.default_rng(9)
    d = 24
    cov = _random_spd(rng, d, ridge=0.5)
    res = sup_mahalanobis(uniform_query_set(Box(np.zeros(d), np.ones(d))), cov)
    assert not res.exact
    assert res.lower <= res.value
    assert res.value <= d * np.linalg.eigvalsh(np.linalg.inv(cov))[-1] * (1 + 1e-9)


# ------------------------------------------------------------------------------------------
# pruning


@pytest.mark.parametrize(("d", "method"), [(2, "hull"), (3, "auto"), (3, "lp"), (7, "lp")])
def test_pruning_preserves_sup(d: int, method: str) -> None:
    rng = np.random.default_rng(10 + d)
    m = 25 if method != "lp" else 16
    src = TwoRecordVectors(rng.normal(size=(m, d)), rng.normal(size=d), 0.8)
    pruned = prune(src, method=method)
    assert pruned.count <= src.count
    if d == 2:
        assert pruned.count < src.count / 4
    np.testing.assert_array_equal(pruned.vectors, src.take(pruned.indices))
    for _ in range(25):
        cov = _random_spd(rng, d, ridge=0.01)
        assert sup_mahalanobis(pruned, cov).value == pytest.approx(
            sup_mahalanobis(src, cov).value, rel=1e-12
        )


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(2, 4))
def test_pruning_random_sets_and_antiparallel(seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(20, d))
    v = np.vstack([v, -v[:5], 0.5 * v[5:8], np.zeros((1, d))])  # antiparallel, shorter, zero
    pruned = prune(v)
    canon = {tuple(np.round(x * np.sign(x[np.argmax(x != 0)]), 12)) for x in pruned.vectors}
    assert len(canon) == pruned.count  # no antiparallel duplicates kept
    for _ in range(10):
        cov = _random_spd(rng, d, ridge=0.01)
        assert sup_mahalanobis(pruned, cov).value == pytest.approx(
            sup_mahalanobis(v, cov).value, rel=1e-12
        )


def test_pruning_rank_deficient_set() -> None:
    # two-record vectors of m <= d points span m - 1 dimensions
    rng = np.random.default_rng(11)
    src = TwoRecordVectors(rng.normal(size=(4, 6)), rng.normal(size=6), 1.0)
    pruned = prune(src)
    for _ in range(10):
        cov = _random_spd(rng, 6)
        assert sup_mahalanobis(pruned, cov).value == pytest.approx(
            sup_mahalanobis(src, cov).value, rel=1e-12
        )


# ------------------------------------------------------------------------------------------
# bad input


def test_bad_input() -> None:
    box = Box([0.0, 0.0], [1.0, 1.0])
    with pytest.raises(InvalidParameterError) as err:
        add_remove_set(box, [0.0], 1.0)
    assert err.value.name == "query"
    with pytest.raises(InvalidParameterError) as err:
        TwoRecordVectors(box, [0.0, 0.0], 1.0)
    assert "add_remove_set(box, query, sigma)" in str(err.value)
    with pytest.raises(InvalidParameterError) as err:
        add_remove_set([[0.0, 0.0], [1.0, 1.0]], [0.0], 1.0)
    assert err.value.name == "query"
    with pytest.raises(InvalidParameterError) as err:
        add_remove_set([[0.0, 0.0], [1.0, 1.0]], [0.0, 0.0], 0.0)
    assert err.value.name == "sigma"
    with pytest.raises(InvalidParameterError) as err:
        TwoRecordVectors([[0.0, 0.0]], [0.0, 0.0], 1.0)
    assert err.value.name == "points"
    v = [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(InvalidParameterError) as err:
        sup_mahalanobis(v, [[1.0, 0.5], [0.0, 1.0]])
    assert err.value.name == "covariance"
    with pytest.raises(InvalidParameterError) as err:
        sup_mahalanobis(v, [[1.0, 0.0], [0.0, -1.0]])
    assert err.value.name == "covariance"
    with pytest.raises(InvalidParameterError) as err:
        sup_mahalanobis(v, np.eye(3))
    assert err.value.name == "covariance"
    with pytest.raises(InvalidParameterError) as err:
        sup_mahalanobis([[np.nan, 1.0]], np.eye(2))
    assert err.value.name == "vectors"
    with pytest.raises(InvalidTypeError):
        sup_mahalanobis(box, np.eye(2))
    with pytest.raises(InvalidParameterError):
        prune(v, method="qhull")
