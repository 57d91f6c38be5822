"""Which mount namespace a process is in, by a name the kernel never gives to another.

`/proc/PID/ns/mnt` reads `mnt:[4026532174]`: an inode number of the nsfs, which the kernel
hands to the next namespace made as soon as this one dies (every fenced lane makes one, so a
busy machine reuses a number within milliseconds). A number alone never names a namespace
for longer than it lives. `NsId` adds the kernel's 64-bit mount namespace id
(`NS_GET_MNTNS_ID`, on recent 6.x kernels), which is never reused; on an older kernel `unique`
is None and a caller that remembers anything by the number must re-check that a process it
saw in that namespace still lives in it (`linux/mountview.py` does).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass

from lanewatch.linux.proc import PROC

NS_GET_MNTNS_ID = 0x8008B705  # _IOR(NSIO = 0xb7, 0x5, __u64): include/uapi/linux/nsfs.h
_U64 = struct.Struct("=Q")
_unsupported = False  # the kernel said it has no such ioctl: do not ask again


@dataclass(frozen=True, slots=True)
class NsId:
    """A mount namespace: its nsfs inode number (reused) and, where the kernel gives one, its
    unique id (never reused)."""

    inode: int
    unique: int | None

    def same(self, other: NsId) -> bool:
        """The same namespace: by the unique id where both have one, else by the number
        (which holds only while the namespace is known to be alive)."""
        if self.unique is not None and other.unique is not None:
            return self.unique == other.unique
        return self.inode == other.inode


def mount_ns(pid: int | str, dfd: int | None = None) -> NsId | None:
    """The mount namespace of process `pid` (or of the process whose /proc folder `dfd`
    pins); None when it cannot be read (gone, a zombie, another user's)."""
    global _unsupported
    try:
        if dfd is not None:
            fd = os.open("ns/mnt", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
        else:
            fd = os.open(f"{PROC}/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        inode = os.fstat(fd).st_ino
        unique = None
        if not _unsupported:
            try:
                unique = _U64.unpack(fcntl.ioctl(fd, NS_GET_MNTNS_ID, bytes(_U64.size)))[0]
            except OSError as exc:
                if exc.errno in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
                    _unsupported = True
        return NsId(inode, unique)
    except OSError:
        return None
    finally:
        os.close(fd)
