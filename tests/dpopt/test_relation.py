"""dpopt.relation: one enum, one spelling, the x4 rule on the safe side."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpopt.errors import InvalidParameterError, InvalidTypeError
from dpopt.relation import (
    NeighbouringRelation,
    add_remove_bound,
    as_relation,
    replacement_sup,
)


def test_accepted_spellings() -> None:
    assert as_relation("add_remove") is NeighbouringRelation.ADD_REMOVE
    assert as_relation("replacement") is NeighbouringRelation.REPLACEMENT
    assert as_relation(NeighbouringRelation.REPLACEMENT) is NeighbouringRelation.REPLACEMENT


@pytest.mark.parametrize(
    "old", ["add-remove", "replace", "add/remove", "Replacement", "ADD_REMOVE"]
)
def test_old_spellings_rejected_with_the_accepted_ones_named(old: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        as_relation(old)
    msg = str(info.value)
    assert old in msg and "'add_remove'" in msg and "'replacement'" in msg


def test_wrong_type() -> None:
    with pytest.raises(InvalidTypeError):
        as_relation(4)  # type: ignore[arg-type]


@given(st.floats(min_value=0.0, max_value=1e300, allow_nan=False))
def test_replacement_sup_never_below_four_times(rho: float) -> None:
    up = replacement_sup(rho, "replacement")
    assert Fraction(up) >= 4 * Fraction(rho)
    assert replacement_sup(rho, "add_remove") == rho


@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False))
def test_add_remove_bound_never_above_a_quarter(q: float) -> None:
    b = add_remove_bound(q, "replacement")
    assert 0 < b and 4 * Fraction(b) <= Fraction(q)
    # the two directions agree: a set meeting b under add/remove meets q under replacement
    assert replacement_sup(b, "replacement") <= q or math.isclose(
        replacement_sup(b, "replacement"), q, rel_tol=1e-15
    )
    assert add_remove_bound(q, "add_remove") == q


def test_bad_bounds() -> None:
    with pytest.raises(InvalidParameterError):
        add_remove_bound(0.0, "replacement")
    with pytest.raises(InvalidParameterError):
        add_remove_bound(5e-324, "replacement")
    with pytest.raises(InvalidParameterError):
        replacement_sup(float("nan"), "replacement")


# ------------------------------------------------------------------ sampling: never implied


def _subsampled_entry_points() -> list[tuple[str, object]]:
    from dpopt.accounting.budgets import ApproxDP
    from dpopt.accounting.composition import (
        GaussianSteps,
        calibrate_noise,
        largest_bound,
        smallest_noise_multiplier,
    )
    from dpopt.accounting.dpsgd import dpsgd_noise_multiplier
    from dpopt.accounting.schedule import Schedule
    from dpopt.accounting.subsampled_rdp import subsampled_gaussian_rdp

    return [
        ("GaussianSteps", lambda: GaussianSteps(1.0, 10, 0.1)),
        ("from_noise_multiplier", lambda: GaussianSteps.from_noise_multiplier(1.0, 10, 0.1)),
        ("calibrate_noise", lambda: calibrate_noise(1.0, 1e-5, 10, 0.1)),
        ("largest_bound", lambda: largest_bound(1.0, 1e-5, 10, 0.1)),
        ("smallest_noise_multiplier", lambda: smallest_noise_multiplier(1.0, 1e-5, 10, 0.1)),
        ("Schedule", lambda: Schedule(ApproxDP(1.0, 1e-5), steps=10, sampling_rate=0.1)),
        ("subsampled_gaussian_rdp", lambda: subsampled_gaussian_rdp(1.0, 0.1, [2.0])),
        ("dpsgd_noise_multiplier", lambda: dpsgd_noise_multiplier(
            dataset_size=100, batch_size=10, steps=10, epsilon=1.0, delta=1e-5)),
    ]


@pytest.mark.parametrize("index", range(8))
def test_a_subsampled_run_without_a_scheme_is_refused_naming_the_loaders(index: int) -> None:
    what, call = _subsampled_entry_points()[index]
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == "sampling", what
    message = str(info.value)
    for word in ("'poisson'", "'without_replacement'", "'full_batch'", "DPDataLoader",
                 "replace=False", "shuffle"):
        assert word in message, (what, word)


def test_without_subsampling_no_scheme_means_the_full_batch() -> None:
    from dpopt.accounting.composition import GaussianSteps
    from dpopt.relation import SamplingScheme, required_sampling

    assert required_sampling(None, 1.0) is SamplingScheme.FULL_BATCH
    assert required_sampling("poisson", 0.5) is SamplingScheme.POISSON
    assert GaussianSteps(1.0, 3).sampling is SamplingScheme.FULL_BATCH
    with pytest.raises(InvalidParameterError, match="no tight"):
        required_sampling("shuffling", 0.5)


def test_the_cli_requires_sampling_below_rate_one(capsys: pytest.CaptureFixture[str]) -> None:
    from dpopt.cli.main import main

    for argv in (["account", "dpsgd", "--dataset-size", "100", "--batch-size", "10", "--steps",
                  "5", "--epsilon", "1", "--delta", "1e-5"],
                 ["account", "subsample", "--rate", "0.1", "--noise-multiplier", "1", "--steps",
                  "5"],
                 ["account", "schedule", "--epsilon", "1", "--delta", "1e-5", "--steps", "5",
                  "--rate", "0.1"]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "--sampling" in err and "DPDataLoader" in err, argv
