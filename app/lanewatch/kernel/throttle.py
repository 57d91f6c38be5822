"""Kernel attribution steps back while writers flood us, and comes back when it is calm.

Kernel attribution costs us a fraction of a millisecond of CPU per event. At the rates people
work at (a thousand writes a second) that is small and we want it fast; under a flood (a
writer going flat out) every bit of CPU we take is taken from the writers we watch. So while
`high` events a second or more arrive (until the rate falls below `low`), the reader rests after
each batch as long as the batch took it, up to `REST_MAX`: we take about half the CPU we would,
less on a busy machine (a batch that waited for a CPU took longer, and so does its rest), and
fall behind instead (the kernel queue holds 16,384 events; past that we say so and rescan). The
threads behind the reader (attribution, keeper) get less to do in step.

Not by lowering our threads' priority (nice 19, as before): a thread the kernel keeps waiting
while it holds Python's GIL stalls every thread of the process, the engine's own (pictures,
heartbeats, probes) included. On 2 busy cores (load 20 to 30) a nice-19 thread holding the GIL
stalled the others for 2.6 s (p99); the dashboard said "the engine process has sent nothing for
6s" while another process flooded /tmp, and showed live lanes as hung (docs/flakes.md). A rest
holds no GIL, and needs no privilege to come back from.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)

HIGH = 3000.0  # events a second: a flood
LOW = 1500.0  # events a second: calm again
WINDOW = 0.5  # seconds over which the rate is counted
REST_MAX = 0.05  # seconds of rest after one batch, at most


class Pace:
    """The reader's pace: `count` each batch's events, `rest` after the batch."""

    def __init__(self, *, high: float = HIGH, low: float = LOW) -> None:
        self.high, self.low = high, low
        self.flooded = False
        self.rested = 0.0  # seconds rested in all, for figures and tests
        self._count = 0
        self._since = time.monotonic()
        self._wake = threading.Event()

    def count(self, events: int) -> None:
        """The reader saw `events` more; step back or come back when the rate says so."""
        self._count += events
        now = time.monotonic()
        elapsed = now - self._since
        if elapsed < WINDOW:
            return
        rate = self._count / elapsed
        self._count, self._since = 0, now
        flooded = rate >= self.high if not self.flooded else rate >= self.low
        if flooded != self.flooded:
            self.flooded = flooded
            what = "steps back" if flooded else "resumes"
            log.debug("attribution %s (%.0f events/s)", what, rate)

    def rest(self, busy: float) -> None:
        """After a batch that took `busy` seconds: while flooded, rest as long (at most
        REST_MAX); `stop` ends a rest at once."""
        if not self.flooded or busy <= 0:
            return
        pause = min(busy, REST_MAX)
        self.rested += pause
        self._wake.wait(pause)

    def stop(self) -> None:
        self._wake.set()
