"""`call_after`: a one-shot timer that cannot be skipped.

Textual's `set_timer` runs a one-shot `Timer` with `skip=True`: when its task first runs it
reads the clock twice, and if the deadline passed in between (the delay is a few microseconds,
or the UI thread lost the interpreter lock or the CPU for longer than the delay) it skips the
"missed" tick, and a one-shot has nothing after it: the callback is never called, and nothing
says so (textual 8.2: `Timer._run`, `if self._skip and next_timer < now: ... continue`). A
flag "a drain is scheduled" set next to such a timer stays set forever. The event loop's own
`call_later` always runs its callback, however late; the callback goes through the pump's
`call_next`, as `set_timer` does, so it runs between messages and its errors are the app's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol


class Pump(Protocol):
    """What `call_after` needs of a Textual `MessagePump` (an app, a screen, a widget)."""

    def call_next(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None: ...


def call_after(pump: Pump, delay: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
    """Call `callback` on `pump`'s loop after `delay` seconds (at once if not positive);
    `.cancel()` the handle to drop it. Call from the UI thread."""
    loop = asyncio.get_running_loop()
    return loop.call_later(max(0.0, delay), pump.call_next, callback)
