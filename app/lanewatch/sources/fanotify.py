"""Kernel write attribution through Linux fanotify, bound with ctypes (no compiler at install).

fanotify reports, for every write to a marked filesystem, the writer's pid and an open
descriptor to the file, even when the write lasted microseconds. We only ever open a
*notification* group (FAN_CLASS_NOTIF): no permission events, so a writer is never blocked
by lanewatch and nobody waits if lanewatch dies.

Layers, lowest first:

- `fanotify_available()`: can this process use fanotify here, with a reason line.
- `events_from_buffer()`: parse what read(2) returned into `FanEvent`s (pure but for readlink).
- `FanotifyGroup`: one group fd; `mark()` a path's filesystem, `read()` an `EventBatch`.
- `FanotifyWatcher`: a reader thread that hands batches to a callback and closes every event
  descriptor as soon as the callback returns; with `ignore_foreign`, busy folders outside its
  prefixes stop waking it (`sources.fanignore`, Linux 6.0+).

See docs/fanotify.md for what it can and cannot see. Importing this module never raises,
on any platform; only calling into it on a system without fanotify does.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import logging
import os
import select
import stat
import struct
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lanewatch.sources.fanignore import ForeignDirs

log = logging.getLogger(__name__)

# --- <linux/fanotify.h> -------------------------------------------------------------------
FAN_ACCESS = 0x0000_0001
FAN_MODIFY = 0x0000_0002
FAN_ATTRIB = 0x0000_0004
FAN_CLOSE_WRITE = 0x0000_0008
FAN_CLOSE_NOWRITE = 0x0000_0010
FAN_OPEN = 0x0000_0020
FAN_MOVED_FROM = 0x0000_0040
FAN_MOVED_TO = 0x0000_0080
FAN_CREATE = 0x0000_0100
FAN_DELETE = 0x0000_0200
FAN_DELETE_SELF = 0x0000_0400
FAN_MOVE_SELF = 0x0000_0800
FAN_OPEN_EXEC = 0x0000_1000
FAN_Q_OVERFLOW = 0x0000_4000
FAN_FS_ERROR = 0x0000_8000
FAN_OPEN_PERM = 0x0001_0000
FAN_ACCESS_PERM = 0x0002_0000
FAN_OPEN_EXEC_PERM = 0x0004_0000
FAN_ONDIR = 0x4000_0000
FAN_ALL_PERM_EVENTS = FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_OPEN_EXEC_PERM

# fanotify_init flags
FAN_CLOEXEC = 0x01
FAN_NONBLOCK = 0x02
FAN_CLASS_NOTIF = 0x00
FAN_REPORT_PIDFD = 0x80  # Linux 5.15+: each event also carries a pidfd for the writer
FAN_REPORT_FD_ERROR = 0x2000  # Linux 6.13+: a failed event fd is reported as -errno, not dropped

# fanotify_mark flags
FAN_MARK_ADD = 0x01
FAN_MARK_REMOVE = 0x02
FAN_MARK_MOUNT = 0x10
FAN_MARK_FILESYSTEM = 0x100  # Linux 4.20+

FAN_NOFD = -1
FAN_NOPIDFD = -1  # the writer had exited when we read the event (or -ESRCH with FD_ERROR)
FAN_EVENT_INFO_TYPE_PIDFD = 4
FANOTIFY_METADATA_VERSION = 3
AT_FDCWD = -100

# struct fanotify_event_metadata: event_len, vers, reserved, metadata_len, mask, fd, pid
EVENT_METADATA = struct.Struct("=IBBHQii")
# struct fanotify_event_info_header (info_type, pad, len), then for a pidfd record an __s32
INFO_HEADER = struct.Struct("=BBH")
INFO_PIDFD = struct.Struct("=i")

# What lanewatch watches: a write finished, or a write happened (FAN_Q_OVERFLOW needs no mark).
WATCH_MASK = FAN_CLOSE_WRITE | FAN_MODIFY

# O_CLOEXEC too: a lane we spawn while a batch is open must not inherit the event fds.
EVENT_FD_FLAGS = os.O_RDONLY | getattr(os, "O_LARGEFILE", 0) | getattr(os, "O_CLOEXEC", 0)

# One read(2) opens one fd per event it returns: bounded, so a burst cannot hit `ulimit -n`.
DEFAULT_MAX_EVENTS = 256
DEFAULT_PREFIX_LIMIT = 64 * 1024
DEFAULT_HASH_LIMIT = 64 * 1024 * 1024
_CHUNK = 1024 * 1024

_MASK_NAMES: tuple[tuple[int, str], ...] = (
    (FAN_ACCESS, "ACCESS"),
    (FAN_MODIFY, "MODIFY"),
    (FAN_ATTRIB, "ATTRIB"),
    (FAN_CLOSE_WRITE, "CLOSE_WRITE"),
    (FAN_CLOSE_NOWRITE, "CLOSE_NOWRITE"),
    (FAN_OPEN, "OPEN"),
    (FAN_MOVED_FROM, "MOVED_FROM"),
    (FAN_MOVED_TO, "MOVED_TO"),
    (FAN_CREATE, "CREATE"),
    (FAN_DELETE, "DELETE"),
    (FAN_DELETE_SELF, "DELETE_SELF"),
    (FAN_MOVE_SELF, "MOVE_SELF"),
    (FAN_OPEN_EXEC, "OPEN_EXEC"),
    (FAN_Q_OVERFLOW, "Q_OVERFLOW"),
    (FAN_FS_ERROR, "FS_ERROR"),
    (FAN_OPEN_PERM, "OPEN_PERM"),
    (FAN_ACCESS_PERM, "ACCESS_PERM"),
    (FAN_OPEN_EXEC_PERM, "OPEN_EXEC_PERM"),
    (FAN_ONDIR, "ONDIR"),
)
_KNOWN_BITS = sum(bit for bit, _ in _MASK_NAMES)


def mask_names(mask: int) -> tuple[str, ...]:
    """The FAN_* names set in `mask` (without the prefix); unknown bits as hex."""
    names = [name for bit, name in _MASK_NAMES if mask & bit]
    unknown = mask & ~_KNOWN_BITS
    if unknown:
        names.append(hex(unknown))
    return tuple(names)


# --- errors and the libc binding --------------------------------------------------------------


class FanotifyError(OSError):
    """fanotify could not be set up; `reason` is one line fit to show a user."""

    def __init__(self, err: int, reason: str) -> None:
        super().__init__(err, reason)
        self.reason = reason


def _reason(err: int, what: str) -> str:
    if err == errno.EPERM:
        return "needs root or CAP_SYS_ADMIN (run lanewatch as root for kernel attribution)"
    if err == errno.ENOSYS:
        return "this kernel has no fanotify (CONFIG_FANOTIFY is off)"
    if err == errno.EMFILE:
        return "too many fanotify groups or open files (fs.fanotify.max_user_groups, ulimit -n)"
    if err in (errno.ENODEV, errno.EXDEV, errno.EOPNOTSUPP):
        return f"{what}: this filesystem cannot be watched with fanotify ({os.strerror(err)})"
    if err == errno.ENOENT:
        return f"{what}: no such path"
    return f"{what}: {os.strerror(err)}"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The process's libc with fanotify_init/fanotify_mark typed, or None if it has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init, mark = libc.fanotify_init, libc.fanotify_mark
    except (OSError, AttributeError, TypeError):
        return None
    init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    init.restype = ctypes.c_int
    # The mask is a uint64_t: ctypes must know, or 32-bit ABIs get it wrong.
    mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    mark.restype = ctypes.c_int
    return libc


def _require_libc() -> ctypes.CDLL:
    if not sys.platform.startswith("linux"):
        raise FanotifyError(errno.ENOSYS, f"fanotify is Linux-only (this is {sys.platform})")
    libc = _libc()
    if libc is None:
        raise FanotifyError(errno.ENOSYS, "the C library has no fanotify_init")
    return libc


def _init_group(pidfds: bool = False) -> tuple[int, int]:
    """A new notification-class group fd, and the FAN_REPORT_* flags it got.

    Asks for FAN_REPORT_FD_ERROR (6.13+) and, with `pidfds`, FAN_REPORT_PIDFD (5.15+); an older
    kernel refuses an unknown flag with EINVAL, so we retry without it.
    """
    libc = _require_libc()
    base = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK
    extras = [FAN_REPORT_FD_ERROR | FAN_REPORT_PIDFD, FAN_REPORT_PIDFD] if pidfds else []
    for extra in (*extras, FAN_REPORT_FD_ERROR, 0):
        fd = libc.fanotify_init(base | extra, EVENT_FD_FLAGS)
        if fd >= 0:
            return fd, extra
        err = ctypes.get_errno()
        if err != errno.EINVAL:  # EINVAL: an older kernel without one of the extra flags
            break
    raise FanotifyError(err, _reason(err, "fanotify_init"))


# --- content through the event descriptor ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContentSample:
    """What a file held when we read it through the event's descriptor.

    `sha256` covers the whole content (None if larger than the hash limit); `size` is the
    number of bytes hashed, or the fstat size when not hashed; `prefix` is at most the
    prefix limit.
    """

    size: int
    sha256: str | None
    prefix: bytes

    @property
    def complete(self) -> bool:
        """The prefix is the whole content."""
        return self.sha256 is not None and len(self.prefix) == self.size


def read_content(
    fd: int,
    *,
    prefix_limit: int = DEFAULT_PREFIX_LIMIT,
    hash_limit: int = DEFAULT_HASH_LIMIT,
) -> ContentSample | None:
    """Size, sha256 and a bounded prefix of the file behind `fd`; None if not a regular file.

    Reads with pread only: never reopens by path (the path may already name another file)
    and never moves the descriptor's offset.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > hash_limit:
        return ContentSample(st.st_size, None, os.pread(fd, prefix_limit, 0))
    digest = hashlib.sha256()
    prefix = bytearray()
    offset = 0
    while True:
        chunk = os.pread(fd, _CHUNK, offset)
        if not chunk:
            break
        if offset == 0 and len(chunk) == st.st_size < _CHUNK:
            # The whole (small) file in one read, as fstat said: no second read for EOF.
            digest.update(chunk)
            return ContentSample(len(chunk), digest.hexdigest(), chunk[:prefix_limit])
        if len(prefix) < prefix_limit:
            prefix += chunk[: prefix_limit - len(prefix)]
        digest.update(chunk)
        offset += len(chunk)
        if offset > hash_limit:  # it grew while we read: give up the hash, keep the prefix
            return ContentSample(os.fstat(fd).st_size, None, bytes(prefix))
    return ContentSample(offset, digest.hexdigest(), bytes(prefix))


# --- events ----------------------------------------------------------------------------------


class _Lease:
    """Shared by the events of one batch: False once their descriptors are closed."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


@dataclass(frozen=True, slots=True)
class FanEvent:
    """One fanotify event.

    `pid` is the writer's process id as seen from our pid namespace (0 if invisible or for
    an overflow). `fd` is a read-only descriptor to the written file, owned by the batch it
    came in and valid only until that batch is closed (for `FanotifyWatcher`: until the
    callback returns); FAN_NOFD for an overflow; below -1 it is -errno when the kernel could
    not open the file. `path` is readlink of that descriptor at read time: if the file was
    renamed it is the new name, if unlinked it ends in " (deleted)"; None when unknown.
    `pidfd` (groups opened with `pidfds=True`, Linux 5.15+) is a pidfd for the writer, owned
    and closed like `fd`: while it is open the writer's pid cannot be reused, so /proc/PID is
    the writer. Negative when the writer had already been reaped when we read the event (or
    when the group does not report pidfds).
    """

    pid: int
    mask: int
    path: str | None
    fd: int
    _lease: _Lease | None = field(default=None, compare=False, repr=False)
    pidfd: int = FAN_NOPIDFD
    note: str | None = None  # for a loss we report ourselves (an overflow's mask): why

    @property
    def is_overflow(self) -> bool:
        """The kernel's queue overflowed: events were lost, rescan what is watched."""
        return bool(self.mask & FAN_Q_OVERFLOW)

    @property
    def is_close_write(self) -> bool:
        return bool(self.mask & FAN_CLOSE_WRITE)

    @property
    def is_modify(self) -> bool:
        return bool(self.mask & FAN_MODIFY)

    @property
    def fd_error(self) -> int | None:
        """The errno the kernel met opening the file for us, if it could not."""
        return -self.fd if self.fd < FAN_NOFD else None

    @property
    def names(self) -> tuple[str, ...]:
        return mask_names(self.mask)

    def read_content(
        self, *, prefix_limit: int = DEFAULT_PREFIX_LIMIT, hash_limit: int = DEFAULT_HASH_LIMIT
    ) -> ContentSample | None:
        """`read_content()` through this event's descriptor, while its batch is open."""
        if self.fd < 0:
            raise ValueError(f"event has no file descriptor ({', '.join(self.names)})")
        if self._lease is not None and not self._lease.open:
            # The number may already name another file of ours: refuse rather than misread.
            raise ValueError("event descriptor already closed: read content inside the callback")
        return read_content(self.fd, prefix_limit=prefix_limit, hash_limit=hash_limit)


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One fanotify_event_metadata record as the kernel wrote it (and its pidfd, if any)."""

    mask: int
    fd: int
    pid: int
    version: int
    pidfd: int = FAN_NOPIDFD


def _pidfd_of(buf: bytes, start: int, end: int) -> int:
    """The pidfd in the info records of one event (between `start` and `end`), if any."""
    offset = start
    while offset + INFO_HEADER.size <= end:
        info_type, _pad, length = INFO_HEADER.unpack_from(buf, offset)
        if length < INFO_HEADER.size or offset + length > end:
            break  # malformed: stop rather than guess
        if info_type == FAN_EVENT_INFO_TYPE_PIDFD and length >= INFO_HEADER.size + 4:
            return int(INFO_PIDFD.unpack_from(buf, offset + INFO_HEADER.size)[0])
        offset += length
    return FAN_NOPIDFD


# The usual record of a pidfd group: the metadata, then one pidfd info record.
_WITH_PIDFD = struct.Struct("=IBBHQiiBBHi")
_PIDFD_RECORD_LEN = EVENT_METADATA.size + INFO_HEADER.size + INFO_PIDFD.size


def _records(buf: bytes) -> list[tuple[int, int, int, int, int]]:
    """(mask, fd, pid, version, pidfd) of each record in a read(2) buffer; stops at a truncated
    or malformed record. Plain tuples: this runs for every write on the filesystem."""
    records: list[tuple[int, int, int, int, int]] = []
    offset, size, end = 0, EVENT_METADATA.size, len(buf)
    while offset + size <= end:
        if offset + _PIDFD_RECORD_LEN <= end:
            rec = _WITH_PIDFD.unpack_from(buf, offset)
            if (
                rec[0] == _PIDFD_RECORD_LEN
                and rec[3] == size
                and rec[7] == FAN_EVENT_INFO_TYPE_PIDFD
                and rec[9] == INFO_HEADER.size + INFO_PIDFD.size
            ):
                records.append((rec[4], rec[5], rec[6], rec[1], rec[10]))
                offset += _PIDFD_RECORD_LEN
                continue
        event_len, vers, _reserved, meta_len, mask, fd, pid = EVENT_METADATA.unpack_from(
            buf, offset
        )
        if event_len < size or offset + event_len > end:
            break
        pidfd = _pidfd_of(buf, offset + max(meta_len, size), offset + event_len)
        records.append((mask, fd, pid, vers, pidfd))
        offset += event_len  # event_len also covers any info records after the metadata
    return records


def parse_metadata(buf: bytes) -> list[RawEvent]:
    """The records in a read(2) buffer; stops at a truncated or malformed record."""
    return [RawEvent(mask, fd, pid, vers, pidfd) for mask, fd, pid, vers, pidfd in _records(buf)]


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError as exc:  # EBADF would mean a double close somewhere: say so
        log.warning("closing fanotify event fd %d: %s", fd, exc)


def events_from_buffer(
    buf: bytes,
    *,
    own_pid: int | None = None,
    accept: Callable[[str], bool] | None = None,
    lease: _Lease | None = None,
) -> tuple[list[FanEvent], int]:
    """Turn a read(2) buffer into events, and how many records it held.

    The descriptors (and pidfds) of events dropped here are closed at once: those written by
    `own_pid` (default: this process; our own writes are never anyone's collision), those
    whose path `accept` rejects, and those of an unknown metadata version. The caller owns the
    rest. Overflow events and events without a path are always kept.
    """
    if own_pid is None:
        own_pid = os.getpid()
    records = _records(buf)
    events: list[FanEvent] = []
    handed = 0  # records whose fd is already closed or owned by an event
    try:
        for i, (mask, rfd, pid, version, pidfd) in enumerate(records):
            keep = version == FANOTIFY_METADATA_VERSION and pid != own_pid
            path = _fd_path(rfd) if keep and rfd >= 0 else None
            if keep and path is not None and accept is not None:
                keep = accept(path)
            if keep:
                # With FAN_REPORT_FD_ERROR an overflow carries -EBADF, not FAN_NOFD: it never
                # had a file, so say so the one way.
                fd = FAN_NOFD if mask & FAN_Q_OVERFLOW and rfd < 0 else rfd
                events.append(FanEvent(pid, mask, path, fd, lease, pidfd))
            else:
                if rfd >= 0:
                    _close_quietly(rfd)
                if pidfd >= 0:
                    _close_quietly(pidfd)
            handed = i + 1
    except BaseException:
        # Nothing leaks even if `accept` raises: close what we kept and what we never reached.
        kept = [fd for ev in events for fd in (ev.fd, ev.pidfd)]
        for fd in kept + [fd for rec in records[handed:] for fd in (rec[1], rec[4])]:
            if fd >= 0:
                _close_quietly(fd)
        raise
    return events, len(records)


class EventBatch:
    """The events of one read; closing it closes all their descriptors, exactly once."""

    def __init__(
        self, events: Sequence[FanEvent], records: int, lease: _Lease, *, drained: bool = True
    ) -> None:
        self.events: tuple[FanEvent, ...] = tuple(events)
        self.records = records  # records read, including those dropped (own pid, filtered)
        # The read left room for more: the kernel's queue was empty when it returned, so every
        # event of a later read was queued after this read began.
        self.drained = drained
        self._lease = lease

    @property
    def closed(self) -> bool:
        return not self._lease.open

    def close(self) -> None:
        if not self._lease.open:
            return
        self._lease.open = False
        for ev in self.events:
            for fd in (ev.fd, ev.pidfd):
                if fd >= 0:
                    _close_quietly(fd)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[FanEvent]:
        return iter(self.events)

    def __enter__(self) -> EventBatch:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lease", None) is not None and self._lease.open:
            warnings.warn("unclosed fanotify EventBatch", ResourceWarning, stacklevel=1)
            self.close()


# --- the group --------------------------------------------------------------------------------


class MarkKind(Enum):
    FILESYSTEM = "filesystem"  # the whole filesystem, through every mount of it (4.20+)
    MOUNT = "mount"  # only writes made through this one mount
    AUTO = "auto"  # FILESYSTEM, or MOUNT on kernels that lack it


class FanotifyGroup:
    """One fanotify notification group: mark paths, read event batches.

    With `pidfds`, events carry a pidfd for the writer where the kernel can (5.15+):
    `reports_pidfds` says whether it does.
    """

    def __init__(self, *, pidfds: bool = False) -> None:
        self._fd, flags = _init_group(pidfds)
        self.reports_fd_errors = bool(flags & FAN_REPORT_FD_ERROR)
        self.reports_pidfds = bool(flags & FAN_REPORT_PIDFD)
        self._lock = threading.Lock()  # mark() from one thread, close() from another
        self._fs_marks = True

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("fanotify group is closed")
        return self._fd

    def mark(
        self,
        path: str | os.PathLike[str],
        *,
        kind: MarkKind = MarkKind.AUTO,
        mask: int = WATCH_MASK,
    ) -> MarkKind:
        """Watch the filesystem (or mount) holding `path` for `mask`; returns the kind used."""
        if mask & FAN_ALL_PERM_EVENTS:
            raise ValueError("permission events are never used: a writer must never wait on us")
        libc = _require_libc()
        raw = os.fsencode(path)
        kinds = [kind] if kind is not MarkKind.AUTO else [MarkKind.FILESYSTEM, MarkKind.MOUNT]
        if kind is MarkKind.AUTO and not self._fs_marks:
            kinds = [MarkKind.MOUNT]
        err = errno.EINVAL
        with self._lock:
            fd = self.fileno()
            for k in kinds:
                flag = FAN_MARK_FILESYSTEM if k is MarkKind.FILESYSTEM else FAN_MARK_MOUNT
                if libc.fanotify_mark(fd, FAN_MARK_ADD | flag, mask, AT_FDCWD, raw) == 0:
                    if k is MarkKind.MOUNT and kind is MarkKind.AUTO:
                        self._fs_marks = False  # kernel before 4.20: stop trying
                    return k
                err = ctypes.get_errno()
                if k is MarkKind.FILESYSTEM and kind is MarkKind.AUTO and err == errno.EINVAL:
                    continue  # maybe a kernel before 4.20: try a mount mark
                break
        raise FanotifyError(err, _reason(err, f"marking {os.fsdecode(raw)}"))

    def read(
        self,
        *,
        max_events: int = DEFAULT_MAX_EVENTS,
        accept: Callable[[str], bool] | None = None,
    ) -> EventBatch:
        """Read up to `max_events` queued events without blocking; close the batch after use."""
        lease = _Lease()
        # Every event we ask for has the same size: the metadata, plus a pidfd record if any.
        size = EVENT_METADATA.size + (INFO_HEADER.size + INFO_PIDFD.size) * self.reports_pidfds
        try:
            buf = os.read(self.fileno(), max_events * size)
        except BlockingIOError:
            return EventBatch((), 0, lease)
        except OSError as exc:
            if exc.errno in (errno.EBADF, errno.EINVAL, errno.EFAULT):
                raise
            # Older kernels drop an event whose fd they could not open and fail the read
            # (EMFILE, ENFILE, ...). Events were lost: report it as an overflow would be.
            log.warning("fanotify read lost events: %s", exc)
            lost = FanEvent(0, FAN_Q_OVERFLOW, None, FAN_NOFD, lease)
            return EventBatch((lost,), 1, lease, drained=False)
        events, records = events_from_buffer(buf, accept=accept, lease=lease)
        return EventBatch(events, records, lease, drained=len(buf) <= (max_events - 1) * size)

    def close(self) -> None:
        """Close the group; the kernel drops all its marks with it."""
        with self._lock:
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                os.close(fd)

    def __enter__(self) -> FanotifyGroup:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def fanotify_available(path: str | os.PathLike[str] | None = None) -> tuple[bool, str]:
    """Whether this process can watch writes with fanotify here, and a one-line reason.

    Opens a throwaway group and marks `path` (default: the temp folder) the way the
    watcher will; never raises.
    """
    target = tempfile.gettempdir() if path is None else path
    try:
        with FanotifyGroup() as group:
            kind = group.mark(target)
    except FanotifyError as exc:
        return False, exc.reason
    except OSError as exc:
        return False, f"fanotify: {exc}"
    return True, f"kernel attribution available (fanotify, {kind.value} marks)"


# --- the watcher ------------------------------------------------------------------------------


def _norm_prefix(path: str | os.PathLike[str]) -> str:
    # readlink gives canonical paths: compare against the canonical form, with a trailing "/".
    real = os.path.realpath(path)
    return real if real.endswith("/") else real + "/"


class FanotifyWatcher:
    """Watches the filesystems holding `paths` on a reader thread; see the module docstring.

    `callback(events)` runs on the reader thread with each batch, in kernel order; every
    event descriptor is closed as soon as it returns, so read content inside it (e.g.
    `event.read_content()`). Overflow comes as an event with `is_overflow`. Only events
    under `prefixes` (default: `paths`) are delivered; the others, and our own writes, are
    dropped and their descriptors closed at once. `pidfds`: events carry the writer's pidfd
    (Linux 5.15+). `before_read()` runs before each read; what it returned before the latest
    read that drained the queue is `window` (every later event was queued after it).
    """

    def __init__(
        self,
        paths: Iterable[str | os.PathLike[str]],
        callback: Callable[[Sequence[FanEvent]], None],
        *,
        prefixes: Iterable[str | os.PathLike[str]] | None = None,
        kind: MarkKind = MarkKind.AUTO,
        mask: int = WATCH_MASK,
        max_events: int = DEFAULT_MAX_EVENTS,
        on_error: Callable[[BaseException], None] | None = None,
        name: str = "lanewatch-fanotify",
        pidfds: bool = False,
        before_read: Callable[[], object] | None = None,
        read_delay: float = 0.0,
        ignore_foreign: bool = False,
    ) -> None:
        self._paths = [os.fspath(p) for p in paths]
        self._callback = callback
        self._prefixes = tuple(
            _norm_prefix(p) for p in (self._paths if prefixes is None else prefixes)
        )
        self._kind = kind
        self._mask = mask
        self._max_events = max_events
        self._on_error = on_error
        self._name = name
        self._group: FanotifyGroup | None = None
        self._thread: threading.Thread | None = None
        self._stop_r = self._stop_w = -1
        self._stopping = threading.Event()
        self._pidfds = pidfds
        self._before_read = before_read
        # Seconds to wait once events are ready before reading them: the kernel merges a write's
        # MODIFY and CLOSE_WRITE (and repeated writes of one file) while they are queued, so
        # a short wait means fewer events to read, at that much more latency.
        self._read_delay = read_delay
        # Kernel ignore marks on busy folders outside the prefixes (sources.fanignore).
        self._ignore_foreign = ignore_foreign
        self.foreign: ForeignDirs | None = None
        self.marks: dict[str, MarkKind] = {}
        self.error: BaseException | None = None  # why the reader thread ended, if it failed
        self.delivered = 0
        self.records = 0  # events read from the kernel, those dropped at once included
        self.overflows = 0
        self.reports_pidfds = False
        # What `before_read` returned before the latest read that drained the kernel's queue:
        # every event delivered since was queued after that moment. Read it in the callback.
        self.window: object = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Open the group and mark every path (raises FanotifyError), then start reading."""
        if self._thread is not None:
            raise RuntimeError("watcher already started")
        group = FanotifyGroup(pidfds=self._pidfds)
        self.reports_pidfds = group.reports_pidfds
        if self._before_read is not None:
            self.window = self._before_read()  # before the marks: every event comes after it
        try:
            for p in self._paths:
                self.marks[p] = group.mark(p, kind=self._kind, mask=self._mask)
            self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        except BaseException:
            group.close()
            raise
        if self._ignore_foreign and self._paths:
            from lanewatch.sources.fanignore import ForeignDirs  # it builds on this module

            self.foreign = ForeignDirs(group.fileno(), lambda: self._prefixes, self._mask)
            self.foreign.start(self._paths)
        self._group = group
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def add_path(
        self, path: str | os.PathLike[str], *, prefix: bool = True
    ) -> MarkKind:  # e.g. a root registered while we run
        """Mark one more path while running; deliver events under it too if `prefix`."""
        if self._group is None:
            raise RuntimeError("watcher not started")
        kind = self._group.mark(path, kind=self._kind, mask=self._mask)
        self.marks[os.fspath(path)] = kind
        if prefix:
            # One tuple swap: the reader reads the attribute once per batch, no lock needed.
            self._prefixes = (*self._prefixes, _norm_prefix(path))
            if self.foreign is not None:
                self.foreign.forget()  # a folder ignored until now may be under the new prefix
        return kind

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the reader promptly and release everything; idempotent."""
        self._stopping.set()
        if self._stop_w >= 0:
            # A full pipe means a wake-up is already pending.
            with contextlib.suppress(BlockingIOError):
                os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"fanotify reader did not stop within {timeout}s (callback?)")
        if self._stop_w >= 0:
            os.close(self._stop_w)
            self._stop_w = -1

    def __enter__(self) -> FanotifyWatcher:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _accept(self, path: str) -> bool:
        probe = path + "/"
        if any(probe.startswith(p) for p in self._prefixes):
            return True
        if self.foreign is not None:
            self.foreign.consider(path)  # its folder may stop waking us
        return False

    def _deliver(self, events: Sequence[FanEvent]) -> None:
        self.delivered += len(events)
        self.overflows += sum(1 for e in events if e.is_overflow)
        try:
            self._callback(events)
        except Exception as exc:  # a failing consumer must not end kernel attribution
            if self._on_error is not None:
                self._on_error(exc)
            else:
                log.exception("fanotify callback failed")

    def _run(self) -> None:
        group = self._group
        assert group is not None
        poller = select.poll()
        poller.register(group.fileno(), select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        stop_only = select.poll()
        stop_only.register(self._stop_r, select.POLLIN)
        queued = select.poll()
        queued.register(group.fileno(), select.POLLIN)
        foreign = self.foreign
        if foreign is not None:
            foreign.register(poller)
        try:
            while not self._stopping.is_set():
                ready = {fd for fd, _ in poller.poll()}
                if self._stop_r in ready:
                    break
                if foreign is not None:
                    for why in foreign.handle(ready):
                        self._deliver([FanEvent(0, FAN_Q_OVERFLOW, None, FAN_NOFD, note=why)])
                if group.fileno() not in ready:
                    continue
                if self._read_delay > 0 and stop_only.poll(self._read_delay * 1000):
                    break  # asked to stop while we let the queue gather
                # Drain what is queued, one bounded batch at a time, checking for stop.
                while not self._stopping.is_set():
                    mark = self._before_read() if self._before_read is not None else None
                    with group.read(max_events=self._max_events, accept=self._accept) as batch:
                        self.records += batch.records
                        if batch.events:
                            self._deliver(batch.events)
                    if batch.drained:
                        self.window = mark
                        # Empty when read: read again only if more came meanwhile (a poll is
                        # cheaper than a read that finds nothing).
                        if not queued.poll(0):
                            break
                    if batch.records == 0:
                        break
        except BaseException as exc:
            self.error = exc
            log.exception("fanotify reader stopped")
        finally:
            if foreign is not None:
                foreign.close()
            group.close()
            os.close(self._stop_r)
            self._stop_r = -1
