"""The covariance check on ill-conditioned weights: how far each lower bound proves the gap.

For rotated weights W of condition 1e12 (a random rotation of a geometric spectrum) and the
structured solver's answer, prints the rigorous gap of the check with

* the residual bound D / (1 + ||E||_F / lambda_min(W)) alone (what rigorous mode used before),
* the W-metric bound of the stored dual (exact congruence, certificates.rigorous),
* the W-metric bound with the dual recomputed against the stored W (the default check),

and the CPU time (time.process_time) of the default rigorous check beside the solve's. The
figures of the certificates guide ("Ill-conditioned weights") come from this script.

Usage::

    python scripts/bench_wmetric.py
"""

from __future__ import annotations

import time

import numpy as np

import certificates.covariance as cc
from certificates.covariance import check
from certificates.problem import CovarianceProgram
from certificates.rigorous import certified_min_eigenvalue, exact_dual_bound
from solvers.structured import solve_structured


def _weight(seed: int, d: int, cond: float) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    w = (q * np.geomspace(1.0, 1.0 / cond, d)) @ q.T
    return 0.5 * (w + w.T)


def _vectors(seed: int, count: int, d: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((count, d)) * rng.uniform(0.2, 2.0, (count, 1))


def main() -> int:
    print("rotated W, condition 1e12; rigorous gaps")
    print(f"{'d':>3} {'J':>5}  {'residual':>9}  {'stored dual':>11}  {'recomputed':>10}  "
          f"{'check s':>7}  {'solve s':>7}")
    original = cc.refine_whitened_dual
    for d, count in ((8, 300), (10, 1035), (30, 3000), (60, 3000)):
        vectors, weight = _vectors(15, count, d), _weight(12, d, 1e12)
        problem = CovarianceProgram(vectors, weight=weight, bound=1.3)
        t0 = time.process_time()
        sol = solve_structured(problem, tol=1e-8)
        t_solve = time.process_time() - t0
        t0 = time.process_time()
        full = check(problem, sol.covariance, sol.dual, tol=1e-8, rigorous=True)
        t_check = time.process_time() - t0
        cc.refine_whitened_dual = lambda *args, **kw: None  # the stored dual only
        try:
            stored = check(problem, sol.covariance, sol.dual, tol=1e-8, rigorous=True)
        finally:
            cc.refine_whitened_dual = original
        dual = sol.dual
        if dual is None:
            raise SystemExit(f"d = {d}, J = {count}: the solver returned no dual ({sol.status})")
        sup = vectors[dual.support]
        lower, _, _ = exact_dual_bound(sup, weight, 1.3, 0.0, dual,
                                       certified_min_eigenvalue(weight))
        residual = (full.upper - max(lower, 0.0)) / full.upper
        print(f"{d:>3} {count:>5}  {residual:9.1e}  {stored.gap:11.1e}  {full.gap:10.1e}  "
              f"{t_check:7.2f}  {t_solve:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
