"""The one parser of /proc/PID/mountinfo (see proc(5)), and the mount an fd lies on.

The kernel escapes space, tab, newline and backslash in paths as three octal digits
(\\040, \\011, \\012, \\134); every other byte is printed as is, so a mount point that is not
UTF-8 arrives as raw bytes. `unescape` undoes the escapes on the bytes and then decodes them
as the filesystem encoding does (`os.fsdecode`): a mount point compares equal to the same path
from `os.readlink` or `os.listdir`, whatever its bytes.
"""

from __future__ import annotations

import functools
import os
import re
import select
import sys
import threading
from dataclasses import dataclass
from typing import Any

from lanewatch.linux.proc import PROC, SELF_MOUNTINFO, self_fdinfo_value


@functools.cache  # compiled on first use, not at import (docs/performance.md, `run_start`)
def _octal_escape() -> re.Pattern[bytes]:
    return re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class MountEntry:
    """One line of /proc/PID/mountinfo, escapes decoded."""

    mount_id: int
    parent_id: int
    device: str  # "major:minor"
    root: str  # the folder of the filesystem mounted here: not "/" for a bind mount of a subdir
    mount_point: str
    options: str
    optional: tuple[str, ...]  # shared:N, master:N, ...
    fstype: str
    source: str
    super_options: str

    @property
    def major_minor(self) -> tuple[int, int]:
        major, _, minor = self.device.partition(":")
        return int(major), int(minor)

    @property
    def dev(self) -> int:
        """The device as `st_dev` spells it."""
        return os.makedev(*self.major_minor)


def unescape(field: bytes) -> str:
    """Decode the kernel's octal escapes on the bytes, then the bytes as the filesystem
    encoding does."""
    return os.fsdecode(_octal_escape().sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse_mountinfo(data: bytes) -> list[MountEntry]:
    """Parse mountinfo content; malformed lines are skipped."""
    entries: list[MountEntry] = []
    for line in data.splitlines():
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-", 6)
            entries.append(
                MountEntry(
                    mount_id=int(fields[0]),
                    parent_id=int(fields[1]),
                    device=fields[2].decode("ascii"),
                    root=unescape(fields[3]),
                    mount_point=unescape(fields[4]),
                    options=unescape(fields[5]),
                    optional=tuple(unescape(f) for f in fields[6:sep]),
                    fstype=unescape(fields[sep + 1]),
                    source=unescape(fields[sep + 2]),
                    super_options=unescape(fields[sep + 3]) if len(fields) > sep + 3 else "",
                )
            )
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
    return entries


def read_mountinfo(path: str = SELF_MOUNTINFO) -> list[MountEntry]:
    """Every mount in our mount namespace (or in `path`). Raises OSError."""
    with open(path, "rb") as f:
        return parse_mountinfo(f.read())


class OurMounts:
    """Our own mount table, read again only when it changed: the kernel flags an open
    /proc/self/mountinfo (POLLPRI, see proc(5)) after any mount or unmount in our namespace,
    so a table kept here is never older than the last check. `version` goes up at each read.
    Where the file cannot be kept open, every `table()` reads it afresh. Not thread-safe: one
    per thread."""

    def __init__(self) -> None:
        self._fd = -1
        self._table: list[MountEntry] | None = None
        self._poll: select.poll | None = None
        self.version = 0

    def table(self) -> list[MountEntry] | None:
        """Our mounts now; None when they cannot be read."""
        if self._table is not None and not self._changed():
            return self._table
        if self._fd < 0:
            try:  # opened before the read: a change after it is flagged, never missed
                self._fd = os.open(SELF_MOUNTINFO, os.O_RDONLY | os.O_CLOEXEC)
                self._poll = select.poll()
                self._poll.register(self._fd, select.POLLPRI | select.POLLERR)
            except OSError:
                self._fd, self._poll = -1, None
        try:
            table = read_mountinfo()
        except OSError:
            return None
        self._table = table if self._fd >= 0 else None
        self.version += 1
        return table

    def _changed(self) -> bool:
        return self._poll is None or bool(self._poll.poll(0))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._poll, self._table = -1, None, None

    def __del__(self) -> None:  # an owner that forgot `close` leaks no descriptor
        if getattr(self, "_fd", -1) >= 0:
            self.close()


_STATX_MNT_ID = 0x1000  # Linux 5.8; not STATX_MNT_ID_UNIQUE, which mountinfo does not show
_AT_EMPTY_PATH = 0x1000
_STX_MNT_ID_AT = 0x90  # struct statx: stx_mnt_id


class _Statx(threading.local):
    """libc's statx and a result buffer of this thread's own, made at its first use."""

    fn: Any = None
    view: memoryview | None = None
    buf: Any = None
    missing = False

    def mount_id(self, fd: int) -> int | None:
        if self.view is None:
            if self.missing:
                return None
            import ctypes

            from lanewatch.linux.libc import libc

            lib = libc()
            self.fn = getattr(lib, "statx", None) if lib is not None else None
            if self.fn is None:  # no libc, or a glibc before 2.28
                self.missing = True
                return None
            self.buf = (ctypes.c_char * 256)()
            self.view = memoryview(self.buf)
        if self.fn(fd, b"", _AT_EMPTY_PATH, _STATX_MNT_ID, self.buf) != 0:
            return None
        view = self.view
        if not int.from_bytes(view[0:4], sys.byteorder) & _STATX_MNT_ID:
            return None  # a kernel before 5.8 leaves the field unset
        return int.from_bytes(view[_STX_MNT_ID_AT : _STX_MNT_ID_AT + 8], sys.byteorder)


_statx = _Statx()


def mount_id(fd: int) -> int | None:
    """The id of the mount `fd` lies on (the `mnt_id` of /proc/self/fdinfo, as in mountinfo's
    first field); None when the kernel does not say. Unlike st_dev it tells a bind mount of the
    same filesystem from its parent, and unlike a path it cannot be swapped under us."""
    found = _statx.mount_id(fd)  # one syscall, no file opened: it runs for every event
    return found if found is not None else self_fdinfo_value(fd, b"mnt_id:")


def mount_of(fd: int) -> MountEntry | None:
    """Our mountinfo's line for the mount `fd` lies on, or None when it cannot be told."""
    mnt = mount_id(fd)
    if mnt is None:
        return None
    try:
        entries = read_mountinfo()
    except OSError:
        return None
    return next((entry for entry in entries if entry.mount_id == mnt), None)


def mount_device(fd: int) -> tuple[int, int] | None:
    """(major, minor) of the superblock of the mount `fd` lies on, or None. On btrfs this is
    not what fstat says (that is the subvolume's device)."""
    entry = mount_of(fd)
    if entry is None:
        return None
    try:
        return entry.major_minor
    except ValueError:
        return None


def hidden_reason() -> str | None:
    """Why other users' processes may be invisible: /proc mounted with hidepid, and we are not
    root. The last mount on /proc wins."""
    if os.geteuid() == 0:
        return None
    try:
        mounts = read_mountinfo()
    except OSError:
        return None
    reason = None
    for mount in mounts:
        if mount.mount_point == PROC:
            reason = None
            for opt in mount.super_options.split(","):
                if opt.startswith("hidepid=") and opt not in ("hidepid=0", "hidepid=off"):
                    reason = f"{PROC} is mounted with {opt}"
    return reason


# Filesystems another machine (or the host of a VM) writes to as well: inotify reports only the
# writes made through this kernel, so a root there is polled (files/tail.py,
# docs/hosts-shared-root.md).
NETWORK_FSTYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs", "lustre",
        "gpfs", "ocfs2", "gfs2", "9p", "virtiofs", "fuse.sshfs", "fuse.glusterfs", "fuse.ceph",
    }
)  # fmt: skip


def network_fstype(path: str, table: list[MountEntry] | None = None) -> str | None:
    """The type of the network filesystem `path` lies on (nfs4, cifs, …), or None: a local
    one, or it cannot be told (no mountinfo, no such path). `table`: mountinfo as read (tests)."""
    try:
        dev = os.stat(path).st_dev
        entries = read_mountinfo() if table is None else table
    except OSError:
        return None
    # The last mount of that device is the one on top (a bind mount shares its device).
    here = [e for e in entries if _dev_of(e) == dev]
    if not here:
        return None
    fstype = here[-1].fstype
    return fstype if fstype in NETWORK_FSTYPES else None


def _dev_of(entry: MountEntry) -> int | None:
    try:
        return entry.dev
    except ValueError:
        return None
