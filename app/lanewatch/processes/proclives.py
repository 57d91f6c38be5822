"""Every process life on the machine, from the kernel's process connector: who held a pid when.

A fanotify event names its writer by pid. When the writer was reaped before we read the event,
`/proc/PID` is gone and the pid may be another's. `ProcLives` listens to the process connector
(`linux/proc_events.py`): the kernel sends a message at every fork (before the child runs) and
every exit (before the process can be reaped), so once we have drained the socket, every life
that began or ended before that moment is in our table. `only_life(pid, lo, hi)` answers "which
process held `pid` at some moment between `lo` and `hi`?" with the one life, or None when there
were two, or when the record is not whole for that span (we started later, or the kernel dropped
messages: ENOBUFS). No pid-distance window: forks elsewhere, however many, change nothing but
the table's size.

The table keeps the lives of the last `KEEP` seconds (and at most `MAX_LIVES`; past that the
oldest go and the record is whole only from then on). Where the connector cannot be used (no
CAP_NET_ADMIN, not the initial network namespace, pids of another pid namespace than ours),
`available` is False with the reason and callers fall back (`processes/pidclock.py`).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from lanewatch.linux import proc_events
from lanewatch.processes.pidclock import CLK_TCK

log = logging.getLogger(__name__)

KEEP = 120.0  # seconds of lives kept
MAX_LIVES = 200_000  # lives kept at most (a storm of 1,600 forks a second for KEEP seconds)
SELF_TEST = 2.0  # seconds to see our own thread's fork come back with the same pid
GATHER = 0.02  # seconds the listener lets messages gather once one is there


@dataclass(slots=True)
class Life:
    pid: int
    parent: int  # the parent's tgid at the fork
    born: float  # CLOCK_MONOTONIC seconds
    ended: float | None = None

    def start_ticks(self, offset: float) -> int:
        """The start time as `/proc/PID/stat` gives it (boottime ticks; may be one off)."""
        return int((self.born + offset) * CLK_TCK)


def monotonic_to_boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)


class ProcLives:
    """The table and its listener thread. Thread-safe; `sync` drains the socket at once."""

    def __init__(self) -> None:
        self.available = False
        self.reason = "not started"
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._lives: dict[int, list[Life]] = {}
        self._order: deque[Life] = deque()  # by birth, for expiry
        self._whole_from = float("inf")  # monotonic: the record is whole from here on
        self._losses: list[tuple[float, float]] = []  # spans where messages were dropped
        self._last_ok = 0.0
        self._stop = threading.Event()
        self._wake = -1  # an eventfd `close` writes: the listener sleeps until a message or it
        self._thread: threading.Thread | None = None
        self.stats = {"forks": 0, "exits": 0, "losses": 0}
        self._buf = bytearray(65536)  # the listener's receive buffer (under `_lock`)
        # Called once at the next birth taken in (or loss of messages), then disarmed: a
        # waiter that sleeps until a process starts arms it again (`on_birth`).
        self._on_birth: Callable[[], None] | None = None
        self._lost = False  # messages dropped since the last `_take` (under `_lock`)

    # -- life ------------------------------------------------------------------------------
    def start(self) -> bool:
        """Subscribe and check our pids are the kernel's; False (and `reason`) if not usable."""
        for filtered in (True, False):
            try:
                self._sock = proc_events.open_socket(filtered=filtered)
            except OSError as exc:
                self.reason = f"the process connector is not available: {exc.strerror or exc}"
                return False
            self._whole_from = self._last_ok = time.monotonic()
            if self._self_test():
                break
            sock, self._sock = self._sock, None
            sock.close()
        else:
            return False
        self._stop.clear()
        self.available, self.reason = True, ""
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._thread = threading.Thread(target=self._run, name="lanewatch-proclives", daemon=True)
        self._thread.start()
        return True

    def _self_test(self) -> bool:
        """A thread of ours is a fork the connector reports: with our pid numbers only if we
        live in the pid namespace the kernel reports in."""
        tid: list[int] = []
        t = threading.Thread(target=lambda: tid.append(threading.get_native_id()))
        t.start()
        t.join()
        deadline = time.monotonic() + SELF_TEST
        while time.monotonic() < deadline:
            batch = self._drain(wait=0.05)
            with self._lock:
                self._take(batch)  # the record is whole from the subscription on
            for data in batch:
                fork = proc_events.fork_of(data)  # a thread's "parent" is our own parent
                if fork is not None and fork[1:] == (tid[0], os.getpid()):
                    return True
        self.reason = "the process connector reports pids of another pid namespace than ours"
        return False

    def close(self) -> None:
        self._stop.set()
        if self._wake >= 0:
            os.eventfd_write(self._wake, 1)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
        wake, self._wake = self._wake, -1
        if wake >= 0:
            os.close(wake)
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        self.available = False

    def on_birth(self, call: Callable[[], None] | None) -> None:
        """Call `call` once, from whichever thread takes it in, when a process is next born
        (or messages are lost: a birth may be among them); None disarms. It must be quick and
        must not call back into this table (it runs under its lock)."""
        with self._lock:
            self._on_birth = call

    # -- reading -----------------------------------------------------------------------------
    def _drain(self, wait: float = 0.0) -> list[bytearray]:
        sock = self._sock
        if sock is None:
            return []
        if wait and not select.select([sock], [], [], wait)[0]:
            return []
        out = []
        buf = self._buf  # one buffer: a fresh 64 KiB for each small message cost more
        while True:
            try:
                out.append(buf[: sock.recv_into(buf)])
            except BlockingIOError:
                return out
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # the kernel dropped messages: say where
                    now = time.monotonic()
                    self._losses.append((self._last_ok, now))
                    self.stats["losses"] += 1
                    self._lost = True
                    continue
                if exc.errno == errno.EBADF:
                    return out
                raise

    def sync(self) -> None:
        """Take in everything the kernel sent up to now."""
        with self._lock:
            self._take(self._drain())

    def _run(self) -> None:
        """Sleeps until the kernel sends (a fork or an exit anywhere) or `close` wakes it: a
        machine where no process starts or ends costs this thread nothing."""
        wake = self._wake
        while not self._stop.is_set():
            sock = self._sock
            if sock is None:
                return
            try:
                if wake in select.select([sock, wake], [], [])[0]:
                    return  # closing
                # Let messages gather: one wake for many forks, not one each (the socket
                # holds about 80,000; `sync` takes in whatever waits when it is needed).
                self._stop.wait(GATHER)
                # Received and taken under one lock: `sync` never finds the socket drained
                # while a message it must count waits here.
                with self._lock:
                    self._take(self._drain())
            except (OSError, ValueError) as exc:
                log.warning("process connector: %s", exc)
                self.available, self.reason = False, f"the process connector failed: {exc}"
                return

    def _take(self, batch: list[bytearray]) -> None:
        table, order, stats = self._lives, self._order, self.stats
        born = stats["forks"]
        for data in batch:
            for fork, tgid, parent, ns in proc_events.lives(data):
                t = ns / 1e9
                if fork:
                    life = Life(tgid, parent, t)
                    table.setdefault(tgid, []).append(life)
                    order.append(life)
                    stats["forks"] += 1
                else:
                    lives = table.get(tgid)
                    if lives and lives[-1].ended is None:
                        lives[-1].ended = t
                    stats["exits"] += 1
        self._last_ok = time.monotonic()
        self._expire(self._last_ok)
        if (self._lost or stats["forks"] != born) and self._on_birth is not None:
            call, self._on_birth = self._on_birth, None
            call()
        self._lost = False

    def _expire(self, now: float) -> None:
        while self._order and (len(self._order) > MAX_LIVES or now - self._order[0].born > KEEP):
            old = self._order.popleft()
            self._whole_from = max(self._whole_from, old.born)
            lives = self._lives.get(old.pid)
            if lives:
                lives.remove(old)
                if not lives:
                    del self._lives[old.pid]
        self._losses = [(a, b) for a, b in self._losses if now - b <= KEEP]

    # -- asking ------------------------------------------------------------------------------
    def whole(self, lo: float, hi: float) -> bool:
        """Whether every fork and exit between `lo` and `hi` (monotonic) is in the table."""
        with self._lock:
            if not self.available or lo < self._whole_from:
                return False
            return not any(a <= hi and b >= lo for a, b in self._losses)

    def only_life(self, pid: int, lo: float, hi: float) -> tuple[bool, Life | None]:
        """(whole, life): whether the record is whole for [lo, hi] (monotonic), taking in what
        the kernel sent first, and then the one life of `pid` that overlapped that span (None:
        none or several did). A pid that had no fork since we listened is held by a process
        older than that: returned as a life with `born` = -inf (its start ticks from /proc)."""
        self.sync()
        if not self.whole(lo, hi):
            return False, None
        with self._lock:
            lives = list(self._lives.get(pid, ()))
        overlapping = [x for x in lives if x.born <= hi and (x.ended is None or x.ended >= lo)]
        if len(overlapping) == 1:
            return True, overlapping[0]
        if not lives:
            return True, Life(pid, 0, float("-inf"))
        return True, None  # several held it, or it was held only outside the span

    def born_alive_since(self, t: float) -> bool | None:
        """Whether a process born at or after `t` (monotonic) still runs, taking in what the
        kernel sent first; None when the record is not whole since `t`. False says that every
        process that exists now existed at `t` (the prober's quiet rounds: nobody can have
        joined a lane, and no pid was reused, although pids were handed out)."""
        self.sync()
        if not self.whole(t, time.monotonic()):
            return None
        with self._lock:
            for life in reversed(self._order):  # by birth: the newest first
                if life.born < t:
                    return False
                if life.ended is None:
                    return True
        return False

    def lives_of(self, pid: int) -> list[Life]:
        with self._lock:
            return list(self._lives.get(pid, ()))

    @property
    def whole_from(self) -> float:
        return self._whole_from
