r"""Releasing noisy answers: the Gaussian (general covariance) and Laplace mechanisms.

A mechanism adds independent noise to a query answer :math:`g(D) \in \mathbb{R}^d`:

- :class:`GaussianMechanism` releases :math:`g(D) + Z`, :math:`Z \sim N(0, \Sigma)`. Its privacy is
  governed by the Mahalanobis sensitivity :math:`\rho^* = \sup_s s^\top \Sigma^{-1} s` over the
  sensitivity set (RDP :math:`\varepsilon_\alpha = \alpha\rho^*/2`, zCDP
  :math:`\rho^*/2`, :math:`\sqrt{\rho^*}`-GDP); a covariance designed by
  :func:`dpopt.covariance.design.design_covariance` is meant to be used here.
- :class:`LaplaceMechanism` releases :math:`g(D) + L` with independent coordinates
  :math:`L_i \sim \mathrm{Lap}(0, b_i)`, density :math:`e^{-|y|/b_i}/(2b_i)`.
- :class:`DenoiserMechanism` releases the ideal denoiser of a dataset at a public query,
  :math:`m_g(\pi(D)) + N(0, \Sigma)`, where :math:`\pi` snaps every record to the public domain
  the covariance was designed for (nearest point of a grid or point set, clamping into a box).

Randomness: ``rng=None`` draws a fresh generator seeded from the operating system's entropy pool
(what releasing real data needs); an ``int`` seed, a :class:`numpy.random.SeedSequence` or a
:class:`numpy.random.Generator` make a release reproducible (for tests and simulations only).

.. warning::

   The samplers use numpy's floating-point generators. They are **not hardened against
   side-channel or floating-point attacks** (e.g. Mironov 2012, "On significance of the least
   significant bits for differential privacy"): the low-order bits of a released double can leak
   information about the exact answer. Use a hardened discrete sampler (e.g. a discrete Gaussian
   or a snapping mechanism) where that threat model matters.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array, as_psd_matrix, as_scalar
from dpopt.covariance.denoiser import query_and_sigma, snapped_posterior_mean
from dpopt.covariance.domains import (
    Box,
    Domain,
    Ellipsoid,
    FinitePoints,
    Grid,
    SnapReport,
    warn_if_built_from,
)
from dpopt.errors import InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    from dpopt.covariance.design import Design

__all__ = [
    "DenoiserMechanism",
    "DenoiserRelease",
    "GaussianMechanism",
    "LaplaceMechanism",
    "RngLike",
    "as_generator",
]

#: what ``rng=`` accepts: None (fresh OS entropy), a non-negative int seed, a SeedSequence or a
#: Generator
RngLike = int | np.integer | np.random.SeedSequence | np.random.Generator | None


def as_generator(rng: RngLike = None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` from ``None``, a seed or a generator.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` seeds a new generator from the operating system (``np.random.default_rng()``);
        a non-negative ``int`` or a ``SeedSequence`` seeds it reproducibly; a ``Generator`` is
        returned as is.

    Raises
    ------
    InvalidTypeError
        For any other type (bools, floats, strings, legacy ``RandomState`` ...).
    InvalidParameterError
        For a negative integer seed.
    """
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool | np.bool_):
        if int(rng) < 0:
            raise InvalidParameterError("rng", rng, "an integer seed must be >= 0")
        return np.random.default_rng(int(rng))
    raise InvalidTypeError("rng", rng, "None, a non-negative int seed or a numpy Generator")


def _as_value(value: Any, dim: int) -> tuple[NDArray[np.float64], bool]:
    """Validate a query answer whose last axis has length ``dim`` (scalar allowed if dim == 1)."""
    arr = as_float_array("value", value)
    if arr.ndim == 0:
        if dim != 1:
            raise InvalidParameterError(
                "value", value, f"must be a vector of length {dim}, got a scalar"
            )
        return arr.reshape(1), True
    if arr.shape[-1] != dim:
        raise InvalidParameterError(
            "value", value, f"last axis must have length {dim}, got shape {arr.shape}"
        )
    return arr, False


@dataclass(frozen=True)
class GaussianMechanism:
    r"""Add :math:`N(0, \Sigma)` noise to a query answer in :math:`\mathbb{R}^d`.

    The noise is drawn as :math:`Z = L\xi`, :math:`\xi \sim N(0, I_d)`, with
    :math:`L = V \operatorname{diag}(\sqrt{\lambda})` from the eigendecomposition
    :math:`\Sigma = V \operatorname{diag}(\lambda) V^\top`, so a singular (positive semidefinite)
    :math:`\Sigma` is allowed: an optimal design for sensitivity vectors that do not span
    :math:`\mathbb{R}^d` has no noise outside their span. Eigenvalues that
    are negative only by rounding are set to 0 (never below the input).

    Parameters
    ----------
    covariance : array_like, shape (d, d)
        Symmetric positive semidefinite :math:`\Sigma`.

    Examples
    --------
    >>> mech = GaussianMechanism([[2.0, 0.5], [0.5, 1.0]])
    >>> mech.release([1.0, 2.0], rng=7).shape
    (2,)
    """

    covariance: NDArray[np.float64]
    _factor: NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cov = as_psd_matrix("covariance", self.covariance, strict=False)
        eig, vec = np.linalg.eigh(cov)
        factor = vec * np.sqrt(np.clip(eig, 0.0, None))[None, :]
        object.__setattr__(self, "covariance", cov)
        object.__setattr__(self, "_factor", factor)

    @classmethod
    def isotropic(cls, sigma: float, dim: int = 1) -> GaussianMechanism:
        r"""The mechanism with :math:`\Sigma = \sigma^2 I_d` (``sigma`` is a standard deviation)."""
        s = as_scalar("sigma", sigma, low=0.0)
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
            raise InvalidParameterError("dim", dim, "must be an integer >= 1")
        return cls(s * s * np.eye(int(dim)))

    @property
    def dim(self) -> int:
        """Dimension d of the released vector."""
        return int(self.covariance.shape[0])

    def noise(self, size: int | tuple[int, ...] = (), rng: RngLike = None) -> NDArray[np.float64]:
        """Draw noise vectors only, shape ``(*size, d)``."""
        shape = (size,) if isinstance(size, int) else tuple(size)
        gen = as_generator(rng)
        xi = gen.standard_normal((*shape, self.dim))
        return np.asarray(xi @ self._factor.T, dtype=np.float64)

    @overload
    def release(self, value: float, rng: RngLike = None) -> float: ...

    @overload
    def release(self, value: ArrayLike, rng: RngLike = None) -> NDArray[np.float64]: ...

    def release(self, value: ArrayLike, rng: RngLike = None) -> NDArray[np.float64] | float:
        r"""Return ``value + Z`` with fresh :math:`Z \sim N(0, \Sigma)` per row.

        Parameters
        ----------
        value : array_like, shape (..., d)
            The exact query answer(s); each row along the leading axes gets independent noise.
            A scalar is accepted when d = 1 (then a float is returned).
        rng : None, int, SeedSequence or Generator
            See :func:`as_generator`; ``None`` (default) uses operating-system entropy.
        """
        arr, scalar = _as_value(value, self.dim)
        out = arr + self.noise(arr.shape[:-1], rng)
        return float(out[0]) if scalar else out


@dataclass(frozen=True)
class LaplaceMechanism:
    r"""Add independent :math:`\mathrm{Lap}(0, b_i)` noise to each coordinate.

    Parameters
    ----------
    scale : float or array_like, shape (d,)
        Scale(s) :math:`b > 0` (not the standard deviation, which is :math:`\sqrt2\,b`). A scalar
        applies to every coordinate of a value of any shape; a vector of length d applies
        coordinate-wise along the last axis.

    Examples
    --------
    >>> LaplaceMechanism(1.0).release(3.0, rng=0) != 3.0
    True
    """

    scale: float | NDArray[np.float64]

    def __post_init__(self) -> None:
        arr = as_float_array("scale", self.scale, low=0.0)
        if arr.ndim == 0:
            object.__setattr__(self, "scale", float(arr))
        elif arr.ndim == 1:
            object.__setattr__(self, "scale", arr)
        else:
            raise InvalidParameterError(
                "scale", self.scale, f"must be a scalar or a 1-D array, got shape {arr.shape}"
            )

    @property
    def dim(self) -> int | None:
        """Length d of the scale vector, or ``None`` for a scalar scale."""
        return None if isinstance(self.scale, float) else int(self.scale.shape[0])

    @overload
    def release(self, value: float, rng: RngLike = None) -> float: ...

    @overload
    def release(self, value: ArrayLike, rng: RngLike = None) -> NDArray[np.float64]: ...

    def release(self, value: ArrayLike, rng: RngLike = None) -> NDArray[np.float64] | float:
        r"""Return ``value + L`` with fresh independent Laplace noise of the given scale(s).

        Parameters
        ----------
        value : array_like
            The exact query answer(s); with a vector scale the last axis must have length d.
            A scalar value with a scalar scale returns a float.
        rng : None, int, SeedSequence or Generator
            See :func:`as_generator`; ``None`` (default) uses operating-system entropy.
        """
        gen = as_generator(rng)
        if self.dim is None:
            arr = as_float_array("value", value)
            out = arr + gen.laplace(0.0, 1.0, size=arr.shape) * float(self.scale)
            return float(out) if arr.ndim == 0 else out
        arr, scalar = _as_value(value, self.dim)
        out = arr + gen.laplace(0.0, 1.0, size=arr.shape) * self.scale
        return float(out[0]) if scalar else out


@dataclass(frozen=True)
class DenoiserRelease:
    r"""One release of :class:`DenoiserMechanism`.

    Attributes
    ----------
    value : ndarray, shape (d,)
        The noisy denoiser :math:`m_g(\pi(D)) + Z`: the only thing meant to be published.
    snap : SnapReport
        What snapping did to the records. Its counts are functions of the private records; they
        are for the data holder and are not covered by the guarantee.
    """

    value: NDArray[np.float64]
    snap: SnapReport


@dataclass(frozen=True, init=False)
class DenoiserMechanism:
    r"""Release the ideal denoiser at a public query with a designed covariance, records snapped.

    .. math::

        M(D) = m_g(\pi(D)) + Z, \qquad Z \sim N(0, \Sigma),

    with :math:`m_g` the ideal denoiser (:func:`dpopt.covariance.denoiser.posterior_mean`) and
    :math:`\pi` the snapping map of the domain (:meth:`Grid.snap`, :meth:`FinitePoints.snap`:
    nearest domain point, records outside the box clamped; :meth:`Box.snap`: clamping). A
    covariance designed on ``add_remove_set(domain, query, sigma)`` bounds
    :math:`t^\top\Sigma^{-1}t` for every pair of domain points, and snapping maps each record
    alone to a domain point, so datasets differing by one record (add/remove) still differ by one
    snapped record and the design's guarantee holds for :math:`M` whatever real values the
    records take. Without snapping a grid design does *not* cover records between grid points.

    The domain, the query and :math:`\sigma` must be public: fixed without looking at the
    records. Releasing with a :class:`FinitePoints` domain equal to the released records warns.

    Parameters
    ----------
    domain : Grid, FinitePoints, Box, Ball or Ellipsoid
        The public domain the covariance was designed for.
    query : array_like, shape (d,)
        The public query point :math:`g`.
    sigma : float
        The denoiser noise scale, > 0.
    covariance : array_like, shape (d, d)
        The noise covariance (e.g. ``design.covariance``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpopt.covariance.domains import Grid
    >>> mech = DenoiserMechanism(Grid([0.0], [1.0], [5]), [0.5], 0.1, [[0.01]])
    >>> out = mech.release(np.array([[0.13], [0.52], [1.4]]), rng=0)
    >>> out.value.shape, out.snap.clamped
    ((1,), 1)
    """

    domain: Domain
    query: NDArray[np.float64]
    sigma: float
    covariance: NDArray[np.float64]
    _gauss: GaussianMechanism = field(repr=False, compare=False)

    def __init__(self, domain: Domain, query: ArrayLike, sigma: float,
                 covariance: ArrayLike) -> None:
        if not isinstance(domain, FinitePoints | Box | Grid | Ellipsoid):
            raise InvalidTypeError("domain", domain, "a Grid, FinitePoints, Box, Ball or Ellipsoid")
        g, s = query_and_sigma(query, sigma, domain.dim)
        gauss = GaussianMechanism(as_float_array("covariance", covariance))
        if gauss.dim != domain.dim:
            raise InvalidParameterError(
                "covariance", covariance, f"must be {domain.dim} x {domain.dim}"
            )
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "query", g)
        object.__setattr__(self, "sigma", s)
        object.__setattr__(self, "covariance", gauss.covariance)
        object.__setattr__(self, "_gauss", gauss)

    @classmethod
    def from_design(cls, design: Design, domain: Domain | None = None) -> DenoiserMechanism:
        """The mechanism a design was made for: its box, query and sigma (a box design), or its
        query and sigma on ``domain`` (a design on ``add_remove_set(grid or points, ...)``).

        For a finite design ``domain`` is required and must have exactly the design's points, so
        records are snapped to the values the design covers.

        Raises
        ------
        InvalidParameterError
            The design is not a fixed-query denoiser design, or ``domain`` is not its domain.
        """
        from dpopt.covariance.sensitivity import TwoRecordVectors

        cov = design.covariance
        coverage = getattr(design, "coverage", None)
        sset = getattr(coverage, "sensitivity", None)
        if sset is not None and hasattr(sset, "box"):
            if domain is not None and not (
                    isinstance(domain, Box) and np.array_equal(domain.lower, sset.box.lower)
                    and np.array_equal(domain.upper, sset.box.upper)):
                raise InvalidParameterError("domain", domain, "must be the design's box")
            return cls(sset.box, sset.query, sset.sigma, cov)
        src = getattr(design.program.vectors, "inner", design.program.vectors)
        if not isinstance(src, TwoRecordVectors):
            raise InvalidParameterError(
                "design", design, "is not a fixed-query denoiser design (add_remove_set)")
        if domain is None or isinstance(domain, Box | Ellipsoid):
            raise InvalidParameterError(
                "domain", domain, "give the Grid or FinitePoints the design was made on")
        if not np.array_equal(np.asarray(domain.points), src.points):
            raise InvalidParameterError("domain", domain, "must have exactly the design's points")
        return cls(domain, src.query, src.sigma, cov)

    @property
    def dim(self) -> int:
        """Dimension d."""
        return self.domain.dim

    def exact(self, records: ArrayLike) -> tuple[NDArray[np.float64], SnapReport]:
        r"""The noiseless :math:`m_g(\pi(D))` and the snap report (never publish these)."""
        warn_if_built_from(self.domain, records)
        return snapped_posterior_mean(records, self.domain, self.query, self.sigma)

    def release(self, records: ArrayLike, rng: RngLike = None) -> DenoiserRelease:
        r"""Snap the records, compute the denoiser and add one draw of :math:`N(0, \Sigma)`.

        Parameters
        ----------
        records : array_like, shape (n, d), n >= 1
            The private records (any real values).
        rng : None, int, SeedSequence or Generator
            See :func:`as_generator`; ``None`` (default) uses operating-system entropy.
        """
        mean, report = self.exact(records)
        value = self._gauss.release(mean, rng)
        return DenoiserRelease(value=np.asarray(value, dtype=np.float64), snap=report)
