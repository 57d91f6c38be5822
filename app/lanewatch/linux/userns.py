"""A private view of the mounts: the one way lanewatch enters a mount namespace of its own.

A normal user first enters a user namespace that maps only their own uid and gid (setgroups
denied, as the kernel requires); root needs none. Every mount then becomes a slave of the
host's, so what is mounted inside stays inside and what the host mounts later still shows.

Written once for three callers: the fence's stub (`runner/fence.py` `STUB`) and the audit's shim
(`audit/shim.py` `SHIM`) run this file as source text, ahead of their own, in an interpreter
of their own (`python -I -S -c`: stdlib only, no lanewatch); the fence's probe calls it in a
forked child. So: the stdlib only, nothing looked up after the call starts but through `libc`.
`fd_path` and `mount_namespace` are the /proc paths the stub and the shim use after it.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 16384
MS_SLAVE = 1 << 19


def enter_private_mounts(libc: ctypes.CDLL, as_root: bool) -> tuple[str, int] | None:
    """Unshare the mount namespace (and, unless `as_root`, the user namespace, mapping this
    uid and gid to themselves), then make every mount a slave. None when done, else (what
    failed, errno): ("unshare", EPERM), ("write uid_map", EACCES), ("mount /", EINVAL)."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWNS | (0 if as_root else CLONE_NEWUSER)) != 0:
        return "unshare", ctypes.get_errno() or 1
    if not as_root:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            try:
                with open("/proc/self/" + name, "w") as f:
                    f.write(text)
            except OSError as exc:
                return "write " + name, exc.errno or 1
    if libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
        return "mount /", ctypes.get_errno() or 1
    return None


def fd_path(fd: int) -> str:
    """A path that names what our descriptor `fd` is open on (a bind mount's source: the
    folder or file itself, even where a mount has hidden its name since)."""
    return f"/proc/self/fd/{fd}"


def mount_namespace() -> str:
    """This process's mount namespace as the kernel names it (`mnt:[N]`); "" if unreadable."""
    try:
        return os.readlink("/proc/self/ns/mnt")
    except OSError:
        return ""


def net_namespace() -> str:
    """This process's network namespace as the kernel names it (`net:[N]`); "" if unreadable."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""


def in_one_uid_namespace() -> bool:
    """Whether this process runs in a user namespace that maps one uid (what the fence makes for
    a normal user, and bubblewrap): from there no process outside it, the user's own included,
    may have its open files read (the kernel asks for the same user namespace)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as f:
            lines = f.read().split("\n")
    except OSError:
        return False
    rows = [line.split() for line in lines if line.strip()]
    return len(rows) == 1 and len(rows[0]) == 3 and rows[0][2] == "1"


def source() -> str:
    """This file's text, for a stub that runs it ahead of its own."""
    with open(__file__, encoding="utf-8") as f:
        return f.read()
