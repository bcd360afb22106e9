"""The certified sup of the two-record form over a box, against searches from the formula."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.box_sup import certified_box_sup, two_record_form_bounds
from certificates.errors import InvalidParameterError, InvalidTypeError
from tests.box_reference import independent_box_sup as _independent_sup
from tests.box_reference import two_record_form as _form


def _spd(rng, d, ridge=0.2):
    m = rng.normal(size=(d, d))
    return m @ m.T + ridge * np.eye(d)


@settings(max_examples=25)
@given(
    st.integers(1, 3),
    st.sampled_from(["centre", "vertex", "outside", "inside"]),
    st.floats(-2.0, 1.0),  # log10 of sigma / width
    st.integers(0, 2**31 - 1),
)
def test_upper_bounds_an_independent_search_and_lower_is_attained(d, where, log_s, seed):
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-2.0, 1.0, d)
    hi = lo + rng.uniform(0.2, 3.0, d)
    g = {
        "centre": (lo + hi) / 2,
        "vertex": np.where(rng.random(d) < 0.5, lo, hi),
        "outside": hi + rng.uniform(0.1, 2.0, d),
        "inside": rng.uniform(lo, hi),
    }[where]
    sigma = float(np.max(hi - lo)) * 10.0**log_s
    a = _spd(rng, d)
    res = certified_box_sup(lo, hi, g, sigma, precision=a, tol=1e-6)
    ind = _independent_sup(lo, hi, g, sigma, a, seed=seed % 1000)
    assert res.upper >= ind  # no pair found by the independent search exceeds the bound
    assert res.lower <= res.upper
    assert res.converged and res.gap <= 1e-6
    assert res.lower >= ind / (1.0 + 1e-6) * (1.0 - 1e-9)  # the bound is tight, not just valid
    # the reported pair lies in the box and attains the lower bound
    assert np.all((res.x >= lo) & (res.x <= hi) & (res.y >= lo) & (res.y <= hi))
    assert _form(res.x, res.y, g, sigma, a) == pytest.approx(res.lower, rel=1e-11)


def test_one_dimension_against_a_fine_grid():
    lo, hi, g, sigma = np.array([0.0]), np.array([1.0]), np.array([0.5]), 0.05
    res = certified_box_sup(lo, hi, g, sigma, precision=[[1.0]], tol=1e-9)
    xs = np.linspace(0.0, 1.0, 2001)
    grid = _form(xs[:, None, None], xs[None, :, None], g, sigma, np.eye(1))
    assert res.upper >= grid.max()
    assert res.lower <= res.upper <= grid.max() * (1 + 1e-4)  # grid spacing 5e-4, sigma 0.05
    assert res.gap <= 1e-9


def test_the_three_matrix_forms_agree():
    rng = np.random.default_rng(4)
    cov = _spd(rng, 3, 0.1)
    prec = np.linalg.inv(cov)
    fac = np.linalg.cholesky(prec).T
    out = [certified_box_sup(np.zeros(3), np.ones(3), [0.2, 0.5, 0.9], 0.2, tol=1e-8, **kw)
           for kw in ({"covariance": cov}, {"precision": prec}, {"factor": fac})]
    ups = [r.upper for r in out]
    lows = [r.lower for r in out]
    assert max(lows) <= min(ups)
    assert max(ups) / min(ups) - 1 < 1e-7
    assert out[2].matrix_margin == 0.0 and out[0].matrix_margin > 0.0


def test_ill_conditioned_covariance_is_certified_exactly():
    cov = np.diag([1e-8, 1.0, 1e6])
    res = certified_box_sup(np.zeros(3), np.ones(3), [0.2, 0.5, 0.9], 0.2, covariance=cov)
    ind = _independent_sup(np.zeros(3), np.ones(3), np.array([0.2, 0.5, 0.9]), 0.2,
                           np.linalg.inv(cov))
    assert res.upper >= ind and res.gap <= 1e-6


def test_bounded_by_the_uniform_query_value():
    """expit <= 1, so the sup is at most the max of the vertex-difference form."""
    rng = np.random.default_rng(7)
    for d in (1, 2, 4):
        a = _spd(rng, d)
        lo, hi = np.zeros(d), rng.uniform(0.5, 2.0, d)
        signs = 1 - 2 * ((np.arange(2**d)[:, None] >> np.arange(d)) & 1)
        uq = max(float((s * hi) @ a @ (s * hi)) for s in signs)
        res = certified_box_sup(lo, hi, rng.uniform(lo, hi), 0.3, precision=a, tol=1e-7)
        assert res.upper <= uq * (1 + 1e-6)


def test_budget_exhausted_still_gives_a_valid_bound():
    rng = np.random.default_rng(1)
    d = 4
    a = _spd(rng, d)
    lo, hi, g = np.zeros(d), np.ones(d), np.full(d, 0.5)
    res = certified_box_sup(lo, hi, g, 0.1, precision=a, tol=1e-12, max_nodes=100)
    assert not res.converged and np.isfinite(res.gap) and res.gap > 0
    assert res.upper >= _independent_sup(lo, hi, g, 0.1, a)


def test_degenerate_boxes():
    point = certified_box_sup([1.0, 2.0], [1.0, 2.0], [0.0, 0.0], 1.0, precision=np.eye(2))
    assert point.upper == 0.0 and point.lower == 0.0 and point.converged
    flat = certified_box_sup([0.0, 2.0], [1.0, 2.0], [0.5, 2.0], 0.05, precision=np.eye(2),
                             tol=1e-9)
    line = certified_box_sup([0.0], [1.0], [0.5], 0.05, precision=[[1.0]], tol=1e-9)
    assert flat.upper == pytest.approx(line.upper, rel=1e-8)


def test_pair_bounds_enclose_the_value():
    rng = np.random.default_rng(2)
    cov = _spd(rng, 2)
    x, y, g = rng.normal(size=2), rng.normal(size=2), rng.normal(size=2)
    val = _form(x, y, g, 0.7, np.linalg.inv(cov))
    lo, hi = two_record_form_bounds(x, y, g, 0.7, covariance=cov)
    assert lo <= val <= hi and hi - lo <= 1e-12 * val


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": float("nan")}, "sigma"),
        ({"upper": [-1.0]}, "upper"),
        ({"query": [0.0, 1.0]}, "query"),
        ({"precision": [[-1.0]]}, "precision"),
        ({"precision": None}, "precision/covariance/factor"),
        ({"covariance": [[1.0]]}, "precision/covariance/factor"),
        ({"tol": -1.0}, "tol"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, name):
    args = {"lower": [0.0], "upper": [1.0], "query": [0.5], "sigma": 0.1,
            "precision": [[1.0]]}
    args.update(kwargs)
    with pytest.raises((InvalidParameterError, InvalidTypeError), match=name.split("/")[0]):
        certified_box_sup(**args)


def test_bad_budget_type():
    with pytest.raises(InvalidTypeError, match="max_nodes"):
        certified_box_sup([0.0], [1.0], [0.5], 0.1, precision=[[1.0]], max_nodes=1.5)
