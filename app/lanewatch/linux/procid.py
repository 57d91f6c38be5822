"""Process identity from the kernel: pid + start ticks + boot id.

A pid alone never names a process: pids are reused. The kernel's start time in clock ticks
since boot (field 22 of /proc/PID/stat) together with the boot id does.
"""

from __future__ import annotations

import functools
import getpass
import os
from dataclasses import dataclass
from enum import Enum

from lanewatch.linux.proc import BOOT_ID, PROC, ProcStat, parse_stat, parse_status, read_file


@functools.cache
def boot_id() -> str:
    """The kernel's random boot id; changes on every boot."""
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


@functools.cache
def hostname() -> str:
    """This host's name, as socket.gethostname() gives it (both are uname's nodename), without
    the socket module's import cost for `run`."""
    return os.uname().nodename


def user_name() -> str:
    """This process's user, as a stamp and a receipt name it: the login name (`$LOGNAME`,
    `$USER`, else the password database), else the uid as digits."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class ProbeError(Exception):
    """The process could not be inspected (permission, hidepid); it is NOT evidence of death."""


def _read(pid: int, name: str) -> bytes | None:
    """/proc/PID/name, or None if no such process. Raises ProbeError when the process may
    exist but cannot be read."""
    try:
        return read_file(pid, name)
    except OSError as exc:
        raise ProbeError(f"cannot read {PROC}/{pid}/{name}: {exc.strerror}") from exc


def _stat(pid: int) -> ProcStat | None:
    """The stat of `pid`, None if no such process; ProbeError if it cannot be read."""
    data = _read(pid, "stat")
    if data is None:
        return None
    st = parse_stat(pid, data)
    if st is None:
        raise ProbeError(f"unreadable {PROC}/{pid}/stat")
    return st


def start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if no such process.

    Raises ProbeError when the process may exist but cannot be read.
    """
    st = _stat(pid)
    return None if st is None else st.start_ticks


def process_state(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat (R, S, T for stopped, Z, ...), or None if gone."""
    st = _stat(pid)
    return None if st is None else st.state


def uid_and_tgid(pid: int) -> tuple[int, int] | None:
    """Real uid and thread group id from /proc/PID/status (world-readable); None if gone.

    Raises ProbeError when the process may exist but cannot be read."""
    data = _read(pid, "status")
    if data is None:
        return None
    status = parse_status(data)
    if status.uid is None or status.tgid is None:
        raise ProbeError(f"no Uid or Tgid line in {PROC}/{pid}/status")
    return status.uid, status.tgid


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    pid: int
    start_ticks: int
    boot_id: str

    @classmethod
    def current(cls) -> ProcessIdentity:
        return cls.of(os.getpid())

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity:
        ticks = start_ticks(pid)
        if ticks is None:
            raise ProcessLookupError(pid)
        return cls(pid, ticks, boot_id())


class Liveness(Enum):
    ALIVE = "alive"  # same pid, same start ticks, same boot
    STOPPED = "stopped"  # alive but SIGSTOPped / traced
    ZOMBIE = "zombie"  # exited, not yet reaped: dead for our purposes
    DEAD = "dead"  # no such pid
    REUSED = "reused"  # the pid now names another process
    OTHER_BOOT = "other-boot"  # the stamp was written before this boot
    UNKNOWN = "unknown"  # could not tell (permission error): never read as dead


def liveness(identity: ProcessIdentity, known: ProcStat | None = None) -> tuple[Liveness, str]:
    """Judge whether the process named by `identity` still runs on this host, with a reason.
    `known`: its stat as read a moment ago (a probe's process table holds every process's),
    used instead of a read of its own; without it (not in the table: gone, or unreadable)
    the process is asked itself, so a denied read is still UNKNOWN, never DEAD."""
    if identity.boot_id and boot_id() and identity.boot_id != boot_id():
        return Liveness.OTHER_BOOT, "stamp written before this boot"
    try:
        # one read gives both start ticks and state
        st = known if known is not None and known.pid == identity.pid else None
        if st is None or st.start_ticks != identity.start_ticks:
            # Not in the table, or another process there: the table may predate the process
            # (its pid freed and reused since the read; under fork load pids wrap in seconds),
            # so the process is asked itself before it is called dead or reused.
            st = _stat(identity.pid)
        if st is None:
            return Liveness.DEAD, f"pid {identity.pid} does not exist"
        if st.start_ticks != identity.start_ticks:
            return Liveness.REUSED, f"pid {identity.pid} now names another process"
    except ProbeError as exc:
        return Liveness.UNKNOWN, str(exc)
    state = st.state
    if state in ("Z", "X"):
        return Liveness.ZOMBIE, f"pid {identity.pid} exited (zombie)"
    if state in ("T", "t"):
        return Liveness.STOPPED, f"pid {identity.pid} is stopped"
    return Liveness.ALIVE, f"pid {identity.pid} alive"


ENDED = frozenset({Liveness.DEAD, Liveness.REUSED, Liveness.ZOMBIE})


def ended(pid: int, start_ticks: int) -> bool:
    """Whether the process `pid` started at `start_ticks` no longer runs (gone, its pid
    reused, a zombie): `liveness`'s verdict, so a read that was denied or made no sense
    (UNKNOWN) never counts as an end."""
    return liveness(ProcessIdentity(pid, start_ticks, ""))[0] in ENDED


def owner_uid(identity: ProcessIdentity) -> int | None:
    """The real uid of the process `identity` names, or None when that cannot be told (gone,
    reused, unreadable). The start ticks are read again after the uid, so a pid reused in
    between never lends its new process's uid to the old identity."""
    try:
        ids = uid_and_tgid(identity.pid)
        if ids is None or start_ticks(identity.pid) != identity.start_ticks:
            return None
    except ProbeError:
        return None
    return ids[0]
