"""Rényi Pufferfish privacy: α-Wasserstein calibration of additive noise.

Scenarios (:class:`Scenario`) hold the conditional laws of a query given each secret; costs
(:class:`LaplaceCost`, :class:`GaussianCost`, :class:`ExponentialCost`) turn a shift into a Rényi
moment bound; :func:`calibrate` finds the least scale through optimal couplings and certifies it;
the :math:`W_\\infty` baselines and :func:`audit` (true divergences by quadrature) check them;
:func:`calibrate_tight` finds the least scale itself, within a tolerance, with proven bounds.
"""

from dpopt.pufferfish.audit import (
    AuditResult,
    PairAudit,
    audit,
    minimal_scale_1d,
    mixture_renyi_divergence,
)
from dpopt.pufferfish.baselines import (
    Baseline,
    rpp_winf_gaussian,
    rpp_winf_laplace,
    wasserstein_inf,
    winf_baseline,
    winf_laplace,
)
from dpopt.pufferfish.calibration import (
    Calibration,
    PairCalibration,
    calibrate,
    calibrate_exponential,
    calibrate_gaussian,
    calibrate_laplace,
)
from dpopt.pufferfish.costs import (
    ExponentialCost,
    GaussianCost,
    LaplaceCost,
    RenyiCost,
    make_cost,
)
from dpopt.pufferfish.scenario import PROB_TOL, DiscreteLaw, Scenario
from dpopt.pufferfish.tight import TightCalibration, calibrate_tight

__all__ = [
    "PROB_TOL",
    "AuditResult",
    "Baseline",
    "Calibration",
    "DiscreteLaw",
    "ExponentialCost",
    "GaussianCost",
    "LaplaceCost",
    "PairAudit",
    "PairCalibration",
    "RenyiCost",
    "Scenario",
    "TightCalibration",
    "audit",
    "calibrate",
    "calibrate_exponential",
    "calibrate_gaussian",
    "calibrate_laplace",
    "calibrate_tight",
    "make_cost",
    "minimal_scale_1d",
    "mixture_renyi_divergence",
    "rpp_winf_gaussian",
    "rpp_winf_laplace",
    "wasserstein_inf",
    "winf_baseline",
    "winf_laplace",
]
