"""``Design.plot()``: the picture is checked against independent numpy computations."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

import dpopt  # noqa: E402
from dpopt.covariance.plotting import binding_mask, principal_frame  # noqa: E402
from dpopt.errors import InvalidParameterError, InvalidTypeError  # noqa: E402


def _axes():  # type: ignore[no-untyped-def]
    return Figure().add_subplot()


@pytest.fixture(scope="module")
def design_2d() -> dpopt.Design:
    grid = dpopt.Grid(np.zeros(2), np.ones(2), (5, 5))
    vectors = dpopt.add_remove_set(grid, query=[0.2, 0.7], sigma=0.5)
    return dpopt.design_covariance(np.asarray(vectors.dense()), dpopt.ApproxDP(1.0, 1e-6))


@pytest.fixture(scope="module")
def design_4d() -> dpopt.Design:
    rng = np.random.default_rng(3)
    points = rng.random((25, 4)) * np.array([1.0, 0.6, 0.3, 0.1])
    vectors = dpopt.TwoRecordVectors(points, query=np.full(4, 0.3), sigma=0.4)
    return dpopt.design_covariance(vectors, dpopt.GDP(mu=1.0), weight=np.diag([1.0, 2, 3, 4]))


def _lines(ax):  # type: ignore[no-untyped-def]
    return {line.get_label(): line.get_xydata() for line in ax.get_lines()}


def _scatter(ax, label):  # type: ignore[no-untyped-def]
    for coll in ax.collections:
        if coll.get_label().startswith(label):
            return np.asarray(coll.get_offsets())
    return np.empty((0, 2))


def test_2d_ellipse_circle_and_binding_vectors(design_2d: dpopt.Design) -> None:
    ax = design_2d.plot(_axes())
    cov, q = design_2d.covariance, design_2d.program.bound
    lines = _lines(ax)
    ellipse = next(v for k, v in lines.items() if k.startswith("optimal"))
    # every boundary point satisfies x^T Sigma^-1 x = q (independent inverse)
    maha = np.einsum("ij,jk,ik->i", ellipse, np.linalg.inv(cov), ellipse)
    np.testing.assert_allclose(maha, q, rtol=1e-9)
    # the isotropic circle has radius max |s| (c = max|s|^2 / q, radius sqrt(q c))
    circle = next(v for k, v in lines.items() if k.startswith("isotropic"))
    vectors = np.asarray(design_2d.program.vectors)
    np.testing.assert_allclose(np.linalg.norm(circle, axis=1),
                               np.linalg.norm(vectors, axis=1).max(), rtol=1e-9)
    # binding dots: exactly the vectors (and mirrors) with s^T Sigma^-1 s >= q (1 - 1e-6)
    brute = np.array([s @ np.linalg.solve(cov, s) for s in vectors])
    expected = vectors[brute >= q * (1 - 1e-6)]
    tight = _scatter(ax, "binding")
    assert len(expected) >= 1 and len(tight) == 2 * len(expected)
    np.testing.assert_allclose(np.sort(tight[: len(expected)], axis=0),
                               np.sort(expected, axis=0), atol=1e-12)
    # every drawn vector lies inside the ellipse: that is the privacy guarantee
    drawn = np.vstack([tight, _scatter(ax, "sensitivity")])
    inside = np.einsum("ij,jk,ik->i", drawn, np.linalg.inv(cov), drawn)
    assert inside.max() <= q * (1 + 1e-9)
    assert len(drawn) == 2 * len(vectors)


def test_projection_for_d_above_2(design_4d: dpopt.Design) -> None:
    ax = design_4d.plot(_axes(), max_points=10_000)
    cov, q = design_4d.covariance, design_4d.program.bound
    top = np.sort(np.linalg.eigvalsh(cov))[::-1][:2]
    ellipse = next(v for k, v in _lines(ax).items() if k.startswith("optimal"))
    radii = np.linalg.norm(ellipse, axis=1)
    # semi-axes of the projected ellipse: sqrt(q lambda_1) and sqrt(q lambda_2)
    assert radii.max() == pytest.approx(np.sqrt(q * top[0]), rel=1e-6)
    assert radii.min() == pytest.approx(np.sqrt(q * top[1]), rel=1e-3)
    basis, variances = principal_frame(cov)
    np.testing.assert_allclose(variances, top, rtol=1e-12)
    np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-12)
    # projected vectors stay inside the projected ellipse
    drawn = np.vstack([_scatter(ax, "binding"), _scatter(ax, "sensitivity")])
    proj_inv = np.diag(1.0 / top)
    assert np.einsum("ij,jk,ik->i", drawn, proj_inv, drawn).max() <= q * (1 + 1e-9)
    assert "principal direction 1" in ax.get_xlabel()


def test_max_points_keeps_every_binding_vector(design_4d: dpopt.Design) -> None:
    full = design_4d.program.vectors
    dense = np.asarray(full.dense())
    n_binding = int(binding_mask(dense, design_4d.covariance, design_4d.program.bound).sum())
    ax = design_4d.plot(_axes(), max_points=n_binding + 5)
    assert len(_scatter(ax, "binding")) == 2 * n_binding
    assert len(_scatter(ax, "sensitivity")) <= 2 * 5


def test_new_figure_when_no_axes(design_2d: dpopt.Design) -> None:
    import matplotlib.pyplot as plt

    ax = design_2d.plot(show_isotropic=False)
    try:
        assert not any(k.startswith("isotropic") for k in _lines(ax))
        assert "less error" in ax.get_title()
    finally:
        plt.close(ax.figure)


@pytest.mark.parametrize(("value", "error"), [(0, InvalidParameterError),
                                              (-3, InvalidParameterError),
                                              (2.5, InvalidTypeError),
                                              (True, InvalidTypeError)])
def test_bad_max_points(design_2d: dpopt.Design, value: object, error: type) -> None:
    with pytest.raises(error, match="max_points"):
        design_2d.plot(_axes(), max_points=value)  # type: ignore[arg-type]


def test_replacement_relation_draws_the_program_bound() -> None:
    grid = dpopt.Grid(np.zeros(2), np.ones(2), (4, 4))
    vectors = np.asarray(dpopt.add_remove_set(grid, query=[0.3, 0.6], sigma=0.4).dense())
    design = dpopt.design_covariance(vectors, dpopt.GDP(mu=1.0), relation="replacement")
    q = design.program.bound
    assert q == pytest.approx(design.bound / 4, rel=1e-12)   # replacement: 4 x the add/remove sup
    ax = design.plot(_axes())
    ellipse = next(v for k, v in _lines(ax).items() if k.startswith("optimal"))
    maha = np.einsum("ij,jk,ik->i", ellipse, np.linalg.inv(design.covariance), ellipse)
    np.testing.assert_allclose(maha, q, rtol=1e-9)
    assert len(_scatter(ax, "binding")) >= 2
