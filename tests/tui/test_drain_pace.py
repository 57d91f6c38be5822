"""Changes reach the table as they arrive, not a frame after the last drain.

The engine paces what it hands over (its process: once a frame) and Textual paints at most once
a frame; a drain held back to a frame of its own was a third wait in series with those two
(docs/performance.md, *The screen close to the model*). Only a second drain within `DRAIN_GAP`
of the last one waits, and it is not lost (`test_watch.py`). The app's monotonic clock is moved
by the test, so "how long since the last drain" is exact; nothing here is timed.
"""

from __future__ import annotations

from lanewatch.model.views import Changes
from lanewatch.tui.app import LanewatchApp
from lanewatch.tui.shell.picture_feed import DRAIN_GAP, FRAME

from .fakes import NOW, FakeEngine, ns_view
from .helpers import until


class SteppedClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_batch_inside_the_frame_but_past_the_gap_is_drained_on_arrival() -> None:
    """Before: any batch within a frame (1/60 s) of the last drain waited for a timer to the
    frame's end; here each batch comes 1.5 gaps (well inside a frame) after the last drain and
    none is drained by a timer."""
    assert DRAIN_GAP * 1.5 < FRAME
    clock = SteppedClock()
    engine = FakeEngine([ns_view("a")])
    app = LanewatchApp(engine, root_paths=["/roots/r1"], clock=lambda: NOW, monotonic=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"), what="first batch")
        feed = app.feed
        timed: list[str] = []
        timed_drain = feed._timed_drain

        def spy() -> None:
            timed.append("timer")
            timed_drain()

        feed._timed_drain = spy  # type: ignore[method-assign]
        for name in ("b", "c", "d"):
            clock.now += DRAIN_GAP * 1.5  # the last drain was at the previous `now`
            view = ns_view(name)
            engine.push(Changes(upserts={view.key: view}, at=NOW))
            await until(
                pilot,
                lambda key=view.key: app.main.table().has_row(key),
                what=f"lane {name} in the table",
            )
        assert timed == []


async def test_a_batch_inside_the_gap_waits_for_it_and_is_drained() -> None:
    """The bound on the UI's work: a batch within `DRAIN_GAP` of the last drain is drained by
    the timer at the gap's end, not at once, and not never."""
    clock = SteppedClock()
    engine = FakeEngine([ns_view("a")])
    app = LanewatchApp(engine, root_paths=["/roots/r1"], clock=lambda: NOW, monotonic=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"), what="first batch")
        feed = app.feed
        timed: list[str] = []
        timed_drain = feed._timed_drain

        def spy() -> None:
            timed.append("timer")
            timed_drain()

        feed._timed_drain = spy  # type: ignore[method-assign]
        clock.now += DRAIN_GAP / 2
        view = ns_view("b")
        engine.push(Changes(upserts={view.key: view}, at=NOW))
        await until(pilot, lambda: app.main.table().has_row(view.key), what="lane b")
        assert timed == ["timer"]
