"""The removed prv-accountant route's module is a thin deprecated alias: it warns, and its
functions forward to the proven lower bounds (the same values as calling those directly)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest
from dp_accounting.pld import privacy_loss_distribution as pldm

from dpopt.accounting.composition import GaussianSteps, lower_delta, lower_epsilon


def _alias():  # type: ignore[no-untyped-def]
    sys.modules.pop("dpopt.accounting._prv", None)
    with pytest.warns(DeprecationWarning, match="lower_epsilon"):
        return importlib.import_module("dpopt.accounting._prv")


def test_the_alias_warns_and_forwards() -> None:
    prv = _alias()
    groups = [(0.8, 0.05, 200)]
    run = GaussianSteps(0.8, 200, 0.05, "poisson")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the calls themselves do not warn again
        eps = prv.prv_epsilon_lower(groups, 1e-5, 0.1)
        dlt = prv.prv_delta_lower(groups, 1.0, 0.1, 1e-6)
        assert prv.prv_feasible(groups, 0.1, 1e-6, 10.0)
    assert eps == lower_epsilon(run, 1e-5, scale=10.0)[0]
    assert dlt == lower_delta(run, 1.0)[0]
    # and both are below what dp-accounting's pessimistic PLD says (they are lower bounds)
    one = pldm.from_gaussian_mechanism(standard_deviation=0.8 ** -0.5, sampling_prob=0.05,
                                       pessimistic_estimate=True,
                                       value_discretization_interval=1e-4).self_compose(200)
    assert 0.0 < eps <= float(one.get_epsilon_for_delta(1e-5))
    assert 0.0 < dlt <= float(one.get_delta_for_epsilon(1.0))
