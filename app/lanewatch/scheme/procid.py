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


def start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if no such process.

    Raises ProbeError when the process may exist but cannot be read.
    """
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except ProcessLookupError:
        return None
    except PermissionError as exc:
        raise ProbeError(f"cannot read /proc/{pid}/stat: {exc.strerror}") from exc
    except OSError as exc:
        raise ProbeError(f"cannot read /proc/{pid}/stat: {exc.strerror}") from exc
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = data[data.rfind(b")") + 2 :].split()
    # rest[0] is field 3 (state); field 22 is rest[19].
    try:
        return int(rest[19])
    except (IndexError, ValueError) as exc:
        raise ProbeError(f"unreadable /proc/{pid}/stat") from exc


def process_state(pid: int) -> str | None:
    """The one-letter state of /proc/PID/stat (R, S, T for stopped, Z, ...), or None if gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError as exc:
        raise ProbeError(f"cannot read /proc/{pid}/stat: {exc.strerror}") from exc
    rest = data[data.rfind(b")") + 2 :].split()
    return rest[0].decode("ascii", "replace") if rest else None


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
        ticks = start_ticks(identity.pid)
        if ticks is None:
            return Liveness.DEAD, f"pid {identity.pid} does not exist"
        if ticks != identity.start_ticks:
            return Liveness.REUSED, f"pid {identity.pid} now names another process"
        state = process_state(identity.pid)
    except ProbeError as exc:
        return Liveness.UNKNOWN, str(exc)
    if state is None:
        return Liveness.DEAD, f"pid {identity.pid} exited"
    if state in ("Z", "X"):
        return Liveness.ZOMBIE, f"pid {identity.pid} exited (zombie)"
    if state in ("T", "t"):
        return Liveness.STOPPED, f"pid {identity.pid} is stopped"
    return Liveness.ALIVE, f"pid {identity.pid} alive"
