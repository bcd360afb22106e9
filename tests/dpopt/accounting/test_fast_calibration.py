"""The fast calibration: never optimistic, within its tolerance of the fine PLD, two-sided.

Every answer is re-checked by dp-accounting called directly (not through dpopt's wrapper): its
pessimistic PLD for Poisson sampling (add/remove neighbours); fixed-size batches drawn without
replacement (replace-one, noise multiplier σ/2 in units of the 2C sensitivity) against an
independent numpy/scipy composition of their symmetrised pair (``wor_reference``). The
tolerance claim is checked against the PLD at the requested discretisation: a σ smaller than
the answer by the stated tolerance is refused by it.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import dp_accounting as dpa
import pytest
from dp_accounting.pld import privacy_loss_distribution as pldm
from dp_accounting.rdp import rdp_privacy_accountant as rdpm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpopt.accounting import _dp_accounting as lib
from dpopt.accounting.composition import calibrate_noise
from dpopt.accounting.dpsgd import dpsgd_noise_multiplier

sys.path.insert(0, str(Path(__file__).parent))
from wor_reference import reference_epsilon


def _pld_eps(p: float, sigma: float, steps: int, delta: float, disc: float) -> float:
    """dp-accounting's pessimistic PLD ε of T Poisson-subsampled Gaussian steps."""
    one = pldm.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=p,
                                       pessimistic_estimate=True,
                                       value_discretization_interval=disc)
    return float(one.self_compose(steps).get_epsilon_for_delta(delta))


# (p, T, ε, δ, requested grid): fresh points (none in the other test files), from a large-noise
# long run to a small-noise large-ε one (whose grid of 1e-4 would take seconds in the check);
# each finishes on a grid coarser than the requested one
_POISSON = [(0.008, 700, 2.5, 1e-6, 1e-4), (0.002, 4000, 0.6, 1e-7, 1e-4),
            (0.03, 90, 12.0, 1e-5, 4e-4), (0.06, 60, 40.0, 1e-6, 1e-3)]


@pytest.mark.parametrize(("p", "steps", "eps", "delta", "disc"), _POISSON)
def test_poisson_answer_is_certified_tight_and_two_sided(p: float, steps: int, eps: float,
                                                         delta: float, disc: float) -> None:
    rtol = 1e-3
    cal = calibrate_noise(eps, delta, steps, p, "poisson", rtol=rtol, discretization=disc,
                          progress=False)
    sigma, lo = cal.noise_multiplier, cal.noise_multiplier_lower
    assert cal.accountant == "pld" and 0.0 < lo < sigma
    assert cal.discretization > disc  # the tolerance let it finish on a coarser grid
    # never optimistic: dp-accounting's own pessimistic PLD on the answer's grid accepts σ
    assert _pld_eps(p, sigma, steps, delta, cal.discretization) <= eps
    # within the tolerance (rtol in q, rtol/2 in σ) of the PLD at the requested grid: that PLD
    # refuses σ shrunk by a little more than the tolerance …
    assert _pld_eps(p, sigma * (1.0 - 0.6 * rtol), steps, delta, disc) > eps
    # … and the proven lower end is below the exact σ: even the pessimistic PLD refuses it
    assert _pld_eps(p, lo, steps, delta, disc) > eps


@pytest.mark.parametrize(("n", "b", "steps", "eps", "delta"),
                         [(40000, 2000, 20, 1.5, 1e-6), (9000, 900, 6, 2.0, 1e-5)])
def test_without_replacement_answer_is_certified_and_within_the_tolerance(
        n: int, b: int, steps: int, eps: float, delta: float) -> None:
    rtol = 1e-3
    cal = dpsgd_noise_multiplier(dataset_size=n, batch_size=b, steps=steps, epsilon=eps,
                                 delta=delta, sampling="without_replacement", rtol=rtol,
                                 progress=False)
    sigma, lo, p = cal.noise_multiplier, cal.noise_multiplier_lower, b / n
    assert cal.accountant == "pld" and 0.0 < lo < sigma
    # the independent composition of the symmetrised pair (numpy/scipy, no dp-accounting), at
    # the replace-one sensitivity 2C: within its own grid error of the target at σ …
    assert reference_epsilon(sigma / 2.0, p, steps, delta) <= eps * (1.0 + 2e-3) + 2e-3
    # … and clearly above it at the proven lower end
    assert reference_epsilon(lo / 2.0, p, steps, delta) > eps
    # within the tolerance of the symmetrised PLD on the requested grid 1e-4
    shrunk = 4.0 / (sigma * (1.0 - 0.6 * rtol)) ** 2
    assert lib.pld_epsilon(((shrunk, p, steps),), delta, 1e-4, replace_one=True) > eps


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(log_eps=st.floats(math.log(0.3), math.log(30.0)),
       log10_delta=st.floats(-9.0, -4.0),
       log10_rate=st.floats(-2.5, -0.7),
       steps=st.integers(5, 2000))
def test_returned_sigma_is_never_optimistic(log_eps: float, log10_delta: float,
                                            log10_rate: float, steps: int) -> None:
    """Property: the σ returned is accepted by dp-accounting's own pessimistic PLD (built from
    σ directly, on the grid the answer was certified on) at the target (ε, δ)."""
    eps, delta, p = math.exp(log_eps), 10.0 ** log10_delta, 10.0 ** log10_rate
    cal = calibrate_noise(eps, delta, steps, p, "poisson", two_sided=False, progress=False)
    if cal.accountant == "pld":
        assert _pld_eps(p, cal.noise_multiplier, steps, delta, cal.discretization) <= eps
    else:  # certified by RDP: dp-accounting's RDP accountant agrees
        acc = rdpm.RdpAccountant()
        acc.compose(dpa.PoissonSampledDpEvent(p, dpa.GaussianDpEvent(cal.noise_multiplier)),
                    steps)
        assert float(acc.get_epsilon(delta)) <= eps * (1.0 + 1e-9)


def test_finishing_grid_is_coarser_only_where_the_tolerance_allows() -> None:
    """A looser tolerance finishes on a coarser grid (cheaper), a tighter one on a finer grid;
    both answers are certified and the tighter one is not larger."""
    loose = calibrate_noise(1.0, 1e-5, 1000, 0.01, "poisson", rtol=1e-2, two_sided=False,
                            progress=False)
    tight = calibrate_noise(1.0, 1e-5, 1000, 0.01, "poisson", rtol=1e-4, two_sided=False,
                            progress=False)
    assert loose.discretization > 2.0 * tight.discretization >= 2e-4
    assert tight.noise_multiplier <= loose.noise_multiplier * (1.0 + 1e-4)
    for cal in (loose, tight):
        assert _pld_eps(0.01, cal.noise_multiplier, 1000, 1e-5, cal.discretization) <= 1.0


def test_account_imports_no_solver_stack() -> None:
    """``dpopt account dpsgd`` answers without cvxpy, the solvers or the covariance designer
    (the solvers package's thread-limit module, which imports neither, is allowed)."""
    code = (
        "import sys\n"
        "from dpopt.cli import main\n"
        "rc = main(['account', 'dpsgd', '--dataset-size', '1000', '--batch-size', '50',\n"
        "           '--steps', '20', '--epsilon', '2', '--delta', '1e-5',\n"
        "           '--sampling', 'poisson'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('cvxpy', 'solvers',\n"
        "               'clarabel', 'pandas', 'matplotlib') or m.startswith('dpopt.covariance'))\n"
        "heavy = [m for m in heavy if m not in ('solvers', 'solvers._types', 'solvers.threads')]\n"
        "print('RC', rc, 'HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "RC 0 HEAVY []" in out
