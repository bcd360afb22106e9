"""Command-line conventions shared by the commands (private to :mod:`dpopt.cli`).

- :func:`add_renamed_option`: an option under its unambiguous name, with the old spelling kept
  as a hidden, deprecated alias that still works but prints a warning naming the new option;
- :func:`announce_large_design`: the size and time estimate printed before a design over many
  sensitivity vectors, and the confirmation needed past :data:`CONFIRM_ABOVE` of them;
- :func:`add_dask_option`: ``--dask local|ADDRESS`` on the commands whose work can run as Dask
  tasks (passed as ``dask=`` / ``client=`` to the Python API).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from certificates.problem import VectorSource
    from dpopt.cli.common import Context

__all__ = [
    "ANNOUNCE_ABOVE",
    "CHECK_PASS_COST",
    "CONFIRM_ABOVE",
    "DASK_HELP",
    "ETA_AFTER",
    "ETA_MAX_SPREAD",
    "PASSES_EXPECTED",
    "PASSES_TYPICAL",
    "add_dask_option",
    "add_renamed_option",
    "announce_large_design",
    "estimate_pass_seconds",
    "less_error",
    "one_plus",
]

#: designs over more vectors than this print a size and time estimate first
ANNOUNCE_ABOVE = 10**7
#: designs over more vectors than this need ``--yes`` to start
CONFIRM_ABOVE = 10**9
#: the structured solver's full passes over the vectors for one design (measured range: 4-6
#: passes for add/remove sets of 8e5 to 6.5e6 vectors in d = 2..4; 4 for 1e5 to 1e8 vectors in
#: d = 2, 4, 10)
PASSES_EXPECTED = (4, 6)
#: the certificate's pass over the vectors after the solve, in solver passes (re-measured in CPU
#: seconds on the counted passes, Newton steps included: 1.9 to 2.7 for 1e7 to 1e8 vectors in
#: d = 2, 4 and 3e6 in d = 10; 1.1 to 1.3 on short runs, 1e6 to 3e6 vectors in d = 2, whose
#: passes carry more fixed work; it works in smaller chunks, in higher precision)
CHECK_PASS_COST = (1.0, 3.0)
#: the design line shows a time left only while its range spans at most this factor, so that
#: the time shown (the range's geometric middle) is within sqrt(3) = 1.73x of every time in the
#: range, leaving room for the error of the measured time per pass within x2 (in a 4-pass solve:
#: shown for the first three passes and the certificate, not during the 4th pass and later)
ETA_MAX_SPREAD = 3.0
#: ... and only once it has run this many seconds: on shorter designs (1e6 vectors: about a
#: second) the rate is measured on a few chunks, the first pass still slowed by the start-up, and
#: the time shown was up to 2.8x the time left
ETA_AFTER = 2.0
#: kept for old imports: the range of solver passes
PASSES_TYPICAL = PASSES_EXPECTED


class _DeprecatedAlias(argparse.Action):
    """Store like the new option, and warn on stderr that the old spelling is deprecated."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new_name: str,
                 **kwargs: Any) -> None:
        self.new_name = new_name
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"dpopt: warning: {option_string} is deprecated; use {self.new_name}",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_option(parser: argparse.ArgumentParser, new: str, old: str, *, dest: str,
                       required: bool = False, **kwargs: Any) -> None:
    """Add option ``new`` and its hidden deprecated alias ``old``, both storing into ``dest``.

    With ``required=True`` exactly one of the two spellings must be given (a required mutually
    exclusive group, whose error message names only ``new``).
    """
    target: argparse._ActionsContainer = (
        parser.add_mutually_exclusive_group(required=True) if required else parser)
    target.add_argument(new, dest=dest, **kwargs)
    alias: dict[str, Any] = {"type": kwargs["type"]} if "type" in kwargs else {}
    target.add_argument(old, dest=dest, help=argparse.SUPPRESS, action=_DeprecatedAlias,
                        new_name=new, **alias)


DASK_HELP = (
    "'local' starts a LocalCluster on this machine (one single-threaded "
    "worker process per core) for this command and stops it afterwards; an address such as "
    "tcp://10.0.0.5:8786 connects to a running scheduler (the cluster is left running). The "
    "answer is the same as without --dask. Needs pip install -e '.[distributed]' from a clone"
)


def add_dask_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--dask local|ADDRESS`` (stored as ``args.dask``, ``None`` by default); ``what`` says
    which part of the command runs as Dask tasks."""
    parser.add_argument("--dask", metavar="local|ADDRESS", default=None,
                        help=f"{what} as Dask tasks; {DASK_HELP}")


def estimate_pass_seconds(source: VectorSource, probe: int = 65536) -> float:
    """Seconds for one pass over ``source``, extrapolated from generating a chunk of it.

    The first chunk carries one-time costs (allocation, caches), which made the old estimate
    several times too long; when the source has a second chunk, that one is timed instead.
    """
    size = min(probe, max(int(source.count), 1))
    seen, elapsed = 0, 0.0
    start = time.perf_counter()
    for index, (_, block) in enumerate(source.chunks(size)):
        now = time.perf_counter()
        seen, elapsed = int(block.shape[0]), now - start
        if index >= 1:
            break
        start = time.perf_counter()
    return elapsed * int(source.count) / max(seen, 1)


def announce_large_design(ctx: Context, source: VectorSource, *, confirmed: bool) -> None:
    """Before a design over more than :data:`ANNOUNCE_ABOVE` vectors, print its size and an
    estimated time on stderr; past :data:`CONFIRM_ABOVE` vectors refuse unless ``confirmed``.

    The time is an extrapolation: one chunk of the sensitivity set is generated and timed (a
    solver pass costs about as much as generating the vectors), and a design makes
    :data:`PASSES_EXPECTED` solver passes plus the certificate's pass, which costs
    :data:`CHECK_PASS_COST` solver passes. It is the order of magnitude; the progress line of
    the design then shows the time left measured on the passes themselves.
    """
    from dpopt.cli.common import UsageError
    from dpopt.progress import human_seconds

    count, dim = int(source.count), int(source.dim)
    if count <= ANNOUNCE_ABOVE:
        return
    data = count * dim * 8.0
    size = next(f"{data / unit:.3g} {name}" for unit, name in
                ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1.0, "bytes")) if data >= unit)
    per_pass = estimate_pass_seconds(source)
    low = per_pass * (PASSES_EXPECTED[0] + CHECK_PASS_COST[0])
    high = per_pass * (PASSES_EXPECTED[1] + CHECK_PASS_COST[1])
    ctx.warn(
        f"large design: {count:.3g} sensitivity vectors in R^{dim} ({size} of "
        f"vectors per pass, generated in chunks, never stored); one pass of generation takes "
        f"about {human_seconds(per_pass)} here, a design needs {PASSES_EXPECTED[0]}-"
        f"{PASSES_EXPECTED[1]} passes and a certificate pass: expect about "
        f"{human_seconds(low)} to {human_seconds(high)}"
    )
    if count > CONFIRM_ABOVE and not confirmed:
        raise UsageError(
            f"a design over {count:.3g} vectors (more than {CONFIRM_ABOVE:.0e}) starts only "
            "with --yes; consider a coarser domain or pruning the set first"
        )


def one_plus(residual: float) -> str:
    """``(1 + r)`` with the sign folded in: ``(1 - 1e-12)``, ``(1 + 3e-09)``, ``(1 + 0)``."""
    sign = "-" if residual < 0 else "+"
    return f"(1 {sign} {abs(residual):.3g})"


def less_error(improvement: float) -> str:
    """How much less error the optimal design has than isotropic noise, in words.

    ``improvement`` is isotropic error / optimal error (>= 1 up to rounding): 1.312 reads
    "23.8 % less error than isotropic noise", and 1 reads "the same error as isotropic noise".
    """
    saving = 100.0 * (1.0 - 1.0 / improvement)
    if abs(saving) < 0.05:
        return "the same error as isotropic noise"
    if saving < 0:
        return f"{-saving:.1f} % more error than isotropic noise"
    return f"{saving:.1f} % less error than isotropic noise"
