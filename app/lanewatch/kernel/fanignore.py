"""Stop busy folders outside the watched prefixes from waking us: kernel ignore marks (6.0+).

A filesystem mark sees every write on the filesystem; `FanotifyWatcher` keeps only those under
its prefixes. `ForeignDirs.consider(path)` is told of each dropped event: it puts an evictable
ignore mark on the event's folder (`FAN_MARK_IGNORE | FAN_MARK_EVICTABLE`, with
`FAN_EVENT_ON_CHILD`), so the kernel stops queueing writes to the files directly in that folder.
The mark covers that one folder's files, not its subfolders, and the kernel drops it when it
evicts the folder's inode, so the cost is bounded by the folders in use.

A mark sits on an inode, not a path, so it must never come to cover a file under a prefix:

- never on a folder under (or equal to) a prefix; on an ancestor it is harmless (its own files
  are outside every prefix);
- never on a folder some mount in our mount namespace shows at or under a prefix (with a bind
  mount, one folder has a path per mount that shows it: `_aliases`);
- a second, file-handle group reports every folder rename on the marked filesystems
  (`FAN_RENAME | FAN_ONDIR`; renames of files are ignored in the kernel). A folder moved from
  outside the prefixes to under (or above) one may carry ignore marks: we drop every ignore
  mark and report the interval lost, as for an overflow (the consumer rescans), since writes
  between the rename and our reading it were not queued. Likewise when that group overflows,
  or when the mount table changes at, under or above a prefix.

Without Linux 6.0 (ignore marks with `FAN_MARK_IGNORE`), 5.19 (evictable marks) or 5.17
(`FAN_RENAME`), `ForeignDirs.available` is False with a reason and nothing changes: every write
on the filesystem still wakes the reader. See docs/fanotify.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import select
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from lanewatch.linux.fanotify_abi import (
    AT_FDCWD,
    EVENT_METADATA,
    FAN_CLASS_NOTIF,
    FAN_CLOEXEC,
    FAN_MARK_ADD,
    FAN_MARK_FILESYSTEM,
    FAN_MARK_REMOVE,
    FAN_NONBLOCK,
    FAN_ONDIR,
    FAN_Q_OVERFLOW,
    INFO_HEADER,
    FanotifyError,
    _libc,
    _require_libc,
)
from lanewatch.linux.mountinfo import read_mountinfo
from lanewatch.linux.paths import is_under
from lanewatch.linux.proc import SELF_MOUNTINFO, fd_path

log = logging.getLogger(__name__)

# <linux/fanotify.h>, beyond what the binding itself uses
FAN_MARK_DONT_FOLLOW = 0x04
FAN_MARK_ONLYDIR = 0x08
FAN_MARK_IGNORED_SURV_MODIFY = 0x40  # a folder's ignore mask must survive its files' writes
FAN_MARK_FLUSH = 0x80
FAN_MARK_EVICTABLE = 0x200  # Linux 5.19+: the mark does not pin the inode in the cache
FAN_MARK_IGNORE = 0x400  # Linux 6.0+: FAN_ONDIR / FAN_EVENT_ON_CHILD apply to the ignore mask
FAN_EVENT_ON_CHILD = 0x0800_0000
FAN_RENAME = 0x1000_0000  # Linux 5.17+
FAN_REPORT_DIR_FID = 0x400
FAN_REPORT_NAME = 0x800
INFO_OLD_DFID_NAME = 10
INFO_NEW_DFID_NAME = 12

IGNORE_FLAGS = (
    FAN_MARK_ADD
    | FAN_MARK_IGNORE
    | FAN_MARK_IGNORED_SURV_MODIFY
    | FAN_MARK_EVICTABLE
    | FAN_MARK_DONT_FOLLOW
    | FAN_MARK_ONLYDIR
)
MAX_FOLDERS = 4096  # folders remembered; past that we forget them all and learn again
REMARK_AFTER = 1.0  # seconds: a folder still waking us this long after its mark lost it
_FSID = struct.Struct("=Q")
_HANDLE = struct.Struct("=Ii")  # struct file_handle: handle_bytes, handle_type
READY = "busy folders outside the roots are ignored in the kernel"


def _related(path: str, prefixes: Iterable[str]) -> bool:
    """`path` is at, under or above one of `prefixes`."""
    probe = path.rstrip("/") + "/"
    return any(probe.startswith(p) or p.startswith(probe) for p in prefixes)


Mount = tuple[int, str, str]  # device, the folder of the filesystem it shows, mount point


def read_mounts() -> list[Mount]:
    """Every mount in our namespace."""
    out: list[Mount] = []
    for entry in read_mountinfo():
        with contextlib.suppress(ValueError):
            out.append((entry.dev, entry.root, entry.mount_point))
    return out


def _join(base: str, rest: str) -> str:
    """`base` + `rest` (empty, or starting with "/") as one path."""
    return (base.rstrip("/") + rest) or "/"


class ForeignDirs:
    """Ignore marks for `group` (a `FanotifyGroup`) on folders outside `prefixes()`.

    Used by the watcher's reader thread only (`consider`, `handle`), plus `forget` when a
    prefix is added. `start(paths)` raises nothing: it sets `available` and `reason`.
    """

    def __init__(self, group_fd: int, prefixes: Callable[[], tuple[str, ...]], mask: int) -> None:
        self._group_fd = group_fd
        self._prefixes = prefixes
        self._mask = mask | FAN_EVENT_ON_CHILD
        self.available = False
        self.reason = "not started"
        self._renames = -1  # the file-handle group that reports folder renames
        self._mountinfo = -1
        self._mount_fds: dict[int, int] = {}  # fsid -> a descriptor on it, for open_by_handle
        # Filesystems watched for folder renames, each with the mount its watched path is seen
        # through (the folder of the filesystem it shows, its mount point): the only ones we
        # put ignore marks on, and on a folder only when no mount shows it at or under a prefix.
        self._watchable: dict[int, tuple[str, str]] = {}
        self._mounts: list[Mount] = []
        # folder -> when marked (0: never to be marked; negative: when marking it failed)
        self._folders: dict[str, float] = {}
        self.marked = 0  # ignore marks placed since the last forget (some may be evicted)
        # A mark was placed since the last loss we reported: a rename read now may have moved
        # it (kept through `forget`, which may run between a rename and our reading it).
        self._dirty = False
        self._lock = threading.Lock()  # the reader places marks; `forget` may come from add_path
        self._mount_watch = select.poll()  # the mount table alone, polled before each new mark
        self._pending: list[str] = []  # losses found while placing marks, for the next `handle`
        self.placed = 0  # ignore marks placed, in all
        self.forgotten = 0  # times every mark was dropped
        self.losses = 0  # times we reported an interval lost
        self.renames: deque[tuple[str | None, str | None]] = deque(maxlen=64)  # latest seen

    # -- life ------------------------------------------------------------------------------
    def start(self, paths: Iterable[str]) -> None:
        try:
            self._start(list(paths))
        except OSError as exc:
            self.close()
            self.reason = exc.reason if isinstance(exc, FanotifyError) else str(exc)
            return
        self.available = True
        self.reason = READY

    def _start(self, paths: list[str]) -> None:
        libc = _require_libc()
        open_by_handle = getattr(libc, "open_by_handle_at", None)
        if open_by_handle is None:
            raise FanotifyError(errno.ENOSYS, "the C library has no open_by_handle_at")
        open_by_handle.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        open_by_handle.restype = ctypes.c_int
        flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DIR_FID | FAN_REPORT_NAME
        fd = libc.fanotify_init(flags, os.O_RDONLY)
        if fd < 0:
            err = ctypes.get_errno()
            raise FanotifyError(err, f"no file-handle fanotify group ({os.strerror(err)})")
        self._renames = fd
        # Opened before the table is read: a mount made in between is reported by the poll.
        self._mountinfo = os.open(SELF_MOUNTINFO, os.O_RDONLY | os.O_CLOEXEC)
        self._mount_watch.register(self._mountinfo, select.POLLPRI | select.POLLERR)
        self._mounts = read_mounts()
        why = "no watched filesystem"
        probe = b""
        for p in paths:
            dev = os.stat(p).st_dev
            if dev in self._watchable:
                continue
            raw = os.fsencode(p)
            mark = FAN_MARK_ADD | FAN_MARK_FILESYSTEM
            # Every folder rename on the filesystem; renames of files ignored in the kernel.
            if libc.fanotify_mark(fd, mark, FAN_RENAME | FAN_ONDIR, AT_FDCWD, raw) != 0:
                why = f"no folder-rename events ({os.strerror(ctypes.get_errno())})"
                continue  # no ignore marks on this filesystem, the others may still have them
            ign = mark | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY
            if libc.fanotify_mark(fd, ign, FAN_RENAME, AT_FDCWD, raw) != 0:
                why = f"no ignore marks ({os.strerror(ctypes.get_errno())})"
                remove = FAN_MARK_REMOVE | FAN_MARK_FILESYSTEM
                libc.fanotify_mark(fd, remove, FAN_RENAME | FAN_ONDIR, AT_FDCWD, raw)
                continue
            fsid = _FSID.unpack(struct.pack("=Q", os.statvfs(p).f_fsid))[0]
            if fsid not in self._mount_fds:
                self._mount_fds[fsid] = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
            # The mount `p` is seen through: prefixes map to folders of the filesystem by it.
            real = os.path.realpath(p)
            ours = [(r, m) for d, r, m in self._mounts if d == dev and is_under(real, m)]
            self._watchable[dev] = max(ours, key=lambda rm: len(rm[1]), default=("/", "/"))
            probe = probe or raw
        if not self._watchable:
            raise FanotifyError(errno.EXDEV, why)
        # An evictable ignore mark on a folder of ours, at once removed: does the kernel have it?
        if libc.fanotify_mark(self._group_fd, IGNORE_FLAGS, self._mask, AT_FDCWD, probe) != 0:
            err = ctypes.get_errno()
            raise FanotifyError(err, f"no evictable ignore marks ({os.strerror(err)})")
        libc.fanotify_mark(self._group_fd, FAN_MARK_FLUSH, 0, AT_FDCWD, None)

    def close(self) -> None:
        for fd in (self._renames, self._mountinfo, *self._mount_fds.values()):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._renames = self._mountinfo = -1
        self._mount_fds = {}
        self.available = False

    def register(self, poller: select.poll) -> None:
        """Add our descriptors to the reader's poll set."""
        if self._renames >= 0:
            poller.register(self._renames, select.POLLIN)
        if self._mountinfo >= 0:
            poller.register(self._mountinfo, select.POLLPRI | select.POLLERR)

    # -- placing marks ---------------------------------------------------------------------
    def consider(self, path: str) -> None:
        """An event at `path` was dropped: ignore its folder in the kernel if that is safe."""
        if not self.available:
            return
        with self._lock:
            self._consider(path)

    def _consider(self, path: str) -> None:
        folder = path.rpartition("/")[0] or "/"
        when = self._folders.get(folder)
        now = time.monotonic()
        if when is not None and (when == 0.0 or now - abs(when) < REMARK_AFTER):
            return  # never to be marked, or marked just now (its queued events still come)
        if len(self._folders) >= MAX_FOLDERS:
            self._forget()
        # A mount made while the reader drained the queue: learn of it before marking (this
        # event may have come through it); a loss found is reported at the next `handle`.
        if self._mount_watch.poll(0):
            self._pending += self._mounts_changed()
        if not self._safe(folder, self._prefixes()):
            self._folders[folder] = 0.0
            return
        libc = _libc()
        assert libc is not None
        raw = os.fsencode(folder)
        if libc.fanotify_mark(self._group_fd, IGNORE_FLAGS, self._mask, AT_FDCWD, raw) != 0:
            err = ctypes.get_errno()
            if err == errno.ENOSPC:  # too many marks: start again from none
                self._forget()
            self._folders[folder] = -now  # gone, not a folder, ...: not again at once
            return
        self._folders[folder] = now
        self.marked += 1
        self.placed += 1
        self._dirty = True

    def is_ignored(self, folder: str) -> bool:
        """We put an ignore mark on `folder` since the last forget (the kernel may have
        evicted it since)."""
        return self._folders.get(folder, 0.0) > 0

    def _safe(self, folder: str, prefixes: Iterable[str]) -> bool:
        """`folder` may carry an ignore mark: it is on a filesystem we watch for folder
        renames, and no mount of that filesystem in our namespace shows it at or under a
        prefix (with a bind mount, one folder has a path per mount that shows it)."""
        if any(is_under(folder, p) for p in prefixes):
            return False
        try:
            dev = os.stat(folder, follow_symlinks=False).st_dev
        except OSError:
            return False
        if dev not in self._watchable:
            return False
        aliases = self._aliases(dev, folder)
        if aliases is None:
            return False
        return not any(is_under(a, p) for a in aliases for p in prefixes)

    def _aliases(self, dev: int, folder: str) -> list[str] | None:
        """Every path our mounts of filesystem `dev` give `folder` (one of them); None when
        the mount it is seen through cannot be told (then it is never marked)."""
        mine = [(shown, point) for d, shown, point in self._mounts if d == dev]
        through = [(shown, point) for shown, point in mine if is_under(folder, point)]
        if not through:
            return None
        shown, point = max(through, key=lambda sp: len(sp[1]))
        inside = _join(shown, folder[len(point.rstrip("/")) :])  # its path in the filesystem
        return [
            _join(point, inside[len(shown.rstrip("/")) :])
            for shown, point in mine
            if is_under(inside, shown)
        ]

    def forget(self) -> None:
        """Drop every ignore mark (the group's only inode marks) and what we remember."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        libc = _libc()
        if libc is not None and self._renames >= 0:
            libc.fanotify_mark(self._group_fd, FAN_MARK_FLUSH, 0, AT_FDCWD, None)
        self._folders.clear()
        if self.marked:
            self.forgotten += 1
        self.marked = 0

    # -- what may have carried a mark under a prefix -------------------------------------------
    def handle(self, ready: set[int]) -> list[str]:
        """Read our descriptors that `ready` holds; the reasons an interval was lost, if any."""
        with self._lock:
            reasons, self._pending = self._pending, []
            if self._mountinfo in ready:
                reasons += self._mounts_changed()
        if self._renames in ready:
            reasons += self._read_renames()
        if not reasons:
            return []
        with self._lock:
            self._forget()
            if not self._dirty:
                return []  # no ignore mark was placed: nothing was hidden
            self._dirty = False
        self.losses += 1
        return reasons[:1]

    def _read_renames(self) -> list[str]:
        reasons: list[str] = []
        while True:
            try:
                buf = os.read(self._renames, 64 * 1024)
            except BlockingIOError:
                return reasons
            if not buf:
                return reasons
            offset = 0
            while offset + EVENT_METADATA.size <= len(buf):
                length, _v, _r, meta_len, mask, fd, _pid = EVENT_METADATA.unpack_from(buf, offset)
                if length < EVENT_METADATA.size or offset + length > len(buf):
                    break
                if fd >= 0:
                    os.close(fd)  # never for this kind of group; be safe
                if mask & FAN_Q_OVERFLOW:
                    reasons.append("folder renames were lost (fanotify queue overflow)")
                elif mask & FAN_ONDIR:
                    start = offset + max(meta_len, EVENT_METADATA.size)
                    why = self._rename(buf, start, offset + length)
                    if why:
                        reasons.append(why)
                offset += length

    def _rename(self, buf: bytes, start: int, end: int) -> str | None:
        old = new = None
        offset = start
        while offset + INFO_HEADER.size <= end:
            kind, _pad, length = INFO_HEADER.unpack_from(buf, offset)
            if length < INFO_HEADER.size or offset + length > end:
                break
            if kind in (INFO_OLD_DFID_NAME, INFO_NEW_DFID_NAME):
                where = self._path(buf, offset + INFO_HEADER.size, offset + length)
                if kind == INFO_OLD_DFID_NAME:
                    old = where
                else:
                    new = where
            offset += length
        self.renames.append((old, new))
        prefixes = self._prefixes()
        came_from_outside = old is None or not any(is_under(old, p) for p in prefixes)
        landed_near = new is None or _related(new, prefixes)
        if came_from_outside and landed_near:
            return f"a folder moved to {new or 'a place we could not tell'} from outside the roots"
        return None

    def _path(self, buf: bytes, start: int, end: int) -> str | None:
        """The path of the folder + name in one DFID_NAME record; None if it cannot be told."""
        if start + _FSID.size + _HANDLE.size > end:
            return None
        fsid = _FSID.unpack_from(buf, start)[0]
        handle_at = start + _FSID.size
        size, _type = _HANDLE.unpack_from(buf, handle_at)
        name_at = handle_at + _HANDLE.size + size
        if name_at > end or fsid not in self._mount_fds:
            return None
        name = buf[name_at:end].split(b"\0", 1)[0]
        libc = _libc()
        assert libc is not None
        fd = libc.open_by_handle_at(self._mount_fds[fsid], buf[handle_at:name_at], os.O_PATH)
        if fd < 0:
            return None  # gone already: we cannot tell where it was
        try:
            folder = fd_path(fd)
        finally:
            os.close(fd)
        if folder is None or folder.endswith(" (deleted)"):
            return None
        return os.path.join(folder, os.fsdecode(name))

    def _mounts_changed(self) -> list[str]:
        """A mount came or went. A new mount of a watched filesystem at, under or above a
        prefix may show a folder we ignore under a prefix: a loss, unless what it shows lies
        under a prefix itself (no ignored folder there). While a watched filesystem is
        mounted more than once we put no new marks on it (a path no longer names one folder)."""
        with contextlib.suppress(OSError):
            os.lseek(self._mountinfo, 0, os.SEEK_SET)
            while os.read(self._mountinfo, 65536):
                pass
        try:
            mounts = read_mounts()
        except OSError:
            return ["the mount table could not be read"]
        added = set(mounts).difference(self._mounts)
        self._mounts = mounts
        # Which folders a mount shows may have changed: judge the refused ones again.
        self._folders = {k: v for k, v in self._folders.items() if v != 0.0}
        prefixes = self._prefixes()
        for dev, shown, point in added:
            if dev not in self._watchable or not _related(point, prefixes):
                continue
            if not any(is_under(shown, p) for p in self._fs_prefixes(dev, prefixes)):
                return [f"{point} was mounted at or above a root"]
        return []

    def _fs_prefixes(self, dev: int, prefixes: Iterable[str]) -> list[str]:
        """The prefixes on filesystem `dev`, as folders of that filesystem (ending in "/")."""
        shown, point = self._watchable[dev]
        base = point.rstrip("/") + "/"
        out = []
        for p in prefixes:
            try:
                if os.stat(p).st_dev != dev:
                    continue
            except OSError:
                pass  # not there now: count it, which only makes a loss more likely
            if p.startswith(base) or point == "/":
                rel = p[len(base) :] if p.startswith(base) else p.lstrip("/")
                out.append(shown.rstrip("/") + "/" + rel)
        return out


def foreign_dirs_available(path: str) -> tuple[bool, str]:
    """Whether busy folders outside the prefixes can be ignored in the kernel for a watch of
    `path`'s filesystem, and why not; sets up a throwaway group, never raises."""
    libc = _libc()
    if libc is None:
        return False, "the C library has no fanotify_init"
    fd = libc.fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK, os.O_RDONLY)
    if fd < 0:
        return False, os.strerror(ctypes.get_errno())
    try:
        probe = ForeignDirs(fd, lambda: (), 0x0A)
        probe.start([path])
        probe.close()
        return probe.reason == READY, probe.reason
    finally:
        os.close(fd)
