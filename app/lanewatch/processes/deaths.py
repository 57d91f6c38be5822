"""Deaths of watched processes, learned without polling: a pidfd per process in one `poll`
set is readable once that process exits. Used by the prober to sleep while every owner runs,
and (with the process connector) until a process starts."""

from __future__ import annotations

import contextlib
import math
import os
import select


class DeathWatch:
    """A pidfd per watched owner in one `poll` set: readable when that process exits, so a
    death is learned at once without reading /proc. Plus an eventfd to wake the wait, and one
    that only ends it early (`born`: a process started, look again)."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._fds: dict[int, int] = {}  # pid -> pidfd
        self._pids: dict[int, int] = {}  # pidfd -> pid
        self.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll.register(self.wake_fd, select.POLLIN)
        self.birth_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poll.register(self.birth_fd, select.POLLIN)
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        except (ImportError, OSError, ValueError):
            soft = 1024
        self.budget = max(0, soft // 2 - 64)  # never crowd out the engine's own descriptors

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.eventfd_write(self.wake_fd, 1)

    def born(self) -> None:
        """A process started: the current wait ends early, returning False (nothing died)."""
        with contextlib.suppress(OSError):
            os.eventfd_write(self.birth_fd, 1)

    def watch(self, pids: set[int]) -> bool:
        """Watch exactly `pids`; False if some could not be watched (they need polling)."""
        for pid in [p for p in self._fds if p not in pids]:
            self._drop(pid)
        complete = True
        for pid in pids - self._fds.keys():
            if len(self._fds) >= self.budget:
                complete = False
                continue
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # gone already, or no pidfd here: the next round judges it
                complete = False
                continue
            self._fds[pid] = fd
            self._pids[fd] = pid
            self._poll.register(fd, select.POLLIN)
        return complete

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s; True if a watched process exited or `wake` was called. A
        `born` alone ends it early with False."""
        try:
            events = self._poll.poll(max(0, math.ceil(timeout * 1000)))  # never 0 ms early
        except InterruptedError:
            return False
        woke = False
        for fd, _ in events:
            if fd in (self.wake_fd, self.birth_fd):
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(fd)
                woke = woke or fd == self.wake_fd
            else:
                self._drop(self._pids[fd])  # readable for good: judged in the next round
                woke = True
        return woke

    def _drop(self, pid: int) -> None:
        fd = self._fds.pop(pid)
        del self._pids[fd]
        self._poll.unregister(fd)
        os.close(fd)

    def close(self) -> None:
        for pid in list(self._fds):
            self._drop(pid)
        os.close(self.wake_fd)
        os.close(self.birth_fd)
