"""Couplings: quantile (1-D), POT network simplex, cvxpy LP; W_inf bottleneck
(Santambrogio, ch. 2)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp
from scipy.stats import binom

from dpopt.errors import InvalidParameterError
from solvers.transport import (
    bottleneck_coupling,
    capped_costs,
    coupling_lp_dual,
    coupling_lp_primal,
    emd_coupling,
    lp_coupling,
    quantile_coupling,
)


def _marginals(c, n, m):
    return (
        np.bincount(c.rows, weights=c.mass, minlength=n),
        np.bincount(c.cols, weights=c.mass, minlength=m),
    )


def _rand_law(rng, k):
    w = rng.random(k) + 0.05
    return w / w.sum()


def test_quantile_r1_pieces() -> None:
    c = quantile_coupling([0, 1, 2], [0.5, 0.3, 0.2], [0, 1, 2, 3], [0.2, 0.3, 0.3, 0.2])
    got = sorted(zip(c.rows.tolist(), c.cols.tolist(), np.round(c.mass, 14).tolist(), strict=True))
    assert got == [(0, 0, 0.2), (0, 1, 0.3), (1, 2, 0.3), (2, 3, 0.2)]


def test_quantile_r2_shift_masses() -> None:
    k = np.arange(11.0)
    p, q = binom.pmf(k, 10, 0.3), binom.pmf(k, 10, 0.5)
    c = quantile_coupling(k, p, k, q)
    shift = np.abs(k[c.rows] - k[c.cols]).astype(int)
    masses = np.bincount(shift, weights=c.mass)
    np.testing.assert_allclose(
        masses, [0.0009824674, 0.0595238591, 0.8780048796, 0.0614887939], atol=1e-10
    )
    assert shift.max() == 3
    assert float(c.mass @ shift) == pytest.approx(2.0, rel=1e-12)


def test_quantile_unsorted_input_and_marginals() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=7), rng.normal(size=5) + 1
    p, q = _rand_law(rng, 7), _rand_law(rng, 5)
    c = quantile_coupling(x, p, y, q)
    r, s = _marginals(c, 7, 5)
    np.testing.assert_allclose(r, p, atol=1e-15)
    np.testing.assert_allclose(s, q, atol=1e-15)
    assert c.rows.size <= 7 + 5 - 1
    # comonotone: no crossing pieces
    for (i1, j1), (i2, j2) in itertools.combinations(zip(c.rows, c.cols, strict=True), 2):
        assert (x[i1] - x[i2]) * (y[j1] - y[j2]) >= 0


def _fraction_comonotone(x, p, y, q):
    """Independent exact comonotone coupling: the quantile functions of the exactly normalised
    laws evaluated on the merged breakpoints (Fractions, no integer scaling)."""
    from fractions import Fraction

    px = [Fraction(float(v)) for v in p]
    qy = [Fraction(float(v)) for v in q]
    tp, tq = sum(px), sum(qy)
    ox, oy = np.argsort(x, kind="stable"), np.argsort(y, kind="stable")
    cp = list(itertools.accumulate(px[i] / tp for i in ox))
    cq = list(itertools.accumulate(qy[j] / tq for j in oy))
    breaks = sorted(set(cp) | set(cq))
    out = {}
    prev = Fraction(0)
    for t in breaks:
        i = next(k for k, c in enumerate(cp) if c >= t)
        j = next(k for k, c in enumerate(cq) if c >= t)
        key = (int(ox[i]), int(oy[j]))
        out[key] = out.get(key, Fraction(0)) + (t - prev)
        prev = t
    return {k: v for k, v in out.items() if v > 0}


def _exact_pieces(c):
    from fractions import Fraction

    assert c.exact is not None
    return {
        (int(i), int(j)): Fraction(v, c.exact.denominator)
        for i, j, v in zip(c.rows, c.cols, c.exact.numerators, strict=True)
    }


def test_quantile_keeps_tiny_far_atom_exactly() -> None:
    # issue 12: an atom of mass 1e-13 at 300 used to be merged away (cumulative sums within
    # 1e-12 snapped), so the far piece vanished and the calibration under-noised
    x, p = [0.0, 10.0], [0.5, 0.5]
    y, q = [1.0, 11.0, 300.0], [0.5, 0.5 - 1e-13, 1e-13]
    c = quantile_coupling(x, p, y, q)
    pieces = _exact_pieces(c)
    assert pieces == _fraction_comonotone(x, p, y, q)
    assert (1, 2) in pieces and float(pieces[(1, 2)]) == pytest.approx(1e-13, rel=1e-3)
    # P = delta_0 vs Q = {0: 1 - 1e-13, 100: 1e-13}: W_inf = 100, not 0
    c = quantile_coupling([0.0], [1.0], [0.0, 100.0], [1 - 1e-13, 1e-13])
    assert float(np.max(np.abs(np.array([0.0])[c.rows] - np.array([0.0, 100.0])[c.cols]))) == 100


def test_quantile_binomial_no_roundoff_pieces() -> None:
    # issue 12: ~1e-16 round-off pieces coupled far atoms and inflated W_inf
    k = np.arange(101)
    p, q = binom.pmf(k, 100, 0.1), binom.pmf(k, 100, 0.2)
    c = quantile_coupling(k, p, k, q)
    assert _exact_pieces(c) == _fraction_comonotone(k, p, k, q)
    r, s = _marginals(c, 101, 101)
    np.testing.assert_allclose(r, p / p.sum(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(s, q / q.sum(), rtol=1e-14, atol=0)


def test_quantile_decimal_sliver_and_snap() -> None:
    # 0.1 + 0.2 != 0.3: as exact binary fractions these laws differ by ~3e-17, so the exact
    # coupling has that sliver; snap moves it onto P's cumulative sum (priced by a certificate's
    # perturbation bound instead)
    x, p, y, q = [0, 1], [0.1 + 0.2, 0.7], [0, 1], [0.3, 0.7]
    exact = _exact_pieces(quantile_coupling(x, p, y, q))
    assert exact == _fraction_comonotone(x, p, y, q)
    assert (0, 1) in exact and float(exact[(0, 1)]) < 1e-16
    snapped = quantile_coupling(x, p, y, q, snap=1e-9)
    assert sorted(_exact_pieces(snapped)) == [(0, 0), (1, 1)]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12),
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12),
    st.lists(st.floats(1e-300, 1.0), min_size=24, max_size=24),
)
def test_property_quantile_matches_fractions(xs, ys, ws) -> None:
    # adversarial: duplicates, huge ranges, masses near 1e-300 (exact arithmetic throughout)
    p = np.array(ws[: len(xs)])
    q = np.array(ws[12 : 12 + len(ys)])
    p, q = p / p.sum(), q / q.sum()
    c = quantile_coupling(xs, p, ys, q)
    assert _exact_pieces(c) == _fraction_comonotone(xs, p, ys, q)
    assert len(c.rows) <= len(xs) + len(ys) - 1


def _convex_log_costs(x, y, kind, scale):
    z = np.abs(x[:, None] - y[None, :]) / scale
    a = 3.0
    if kind == "gauss":
        return a * (a - 1) * z**2 / 2
    if kind == "ratio":
        return (a - 1) * z
    return (a - 1) * z + np.log(a / (2 * a - 1) + (a - 1) / (2 * a - 1) * np.exp(-(2 * a - 1) * z))


@pytest.mark.parametrize("kind", ["gauss", "ratio", "lap"])
def test_quantile_equals_pot_and_cvxpy(kind: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(4):
        n, m = rng.integers(2, 9, size=2)
        x, y = rng.integers(-4, 5, size=n).astype(float), rng.normal(size=m) * 2
        p, q = _rand_law(rng, n), _rand_law(rng, m)
        lc = _convex_log_costs(x, y, kind, 0.7)
        cq = quantile_coupling(x, p, y, q)
        vq = cq.log_value(lc[cq.rows, cq.cols])
        ce = emd_coupling(p, q, lc, shift=vq)
        ve = ce.log_value(lc[ce.rows, ce.cols])
        cl = lp_coupling(p, q, lc, shift=vq)
        vl = cl.log_value(lc[cl.rows, cl.cols])
        assert ve == pytest.approx(vq, rel=1e-10, abs=1e-10)
        assert vl == pytest.approx(vq, rel=1e-7, abs=1e-9)
        # dual potentials: lower bound equals the optimum (capping is inactive here)
        for c in (ce, cl):
            assert c.row_potential is not None and c.col_potential is not None
            low = p @ c.row_potential + q @ c.col_potential
            assert np.log(low) + c.potential_shift == pytest.approx(vq, rel=1e-6, abs=1e-8)


def test_brute_force_small_lp_matches_emd() -> None:
    # 2x2 transport polytope is one-dimensional: scan it
    p, q = np.array([0.4, 0.6]), np.array([0.7, 0.3])
    lc = np.array([[0.0, 3.0], [1.0, 0.5]])
    t = np.linspace(max(0, p[0] - q[1]), min(p[0], q[0]), 200001)
    plans = np.stack([t, p[0] - t, q[0] - t, p[1] - q[0] + t], axis=1)
    vals = logsumexp(lc.ravel()[None, :], b=plans, axis=1)
    ce = emd_coupling(p, q, lc)
    assert ce.log_value(lc[ce.rows, ce.cols]) == pytest.approx(vals.min(), abs=1e-9)


def test_concave_cost_quantile_is_not_optimal() -> None:
    # concave cost: sqrt|z| on P={0,1}, Q={1,2}: LP 0.70711 < 1.0 (monotone)
    x, y, p = np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([0.5, 0.5])
    lc = 0.5 * np.log(np.abs(x[:, None] - y[None, :]) + 1e-300)
    cq = quantile_coupling(x, p, y, p)
    ce = emd_coupling(p, p, np.maximum(lc, -300.0), shift=0.0)
    assert np.exp(cq.log_value(lc[cq.rows, cq.cols])) == pytest.approx(1.0)
    assert np.exp(ce.log_value(lc[ce.rows, ce.cols])) == pytest.approx(np.sqrt(0.5), rel=1e-9)


def test_emd_capped_costs_do_not_collapse() -> None:
    # pitfall: costs spanning hundreds of orders of magnitude
    x = np.array([0.0, 1.0, 2.0, 40.0])
    y = np.array([0.5, 1.5, 30.0])
    p, q = np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.375, 0.5, 0.125])
    lc = 5.0 * (x[:, None] - y[None, :]) ** 2  # up to ~8000 in log
    naive = np.exp(lc - lc.max())  # what the pitfall does
    assert np.count_nonzero(naive) < naive.size  # underflow happens
    cq = quantile_coupling(x, p, y, q)
    best = cq.log_value(lc[cq.rows, cq.cols])
    for shift in (None, best, best - 20.0):
        ce = emd_coupling(p, q, lc, shift=shift)
        assert ce.log_value(lc[ce.rows, ce.cols]) == pytest.approx(best, rel=1e-12)
    # far from the optimum: still a valid coupling with an exact value >= the optimum, and the
    # potentials give a valid lower bound
    ce = emd_coupling(p, q, lc, shift=1.0)
    assert ce.log_value(lc[ce.rows, ce.cols]) >= best - 1e-9
    assert ce.row_potential is not None and ce.col_potential is not None
    low = p @ ce.row_potential + q @ ce.col_potential
    assert low <= 0 or np.log(low) + ce.potential_shift <= best + 1e-9
    cap = capped_costs(lc, 1.0)
    assert np.all(cap <= np.exp(np.minimum(lc - 1.0, 700)))
    assert cap.max() <= np.exp(12.0) * (1 + np.log1p(lc.max()))
    # increasing above the cap: the LP can still rank two far pairs
    assert np.all(np.diff(capped_costs(np.linspace(0, 5000, 200), 1.0)) > 0)


def test_lp_routes_rank_costs_above_the_cap() -> None:
    # issue 12: with every option for a tiny far atom above the e^12 cap, the LP could not tell
    # which is cheaper (old emd: log value 12.21 where 8.87 is optimal)
    x, y = np.array([0.0, 10.0, 100.0]), np.array([1.0, 11.0])
    p, q = np.array([0.5 - 2.0**-30, 0.5, 2.0**-30]), np.array([0.5, 0.5])
    lc = np.abs(x[:, None] - y[None, :]) / 3.0
    cq = quantile_coupling(x, p, y, q)  # optimal: the cost is convex in the shift
    best = cq.log_value(lc[cq.rows, cq.cols])
    for solve in (emd_coupling, lp_coupling):
        for shift in (0.0, 1.0):
            c = solve(p, q, lc, shift=shift)
            assert c.log_value(lc[c.rows, c.cols]) == pytest.approx(best, rel=1e-9)


def test_lp_primal_dual_programs_agree() -> None:
    rng = np.random.default_rng(3)
    p, q = _rand_law(rng, 4), _rand_law(rng, 5)
    cost = rng.random((4, 5))
    prim, _, _ = coupling_lp_primal(p, q, cost)
    dual, _, _ = coupling_lp_dual(p, q, cost)
    prim.solve(solver="CLARABEL")
    dual.solve(solver="CLARABEL")
    assert prim.value == pytest.approx(dual.value, rel=1e-6)


def test_bottleneck_matches_quantile_in_1d_and_brute_force() -> None:
    rng = np.random.default_rng(5)
    for _ in range(5):
        n, m = rng.integers(2, 6, size=2)
        x, y = rng.integers(0, 6, size=n).astype(float), rng.integers(0, 6, size=m).astype(float)
        p, q = _rand_law(rng, n), _rand_law(rng, m)
        dist = np.abs(x[:, None] - y[None, :])
        w, c = bottleneck_coupling(p, q, dist)
        cq = quantile_coupling(x, p, y, q)
        assert w == pytest.approx(np.max(np.abs(x[cq.rows] - y[cq.cols])))
        r, s = _marginals(c, n, m)
        np.testing.assert_allclose(r, p, atol=1e-12)
        np.testing.assert_allclose(s, q, atol=1e-12)


def test_bottleneck_2d() -> None:
    # two points swapped diagonally: W_inf = distance of the matching
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    y = np.array([[1.0, 0.1], [0.0, 0.1]])
    dist = np.linalg.norm(x[:, None] - y[None], axis=-1)
    w, c = bottleneck_coupling([0.5, 0.5], [0.5, 0.5], dist)
    assert w == pytest.approx(0.1)
    assert sorted(zip(c.rows.tolist(), c.cols.tolist(), strict=True)) == [(0, 1), (1, 0)]


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.integers(-5, 5), min_size=1, max_size=6),
    st.lists(st.integers(-5, 5), min_size=1, max_size=6),
    st.integers(0, 2**31 - 1),
)
def test_property_quantile_marginals_and_optimality(xs, ys, seed) -> None:
    rng = np.random.default_rng(seed)
    x, y = np.array(xs, float), np.array(ys, float)
    p, q = _rand_law(rng, x.size), _rand_law(rng, y.size)
    c = quantile_coupling(x, p, y, q)
    r, s = _marginals(c, x.size, y.size)
    np.testing.assert_allclose(r, p, atol=1e-12)
    np.testing.assert_allclose(s, q, atol=1e-12)
    lc = _convex_log_costs(x, y, "lap", 1.3)
    ce = emd_coupling(p, q, lc, shift=1.0)
    assert c.log_value(lc[c.rows, c.cols]) <= ce.log_value(lc[ce.rows, ce.cols]) + 1e-12


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (([0, 1], [0.5, 0.6], [0], [1.0]), "p"),
        (([0, 1], [1.2, -0.2], [0], [1.0]), "p"),
        (([0, 1], [0.5, 0.5], [0], [0.9]), "q"),
        (([0, 1], [0.5, 0.5], [], []), "y"),
        (([0, np.nan], [0.5, 0.5], [0], [1.0]), "x"),
        (([0, 1, 2], [0.5, 0.5], [0], [1.0]), "p"),
    ],
)
def test_quantile_bad_inputs(args, name) -> None:
    with pytest.raises(InvalidParameterError) as err:
        quantile_coupling(*args)
    assert err.value.name == name


def test_lp_bad_shapes() -> None:
    with pytest.raises(InvalidParameterError, match="log_cost"):
        emd_coupling([0.5, 0.5], [1.0], np.zeros((2, 2)))
    with pytest.raises(InvalidParameterError, match="log_cost"):
        lp_coupling([0.5, 0.5], [1.0], np.full((2, 1), np.inf))
