"""The runner's side of lane membership: child subreaper, its descendants, exact signals.

A process that marks itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER, Linux 3.4) gets
every orphaned descendant re-parented to it instead of to init: whatever CMD starts, however it
daemonizes (setsid, double fork), stays in the runner's tree while the runner lives, and the
runner can wait for it (`waitpid(-1)` fails with ECHILD exactly when no descendant is left).
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Mapping

from lanewatch.linux.libc import libc
from lanewatch.linux.proc import ProcStat, read_stat, stat_table
from lanewatch.linux.procid import ProcessIdentity, boot_id

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _libc() -> ctypes.CDLL | None:
    lib = libc()
    return lib if lib is not None and hasattr(lib, "prctl") else None


def set_child_subreaper() -> str | None:
    """Make this process a child subreaper; None when done, else why not (one line)."""
    libc = _libc()
    if libc is None:
        return "no C library to call prctl with"
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}"
    return None


def is_child_subreaper() -> bool:
    libc = _libc()
    if libc is None:
        return False
    flag = ctypes.c_int(0)
    if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        return False
    return bool(flag.value)


Children = Mapping[int, list[ProcStat]]


def children_of(procs: Mapping[int, ProcStat]) -> dict[int, list[ProcStat]]:
    """Each process's children in `procs`, by parent pid."""
    children: dict[int, list[ProcStat]] = {}
    for st in procs.values():
        children.setdefault(st.ppid, []).append(st)
    return children


def descendants(
    pid: int, procs: Mapping[int, ProcStat] | None = None, children: Children | None = None
) -> list[ProcStat]:
    """Every running descendant of `pid` (zombies left out), nearest first. `children`:
    `children_of(procs)`, for a caller asking about many pids of one table."""
    if children is None:
        children = children_of(stat_table() if procs is None else procs)
    out: list[ProcStat] = []
    seen = {pid}
    todo = list(children.get(pid, ()))
    while todo:
        st = todo.pop(0)
        if st.pid in seen:
            continue  # a table read while processes come and go must not loop
        seen.add(st.pid)
        if st.state not in ("Z", "X"):
            out.append(st)
        todo.extend(children.get(st.pid, ()))
    return out


def signal_exact(identity: ProcessIdentity, sig: int) -> bool:
    """Send `sig` to the process `identity` names and to no other: a pidfd is opened, the start
    ticks are compared, then the signal goes through the pidfd. False when it is gone, reused,
    or the kernel refused. (The actions' `send_checked` adds the policy checks; this is for the
    runner, which signals only its own descendants.)"""
    if identity.pid <= 1 or identity.boot_id != boot_id():
        return False
    try:
        fd = os.pidfd_open(identity.pid)
    except OSError:
        return False
    try:
        st = read_stat(identity.pid)
        if st is None or st.start_ticks != identity.start_ticks:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
