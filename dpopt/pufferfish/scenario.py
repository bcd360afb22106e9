r"""Pufferfish scenarios: secrets, discriminative pairs and conditional laws of the query.

A Pufferfish framework (Kifer & Machanavajjhala 2014) names a set of secrets :math:`S`, the
discriminative pairs :math:`(s_i, s_j)` an adversary must not tell apart, and a class of priors
:math:`\Theta` over the data. For an additive mechanism :math:`M(X) = f(X) + N` only the
conditional laws of the query matter,

.. math:: P_{s,\theta} = \mathcal{L}(f(X) \mid s, \theta),

and :math:`(\alpha,\varepsilon)`-Rényi Pufferfish privacy asks
:math:`D_\alpha(P_{s_i,\theta} * N \,\|\, P_{s_j,\theta} * N) \le \varepsilon` for every pair in
both orders and every :math:`\theta` (Pierquin et al., "Rényi Pufferfish Privacy: General
Additive Noise Mechanisms and Privacy Amplification by Iteration"). A :class:`Scenario` holds
exactly these discrete laws (support points in :math:`\mathbb{R}^d`, probabilities).

Validation: probabilities are finite and :math:`\ge 0`, sum to 1 within :data:`PROB_TOL` and are
then divided by their sum; zero-mass atoms are dropped; supports are finite and non-empty; every
law of a scenario has the same dimension; every pair names two distinct secrets that have a law
under every prior.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certificates.validate import as_float_array
from dpopt.errors import InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["PROB_TOL", "DiscreteLaw", "Scenario"]

#: Probabilities must sum to one within this absolute tolerance (then they are renormalised).
PROB_TOL = 1e-9

#: Key of the single prior of a scenario built without priors.
DEFAULT_PRIOR = "prior"


@dataclass(frozen=True, eq=False, init=False)
class DiscreteLaw:
    r"""A discrete probability law :math:`\sum_k p_k \delta_{x_k}` on :math:`\mathbb{R}^d`.

    Parameters
    ----------
    support : array_like, shape (k,) or (k, d)
        Atoms :math:`x_k` (finite). A 1-D array means :math:`d = 1`.
    probabilities : array_like, shape (k,)
        :math:`p_k \ge 0`, summing to 1 within :data:`PROB_TOL` (renormalised exactly).
    name : str
        Used in error messages.

    Examples
    --------
    >>> law = DiscreteLaw([0, 1, 2], [.5, .3, .2])
    >>> law.dim, law.size, round(float(law.mean[0]), 12)
    (1, 3, 0.7)
    """

    support: NDArray[np.float64]
    probabilities: NDArray[np.float64]
    name: str = "law"

    def __init__(self, support: ArrayLike, probabilities: ArrayLike, name: str = "law") -> None:
        object.__setattr__(self, "support", support)
        object.__setattr__(self, "probabilities", probabilities)
        object.__setattr__(self, "name", name)
        self.__post_init__()

    def __post_init__(self) -> None:
        pname = f"{self.name}.probabilities"
        sname = f"{self.name}.support"
        p = as_float_array(pname, self.probabilities, ndim=1)
        x = as_float_array(sname, self.support)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[1] < 1:
            raise InvalidParameterError(sname, self.support, "must have shape (k,) or (k, d)")
        if x.shape[0] != p.size:
            raise InvalidParameterError(
                pname, self.probabilities, f"must have one entry per atom ({x.shape[0]})"
            )
        if np.any(p < 0.0):
            raise InvalidParameterError(pname, self.probabilities, "must be non-negative")
        total = float(p.sum())
        if abs(total - 1.0) > PROB_TOL:
            raise InvalidParameterError(
                pname, self.probabilities, f"must sum to 1 within {PROB_TOL:g} (sum {total!r})"
            )
        keep = p > 0.0
        object.__setattr__(self, "support", np.ascontiguousarray(x[keep]))
        object.__setattr__(self, "probabilities", p[keep] / p[keep].sum())

    @property
    def dim(self) -> int:
        """Dimension d of the support."""
        return int(self.support.shape[1])

    @property
    def size(self) -> int:
        """Number of atoms with positive mass."""
        return int(self.support.shape[0])

    @property
    def mean(self) -> NDArray[np.float64]:
        """Mean vector :math:`\\sum_k p_k x_k`, shape (d,)."""
        return np.asarray(self.probabilities @ self.support, dtype=np.float64)

    @classmethod
    def empirical(cls, values: ArrayLike, name: str = "law") -> DiscreteLaw:
        """The empirical law of observed values (rows of a (n, d) array, or a 1-D array).

        Each distinct value gets probability (number of occurrences) / n.
        """
        x = as_float_array(name, values)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2:
            raise InvalidParameterError(name, values, "must have shape (n,) or (n, d)")
        atoms, counts = np.unique(x, axis=0, return_counts=True)
        return cls(atoms, counts / counts.sum(), name=name)

    def same_as(self, other: DiscreteLaw) -> bool:
        """Exact equality of the two laws (after merging repeated atoms)."""
        a, b = _canonical(self), _canonical(other)
        return (
            a[0].shape == b[0].shape
            and bool(np.array_equal(a[0], b[0]))
            and bool(np.array_equal(a[1], b[1]))
        )



def _canonical(law: DiscreteLaw) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    atoms, inv = np.unique(law.support, axis=0, return_inverse=True)
    probs = np.bincount(np.ravel(inv), weights=law.probabilities, minlength=atoms.shape[0])
    return atoms, np.asarray(probs, dtype=np.float64)


def _as_law(value: object, name: str) -> DiscreteLaw:
    if isinstance(value, DiscreteLaw):
        return value
    if isinstance(value, tuple | list) and len(value) == 2:
        return DiscreteLaw(value[0], value[1], name=name)
    raise InvalidTypeError(name, value, "a DiscreteLaw or a (support, probabilities) pair")


#: A law as :class:`Scenario` accepts it: a :class:`DiscreteLaw` or a ``(support, probabilities)``
#: pair of arrays.
LawLike: TypeAlias = "DiscreteLaw | tuple[ArrayLike, ArrayLike]"


@dataclass(frozen=True, eq=False, init=False)
class Scenario:
    r"""Secrets, discriminative pairs and the conditional laws :math:`P_{s,\theta}`.

    Parameters
    ----------
    laws : mapping prior -> (mapping secret -> DiscreteLaw or (support, probabilities))
        One conditional law of the query per secret, for each prior :math:`\theta`.
    pairs : sequence of (secret, secret), optional
        Discriminative pairs (unordered: the RPP-OT condition is symmetric, and the
        audit checks both orders). Default: every pair of distinct secrets.

    Use :meth:`from_laws` (one prior), :meth:`from_arrays` or :meth:`from_dataframe`.
    """

    laws: dict[Hashable, dict[Hashable, DiscreteLaw]]
    pairs: tuple[tuple[Hashable, Hashable], ...]

    def __init__(
        self,
        laws: Mapping[Hashable, Mapping[Hashable, LawLike]],
        pairs: Iterable[tuple[Hashable, Hashable]] | None = None,
    ) -> None:
        object.__setattr__(self, "laws", laws)
        object.__setattr__(self, "pairs", pairs)
        self.__post_init__()

    def __post_init__(self) -> None:
        if not isinstance(self.laws, Mapping) or len(self.laws) == 0:
            raise InvalidParameterError("laws", self.laws, "must be a non-empty mapping of priors")
        clean: dict[Hashable, dict[Hashable, DiscreteLaw]] = {}
        dims: set[int] = set()
        for theta, per_secret in self.laws.items():
            if not isinstance(per_secret, Mapping) or len(per_secret) == 0:
                raise InvalidParameterError(
                    f"laws[{theta!r}]", per_secret, "must be a non-empty mapping secret -> law"
                )
            clean[theta] = {}
            for s, law in per_secret.items():
                obj = _as_law(law, f"laws[{theta!r}][{s!r}]")
                clean[theta][s] = obj
                dims.add(obj.dim)
        if len(dims) != 1:
            raise InvalidParameterError("laws", sorted(dims), "every law must have the same dim")
        if self.pairs is None:
            all_secrets: list[Hashable] = []
            for per in clean.values():
                all_secrets.extend(s for s in per if s not in all_secrets)
            pairs = [tuple(pr) for pr in combinations(all_secrets, 2)]
        else:
            try:
                pairs = [tuple(pr) for pr in self.pairs]
            except TypeError:
                raise InvalidTypeError("pairs", self.pairs, "a sequence of secret pairs") from None
        if not pairs:
            raise InvalidParameterError("pairs", self.pairs, "need at least one pair of secrets")
        for pr in pairs:
            if len(pr) != 2 or pr[0] == pr[1]:
                raise InvalidParameterError("pairs", pr, "each pair must name 2 distinct secrets")
            for theta, per in clean.items():
                for s in pr:
                    if s not in per:
                        raise InvalidParameterError(
                            "pairs", pr, f"secret {s!r} has no law under prior {theta!r}"
                        )
        object.__setattr__(self, "laws", clean)
        object.__setattr__(self, "pairs", tuple(pairs))

    @property
    def dim(self) -> int:
        """Dimension d of the query."""
        first = next(iter(self.laws.values()))
        return int(next(iter(first.values())).dim)

    @property
    def priors(self) -> tuple[Hashable, ...]:
        """The prior keys :math:`\\theta`."""
        return tuple(self.laws)

    def law(self, secret: Hashable, prior: Hashable | None = None) -> DiscreteLaw:
        """The law :math:`P_{s,\\theta}` (``prior`` may be omitted when there is only one)."""
        if prior is None:
            if len(self.laws) != 1:
                raise InvalidParameterError("prior", prior, "required: the scenario has several")
            prior = next(iter(self.laws))
        try:
            return self.laws[prior][secret]
        except KeyError:
            raise InvalidParameterError("secret", (secret, prior), "no such law") from None

    def iter_pairs(
        self,
    ) -> Iterator[tuple[Hashable, Hashable, Hashable, DiscreteLaw, DiscreteLaw]]:
        """Yield ``(prior, s_i, s_j, P, Q)`` for every prior and pair."""
        for theta, per in self.laws.items():
            for si, sj in self.pairs:
                yield theta, si, sj, per[si], per[sj]

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_laws(
        cls,
        laws: Mapping[Hashable, LawLike],
        pairs: Sequence[tuple[Hashable, Hashable]] | None = None,
    ) -> Scenario:
        """One prior: ``laws`` maps each secret to a law or ``(support, probabilities)``.

        Examples
        --------
        >>> sc = Scenario.from_laws({"a": ([0, 1, 2], [.5, .3, .2]), "b": ([0, 3], [.5, .5])})
        >>> sc.pairs, sc.dim
        ((('a', 'b'),), 1)
        """
        if not isinstance(laws, Mapping):
            raise InvalidTypeError("laws", laws, "a mapping secret -> law")
        return cls({DEFAULT_PRIOR: dict(laws)}, pairs)

    @classmethod
    def from_arrays(
        cls,
        supports: Sequence[ArrayLike],
        probabilities: Sequence[ArrayLike],
        *,
        secrets: Sequence[Hashable] | None = None,
        pairs: Sequence[tuple[Hashable, Hashable]] | None = None,
    ) -> Scenario:
        """One prior from parallel lists of supports and probabilities (secrets 0, 1, ...)."""
        if len(supports) != len(probabilities):
            raise InvalidParameterError(
                "probabilities", len(probabilities), f"need one array per support ({len(supports)})"
            )
        names = list(range(len(supports))) if secrets is None else list(secrets)
        if len(names) != len(supports):
            raise InvalidParameterError("secrets", secrets, "need one name per support")
        laws = {s: (x, p) for s, x, p in zip(names, supports, probabilities, strict=True)}
        return cls.from_laws(laws, pairs)

    @classmethod
    def from_dataframe(
        cls,
        frame: pd.DataFrame,
        query: str | Sequence[str] | Callable[[pd.DataFrame], ArrayLike],
        secret: str,
        *,
        prior: str | None = None,
        pairs: Sequence[tuple[Hashable, Hashable]] | None = None,
    ) -> Scenario:
        r"""Empirical conditional laws of a query given a secret attribute.

        Each row of ``frame`` is one observation of (secret, query output). For each prior group
        :math:`\theta` (the values of column ``prior``; one group if omitted) and secret value
        :math:`s` the law is the empirical conditional distribution

        .. math:: \hat P(f = v \mid S = s, \theta) =
                  \frac{\#\{\text{rows}: S = s,\ f = v,\ \theta\}}
                  {\#\{\text{rows}: S = s,\ \theta\}}.

        This is a plug-in estimate: the privacy claim is about these estimated laws, not about
        the sampling error of the estimate.

        Parameters
        ----------
        frame : pandas.DataFrame
        query : str, list of str, or callable
            A column (1-D query), several columns (query in :math:`\mathbb{R}^d`) or a function
            ``frame -> array`` of shape (n,) or (n, d) evaluated once on the whole frame.
        secret : str
            Column whose values are the secrets.
        prior : str, optional
            Column whose values index the priors :math:`\theta`.
        pairs : sequence of (secret, secret), optional
            Default: every pair of secret values that occur.

        Examples
        --------
        >>> import pandas as pd
        >>> df = pd.DataFrame({"smoker": [0, 0, 1, 1], "visits": [1, 2, 2, 4]})
        >>> sc = Scenario.from_dataframe(df, "visits", "smoker")
        >>> sc.law(1).support.ravel().tolist(), sc.law(1).probabilities.tolist()
        ([2.0, 4.0], [0.5, 0.5])
        """
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise InvalidTypeError("frame", frame, "a pandas DataFrame")
        if len(frame) == 0:
            raise InvalidParameterError("frame", "empty DataFrame", "must have at least one row")
        for name, col in (("secret", secret), ("prior", prior)):
            if col is not None and col not in frame.columns:
                raise InvalidParameterError(name, col, f"is not a column of {list(frame.columns)}")
        if callable(query):
            values = np.asarray(query(frame))
        elif isinstance(query, str):
            if query not in frame.columns:
                raise InvalidParameterError("query", query, "is not a column of the frame")
            values = frame[query].to_numpy()
        else:
            cols = list(query)
            missing = [c for c in cols if c not in frame.columns]
            if missing or not cols:
                raise InvalidParameterError("query", query, f"unknown columns {missing}")
            values = frame[cols].to_numpy()
        vals = as_float_array("query", values)
        if vals.shape[0] != len(frame) or vals.ndim not in (1, 2):
            raise InvalidParameterError(
                "query", vals.shape, f"must give one value (or row) per frame row ({len(frame)})"
            )
        sec = frame[secret].to_numpy()
        groups = frame[prior].to_numpy() if prior is not None else np.full(len(frame), None)
        laws: dict[Hashable, dict[Hashable, DiscreteLaw]] = {}
        theta_keys = [DEFAULT_PRIOR] if prior is None else list(pd.unique(groups))
        for theta in theta_keys:
            in_group = np.ones(len(frame), bool) if prior is None else groups == theta
            laws[theta] = {}
            for s in pd.unique(sec[in_group]):
                rows = in_group & (sec == s)
                key = s.item() if isinstance(s, np.generic) else s
                laws[theta][key] = DiscreteLaw.empirical(vals[rows], name=f"law[{key!r}]")
        theta_map = {(t.item() if isinstance(t, np.generic) else t): v for t, v in laws.items()}
        return cls(theta_map, pairs)
