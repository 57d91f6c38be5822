"""Our threads step back while writers flood us, and come back when it is calm.

Kernel attribution costs us a fraction of a millisecond of CPU per event. At the rates people
work at (a thousand writes a second) that is small and we want it fast; under a flood (a
writer going flat out) every bit of CPU we take is taken from the writers we watch. So the
attribution threads run at the process's own priority while fewer than `high` events a second
arrive, and at nice 19 once more do, until the rate falls below `low`. A writer is never
slowed for our sake: we fall behind instead (the kernel queue holds 16,384 events; past that we
say so and rescan).

Coming back from nice 19 needs CAP_SYS_NICE (root has it); without it the threads stay at
their base niceness and never step back (`adaptive` is False), rather than stay slow for good.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from lanewatch.linux.proc import parse_status, read_file

log = logging.getLogger(__name__)

FLOOD_NICE = 19
CAP_SYS_NICE = 23
HIGH = 3000.0  # events a second: a flood
LOW = 1500.0  # events a second: calm again
WINDOW = 0.5  # seconds over which the rate is counted


def _can_come_back(base: int) -> bool:
    """Whether a thread at nice 19 may return to `base`: CAP_SYS_NICE, or RLIMIT_NICE."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
        if soft == resource.RLIM_INFINITY or 20 - soft <= base:
            return True
    except (ImportError, AttributeError, OSError, ValueError):
        pass
    try:
        status = read_file("self", "status")
    except OSError:
        return False
    cap = parse_status(status).cap_eff if status is not None else None
    return cap is not None and bool(cap & (1 << CAP_SYS_NICE))


def _set(tid: int, nice: int) -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:
        return False
    return True


class Priority:
    def __init__(self, *, high: float = HIGH, low: float = LOW) -> None:
        self.high, self.low = high, low
        self.base = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0
        self.flooded = False
        self.adaptive = hasattr(os, "setpriority") and _can_come_back(self.base)
        self._threads: dict[int, int] = {}  # tid -> its calm niceness
        self._lock = threading.Lock()
        self._count = 0
        self._since = time.monotonic()

    def join(self, extra: int = 0) -> None:
        """The calling thread takes part, `extra` steps nicer than the process when calm."""
        if not hasattr(os, "setpriority"):
            return
        tid = threading.get_native_id()
        calm = min(FLOOD_NICE, self.base + extra)
        with self._lock:
            if self.adaptive:
                self._threads[tid] = calm
            _set(tid, FLOOD_NICE if self.flooded else calm)

    def leave(self) -> None:
        with self._lock:
            self._threads.pop(threading.get_native_id(), None)

    def count(self, events: int) -> None:
        """The reader saw `events` more; step back or come back when the rate says so."""
        if not self.adaptive:
            return
        self._count += events
        now = time.monotonic()
        elapsed = now - self._since
        if elapsed < WINDOW:
            return
        rate = self._count / elapsed
        self._count, self._since = 0, now
        flooded = rate >= self.high if not self.flooded else rate >= self.low
        if flooded != self.flooded:
            with self._lock:
                self.flooded = flooded
                for tid, calm in self._threads.items():
                    _set(tid, FLOOD_NICE if flooded else calm)
            what = "steps back" if flooded else "resumes"
            log.debug("attribution %s (%.0f events/s)", what, rate)
