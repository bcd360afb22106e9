r"""The structured solver's full passes as Dask tasks over blocks of the vector source.

:class:`DaskPasses` implements :class:`solvers.passes.PassExecutor` on a ``dask.distributed``
cluster. A pass over the :math:`J` sensitivity vectors is a map-reduce:

- **map** (one task per block, run on a worker): the block's vectors are *generated on the
  worker* from the source's small description (for
  :class:`dpopt.covariance.sensitivity.TwoRecordVectors`: the m domain points, the query and
  :math:`\sigma`, i.e. :math:`O(m)` numbers for :math:`J = m(m-1)/2` vectors) through the
  source's ``block(start, stop)`` method (:class:`BlockSource`). The task walks its block in the
  solver's chunks and returns, per chunk, the Gram contribution :math:`\sum s_js_j^\top` (Gram
  pass) or the chunk's maximum of :math:`q_j = |B^\top s_j|^2`, its index and the chunk's
  candidates above the threshold with their vectors (score pass).
- **reduce** (here): the per-chunk results are combined *in chunk order with the same
  operations as the in-process pass* (:func:`solvers.passes.gram_pass`,
  :func:`solvers.passes.score_pass`; the candidates through the one top-k reduction
  :class:`solvers.reductions.TopK`). Block boundaries are multiples of the solver's chunk size,
  so every chunk holds the same vectors as in process and, with the same BLAS on the workers, the
  reduction returns the same floats (arrays that arrive on a worker may be deserialised at an
  address that is not a multiple of 8 bytes, and numpy computes products of such arrays without
  BLAS, rounding differently; every array a task computes with is therefore first realigned,
  :func:`_aligned`): the same Gram matrix, maximum, argmax and candidates, hence
  the same iterates and the same certificate, to the last digit. (Workers with a different BLAS
  or CPU may round the per-chunk products differently; the solver's certificate is then still
  exact for what it returns, and the answers agree within the certified gap.)

Only the source's description (once per solve, as a task result the scheduler can recompute),
the small matrix :math:`B` (``d x p``) and the reduced results cross the network: never the
vectors of a generated source. A plain in-memory array (:class:`certificates.problem.ArrayVectors`)
has no smaller description and is shipped once.

Faults. A worker lost while it runs a block makes the scheduler rerun the block elsewhere
(Dask's ``distributed.scheduler.allowed-failures`` retries); the reduction only starts when every
block has returned, so the answer is unchanged. A block that cannot be computed (its worker lost
more often than allowed, an exception in the source, or ``timeout`` exceeded) raises
:class:`~certificates.errors.SolverError` naming the block and its vector range; no partial pass is
ever reduced, so no design is built on one. Invalid data (NaN/inf vectors, wrong shapes) raises
the same :class:`~certificates.errors.InvalidParameterError` as in process.

Dask is optional (from a clone: ``pip install -e '.[distributed]'``); this module imports it
only when a :class:`DaskPasses` is built.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from certificates.errors import DpoptError, InvalidParameterError, InvalidTypeError, SolverError
from certificates.problem import ArrayVectors, VectorSource
from solvers.passes import PassResult
from solvers.reductions import TopK, top_k
from solvers.restricted import SOLVER_NAME
from solvers.threads import blas_limits

if TYPE_CHECKING:  # pragma: no cover - Dask is optional; imported at run time only when used
    from distributed import Client

_R = TypeVar("_R")

__all__ = ["BlockSource", "DaskPasses", "PassFailedError", "read_block"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

#: Default number of blocks per worker thread (several, so a lost worker costs a small share of a
#: pass and the last blocks balance across workers).
BLOCKS_PER_THREAD = 4

_token = itertools.count()


class PassFailedError(SolverError):
    """A distributed pass could not complete (a block lost beyond Dask's retries, failed or timed
    out). Callers must not fall back to another solver on the same cluster data: the message names
    the block; retry once the cluster is healthy."""


@runtime_checkable
class BlockSource(VectorSource, Protocol):
    """A :class:`~certificates.problem.VectorSource` that generates any range of its vectors.

    ``block(start, stop)`` returns vectors ``start .. stop - 1`` as a ``(stop - start, dim)``
    float64 array, bit for bit the rows ``chunks`` yields for those indices. The object must be
    picklable and small (a description of the set, not its vectors): it is sent once to the
    workers, which generate their blocks from it.
    """

    def block(self, start: int, stop: int) -> NDArray[np.float64]: ...


def read_block(source: VectorSource, start: int, stop: int) -> FloatArray:
    """Vectors ``start .. stop - 1`` of any source: ``block`` when it has one, a slice of an
    in-memory array, else ``take`` of the index range."""
    if isinstance(source, ArrayVectors):
        return np.asarray(source.array[start:stop], dtype=np.float64)
    block = getattr(source, "block", None)
    if callable(block):
        return np.asarray(block(start, stop), dtype=np.float64)
    return np.asarray(source.take(np.arange(start, stop, dtype=np.intp)), dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# map: run on the workers (module-level functions, so they pickle by reference)
# ------------------------------------------------------------------------------------------------
def _hold(source: VectorSource) -> VectorSource:
    """Task whose result is the source itself: workers fetch it once per solve, and the scheduler
    can recompute it if the worker holding it is lost (scattered data could not be)."""
    return source


def _aligned(a: Any) -> Any:
    """``a`` itself, or an aligned copy of an ndarray whose data is not aligned to its item size.

    Arrays unpickled on a worker (an :class:`~certificates.problem.ArrayVectors` shipped to the
    cluster, the matrix ``B`` of a score pass, a verification function's arguments) can sit at an
    odd address inside the message buffer. numpy's matmul then bypasses BLAS for its own loop,
    whose rounding differs from the BLAS kernel the in-process pass uses; a copy restores the
    in-process arithmetic. Aligned arrays are returned unchanged (no copy, same memory order).
    """
    if isinstance(a, np.ndarray) and not a.flags.aligned:
        return a.copy(order="K")
    return a


def _checked(source: VectorSource, start: int, stop: int) -> FloatArray:
    d = source.dim
    b = _aligned(read_block(source, start, stop))
    if b.ndim != 2 or b.shape[1] != d:
        raise InvalidParameterError("vectors", source, f"chunks must be (k, {d}) arrays")
    if b.shape[0] != stop - start:
        raise InvalidParameterError(
            "vectors", source, f"block {start}..{stop - 1} yielded {b.shape[0]} vectors"
        )
    return b


def _gram_block(
    source: VectorSource, start: int, stop: int, chunk: int
) -> tuple[FloatArray, IntArray]:
    """Per-chunk Gram contributions ``b^T b`` (stacked) and chunk sizes of one block."""
    d = source.dim
    with blas_limits(1):
        starts = range(start, stop, chunk)
        grams = np.empty((len(starts), d, d))
        sizes = np.empty(len(starts), dtype=np.intp)
        for c, s in enumerate(starts):
            b = _checked(source, s, min(stop, s + chunk))
            if not np.all(np.isfinite(b)):
                raise InvalidParameterError("vectors", source, "must be finite (chunk has NaN/inf)")
            grams[c] = b.T @ b
            sizes[c] = b.shape[0]
    return grams, sizes


_ChunkScore = tuple[int, float, int, IntArray, FloatArray, FloatArray]


def _score_block(
    source: VectorSource,
    bmat: FloatArray,
    start: int,
    stop: int,
    chunk: int,
    keep: int,
    threshold: float,
) -> list[_ChunkScore]:
    """Per chunk of one block: ``(start, max q, argmax, candidate indices, their q, vectors)``,
    the candidates being what :func:`solvers.passes.score_pass` keeps from that chunk."""
    out: list[_ChunkScore] = []
    bmat = _aligned(bmat)
    with blas_limits(1):
        for s in range(start, stop, chunk):
            b = _checked(source, s, min(stop, s + chunk))
            z = b @ bmat
            q = np.einsum("ij,ij->i", z, z)
            sel = top_k(q, keep, threshold)  # refuses NaN / inf scores
            i = int(np.argmax(q))
            out.append((s, float(q[i]), i, s + sel, q[sel], b[sel]))
    return out


def _map_block(source: VectorSource, start: int, stop: int, chunk: int, fn: Any,
               args: tuple[Any, ...]) -> list[Any]:
    """``fn(chunk_vectors, chunk_start, *args)`` for every solver chunk of one block, in order."""
    out: list[Any] = []
    args = tuple(_aligned(a) for a in args)
    with blas_limits(1):
        for s in range(start, stop, chunk):
            out.append(fn(_checked(source, s, min(stop, s + chunk)), s, *args))
    return out


# ------------------------------------------------------------------------------------------------
# the executor
# ------------------------------------------------------------------------------------------------
def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise SolverError(
            "the Dask executor needs dask.distributed; install it with "
            "`pip install -e '.[distributed]'` from a clone"
        ) from None
    return distributed


class DaskPasses:
    """:class:`solvers.passes.PassExecutor` running each pass as tasks on a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
        A connected client (``Client("tcp://scheduler:8786")`` for a real cluster, or a
        ``LocalCluster``'s client).
    blocks : int, optional
        Number of tasks per pass. By default 4 per worker thread, at most one per solver chunk.
        Blocks are whole numbers of solver chunks (that is what makes the answers identical to
        the in-process pass).
    timeout : float, optional
        Seconds a pass may take before it is abandoned with :class:`SolverError` naming the
        blocks still missing; ``None`` (default) waits as long as the cluster keeps working.

    Examples
    --------
    >>> from distributed import Client, LocalCluster            # doctest: +SKIP
    >>> with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster) as c:
    ...     sol = solve_structured(problem, executor=DaskPasses(c))  # doctest: +SKIP
    """

    def __init__(self, client: Client, *, blocks: int | None = None,
                 timeout: float | None = None) -> None:
        distributed = _import_distributed()
        if not isinstance(client, distributed.Client):
            raise InvalidTypeError("client", client, "a distributed.Client")
        if blocks is not None and (
            isinstance(blocks, bool) or not isinstance(blocks, int | np.integer) or blocks < 1
        ):
            raise InvalidParameterError("blocks", blocks, "must be a positive integer or None")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float)
            or not np.isfinite(timeout) or timeout <= 0
        ):
            raise InvalidParameterError("timeout", timeout, "must be a positive number of seconds")
        self._client = client
        self._blocks = None if blocks is None else int(blocks)
        self._timeout = None if timeout is None else float(timeout)
        self._held: tuple[VectorSource, Any] | None = None
        #: Wall-clock seconds of every pass made (for benchmarks).
        self.pass_seconds: list[float] = []

    @property
    def client(self) -> Client:
        """The Dask client."""
        return self._client

    def close(self) -> None:
        """Release the source held on the cluster (the client stays open)."""
        if self._held is not None:
            self._held[1].release()
            self._held = None

    def __enter__(self) -> DaskPasses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------------
    def _source_future(self, source: VectorSource) -> Any:
        if self._held is None or self._held[0] is not source:
            self.close()
            fut = self._client.submit(_hold, source, pure=False,
                                      key=f"dpopt-source-{next(_token)}-{time.time_ns()}")
            self._held = (source, fut)
        return self._held[1]

    def _ranges(self, source: VectorSource, chunk: int) -> list[tuple[int, int]]:
        if isinstance(chunk, bool) or not isinstance(chunk, int | np.integer) or chunk < 1:
            raise InvalidParameterError("chunk", chunk, "must be a positive integer")
        n = int(source.count)
        n_chunks = -(-n // chunk)
        want = self._blocks
        if want is None:
            threads = sum(self._client.nthreads().values()) or 1
            want = BLOCKS_PER_THREAD * threads
        per = -(-n_chunks // max(1, min(want, n_chunks)))  # chunks per block
        step = per * chunk
        return [(s, min(n, s + step)) for s in range(0, n, step)]

    def _run(self, kind: str, func: Any, source: VectorSource, chunk: int,
             lead: tuple[Any, ...] = (), tail: tuple[Any, ...] = ()) -> list[Any]:
        """Submit one task per block; every result, in block order, or raise naming a block."""
        distributed = _import_distributed()
        ranges = self._ranges(source, chunk)
        held = self._source_future(source)
        tag = f"dpopt-{kind}-{next(_token)}-{time.time_ns()}"
        futures = [
            self._client.submit(func, held, *lead, s, e, chunk, *tail,
                                key=f"{tag}-block{b}", pure=False)
            for b, (s, e) in enumerate(ranges)
        ]
        where = {f.key: b for b, f in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        done = 0
        try:
            for fut in distributed.as_completed(futures, timeout=self._timeout):
                b = where[fut.key]
                exc = fut.exception() if fut.status == "error" else None
                if fut.status == "cancelled":
                    exc = RuntimeError("the task was cancelled (client or cluster shut down)")
                if exc is not None:
                    raise self._block_error(kind, b, ranges[b], exc, futures) from exc
                results[b] = fut.result()
                done += 1
        except distributed.TimeoutError as exc:
            missing = [b for b, f in enumerate(futures) if not f.done()]
            first = missing[0] if missing else 0
            raise PassFailedError(
                f"{SOLVER_NAME}: the {kind} pass did not complete within {self._timeout:g} s: "
                f"block {first} (vectors {ranges[first][0]}..{ranges[first][1] - 1}) and "
                f"{max(len(missing) - 1, 0)} more of {len(ranges)} unfinished; no design is "
                "built on a partial pass (remedy: check the workers, raise timeout)"
            ) from exc
        finally:
            for f in futures:
                f.release()
        if done != len(futures):  # pragma: no cover - as_completed yields every future
            raise PassFailedError(f"{SOLVER_NAME}: the {kind} pass lost blocks without an error")
        return results

    @staticmethod
    def _block_error(kind: str, b: int, rng: tuple[int, int], exc: BaseException,
                     futures: list[Any]) -> Exception:
        if isinstance(exc, DpoptError):
            return exc  # invalid data: the same error as in process
        cause = type(exc).__name__
        if cause == "KilledWorker":
            # Dask blames every task that was on a worker when it died, so a block queued behind
            # the culprit may be the one reported; the others that failed too are listed
            cause = "its worker was lost more often than Dask's allowed-failures"
        else:
            cause = f"{cause}: {exc}"
        others = [i for i, f in enumerate(futures) if i != b and f.status == "error"]
        also = f"; blocks {others} failed as well" if others else ""
        return PassFailedError(
            f"{SOLVER_NAME}: block {b} (vectors {rng[0]}..{rng[1] - 1}) of the {kind} pass "
            f"could not be computed ({cause}){also}; no design is built on a partial pass "
            "(remedy: check the workers' logs and memory, then retry)"
        )

    def map_chunks(self, fn: Callable[..., _R], source: VectorSource, chunk: int,
                   args: tuple[Any, ...] = ()) -> list[_R]:
        """``[fn(block, start, *args) for start, block in source.chunks(chunk)]`` as tasks.

        Each task generates its block on the worker (as the solver's passes do) and applies
        ``fn`` (a picklable, module-level function) to each of its chunks; the results come back
        in chunk order. This is the :class:`certificates.rigorous.ChunkMap` of a distributed
        certificate check: ``certificates`` combines the results itself. Raises
        :class:`PassFailedError` naming the block when a block cannot be computed.
        """
        t0 = time.perf_counter()
        blocks = self._run("verification", _map_block, source, chunk, (), (fn, tuple(args)))
        self.pass_seconds.append(time.perf_counter() - t0)
        return [item for block in blocks for item in block]

    # -------------------------------------------------------------------------------------------
    def gram(self, source: VectorSource, chunk: int) -> tuple[FloatArray, int]:
        """:math:`G = \\sum_j s_js_j^\\top` summed chunk by chunk in index order (as in process)."""
        t0 = time.perf_counter()
        d = source.dim
        gram = np.zeros((d, d))
        n = 0
        for grams, sizes in self._run("Gram", _gram_block, source, chunk):
            for g, k in zip(grams, sizes, strict=True):
                gram += g
                n += int(k)
        if n != source.count:
            raise InvalidParameterError(
                "vectors", source, f"chunks yielded {n} vectors but count is {source.count}"
            )
        self.pass_seconds.append(time.perf_counter() - t0)
        return 0.5 * (gram + gram.T), n

    def score(
        self, source: VectorSource, bmat: FloatArray, chunk: int, keep: int, threshold: float
    ) -> PassResult:
        """:math:`q_j = |B^\\top s_j|^2` on the workers; maximum, argmax and the ``keep`` largest
        candidates above ``threshold`` merged by the reduction :func:`solvers.passes.score_pass`
        uses (:class:`solvers.reductions.TopK`), so the result is the in-process one."""
        t0 = time.perf_counter()
        bm = np.ascontiguousarray(bmat, dtype=np.float64)
        top = TopK(keep, source.dim, threshold)
        tail = (int(keep), float(threshold))
        for block in self._run("score", _score_block, source, chunk, (bm,), tail):
            for start, qc, ic, sel_idx, sel_q, sel_vecs in block:
                top.merge(qc, start + ic, sel_idx, sel_q, sel_vecs)
        reduced = top.result()
        seconds = time.perf_counter() - t0
        self.pass_seconds.append(seconds)
        return PassResult(*reduced, seconds)
