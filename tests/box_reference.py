"""An independent worst-pair search over a box, written from the definition of the two-record
vector (not from dpopt's or the certificates' code); shared by the box tests."""

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit


def two_record_form(x, y, g, sigma, a):
    """t_g(x, y)^T A t_g(x, y), t_g(x, y) = expit(z)(x - y),
    z = (|g - y|^2 - |g - x|^2) / (2 sigma^2)."""
    z = (np.sum((g - y) ** 2, -1) - np.sum((g - x) ** 2, -1)) / (2.0 * sigma**2)
    t = expit(z)[..., None] * (x - y)
    return np.einsum("...i,ij,...j->...", t, a, t)


def independent_box_sup(lo, hi, g, sigma, a, n=6000, starts=12, seed=0):
    """Dense sampling of pairs (plus vertices and the clipped query) and multi-start L-BFGS-B
    over the 2d coordinates (x, y): a lower estimate of sup over the box of the form."""
    rng = np.random.default_rng(seed)
    d = lo.size
    verts = lo + ((np.arange(2**d)[:, None] >> np.arange(d)) & 1) * (hi - lo)
    gc = np.clip(g, lo, hi)
    xs = np.vstack([rng.uniform(lo, hi, (n, d)), verts, np.repeat(gc[None], len(verts), 0)])
    ys = np.vstack([rng.uniform(lo, hi, (n, d)), verts[::-1], verts])
    vals = two_record_form(xs, ys, g, sigma, a)
    best = float(vals.max())
    bounds = list(zip(lo, hi, strict=True)) * 2
    for i in np.argsort(-vals)[:starts]:
        res = minimize(lambda w: -two_record_form(w[:d], w[d:], g, sigma, a),
                       np.concatenate([xs[i], ys[i]]), method="L-BFGS-B", bounds=bounds)
        best = max(best, -float(res.fun))
    return best
