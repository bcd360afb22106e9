r"""Progress you can trust: a one-line display with an ETA from *measured* step times.

Long computations in dpopt are sequences of similar steps: the structured solver's full passes
over the sensitivity vectors, the steps of a sampler. :class:`Progress` times the steps as
they complete and estimates the time left as (steps left) × (measured time per step), re-estimated
at every report: the time per step is measured from the first report on, so the one-time start-up
before it (allocation, caches, the set-up of the first chunk) does not inflate it. The estimate
is a measurement of this run on this machine, not an extrapolation from a benchmark.

Usage, from code that owns the terminal (the command line)::

    with Progress("design", unit="pass", expected=(4, 6), tail=(4, 14), enabled=True):
        ...                      # code below calls progress.tick() once per step

and from library code that does the steps (it costs nothing when no display is active)::

    from dpopt import progress
    progress.tick()              # one step done

Library code that runs a long loop of its own (an accounting search, a sampler) opens its
display with :func:`auto`; it is drawn only where the command line allowed displays
(:func:`displays`: stderr is a terminal and ``--quiet`` is off), never from a plain Python
call, a notebook or a test::

    with progress.auto("sampling", total=n_batches, unit="batch"):
        for batch in batches:
            ...
            progress.tick()

The active display is held in a :mod:`contextvars` variable, so library functions need no extra
parameter and a display never leaks into another thread's work. :func:`watch_passes` wraps a
solver's pass executor so that each full pass ticks.

How many steps remain is known exactly for a fixed number of steps (``total``), and is a range
for searches and iterative solvers (``expected=(low, high)``); the time left is then a range,
say from 20 to 30 s, and the line shows its geometric middle, "about 24 s left" (within a
factor 2 of every time in the range as long as the range spans at most a factor 4). While the
computation runs at least the rest of the current step is counted, and one more step once more
steps ran than ``high``. Nothing is estimated before the second report: the wait for the
first one holds the start-up.

A time left is shown only where it is supported, if the display asks for it: not before the
display has been open ``eta_after`` seconds (a short run's rate is measured on a few chunks,
its first pass still carrying start-up), and not while the range spans more than
``max_spread`` (its geometric middle could then be more than a factor 2 from the time left);
the line shows the time so far instead. The design line uses 2 s and a factor 3.

How good it is was measured on designs over 10⁶ to 10⁸ vectors (d = 2, 4, 10) and on the
sampler (CPU seconds, so that the load of a shared machine does not enter): with the design's
counts (:data:`dpopt.cli.options.PASSES_EXPECTED` solver passes, the certificate's pass costing
:data:`~dpopt.cli.options.CHECK_PASS_COST` of them) the time shown stayed within a factor 2 of
the time that was in fact left; the benchmarks page lists the runs.

Steps of uneven cost (``uneven=True``, the sampler): the cost of a sampler's step is that of its
designs, which is small at the noisiest levels, several times larger in the middle of the schedule
and small again at the end; the mean time per step so far is then low early and high late
(0.35-3.24x the time left on the runs measured). Such a line measures the cost of the recent steps,
the *level* :math:`c` (the median time per step over the last :math:`\max(8, \lceil k/10\rceil)` of
the :math:`k` steps timed: a single slow step, a pause of the machine, moves it little), and keeps
the greatest level :math:`P` and the least level :math:`F` seen so far. Nothing tells when the
costly middle comes, or how costly it is, while the cost is still rising or has not yet risen, so
no time left is shown until the run is past its costliest stretch: the peak rose to at least twice
the least level before it (:data:`UNEVEN_RISE`; a smaller swing can be the noise of a few steps)
and the level has since fallen to :math:`c \le P/2` (:data:`UNEVEN_DROP`; a shallower dip can lie
between two costly stretches). The steps left then cost between the floor and the current level,
and the time left is the range :math:`[nF, nc]` for :math:`n` steps left; the sampler shows it
while it spans at most a factor 3 (``max_spread=3``), so that its geometric middle, the time shown,
is within :math:`\sqrt 3 = 1.73` of every time in the range, with room for steps a little cheaper
than the floor. The model is that the cost rises and falls once: a second costly stretch after
cheap steps is under-estimated (down to half the time left on a simulated run whose second stretch,
5 times the cheapest steps, is the dearer), a costly stretch that begins with the first steps
leaves a floor above the cheap steps of the end (the time shown can then exceed twice the time
left: up to 2.7x on a simulated run of 100 steps, 3.7x on 50, whose costliest steps, 10 times the
cheapest, come at a fifth of the run), and a run whose cost never rises and falls (even steps, or
steps getting steadily dearer) shows the count only, which is why steps of even cost keep the mean
rate. Measured on twelve sampling runs (grid and box, Heart, Adult and the mixture, 10 to 200
steps; CPU seconds): every time shown was within 0.61-1.41x of the time left, shown at up to 36 %
of the reports (none on runs whose cost rises less than twofold or falls by less than half); later
runs gave 0.64-1.98x, the machine's load having changed the cost of the cheap early steps.

A line with ``count_only=True`` (the noise calibration's) never shows a time left: the search's
last evaluations, which prove its answer, cost many times what the evaluations before them
predict, and the time left it would have shown was 0.05-0.58x the time in fact left.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # pragma: no cover - types only: importing this module stays free
    from certificates.problem import VectorSource
    from solvers.passes import FloatArray, PassExecutor, PassResult

__all__ = ["UNEVEN_DROP", "UNEVEN_RISE", "UNEVEN_WINDOW", "Progress", "allowed", "auto",
           "current", "displays", "human_seconds", "phase", "tick", "tick_rows", "watch_passes"]

_ACTIVE: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "dpopt_progress", default=None)
#: where library code may draw its own displays (set by the command line); None: nowhere
_ALLOWED: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar(
    "dpopt_progress_stream", default=None)

#: an uneven line's level is the median time per step over the last max(a, ceil(b k)) of k steps
UNEVEN_WINDOW = (8, 0.1)
#: an uneven line shows a time left once its level is at most its peak level / UNEVEN_DROP
UNEVEN_DROP = 2.0
#: ... and once its peak level is at least UNEVEN_RISE times the least level before the peak
UNEVEN_RISE = 2.0


def human_seconds(seconds: float) -> str:
    """``42 s``, ``3.5 min``, ``2.1 h``, ``1.5 days`` (for display only)."""
    if not math.isfinite(seconds):
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


class Progress:
    r"""A status line on a terminal with the work done, the time per step and the time left.

    Parameters
    ----------
    desc : str
        What runs (``"design (1,000,000 vectors, d = 2)"``).
    total : float, optional
        The exact number of steps, when known (the batches of a sampler).
    expected : (float, float), optional
        The usual range of the number of steps when it is not known in advance (a solver's
        passes, a root search's evaluations). Ignored when ``total`` is given.
    tail : (float, float), optional
        Work that follows the counted steps, in units of one measured step (for a design: the
        certificate's pass, which costs several solver passes). It is added to the time left
        until :meth:`phase` starts the next stage.
    unit : str, default "step"
        The name of one step (``"pass"``, ``"evaluation"``, ``"batch"``).
    stream : text stream, optional
        Where to draw (default ``sys.stderr``).
    enabled : bool, optional
        Draw at all. ``None`` (default): only when ``stream`` is a terminal. Steps are timed
        either way, so :meth:`eta` and :attr:`history` serve tests and logs too.
    clock : callable, default time.perf_counter
        The clock steps are timed with (tests pass a fake one).
    delay : float, default 0
        Seconds before the first draw (a search that usually answers in under a second shows
        nothing then).
    max_spread : float, optional
        Show a time left only while its range :math:`[l, h]` spans at most this factor
        (:math:`h \le` ``max_spread`` :math:`\cdot l`); otherwise the line shows the time so
        far. With ``max_spread=4`` the time shown, :math:`\sqrt{lh}`, is within a factor 2 of
        every time in the range, so of the time in fact left whenever the counts (``expected``,
        ``tail``) hold it. ``None`` (default): no such limit.
    eta_after : float, default 0
        Seconds the display must have been open (all phases together) before a time left is
        shown; until then the line shows the time so far. On a short run the time per step is
        measured on a few chunks, and the first pass still carries part of the start-up.
    uneven : bool, default False
        The steps cost unevenly, rising and then falling along the run (a sampler's steps):
        the time left is :math:`[nF, nc]` from the recent level :math:`c` and the least level
        :math:`F`, shown only once the level rose to a peak :math:`P \ge 2F` and has fallen to
        :math:`P/2` since (:data:`UNEVEN_RISE`, :data:`UNEVEN_DROP`; module notes). Needs
        ``total``; without it the steps are taken as even.
    count_only : bool, default False
        Never show a time left, only the steps done and the time so far: for a search whose
        remaining cost its counts do not bound (the noise calibration: its last, proving
        evaluations cost several times what the steps before them predict). :meth:`eta` still
        returns the range measured, for logs and benchmarks.

    Notes
    -----
    Steps may be fractional: a pass over the vectors reports each chunk as the fraction of the
    pass it is, so the line moves within a pass. The time per step is measured on the work
    reported after the first report, ``(now - t_1) / (done - done_1)`` (before a second report:
    ``elapsed / done``), so the start-up before the first report is left out. The time left is
    ``(steps left + tail) × time per step``, a range when the number of steps is a range.
    """

    def __init__(self, desc: str, *, total: float | None = None,
                 expected: tuple[float, float] | None = None,
                 tail: tuple[float, float] | None = None, unit: str = "step",
                 stream: TextIO | None = None, enabled: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 min_interval: float = 0.25, delay: float = 0.0,
                 max_spread: float | None = None, eta_after: float = 0.0,
                 uneven: bool = False, count_only: bool = False) -> None:
        self.desc = desc
        self.unit = unit
        self.stream = sys.stderr if stream is None else stream
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            try:
                enabled = bool(isatty and isatty())
            except (ValueError, OSError):
                enabled = False
        self.enabled = enabled
        self.clock = clock
        self.min_interval = float(min_interval)
        #: nothing is drawn before the phase has run this many seconds (quick calls stay quiet)
        self.delay = float(delay)
        #: no time left is shown while its range spans more than this factor (None: no limit)
        self.max_spread = None if max_spread is None else float(max_spread)
        #: no time left is shown before the display has been open this many seconds
        self.eta_after = float(eta_after)
        #: the steps cost unevenly (rising, then falling): the time left from the recent level
        self.uneven = bool(uneven)
        #: never show a time left (the counts do not bound the remaining cost)
        self.count_only = bool(count_only)
        #: (phase, steps done, seconds) of every finished phase, and of the current one at exit
        self.history: list[tuple[str, float, float]] = []
        self._width = 0
        self._drawn_at = -math.inf
        self._token: contextvars.Token[Progress | None] | None = None
        self._set_phase(desc, total, expected, tail)
        self._opened = self._started

    def _set_phase(self, desc: str, total: float | None, expected: tuple[float, float] | None,
                   tail: tuple[float, float] | None) -> None:
        self.phase_desc = desc
        self.total = None if total is None else max(float(total), 0.0)
        self.expected = None if expected is None else (float(expected[0]), float(expected[1]))
        self.tail = None if tail is None else (float(tail[0]), float(tail[1]))
        self.done = 0.0
        self._started = self.clock()
        #: (clock, done) at the first report of the phase: the rate is measured from there
        self._first: tuple[float, float] | None = None
        # an uneven line's reports from the first on, and its levels: current, peak, floor
        self._marks: list[tuple[float, float]] = []
        self._rates: list[float] = []
        self.level: float | None = None
        self._peak, self._floor = -math.inf, math.inf
        self._rise = 1.0  # the peak level over the least level before it

    # -- the context: make this the display that tick() reaches ------------------------------
    def __enter__(self) -> Progress:
        self._started = self._opened = self.clock()
        self._token = _ACTIVE.set(self)
        self._draw(force=True)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        self.finish()

    def finish(self) -> None:
        """Record the current phase and erase the line (for a display used without ``with``,
        driven by :meth:`advance` alone)."""
        self.history.append((self.phase_desc, self.done, self.clock() - self._started))
        self._erase()

    # tqdm's names, so code written for a tqdm bar can drive this one
    def update(self, steps: float = 1.0) -> None:
        """The same as :meth:`advance`."""
        self.advance(steps)

    def close(self) -> None:
        """The same as :meth:`finish`."""
        self.finish()

    def phase(self, desc: str, *, total: float | None = None,
              expected: tuple[float, float] | None = None) -> None:
        """Start the next stage (its own steps and time per step); ends the ``tail``."""
        self.history.append((self.phase_desc, self.done, self.clock() - self._started))
        self._set_phase(desc, total, expected, None)
        self._draw(force=True)

    # -- steps -------------------------------------------------------------------------------
    def advance(self, steps: float = 1.0) -> None:
        """Record ``steps`` (possibly fractional) steps completed since the previous call."""
        if steps > 0:
            self.done += float(steps)
            if self._first is None:
                self._first = (self.clock(), self.done)
            if self.uneven:
                self._measure_level()
            self._draw()

    def _measure_level(self) -> None:
        """The median time per step over the last reports (:data:`UNEVEN_WINDOW`), and the
        greatest and least such level of the phase."""
        now, done = self.clock(), self.done
        if self._marks:
            t0, d0 = self._marks[-1]
            if done > d0:
                self._rates.append(max(now - t0, 0.0) / (done - d0))
        self._marks.append((now, done))
        timed = len(self._rates)  # steps with a measured time (after the first report)
        width = max(UNEVEN_WINDOW[0], math.ceil(UNEVEN_WINDOW[1] * timed))
        if timed < width:
            return
        self.level = statistics.median(self._rates[-width:])  # one slow step moves no level
        self._floor = min(self._floor, self.level)
        if self.level > self._peak:
            rise = self.level / self._floor if self._floor > 0.0 else math.inf
            self._peak, self._rise = self.level, rise if self.level > 0.0 else 1.0

    @property
    def elapsed(self) -> float:
        """Seconds since the current phase started."""
        return self.clock() - self._started

    @property
    def seconds_per_step(self) -> float | None:
        """Measured time per step in this phase (None before any step): the time of the work
        reported after the first report, whose wait carries the one-time start-up costs
        (allocation, caches, the first chunk's set-up); ``elapsed / done`` until then."""
        if self.done <= 0 or self._first is None:
            return None
        at, done = self._first
        now = self.clock()
        if self.done - done > 1e-12 and now > at:
            return (now - at) / (self.done - done)
        return self.elapsed / self.done

    def steps_left(self) -> tuple[float, float] | None:
        """(fewest, most) steps still to run, ``tail`` included; None when nothing tells."""
        if self.total is not None:
            low = high = max(self.total - self.done, 0.0)
        elif self.expected is not None:
            # while it runs, the rest of the current step is to come, and once more steps ran
            # than usual, one more
            frac = self.done - math.floor(self.done + 1e-6)  # chunk fractions sum inexactly
            if frac > 1e-6:
                rest = 1.0 - frac
            else:
                rest = 1.0 if self.done <= 0 or self.done > self.expected[1] + 1e-6 else 0.0
            high = max(self.expected[1] - self.done, rest)
            low = min(max(self.expected[0] - self.done, rest), high)
        else:
            return None
        if self.tail is not None:
            low, high = low + self.tail[0], high + self.tail[1]
        return low, high

    def eta(self) -> tuple[float, float] | None:
        """(low, high) seconds left, from the measured time per step (an uneven line: from its
        levels, None until it is past its costliest stretch); None before a step."""
        left = self.steps_left()
        if self.uneven and self.total is not None:
            # past the costliest stretch: the steps left cost between the floor and the level
            level = self.level
            if (left is None or level is None or not level * UNEVEN_DROP <= self._peak
                    or not self._rise >= UNEVEN_RISE):
                return None
            return left[0] * self._floor, left[1] * level
        per = self.seconds_per_step
        if per is None or left is None:
            return None
        return left[0] * per, left[1] * per

    def estimate(self) -> float | None:
        r"""The time left shown (seconds; None before a step): the geometric middle
        :math:`\sqrt{lh}` of :meth:`eta`'s range :math:`[l, h]`, which is within a factor 2 of
        every time in the range as long as :math:`h \le 4l`, and of the time in fact left in
        every measured run (module notes). None also while the range spans more than
        ``max_spread`` (the time left is not supported by the counts then: at the end of a
        design's solve, 0 to 2 more passes and a certificate pass of 1 to 3 passes), and before
        the display has been open ``eta_after`` seconds."""
        if self.count_only or self.clock() - self._opened < self.eta_after:
            return None  # not asked for, or too little of the run measured
        first = self._first
        if first is None or not self.clock() > first[0] or not self.done > first[1]:
            return None  # one report only: its wait holds the start-up, no rate yet
        eta = self.eta()
        if eta is None:
            return None
        low, high = eta
        if self.max_spread is not None and not high <= self.max_spread * low:
            return None
        return math.sqrt(low * high)

    # -- drawing -----------------------------------------------------------------------------
    def line(self) -> str:
        """The status text (also what is drawn)."""
        done = f"{self.done:.1f}" if self.done != int(self.done) else f"{int(self.done)}"
        if self.total is not None:
            total = f"{self.total:g}"
            count = f"{self.unit} {done}/{total}"
        elif self.expected is not None:
            count = f"{self.unit} {done} (usually {self.expected[0]:g}-{self.expected[1]:g})"
        else:
            count = f"{self.unit} {done}"
        parts = [f"{self.phase_desc}: {count}"]
        per = self.seconds_per_step
        if per is not None:
            parts.append(f"{human_seconds(per)}/{self.unit}")
        left = self.estimate()
        if left is not None:
            parts.append(f"about {human_seconds(left)} left")
        else:
            parts.append(f"{human_seconds(self.elapsed)} so far")
        return " · ".join(parts)

    def _draw(self, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self._started < self.delay:
            return
        if not force and now - self._drawn_at < self.min_interval:
            return
        self._drawn_at = now
        text = self.line()
        pad = " " * max(self._width - len(text), 0)
        self._width = len(text)
        try:
            print("\r" + text + pad, end="", file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed terminal must not break the computation
            self.enabled = False

    def _erase(self) -> None:
        if not self.enabled or not self._width:
            return
        try:
            print("\r" + " " * self._width + "\r", end="", file=self.stream, flush=True)
        except (OSError, ValueError):
            pass
        self._width = 0


@contextlib.contextmanager
def displays(stream: TextIO | None) -> Iterator[None]:
    """Within the block, :func:`auto` displays draw on ``stream`` (None: they stay hidden)."""
    token = _ALLOWED.set(stream)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def allowed() -> bool:
    """Whether the command line allows displays here (inside :func:`displays` with a stream)."""
    return _ALLOWED.get() is not None


def auto(desc: str, *, total: float | None = None, expected: tuple[float, float] | None = None,
         unit: str = "step", count_only: bool = False) -> Progress:
    """A :class:`Progress` for library code: drawn only inside :func:`displays` with a stream,
    and only when no other display is active (inside a design it counts silently)."""
    stream = _ALLOWED.get()
    return Progress(desc, total=total, expected=expected, unit=unit, stream=stream,
                    enabled=stream is not None and _ACTIVE.get() is None,
                    count_only=count_only)


def current() -> Progress | None:
    """The active display of this context (None when nothing is shown)."""
    return _ACTIVE.get()


def tick(steps: float = 1.0) -> None:
    """Report ``steps`` (possibly fractional) completed steps to the active display; a no-op
    without one."""
    bar = _ACTIVE.get()
    if bar is not None:
        bar.advance(steps)


def phase(desc: str, *, total: float | None = None,
          expected: tuple[float, float] | None = None) -> None:
    """Start the next stage of the active display (:meth:`Progress.phase`); a no-op without
    one."""
    bar = _ACTIVE.get()
    if bar is not None:
        bar.phase(desc, total=total, expected=expected)


class _TimedPasses:
    """A pass executor that ticks the active display after every full pass."""

    def __init__(self, inner: PassExecutor) -> None:
        self._inner = inner

    def gram(self, source: VectorSource, chunk: int) -> tuple[FloatArray, int]:
        out = self._inner.gram(source, chunk)
        tick()
        return out

    def score(self, source: VectorSource, bmat: FloatArray, chunk: int, keep: int,
              threshold: float) -> PassResult:
        out = self._inner.score(source, bmat, chunk, keep, threshold)
        tick()
        return out

    def __getattr__(self, name: str) -> Any:  # everything else is the wrapped executor's
        return getattr(self._inner, name)


def watch_passes(executor: PassExecutor | None) -> PassExecutor | None:
    """``executor`` wrapped to tick once per full pass when a display is active.

    Only an explicit executor (a Dask cluster's) is wrapped: passes in this process iterate the
    sensitivity source, whose ``chunks()`` report each chunk themselves (:func:`tick_rows`), so
    ``None`` (the in-process default) is returned unchanged.
    """
    if executor is None or _ACTIVE.get() is None:
        return executor
    return _TimedPasses(executor)


def tick_rows(rows: int, count: int) -> None:
    """Report ``rows`` of the ``count`` vectors of a pass as done (``rows / count`` of a step)."""
    bar = _ACTIVE.get()
    if bar is not None and count > 0:
        bar.advance(rows / count)
