r"""Passes over the sensitivity vectors: the one cost of the structured solver that grows with J.

Every full pass the structured solver makes goes through a :class:`PassExecutor`:

- ``gram(source, chunk)`` -> ``(G, n)``: :math:`G = \sum_j s_js_j^\top` and the number of vectors
  (also a finiteness check of every chunk);
- ``score(source, B, chunk, keep, threshold)`` -> :class:`PassResult`: :math:`q_j = |B^\top s_j|^2`
  for every j, reduced to the maximum, its index, and the ``keep`` largest scores above
  ``threshold`` with their indices and vectors.

Both are map-reduces over the source's chunks. :data:`IN_PROCESS` runs them here with numpy (the
embedded default); a distributed executor runs the same map over blocks on a cluster and must
return the same reduction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from certificates.errors import InvalidParameterError
from certificates.problem import VectorSource
from solvers.reductions import TopK

__all__ = ["IN_PROCESS", "InProcessPasses", "PassExecutor", "PassResult", "gram_pass", "score_pass"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]


@dataclass
class PassResult:
    qmax: float
    argmax: int
    top_idx: IntArray
    top_q: FloatArray
    top_vecs: FloatArray
    seconds: float


def gram_pass(source: VectorSource, chunk: int) -> tuple[FloatArray, int]:
    """One pass: the Gram matrix :math:`\\sum_j s_js_j^\\top` (and a finiteness check)."""
    d = source.dim
    gram = np.zeros((d, d))
    n = 0
    for _, blk in source.chunks(chunk):
        b = np.asarray(blk, dtype=np.float64)
        if b.ndim != 2 or b.shape[1] != d:
            raise InvalidParameterError("vectors", source, f"chunks must be (k, {d}) arrays")
        if not np.all(np.isfinite(b)):
            raise InvalidParameterError("vectors", source, "must be finite (chunk has NaN/inf)")
        gram += b.T @ b
        n += b.shape[0]
    if n != source.count:
        raise InvalidParameterError(
            "vectors", source, f"chunks yielded {n} vectors but count is {source.count}"
        )
    return 0.5 * (gram + gram.T), n


def score_pass(
    source: VectorSource, bmat: FloatArray, chunk: int, keep: int, threshold: float
) -> PassResult:
    """One pass computing :math:`q_j = |B^\\top s_j|^2` for every j (one GEMM per chunk).

    Returns the maximum and the ``keep`` largest scores above ``threshold`` with their vectors
    (the top-k reduction :class:`solvers.reductions.TopK`: ties by the smaller index, NaN or inf
    scores refused).
    """
    t0 = time.perf_counter()
    top = TopK(keep, source.dim, threshold)
    for start, blk in source.chunks(chunk):
        b = np.asarray(blk, dtype=np.float64)
        z = b @ bmat
        top.add(start, np.einsum("ij,ij->i", z, z), b)
    return PassResult(*top.result(), time.perf_counter() - t0)


class PassExecutor(Protocol):
    """Runs the solver's full passes over a :class:`~certificates.problem.VectorSource`."""

    def gram(self, source: VectorSource, chunk: int) -> tuple[FloatArray, int]: ...

    def score(
        self, source: VectorSource, bmat: FloatArray, chunk: int, keep: int, threshold: float
    ) -> PassResult: ...


class InProcessPasses:
    """The embedded default: every pass in this process, chunk by chunk, with numpy."""

    def gram(self, source: VectorSource, chunk: int) -> tuple[FloatArray, int]:
        return gram_pass(source, chunk)

    def score(
        self, source: VectorSource, bmat: FloatArray, chunk: int, keep: int, threshold: float
    ) -> PassResult:
        return score_pass(source, bmat, chunk, keep, threshold)


#: The shared in-process executor.
IN_PROCESS: PassExecutor = InProcessPasses()
