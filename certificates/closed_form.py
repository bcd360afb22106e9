r"""Lower bounds that hold for every covariance program, computed exactly.

For :math:`\min\operatorname{tr}(W\Sigma)` s.t. :math:`s_j^\top\Sigma^{-1}s_j \le q`,
:math:`\Sigma \succeq \eta I` (:math:`W \succ 0`) every feasible :math:`\Sigma` and every vector
:math:`s` of the set satisfy:

* :math:`\operatorname{tr}(W\Sigma) \ge \eta\operatorname{tr}W`, since
  :math:`\operatorname{tr}(W(\Sigma - \eta I)) \ge 0` (the dual :math:`H = W`,
  :math:`\lambda = 0`);
* :math:`\Sigma \succeq ss^\top/q` (Schur complement of
  :math:`\begin{pmatrix}\Sigma & s\\ s^\top & q\end{pmatrix} \succeq 0`), hence
  :math:`\operatorname{tr}(W\Sigma) \ge s^\top Ws/q`;
* with :math:`X = \Sigma - \eta I \succeq 0`: :math:`s^\top Xs \ge t = |s|^4/q - \eta|s|^2`
  (from :math:`s^\top\Sigma s \ge |s|^4/q`), and :math:`\min\{\operatorname{tr}(WX) : X \succeq
  0,\ s^\top Xs \ge t\} = t/(s^\top W^{-1}s)` (its dual: the largest :math:`y` with
  :math:`W \succeq y\,ss^\top`), hence :math:`\operatorname{tr}(W\Sigma) \ge \eta
  \operatorname{tr}W + (|s|^4/q - \eta|s|^2)_+/(s^\top W^{-1}s)`.

These are the optimal values in the closed-form cases: :math:`\eta I` is optimal when
:math:`\eta q \ge \max_j|s_j|^2` (first bound), a set on one line has the optimum
:math:`s^\top Ws/q` without a floor (second bound, as an infimum) and
:math:`\eta\operatorname{tr}W + w(|s|^2/q - \eta)_+` with a floor when :math:`s` is an
eigenvector of :math:`W` with eigenvalue :math:`w` (third bound). Evaluated in exact rational
arithmetic on the doubles stored (the inverse by fraction-free elimination), then rounded
down, they prove such optima to the last bit, whatever the condition number of :math:`W`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from certificates.rounding import round_down

__all__ = ["EXACT_MAX_DIM", "closed_form_lower_bound"]

#: Above this dimension the exact inverse is skipped (its cost grows like d^3 big-integer
#: operations); the first two bounds are always evaluated.
EXACT_MAX_DIM = 40


def _fractions(a: NDArray[np.float64]) -> list[Fraction]:
    return [Fraction(float(x)) for x in np.asarray(a, dtype=np.float64).ravel()]


def _inverse_form(weight: NDArray[np.float64], s: NDArray[np.float64]) -> Fraction | None:
    """:math:`s^\\top W^{-1}s` exactly (``None`` when W is singular)."""
    d = s.shape[0]
    rows = [[*_fractions(weight[i]), Fraction(float(s[i]))] for i in range(d)]
    # common denominator: integers, then fraction-free (Bareiss) elimination
    den = 1
    for row in rows:
        for entry in row:
            den = max(den, entry.denominator)
    mat = [[int(entry * den) for entry in row] for row in rows]
    prev = 1
    for k in range(d):
        if mat[k][k] == 0:
            swap = next((i for i in range(k + 1, d) if mat[i][k] != 0), None)
            if swap is None:
                return None
            mat[k], mat[swap] = mat[swap], mat[k]
        piv = mat[k][k]
        for i in range(k + 1, d):
            mi, mk = mat[i], mat[k]
            f = mi[k]
            for j in range(k + 1, d + 1):
                mi[j] = (mi[j] * piv - f * mk[j]) // prev
            mi[k] = 0
        prev = piv
    sol: list[Fraction] = [Fraction(0)] * d
    for i in range(d - 1, -1, -1):
        acc = Fraction(mat[i][d]) - sum((mat[i][j] * sol[j] for j in range(i + 1, d)),
                                        Fraction(0))
        sol[i] = acc / mat[i][i]
    sf = _fractions(s)
    return sum((sf[i] * sol[i] for i in range(d)), Fraction(0))


def _float_estimates(w: NDArray[np.float64], bound: float, eta: float,
                     s: NDArray[np.float64]) -> tuple[float, float]:
    """Float values of the second and third bounds (a screen: the exact ones are computed only
    when they may beat the bound in hand)."""
    norm2 = float(s @ s)
    second = float(s @ w @ s) / bound
    excess = norm2 * norm2 / bound - eta * norm2
    third = 0.0
    if excess > 0 and eta > 0:
        try:
            inv = float(s @ np.linalg.solve(w, s))
        except np.linalg.LinAlgError:
            inv = 0.0
        if inv > 0:
            third = eta * float(np.trace(w)) + excess / inv
    return second, third


def closed_form_lower_bound(weight: NDArray[np.float64], bound: float, eta: float,
                            vectors: NDArray[np.float64], above: float = 0.0) -> float:
    r"""The best of the three bounds of the module docstring over the rows of ``vectors`` (any
    vectors of the set, e.g. the one the verification pass found largest), exact, rounded down.

    Parameters
    ----------
    weight : ndarray, shape (d, d)
        W (symmetric positive definite, as stored).
    bound : float
        q > 0.
    eta : float
        The noise floor (>= 0).
    vectors : ndarray, shape (k, d)
        Vectors of the program's set (may be empty).
    above : float, default 0
        A lower bound already in hand: exact evaluations whose float estimate falls clearly
        below it (by more than 0.1 %) are skipped, so the call costs O(d^3) floating-point
        operations when the closed forms do not apply.

    Returns
    -------
    float
        A lower bound on the optimal value (exact, rounded down), 0.0 when none applies or
        beats ``above``.
    """
    w = np.asarray(weight, dtype=np.float64)
    d = w.shape[0]
    qf, ef = Fraction(float(bound)), Fraction(float(eta))
    if qf <= 0:
        return 0.0
    screen = float(above) * (1.0 - 1e-3)
    # eta tr W, exact (0 without a floor, where the trace is never used)
    trace = sum((Fraction(float(x)) for x in np.diag(w)), Fraction(0)) if eta > 0 else Fraction(0)
    best = ef * trace
    wf: list[Fraction] | None = None
    for s in np.asarray(vectors, dtype=np.float64).reshape(-1, d):
        second, third = _float_estimates(w, float(bound), float(eta), s)
        if max(second, third) < screen:
            continue
        if wf is None:
            wf = _fractions(w)
        sf = _fractions(s)
        norm2 = sum((x * x for x in sf), Fraction(0))
        if norm2 == 0:
            continue
        ws = [sum((wf[i * d + j] * sf[j] for j in range(d)), Fraction(0)) for i in range(d)]
        best = max(best, sum((sf[i] * ws[i] for i in range(d)), Fraction(0)) / qf)
        excess = norm2 * norm2 / qf - ef * norm2
        if excess > 0 and eta > 0 and d <= EXACT_MAX_DIM and third >= screen:
            inv = _inverse_form(w, s)
            if inv is not None and inv > 0:
                best = max(best, ef * trace + excess / inv)
    return round_down(best) if best > 0 else 0.0
