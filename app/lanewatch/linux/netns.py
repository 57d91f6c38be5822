"""Entering another process's network namespace (`lanewatch forward`).

Python 3.11 has no `os.setns`: the C library's `setns(2)` is called through ctypes
(`linux/libc.py`). The namespaces are opened as files first (`/proc/PID/ns/net`, `.../user`):
an open namespace file stays that namespace whatever becomes of the pid, so the caller opens
them, re-checks the process's identity, and only then enters them by the open descriptors.

A normal user's lane has a user namespace of its own (the fence maps the uid to itself), which
owns its network namespace: entering the network namespace needs entering that user namespace
first, and the kernel allows that only to a single-threaded process. Sockets keep the
namespace they were made in, so a listening socket made before `enter` stays on the host.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from lanewatch.linux.libc import errno_text, libc

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


@dataclass
class Opened:
    """The namespace files of one process, held open: `user` is -1 when it is ours."""

    net: int
    user: int
    net_id: str  # "net:[4026532000]", as /proc/PID/ns/net reads

    def close(self) -> None:
        for fd in (self.net, self.user):
            if fd >= 0:
                os.close(fd)
        self.net = self.user = -1


def ns_id(pid: int | str, kind: str) -> str | None:
    """`net:[N]` or the like for `pid`'s namespace of `kind`; None when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def open_namespaces(pid: int) -> Opened:
    """Open `pid`'s network namespace and, when it is not ours, its user namespace. OSError
    (EACCES: another user's process; ENOENT: gone) when they cannot be opened. The caller
    re-checks `pid`'s identity after this (the pid may have been reused before the open)."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    user = -1
    try:
        st = os.fstat(net)
        net_id = f"net:[{st.st_ino}]"
        theirs, ours = ns_id(pid, "user"), ns_id("self", "user")
        if theirs is not None and theirs != ours:
            user = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(net)
        raise
    return Opened(net, user, net_id)


def enter(opened: Opened) -> None:
    """Enter the opened user (if any) and network namespaces; OSError saying why not. The
    calling process must have no other thread (the kernel's rule for a user namespace)."""
    lib = libc()
    if lib is None:
        raise OSError(0, "no C library to call setns(2) through")
    for fd, kind in ((opened.user, CLONE_NEWUSER), (opened.net, CLONE_NEWNET)):
        if fd < 0:
            continue
        if lib.setns(ctypes.c_int(fd), ctypes.c_int(kind)) != 0:
            err = ctypes.get_errno()
            what = "user" if kind == CLONE_NEWUSER else "network"
            raise OSError(err, f"setns into the lane's {what} namespace: {errno_text()}")
