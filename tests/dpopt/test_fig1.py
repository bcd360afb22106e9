"""The cube figure's ratios against an independent computation (sup_mahalanobis), and the CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpopt.covariance import sup_mahalanobis, uniform_query_set
from dpopt.covariance.domains import Box
from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.figures.__main__ import FIGURES, main, resolve
from dpopt.figures.fig1 import (
    GENERATORS,
    draw_covariances,
    fig1_figure,
    fig1_ratios,
    fig1_summary,
)


@pytest.mark.parametrize("generator", sorted(GENERATORS))
def test_ratios_match_independent_sup(generator: str) -> None:
    d = 4
    ratios = fig1_ratios(d, 20, generator, rng=3)
    covs = draw_covariances(d, 20, generator, rng=3)
    box = uniform_query_set(Box(np.zeros(d), np.ones(d)))
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=d)))
    for r, cov in zip(ratios, covs, strict=True):
        prec = np.linalg.inv(cov)
        exact = sup_mahalanobis(box, cov).value
        brute = max(v @ prec @ v for v in signs)  # all 2^d patterns, no symmetry used
        assert exact == pytest.approx(brute, rel=1e-9)
        naive = d * np.linalg.eigvalsh(prec)[-1]
        assert r == pytest.approx(naive / brute, rel=1e-8)
        assert 1 - 1e-9 <= r <= d + 1e-9


def test_default_reproduces_seed_mean() -> None:
    # Wishart (d+1 dof) at d = 10, 2000 draws: mean 1.45 (10^4 draws: 1.464)
    s = fig1_summary(fig1_ratios())
    assert 1.40 <= s.mean <= 1.50
    assert 1.36 <= s.median <= 1.46
    assert 1.9 <= s.p99 <= 2.5
    assert s.n_draws == 2000
    np.testing.assert_array_equal(fig1_ratios(rng=5), fig1_ratios(rng=5))


def test_figure_files_and_cli(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    paths = fig1_figure(tmp_path, d=4, n_draws=50, verbose=False)
    assert [p.name for p in paths] == ["fig1.png", "fig1.csv"]
    assert all(p.stat().st_size > 0 for p in paths)
    lines = paths[1].read_text().splitlines()
    assert lines[1] == "draw,ratio" and len(lines) == 52
    assert main(["--list"]) == 0
    assert "fig1" in capsys.readouterr().out
    assert main(["nope"]) == 2
    assert main(["--out-dir", str(tmp_path / "cli"), "fig1"]) == 0
    out = capsys.readouterr().out
    assert "mean" in out and "p99" in out
    assert (tmp_path / "cli" / "fig1.png").exists()
    assert set(FIGURES) >= {"fig1"} and callable(resolve("fig1"))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"d": 1}, "d"),
        ({"d": 40}, "d"),
        ({"n_draws": 0}, "n_draws"),
        ({"generator": "x"}, "generator"),
    ],
)
def test_bad_input(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError) as err:
        fig1_ratios(**kwargs)  # type: ignore[arg-type]
    assert err.value.name == name
    with pytest.raises(InvalidTypeError):
        fig1_ratios(rng="seed")
    with pytest.raises(InvalidParameterError):
        fig1_summary([])
