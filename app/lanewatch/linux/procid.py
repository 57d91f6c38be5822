"""Process identity from the kernel: pid + start ticks + boot id.

A pid alone never names a process: pids are reused. The kernel's start time in clock ticks
since boot (field 22 of /proc/PID/stat) together with the boot id does.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from enum import Enum

PROC = "/proc"


@functools.cache
def boot_id() -> str:
    """The kernel's random boot id; changes on every boot."""
    try:
        with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


@functools.cache
def hostname() -> str:
    return socket.gethostname()


class ProbeError(Exception):
    """The process could not be inspected (permission, hidepid); it is NOT evidence of death."""


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields 3.. of /proc/PID/stat (state first), or None if no such process.

    Raises ProbeError when the process may exist but cannot be read.
    """
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        raise ProbeError(f"cannot read /proc/{pid}/stat: {exc.strerror}") from exc
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    return data[data.rfind(b")") + 2 :].split()


def _ticks_of(pid: int, rest: list[bytes]) -> int:
    try:
        return int(rest[19])  # rest[0] is field 3 (state); field 22 is rest[19]
    except (IndexError, ValueError) as exc:
        raise ProbeError(f"unreadable /proc/{pid}/stat") from exc


def start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if no such process.

    Raises ProbeError when the process may exist but cannot be read.
    """
    rest = _stat_fields(pid)
    return None if rest is None else _ticks_of(pid, rest)


def process_state(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat (R, S, T for stopped, Z, ...), or None if gone."""
    rest = _stat_fields(pid)
    return rest[0].decode("ascii", "replace") if rest else None


def uid_and_tgid(pid: int) -> tuple[int, int] | None:
    """Real uid and thread group id from /proc/PID/status (world-readable); None if gone.

    Raises ProbeError when the process may exist but cannot be read."""
    uid = tgid = None
    try:
        with open(f"{PROC}/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Tgid:"):
                    tgid = int(line.split()[1])
                elif line.startswith(b"Uid:"):
                    uid = int(line.split()[1])
                    break  # Uid comes after Tgid
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        raise ProbeError(f"cannot read {PROC}/{pid}/status: {exc.strerror}") from exc
    if uid is None or tgid is None:
        raise ProbeError(f"no Uid or Tgid line in {PROC}/{pid}/status")
    return uid, tgid


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


def liveness(identity: ProcessIdentity) -> tuple[Liveness, str]:
    """Judge whether the process named by `identity` still runs on this host, with a reason."""
    if identity.boot_id and boot_id() and identity.boot_id != boot_id():
        return Liveness.OTHER_BOOT, "stamp written before this boot"
    try:
        rest = _stat_fields(identity.pid)  # one read gives both start ticks and state
        if rest is None:
            return Liveness.DEAD, f"pid {identity.pid} does not exist"
        if _ticks_of(identity.pid, rest) != identity.start_ticks:
            return Liveness.REUSED, f"pid {identity.pid} now names another process"
    except ProbeError as exc:
        return Liveness.UNKNOWN, str(exc)
    state = rest[0].decode("ascii", "replace")
    if state in ("Z", "X"):
        return Liveness.ZOMBIE, f"pid {identity.pid} exited (zombie)"
    if state in ("T", "t"):
        return Liveness.STOPPED, f"pid {identity.pid} is stopped"
    return Liveness.ALIVE, f"pid {identity.pid} alive"


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
