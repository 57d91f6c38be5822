"""`lanewatch run`: supervise one command inside a claimed lane.

The command runs in its own process group so a kill reaches everything it started. Signals
sent to us are forwarded to that group while the child is un-reaped (so its pgid cannot have
been reused). When we own the terminal, it is handed to the child's group as a shell would,
so Ctrl-C and interactive programs behave as without us.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from types import FrameType

from lanewatch.scheme import ledger
from lanewatch.scheme.lane import Lane
from lanewatch.scheme.procid import start_ticks

FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


def exit_code_of(returncode: int) -> int:
    """Shell convention: a death by signal N exits 128+N."""
    return returncode if returncode >= 0 else 128 - returncode


@contextlib.contextmanager
def _forward_signals(pgid: int) -> Iterator[list[int]]:
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _terminal_to(pgid: int) -> Iterator[None]:
    """Give the controlling terminal to `pgid` when we are in its foreground, then take it back."""
    fd = sys.stdin.fileno() if sys.stdin is not None else -1
    try:
        ours = fd >= 0 and os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        ours = False
    if not ours:
        yield
        return
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)
            # The child may have read the terminal before it was handed over and stopped.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGCONT)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, os.getpgrp())
        signal.signal(signal.SIGTTOU, old)


def run_in_lane(lane: Lane, cmd: Sequence[str]) -> int:
    """Run `cmd` in the (not yet claimed) `lane`; return its exit code. Claims and releases."""
    lane.claim()
    env = {**os.environ, **lane.env()}
    try:
        proc = subprocess.Popen(list(cmd), env=env, process_group=0)
    except FileNotFoundError:
        print(f"lanewatch: command not found: {cmd[0]}", file=sys.stderr)
        lane.release(exit_code=EXIT_NOT_FOUND, event="spawn-failed")
        return EXIT_NOT_FOUND
    except PermissionError:
        print(f"lanewatch: command not executable: {cmd[0]}", file=sys.stderr)
        lane.release(exit_code=EXIT_NOT_EXECUTABLE, event="spawn-failed")
        return EXIT_NOT_EXECUTABLE
    code = 1
    try:
        with _forward_signals(proc.pid) as received, _terminal_to(proc.pid):
            try:
                ticks = start_ticks(proc.pid)
            except OSError:
                ticks = None
            lane.update_stamp(child_pid=proc.pid, child_start_ticks=ticks, pgid=proc.pid)
            ledger.append(lane.namespace, "spawned", lane=lane.name, child_pid=proc.pid)
            returncode = proc.wait()
        code = exit_code_of(returncode)
        ledger.append(
            lane.namespace,
            "exited",
            lane=lane.name,
            exit_code=code,
            signals_forwarded=[signal.Signals(s).name for s in received],
        )
    finally:
        if proc.returncode is None:  # we are dying on an exception: do not orphan a live group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
        lane.release(exit_code=code)
    return code
