"""Whether a pid can have changed hands: the kernel's pid allocator as a clock.

A fanotify event names the writer by pid. When the writer has exited before we read the event,
`/proc/PID` is gone, or may already belong to another process. Linux hands out pids in
increasing order (`/proc/sys/kernel/ns_last_pid` is the last one) and only comes back to a
number after wrapping at `pid_max` (to 300). So if, since some moment, the allocator has not
reached pid P again, no process can have been given P since then. `PidClock` samples the
allocator (`mark`, rate-limited, on the fanotify reader before each read and on the
attribution thread every second) and answers one question, `proves`: is a known process
(pid, start ticks) the only one that can have held its pid between a window's start and now?

What it assumes, and says so in docs/fanotify.md: fewer than one whole pid cycle of
allocations (threads count) between two samples; with samples at least once a second that
takes 30,000+ forks a second at the smallest `pid_max`.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections import deque
from dataclasses import dataclass

from lanewatch.linux.proc import PID_MAX, LastPid, exists, read_int

RESERVED_PIDS = 300  # the allocator wraps to here, not to 1
LOOKAHEAD = 32  # pids after the last one whose occupancy a mark records
MIN_INTERVAL = 0.025  # seconds between two marks; a mark asked for sooner is the last one
KEEP_DENSE = 4096  # recent marks
KEEP_SPARSE = 7200  # one mark a second, for processes born long ago
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def boottime() -> float:
    """Seconds since boot, the clock of `/proc/PID/stat`'s start time."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclass(frozen=True, slots=True)
class Mark:
    """The allocator at one moment: `last` pid handed out by `time`, `total` allocations
    counted since the clock started, and which of the LOOKAHEAD pids after the allocator were
    free when looked at, shortly before `time` (None: not looked), `slack` allocations before
    `last` was read."""

    time: float  # boottime
    last: int
    total: int
    free: frozenset[int] | None = None
    slack: int = 0


class PidClock:
    """Samples of the pid allocator; thread-safe. `available` is False where it cannot be read
    (then `proves` is always False: a gone pid stays unknown)."""

    def __init__(self) -> None:
        self.pid_max = read_int(PID_MAX) or 0
        self._last_pid = LastPid()
        last = self._last_pid.read()
        self.available = last is not None and self.pid_max > RESERVED_PIDS
        self.cycle = max(1, self.pid_max - RESERVED_PIDS)
        self._lock = threading.Lock()
        self._dense: deque[Mark] = deque(maxlen=KEEP_DENSE)
        self._sparse: deque[Mark] = deque(maxlen=KEEP_SPARSE)
        self._last = last or 0
        self._total = 0
        if self.available:
            self.mark()

    def sample(self, *, lookahead: bool = False) -> Mark | None:
        """A fresh mark (with the occupancy of the next pids if `lookahead`).

        Conservative by construction: `last` is read just before the mark's time, so the
        allocator had reached it by then, and allocations are counted from no later than then;
        a pid is reported free if it was free when looked at, before `last` was read (`slack`
        counts what was allocated meanwhile).
        """
        if not self.available:
            return None
        with self._lock:
            looked: list[int] = []
            first = 0
            if lookahead:
                read = self._last_pid.read()
                if read is None:
                    return None
                first = read
                ahead = [self._wrap(first + i) for i in range(1, LOOKAHEAD + 1)]
                # an os.access: no exception raised per free pid, unlike os.path.exists
                looked = [p for p in ahead if not exists(p)]
            last = self._last_pid.read()
            t = boottime()
            if last is None:
                return None
            free = frozenset(looked) if lookahead else None
            slack = self._dist_plain(first, last) if lookahead else 0
            self._total += self._dist_plain(self._last, last)
            self._last = last
            m = Mark(t, last, self._total, free, slack)
            self._dense.append(m)
            if not self._sparse or m.time - self._sparse[-1].time >= 1.0:
                self._sparse.append(m)
            return m

    def close(self) -> None:
        """Release the descriptor kept open; the clock keeps working, a little slower."""
        with self._lock:
            self._last_pid.close()

    def mark(self) -> Mark | None:
        """For the fanotify reader before each read: a mark with lookahead, at most every
        MIN_INTERVAL (the previous one otherwise; an older mark is still a valid lower bound)."""
        with self._lock:
            recent = self._dense[-1] if self._dense else None
        fresh = recent is not None and boottime() - recent.time < MIN_INTERVAL
        if recent is not None and recent.free is not None and fresh:
            return recent
        return self.sample(lookahead=True)

    def _pos(self, pid: int) -> int:
        return max(0, pid - RESERVED_PIDS)

    def _wrap(self, pid: int) -> int:
        return pid if pid < self.pid_max else RESERVED_PIDS + (pid - self.pid_max)

    def _dist_plain(self, a: int, b: int) -> int:
        """Allocations from last pid `a` to last pid `b` (fewer than a cycle, we assume)."""
        return (self._pos(b) - self._pos(a)) % self.cycle

    def _dist(self, last: int, pid: int) -> int:
        """Allocations after `last` until the allocator reaches `pid` (a full cycle if equal)."""
        return self._dist_plain(last, pid) or self.cycle

    def _before(self, t: float) -> Mark | None:
        """The latest mark taken at or before boottime `t`."""
        with self._lock:
            marks = self._dense if self._dense and self._dense[0].time <= t else self._sparse
            i = bisect.bisect_right(marks, t, key=lambda m: m.time)
            return marks[i - 1] if i > 0 else None

    def proves(
        self,
        pid: int,
        start_ticks: int,
        window: Mark | None,
        *,
        seen_at: float | None = None,
        now: Mark | None = None,
    ) -> bool:
        """True when the process (`pid`, `start_ticks`) is the only one that can have held
        `pid` from `window` (a mark taken before the write) until `now` (default: a fresh
        sample). `seen_at`: a boottime at which we saw that process alive with that pid.
        """
        if not self.available or window is None:
            return False
        now = now or self.sample()
        if now is None or now.total - window.total >= self.cycle:
            return False
        born_lo = start_ticks / CLK_TCK  # the start time is truncated to a tick
        born_hi = (start_ticks + 1) / CLK_TCK
        # 1. Born-anchored: no process was given the pid after this one was.
        before = self._before(born_lo)
        if before is not None and now.total - before.total < self.cycle:
            once = now.total - window.total + window.slack < self.cycle
            if window.free is not None and pid in window.free and once:
                # Free just before the window opened, yet it wrote after: the writer was given
                # the pid since, and nobody was given it after this process: it is the writer.
                return True
            if born_hi <= window.time:
                return True  # it held the pid from before the window and nobody after it
            if window.total - before.total >= self._dist(before.last, pid):
                # The same, told by allocation order rather than by the clock (the start time
                # is only known to a tick): the allocator had handed out this pid, to this
                # process, before the window's mark.
                return True
        # 2. Sighting-anchored: seen holding the pid, and the allocator has not reached the pid
        #    since a mark at or before both the sighting and the window opened: one holder.
        if seen_at is not None:
            anchor = self._before(min(seen_at, window.time))
            if anchor is not None and now.total - anchor.total < self._dist(anchor.last, pid):
                return True
        return False
