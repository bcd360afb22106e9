"""The progress display: its ETA arithmetic on a fake clock, and what a real design reports."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dpopt
from dpopt import progress
from dpopt.progress import Progress, human_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_eta_from_measured_steps_with_a_known_total() -> None:
    clock = Clock()
    with Progress("sample", total=10, unit="batch", clock=clock, enabled=False) as bar:
        clock.now += 5.0          # the first batch carries start-up cost
        bar.advance()
        assert bar.seconds_per_step == pytest.approx(5.0)
        assert bar.eta() == pytest.approx((45.0, 45.0))
        for _ in range(3):
            clock.now += 2.0
            bar.advance()
        # after the first step the rate is that of the later steps: 6 s for 3 batches
        assert bar.seconds_per_step == pytest.approx(2.0)
        assert bar.eta() == pytest.approx((12.0, 12.0))
        assert "batch 4/10" in bar.line() and "about 12 s left" in bar.line()


def test_range_tail_and_phase() -> None:
    clock = Clock()
    bar = Progress("design", expected=(4, 6), tail=(4, 14), unit="pass", clock=clock,
                   enabled=False)
    with bar:
        assert bar.eta() is None and "so far" in bar.line()
        for _ in range(4):        # chunks of a pass: fractional steps
            clock.now += 0.25
            bar.advance(0.25)
        assert bar.done == pytest.approx(1.0)
        low, high = bar.eta()  # type: ignore[misc]
        assert (low, high) == pytest.approx(((4 - 1 + 4) * 1.0, (6 - 1 + 14) * 1.0))
        for _ in range(6):        # more passes than usual: one more is announced, not zero
            clock.now += 1.0
            bar.advance()
        assert bar.steps_left() == pytest.approx((1 + 4, 1 + 14))
        progress.phase("certificate", total=1)
        assert bar.tail is None and bar.done == 0
        clock.now += 3.0
        progress.tick_rows(250, 1000)
        assert bar.eta() == pytest.approx((9.0, 9.0))
    assert [name for name, _, _ in bar.history] == ["design", "certificate"]
    assert bar.history[0][1] == pytest.approx(7.0)


def test_tick_without_a_display_is_a_no_op_and_contexts_nest() -> None:
    progress.tick()
    progress.tick_rows(5, 10)
    progress.phase("nothing")
    assert progress.current() is None
    outer = Progress("outer", total=2, enabled=False)
    with outer:
        inner = Progress("inner", total=3, enabled=False)
        with inner:
            progress.tick()
        progress.tick()
        assert progress.current() is outer
    assert (outer.done, inner.done) == (1, 1)
    assert progress.current() is None


def test_drawing_on_a_stream_and_erasing() -> None:
    clock = Clock()
    stream = io.StringIO()
    with Progress("search", expected=(3, 9), unit="evaluation", stream=stream, enabled=True,
                  clock=clock, min_interval=0.0) as bar:
        clock.now += 1.0
        bar.advance()
    text = stream.getvalue()
    assert "search: evaluation 1 (usually 3-9)" in text and "left" in text
    assert text.endswith("\r")             # the line is erased at the end
    assert "\n" not in text                # never scrolls the terminal


def test_tqdm_names_and_use_without_with() -> None:
    clock = Clock()
    stream = _Terminal()
    bar = Progress("calibrating", total=4, unit="evaluation", stream=stream, clock=clock,
                   min_interval=0.0)
    clock.now += 1.0
    bar.update()
    clock.now += 1.0
    bar.update(2)
    assert bar.done == 3 and progress.current() is None  # not made the active display
    bar.close()
    assert bar.history == [("calibrating", 3.0, 2.0)]
    assert "evaluation 3/4" in stream.getvalue() and stream.getvalue().endswith("\r")
    assert not progress.allowed()
    with progress.displays(stream):
        assert progress.allowed()


def test_not_drawn_when_not_a_terminal() -> None:
    stream = io.StringIO()               # isatty() is False
    with Progress("x", total=1, stream=stream) as bar:
        bar.advance()
    assert stream.getvalue() == "" and bar.done == 1


@pytest.mark.parametrize(("seconds", "text"), [(3.25, "3.2 s"), (42, "42 s"), (600, "10.0 min"),
                                               (7200, "2.0 h"), (3e5, "3.5 days"),
                                               (float("inf"), "unknown")])
def test_human_seconds(seconds: float, text: str) -> None:
    assert human_seconds(seconds) == text


def test_a_design_reports_its_passes_and_the_certificate_pass() -> None:
    grid = dpopt.Grid(np.zeros(2), np.ones(2), (12, 12))
    source = dpopt.add_remove_set(grid, query=[0.2, 0.7], sigma=0.5)
    bar = Progress("design", expected=(4, 6), tail=(4, 14), unit="pass", enabled=False)
    with bar:
        design = dpopt.design_covariance(source, dpopt.ApproxDP(epsilon=1.0, delta=1e-6),
                                         solver="structured")
    assert design.certified
    phases = {name: done for name, done, _ in bar.history}
    # the solver's passes, counted from the chunks of the source, are whole passes
    assert phases["design"] >= 2 and phases["design"] == pytest.approx(round(phases["design"]))
    assert phases["certificate"] == pytest.approx(1.0)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_draws_only_where_the_command_line_allows() -> None:
    with progress.auto("hidden", total=1) as bar:
        progress.tick()
    assert not bar.enabled and bar.done == 1
    terminal = _Terminal()
    with progress.displays(terminal):
        with progress.auto("shown", total=2, unit="batch") as bar:
            assert bar.enabled
            with progress.auto("nested", total=1) as inner:  # inside another: silent
                assert not inner.enabled
                progress.tick()
            progress.tick()
    assert "shown: batch" in terminal.getvalue() and "nested" not in terminal.getvalue()
    assert (bar.done, inner.done) == (1, 1)


def test_a_delayed_line_stays_hidden_during_its_first_seconds() -> None:
    clock, out = Clock(), io.StringIO()
    bar = Progress("calibrating", expected=(4, 8), clock=clock, stream=out, enabled=True,
                   delay=1.0, min_interval=0.0)
    clock.now += 0.5
    bar.advance(1)
    assert out.getvalue() == ""            # a quick search shows nothing
    clock.now += 1.0
    bar.advance(1)
    assert "calibrating" in out.getvalue() and "left" in out.getvalue()
    bar.finish()
