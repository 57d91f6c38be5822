"""Paths as a process in another mount namespace names them, turned into ours.

A fenced lane (lanes/fence.py) sees a folder of its namespace at /tmp. The kernel names its
files by *its* mount table: /proc/PID/fd/N and fanotify both say `/tmp/fixed.json`, which in
ours is shared temp. `MountViews.ours(pid, path)` finds the process's mount that holds the
path (its /proc/PID/mountinfo), and the mount of ours that shows the same folder of the same
filesystem, and rewrites the path: `<namespace>/tmp/fixed.json`. A process in our own mount
namespace, or one we cannot read (another user's, gone), keeps its path as given: unknown is
never turned into a guess. Tables are kept per namespace id (a fence mounts at its start), and
read again for each process not seen in it yet: the kernel reuses a freed namespace's id, and
a new lane's fence that got the id of one gone would otherwise be read with the old one's
mounts (its shared /tmp files named as that gone lane's private ones).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable

from lanewatch.linux.mountinfo import MountEntry, mount_id, read_mountinfo
from lanewatch.linux.paths import is_under
from lanewatch.linux.proc import PROC, fd_path

MAX_TABLES = 256
MAX_MEMBERS = 1024  # pids remembered per namespace; past that one more read, then fresh


def _mount_ns(pid: int | str, dfd: int | None = None) -> str | None:
    try:
        if dfd is not None:
            return os.readlink("ns/mnt", dir_fd=dfd)
        return os.readlink(f"{PROC}/{pid}/ns/mnt")
    except OSError:
        return None


def _holding(table: list[MountEntry], path: str) -> MountEntry | None:
    """The last-mounted entry whose mount point holds `path` (the one a lookup reaches)."""
    best: MountEntry | None = None
    for entry in table:
        if is_under(path, entry.mount_point) and (
            best is None or len(entry.mount_point) >= len(best.mount_point)
        ):
            best = entry
    return best


def translate(theirs: list[MountEntry], ours: list[MountEntry], path: str) -> str | None:
    """`path` of a process with mount table `theirs`, as a path in `ours`; None when no
    mount of ours shows that folder. Pure."""
    mine = _holding(theirs, path)
    if mine is None:
        return None
    inside = os.path.relpath(path, mine.mount_point)
    folder = os.path.normpath(os.path.join(mine.root, inside))
    best: tuple[int, int, str] | None = None
    for entry in ours:
        if entry.device != mine.device or not is_under(folder, entry.root):
            continue
        rest = os.path.relpath(folder, entry.root)
        candidate = os.path.normpath(os.path.join(entry.mount_point, rest))
        if _holding(ours, candidate) is not entry:
            continue  # covered by a later mount in ours: that path shows something else
        rank = (len(entry.root), -len(entry.mount_point), candidate)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return None if best is None else best[2]


class MountViews:
    """Our paths for what processes in other mount namespaces name (see the module doc)."""

    def __init__(self) -> None:
        self._self = _mount_ns("self")
        self._ours: list[MountEntry] | None = None
        self._tables: dict[str, list[MountEntry] | None] = {}
        self._members: dict[str, set[int]] = {}  # the pids each table was read for or seen in

    def ours(self, pid: int, path: str) -> str:
        """`path` as process `pid` names it, in our mount namespace's words."""
        view = self.of(pid)
        return path if view is None else view(path)

    def of(self, pid: int, dfd: int | None = None) -> Callable[[str], str] | None:
        """How to turn the paths process `pid` names into ours; None when they are ours
        already (our mount namespace) or cannot be known. `dfd`: its pinned /proc folder."""
        ns = _mount_ns(pid, dfd)
        if ns is None or ns == self._self:
            return None
        members = self._members.get(ns)
        if members is None or pid not in members:
            if ns not in self._tables and len(self._tables) >= MAX_TABLES:
                gone = next(iter(self._tables))
                del self._tables[gone]
                self._members.pop(gone, None)
            where = f"{PROC}/{pid}/mountinfo" if dfd is None else f"{PROC}/self/fd/{dfd}/mountinfo"
            try:
                table: list[MountEntry] | None = read_mountinfo(where)
            except OSError:
                table = None
            if members is None or table != self._tables.get(ns) or len(members) >= MAX_MEMBERS:
                members = self._members[ns] = set()  # a new namespace, or an id reused
            self._tables[ns] = table
            members.add(pid)
        theirs = self._tables[ns]
        if theirs is None:
            return None
        if self._ours is None:
            try:
                self._ours = read_mountinfo()
            except OSError:
                return None
        ours = self._ours

        def view(path: str) -> str:
            found = translate(theirs, ours, path)
            return path if found is None else found

        return view


MAX_HANDLE_SZ = 128
AT_EMPTY_PATH = 0x1000


class Rehome:
    """Our path for a descriptor on a mount we do not have (fanotify's event fds).

    A fenced lane's mounts are its own; once its last process exits they are detached, and
    the kernel names a file reached through one by its path inside that mount alone
    (`/x` for the lane's `/tmp/x`). The file is the same: its handle, opened on our mount of
    the same filesystem, gives the path we know it by. Needs CAP_DAC_READ_SEARCH (root, as
    the kernel source is); any failure leaves the kernel's name as it was.
    """

    def __init__(self) -> None:
        self._ids: set[int] | None = None
        self._foreign: set[int] = set()  # mount ids not in our table when it was read again
        self._mount_fds: dict[int, int] = {}

    def close(self) -> None:
        for fd in self._mount_fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._mount_fds.clear()

    def path(self, fd: int, path: str) -> str:
        """`path` (the kernel's name for our fd `fd`), or our name for the same file when
        `fd` lies on a mount that is not ours."""
        mnt = mount_id(fd)
        if mnt is None:
            return path
        if mnt not in self._foreign and (self._ids is None or mnt not in self._ids):
            try:  # unknown: maybe a mount of ours made since we read the table
                self._ids = {m.mount_id for m in read_mountinfo()}
            except OSError:
                return path
            if mnt in self._ids:
                return path
            if len(self._foreign) > 4096:
                self._foreign.clear()
            self._foreign.add(mnt)
        elif mnt not in self._foreign:
            return path
        found = self._by_handle(fd)
        return path if found is None else found

    def _by_handle(self, fd: int) -> str | None:
        import ctypes  # only for the rare event on a mount of another namespace

        try:
            dev = os.fstat(fd).st_dev
        except OSError:
            return None
        mount_fd = self._mount_fd(dev)
        if mount_fd is None:
            return None
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
        struct.pack_into("=Ii", buf, 0, MAX_HANDLE_SZ, 0)
        mnt = ctypes.c_int()
        if libc.name_to_handle_at(fd, b"", buf, ctypes.byref(mnt), AT_EMPTY_PATH) != 0:
            return None
        opened = libc.open_by_handle_at(mount_fd, buf, os.O_PATH | os.O_CLOEXEC)
        if opened < 0:
            return None
        try:
            return fd_path(opened)
        finally:
            os.close(opened)

    def _mount_fd(self, dev: int) -> int | None:
        if dev in self._mount_fds:
            return self._mount_fds[dev]
        try:
            mounts = read_mountinfo()
        except OSError:
            return None
        whole = [m for m in mounts if m.root == "/" and _dev(m) == dev]
        if not whole:
            return None
        try:
            # Not O_PATH: open_by_handle_at refuses one (EBADF).
            where = min(whole, key=lambda m: len(m.mount_point)).mount_point
            fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        self._mount_fds[dev] = fd
        return fd


def _dev(entry: MountEntry) -> int | None:
    try:
        return entry.dev
    except ValueError:
        return None
