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


def spy_on_arrivals(app: LanewatchApp, key_of: list[str]) -> list[tuple[bool, bool]]:
    """For each wake-up by the change buffer: (the batch's row is in the table once the wake-up
    is handled, a timed drain is armed). What happens after (a timer, or the watchdog on a
    starved machine) does not matter here: only whether the drain came at once."""
    feed = app.feed
    pending = feed.pending
    seen: list[tuple[bool, bool]] = []

    def spy() -> None:
        pending()
        seen.append((app.main.table().has_row(key_of[-1]), feed._drain_timer is not None))

    feed.pending = spy  # type: ignore[method-assign]
    return seen


async def test_a_batch_inside_the_frame_but_past_the_gap_is_drained_on_arrival() -> None:
    """Before: any batch within a frame (1/60 s) of the last drain waited for a timer to the
    frame's end; here each batch comes 1.5 gaps (well inside a frame) after the last drain and
    each is in the table as soon as its wake-up is handled."""
    assert DRAIN_GAP * 1.5 < FRAME
    clock = SteppedClock()
    engine = FakeEngine([ns_view("a")])
    app = LanewatchApp(engine, root_paths=["/roots/r1"], clock=lambda: NOW, monotonic=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"), what="first batch")
        keys: list[str] = []
        seen = spy_on_arrivals(app, keys)
        for name in ("b", "c", "d"):
            clock.now += DRAIN_GAP * 1.5  # the last drain was at the previous `now`
            view = ns_view(name)
            keys.append(view.key)
            engine.push(Changes(upserts={view.key: view}, at=NOW))
            arrived = len(keys)
            await until(pilot, lambda n=arrived: len(seen) == n, what=f"lane {name} arrived")
            await until(pilot, lambda key=view.key: app.main.table().has_row(key))
        assert seen == [(True, False)] * 3


async def test_a_batch_inside_the_gap_waits_for_it_and_is_drained() -> None:
    """The bound on the UI's work: a batch within `DRAIN_GAP` of the last drain is not drained
    at once but by a timer armed for the gap's end, and it does reach the table."""
    clock = SteppedClock()
    engine = FakeEngine([ns_view("a")])
    app = LanewatchApp(engine, root_paths=["/roots/r1"], clock=lambda: NOW, monotonic=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"), what="first batch")
        view = ns_view("b")
        seen = spy_on_arrivals(app, [view.key])
        clock.now += DRAIN_GAP / 2
        engine.push(Changes(upserts={view.key: view}, at=NOW))
        await until(pilot, lambda: app.main.table().has_row(view.key), what="lane b")
        assert seen == [(False, True)]
