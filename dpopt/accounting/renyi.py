r"""Rényi divergences and log-moments of shifted Laplace and Gaussian noise.

Following Mironov, "Rényi Differential Privacy" (Table II), and Pierquin et al., "Rényi Pufferfish
Privacy: General Additive Noise Mechanisms and Privacy Amplification by Iteration".

For an additive noise density :math:`f` and a shift :math:`z` the Rényi moment of order
:math:`\alpha > 1` is

.. math:: M_\alpha(z) = \int f(u)^\alpha f(u - z)^{1-\alpha}\,du
          = \exp\big((\alpha - 1) D_\alpha(N + z \,\|\, N)\big),

and for symmetric noise :math:`M_\alpha(z) = M_\alpha(-z)`. Everything here works on the log scale
(``log M``), is vectorised and broadcasts its array arguments with numpy rules. Scalar inputs give a
Python ``float``; any array input gives a float64 array.

Closed forms, with :math:`t = |z|/b` (Laplace) or :math:`t = |z|/\sigma`
(Gaussian):

* Laplace: :math:`\log M^{Lap}_\alpha(t) = (\alpha-1)t + \log\big(\tfrac{\alpha}{2\alpha-1}
  + \tfrac{\alpha-1}{2\alpha-1} e^{-(2\alpha-1)t}\big)`; :math:`D_\infty = t`,
  :math:`\mathrm{KL} = t + e^{-t} - 1`.
* Gaussian: :math:`\log M^{N}_\alpha(t) = \alpha(\alpha-1)t^2/2`, :math:`D_\alpha = \alpha t^2/2`;
  multivariate with common covariance :math:`S`:
  :math:`\log M_\alpha = \alpha(\alpha-1) z^\top S^{-1} z / 2`.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array, as_psd_matrix
from dpopt.accounting._arrays import FloatOrArray, broadcast, finish, real_array
from dpopt.errors import InvalidParameterError

__all__ = [
    "gaussian_log_moment",
    "gaussian_log_moment_mv",
    "kl_gaussian",
    "kl_laplace",
    "laplace_log_moment",
    "renyi_gaussian",
    "renyi_gaussian_mv",
    "renyi_laplace",
]

# Taylor coefficients 1/k! for k = 2..21 of expm1(x) - x (used for |x| <= 0.5).
_SERIES = np.array([1.0 / float(np.prod(np.arange(1, k + 1))) for k in range(2, 22)])


def _expm1_minus_x(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return :math:`e^x - 1 - x \\ge 0` to full relative precision (series near 0)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    small = np.abs(x) <= 0.5
    xs = x[small]
    acc = np.zeros_like(xs)
    for c in _SERIES[::-1]:
        acc = acc * xs + c
    out[small] = acc * xs * xs
    xl = x[~small]
    out[~small] = np.expm1(xl) - xl
    return out


def _laplace_log_moment(a: NDArray[np.float64], t: NDArray[np.float64]) -> NDArray[np.float64]:
    """Unvalidated core of :func:`laplace_log_moment` (a > 1 finite, t >= 0, same shape)."""
    a = np.asarray(a, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    with np.errstate(over="ignore"):
        at = a * t
    small = at <= 1.0
    # Small a*t: M - 1 = [a g((a-1)t) + (a-1) g(-a t)] / (2a - 1), g(x) = e^x - 1 - x >= 0, so
    # there is no cancellation and log M keeps full relative precision as t -> 0.
    as_, ts = a[small], t[small]
    num = as_ * _expm1_minus_x((as_ - 1.0) * ts) + (as_ - 1.0) * _expm1_minus_x(-as_ * ts)
    out[small] = np.log1p(num / (2.0 * as_ - 1.0))
    # Large a*t: the stable form of the Laplace moment (never forms e^{(a-1)t}), with u = a - 1
    # as u t + log1p(u (1 + e^{-(2a-1)t})) - log1p(2u) so that a -> 1 keeps relative precision.
    ul, tl = a[~small] - 1.0, t[~small]
    with np.errstate(over="ignore"):
        lin = ul * tl
        rest = np.log1p(ul * (1.0 + np.exp(-(2.0 * ul + 1.0) * tl))) - np.log1p(2.0 * ul)
    out[~small] = lin + rest
    return out


@overload
def laplace_log_moment(alpha: float, t: float) -> float: ...


@overload
def laplace_log_moment(alpha: ArrayLike, t: ArrayLike) -> FloatOrArray: ...


def laplace_log_moment(alpha: ArrayLike, t: ArrayLike) -> FloatOrArray:
    r"""Log Rényi moment of a shifted Laplace noise, :math:`\log M^{Lap}_\alpha(t)` (Mironov).

    .. math:: \log M^{Lap}_\alpha(t) = (\alpha-1)t + \log\Big(\frac{\alpha}{2\alpha-1}
              + \frac{\alpha-1}{2\alpha-1} e^{-(2\alpha-1)t}\Big),

    i.e. :math:`(\alpha-1) D_\alpha(\mathrm{Lap}(m_1,b)\,\|\,\mathrm{Lap}(m_2,b))` with
    :math:`t = |m_1 - m_2| / b`. Increasing and convex in ``t``, zero slope at ``t = 0``. Small
    :math:`\alpha t` uses an expansion without cancellation, so the result has full relative
    precision even for tiny ``t``; large :math:`\alpha t` never overflows (e.g. ``alpha=100,
    t=10`` gives 989.311865361).

    Parameters
    ----------
    alpha : float or array_like
        Rényi order(s), finite and > 1.
    t : float or array_like
        Normalised shift(s) :math:`|z|/b`, finite and >= 0. Broadcast against ``alpha``.

    Returns
    -------
    float or ndarray
        :math:`\log M^{Lap}_\alpha(t)` (float for scalar input).
    """
    a = real_array("alpha", alpha, low=1.0)
    tt = real_array("t", t, low=0.0, low_open=False)
    a, tt = broadcast(alpha=a, t=tt)
    return finish(_laplace_log_moment(a, tt))


@overload
def gaussian_log_moment(alpha: float, t: float) -> float: ...


@overload
def gaussian_log_moment(alpha: ArrayLike, t: ArrayLike) -> FloatOrArray: ...


def gaussian_log_moment(alpha: ArrayLike, t: ArrayLike) -> FloatOrArray:
    r"""Log Rényi moment of a shifted Gaussian, :math:`\alpha(\alpha-1)t^2/2` (Mironov).

    Parameters
    ----------
    alpha : float or array_like
        Rényi order(s), finite and > 1.
    t : float or array_like
        Normalised shift(s) :math:`|z|/\sigma`, finite and >= 0. Broadcast against ``alpha``.

    Returns
    -------
    float or ndarray
        :math:`\log M^{N}_\alpha(t) = (\alpha - 1) D_\alpha(N(z,\sigma^2)\,\|\,N(0,\sigma^2))`.
    """
    a = real_array("alpha", alpha, low=1.0)
    tt = real_array("t", t, low=0.0, low_open=False)
    a, tt = broadcast(alpha=a, t=tt)
    with np.errstate(over="ignore"):
        return finish(a * (a - 1.0) * tt * tt / 2.0)


def _shift_scale(
    shift: Any, scale: Any, scale_name: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    z = real_array("shift", shift)
    s = real_array(scale_name, scale, low=0.0)
    return z, s


@overload
def renyi_laplace(alpha: float, shift: float, scale: float) -> float: ...


@overload
def renyi_laplace(alpha: ArrayLike, shift: ArrayLike, scale: ArrayLike) -> FloatOrArray: ...


def renyi_laplace(alpha: ArrayLike, shift: ArrayLike, scale: ArrayLike) -> FloatOrArray:
    r"""Rényi divergence :math:`D_\alpha(\mathrm{Lap}(z, b)\,\|\,\mathrm{Lap}(0, b))` (Mironov).

    .. math:: D_\alpha = \frac{1}{\alpha-1}\log\Big[\frac{\alpha}{2\alpha-1} e^{(\alpha-1)t}
              + \frac{\alpha-1}{2\alpha-1} e^{-\alpha t}\Big], \qquad t = |z|/b,

    and :math:`D_\infty = t` (pure DP). Symmetric in the sign of the shift.

    Parameters
    ----------
    alpha : float or array_like
        Order(s) > 1; ``np.inf`` is allowed.
    shift : float or array_like
        Shift(s) :math:`z = m_1 - m_2` (any sign), finite.
    scale : float or array_like
        Laplace scale(s) ``b > 0``. All three broadcast together.

    Returns
    -------
    float or ndarray
        :math:`D_\alpha` in nats.
    """
    a = real_array("alpha", alpha, low=1.0, allow_inf=True)
    z, b = _shift_scale(shift, scale, "scale")
    a, z, b = broadcast(alpha=a, shift=z, scale=b)
    with np.errstate(over="ignore"):
        t = np.abs(z) / b
    if not np.all(np.isfinite(t)):
        raise InvalidParameterError("shift/scale", (shift, scale), "|shift|/scale overflows")
    out = np.array(t, dtype=np.float64)
    fin = np.isfinite(a)
    af, tf = a[fin], t[fin]
    out[fin] = _laplace_log_moment(af, tf) / (af - 1.0)
    return finish(out)


@overload
def renyi_gaussian(alpha: float, shift: float, sigma: float) -> float: ...


@overload
def renyi_gaussian(alpha: ArrayLike, shift: ArrayLike, sigma: ArrayLike) -> FloatOrArray: ...


def renyi_gaussian(alpha: ArrayLike, shift: ArrayLike, sigma: ArrayLike) -> FloatOrArray:
    r"""Gaussian Rényi divergence :math:`D_\alpha = \alpha z^2/(2\sigma^2)` (Mironov).

    Here :math:`D_\alpha` is :math:`D_\alpha(N(z,\sigma^2)\,\|\,N(0,\sigma^2))`. For
    ``alpha = inf`` the result is ``inf`` when ``z != 0`` and 0 when ``z = 0`` (the Gaussian
    mechanism has no pure-DP guarantee).

    Parameters
    ----------
    alpha : float or array_like
        Order(s) > 1; ``np.inf`` is allowed.
    shift : float or array_like
        Mean difference(s) ``z``, finite.
    sigma : float or array_like
        Standard deviation(s) > 0. All three broadcast together.

    Returns
    -------
    float or ndarray
        :math:`D_\alpha` in nats.
    """
    a = real_array("alpha", alpha, low=1.0, allow_inf=True)
    z, s = _shift_scale(shift, sigma, "sigma")
    a, z, s = broadcast(alpha=a, shift=z, sigma=s)
    with np.errstate(over="ignore"):
        t2 = (z / s) ** 2
    out = np.asarray(np.where(t2 == 0.0, 0.0, np.inf))
    fin = np.isfinite(a) & (t2 > 0.0)
    with np.errstate(over="ignore"):
        out[fin] = a[fin] * t2[fin] / 2.0
    return finish(out)


@overload
def kl_laplace(shift: float, scale: float) -> float: ...


@overload
def kl_laplace(shift: ArrayLike, scale: ArrayLike) -> FloatOrArray: ...


def kl_laplace(shift: ArrayLike, scale: ArrayLike) -> FloatOrArray:
    r"""Kullback–Leibler divergence of shifted Laplace noise, :math:`t + e^{-t} - 1`, ``t=|z|/b``.

    The :math:`\alpha \to 1` limit of :func:`renyi_laplace`, computed without
    cancellation for small ``t``.
    """
    z, b = _shift_scale(shift, scale, "scale")
    z, b = broadcast(shift=z, scale=b)
    with np.errstate(over="ignore"):
        t = np.abs(z) / b
    if not np.all(np.isfinite(t)):
        raise InvalidParameterError("shift/scale", (shift, scale), "|shift|/scale overflows")
    return finish(_expm1_minus_x(-t))


@overload
def kl_gaussian(shift: float, sigma: float) -> float: ...


@overload
def kl_gaussian(shift: ArrayLike, sigma: ArrayLike) -> FloatOrArray: ...


def kl_gaussian(shift: ArrayLike, sigma: ArrayLike) -> FloatOrArray:
    r"""Kullback–Leibler divergence of shifted Gaussian noise, :math:`z^2 / (2\sigma^2)`."""
    z, s = _shift_scale(shift, sigma, "sigma")
    z, s = broadcast(shift=z, sigma=s)
    with np.errstate(over="ignore"):
        return finish((z / s) ** 2 / 2.0)


def _mahalanobis_sq(shift: Any, covariance: Any) -> NDArray[np.float64]:
    """:math:`z^\\top S^{-1} z` over the last axis of ``shift`` by a Cholesky solve."""
    cov = as_psd_matrix("covariance", covariance)
    z = as_float_array("shift", shift)
    d = cov.shape[0]
    if z.ndim == 0 or z.shape[-1] != d:
        raise InvalidParameterError(
            "shift", shift, f"must have a last axis of length {d} to match the covariance"
        )
    chol = scipy.linalg.cholesky(cov, lower=True)
    flat = z.reshape(-1, d).T
    y = scipy.linalg.solve_triangular(chol, flat, lower=True)
    return np.asarray(np.sum(y * y, axis=0).reshape(z.shape[:-1]), dtype=np.float64)


def gaussian_log_moment_mv(alpha: ArrayLike, shift: ArrayLike,
                           covariance: ArrayLike) -> FloatOrArray:
    r"""Multivariate Gaussian log Rényi moment :math:`\alpha(\alpha-1) z^\top S^{-1} z / 2`.

    Common covariance :math:`S` (positive definite), computed with a Cholesky
    solve (no inverse).

    Parameters
    ----------
    alpha : float or array_like
        Order(s), finite and > 1; broadcast against ``shift.shape[:-1]``.
    shift : array_like, shape (..., d)
        Shift vector(s) :math:`z`.
    covariance : array_like, shape (d, d)
        Noise covariance :math:`S`, symmetric positive definite.

    Returns
    -------
    float or ndarray, shape broadcast(alpha.shape, shift.shape[:-1])
    """
    a = real_array("alpha", alpha, low=1.0)
    q = _mahalanobis_sq(shift, covariance)
    a, q = broadcast(alpha=a, shift=q)
    with np.errstate(over="ignore"):
        return finish(a * (a - 1.0) * q / 2.0)


def renyi_gaussian_mv(alpha: ArrayLike, shift: ArrayLike, covariance: ArrayLike) -> FloatOrArray:
    r"""Multivariate Gaussian Rényi divergence :math:`\alpha z^\top S^{-1} z / 2`.

    ``alpha`` may be ``np.inf`` (gives ``inf`` unless ``z = 0``); shapes as in
    :func:`gaussian_log_moment_mv`.
    """
    a = real_array("alpha", alpha, low=1.0, allow_inf=True)
    q = _mahalanobis_sq(shift, covariance)
    a, q = broadcast(alpha=a, shift=q)
    out = np.asarray(np.where(q == 0.0, 0.0, np.inf))
    fin = np.isfinite(a) & (q > 0.0)
    with np.errstate(over="ignore"):
        out[fin] = a[fin] * q[fin] / 2.0
    return finish(out)
