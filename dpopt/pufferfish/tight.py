r"""Tight Rényi Pufferfish calibration: the least noise scale, certified to within a tolerance.

The α-Wasserstein condition of Ding, Yang and Zhang ("α-Wasserstein Mechanism for Rényi
Pufferfish Privacy") is *sufficient*: at its scale the true divergence
:math:`D_\alpha(P_i*N\,\|\,P_j*N)` is often well below :math:`\varepsilon`. This module finds the
least scale :math:`b` (Laplace) or :math:`\sigma` (Gaussian) with

.. math:: D_\alpha(P_{s_i,\theta} * N_b \,\|\, P_{s_j,\theta} * N_b) \le \varepsilon

for every discriminative pair, both orders and every prior, of a 1-D scenario, and proves it:

* **feasible** — at the released scale every divergence is below :math:`\varepsilon` by a
  *proven upper bound* (:func:`certificates.renyi_mixture.divergence_bounds`: closed-form
  convex-chord bounds of the piecewise-exponential Laplace mixture, chord/tangent bounds of the
  log-convex Gaussian mixture, exact or proven tails, explicit rounding slack);
* **tight** — at :math:`(1-\mathrm{tol})\,b` some divergence exceeds :math:`\varepsilon` by a
  *proven lower bound*. The true divergence is nonincreasing in the scale (Gaussian: adding
  independent noise; Laplace: :math:`\mathrm{Lap}(b_2)` is :math:`\mathrm{Lap}(b_1)` convolved
  with :math:`r^2\delta_0 + (1-r^2)\mathrm{Lap}(b_2)`, :math:`r = b_1/b_2`, and the
  data-processing inequality), so every scale below :math:`(1-\mathrm{tol})\,b` fails as well:
  the true least scale lies in :math:`((1-\mathrm{tol})\,b,\ b]`.

The search is a bisection in :math:`\log b` on the proven upper bound, started from the
α-Wasserstein scale (:func:`dpopt.pufferfish.calibrate`, always feasible, so the fast bound is
also the bracket). The bounds are refined until their width is :math:`0.2\,\mathrm{tol}\,
\varepsilon`, which is what the tightness proof needs; if a scenario is so flat in the scale
that the lower bound cannot be shown within three refinements, the result is still a proven
private scale but ``tight`` is False (with an :class:`~dpopt.errors.AccuracyWarning`).

With :math:`\alpha=\infty` (Laplace) the condition is pure Pufferfish privacy,
:math:`\log\sup p/q \le \varepsilon`, evaluated exactly (the ratio of the two mixtures is
monotone between atoms). Gaussian noise is never pure. The exponential mechanism in dimension
:math:`d > 1` is not covered: its mixture densities :math:`\sum_k p_k e^{-\lVert y - x_k\rVert/
\theta}` have no piecewise closed form in :math:`\mathbb{R}^d` (in 1-D it *is* Laplace noise).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from certificates.renyi_mixture import (
    MixtureCertificate,
    check_calibration,
    divergence_bounds,
    write_mixture_certificate,
)
from certificates.validate import as_scalar
from dpopt.errors import AccuracyWarning, CertificateError, InvalidParameterError, InvalidTypeError
from dpopt.pufferfish.scenario import Scenario

__all__ = ["TightCalibration", "calibrate_tight"]

NOISES = ("laplace", "gaussian")

LawPair = tuple[str, Any, Any, Any, Any]


@dataclass(frozen=True)
class TightCalibration:
    r"""The least private scale of a scenario, bracketed and certified.

    Attributes
    ----------
    scale : float
        The released scale :math:`b` (Laplace) or :math:`\sigma` (Gaussian); proven
        :math:`(\alpha,\varepsilon)`-RPP.
    refuted_scale : float or None
        :math:`(1-\mathrm{tol})\cdot` ``scale``: proven **not** private when ``tight``.
    noise : str
    alpha, epsilon, tol : float
    alpha_w_scale : float
        The scale the search started from: the α-Wasserstein scale (a sufficient, faster
        bound) unless ``start`` was given.
    binding_pair : (prior, s_i, s_j)
        The pair with the largest divergence at ``refuted_scale`` (or at ``scale``).
    certificate : MixtureCertificate or None
        The independent check of both claims (at scale 0 when no noise is needed).
    tight : bool
        The true least scale lies in ``(refuted_scale, scale]``.
    evaluations : int
        Number of bound evaluations (scales × pairs × orders) the search used.
    law_pairs : tuple
        The (label, x, p, y, q) laws of every pair with different laws.
    message : str
        One sentence on the result (e.g. that no noise is needed when the least scale is 0).
    """

    scale: float
    refuted_scale: float | None
    noise: str
    alpha: float
    epsilon: float
    tol: float
    alpha_w_scale: float
    binding_pair: tuple[Hashable, Hashable, Hashable]
    certificate: MixtureCertificate | None
    tight: bool
    evaluations: int
    law_pairs: tuple[LawPair, ...]
    message: str = ""

    @property
    def noise_needed(self) -> bool:
        r"""False when the least scale is exactly 0: the laws themselves already satisfy
        :math:`D_\alpha \le \varepsilon` (releasing the query without noise is private)."""
        return self.scale > 0.0

    @property
    def gain(self) -> float:
        """``alpha_w_scale / scale``: how much less noise than the α-Wasserstein bound."""
        return self.alpha_w_scale / self.scale if self.scale > 0 else float("inf")

    def write_certificate(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
        """Write the JSON certificate (laws, α, ε, scales, claims); return its sha256.

        Re-check it with ``dpopt verify FILE``, :func:`dpopt.verification.verify` or
        :func:`certificates.renyi_mixture.verify_mixture_file`. A scale of 0 (no noise needed)
        is written and re-proved like any other.
        """
        if self.certificate is None:
            raise CertificateError("nothing to certify: every pair has equal laws (scale 0)")
        return write_mixture_certificate(
            path, self.law_pairs, self.certificate, overwrite=overwrite
        )


def _identical(a: Any, b: Any) -> bool:
    """Exactly the same law (after merging repeated atoms): no tolerance, since any difference
    gives a positive divergence that a tiny ε may not allow."""
    xa, ia = np.unique(a.support[:, 0], return_inverse=True)
    xb, ib = np.unique(b.support[:, 0], return_inverse=True)
    if xa.shape != xb.shape or not np.array_equal(xa, xb):
        return False
    pa = np.bincount(np.ravel(ia), weights=a.probabilities, minlength=xa.size)
    pb = np.bincount(np.ravel(ib), weights=b.probabilities, minlength=xb.size)
    return bool(np.array_equal(pa, pb))


def _law_pairs(scenario: Scenario, keep_identical: bool = False) -> tuple[
    list[LawPair], list[tuple[Hashable, ...]]
]:
    pairs: list[LawPair] = []
    keys: list[tuple[Hashable, ...]] = []
    for theta, si, sj, pl, ql in scenario.iter_pairs():
        if not keep_identical and _identical(pl, ql):
            continue  # identical laws: D = 0 at every scale
        label = f"prior={theta!r} secrets=({si!r}, {sj!r})"
        pairs.append(
            (label, pl.support[:, 0], pl.probabilities, ql.support[:, 0], ql.probabilities)
        )
        keys.append((theta, si, sj))
    return pairs, keys


class _Search:
    """Proven bounds of the worst pair at a scale, with an evaluation counter."""

    def __init__(self, pairs: list[LawPair], noise: str, alpha: float, epsilon: float) -> None:
        self.pairs, self.noise, self.alpha, self.eps = pairs, noise, alpha, epsilon
        self.count = 0

    def _bounds(self, k: int, rev: bool, scale: float, gap: float) -> tuple[float, float]:
        _, x, p, y, q = self.pairs[k]
        if rev:
            x, p, y, q = y, q, x, p
        self.count += 1
        b = divergence_bounds(
            x, p, y, q, noise=self.noise, scale=scale, alpha=self.alpha, gap=gap, decide=self.eps
        )
        return b.lower, b.upper

    def private(self, scale: float, gap: float) -> tuple[bool, float]:
        """(proven upper bound <= epsilon for every pair and order, a divergence estimate).

        Stops at the first pair that is not proven private.
        """
        worst = 0.0
        for k in range(len(self.pairs)):
            for rev in (False, True):
                lo, up = self._bounds(k, rev, scale, gap)
                worst = max(worst, 0.5 * (lo + up))
                if up > self.eps:
                    return False, worst
        return True, worst

    def refuted(self, scale: float, gap: float) -> bool:
        """Proven lower bound > epsilon for some pair and order."""
        for k in range(len(self.pairs)):
            for rev in (False, True):
                if self._bounds(k, rev, scale, gap)[0] > self.eps:
                    return True
        return False


def _guess(lo: float, d_lo: float, hi: float, d_hi: float, target: float) -> float | None:
    """Secant step in (log scale, log divergence): where the line through both ends hits target."""
    if not (d_lo > d_hi > 0.0 and target > 0.0):
        return None
    k = math.log(d_lo / d_hi) / math.log(hi / lo)
    if not k > 0.0:
        return None
    return hi * math.exp(math.log(d_hi / target) / k)


def _bracket(search: _Search, hi: float, d_hi: float, gap: float, tol: float) -> tuple[
    float, float, bool
]:
    """Shrink [lo, hi] (lo not proven private, hi private) until hi / lo <= 1 + tol / 4.

    Returns (lo, hi, found) where found is False if every scale down to hi / 2^80 was private.
    """
    step = 1.0 + 0.25 * tol
    lo, d_lo = hi, d_hi
    for _ in range(80):
        lo = lo * 0.5
        ok, d_lo = search.private(lo, gap)
        if not ok:
            break
        hi, d_hi = lo, d_lo
    else:
        return lo, hi, False
    target = search.eps * (1.0 - 0.05 * tol)
    slow = 0
    while hi / lo > step:
        g = _guess(lo, d_lo, hi, d_hi, target) if slow < 2 else None
        width = math.log(hi / lo)
        if g is None or not lo < g < hi:
            g = math.sqrt(lo * hi)
        # keep away from the ends so that the bracket always shrinks
        g = min(max(g, lo * math.exp(0.02 * width)), hi * math.exp(-0.02 * width))
        ok, d = search.private(g, gap)
        if ok:
            hi, d_hi = g, d
            # try to close the bracket at once just below the new feasible point
            close = hi / step * (1.0 + 1e-9)
            if close > lo:
                ok2, d2 = search.private(close, gap)
                if ok2:
                    hi, d_hi = close, d2
                else:
                    lo, d_lo = close, d2
        else:
            lo, d_lo = g, d
        slow = slow + 1 if math.log(hi / lo) > 0.5 * width else 0
    return lo, hi, True


def _start_scale(scenario: Scenario, noise: str, alpha: float, epsilon: float) -> float:
    from dpopt.pufferfish.calibration import calibrate_gaussian, calibrate_laplace

    if noise == "gaussian":
        return float(calibrate_gaussian(scenario, alpha, epsilon).scale)
    return float(calibrate_laplace(scenario, alpha, epsilon).scale)


def calibrate_tight(
    scenario: Scenario,
    alpha: float,
    epsilon: float,
    noise: str = "laplace",
    tol: float = 0.01,
    *,
    start: float | None = None,
) -> TightCalibration:
    r"""Least :math:`(\alpha,\varepsilon)`-RPP noise scale of a 1-D scenario, within ``tol``.

    Parameters
    ----------
    scenario : Scenario
        Discrete conditional laws of a 1-D query.
    alpha : float
        Rényi order > 1, or ``numpy.inf`` (pure Pufferfish; Laplace only).
    epsilon : float
        Target :math:`\varepsilon > 0`.
    noise : {"laplace", "gaussian"}
        :math:`\mathrm{Lap}(0, b)` or :math:`N(0, \sigma^2)` added to the query.
    tol : float, default 0.01
        Relative tolerance in (0, 0.5): the true least scale is proven to exceed
        :math:`(1-\mathrm{tol})\cdot` ``scale``.
    start : float, optional
        A scale known to be private to start from (default: the α-Wasserstein calibration).
        It is only a starting point: the result is proven independently of it.

    Returns
    -------
    TightCalibration

    Raises
    ------
    InvalidParameterError
        Bad α, ε, tol or noise; a scenario of dimension > 1; Gaussian noise with α = ∞.
    CertificateError
        If the final independent check of the released scale fails (never expected).

    Examples
    --------
    >>> sc = Scenario.from_laws({"a": ([0, 1, 2], [.5, .3, .2]),
    ...                          "b": ([0, 1, 2, 3], [.2, .3, .3, .2])})
    >>> cal = calibrate_tight(sc, 2.0, 1.0)
    >>> cal.tight, cal.refuted_scale < 0.40521198 <= cal.scale
    (True, True)
    """
    if not isinstance(scenario, Scenario):
        raise InvalidTypeError("scenario", scenario, "a Scenario")
    if scenario.dim != 1:
        raise InvalidParameterError(
            "scenario", f"dim {scenario.dim}", "the tight calibration needs a 1-D query"
        )
    if noise not in NOISES:
        raise InvalidParameterError("noise", noise, f"must be one of {NOISES}")
    a = as_scalar("alpha", alpha, low=1.0, allow_inf=True)
    if math.isinf(a) and noise == "gaussian":
        raise InvalidParameterError(
            "alpha", alpha, "alpha = inf needs Laplace noise (Gaussian noise is never pure)"
        )
    eps = as_scalar("epsilon", epsilon, low=0.0)
    tl = as_scalar("tol", tol, low=0.0, high=0.5)
    pairs, keys = _law_pairs(scenario)
    first = next(scenario.iter_pairs())
    if not pairs:  # every pair has equal laws: D = 0 at scale 0, proven like any other claim
        every, _ = _law_pairs(scenario, keep_identical=True)
        zero = check_calibration(every, noise=noise, alpha=a, epsilon=eps, scale=0.0)
        return TightCalibration(
            scale=0.0, refuted_scale=None, noise=noise, alpha=a, epsilon=eps, tol=tl,
            alpha_w_scale=0.0, binding_pair=(first[0], first[1], first[2]),
            certificate=zero if zero.certified else None, tight=True,
            evaluations=2 * len(every), law_pairs=tuple(every),
            message="no noise is needed: every pair has equal laws (least scale 0, exact)",
        )
    aw = _start_scale(scenario, noise, a, eps) if start is None else as_scalar(
        "start", start, low=0.0
    )
    zero = check_calibration(pairs, noise=noise, alpha=a, epsilon=eps, scale=0.0)
    if zero.certified:  # the laws themselves: D_alpha <= eps for every pair and order
        scores = [pb.upper for pb in zero.pairs]
        theta, si, sj = keys[int(np.argmax(scores))]
        return TightCalibration(
            scale=0.0, refuted_scale=None, noise=noise, alpha=a, epsilon=eps, tol=tl,
            alpha_w_scale=aw, binding_pair=(theta, si, sj), certificate=zero, tight=True,
            evaluations=2 * len(pairs), law_pairs=tuple(pairs),
            message=(
                "no noise is needed: the laws already satisfy D_alpha <= "
                f"{zero.upper:.6g} <= epsilon = {eps:g} for every pair in both orders, so "
                "releasing the query exactly is private (least scale 0, exact)"
            ),
        )
    hi = aw
    search = _Search(pairs, noise, a, eps)
    gap = 0.2 * tl * eps
    step = 1.0 + 0.25 * tl
    tight = False
    for _attempt in range(4):
        for _ in range(2000):
            ok, d_hi = search.private(hi, gap)
            if ok:
                break
            hi *= step
        else:  # pragma: no cover - the alpha-W start is private, bounds converge
            raise CertificateError(f"no proven private scale found above {aw!r}; please report")
        _, hi, found = _bracket(search, hi, d_hi, gap, tl)
        if not found:
            break  # private at every scale tried: D_alpha of the laws themselves <= eps
        if search.refuted((1.0 - tl) * hi, gap):
            tight = True
            break
        gap /= 8.0
    refuted = (1.0 - tl) * hi
    cert = check_calibration(
        pairs, noise=noise, alpha=a, epsilon=eps, scale=hi, refuted_scale=refuted, gap=gap
    )
    if not cert.certified:
        raise CertificateError(f"the released scale {hi!r} failed its check: {cert.message}")
    if not cert.tight:
        tight = False
        warnings.warn(
            f"could not prove that {refuted:.6g} is not private (the divergence is nearly flat "
            "in the scale, or epsilon * tol is near the rounding level of the bounds); the scale "
            "is private but may exceed the least one by more than tol",
            AccuracyWarning,
            stacklevel=2,
        )
    scores = [
        pb.lower_below if tight else pb.upper for pb in cert.pairs
    ]
    theta, si, sj = keys[int(np.argmax(scores))]
    msg = (f"scale {hi:.10g} is private and {refuted:.10g} is not: the least private scale "
           f"lies in ({refuted:.10g}, {hi:.10g}]" if tight else
           f"scale {hi:.10g} is private; the least private scale was not bracketed within tol")
    return TightCalibration(
        scale=hi, refuted_scale=refuted if tight else None, noise=noise, alpha=a, epsilon=eps,
        tol=tl, alpha_w_scale=aw, binding_pair=(theta, si, sj), certificate=cert, tight=tight,
        evaluations=search.count + 2 * len(pairs), law_pairs=tuple(pairs), message=msg,
    )
