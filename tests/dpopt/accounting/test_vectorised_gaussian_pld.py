"""The Poisson-subsampled Gaussian PLD built with a vectorised inverse privacy loss
(``_dp_accounting._gaussian_pld``) against dp-accounting's own ``from_gaussian_mechanism``,
called here directly, and the vectorised inverse against the library's scalar one and against a
60-digit mpmath evaluation of the closed-form privacy loss.

The library is the reference for the PLD objects: they must be the same, mass by mass, in both
adjacency directions, pessimistic (connect the dots) and optimistic (privacy buckets).
"""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pldm
from dp_accounting.pld import privacy_loss_mechanism as plm
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpopt.accounting import _dp_accounting as lib

FAST = lib._dp_accounting_version() in lib.FAST_PLD_VERSIONS
needs_fast = pytest.mark.skipif(not FAST, reason="installed dp-accounting is not one the "
                                                 "vectorised construction follows")
REMOVE, ADD = plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD


def _reference(sigma: float, p: float, h: float, pessimistic: bool) -> Any:
    return pldm.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=p,
                                        pessimistic_estimate=pessimistic,
                                        use_connect_dots=pessimistic,
                                        value_discretization_interval=h)


def _masses(pmf: Any) -> tuple[int, np.ndarray]:
    """(lowest loss index, masses on the contiguous grid) of a dense or sparse pmf."""
    if hasattr(pmf, "_probs"):
        return int(pmf._lower_loss), np.asarray(pmf._probs, dtype=float)
    probs = pmf._loss_probs
    low, high = min(probs), max(probs)
    return low, np.array([probs.get(k, 0.0) for k in range(low, high + 1)], dtype=float)


def _assert_same_pld(ours: Any, ref: Any) -> None:
    for name in ("_pmf_remove", "_pmf_add"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert type(a) is type(b), name
        assert a._discretization == b._discretization
        assert a._pessimistic_estimate == b._pessimistic_estimate
        low_a, m_a = _masses(a)
        low_b, m_b = _masses(b)
        assert low_a == low_b, name
        assert m_a.size == m_b.size, name
        np.testing.assert_allclose(m_a, m_b, rtol=1e-12, atol=1e-300, err_msg=name)
        assert math.isclose(a._infinity_mass, b._infinity_mass, rel_tol=1e-12, abs_tol=1e-300)
    assert (ours._pmf_add is ours._pmf_remove) == (ref._pmf_add is ref._pmf_remove)


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if ``_gaussian_pld`` hands the construction to the library."""
    def refuse(*args: Any) -> Any:
        raise AssertionError(f"the library's construction was used for {args}")

    monkeypatch.setattr(lib, "_library_gaussian_pld", refuse)


def _points(sigma: float, p: float, h: float) -> float:
    """Rough loss-grid size of one PLD (the library's tails span about ±13σ around the shift)."""
    span = 26.0 * sigma + 1.0
    return span / sigma**2 * min(1.0, 30.0 * p) / h


@needs_fast
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sigma=st.floats(math.log(0.3), math.log(50.0)).map(math.exp),
       p=st.one_of(st.just(1.0), st.floats(math.log(1e-5), 0.0).map(math.exp)),
       h=st.floats(math.log(1e-4), math.log(1e-1)).map(math.exp),
       pessimistic=st.booleans())
def test_same_pld_as_the_library(sigma: float, p: float, h: float, pessimistic: bool,
                                 no_fallback: None) -> None:
    assume(_points(sigma, p, h) <= 2e5)
    ours = lib._gaussian_pld(sigma, p, h, pessimistic)
    ref = _reference(sigma, p, h, pessimistic)
    _assert_same_pld(ours, ref)
    # and composed: the same ε(δ) and δ(ε)
    steps = 7
    a, b = ours.self_compose(steps), ref.self_compose(steps)
    for delta in (1e-3, 1e-7):
        assert math.isclose(a.get_epsilon_for_delta(delta), b.get_epsilon_for_delta(delta),
                            rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(a.get_delta_for_epsilon(0.5), b.get_delta_for_epsilon(0.5),
                        rel_tol=1e-12, abs_tol=1e-300)


@needs_fast
@pytest.mark.parametrize("pessimistic", [True, False])
@pytest.mark.parametrize(("sigma", "p", "h"), [
    (1.0, 1.0, 1e-3),      # no sampling: one symmetric pmf
    (0.7, 1.0, 1e-4),
    (1.0, 1e-6, 1e-4),     # tiny rate: the loss range is about ±1e-6·e^{...}
    (3.0, 1e-6, 1e-2),     # tiny rate, coarse grid: a handful of points (sparse pmf)
    (1e3, 0.5, 1e-3),      # huge noise: a few grid points
    (1e3, 1.0, 1e-4),
    (0.2, 0.1, 1e-2),      # small noise: a wide loss range
    (0.2, 1.0, 1e-2),
    (1.0, 1.0 - 1e-12, 1e-3),  # a rate next to 1
])
def test_edge_cases(sigma: float, p: float, h: float, pessimistic: bool,
                    no_fallback: None) -> None:
    _assert_same_pld(lib._gaussian_pld(sigma, p, h, pessimistic),
                     _reference(sigma, p, h, pessimistic))


def _pair(sigma: float, p: float, kind: Any) -> tuple[Any, Any]:
    cls = lib._fast_gaussian_loss()
    return (cls(sigma, sampling_prob=p, adjacency_type=kind),
            plm.GaussianPrivacyLoss(sigma, sampling_prob=p, adjacency_type=kind))


@needs_fast
@pytest.mark.parametrize("kind", [REMOVE, ADD])
@pytest.mark.parametrize(("sigma", "p"), [(1.0, 0.01), (0.5, 0.3), (4.0, 1e-5), (2.0, 1.0)])
def test_delta_beyond_the_loss_range(sigma: float, p: float, kind: Any) -> None:
    """ε at and beyond the edges ±log(1 - p) of the subsampled loss, and far out in both tails:
    the same δ as the library (1 - e^ε below the REMOVE edge, 0 above the ADD edge)."""
    ours, ref = _pair(sigma, p, kind)
    edge = math.log1p(-p) if p < 1 else 0.0
    eps = np.array([-50.0, -3.0, edge - 1e-9, edge, math.nextafter(edge, 1), -edge,
                    math.nextafter(-edge, -1), math.nextafter(-edge, 1), -edge + 1e-9,
                    0.0, 1e-12, 0.3, 5.0, 60.0, 400.0])
    got = ours.get_delta_for_epsilon(eps)
    want = ref.get_delta_for_epsilon(eps)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)
    assert ours.get_delta_for_epsilon(0.25) == pytest.approx(ref.get_delta_for_epsilon(0.25),
                                                             rel=1e-13, abs=1e-300)
    if p < 1 and kind == REMOVE:
        assert got[0] == pytest.approx(-math.expm1(-50.0))
    if p < 1 and kind == ADD:
        assert got[-1] == 0.0


def _scalar_inverse(loss: Any, value: float) -> float:
    try:
        return float(loss.inverse_privacy_loss(value))
    except ValueError:
        return math.nan


@needs_fast
@settings(max_examples=60, deadline=None)
@given(sigma=st.floats(math.log(0.1), math.log(1e3)).map(math.exp),
       p=st.one_of(st.just(1.0), st.floats(math.log(1e-10), math.log(1 - 1e-9)).map(math.exp)),
       add=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_vectorised_inverse_equals_the_scalar_one(sigma: float, p: float, add: bool,
                                                  seed: int) -> None:
    """On random losses across (and outside) the range, at the edges and at 0: the library's
    scalar ``inverse_privacy_loss`` value, and NaN exactly where it raises."""
    ours, ref = _pair(sigma, p, ADD if add else REMOVE)
    rng = np.random.default_rng(seed)
    edge = (-math.log(1 - p) if add else math.log(1 - p)) if p < 1 else 0.0
    values = np.concatenate([
        rng.normal(0.0, 1.0, 40) * 10.0 ** rng.uniform(-12, 3, 40),
        edge + rng.normal(0.0, 1.0, 10) * abs(edge) * 10.0 ** rng.uniform(-12, 0, 10),
        [0.0, edge, math.nextafter(edge, -math.inf), math.nextafter(edge, math.inf),
         -edge, 1e300, -1e300],
    ])
    got = ours.inverse_privacy_losses(values)
    want = np.array([_scalar_inverse(ref, v) for v in values])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0.0, equal_nan=True)


def _mp_loss(sigma: float, p: float, add: bool, x: float) -> mpmath.mpf:
    """The privacy loss at x, 60 digits: REMOVE log(1 - p + p e^{ℓ(x)}) with
    ℓ(x) = (-1/2 - x)/σ² (sensitivity 1); ADD -(REMOVE loss at -x)."""
    with mpmath.workdps(60):
        s2 = mpmath.mpf(sigma) ** 2
        xx = -mpmath.mpf(x) if add else mpmath.mpf(x)
        ell = (-mpmath.mpf(1) / 2 - xx) / s2
        q = mpmath.mpf(p)
        value = mpmath.log(1 - q + q * mpmath.exp(ell))
        return -value if add else value


def _mp_inverse(sigma: float, p: float, add: bool, loss: float) -> mpmath.mpf:
    """The exact inverse of :func:`_mp_loss` at ``loss``, 60 digits."""
    with mpmath.workdps(60):
        s2, q = mpmath.mpf(sigma) ** 2, mpmath.mpf(p)
        target = -mpmath.mpf(loss) if add else mpmath.mpf(loss)
        ell = mpmath.log(1 + mpmath.expm1(target) / q)
        x = -mpmath.mpf(1) / 2 - s2 * ell
        return -x if add else x


@needs_fast
@pytest.mark.parametrize("add", [False, True])
@pytest.mark.parametrize(("sigma", "p"), [(1.0, 0.01), (0.2, 0.5), (50.0, 1e-5), (1e3, 1e-8),
                                          (0.5, 1 - 1e-6), (3.0, 1.0)])
def test_inverse_against_mpmath_at_extreme_points(sigma: float, p: float, add: bool) -> None:
    """Far in both tails of the loss and next to the edge ±log(1 - p): the vectorised inverse
    is the 60-digit inverse of the closed-form loss to within its floating-point condition: a
    relative change u of the loss L moves x by about u·|L|·|dx/dL|, and the one rounding of
    the constant c = 1 - 1/p in the library's form x = -1/2 - σ² log(e^L/p + c) moves it by
    about u/p·σ²/|e^L/p + c| (large for p next to 1, where c cancels)."""
    ours, _ = _pair(sigma, p, ADD if add else REMOVE)
    sign = -1.0 if add else 1.0
    edge = sign * math.log1p(-p) if p < 1 else -math.inf * sign
    losses = [sign * v for v in (0.1, 1.0, 10.0, 300.0, 1e4, 1e7)]
    if p < 1:
        losses += [edge * (1 - 1e-3), edge * (1 - 1e-6) + sign * 1e-300, edge * 0.5, -edge]
    else:
        losses += [-sign * v for v in (0.1, 10.0, 1e4)]
    for loss in losses:
        x = float(ours.inverse_privacy_losses(np.array([loss]))[0])
        want = _mp_inverse(sigma, p, add, loss)
        with mpmath.workdps(60):
            # |dx/dL| = σ² e^L / (e^L - 1 + p) (REMOVE; the same by symmetry for ADD)
            t, q, s2, u = mpmath.mpf(sign * loss), mpmath.mpf(p), mpmath.mpf(sigma) ** 2, 2.0**-52
            inside = 1 - (1 - q) * mpmath.exp(-t)  # (e^L - 1 + p) / e^L
            slope = s2 / inside
            constant = s2 * u / q / abs(mpmath.exp(t) * inside / q) if p < 1 else 0
            tol = 1e-13 * (abs(want) + 1) + 50 * (u * (abs(t) + 1) * abs(slope) + constant)
            assert abs(mpmath.mpf(x) - want) <= tol, (loss, x, want)
            # and the closed-form loss at the returned x is the loss asked for
            back = _mp_loss(sigma, p, add, x)
            assert abs(back - loss) <= 1e-9 * (abs(loss) + 1), (loss, x, back)


# ---------------------------------------------------------------------------------------------
# the guard and the fallback
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def fresh_guard() -> Any:
    lib._fast_gaussian_loss.cache_clear()
    yield
    lib._fast_gaussian_loss.cache_clear()


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []
    real = lib._library_gaussian_pld

    def spy(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(lib, "_library_gaussian_pld", spy)
    return calls


def test_the_installed_library_is_checked_once(fresh_guard: None) -> None:
    assert (lib._fast_gaussian_loss() is not None) == FAST
    assert lib._fast_gaussian_loss() is lib._fast_gaussian_loss()


@pytest.mark.parametrize("pessimistic", [True, False])
def test_an_unchecked_version_uses_the_library(monkeypatch: pytest.MonkeyPatch,
                                               fresh_guard: None, pessimistic: bool) -> None:
    monkeypatch.setattr(lib, "_dp_accounting_version", lambda: (0, 99))
    calls = _spy(monkeypatch)
    assert lib._fast_gaussian_loss() is None
    got = lib._gaussian_pld(1.3, 0.02, 1e-3, pessimistic)
    assert len(calls) == 1
    _assert_same_pld(got, _reference(1.3, 0.02, 1e-3, pessimistic))


@needs_fast
def test_missing_internals_use_the_library(monkeypatch: pytest.MonkeyPatch,
                                           fresh_guard: None) -> None:
    monkeypatch.delattr(pldm, "_pld_for_subsampled_mechanism")
    assert lib._fast_gaussian_loss() is None
    monkeypatch.undo()
    lib._fast_gaussian_loss.cache_clear()
    assert lib._fast_gaussian_loss() is not None


@needs_fast
@pytest.mark.parametrize("failure", ["nan", "internals"])
@pytest.mark.parametrize("pessimistic", [True, False])
def test_an_input_the_fast_path_refuses_goes_to_the_library(
        monkeypatch: pytest.MonkeyPatch, pessimistic: bool, failure: str) -> None:
    """Where the vectorised inverse answers NaN (the library would raise), or the library's
    internals do not behave as expected, the construction is handed to the library's public
    function, whose answer is returned."""
    cls = lib._fast_gaussian_loss()
    if failure == "nan":
        monkeypatch.setattr(cls, "inverse_privacy_losses",
                            lambda self, losses: np.full(np.shape(losses), np.nan))
    else:
        def changed(*args: Any, **kwargs: Any) -> Any:
            raise (TypeError if pessimistic else AttributeError)("an internal changed")

        monkeypatch.setattr(cls, "get_delta_for_epsilon", changed)
        monkeypatch.setattr(lib, "_bucket_pmf", changed)
    calls = _spy(monkeypatch)
    got = lib._gaussian_pld(0.9, 0.05, 1e-3, pessimistic)
    assert len(calls) == 1
    _assert_same_pld(got, _reference(0.9, 0.05, 1e-3, pessimistic))


def test_library_errors_still_become_solver_errors() -> None:
    from dpopt.errors import SolverError

    with pytest.raises(ValueError):
        lib._gaussian_pld(1.0, 0.0, 1e-3, True)  # the library's own refusal of p = 0
    with pytest.raises(SolverError, match="dp-accounting"):
        lib._call("a test PLD", lambda: lib._gaussian_pld(1.0, 0.0, 1e-3, False))


# ---------------------------------------------------------------------------------------------
# every builder in the boundary module uses it, and answers as with the library's construction
# ---------------------------------------------------------------------------------------------

def _clear_builders() -> None:
    lib._pld_cached.cache_clear()
    lib._optimistic_pld.cache_clear()


@needs_fast
@pytest.mark.parametrize("route", ["poisson", "no_sampling", "without_replacement", "optimistic",
                                   "optimistic_no_sampling", "event"])
def test_every_builder_uses_it_and_answers_as_before(monkeypatch: pytest.MonkeyPatch,
                                                     route: str) -> None:
    import dp_accounting as dpa

    seen: list[bool] = []
    real = lib._gaussian_pld

    def counting(sigma: float, p: float, h: float, pessimistic: bool) -> Any:
        seen.append(pessimistic)
        return real(sigma, p, h, pessimistic)

    groups = ((0.8, 1.0 if route.endswith("no_sampling") else 0.03, 40),)
    event = dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(0.03, dpa.GaussianDpEvent(1.1)), 40)

    def answer() -> float:
        _clear_builders()
        if route in ("poisson", "no_sampling"):
            return lib.pld_epsilon(groups, 1e-6, 1e-3)
        if route == "without_replacement":
            return lib.pld_epsilon(groups, 1e-6, 1e-3, replace_one=True)
        if route.startswith("optimistic"):
            value = lib.optimistic_epsilon(groups, 1e-6, 1e-3)
        else:
            value = lib.optimistic_event_epsilon(event, 1e-6, 1e-3)
        assert value is not None
        return value

    monkeypatch.setattr(lib, "_gaussian_pld", counting)
    fast = answer()
    assert seen and all(flag == route.startswith(("poisson", "no_sampling", "without"))
                        for flag in seen)
    monkeypatch.setattr(lib, "_fast_gaussian_loss", lambda: None)  # the library's construction
    slow = answer()
    _clear_builders()
    assert fast == pytest.approx(slow, rel=1e-12, abs=1e-15)


@needs_fast
@pytest.mark.parametrize("pessimistic", [True, False])
def test_across_the_sparse_to_dense_switch(pessimistic: bool, no_fallback: None) -> None:
    """Grids whose pmfs have about the library's 1000-entry limit of a sparse pmf: the same
    pmf kind and masses on both sides of it (the bucket construction counts its keys itself)."""
    kinds = set()
    for h in np.linspace(0.85e-3, 0.97e-3, 12):
        ours, ref = lib._gaussian_pld(2.0, 0.01, float(h), pessimistic), _reference(
            2.0, 0.01, float(h), pessimistic)
        _assert_same_pld(ours, ref)
        kinds |= {type(ours._pmf_remove).__name__, type(ours._pmf_add).__name__}
    assert kinds == {"SparsePLDPmf", "DensePLDPmf"}
