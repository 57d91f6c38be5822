"""Leaving a process's tap device to its network namespace, so that the process exits at once.

When the last descriptor of a non-persistent tun/tap device closes, the kernel unregisters the
device right there, in the closing process: 15 to 40 ms of waiting for RCU grace periods,
measured here. slirp4netns pays that in its exit, and whoever reaps it (the runner, before it
can exit) waits for it. Marked persistent (TUNSETPERSIST), the device outlives that close and
goes with its network namespace instead, which the kernel tears down in a worker of its own
once the namespace's last process and socket are gone.

The mark needs a descriptor of the device: `keep_tap` copies the process's own with
`pidfd_getfd(2)` (Linux 5.6; the caller must be allowed to ptrace it: its parent, same user,
is), marks it and closes the copy (not the last descriptor: no unregister here). Anything
that refuses (an older kernel, a ptrace policy, no such descriptor) leaves things as they
were: the process unregisters the device in its exit, as without this.
"""

from __future__ import annotations

import ctypes
import os

from lanewatch.linux.libc import libc

TUN_PATH = "/dev/net/tun"
SYS_PIDFD_GETFD = 438  # the same number on every architecture (added after the unification)
TUNSETPERSIST = 0x400454CB  # _IOW('T', 203, int) where _IOC_WRITE is 1 (x86, arm, riscv, s390)


def tun_fds(pid: int) -> list[int]:
    """The descriptors of `pid` open on /dev/net/tun ([] when its fd table cannot be read)."""
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for name in names:
        try:
            if os.readlink(f"{folder}/{name}") == TUN_PATH:
                out.append(int(name))
        except (OSError, ValueError):
            continue
    return sorted(out)


def keep_tap(pidfd: int, pid: int) -> bool:
    """Mark the tap device that the process of `pidfd` (whose pid was `pid`) holds persistent
    (module doc); whether it was. Acts through `pidfd` only: a pid reused since reads another
    fd table here, but the copy is asked of the process the pidfd names, which refuses once
    it has ended."""
    lib = libc()
    fds = tun_fds(pid)
    if lib is None or pidfd < 0 or not fds:
        return False
    copy = lib.syscall(
        ctypes.c_long(SYS_PIDFD_GETFD), ctypes.c_int(pidfd), ctypes.c_int(fds[0]), ctypes.c_uint(0)
    )
    if copy < 0:
        return False
    try:
        import fcntl  # `--fence net` only

        fcntl.ioctl(copy, TUNSETPERSIST, 1)
    except OSError:
        return False
    finally:
        os.close(copy)
    return True


def pidfd_of(pid: int) -> int:
    """A pidfd for `pid` (the caller's un-reaped child), or -1 (Linux before 5.3, Python
    without os.pidfd_open)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1
