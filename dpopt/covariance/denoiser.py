r"""The ideal (empirical-data) diffusion denoiser and how one record moves it.

The mathematics is derived on the theory page, "The ideal denoiser and its two-record sensitivity".

For a dataset :math:`D = \{x_1, \dots, x_n\} \subset \mathbb{R}^d` (a multiset: repeated rows are
allowed), a query point :math:`g` and a noise scale :math:`\sigma > 0`, the ideal denoiser is the
posterior mean of a record drawn uniformly from :math:`D` given :math:`g = x + \sigma Z`
(the definition of the theory page):

.. math::

    m_g(D) = \sum_i r_i x_i, \qquad
    r_i = \frac{\exp(-|g - x_i|^2 / (2\sigma^2))}{\sum_l \exp(-|g - x_l|^2 / (2\sigma^2))}.

The responsibilities are a softmax and are computed with ``logsumexp``: for records far from the
query the plain weights underflow to zero.

Forward process: with :math:`G_t = \sqrt{a_t}\,x_0 + \sqrt{1 - a_t}\,\varepsilon`, the
posterior over :math:`x_0 \in D` is the one above with :math:`g = G_t / \sqrt{a_t}` and
:math:`\sigma^2 = (1 - a_t) / a_t`; the ideal noise predictor is
:math:`\varepsilon^*(G_t) = (G_t - \sqrt{a_t}\, m_g(D)) / \sqrt{1 - a_t}`.

Deletion shift: with :math:`D_{-k}` the dataset without record :math:`k`,

.. math::

    s_k = m_g(D) - m_g(D_{-k}) = r_k\,(x_k - m_g(D_{-k}))
        = \frac{r_k}{1 - r_k}\,(x_k - m_g(D)).

Query Jacobian:
:math:`\partial m_g / \partial g = \sigma^{-2} \sum_i r_i (x_i - m)(x_i - m)^\top`,
the posterior covariance divided by :math:`\sigma^2`.

Two-record vector (the two-record theorem): :math:`t_g(x, y) = m_g(\{x, y\}) - m_g(\{y\})
= \operatorname{expit}\!\big((|g - y|^2 - |g - x|^2) / (2\sigma^2)\big)\,(x - y)`, the deletion
shift of :math:`x` from the two-point dataset :math:`\{x, y\}`. The two-record theorem writes every
deletion shift as :math:`s_k = \sum_{i \ne k} c_i\, t_g(x_k, x_i)` with :math:`c_i \ge 0`,
:math:`\sum_i c_i \le 1`, so :math:`\sup_D s^\top P s` is attained on two-point
datasets for every :math:`P \succeq 0`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, logsumexp

from certificates.validate import as_float_array, as_scalar
from dpopt.covariance.domains import Domain, SnapReport, snap
from dpopt.errors import InvalidParameterError

__all__ = [
    "deletion_shifts",
    "log_responsibilities",
    "mean_from_noise_prediction",
    "noise_prediction",
    "posterior_mean",
    "query_from_forward",
    "query_jacobian",
    "responsibilities",
    "snapped_posterior_mean",
    "theorem1_coefficients",
    "two_record_vector",
]


def _data_query_sigma(
    data: Any, query: Any, sigma: Any, *, min_rows: int = 1
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    x = as_float_array("data", data)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise InvalidParameterError("data", data, f"must be an (n, d) array, got shape {x.shape}")
    if x.shape[0] < min_rows:
        raise InvalidParameterError("data", data, f"must have at least {min_rows} rows")
    g, s = query_and_sigma(query, sigma, x.shape[1], "the data dimension")
    return x, g, s


def query_and_sigma(query: ArrayLike, sigma: float, dim: int,
                    of: str | None = None) -> tuple[NDArray[np.float64], float]:
    """The denoiser's query g (a scalar is a vector of length 1) checked against the dimension
    ``dim`` (``of`` names it in the message), and its noise scale sigma >= 0.

    Raises
    ------
    InvalidParameterError
        ``query`` is not a vector of length ``dim``, or ``sigma`` is negative or not finite.
    """
    g = as_float_array("query", query)
    if g.ndim == 0:
        g = g[None]
    if g.ndim != 1 or g.shape[0] != dim:
        where = f" ({of})" if of else ""
        raise InvalidParameterError("query", query, f"must be a vector of length d = {dim}{where}")
    return g, as_scalar("sigma", sigma, low=0.0)


def _log_weights(
    x: NDArray[np.float64], g: NDArray[np.float64], sigma: float
) -> NDArray[np.float64]:
    diff = x - g
    return -np.einsum("ij,ij->i", diff, diff) / (2.0 * sigma * sigma)


def log_responsibilities(data: ArrayLike, query: ArrayLike, sigma: float) -> NDArray[np.float64]:
    r"""Log responsibilities :math:`\log r_i` (the softmax weights of the theory page), by
    ``logsumexp``.

    Parameters
    ----------
    data : array_like, shape (n, d)
        Records :math:`x_i` (a 1-D array is read as n records in d = 1).
    query : array_like, shape (d,)
        Query point :math:`g`.
    sigma : float
        Noise scale :math:`\sigma > 0`.

    Returns
    -------
    ndarray, shape (n,)
        :math:`\log r_i = \ell_i - \operatorname{logsumexp}_l \ell_l`,
        :math:`\ell_i = -|g-x_i|^2/(2\sigma^2)`.
    """
    x, g, s = _data_query_sigma(data, query, sigma)
    lw = _log_weights(x, g, s)
    return np.asarray(lw - logsumexp(lw), dtype=np.float64)


def responsibilities(data: ArrayLike, query: ArrayLike, sigma: float) -> NDArray[np.float64]:
    r"""Responsibilities :math:`r_i` (softmax of :math:`-|g - x_i|^2/(2\sigma^2)`).

    Examples
    --------
    >>> responsibilities([[0.0], [1.0]], [0.5], 1.0)
    array([0.5, 0.5])
    """
    return np.exp(log_responsibilities(data, query, sigma))


def posterior_mean(data: ArrayLike, query: ArrayLike, sigma: float) -> NDArray[np.float64]:
    r"""The ideal denoiser :math:`m_g(D) = \sum_i r_i x_i` (the posterior mean of the theory
    page).

    Parameters
    ----------
    data : array_like, shape (n, d)
    query : array_like, shape (d,)
    sigma : float

    Returns
    -------
    ndarray, shape (d,)
    """
    x, g, s = _data_query_sigma(data, query, sigma)
    lw = _log_weights(x, g, s)
    r = np.exp(lw - logsumexp(lw))
    return np.asarray(r @ x, dtype=np.float64)


def snapped_posterior_mean(records: ArrayLike, domain: Domain, query: ArrayLike,
                           sigma: float) -> tuple[NDArray[np.float64], SnapReport]:
    r"""The ideal denoiser of the records snapped to a public domain,
    :math:`m_g(\pi(D))`, with :math:`\pi` = ``domain.snap``.

    This is the exact query a design on ``domain`` protects: a
    :class:`~dpopt.covariance.domains.Grid` or
    :class:`~dpopt.covariance.domains.FinitePoints` design covers records taking the domain's
    values only, and snapping (nearest point, records outside the box clamped) makes every
    real-valued record such a value; for a :class:`~dpopt.covariance.domains.Box` the records are
    clamped into the box. Snapping acts on each record alone, so add/remove neighbours stay
    neighbours and the design's guarantee covers :math:`m_g(\pi(D)) + N(0, \Sigma)`.

    Parameters
    ----------
    records : array_like, shape (n, d), n >= 1
        The private records (real-valued).
    domain : FinitePoints, Grid or Box
        The public domain the design was computed for.
    query : array_like, shape (d,)
    sigma : float

    Returns
    -------
    mean : ndarray, shape (d,)
        :math:`m_g(\pi(D))`.
    report : SnapReport
        What snapping did (counts derived from the private records: do not publish them).

    Examples
    --------
    >>> from dpopt.covariance.domains import Grid
    >>> m, rep = snapped_posterior_mean([[0.1], [0.97]], Grid([0.0], [1.0], [2]), [0.5], 0.05)
    >>> m, rep.moved
    (array([0.5]), 2)
    """
    report = snap(domain, records)
    if report.count < 1:
        raise InvalidParameterError("records", records, "must hold at least one record")
    return posterior_mean(report.records, query, sigma), report


def query_from_forward(noisy: ArrayLike, alpha_bar: float) -> tuple[NDArray[np.float64], float]:
    r"""Map the forward-process state :math:`(G_t, a_t)` to the query and noise scale (the
    forward-process map).

    Parameters
    ----------
    noisy : array_like, shape (d,)
        :math:`G_t = \sqrt{a_t} x_0 + \sqrt{1-a_t}\,\varepsilon`.
    alpha_bar : float
        :math:`a_t \in (0, 1)`.

    Returns
    -------
    query : ndarray, shape (d,)
        :math:`g = G_t / \sqrt{a_t}`.
    sigma : float
        :math:`\sigma = \sqrt{(1 - a_t)/a_t}`.
    """
    gt = as_float_array("noisy", noisy)
    if gt.ndim == 0:
        gt = gt[None]
    if gt.ndim != 1:
        raise InvalidParameterError("noisy", noisy, "must be a vector")
    a = as_scalar("alpha_bar", alpha_bar, low=0.0, high=1.0)
    return gt / np.sqrt(a), float(np.sqrt((1.0 - a) / a))


def noise_prediction(data: ArrayLike, noisy: ArrayLike, alpha_bar: float) -> NDArray[np.float64]:
    r"""The ideal noise predictor
    :math:`\varepsilon^*(G_t) = (G_t - \sqrt{a_t}\,m_g(D))/\sqrt{1-a_t}`.

    It is :math:`E[\varepsilon \mid G_t]` for :math:`x_0` uniform on ``data``, with
    :math:`(g, \sigma)` from :func:`query_from_forward`.
    """
    g, s = query_from_forward(noisy, alpha_bar)
    a = float(alpha_bar)
    m = posterior_mean(data, g, s)
    return np.asarray(np.sqrt(a) * (g - m) / np.sqrt(1.0 - a), dtype=np.float64)


def mean_from_noise_prediction(eps_pred: ArrayLike, noisy: ArrayLike,
                               alpha_bar: float) -> NDArray[np.float64]:
    r"""Invert :func:`noise_prediction`:
    :math:`m = (G_t - \sqrt{1-a_t}\,\varepsilon^*)/\sqrt{a_t}`."""
    e = as_float_array("eps_pred", eps_pred)
    gt = as_float_array("noisy", noisy)
    if e.shape != gt.shape:
        raise InvalidParameterError(
            "eps_pred", eps_pred, f"must have the shape of noisy {gt.shape}"
        )
    a = as_scalar("alpha_bar", alpha_bar, low=0.0, high=1.0)
    return np.asarray((gt - np.sqrt(1.0 - a) * e) / np.sqrt(a), dtype=np.float64)


def deletion_shifts(
    data: ArrayLike,
    query: ArrayLike,
    sigma: float,
    *,
    form: Literal["ratio", "leave_one_out"] = "ratio",
) -> NDArray[np.float64]:
    r"""All deletion shifts :math:`s_k = m_g(D) - m_g(D_{-k})` (theory page).

    Parameters
    ----------
    data : array_like, shape (n, d), n >= 2
    query : array_like, shape (d,)
    sigma : float
    form : {"ratio", "leave_one_out"}
        ``"ratio"``: :math:`s_k = \frac{r_k}{1-r_k}(x_k - m_g(D))`, with
        :math:`\log\frac{r_k}{1-r_k} = \log w_k - \operatorname{logsumexp}_{i\ne k}\log w_i`
        (no cancellation in :math:`1 - r_k`). ``"leave_one_out"``:
        :math:`s_k = r_k (x_k - m_g(D_{-k}))` with :math:`m_g(D_{-k})` recomputed.

    Returns
    -------
    ndarray, shape (n, d)
        Row k is :math:`s_k`.
    """
    x, g, s = _data_query_sigma(data, query, sigma, min_rows=2)
    n = x.shape[0]
    lw = _log_weights(x, g, s)
    lse = logsumexp(lw)
    # log sum_{i != k} w_i for every k, by masking the diagonal of an n x n table in chunks
    lw_others = np.empty(n)
    rows = max(1, 2**22 // max(n, 1))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        tab = np.broadcast_to(lw, (stop - start, n)).copy()
        tab[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        lw_others[start:stop] = logsumexp(tab, axis=1)
    if form == "ratio":
        r = np.exp(lw - lse)
        diff = x - r @ x
        # at most one record has r_k > 1/2; there x_k - m(D) = (1 - r_k)(x_k - m(D_-k)) is small
        # and r_k/(1 - r_k) large, so form it without cancellation: sum_{i != k} r_i (x_k - x_i)
        top = int(np.argmax(lw))
        if r[top] > 0.5:
            diff[top] = r @ (x[top] - x)
        coef = np.exp(lw - lw_others)
        return np.asarray(coef[:, None] * diff, dtype=np.float64)
    if form == "leave_one_out":
        r = np.exp(lw - lse)
        out = np.empty_like(x)
        for k in range(n):
            rk = np.exp(lw - lw_others[k])
            rk[k] = 0.0
            out[k] = r[k] * (x[k] - rk @ x)
        return out
    raise InvalidParameterError("form", form, "must be 'ratio' or 'leave_one_out'")


def query_jacobian(data: ArrayLike, query: ArrayLike, sigma: float) -> NDArray[np.float64]:
    r"""Jacobian :math:`\partial m_g(D)/\partial g = \sigma^{-2}\sum_i r_i (x_i - m)(x_i - m)^\top`
    (theory page): the posterior covariance over :math:`\sigma^2`,
    symmetric PSD.

    Returns
    -------
    ndarray, shape (d, d)
    """
    x, g, s = _data_query_sigma(data, query, sigma)
    lw = _log_weights(x, g, s)
    r = np.exp(lw - logsumexp(lw))
    c = x - r @ x
    jac = (c * r[:, None]).T @ c / (s * s)
    return np.asarray(0.5 * (jac + jac.T), dtype=np.float64)


def two_record_vector(x: ArrayLike, y: ArrayLike, query: ArrayLike,
                      sigma: float) -> NDArray[np.float64]:
    r"""Two-record vector :math:`t_g(x, y) = m_g(\{x, y\}) - m_g(\{y\})` of the two-record theorem.

    .. math::

        t_g(x, y) = \operatorname{expit}\!\Big(\frac{|g - y|^2 - |g - x|^2}{2\sigma^2}\Big)(x - y).

    Parameters
    ----------
    x, y : array_like, shape (..., d)
        Broadcastable records (the removed one is ``x``).
    query : array_like, shape (d,)
    sigma : float

    Returns
    -------
    ndarray, shape (..., d)

    Examples
    --------
    >>> two_record_vector([1.0], [0.0], [0.5], 1.0)
    array([0.5])
    """
    xa = as_float_array("x", x)
    ya = as_float_array("y", y)
    g = as_float_array("query", query)
    if g.ndim == 0:
        g = g[None]
    xa = xa[..., None] if xa.ndim == 0 else xa
    ya = ya[..., None] if ya.ndim == 0 else ya
    if g.ndim != 1 or xa.shape[-1] != g.shape[0] or ya.shape[-1] != g.shape[0]:
        raise InvalidParameterError(
            "query", query, f"dimension must match x and y (got {xa.shape}, {ya.shape}, {g.shape})"
        )
    s = as_scalar("sigma", sigma, low=0.0)
    dx = xa - g
    dy = ya - g
    z = (np.sum(dy * dy, axis=-1) - np.sum(dx * dx, axis=-1)) / (2.0 * s * s)
    return np.asarray(expit(z)[..., None] * (xa - ya), dtype=np.float64)


def theorem1_coefficients(data: ArrayLike, query: ArrayLike, sigma: float,
                          k: int) -> NDArray[np.float64]:
    r"""Coefficients :math:`c_i` with :math:`s_k = \sum_{i\ne k} c_i\,t_g(x_k, x_i)` (the two-record
    theorem).

    With weights :math:`w_i = e^{-|g-x_i|^2/(2\sigma^2)}`, :math:`W = \sum_i w_i`:
    :math:`c_i = w_i (w_k + w_i) / (W (W - w_k))` for :math:`i \ne k` (0 at :math:`i = k`);
    :math:`\sum_i c_i = (w_k W' + \sum_{i\ne k} w_i^2)/(W W') \le 1` with :math:`W' = W - w_k`,
    equality iff n = 2. Computed in the log domain.

    Returns
    -------
    ndarray, shape (n,)
    """
    x, g, s = _data_query_sigma(data, query, sigma, min_rows=2)
    n = x.shape[0]
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= int(k) < n:
        raise InvalidParameterError("k", k, f"must be an integer index in [0, {n})")
    k = int(k)
    lw = _log_weights(x, g, s)
    lse = logsumexp(lw)
    others = np.delete(lw, k)
    lse_others = logsumexp(others)
    lc = lw + np.logaddexp(lw[k], lw) - lse - lse_others
    c = np.exp(lc)
    c[k] = 0.0
    return np.asarray(c, dtype=np.float64)
