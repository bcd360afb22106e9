r"""The exact privacy a given noise covariance buys.

The mathematics is on the theory page ("One number describes a Gaussian release").

For the Gaussian release :math:`M(D) = f(D) + N(0, \Sigma)` and a sensitivity set :math:`S`
(every change :math:`f(D) - f(D')` between neighbours), the privacy loss of every pair of
neighbours is dominated by that of the worst vector, and everything follows from the single number

.. math::

    \rho^*(\Sigma) = \sup_{s \in S} s^\top \Sigma^{-1} s

RDP :math:`\varepsilon_\alpha = \alpha\rho^*/2` for every order, zCDP
:math:`\rho^*/2`, GDP :math:`\mu = \sqrt{\rho^*}`, the exact (Balle–Wang) curve
:math:`\delta(\varepsilon) = \Phi(\mu/2 - \varepsilon/\mu) - e^\varepsilon\Phi(-\mu/2 -
\varepsilon/\mu)` and its inverse, and mutual information for binary records. The
report is produced by :func:`dpopt.accounting.budgets.privacy_report` from the bound; this module
supplies the
bound, safely rounded up (see :class:`dpopt.covariance.mahalanobis_sup.MahalanobisSup`).

For comparison it also gives the naive bound :math:`\max_s |s|^2\,\lambda_{\max}(\Sigma^{-1})`,
which for a uniform-query set is :math:`\operatorname{diam}(K)^2 \lambda_{\max}(\Sigma^{-1})`
(the cube figure, ``fig1``, draws the ratio).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.problem import VectorSource
from certificates.validate import as_psd_matrix
from dpopt.accounting._arrays import FloatOrArray
from dpopt.accounting.budgets import PrivacyReport, privacy_report
from dpopt.covariance.mahalanobis_sup import MahalanobisSup, sup_mahalanobis
from dpopt.covariance.sensitivity import (
    BoxTwoRecordSet,
    BoxVertexDifferences,
    EllipsoidDifferences,
    as_vector_source,
)
from dpopt.relation import NeighbouringRelation, RelationLike, as_relation, replacement_sup

if TYPE_CHECKING:  # pragma: no cover
    from certificates.io import JSONValue

__all__ = ["CovariancePrivacy", "max_norm", "privacy_from_sup", "privacy_of"]


def max_norm(sensitivity: ArrayLike | VectorSource) -> float:
    r"""Largest Euclidean norm :math:`\max_j |s_j|` over a sensitivity set (one chunked pass).

    For a :class:`~dpopt.covariance.sensitivity.BoxVertexDifferences` it is the box diameter
    :math:`|L|`,
    computed without enumeration.
    """
    src = as_vector_source(sensitivity)
    if isinstance(src, BoxVertexDifferences):
        return src.box.diameter()
    best = 0.0
    for _, block in src.chunks():
        b = np.asarray(block, dtype=np.float64)
        best = max(best, float(np.max(np.einsum("ij,ij->i", b, b))))
    return float(np.sqrt(best))


@dataclass(frozen=True)
class CovariancePrivacy:
    r"""What a covariance :math:`\Sigma` guarantees on a sensitivity set.

    Attributes
    ----------
    mahalanobis_bound : float
        The bound used for accounting: :math:`\rho^*(\Sigma)` safely rounded up
        (``sup.upper``), times 4 for ``relation="replacement"`` (the replacement bound).
    sup : MahalanobisSup
        The add/remove sup computation (value, attained lower value, exactness, maximiser).
    exact : bool
        True when ``mahalanobis_bound`` is the exact sup up to rounding (enumerated set and
        add/remove relation); False when it is an upper bound (SDP relaxation or replacement).
    relation : NeighbouringRelation
        The neighbouring relation the bound is stated for.
    naive_bound : float
        :math:`\max_s|s|^2 \lambda_{\max}(\Sigma^{-1})` (times 4 for replacement).
    looseness : float
        ``naive_bound`` over the computed sup (``sup.value``, times 4 for replacement), >= 1 up
        to rounding: how much the naive bound overstates the privacy loss.
    report : PrivacyReport
        :func:`dpopt.accounting.budgets.privacy_report` of ``mahalanobis_bound`` (RDP curve, zCDP,
        GDP μ,
        δ(ε), ε(δ), MI).
    """

    mahalanobis_bound: float
    sup: MahalanobisSup
    exact: bool
    relation: NeighbouringRelation
    naive_bound: float
    looseness: float
    report: PrivacyReport

    @property
    def zcdp_rho(self) -> float:
        r"""zCDP parameter :math:`\rho^*/2` (from the report, rounded up)."""
        return float(self.report.zcdp_rho)

    @property
    def gdp_mu(self) -> float:
        r"""GDP parameter :math:`\mu = \sqrt{\rho^*}` (from the report, rounded up)."""
        return float(self.report.gdp_mu)

    @overload
    def rdp_epsilon(self, alpha: float) -> float: ...

    @overload
    def rdp_epsilon(self, alpha: ArrayLike) -> FloatOrArray: ...

    def rdp_epsilon(self, alpha: ArrayLike) -> FloatOrArray:
        r"""RDP curve :math:`\varepsilon_\alpha = \alpha\rho^*/2` (delegates to the report)."""
        return self.report.rdp_epsilon(alpha)

    @overload
    def delta(self, epsilon: float) -> float: ...

    @overload
    def delta(self, epsilon: ArrayLike) -> FloatOrArray: ...

    def delta(self, epsilon: ArrayLike) -> FloatOrArray:
        r"""Exact :math:`\delta(\varepsilon)` of the Gaussian pair (delegates to the report)."""
        return self.report.delta(epsilon)

    @overload
    def epsilon(self, delta: float) -> float: ...

    @overload
    def epsilon(self, delta: ArrayLike) -> FloatOrArray: ...

    def epsilon(self, delta: ArrayLike) -> FloatOrArray:
        r"""Smallest :math:`\varepsilon` with :math:`\delta(\varepsilon) \le` ``delta``."""
        return self.report.epsilon(delta)

    def to_dict(self) -> dict[str, JSONValue]:
        """Plain-data summary (JSON-ready)."""
        out: dict[str, Any] = {
            "mahalanobis_bound": self.mahalanobis_bound,
            "computed_sup": self.sup.value,
            "attained_lower": self.sup.lower,
            "exact": self.exact,
            "method": self.sup.method,
            "relation": self.relation.value,
            "naive_bound": self.naive_bound,
            "looseness": self.looseness,
        }
        out["report"] = self.report.to_dict()
        return out


def privacy_of(
    covariance: ArrayLike,
    sensitivity: ArrayLike | VectorSource,
    *,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
) -> CovariancePrivacy:
    r"""Exact privacy of the Gaussian mechanism with covariance :math:`\Sigma`.

    Parameters
    ----------
    covariance : array_like, shape (d, d)
        Symmetric positive definite noise covariance :math:`\Sigma`.
    sensitivity : array_like, shape (J, d), VectorSource, PrunedSet or BoxTwoRecordSet
        The add/remove sensitivity set, e.g. from
        :func:`dpopt.covariance.sensitivity.add_remove_set` or
        :func:`dpopt.covariance.sensitivity.uniform_query_set`. For a
        :class:`~dpopt.covariance.sensitivity.BoxTwoRecordSet` (records anywhere in a box) the
        sup is a certified upper bound (``exact=False``).
    relation : {"add_remove", "replacement"}
        Neighbouring relation. ``"replacement"`` uses the replacement bound :math:`4\rho^*`
        (a valid upper bound, not the exact replacement sup).

    Returns
    -------
    CovariancePrivacy

    Examples
    --------
    >>> from dpopt.covariance.domains import Box
    >>> from dpopt.covariance.sensitivity import uniform_query_set
    >>> p = privacy_of(4.0 * np.eye(2), uniform_query_set(Box([0, 0], [1, 1])))
    >>> round(p.mahalanobis_bound, 9), round(p.gdp_mu, 9)
    (0.5, 0.707106781)
    """
    rel = as_relation(relation)
    if isinstance(sensitivity, EllipsoidDifferences):
        cov = as_psd_matrix("covariance", covariance, dim=sensitivity.dim)
        return privacy_from_sup(sup_mahalanobis(sensitivity, cov), cov,
                                sensitivity.ellipsoid.diameter(), rel)
    if isinstance(sensitivity, BoxTwoRecordSet):
        cov = as_psd_matrix("covariance", covariance, dim=sensitivity.dim)
        # |t_g(x, y)| <= |x - y| <= diam K: the naive comparison bound
        return privacy_from_sup(sup_mahalanobis(sensitivity, cov), cov,
                                sensitivity.box.diameter(), rel)
    src = as_vector_source(sensitivity)
    cov = as_psd_matrix("covariance", covariance, dim=int(src.dim))
    sup = sup_mahalanobis(src, cov)
    return privacy_from_sup(sup, cov, max_norm(src), rel)


def privacy_from_sup(
    sup: MahalanobisSup,
    covariance: NDArray[np.float64],
    largest_norm: float,
    relation: RelationLike = NeighbouringRelation.ADD_REMOVE,
) -> CovariancePrivacy:
    r"""The :class:`CovariancePrivacy` of an already computed add/remove sup (no pass over the
    vectors): the relation's ×4 rule (:func:`dpopt.relation.replacement_sup`), the naive bound
    :math:`\max_s|s|^2/\lambda_{\min}(\Sigma)` and the privacy report of the bound.

    Used by :func:`privacy_of` and by :func:`dpopt.covariance.design.design_covariance`, which
    takes the sup from its certificate's verification pass, so the number is computed once.
    """
    rel = as_relation(relation)
    bound = replacement_sup(float(sup.upper), rel)
    exact = bool(sup.exact) and rel is NeighbouringRelation.ADD_REMOVE
    lam_min = float(np.linalg.eigvalsh(covariance)[0])  # d x d: numpy has less call overhead
    naive = replacement_sup(float(largest_norm) ** 2 / lam_min, rel)
    computed = replacement_sup(float(sup.value), rel)
    looseness = naive / computed if computed > 0 else float("inf")
    return CovariancePrivacy(
        mahalanobis_bound=bound,
        sup=sup,
        exact=exact,
        relation=rel,
        naive_bound=naive,
        looseness=looseness,
        report=privacy_report(bound),
    )
