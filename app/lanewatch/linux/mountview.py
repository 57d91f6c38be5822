"""Paths as a process in another mount namespace names them, turned into ours.

A fenced lane (runner/fence.py) sees a folder of its namespace at /tmp. The kernel names its
files by *its* mount table: /proc/PID/fd/N and fanotify both say `/tmp/fixed.json`, which in
ours is shared temp. `MountViews.ours(pid, path)` finds the process's mount that holds the
path (its /proc/PID/mountinfo), and the mount of ours that shows the same folder of the same
filesystem, and rewrites the path: `<namespace>/tmp/fixed.json`. A process in our own mount
namespace, or one we cannot read (another user's, gone), keeps its path as given: unknown is
never turned into a guess.

Tables are remembered, and a remembered table must never describe a namespace other than the
one asked about. The kernel gives a dead namespace's number (`mnt:[4026532174]`) to the next
one made: a table kept by that number renamed a new lane's writes through the mounts of a lane
long gone. So a table is kept by the namespace's unique id where the kernel has one
(`linux/mountns.py`), else by its number together with the process it was read from, and used
again only while that process still lives in that namespace (then the namespace never died and
its number was never handed on); otherwise it is read again. Our own table is read again
whenever the kernel says it changed (`OurMounts`). Blind spot: mounts a namespace makes after
its table was read (a fence mounts before its command runs, so a lane's writes never come
first).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from lanewatch.linux.mountinfo import MountEntry, OurMounts, mount_id, parse_mountinfo
from lanewatch.linux.mountns import NsId, mount_ns
from lanewatch.linux.paths import is_under
from lanewatch.linux.proc import PROC, fd_path, read_at, read_stat, stat_at

MAX_TABLES = 256


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


@dataclass(frozen=True, slots=True)
class _Table:
    """A namespace's mounts (None: unreadable), and the process they were read from."""

    entries: list[MountEntry] | None
    ns: NsId
    pid: int
    start_ticks: int | None


class Parses:
    """`parse_mountinfo` by the table's very bytes, kept from one use of a `MountViews` to the
    next (a scan to the next): every table is still read each time; only one that reads the
    same as before is not parsed again. Parsing is a pure function of the bytes. Not
    thread-safe: one caller's (the prober's scan)."""

    def __init__(self) -> None:
        self._last: dict[bytes, list[MountEntry]] = {}
        self._now: dict[bytes, list[MountEntry]] = {}

    def parse(self, data: bytes) -> list[MountEntry]:
        entries = self._now.get(data)
        if entries is None:
            entries = self._last.get(data)
            if entries is None:
                entries = parse_mountinfo(data)
            self._now[data] = entries
        return entries

    def turn(self) -> None:
        """A new use begins: keep only the tables the last one read."""
        self._last, self._now = self._now, {}


class MountViews:
    """Our paths for what processes in other mount namespaces name (see the module doc).
    `parses`: the caller's, kept between uses (`Parses`)."""

    def __init__(self, parses: Parses | None = None) -> None:
        self._parses = parses
        if parses is not None:
            parses.turn()
        self._self = mount_ns("self")
        self._self_link = _link("self")
        self._ours = OurMounts()
        self._tables: OrderedDict[tuple[str, int], _Table] = OrderedDict()
        self.reads = 0  # tables of other namespaces read (the soak and the tests count them)

    def close(self) -> None:
        self._ours.close()

    def ours(self, pid: int, path: str) -> str:
        """`path` as process `pid` names it, in our mount namespace's words."""
        view = self.of(pid)
        return path if view is None else view(path)

    def in_ours(self, pid: int, dfd: int | None = None) -> bool:
        """Whether process `pid` (or pinned `dfd`) is in our own mount namespace now: its paths
        are ours (`of` is None). One readlink."""
        return self._self_link is not None and _link(pid, dfd) == self._self_link

    def of(self, pid: int, dfd: int | None = None) -> Callable[[str], str] | None:
        """How to turn the paths process `pid` names into ours; None when they are ours
        already (our mount namespace) or cannot be known. `dfd`: its pinned /proc folder."""
        if _link(pid, dfd) == self._self_link:
            return None  # ours: alive while we are, so its number is no one else's (cheap)
        ns = mount_ns(pid, dfd)
        if ns is None or (self._self is not None and ns.same(self._self)):
            return None
        theirs = self._theirs(pid, dfd, ns)
        if theirs is None:
            return None
        ours = self._ours.table()
        if ours is None:
            return None

        said: dict[str, str] = {}  # translate is pure: each path asked once per view

        def view(path: str) -> str:
            if not path.startswith("/"):
                return path  # socket:[N], pipe:[N], anon_inode:...: under no mount point
            known = said.get(path)
            if known is None:
                found = translate(theirs, ours, path)
                known = said[path] = path if found is None else found
            return known

        return view

    def _theirs(self, pid: int, dfd: int | None, ns: NsId) -> list[MountEntry] | None:
        key = ("id", ns.unique) if ns.unique is not None else ("inode", ns.inode)
        kept = self._tables.get(key)
        # A table not read (the process gone mid-read, another user's) is tried again.
        fresh = kept is not None and kept.entries is not None
        if fresh and kept is not None and (ns.unique is not None or _still_in(kept)):
            self._tables.move_to_end(key)
            return kept.entries
        table = self._read(pid, dfd, ns)
        self._tables[key] = table
        self._tables.move_to_end(key)
        if len(self._tables) > MAX_TABLES:
            self._tables.popitem(last=False)
        return table.entries

    def _read(self, pid: int, dfd: int | None, ns: NsId) -> _Table:
        """The mounts of `pid`'s namespace `ns`, as read now (entries None if unreadable or
        if the process left `ns` while we read)."""
        self.reads += 1
        try:
            if dfd is not None:
                data = read_at(dfd, "mountinfo")
                st = stat_at(pid, dfd)
            else:
                with open(f"{PROC}/{pid}/mountinfo", "rb") as f:
                    data = f.read()
                st = read_stat(pid)
        except OSError:
            return _Table(None, ns, pid, None)
        after = mount_ns(pid, dfd)
        if st is None or after is None or after != ns:
            return _Table(None, ns, pid, None)  # gone or moved while we read: not this table
        parsed = self._parses.parse(data) if self._parses is not None else parse_mountinfo(data)
        return _Table(parsed, ns, pid, st.start_ticks)


def _link(pid: int | str, dfd: int | None = None) -> str | None:
    """`mnt:[N]` of process `pid` (or of pinned `dfd`); None when it cannot be read."""
    try:
        if dfd is not None:
            return os.readlink("ns/mnt", dir_fd=dfd)
        return os.readlink(f"{PROC}/{pid}/ns/mnt")
    except OSError:
        return None


def _still_in(kept: _Table) -> bool:
    """The process a table was read from still lives in that namespace: then the namespace
    never died, and its number still names it."""
    if kept.start_ticks is None:
        return False
    now = mount_ns(kept.pid)
    try:
        st = read_stat(kept.pid)  # after the namespace: the same process both times
    except OSError:
        return False
    return now == kept.ns and st is not None and st.start_ticks == kept.start_ticks


MAX_HANDLE_SZ = 128
AT_EMPTY_PATH = 0x1000


class Rehome:
    """Our path for a descriptor on a mount we do not have (fanotify's event fds).

    A fenced lane's mounts are its own; once its last process exits they are detached, and
    the kernel names a file reached through one by its path inside that mount alone
    (`/x` for the lane's `/tmp/x`). The file is the same: its handle, opened on our mount of
    the same filesystem, gives the path we know it by. Needs CAP_DAC_READ_SEARCH (root, as
    the kernel source is); any failure leaves the kernel's name as it was, and says so.

    Mount ids are reused as well (a dead lane's mount id may be one of ours tomorrow): which
    ids are ours is known from our own table, read again whenever it changed (`OurMounts`);
    the event's descriptor holds its mount, so its id names that mount while we look.
    """

    def __init__(self) -> None:
        self._ours = OurMounts()
        self._version = -1
        self._ids: set[int] = set()
        self._mount_fds: dict[int, int] = {}

    def close(self) -> None:
        self._drop_mount_fds()
        self._ours.close()

    def _drop_mount_fds(self) -> None:
        for fd in self._mount_fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._mount_fds.clear()

    def path(self, fd: int, path: str) -> str:
        """`path` (the kernel's name for our fd `fd`), or our name for the same file when
        `fd` lies on a mount that is not ours."""
        named = self.name(fd, path)
        return path if named is None else named

    def name(self, fd: int, path: str) -> str | None:
        """Our name for the file behind `fd` (the kernel named it `path`): `path` itself when
        `fd` lies on a mount of ours; None when it lies on another namespace's mount and
        could not be renamed (then `path` is in that namespace's words, not ours)."""
        mnt = mount_id(fd)
        ours = self._ours.table()
        if mnt is None or ours is None:
            return path  # the kernel does not say: as before, the kernel's name
        if self._ours.version != self._version:
            self._version = self._ours.version
            self._ids = {m.mount_id for m in ours}
            self._drop_mount_fds()  # a device may be mounted elsewhere now
        if mnt in self._ids:
            return path
        return self._by_handle(fd, ours)

    def _by_handle(self, fd: int, ours: list[MountEntry]) -> str | None:
        import ctypes  # only for events on a mount of another namespace

        from lanewatch.linux.libc import libc as c_library

        try:
            dev = os.fstat(fd).st_dev
        except OSError:
            return None
        mount_fd = self._mount_fd(dev, ours)
        if mount_fd is None:
            return None
        libc = c_library()
        if libc is None:
            return None
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

    def _mount_fd(self, dev: int, ours: list[MountEntry]) -> int | None:
        if dev in self._mount_fds:
            return self._mount_fds[dev]
        whole = [m for m in ours if m.root == "/" and _dev(m) == dev]
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
