"""The kernel's process connector (`<linux/cn_proc.h>`): every fork and exit on the machine.

A netlink socket (NETLINK_CONNECTOR, group CN_IDX_PROC) that, once subscribed, receives one
message per fork, exec and exit of every process, sent by the kernel as it happens (the fork
message before the child runs, the exit message before the process can be reaped). Needs
CAP_NET_ADMIN, and works in the initial network namespace only. Stdlib only; importing it never
raises. `processes/proclives.py` keeps what it says.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_CN_MCAST_IGNORE = 2
NLMSG_DONE = 3
PROC_EVENT_FORK = 0x0000_0001
PROC_EVENT_EXIT = 0x8000_0000

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_CN_MSG = struct.Struct("=IIIIHH")  # idx, val, seq, ack, len, flags
_EVENT = struct.Struct("=IIQ")  # what, cpu, timestamp_ns (CLOCK_MONOTONIC)
_FORK = struct.Struct("=IIII")  # parent pid, parent tgid, child pid, child tgid
_EXIT = struct.Struct("=II")  # process pid, process tgid
RCVBUF = 8 * 1024 * 1024  # bytes of messages the kernel may queue for us (about 80,000)


@dataclass(frozen=True, slots=True)
class ProcEvent:
    """A process (thread group leader) started or ended: `tgid`, its `parent` (at a fork),
    and when (CLOCK_MONOTONIC nanoseconds)."""

    kind: str  # "fork" | "exit"
    tgid: int
    parent: int
    ns: int


def open_socket(*, filtered: bool = True) -> socket.socket:
    """A subscribed, non-blocking connector socket; OSError when the kernel or our
    privileges do not allow it. `filtered` asks the kernel for forks and exits only (Linux
    6.6+; an older kernel ignores the request and sends nothing: ask again unfiltered)."""
    kind = socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
    sock = socket.socket(socket.AF_NETLINK, kind, NETLINK_CONNECTOR)
    try:
        try:  # root may queue more than rmem_max; a flood then overflows later
            sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        sock.bind((0, CN_IDX_PROC))
        sock.send(_control(PROC_CN_MCAST_LISTEN, filtered))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _control(op: int, filtered: bool) -> bytes:
    # struct proc_input {mcast_op, event_type} (6.6+), or the bare op before
    events = PROC_EVENT_FORK | PROC_EVENT_EXIT
    body = struct.pack("=II", op, events) if filtered else struct.pack("=I", op)
    cn = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(body), 0) + body
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(cn), NLMSG_DONE, 0, 0, os.getpid()) + cn


def fork_of(data: bytes | bytearray) -> tuple[int, int, int] | None:
    """(parent tgid, child pid, child tgid) of a fork datagram, threads included."""
    body = _NLMSGHDR.size + _CN_MSG.size
    if len(data) < body + _EVENT.size + _FORK.size:
        return None
    if _EVENT.unpack_from(data, body)[0] != PROC_EVENT_FORK:
        return None
    _ppid, ptgid, pid, tgid = _FORK.unpack_from(data, body + _EVENT.size)
    return ptgid, pid, tgid


# A whole fork or exit message in one unpack: nlmsghdr's len, the rest of it and cn_msg skipped,
# proc_event's what, cpu and timestamp, then four words (fork: parent pid, parent tgid, child pid,
# child tgid; exit: pid, tgid, then its exit code and signal).
_WHOLE = struct.Struct("=I32xIIQIIII")


def lives(data: bytes | bytearray) -> list[tuple[bool, int, int, int]]:
    """`parse` for the listener, which runs for every fork and exit on the machine: (is a fork,
    tgid, parent tgid (0 for an exit), ns) as plain tuples, one unpack per message."""
    out: list[tuple[bool, int, int, int]] = []
    offset, end = 0, len(data)
    while offset + _NLMSGHDR.size <= end:
        if offset + _WHOLE.size > end:
            out += [(e.kind == "fork", e.tgid, e.parent, e.ns) for e in parse(data[offset:])]
            break
        length, what, _cpu, ns, a, b, c, d = _WHOLE.unpack_from(data, offset)
        if length < _WHOLE.size or offset + length > end:
            out += [(e.kind == "fork", e.tgid, e.parent, e.ns) for e in parse(data[offset:])]
            break
        if what == PROC_EVENT_FORK:
            if c == d:  # threads are skipped, as in `parse`
                out.append((True, d, b, ns))
        elif what == PROC_EVENT_EXIT and a == b:
            out.append((False, b, 0, ns))
        offset += (length + 3) & ~3
    return out


def parse(data: bytes | bytearray) -> list[ProcEvent]:
    """The forks and exits of thread group leaders in one datagram (threads are skipped: a
    fanotify event names a process by its thread group id)."""
    out: list[ProcEvent] = []
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length = _NLMSGHDR.unpack_from(data, offset)[0]
        if length < _NLMSGHDR.size or offset + length > len(data):
            break
        body = offset + _NLMSGHDR.size + _CN_MSG.size
        if body + _EVENT.size <= offset + length:
            what, _cpu, ns = _EVENT.unpack_from(data, body)
            at = body + _EVENT.size
            if what == PROC_EVENT_FORK and at + _FORK.size <= offset + length:
                _ppid, ptgid, pid, tgid = _FORK.unpack_from(data, at)
                if pid == tgid:
                    out.append(ProcEvent("fork", tgid, ptgid, ns))
            elif what == PROC_EVENT_EXIT and at + _EXIT.size <= offset + length:
                pid, tgid = _EXIT.unpack_from(data, at)
                if pid == tgid:
                    out.append(ProcEvent("exit", tgid, 0, ns))
        offset += (length + 3) & ~3
    return out
