"""The listening sockets of another network namespace (a `--fence net` lane's), read through one
of its processes: `/proc/PID/net/{tcp,tcp6,udp,udp6}` are the tables of the namespace `PID`
is in, parsed as ours are (`linux/netsockets.py`), each socket marked `private`.

Why /proc/PID/net and not the kernel's socket diagnostics after `setns`: a normal user's lane
has a user namespace of its own, which owns its network namespace; entering it takes entering
that user namespace first, which the kernel refuses a threaded process (the prober is a thread
of the engine): only a helper process could, a fork per read. The tables cost 5-10 ms a read
(the kernel walks its hash tables), so they are read only when the namespace's socket counts
moved (`counts`: `/proc/PID/net/sockstat` and `sockstat6`, ~0.1 ms, that namespace's alone).

Identity: `/proc/PID` is opened once as a directory and everything is read through that
descriptor (a reused pid reads as gone, never as another process); before the tables, its start
ticks must be the caller's and its `ns/net` the namespace the caller names (never ours: the
slirp4netns of a lane is on the host's side, and its view is the host's); after them, `ns/net`
is read again (a process may `unshare` or `setns` meanwhile): any mismatch and nothing is kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from lanewatch.linux.netsockets import TABLES, Listening, parse
from lanewatch.linux.proc import PROC, parse_stat

_SOCKSTAT = ("net/sockstat", "net/sockstat6")
_COUNTED = {"TCP:", "UDP:", "TCP6:", "UDP6:"}

T = TypeVar("T")


def our_net() -> str | None:
    """`net:[N]`: the network namespace this process is in; None when it cannot be read."""
    try:
        return os.readlink(f"{PROC}/self/ns/net")
    except OSError:
        return None


def _open(pid: int) -> int | None:
    try:
        return os.open(f"{PROC}/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


def _read(fd: int, name: str) -> bytes | None:
    try:
        f = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(f, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(f)


def _net_of(fd: int) -> str | None:
    try:
        return os.readlink("ns/net", dir_fd=fd)
    except OSError:
        return None


def _same(fd: int, pid: int, start_ticks: int, net_ns: str) -> bool:
    """The process behind `fd` is (`pid`, `start_ticks`) and in `net_ns`, which is not ours."""
    if net_ns == our_net() or _net_of(fd) != net_ns:
        return False
    data = _read(fd, "stat")
    st = parse_stat(pid, data) if data is not None else None
    return st is not None and st.start_ticks == start_ticks


def _through(pid: int, start_ticks: int, net_ns: str, read: Callable[[int], T | None]) -> T | None:
    """`read(fd)` of `/proc/PID` opened as `fd`, kept when the process is (`pid`, `start_ticks`)
    in `net_ns` before the read and still in `net_ns` after it; None otherwise."""
    fd = _open(pid)
    if fd is None:
        return None
    try:
        if not _same(fd, pid, start_ticks, net_ns):
            return None
        out = read(fd)
        return out if out is not None and _net_of(fd) == net_ns else None
    finally:
        os.close(fd)


def counts(pid: int, start_ticks: int, net_ns: str) -> tuple[int, ...] | None:
    """How many TCP and UDP sockets (IPv4, IPv6) are in use in `pid`'s network namespace,
    when `pid` is still that process and in `net_ns`: a cheap "did a socket come or go there".
    None when that cannot be told."""
    return _through(pid, start_ticks, net_ns, _counts)


def _counts(fd: int) -> tuple[int, ...]:
    out: list[int] = []
    for name in _SOCKSTAT:
        data = _read(fd, name)
        for line in (data or b"").decode("ascii", "replace").splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] in _COUNTED and words[1] == "inuse":
                out.append(int(words[2]) if words[2].isdigit() else -1)
    return tuple(out)


def listening(pid: int, start_ticks: int, net_ns: str) -> list[Listening] | None:
    """Every listening TCP and UDP socket (IPv4 and IPv6) of the network namespace `net_ns`,
    read through `pid` (started at `start_ticks`), each `private`; None when `pid` is no longer
    that process, is in another namespace (ours included), or its tables cannot be read."""
    return _through(pid, start_ticks, net_ns, _listening)


def _listening(fd: int) -> list[Listening] | None:
    out: list[Listening] = []
    read = 0
    for name, _family in TABLES:
        data = _read(fd, f"net/{name}")
        if data is None:
            continue  # no IPv6 in there: the others are still true
        read += 1
        text = data.decode("ascii", "replace")
        out.extend(s.as_private() for s in parse(text, name.rstrip("6")))
    return out if read else None
