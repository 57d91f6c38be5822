"""A clock for deadlines on a shared machine: the time in which the processes a test waits on
could run. Each interval between two `tick`s counts its wall time less the longest time any of
their threads spent waiting for a CPU in it (the kernel's run-queue wait, `schedstat`).

On a quiet machine it keeps pace with the wall clock. On one that gives those processes no CPU
(load average 30 on 2 cores) it slows down or stands still: a picture that is behind because its
engine got 10 ms of CPU a second is not judged as if the engine had had the time. A process
that sleeps (a deadlock, a lost wake-up, a stopped process) waits for no CPU: the clock runs on,
and such a process misses its deadline as it would on the wall clock. Where the kernel keeps no
schedstat the clock is the wall clock.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable, Iterable

Thread = tuple[int, int | None]  # (pid, tid), tid None: every thread of the process


def run_queue_waits(pid: int) -> dict[int, int]:
    """Each thread of `pid` with its run-queue wait so far (ns); {} if gone or not kept."""
    waits: dict[int, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return waits
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                waits[int(tid)] = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended since the listing
    return waits


class RunClock:
    """Seconds in which no watched thread waited for a CPU, since the clock was made."""

    def __init__(self, watched: Callable[[], Iterable[Thread]]) -> None:
        """`watched`: the threads to watch now (asked at each tick: a process may restart)."""
        self._watched = watched
        self._last: dict[tuple[int, int], int] = {}
        self._mono = time.monotonic()
        self.now = 0.0
        self.waited = 0.0  # wall seconds not counted
        self._history: list[tuple[float, float]] = [(self._mono, 0.0)]
        self.tick()

    def tick(self) -> float:
        mono = time.monotonic()
        seen: dict[tuple[int, int], int] = {}
        longest = 0
        for pid, only in self._watched():
            for tid, wait in run_queue_waits(pid).items():
                if only is not None and tid != only:
                    continue
                seen[(pid, tid)] = wait
                before = self._last.get((pid, tid))
                if before is not None:  # a thread new since the last tick counts from now
                    longest = max(longest, wait - before)
        self._last = seen
        elapsed = mono - self._mono
        waited = min(elapsed, longest / 1e9)
        self.now += elapsed - waited
        self.waited += waited
        self._mono = mono
        self._history.append((mono, self.now))
        return self.now

    def at(self, mono: float) -> float:
        """The clock at monotonic time `mono`, as of the last tick at or before it (early:
        the time since then is counted in full, never less)."""
        i = bisect.bisect_right(self._history, (mono, float("inf"))) - 1
        return self._history[max(i, 0)][1]

    def since(self, mono: float) -> float:
        """Clock seconds from monotonic time `mono` to the last tick."""
        return self.now - self.at(mono)
