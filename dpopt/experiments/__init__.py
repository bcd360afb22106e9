"""Reproduction of the papers' experiments (UCI Pufferfish scenarios, sweeps, tables).

See :mod:`dpopt.experiments.rpp` for the α-Wasserstein Rényi Pufferfish experiments on Adult,
Heart Disease and Student Performance.
"""

from dpopt.experiments.rpp import (
    ALPHAS,
    EPSILONS,
    SCENARIOS,
    RPPScenarioSpec,
    build_scenario,
    rpp_sweep,
    scenario_laws,
    summary_ratios,
    tightness,
)

__all__ = [
    "ALPHAS",
    "EPSILONS",
    "SCENARIOS",
    "RPPScenarioSpec",
    "build_scenario",
    "rpp_sweep",
    "scenario_laws",
    "summary_ratios",
    "tightness",
]
