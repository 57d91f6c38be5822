"""`lanewatch audit --timeout`: end the runs still going when the time is up.

Each run is a `lanewatch run` the audit started in a session (and process group) of its own,
and CMD is the leader of a group of its own (the run's stamp: `child_pid`, `pgid`). When the
time is up:
1. SIGTERM to each late runner's group; `lanewatch run` forwards it to CMD's group;
2. after GRACE seconds, SIGKILL to CMD's group, then to the runner's group, for the runs
   still going (SIGKILL is not forwarded: the runner dies, CMD would stay).
Identity: the runner is our child and not yet reaped (we reap it only by `wait`), so its pid,
and its group's number, are its own. CMD's leader is checked the way actions/signals.py does:
a pidfd opened first, then its start ticks and group compared with the stamp, and at SIGKILL a
probe through the pidfd that it is not yet reaped, then `killpg`. A leader already reaped cannot
be verified: its group is left alone (said in the run's error).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lanewatch.audit.auditreport import Run
from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux.proc import read_stat

GRACE = 5.0  # seconds between SIGTERM and SIGKILL


def wait_all(
    started: Sequence[tuple[Run, subprocess.Popen[bytes]]],
    timeout: float | None,
    say: Callable[[str], None],
) -> list[int]:
    """Wait for every run; with `timeout`, end the late ones. Returns the timed-out runs."""
    if timeout is None:
        return []
    deadline = time.monotonic() + timeout
    late: list[tuple[Run, subprocess.Popen[bytes]]] = []
    for run, proc in started:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            late.append((run, proc))
    if not late:
        return []
    say(f"timed out after {timeout:g} s: ending runs {', '.join(str(r.index) for r, _ in late)}")
    leaders = {run.index: _cmd_leader(run) for run, _ in late}
    for _run, proc in late:
        _killpg_child(proc, signal.SIGTERM)
    grace = time.monotonic() + GRACE
    for run, proc in late:
        how = "SIGTERM"
        try:
            proc.wait(max(0.0, grace - time.monotonic()))
        except subprocess.TimeoutExpired:
            how = "SIGTERM, then SIGKILL"
            note = _kill_leader(leaders[run.index])
            _killpg_child(proc, signal.SIGKILL)
            if note:
                how += f" ({note})"
        run.error = f"timed out after {timeout:g} s: ended by {how}"
    for leader in leaders.values():
        if not isinstance(leader, str):
            os.close(leader[0])
    return [run.index for run, _ in late]


def _killpg_child(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the group our unreaped child leads (its own session: start_new_session)."""
    if proc.returncode is None:  # not reaped by us: the pid, and so the group, is still its
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)


def _cmd_leader(run: Run) -> tuple[int, int] | str:
    """(pidfd, pid) of CMD's group leader, checked against the run's stamp; or why not."""
    read = read_stamp(Path(run.namespace))
    s = read.stamp
    if s is None or s.child_pid is None or s.child_start_ticks is None:
        return "no stamp names CMD"
    try:
        pidfd = os.pidfd_open(s.child_pid)
    except OSError:
        return "CMD had exited"
    st = read_stat(s.child_pid)  # read after the pidfd was opened: it names this process
    if st is None or st.start_ticks != s.child_start_ticks or st.pgid != s.child_pid:
        os.close(pidfd)
        return "CMD's leader is not the stamp's"
    return pidfd, s.child_pid


def _kill_leader(leader: tuple[int, int] | str) -> str:
    if isinstance(leader, str):
        return f"CMD's group not signalled: {leader}"
    pidfd, pid = leader
    try:
        signal.pidfd_send_signal(pidfd, 0)  # succeeds while unreaped: the group is still its
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "CMD's leader was gone: its group not signalled"
    except PermissionError as exc:
        return f"CMD's group not signalled: {exc.strerror}"
    return ""
