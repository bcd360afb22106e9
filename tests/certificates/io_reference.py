"""Independent re-derivation of what an *accepted* certificate file claims (test helper).

Written without the certificate checker: exact rational arithmetic (``fractions.Fraction``) on the
doubles stored in the file, for small problems (d <= 4, a few hundred vectors):

* Σ is exactly symmetric, Σ and Σ - ηI positive definite (elimination on rationals);
* max_j s_jᵀΣ⁻¹s_j <= q, brute force over every vector with the exact inverse;
* tr(WΣ) <= claimed upper: Σ is feasible, so the optimum is at most its value;
* claimed lower <= a weak-duality bound of the file's own dual evaluated exactly:
  for every feasible Σ', tr(WΣ') >= D + tr(EΣ') >= D - ‖E‖_F tr(WΣ')/t, with
  D = η tr H + Σ λ_j (2u_jᵀs_j - q), E = W - H - Σ λ_j u_j u_jᵀ and t a proven lower bound on
  λ_min(W) (W - tI positive definite, checked exactly here);
* ``certified`` only if (upper - lower)/upper <= tol, exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

Q = Fraction


def fr(x: float) -> Fraction:
    return Fraction(float(x))


def fmat(a: Any) -> list[list[Fraction]]:
    return [[fr(v) for v in row] for row in np.asarray(a, dtype=np.float64)]


def pd_exact(m: list[list[Fraction]]) -> bool:
    """Positive definite, by Gaussian elimination (all pivots > 0) on rationals."""
    a = [row[:] for row in m]
    n = len(a)
    for k in range(n):
        if a[k][k] <= 0:
            return False
        for i in range(k + 1, n):
            f = a[i][k] / a[k][k]
            for j in range(k, n):
                a[i][j] -= f * a[k][j]
    return True


def solve_exact(m: list[list[Fraction]], b: list[Fraction]) -> list[Fraction]:
    n = len(m)
    a = [[*row, b[i]] for i, row in enumerate(m)]
    for k in range(n):
        p = next(i for i in range(k, n) if a[i][k] != 0)
        a[k], a[p] = a[p], a[k]
        for i in range(n):
            if i != k and a[i][k] != 0:
                f = a[i][k] / a[k][k]
                for j in range(k, n + 1):
                    a[i][j] -= f * a[k][j]
    return [a[i][n] / a[i][i] for i in range(n)]


def exact_sup(vectors: Any, sigma: list[list[Fraction]]) -> Fraction:
    """max_j s_jᵀΣ⁻¹s_j, exactly (Σ positive definite)."""
    best = Fraction(0)
    for s in np.asarray(vectors, dtype=np.float64):
        sv = [fr(v) for v in s]
        x = solve_exact(sigma, sv)
        best = max(best, sum((a * b for a, b in zip(sv, x, strict=True)), Fraction(0)))
    return best


def sqrt_up(x: Fraction) -> Fraction:
    """A rational >= sqrt(x)."""
    r = Fraction(math.sqrt(float(x)) * (1 + 1e-15) + 1e-300)
    while r * r < x:
        r *= Fraction(1000001, 1000000)
    return r


def min_eig_lower(w: list[list[Fraction]], guess: float) -> Fraction:
    """A rational t with W - tI proven positive definite (or 0)."""
    t = fr(guess)
    for _ in range(60):
        if t <= 0:
            return Fraction(0)
        if pd_exact([[v - (t if i == j else 0) for j, v in enumerate(row)]
                     for i, row in enumerate(w)]):
            return t
        t *= Fraction(1, 2) if _ > 5 else Fraction(999999, 1000000)
    return Fraction(0)


def dual_bound_exact(content: dict[str, Any], vectors: Any) -> Fraction:
    """The weak-duality lower bound of the file's dual, exactly (0 when it proves nothing)."""
    pr, du = content["problem"], content["dual"]
    d = int(pr["dim"])
    w = fmat(pr["weight"])
    q, eta = fr(pr["bound"]), fr(pr["noise_floor"])
    vec = np.asarray(vectors, dtype=np.float64)
    lam = [fr(v) for v in du["multipliers"]]
    u = fmat(du["directions"]) if du["support"] else []
    g = fmat(du["floor_factor"]) if int(du["floor_rank"]) else [[] for _ in range(d)]
    h = [[sum((g[i][k] * g[j][k] for k in range(len(g[i]))), Fraction(0)) for j in range(d)]
         for i in range(d)]
    dval = eta * sum((h[i][i] for i in range(d)), Fraction(0))
    e = [[w[i][j] - h[i][j] for j in range(d)] for i in range(d)]
    for lj, uj, j in zip(lam, u, du["support"], strict=True):
        sj = [fr(v) for v in vec[int(j)]]
        dval += lj * (2 * sum((a * b for a, b in zip(uj, sj, strict=True)), Fraction(0)) - q)
        for a in range(d):
            for b in range(d):
                e[a][b] -= lj * uj[a] * uj[b]
    e_norm = sqrt_up(sum((v * v for row in e for v in row), Fraction(0)))
    guess = float(np.linalg.eigvalsh(np.asarray(pr["weight"], dtype=np.float64))[0])
    t = min_eig_lower(w, guess * (1 - 1e-13))
    if t <= 0 or dval <= 0:
        return Fraction(0)
    return dval / (1 + e_norm / t)


def check_accepted(content: dict[str, Any], vectors: Any, *, known_optimum: float | None = None,
                   rigorous_slack: float = 0.0) -> Fraction:
    """Assert every claim of an accepted file independently; return the exact sup s^T Σ^-1 s.

    ``rigorous_slack``: relative slack allowed on the claimed lower bound against the exact
    dual bound when the file's mode is floating point (its statement holds up to rounding).
    """
    pr, claim = content["problem"], content["claim"]
    sigma = fmat(content["covariance"])
    d = len(sigma)
    assert all(sigma[i][j] == sigma[j][i] for i in range(d) for j in range(d)), "Σ not symmetric"
    eta = fr(pr["noise_floor"])
    assert pd_exact(sigma), "Σ not positive definite"
    assert eta == 0 or pd_exact([[v - (eta if i == j else 0) for j, v in enumerate(row)]
                                 for i, row in enumerate(sigma)]), "Σ - ηI not PD"
    q = fr(pr["bound"])
    sup = exact_sup(vectors, sigma)
    assert sup <= q, f"sup s^T Σ^-1 s = {float(sup)!r} > q = {float(q)!r}"
    w = fmat(pr["weight"])
    value = sum((w[i][j] * sigma[j][i] for i in range(d) for j in range(d)), Fraction(0))
    lower, upper = fr(claim["lower"]), fr(claim["upper"])
    assert lower <= upper
    assert value <= upper, f"tr(WΣ) = {float(value)!r} > claimed upper {claim['upper']!r}"
    bound = dual_bound_exact(content, vectors)
    slack = Fraction(0) if claim["rigorous"] else fr(rigorous_slack)
    ok = lower <= bound * (1 + slack) or lower <= 0
    if not ok and known_optimum is not None:
        ok = float(lower) <= known_optimum
    assert ok, f"claimed lower {claim['lower']!r} above the exact dual bound {float(bound)!r}"
    if claim["certified"]:
        assert (upper - lower) / upper <= fr(claim["tol"])
    return sup
