"""dpopt's self-composition of a PLD is the library's own, bit for bit: sparse pmfs are made
dense first exactly where the library's sparse ``self_compose`` would make them dense."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pldm
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting._dp_accounting import _self_composed


def _same(a: pld_pmf.PLDPmf, b: pld_pmf.PLDPmf) -> None:
    assert type(a) is type(b)
    assert a._infinity_mass == b._infinity_mass
    if isinstance(a, pld_pmf.DensePLDPmf):
        assert a._lower_loss == b._lower_loss
        np.testing.assert_array_equal(a._probs, b._probs)
    else:
        assert a._loss_probs == b._loss_probs


def _check(sigma: float, p: float, disc: float, count: int, pessimistic: bool) -> None:
    one = pldm.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=p,
                                       pessimistic_estimate=pessimistic,
                                       value_discretization_interval=disc)
    ours, theirs = _self_composed(one, count), one.self_compose(count)
    _same(ours._pmf_remove, theirs._pmf_remove)
    _same(ours._pmf_add, theirs._pmf_add)
    assert ours._symmetric == theirs._symmetric


@pytest.mark.parametrize(("sigma", "p", "disc", "count"), [
    (1.7, 0.01, 1e-2, 20_000),  # sparse (157 points), made dense
    (11.8, 0.01, 1e-2, 3),      # sparse, 4 points: 4^3 = 64 stays sparse in the library too
    (11.8, 0.01, 1e-2, 5),      # 4^5 = 1024 > 1000: dense
    (0.35, 0.01, 1e-2, 500),    # dense from the start
    (0.8, 1.0, 1e-2, 7),        # no subsampling: a symmetric PLD
])
def test_matches_the_library(sigma: float, p: float, disc: float, count: int) -> None:
    _check(sigma, p, disc, count, True)
    _check(sigma, p, disc, count, False)


@settings(max_examples=25, deadline=None)
@given(sigma=st.floats(0.5, 40.0), log10_p=st.floats(-3.0, 0.0),
       disc=st.sampled_from([1e-2, 3e-2, 1e-1]), count=st.integers(2, 3000),
       pessimistic=st.booleans())
def test_matches_the_library_everywhere(sigma: float, log10_p: float, disc: float, count: int,
                                        pessimistic: bool) -> None:
    _check(sigma, 10.0 ** log10_p, disc, count, pessimistic)
