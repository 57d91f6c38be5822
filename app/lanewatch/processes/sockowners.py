"""Which processes hold given unix sockets open: the server behind a socket file, by name.

A socket's own inode (`linux/unixsockets.BoundSocket.inode`) shows in each holder's
`/proc/PID/fd/N` as `socket:[inode]`. Each process is pinned before its fds are read (as
`holders.py` does), so a reused pid is never named for a dead one. A process whose fds we may
not read (another user's, or our own non-dumpable ssh-agent, as a normal user) is counted, not
guessed: `SocketOwners.unreadable`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from lanewatch.linux.proc import (
    GONE_ERRNOS,
    open_fd_dir,
    parse_cmdline,
    parse_stat,
    parse_status,
    pids,
    pin,
    read_at,
)


@dataclass(frozen=True, slots=True)
class SocketHolder:
    pid: int
    command: str  # its command line, joined (its comm when the cmdline is empty)
    uid: int | None = None  # its effective uid
    start_ticks: int | None = None  # with its pid, who it is (None: its stat was not read)
    argv: tuple[str, ...] = ()  # its command line's words, as the kernel keeps them


@dataclass(slots=True)
class SocketOwners:
    by_inode: dict[int, list[SocketHolder]] = field(default_factory=dict)
    # processes whose fds could not be read (a cmdline and a status anyone may read)
    unreadable: list[SocketHolder] = field(default_factory=list)


def socket_owners(inodes: Collection[int], among: Iterable[int] | None = None) -> SocketOwners:
    """Every process (of `among`'s pids, else of all) with one of the sockets `inodes` open."""
    wanted = {f"socket:[{i}]": i for i in inodes}
    found = SocketOwners()
    if not wanted:
        return found
    for pid in pids() if among is None else sorted(set(among)):
        try:
            dfd = pin(pid)
        except OSError:
            continue
        try:
            held = _held(dfd, wanted)
            if held is None:
                found.unreadable.append(_holder(pid, dfd))
                continue
            for inode in held:
                one = _holder(pid, dfd, _start_ticks(pid, dfd))
                found.by_inode.setdefault(inode, []).append(one)
        finally:
            os.close(dfd)
    return found


def _held(dfd: int, wanted: dict[str, int]) -> set[int] | None:
    """The wanted socket inodes this process holds; None when its fds cannot be read."""
    try:
        fdd = open_fd_dir(dfd)
    except OSError as exc:
        return set() if exc.errno in GONE_ERRNOS else None
    try:
        names = os.listdir(fdd)
        held = set()
        for name in names:
            try:
                link = os.readlink(name, dir_fd=fdd)
            except OSError as exc:
                if exc.errno in GONE_ERRNOS:
                    continue
                return None
            inode = wanted.get(link)
            if inode is not None:
                held.add(inode)
        return held
    except OSError as exc:
        return set() if exc.errno in GONE_ERRNOS else None
    finally:
        os.close(fdd)


def _holder(pid: int, dfd: int, start_ticks: int | None = None) -> SocketHolder:
    argv = _argv(dfd)
    return SocketHolder(pid, " ".join(argv) or _comm(dfd), _uid(dfd), start_ticks, argv)


def _argv(dfd: int) -> tuple[str, ...]:
    try:
        return tuple(parse_cmdline(read_at(dfd, "cmdline")))
    except OSError:
        return ()


def _comm(dfd: int) -> str:
    try:
        return read_at(dfd, "comm").decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


def _uid(dfd: int) -> int | None:
    try:
        return parse_status(read_at(dfd, "status")).euid
    except OSError:
        return None


def _start_ticks(pid: int, dfd: int) -> int | None:
    try:
        stat = parse_stat(pid, read_at(dfd, "stat"))
    except OSError:
        return None
    return stat.start_ticks if stat is not None else None
