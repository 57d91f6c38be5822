"""The main screen paints from its last frame (`plumbing/frame_timer.py`): a change on an idle
screen is painted at once, a busy screen is painted at most once an interval. What is checked
is the pacing rule, that the dashboard's screen uses it, and, on a real timer, the bound that
holds however loaded the machine is: two ticks are never closer than an interval. (How soon a
change reaches the screen is a speed: the benchmark's `write_to_screen` measures it.)"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from textual.app import App
from textual.timer import Timer

from lanewatch.tui.app import make_app
from lanewatch.tui.plumbing.frame_timer import FrameTimer, next_frame

from .fakes import NOW, FakeEngine, ns_view
from .helpers import shows


def test_a_frame_is_due_at_once_after_an_interval_and_never_sooner_than_one() -> None:
    assert next_frame(last=10.0, now=10.5, interval=1 / 60) == 10.5  # idle: now
    assert next_frame(last=10.0, now=10.004, interval=0.01) == 10.01  # one interval after
    assert next_frame(last=float("-inf"), now=3.0, interval=0.01) == 3.0  # the first frame
    # Textual's grid, after a late tick at 7.3 intervals, waits for the 9th: 1.7 intervals.
    # Here the next frame is one interval after the late one.
    assert next_frame(last=7.3, now=7.31, interval=1.0) == 8.3


async def test_the_dashboard_paints_from_its_last_frame_and_shows_its_rows() -> None:
    engine = FakeEngine([ns_view("busy")])
    app = make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        await shows(pilot, "busy")  # painted by the paced timer
        assert isinstance(app.main._update_timer, FrameTimer)


async def test_ticks_are_never_closer_than_an_interval_however_often_resumed() -> None:
    interval = 0.02
    ticks: list[float] = []

    app: App[None] = App()
    async with app.run_test() as pilot:
        timer: Timer

        def tick() -> None:
            ticks.append(time.monotonic())
            timer.pause()  # as a screen's paint does

        timer = FrameTimer(app, interval, name="paced", callback=tick, pause=True)
        timer._start()
        try:
            # Resumed far more often than it may tick: a screen dirtied by every drain.
            while len(ticks) < 6:
                timer.resume()
                await pilot.pause(0.001)
        finally:
            timer.stop()
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert min(gaps) >= interval - 0.001, gaps
