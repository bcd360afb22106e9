"""The mixture Rényi certificate of :mod:`certificates.renyi_mixture` against dpopt's audit
(:func:`dpopt.pufferfish.audit.mixture_renyi_divergence`, scipy quadrature): the certified
interval contains the quadrature value. Kept here, beside the audit, so that the certificates
package is tested on its own in ``tests/certificates``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates.renyi_mixture import divergence_bounds


def test_many_atoms_against_scipy_audit() -> None:
    from dpopt.pufferfish.audit import mixture_renyi_divergence

    rng = np.random.default_rng(3)
    x = rng.normal(0, 5, 1000)
    y = rng.normal(0.5, 5, 1000)
    p = np.full(x.size, 1 / x.size)
    q = np.full(y.size, 1 / y.size)
    for noise in ("laplace", "gaussian"):
        b = divergence_bounds(x, p, y, q, noise=noise, scale=1.0, alpha=2.0, gap=1e-5)
        ref = mixture_renyi_divergence(x, p, y, q, noise, 1.0, 2.0)
        assert b.lower - 1e-8 <= ref <= b.upper + 1e-8
        assert b.upper - b.lower <= 1e-5 + 1e-8


@settings(max_examples=25)
@given(
    data=st.data(),
    alpha=st.floats(1.05, 30.0),
    scale=st.floats(0.2, 5.0),
    noise=st.sampled_from(["laplace", "gaussian"]),
)
def test_bounds_contain_scipy_quadrature(data, alpha: float, scale: float, noise: str) -> None:
    from dpopt.pufferfish.audit import mixture_renyi_divergence

    def law():
        k = data.draw(st.integers(1, 5))
        atoms = data.draw(st.lists(st.floats(-3, 3), min_size=k, max_size=k))
        w = np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=k, max_size=k)))
        return np.array(atoms), w / w.sum()

    x, p = law()
    y, q = law()
    b = divergence_bounds(x, p, y, q, noise=noise, scale=scale, alpha=alpha, gap=1e-4)
    ref = mixture_renyi_divergence(x, p, y, q, noise, scale, alpha)
    tol = 1e-8 * (1 + ref)
    assert b.lower - tol <= ref <= b.upper + tol


