"""A screen's paint timer paced from its last frame: a change paints at once when a frame has
passed since the last paint, else one frame after it.

Textual paints a screen from a timer it pauses after each paint and resumes when a widget is
dirty (`Screen._update_timer`: `set_interval(1 / MAX_FPS, ..., name="screen_update",
pause=True)`). `Timer._run` keeps a grid of ticks from the timer's start. A tick that comes
late, which is how an idle screen's next change always arrives (the timer was paused past a
grid point and resumed after it), makes the loop skip ahead with
`count = int((now - start) / interval + 1)`; its next tick is then the grid point *after* the
next one (textual 8.2). So the frame after a late one waits between one and two intervals
(17-33 ms at 60 frames a second) instead of at most one. Under the benchmark's write load, a row
on screen changes a few times a second, and that wait was the tail of write -> screen
(docs/perf-notes/frame-timer.md).

`FrameTimer` ticks at `max(now, last + interval)`: never more often than Textual's timer, and
never later than a frame after the last paint. `paced_interval` makes one where a screen's
`set_interval` is asked for its paint timer; every other interval is Textual's own.
"""

from __future__ import annotations

import asyncio
import math
import time

from textual.message_pump import MessagePump
from textual.timer import EventTargetGone, Timer, TimerCallback

PAINT_TIMER = "screen_update"  # the name Textual gives a screen's paint timer


def next_frame(last: float, now: float, interval: float) -> float:
    """When the next frame may be painted: now, unless the last one was less than an
    interval ago."""
    return max(now, last + interval)


class FrameTimer(Timer):
    """A repeating timer whose next tick is an interval after the last one (or at once if that
    has passed), never on a grid. Paused and resumed as Textual's; `repeat` and `reset` are not
    used by a paint timer and not kept."""

    async def _run(self) -> None:
        interval = self._interval
        last = -math.inf
        count = 0
        while True:
            await self._active.wait()
            now = time.monotonic()
            due = next_frame(last, now, interval)
            wait = due - now
            if wait > 0:
                await asyncio.sleep(wait)
                await self._active.wait()
            last = time.monotonic()
            count += 1
            try:
                await self._tick(next_timer=due, count=count)
            except EventTargetGone:
                break


def paced_interval(
    pump: MessagePump,
    interval: float,
    callback: TimerCallback | None,
    *,
    name: str | None,
    pause: bool,
) -> Timer | None:
    """For `MessagePump.set_interval`: the paint timer, as a `FrameTimer` started and owned by
    `pump` as Textual's would be; None for any other interval (Textual makes it)."""
    if name != PAINT_TIMER:
        return None
    timer = FrameTimer(pump, interval, name=name, callback=callback, pause=pause)
    timer._start()
    pump._timers.add(timer)
    return timer
