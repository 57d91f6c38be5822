"""The live unix sockets bound to a path, as the kernel lists them, with the file each is bound
to: so a socket bound in another mount namespace (a fenced lane's `/tmp/ssh-XXXX/agent.1`,
which is `<namespace>/tmp/ssh-XXXX/agent.1` here) is still found by the file it made.

The kernel's `sock_diag` netlink interface (NETLINK_SOCK_DIAG, `unix_diag(7)`; what `ss -x`
reads) gives each bound socket its path as the binder named it, its socket inode (the
`socket:[N]` of `/proc/PID/fd`), the device and inode of the socket file (`UNIX_DIAG_VFS`), and
its owner's uid (`UNIX_DIAG_UID`, Linux 5.3). Any user may ask. Where netlink is refused (a
seccomp filter), `/proc/net/unix` gives paths and socket inodes only; then `vfs` is None.

`abstract_listeners` lists the other kind: listening sockets bound to an abstract name (no file;
`@/tmp/.X11-unix/X99`, an X display's), which belong to the network namespace, not to any
`/tmp`: the fence does not keep them apart, and a second lane's server fails on the name.

Blind spots: only the sockets of our network namespace are listed (a lane with a network
namespace of its own binds where we cannot see); the kernel gives the file's inode in 32 bits
(`udiag_vfs_ino`), so it is compared modulo 2**32 with the device.
"""

from __future__ import annotations

import os
import re
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
ALL_STATES = 0xFFFFFFFF
LISTENING = 1 << 10  # TCP_LISTEN: the kernel files a listening unix socket under that state
_ACCEPTCON = 0x10000  # /proc/net/unix's Flags of a listening socket (__SO_ACCEPTCON)
_X_DISPLAY = re.compile(r"@/tmp/\.X11-unix/X([0-9]+)")


@dataclass(frozen=True, slots=True)
class BoundSocket:
    # as its process named it when binding, in that process's mount namespace: relative to its
    # working folder then, or through /proc/PID/fd/N; only the file (`vfs`) says where it is
    path: str
    inode: int  # the socket's own inode: /proc/PID/fd/N reads `socket:[inode]`
    vfs: tuple[int, int] | None  # (st_dev, st_ino mod 2**32) of the socket file; None: unknown
    uid: int | None = None  # the socket's owner, where the kernel says


@dataclass(frozen=True, slots=True)
class AbstractListener:
    """A listening unix socket bound to an abstract name."""

    name: str  # `@` and the name, each NUL in it shown as `@` (as `ss -x` and /proc show it)
    inode: int  # the socket's own inode (`socket:[inode]` in its holders' fds)
    uid: int | None = None  # its owner, where the kernel says

    @property
    def display(self) -> str | None:
        """`:99` for an X server's `@/tmp/.X11-unix/X99`; None for any other name."""
        found = _X_DISPLAY.fullmatch(self.name)
        return f":{found.group(1)}" if found else None

    @property
    def display_number(self) -> int | None:
        """99 for an X server's `@/tmp/.X11-unix/X99` (its lock file is `/tmp/.X99-lock`)."""
        found = _X_DISPLAY.fullmatch(self.name)
        return int(found.group(1)) if found else None

    @property
    def said(self) -> str:
        """`@/tmp/.X11-unix/X99 (display :99)`; another name as it is."""
        return f"{self.name} (display {self.display})" if self.display else self.name


def bound_unix_sockets() -> list[BoundSocket] | None:
    """Every unix socket bound to a file in our network namespace (abstract names left out);
    None when neither netlink nor /proc/net/unix can be read."""
    try:
        return [b for b in _from_netlink(ALL_STATES) if isinstance(b, BoundSocket)]
    except OSError:
        return _from_proc()


def abstract_listeners() -> list[AbstractListener] | None:
    """Every listening unix socket bound to an abstract name in our network namespace; None
    when neither netlink nor /proc/net/unix can be read."""
    try:
        return [a for a in _from_netlink(LISTENING) if isinstance(a, AbstractListener)]
    except OSError:
        return _abstract_from_proc()


def same_file(bound: BoundSocket, st: os.stat_result) -> bool:
    """Whether `bound` is the socket bound to the file `st` describes (by device and inode)."""
    return bound.vfs is not None and bound.vfs == (st.st_dev, st.st_ino & 0xFFFFFFFF)


def _from_netlink(states: int) -> list[BoundSocket | AbstractListener]:
    """The named sockets in `states` (a mask of TCP states), as the kernel dumps them."""
    show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_UID
    body = _REQ.pack(socket.AF_UNIX, 0, 0, states, 0, show, 0xFFFFFFFF, 0xFFFFFFFF)
    header = _NLMSGHDR.pack(
        _NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
    )
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        nl.sendto(header + body, (0, 0))
        found: list[BoundSocket | AbstractListener] = []
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


def _message(msg: bytes) -> BoundSocket | AbstractListener | None:
    """One socket of the dump; None for an unbound one."""
    if len(msg) < _MSG.size:
        return None
    inode = _MSG.unpack_from(msg)[4]
    path: str | None = None
    abstract: bytes | None = None
    vfs: tuple[int, int] | None = None
    uid: int | None = None
    offset = _MSG.size
    while offset + _RTA.size <= len(msg):
        length, kind = _RTA.unpack_from(msg, offset)
        if length < _RTA.size:
            break
        value = msg[offset + _RTA.size : offset + length]
        if kind == UNIX_DIAG_NAME and value[:1] == b"\0":
            abstract = value[1:]
        elif kind == UNIX_DIAG_NAME and value:
            path = os.fsdecode(value.split(b"\0", 1)[0])
        elif kind == UNIX_DIAG_VFS and len(value) >= 8:
            ino, kdev = struct.unpack_from("=II", value)
            major, minor = kdev >> _KERNEL_MINOR_BITS, kdev & ((1 << _KERNEL_MINOR_BITS) - 1)
            vfs = (os.makedev(major, minor), ino)
        elif kind == UNIX_DIAG_UID and len(value) >= 4:
            (uid,) = struct.unpack_from("=I", value)
        offset += (length + 3) & ~3
    if abstract is not None:
        return AbstractListener(abstract_name(abstract), inode, uid)
    if path is None:
        return None  # unbound
    return BoundSocket(path, inode, vfs, uid)


def abstract_name(raw: bytes) -> str:
    """An abstract name's bytes (after its leading NUL) as `ss` shows them: `@`, then the
    bytes, each NUL as `@`."""
    return "@" + os.fsdecode(raw.replace(b"\0", b"@"))


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


def _abstract_from_proc() -> list[AbstractListener] | None:
    try:
        with open(f"{PROC}/net/unix", "rb") as f:
            text = f.read()
    except OSError:
        return None
    return parse_abstract_listeners(text)


def parse_abstract_listeners(text: bytes) -> list[AbstractListener]:
    """The listening abstract sockets of /proc/net/unix's text (`Num RefCount Protocol Flags
    Type St Inode Path`; a listener's Flags hold __SO_ACCEPTCON, an abstract Path starts with
    `@`). Lines that are not rows are skipped."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split(maxsplit=7)
        if len(fields) != 8 or not fields[7].startswith(b"@") or not fields[6].isdigit():
            continue
        try:
            flags = int(fields[3], 16)
        except ValueError:
            continue
        if flags & _ACCEPTCON:
            found.append(AbstractListener(os.fsdecode(fields[7]), int(fields[6])))
    return found
