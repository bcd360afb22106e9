"""Optional Dask support shared by the design, the experiment sweeps and the figures.

Everything here imports ``dask.distributed`` lazily, only when a caller asks for a cluster
(``dask="local"``, a scheduler address or a ``distributed.Client``), so the default in-process path
never imports Dask. Install the extra from a clone with ``pip install -e '.[distributed]'``.

- :func:`dask_client`: a context manager turning the user's ``dask=`` argument into a client (and
  closing what it started);
- :func:`dask_executor`: the same, yielding a :class:`solvers.dask_passes.DaskPasses` for the
  covariance solver's passes;
- :func:`map_ordered`: run ``fn(item)`` for every item, as Dask tasks when a client is given and in
  this process otherwise, results in input order, with a progress bar either way (a tqdm bar only
  when stderr is a terminal, so logs and CI output stay clean).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from dpopt.errors import InvalidParameterError, InvalidTypeError, SolverError

if TYPE_CHECKING:  # pragma: no cover - Dask is an optional extra, never imported at run time here
    from distributed import Client

    from solvers.dask_passes import DaskPasses

__all__ = [
    "DaskOption",
    "dask_client",
    "dask_executor",
    "local_cluster",
    "map_ordered",
    "show_progress",
]

T = TypeVar("T")
R = TypeVar("R")

#: What a ``dask=`` argument accepts: ``None`` (run in process), ``"local"`` (a ``LocalCluster``
#: for the call), a scheduler address such as ``"tcp://host:8786"``, or a ``distributed.Client``.
DaskOption: TypeAlias = "str | Client | None"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise SolverError(
            "Dask support needs dask.distributed; install it from a clone with "
            "`pip install -e '.[distributed]'`"
        ) from None
    return distributed


#: Environment of the worker processes of the clusters started here. Dask's nanny sets a low
#: ``MALLOC_TRIM_THRESHOLD_`` (hand freed memory back to the OS at once), which also makes glibc
#: map every large array afresh, so each chunk of a pass pays page faults: about 1.5x the CPU time
#: of the same pass in process. A pass's temporaries are bounded by one chunk, so keeping them is
#: harmless.
WORKER_ENV = {"MALLOC_TRIM_THRESHOLD_": 2**30, "MALLOC_MMAP_THRESHOLD_": 2**30}


@contextmanager
def local_cluster(n_workers: int | None = None) -> Iterator[Client]:
    """A ``LocalCluster`` of single-threaded worker processes (:data:`WORKER_ENV` applied) and
    its client; both closed on exit."""
    import dask

    distributed = _distributed()
    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_ENV)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        cluster = distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0",
        )
    with cluster, distributed.Client(cluster) as client:
        yield client


@contextmanager
def dask_client(dask: DaskOption, *, n_workers: int | None = None) -> Iterator[Client | None]:
    """The Dask client named by ``dask``.

    Parameters
    ----------
    dask : None, "local", str or distributed.Client
        ``None``: yields ``None`` (run in process, Dask is not imported). ``"local"``: starts a
        ``LocalCluster`` of single-threaded worker processes (``n_workers``, by default one per
        core) and closes it on exit. A scheduler address such as ``"tcp://10.0.0.5:8786"``:
        connects to that cluster and closes the connection (not the cluster) on exit. A
        ``distributed.Client``: used as is and left open.
    n_workers : int, optional
        Workers of the ``"local"`` cluster.
    """
    if dask is None:
        yield None
        return
    if isinstance(dask, str):
        distributed = _distributed()
        if dask == "local":
            with local_cluster(n_workers) as client:
                yield client
            return
        if "://" not in dask and ":" not in dask:
            raise InvalidParameterError(
                "dask", dask, 'must be "local", a scheduler address such as '
                '"tcp://host:8786", a distributed.Client or None'
            )
        try:
            client = distributed.Client(dask)
        except (OSError, TimeoutError) as exc:  # unreachable scheduler: name the address
            raise InvalidParameterError(
                "dask", dask, f"no Dask scheduler answered there ({type(exc).__name__}: {exc})"
            ) from None
        with client:
            yield client
        return
    if type(dask).__module__.startswith("distributed") and hasattr(dask, "submit"):
        yield dask
        return
    raise InvalidTypeError(
        "dask", dask, 'None, "local", a scheduler address or a distributed.Client'
    )


@contextmanager
def dask_executor(dask: DaskOption, *, blocks: int | None = None,
                  timeout: float | None = None) -> Iterator[DaskPasses | None]:
    """A :class:`solvers.dask_passes.DaskPasses` on the cluster named by ``dask`` (see
    :func:`dask_client`), or ``None`` when ``dask`` is ``None``; ``blocks`` and ``timeout`` go to
    DaskPasses."""
    with dask_client(dask) as client:
        if client is None:
            yield None
            return
        from solvers.dask_passes import DaskPasses

        with DaskPasses(client, blocks=blocks, timeout=timeout) as executor:
            yield executor


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a tqdm bar: ``None`` means "when stderr is a terminal"; ``True`` asks for a
    bar but it is still drawn only on a terminal (never into logs or captured output)."""
    if progress is False:
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def map_ordered(
    fn: Callable[..., R],
    items: Sequence[T],
    *,
    client: Client | None = None,
    args: tuple[object, ...] = (),
    desc: str = "",
    progress: bool | None = None,
) -> list[R]:
    """``[fn(item, *args) for item in items]``, as one Dask task per item when ``client`` is given.

    ``args`` (shared, possibly large inputs) are sent to the cluster once, not once per task.
    Results come back in the order of ``items`` whatever order the tasks finish in; the progress
    bar advances as tasks finish. A task that fails re-raises its exception here (Dask reruns tasks
    whose worker was lost).
    """
    from tqdm import tqdm

    bar = tqdm(total=len(items), desc=desc, disable=not show_progress(progress), leave=False)
    try:
        if client is None:
            out: list[R] = []
            for item in items:
                out.append(fn(item, *args))
                bar.update(1)
            return out
        distributed = _distributed()
        # one-element lists: scatter would otherwise split a tuple/list/dict into its items
        shared = [client.scatter([a], broadcast=True, hash=False)[0] for a in args]
        futures = [client.submit(fn, item, *shared, pure=False) for item in items]
        where = {f.key: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * len(items)
        try:
            for fut in distributed.as_completed(futures):
                results[where[fut.key]] = fut.result()
                bar.update(1)
        finally:
            for f in futures:
                f.release()
            for s in shared:
                s.release()
        return results
    finally:
        bar.close()
