r"""The budget split of a run of covariance programs as one joint convex program (small sizes).

For releases :math:`t = 1..T` with vectors :math:`s_{tj}`, weights :math:`W_t`, a common floor
:math:`\eta` and a total bound :math:`Q`,

.. math::

    \min_{\Sigma_t, q_t}\ \sum_t\operatorname{tr}(W_t\Sigma_t)\quad\text{s.t.}\quad
    \begin{pmatrix}\Sigma_t & s_{tj}\\ s_{tj}^\top & q_t\end{pmatrix} \succeq 0,\quad
    \Sigma_t \succeq \eta I,\quad \sum_t q_t = Q

is convex (the blocks are linear in :math:`(\Sigma_t, q_t)`; the Schur complement gives
:math:`s_{tj}^\top\Sigma_t^{-1}s_{tj} \le q_t`). :func:`joint_split` solves it with Clarabel and
returns the split only: its answer is a candidate, which the caller re-designs and certifies
release by release.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from certificates.errors import SolverError

__all__ = ["JOINT_MAX_COUNT", "JOINT_MAX_DIM", "JOINT_TARGET", "joint_split"]

#: The joint program is built for at most this many vectors over all releases ...
JOINT_MAX_COUNT = 400
#: ... of dimension at most this (each vector is a (d+1) x (d+1) block).
JOINT_MAX_DIM = 8
#: The solver target of the joint program (Clarabel's tolerances are this / 100, by
#: :data:`solvers.api.TOLERANCE_OPTIONS`); the split is re-designed and certified anyway.
JOINT_TARGET = 1e-9


def joint_split(vector_sets: Sequence[NDArray[np.float64]],
                weights: Sequence[NDArray[np.float64]], total: float, eta: float,
                *, time_limit: float | None = None) -> NDArray[np.float64] | None:
    """The split ``q_t`` of the joint program (module docstring), or ``None`` when the sizes
    exceed ``JOINT_MAX_COUNT`` / ``JOINT_MAX_DIM`` or Clarabel returns no usable split.

    The data are normalised first with one scale for every release (vectors to unit RMS norm
    over all releases, the floor with their squares, the weights by the largest eigenvalue of
    any of them); the split does not change.
    """
    import cvxpy as cp

    sets = [np.asarray(s, dtype=np.float64) for s in vector_sets]
    if (sum(s.shape[0] for s in sets) > JOINT_MAX_COUNT
            or max(s.shape[1] for s in sets) > JOINT_MAX_DIM):
        return None
    scale = float(np.sqrt(np.mean(np.concatenate([np.sum(s * s, axis=1) for s in sets]))))
    if not scale > 0:
        return None
    ws = [0.5 * (np.asarray(w, dtype=np.float64) + np.asarray(w, dtype=np.float64).T)
          for w in weights]
    w_scale = max(float(np.linalg.eigvalsh(w)[-1]) for w in ws)  # one scale for every release
    if not w_scale > 0:
        return None
    qs = cp.Variable(len(sets))
    cons = [cp.sum(qs) == float(total), qs >= 0]
    obj = 0
    for t, (s, w) in enumerate(zip(sets, ws, strict=True)):
        d = s.shape[1]
        wn = w / w_scale
        sig = cp.Variable((d, d), PSD=True)
        cons.append(sig >> (eta / scale**2) * np.eye(d))
        for v in s / scale:
            col = v.reshape(-1, 1)
            cons.append(cp.bmat([[sig, col], [col.T, cp.reshape(qs[t], (1, 1), order="C")]]) >> 0)
        obj = obj + cp.trace(wn @ sig)
    prob = cp.Problem(cp.Minimize(obj), cons)
    from solvers.api import native_options  # the one tolerance table

    options = {**native_options("clarabel", JOINT_TARGET), "max_iter": 300}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*may be inaccurate.*",
                                    category=UserWarning)
            prob.solve(solver="CLARABEL", **options)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # cvxpy's SolverError, numerical failures: the caller iterates
        raise SolverError(f"joint split program failed ({type(exc).__name__}: {exc})") from exc
    if qs.value is None or prob.status not in ("optimal", "optimal_inaccurate"):
        return None
    q = np.asarray(qs.value, dtype=np.float64)
    if not np.all(np.isfinite(q)) or np.any(q <= 0):
        return None
    return q
