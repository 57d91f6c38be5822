"""The live unix sockets bound to a path, as the kernel lists them, with the file each is bound
to: so a socket bound in another mount namespace (a fenced lane's `/tmp/ssh-XXXX/agent.1`,
which is `<namespace>/tmp/ssh-XXXX/agent.1` here) is still found by the file it made.

The kernel's `sock_diag` netlink interface (NETLINK_SOCK_DIAG, `unix_diag(7)`; what `ss -x`
reads) gives each bound socket its path as the binder named it, its socket inode (the
`socket:[N]` of `/proc/PID/fd`), the device and inode of the socket file (`UNIX_DIAG_VFS`), and
its owner's uid (`UNIX_DIAG_UID`, Linux 5.3). Any user may ask. Where netlink is refused (a
seccomp filter), `/proc/net/unix` gives paths and socket inodes only; then `vfs` is None.

Blind spots: only the sockets of our network namespace are listed (a lane with a network
namespace of its own binds where we cannot see); the kernel gives the file's inode in 32 bits
(`udiag_vfs_ino`), so it is compared modulo 2**32 with the device.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

from lanewatch.linux.proc import PROC

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
UDIAG_SHOW_NAME = 0x1
UDIAG_SHOW_VFS = 0x2
UDIAG_SHOW_UID = 0x40
UNIX_DIAG_NAME = 0
UNIX_DIAG_VFS = 1
UNIX_DIAG_UID = 7
_NLMSGHDR = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBHIIIII")
_MSG = struct.Struct("=BBBBIII")
_RTA = struct.Struct("=HH")
_KERNEL_MINOR_BITS = 20  # the kernel's own dev_t: MAJOR << 20 | MINOR (not userspace's)


@dataclass(frozen=True, slots=True)
class BoundSocket:
    # as its process named it when binding, in that process's mount namespace: relative to its
    # working folder then, or through /proc/PID/fd/N; only the file (`vfs`) says where it is
    path: str
    inode: int  # the socket's own inode: /proc/PID/fd/N reads `socket:[inode]`
    vfs: tuple[int, int] | None  # (st_dev, st_ino mod 2**32) of the socket file; None: unknown
    uid: int | None = None  # the socket's owner, where the kernel says


def bound_unix_sockets() -> list[BoundSocket] | None:
    """Every unix socket bound to a file in our network namespace (abstract names left out);
    None when neither netlink nor /proc/net/unix can be read."""
    try:
        return _from_netlink()
    except OSError:
        return _from_proc()


def same_file(bound: BoundSocket, st: os.stat_result) -> bool:
    """Whether `bound` is the socket bound to the file `st` describes (by device and inode)."""
    return bound.vfs is not None and bound.vfs == (st.st_dev, st.st_ino & 0xFFFFFFFF)


def _from_netlink() -> list[BoundSocket]:
    show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_UID
    body = _REQ.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, show, 0xFFFFFFFF, 0xFFFFFFFF)
    header = _NLMSGHDR.pack(
        _NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
    )
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        nl.sendto(header + body, (0, 0))
        found: list[BoundSocket] = []
        while True:
            data = nl.recv(1 << 16)
            if not data:
                raise OSError("sock_diag: the kernel closed the reply")
            offset = 0
            while offset + _NLMSGHDR.size <= len(data):
                length, kind, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, offset)
                if length < _NLMSGHDR.size:
                    raise OSError("sock_diag: a malformed reply")
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    (err,) = struct.unpack_from("=i", data, offset + _NLMSGHDR.size)
                    raise OSError(-err, os.strerror(-err))
                one = _message(data[offset + _NLMSGHDR.size : offset + length])
                if one is not None:
                    found.append(one)
                offset += (length + 3) & ~3


def _message(msg: bytes) -> BoundSocket | None:
    if len(msg) < _MSG.size:
        return None
    inode = _MSG.unpack_from(msg)[4]
    path: str | None = None
    vfs: tuple[int, int] | None = None
    uid: int | None = None
    offset = _MSG.size
    while offset + _RTA.size <= len(msg):
        length, kind = _RTA.unpack_from(msg, offset)
        if length < _RTA.size:
            break
        value = msg[offset + _RTA.size : offset + length]
        if kind == UNIX_DIAG_NAME and value[:1] not in (b"", b"\0"):
            path = os.fsdecode(value.split(b"\0", 1)[0])
        elif kind == UNIX_DIAG_VFS and len(value) >= 8:
            ino, kdev = struct.unpack_from("=II", value)
            major, minor = kdev >> _KERNEL_MINOR_BITS, kdev & ((1 << _KERNEL_MINOR_BITS) - 1)
            vfs = (os.makedev(major, minor), ino)
        elif kind == UNIX_DIAG_UID and len(value) >= 4:
            (uid,) = struct.unpack_from("=I", value)
        offset += (length + 3) & ~3
    if path is None:
        return None  # unbound, or an abstract name (no file)
    return BoundSocket(path, inode, vfs, uid)


def _from_proc() -> list[BoundSocket] | None:
    try:
        with open(f"{PROC}/net/unix", "rb") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return None
    found = []
    for line in lines:
        fields = line.split(maxsplit=7)
        if len(fields) == 8 and not fields[7].startswith(b"@") and fields[6].isdigit():
            found.append(BoundSocket(os.fsdecode(fields[7]), int(fields[6]), None))
    return found
