"""When the prober's quiet rounds read anything: the listening sockets, the lanes' footprints
and the full /proc scan each run when something changed, with a slow pass as a safety net.

What "changed" means, for each:

- **Sockets** (`sockets_due`): a lane that starts listening is almost always a process that
  started moments ago (a server, a test's worker). A pid handed out (`ns_last_pid` moved, one
  read of an integer) opens a window of `START_WINDOW` seconds in which the sockets are read
  every `SOCKETS_EVERY`; outside any window they are read every `SOCKETS_SLOW`. So a port a
  lane opens within `START_WINDOW` of a process start anywhere on the machine is seen within
  about `SOCKETS_EVERY`, any other within `SOCKETS_SLOW` (a process that ran quietly for
  longer, then bound a port). A probe due for any reason reads them too.
- **Footprints** (`metered`): a lane whose processes used no CPU at their last reading
  (`Footprint.cpu` 0) is read again only at the quiet check (every `QUIET_EVERY` rounds), or at
  a probe; a lane that used some is read every round. Memory grows only by running, and a
  process that starts running again is read within the quiet check's period.
- **The full scan** (`full_due`): every `FULL_SCAN_EVERY` seconds if a pid was handed out or a
  probe was due for a cause (a write, a stamp, a death, a socket, a poke) since the last full
  scan; otherwise every `FULL_SCAN_QUIET`. Between two full scans with neither, the only
  processes that can hold something new are ones already running that made no write in the
  roots and started nothing: seen within `FULL_SCAN_QUIET` instead of `FULL_SCAN_EVERY`.

Where `ns_last_pid` cannot be read, every look counts as a start (today's pace).

How often the prober looks (`look_in`): every `SOCKETS_EVERY` seconds inside a window; outside
one, with the process connector waking it at the next birth (root: `ProcLives.on_birth`), not
before the slow pass is due. Without the connector it looks every `SOCKETS_EVERY` seconds, as
only a look at `ns_last_pid` can tell a start.

With the process connector (root: `processes/proclives.py`, given as `births`), a pid handed
out counts as a start only if a process born since the last look still runs: on a real
machine pids move all the time (cron, shells, other users' tests), mostly for processes that
are gone a moment later, which can listen on nothing and hold nothing now. The full scan's
turn still counts every pid handed out (an old process that started something may have
opened something itself).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from lanewatch.linux.proc import LastPid
from lanewatch.model.views import Footprint

SOCKETS_EVERY = 0.5  # seconds between two reads of the listening sockets inside a window
START_WINDOW = 10.0  # seconds after a process start during which they are read that often
SOCKETS_SLOW = 10.0  # seconds between two reads outside any window
FULL_SCAN_EVERY = 60.0  # seconds between two full /proc scans when something changed
FULL_SCAN_QUIET = 300.0  # ... and when nothing did


class QuietPace:
    """The prober thread's own (not thread-safe); times are `time.monotonic()` seconds."""

    def __init__(self) -> None:
        # ns_last_pid, read twice a second while lanes exist: one descriptor kept open.
        self.last_pid = LastPid()
        self._seen_pid: int | None = None  # ns_last_pid at the last look
        self._started = float("-inf")  # when a pid was last seen handed out
        self._sockets_at = float("-inf")
        self._full_at = float("-inf")
        self._full_pid: int | None = None  # ns_last_pid at the last full scan
        self._caused = True  # a probe was due for a cause since the last full scan
        self._busy: frozenset[str] = frozenset()  # lanes that used CPU at their last reading
        self._looked = float("-inf")  # when ns_last_pid was last read
        # Whether a process born since a moment still runs (None: cannot tell); the prober
        # sets it where the process connector can be used (`ProcLives.born_alive_since`).
        self.births: Callable[[float], bool | None] | None = None

    def look(self, now: float) -> int | None:
        """Read ns_last_pid: a pid handed out since the last look opens a window (with
        `births`: only if a process born since still runs)."""
        pid = self.last_pid.read()
        if pid is None or pid != self._seen_pid:
            self._seen_pid = pid
            if pid is None or self.births is None or self.births(self._looked) is not False:
                self._started = now
        self._looked = now
        return pid

    def sockets_due(self, now: float) -> bool:
        """Whether to read the listening sockets now (and note that they were)."""
        self.look(now)
        if now - self._started < START_WINDOW or now >= self._slow_at():
            self._sockets_at = now
            return True
        return False

    def look_in(self, now: float) -> float:
        """Seconds until the sockets' next look is due, for a waiter that a birth wakes: the
        window's pace inside a start's window, else until the slow pass."""
        if now - self._started < START_WINDOW:
            return SOCKETS_EVERY
        return max(0.0, self._slow_at() - now)

    def _slow_at(self) -> float:
        """When the slow pass is due (a round's scheduling slack early)."""
        return self._sockets_at + SOCKETS_SLOW - 0.05

    def probed(self, now: float, *, full: bool, caused: bool) -> None:
        """A probe ran (its sockets read with it); `caused`: due for something that changed,
        not for the clock alone."""
        self._sockets_at = now
        if full:
            self._full_at = now
            self._full_pid = self.last_pid.read()
            self._caused = False
        elif caused:
            self._caused = True

    def full_due(self, now: float) -> bool:
        if now - self._full_at >= FULL_SCAN_QUIET:
            return True
        if now - self._full_at < FULL_SCAN_EVERY:
            return False
        if self._caused:
            return True
        pid = self.last_pid.read()
        return pid is None or pid != self._full_pid

    def full_in(self, now: float) -> float:
        """Seconds until the next full scan may be due (for a caller's wait)."""
        return max(0.0, self._full_at + FULL_SCAN_EVERY - now)

    def read(self, footprints: Mapping[str, Footprint], *, every: bool) -> None:
        """Footprints were read (`every`: of every running lane, else of the busy ones)."""
        busy = {k for k, f in footprints.items() if f.cpu is None or f.cpu > 0}
        if every:
            self._busy = frozenset(busy)
        else:
            self._busy = frozenset(busy | (self._busy - footprints.keys()))

    def metered(self, keys: Collection[str]) -> frozenset[str]:
        """Of `keys`, the lanes to read between two quiet checks: those busy at their last
        reading."""
        return self._busy.intersection(keys)
