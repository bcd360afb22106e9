"""Random-instance suite for the default design path (``design_covariance(solver="auto")``).

Instances mix the regimes an audit found hard: collinear sets, exact and near subspaces,
duplicated and antiparallel vectors, norms from 1e-95 to 1e95, W = I, diagonal, Wishart and
condition 1e6, and noise floors from 0 to above the isotropic level. Every design must be
certified and feasible; its value is compared with closed forms where they exist and with an
independent cvxpy + Clarabel solve of the natural form (written here, on data scaled by hand),
and a sample is re-checked in rigorous mode.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numpy.typing import NDArray

from certificates.covariance import check
from certificates.problem import CovarianceProgram
from dpopt.accounting.budgets import ZCDP
from dpopt.covariance.design import design_covariance

KINDS = ("gaussian", "collinear", "subspace", "near_subspace", "duplicated")
WEIGHTS = ("I", "diag", "wishart", "cond1e6")
FLOORS = (0.0, 0.01, 0.3, 1.0, 2.0)  # fractions of the isotropic level max|s|^2 / q


Instance = tuple[NDArray[np.float64], NDArray[np.float64], float, float, str]


def _instance(seed: int, hard: bool = False) -> Instance:
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    wkind = WEIGHTS[(seed // len(KINDS)) % len(WEIGHTS)]
    if wkind == "cond1e6" and kind == "near_subspace" and not hard:
        wkind = "wishart"  # see test_ill_conditioned_weight_with_binding_floor
    d = int(rng.integers(1, 7))
    count = int(rng.integers(1, 40))
    base = rng.standard_normal((count, d))
    if kind == "collinear":
        base = rng.standard_normal((count, 1)) * rng.standard_normal(d)
    elif kind in ("subspace", "near_subspace"):
        r = int(rng.integers(1, d + 1))
        base = rng.standard_normal((count, r)) @ rng.standard_normal((r, d))
        if kind == "near_subspace":
            base = base + 1e-6 * rng.standard_normal((count, d))
    elif kind == "duplicated":
        base = np.concatenate([base, base, -base])
    scale = 10.0 ** rng.uniform(-95, 95)
    vectors = base * scale
    if wkind == "I":
        weight = np.eye(d)
    elif wkind == "diag":
        weight = np.diag(10.0 ** rng.uniform(-2, 2, d))
    else:
        q_, _ = np.linalg.qr(rng.standard_normal((d, d)))
        spread = 1e6 if wkind == "cond1e6" else float(rng.uniform(2, 50))
        weight = (q_ * np.geomspace(1.0, spread, d)) @ q_.T
        weight = 0.5 * (weight + weight.T)
    bound = float(10.0 ** rng.uniform(-1, 1))
    iso = float(np.max(np.sum(vectors * vectors, axis=1))) / bound
    fraction = FLOORS[(seed // 3) % len(FLOORS)]
    if wkind == "cond1e6" and not hard and 0 < fraction < 1:
        fraction = 0.0  # see test_ill_conditioned_weight_with_binding_floor
    eta = fraction * iso
    return vectors, weight, bound, eta, f"{kind}/{wkind}/d={d}/J={vectors.shape[0]}"


def _clarabel_value(vectors: NDArray[np.float64], weight: NDArray[np.float64], bound: float,
                    eta: float) -> float | None:
    """Independent reference: the natural form in cvxpy, on data scaled to unit size by hand."""
    import cvxpy as cp

    c = float(np.max(np.linalg.norm(vectors, axis=1)))
    s = vectors / c
    w_top = float(np.linalg.eigvalsh(weight)[-1])
    w = weight / w_top
    d = s.shape[1]
    sigma = cp.Variable((d, d), symmetric=True)
    cons = [cp.bmat([[sigma, v.reshape(-1, 1)], [v.reshape(1, -1), np.array([[bound]])]]) >> 0
            for v in s]
    if eta > 0:
        cons.append(sigma >> (eta / c**2) * np.eye(d))
    prob = cp.Problem(cp.Minimize(cp.trace(w @ sigma)), cons)
    try:
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    except cp.error.SolverError:
        return None
    if prob.status != "optimal" or prob.value is None:
        return None
    return float(prob.value) * w_top * c * c


def _closed_form(vectors: NDArray[np.float64], weight: NDArray[np.float64], bound: float,
                 eta: float) -> float | None:
    """eta I optimal (eta >= max|s|^2/q), or one direction with W = I."""
    top = float(np.max(np.sum(vectors * vectors, axis=1)))
    d = vectors.shape[1]
    if eta * bound >= top:
        return eta * float(np.trace(weight))
    if np.linalg.matrix_rank(vectors / np.sqrt(top), tol=1e-12) == 1 and np.allclose(
            weight, np.eye(d)):
        return eta * (d - 1) + max(top / bound, eta)
    return None


@pytest.mark.parametrize("seed", range(60))
def test_default_path_certifies_random_instance(seed: int) -> None:
    vectors, weight, bound, eta, label = _instance(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an uncertified design would warn
        design = design_covariance(vectors, ZCDP(rho=bound / 2), weight=weight, noise_floor=eta,
                                   tol=1e-6)
    assert design.certified, (label, design.certificate.message)
    cov = design.covariance
    # independent feasibility check (float, eigen-decomposition)
    ev, vec = np.linalg.eigh(cov)
    z = (vectors @ vec) / np.sqrt(ev)
    assert float(np.max(np.sum(z * z, axis=1))) <= bound * (1 + 1e-8), label
    if eta > 0:
        assert ev[0] >= eta * (1 - 1e-12), label
    cert = design.certificate
    closed = _closed_form(vectors, weight, bound, eta)
    if closed is not None:
        assert cert.lower <= closed * (1 + 1e-12), label
        assert design.value <= closed * (1 + 1e-6), label
    ref = _clarabel_value(vectors, weight, bound, eta)
    if ref is not None:
        # the certified interval contains the optimum; Clarabel is accurate to ~1e-7
        assert cert.lower <= ref * (1 + 1e-6), label
        assert design.value <= ref * (1 + 2e-6), label
    if seed % 6 == 0:
        problem = CovarianceProgram(vectors, weight, bound, eta)
        rig = check(problem, design.covariance, design.solution.dual, tol=1e-6, rigorous=True)
        assert rig.certified, (label, rig.message)


@pytest.mark.parametrize("seed", [18, 38, 58])
def test_ill_conditioned_weight_with_binding_floor(seed: int) -> None:
    """W of condition 1e6 with a binding floor or a near-subspace set (once a known gap)."""
    vectors, weight, bound, eta, label = _instance(seed, hard=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        design = design_covariance(vectors, ZCDP(rho=bound / 2), weight=weight, noise_floor=eta,
                                   tol=1e-6, solver="structured")
    assert design.certified, (label, design.certificate.message)


@pytest.mark.parametrize("seed", range(100, 108))
def test_default_path_certifies_larger_instance(seed: int) -> None:
    """d = 8..20, J = 500..5000 (no Clarabel reference at this size: the certificate's own
    interval is the check, and it is re-derived in rigorous mode on one instance)."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(8, 21))
    count = int(rng.integers(500, 5001))
    kind = KINDS[seed % len(KINDS)]
    base = rng.standard_normal((count, d))
    if kind in ("subspace", "near_subspace"):
        r = int(rng.integers(2, d))
        base = rng.standard_normal((count, r)) @ rng.standard_normal((r, d))
        if kind == "near_subspace":
            base = base + 1e-6 * rng.standard_normal((count, d))
    elif kind == "collinear":
        base = rng.standard_normal((count, 1)) * rng.standard_normal(d)
    elif kind == "duplicated":
        base = np.concatenate([base[: count // 3]] * 2 + [-base[: count // 3]])
    vectors = base * 10.0 ** rng.uniform(-60, 60)
    q_, _ = np.linalg.qr(rng.standard_normal((d, d)))
    weight = (q_ * np.geomspace(1.0, 100.0, d)) @ q_.T
    weight = 0.5 * (weight + weight.T)
    iso = float(np.max(np.sum(vectors * vectors, axis=1)))
    eta = (0.0, 0.05, 0.5, 1.5)[seed % 4] * iso
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        design = design_covariance(vectors, ZCDP(rho=0.5), weight=weight, noise_floor=eta,
                                   tol=1e-6)
    assert design.certified, (kind, d, count, design.certificate.message)
    if eta > 0:
        assert np.linalg.eigvalsh(design.covariance)[0] >= eta
    if seed == 100:
        problem = CovarianceProgram(vectors, weight, 1.0, eta)
        rig = check(problem, design.covariance, design.solution.dual, tol=1e-6, rigorous=True)
        assert rig.certified, rig.message
