"""Real processes for the /proc scanner and signal tests: started in their own sessions,
orphans adopted through pidfds, all killed and reaped at teardown."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lanewatch.linux.procid import process_state

DEADLINE = 15.0
PR_SET_CHILD_SUBREAPER = 36


def alive(pid: int) -> bool:
    """`pid` exists and has not ended (a zombie has: only its parent's reaping is left)."""
    return process_state(pid) not in (None, "Z", "X")


def read_line(proc: subprocess.Popen[bytes], timeout: float = DEADLINE) -> str:
    """One line from `proc`'s stdout, or fail after `timeout` (never blocks forever)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            pytest.fail(f"pid {proc.pid} printed nothing in {timeout}s")
        chunk = os.read(fd, 1024)
        if not chunk:
            pytest.fail(f"pid {proc.pid} exited early: {buf!r}")
        buf += chunk
    return buf.decode().strip()


def set_subreaper(on: bool) -> None:
    """Orphans of our children come to us instead of init, so we can reap them (init does not
    reap everywhere, e.g. in some sandboxes)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


class Procs:
    """Processes a test started (and orphans it adopted by pidfd); all killed at teardown."""

    stdin: int = subprocess.DEVNULL

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        self.pidfds: list[int] = []
        set_subreaper(True)

    def start(self, args: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        kw.setdefault("start_new_session", True)
        kw.setdefault("stdin", self.stdin)
        proc: subprocess.Popen[bytes] = subprocess.Popen(args, stdout=subprocess.PIPE, **kw)
        self.started.append(proc)
        return proc

    def adopt(self, pid: int) -> int:
        """Track a process that is not our child (an orphan) through a pidfd."""
        pidfd = os.pidfd_open(pid)
        self.pidfds.append(pidfd)
        return pidfd

    def close(self) -> None:
        for pidfd in self.pidfds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            select.select([pidfd], [], [], DEADLINE)  # readable once it has exited
            with contextlib.suppress(ChildProcessError):  # ours only if it was orphaned
                os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
            os.close(pidfd)
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=DEADLINE)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        set_subreaper(False)


P = TypeVar("P", bound=Procs)


def procs_fixture(kind: type[P]) -> Callable[[], Iterator[P]]:
    """The `procs` fixture of a module whose processes are a `kind` (its own `Procs`, with the
    helpers it starts): `procs = prockit.procs_fixture(Procs)`. All are killed and reaped at
    the test's end."""

    @pytest.fixture(name="procs")
    def procs() -> Iterator[P]:
        started = kind()
        try:
            yield started
        finally:
            started.close()

    return procs


@pytest.fixture
def ns(tmp_path: Path) -> Path:
    """A namespace folder for the scanner to look under (`tmp_path/root/ns`), resolved; a
    module takes it by name: `ns = prockit.ns`."""
    d = tmp_path / "root" / "ns"
    d.mkdir(parents=True)
    return d.resolve()
