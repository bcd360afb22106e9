"""Fixed-size batches without replacement (replace-one): the symmetrised pessimistic PLD and the
bound without amplification, each against an independent computation.

The reference (``wor_reference``) is written from the formulas in numpy/scipy and calls no
dp-accounting.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt.accounting import _dp_accounting as lib
from dpopt.accounting.composition import GaussianSteps, composed_epsilon
from dpopt.accounting.dpsgd import dpsgd_noise_multiplier
from dpopt.accounting.gdp import mu_for

sys.path.insert(0, str(Path(__file__).parent))
from wor_reference import reference_epsilon


@pytest.mark.parametrize(("sigma", "p", "steps"), [(1.0, 0.2, 1), (1.5, 0.3, 2), (2.0, 0.5, 3),
                                                   (0.8, 0.05, 2)])
def test_symmetrised_pld_matches_an_independent_composition(sigma: float, p: float,
                                                           steps: int) -> None:
    delta = 1e-4
    ours = lib.pld_epsilon(((1.0 / sigma**2, p, steps),), delta, 1e-4, replace_one=True)
    ref = reference_epsilon(sigma, p, steps, delta)
    assert ours >= ref * (1 - 2e-3) - 2e-3          # pessimistic: never below the pair's ε
    assert ours <= ref * 1.02 + 5e-3                 # and close to it


@settings(max_examples=8, deadline=None)
@given(sigma=st.floats(0.6, 8.0), p=st.floats(0.001, 0.95), steps=st.integers(1, 200))
def test_never_below_either_direction(sigma: float, p: float, steps: int) -> None:
    """C_p(f) lies below both f_p and its inverse: the run's ε is at least what dp-accounting's
    Poisson PLD (the larger of the two directions, each composed alone) reports."""
    delta = 1e-6
    ours = lib.pld_epsilon(((1.0 / sigma**2, p, steps),), delta, 1e-4, replace_one=True)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.PoissonSampledDpEvent(p, dpa.GaussianDpEvent(sigma)), steps)
    assert ours >= acc.get_epsilon(delta) - 1e-6


@pytest.mark.parametrize(("n", "b", "steps", "eps", "delta"),
                         [(1000, 999, 10, 0.5, 1e-6), (1000, 500, 100, 1.0, 1e-6),
                          (50000, 256, 300, 1.0, 1e-5)])
def test_dpsgd_without_replacement_is_certified_and_not_above_the_old_bounds(
        n: int, b: int, steps: int, eps: float, delta: float) -> None:
    c = dpsgd_noise_multiplier(dataset_size=n, batch_size=b, steps=steps, epsilon=eps,
                               delta=delta, sampling="without_replacement")
    sigma = c.noise_multiplier
    # certified by the symmetrised PLD at the replace-one sensitivity 2C (σ/2 per sensitivity)
    run = GaussianSteps(4.0 / sigma**2, steps, b / n, "without_replacement")
    assert composed_epsilon(run, delta, accountants=("pld",), two_sided=False).value <= eps
    # never more noise than the bound without amplification (exact GDP, sensitivity 2C)
    assert sigma <= 2.0 * math.sqrt(steps) / mu_for(eps, delta) * (1 + 1e-9)
    # and the interval's lower end stays below
    assert c.noise_multiplier_lower <= sigma


def test_no_amplification_bound_is_offered_for_subsampled_runs() -> None:
    """The exact GDP of the steps without amplification is a valid certificate at any rate."""
    run = GaussianSteps(0.01, 100, 0.999, "without_replacement")
    r = composed_epsilon(run, 1e-5, two_sided=False)
    assert math.isfinite(r.candidates["gdp-exact"])
    assert r.value <= r.candidates["gdp-exact"]
    full = composed_epsilon(GaussianSteps(0.01, 100), 1e-5, two_sided=False)
    assert r.candidates["gdp-exact"] == pytest.approx(full.value, rel=1e-12)


@pytest.mark.parametrize(("sigma", "p"), [(1.09, 0.00512), (0.7, 0.3), (5.0, 0.9), (0.3, 0.01)])
def test_vectorised_profile_is_the_librarys(sigma: float, p: float) -> None:
    from dp_accounting.pld import privacy_loss_distribution as pldm

    pld = pldm.from_gaussian_mechanism(sigma, sampling_prob=p, value_discretization_interval=1e-3)
    eps = np.arange(-3000, 3001) * 2e-3
    ours = lib._profile(pld, eps)
    theirs = np.asarray(pld.get_delta_for_epsilon(eps))
    np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-20)
