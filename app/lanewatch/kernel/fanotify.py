"""Kernel write attribution through Linux fanotify, bound with ctypes (no compiler at install).

fanotify reports, for every write to a marked filesystem, the writer's pid and an open
descriptor to the file, even when the write lasted microseconds. We only ever open a
*notification* group (FAN_CLASS_NOTIF): no permission events, so a writer is never blocked
by lanewatch and nobody waits if lanewatch dies.

Layers, lowest first, each in a module of its own (all their public names are here too):

- `linux.fanotify_abi`: the kernel interface (constants, record layouts, the libc calls,
  `FanotifyError`).
- `kernel.fanevents`: what a read returns: `events_from_buffer()` parses it into `FanEvent`s
  (pure but for readlink), an `EventBatch` owns their descriptors; `read_content()`.
- here: `fanotify_available()` (can this process use fanotify, with a reason line);
  `FanotifyGroup`, one group fd: `mark()` a path's filesystem, `read()` an `EventBatch`;
  `FanotifyWatcher`, a reader thread that hands batches to a callback and closes every event
  descriptor as soon as the callback returns; with `ignore_foreign`, busy folders outside its
  prefixes stop waking it (`kernel.fanignore`, Linux 6.0+).

See docs/fanotify.md for what it can and cannot see. Importing this module never raises,
on any platform; only calling into it on a system without fanotify does.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import select
import tempfile
import termios
import threading
from collections.abc import Callable, Iterable, Sequence
from enum import Enum

from lanewatch.kernel.fanevents import (
    DEFAULT_HASH_LIMIT,
    DEFAULT_PREFIX_LIMIT,
    ContentSample,
    EventBatch,
    FanEvent,
    RawEvent,
    _Lease,
    events_from_buffer,
    parse_metadata,
    read_content,
)
from lanewatch.kernel.fanignore import ForeignDirs
from lanewatch.linux.fanotify_abi import (
    AT_FDCWD,
    DEFAULT_MAX_EVENTS,
    EVENT_FD_FLAGS,
    EVENT_METADATA,
    FAN_ACCESS,
    FAN_ACCESS_PERM,
    FAN_ALL_PERM_EVENTS,
    FAN_ATTRIB,
    FAN_CLASS_NOTIF,
    FAN_CLOEXEC,
    FAN_CLOSE_NOWRITE,
    FAN_CLOSE_WRITE,
    FAN_CREATE,
    FAN_DELETE,
    FAN_DELETE_SELF,
    FAN_EVENT_INFO_TYPE_PIDFD,
    FAN_FS_ERROR,
    FAN_MARK_ADD,
    FAN_MARK_DONT_FOLLOW,
    FAN_MARK_FILESYSTEM,
    FAN_MARK_MOUNT,
    FAN_MARK_REMOVE,
    FAN_MODIFY,
    FAN_MOVE_SELF,
    FAN_MOVED_FROM,
    FAN_MOVED_TO,
    FAN_NOFD,
    FAN_NONBLOCK,
    FAN_NOPIDFD,
    FAN_ONDIR,
    FAN_OPEN,
    FAN_OPEN_EXEC,
    FAN_OPEN_EXEC_PERM,
    FAN_OPEN_PERM,
    FAN_Q_OVERFLOW,
    FAN_REPORT_FD_ERROR,
    FAN_REPORT_PIDFD,
    FANOTIFY_METADATA_VERSION,
    INFO_HEADER,
    INFO_PIDFD,
    WATCH_MASK,
    FanotifyError,
    _init_group,
    _reason,
    _require_libc,
    mask_names,
)
from lanewatch.linux.mountview import Rehome

__all__ = [
    "AT_FDCWD",
    "DEFAULT_HASH_LIMIT",
    "DEFAULT_MAX_EVENTS",
    "DEFAULT_PREFIX_LIMIT",
    "EVENT_FD_FLAGS",
    "EVENT_METADATA",
    "FANOTIFY_METADATA_VERSION",
    "FAN_ACCESS",
    "FAN_ACCESS_PERM",
    "FAN_ALL_PERM_EVENTS",
    "FAN_ATTRIB",
    "FAN_CLASS_NOTIF",
    "FAN_CLOEXEC",
    "FAN_CLOSE_NOWRITE",
    "FAN_CLOSE_WRITE",
    "FAN_CREATE",
    "FAN_DELETE",
    "FAN_DELETE_SELF",
    "FAN_EVENT_INFO_TYPE_PIDFD",
    "FAN_FS_ERROR",
    "FAN_MARK_ADD",
    "FAN_MARK_FILESYSTEM",
    "FAN_MARK_MOUNT",
    "FAN_MARK_REMOVE",
    "FAN_MODIFY",
    "FAN_MOVED_FROM",
    "FAN_MOVED_TO",
    "FAN_MOVE_SELF",
    "FAN_NOFD",
    "FAN_NONBLOCK",
    "FAN_NOPIDFD",
    "FAN_ONDIR",
    "FAN_OPEN",
    "FAN_OPEN_EXEC",
    "FAN_OPEN_EXEC_PERM",
    "FAN_OPEN_PERM",
    "FAN_Q_OVERFLOW",
    "FAN_REPORT_FD_ERROR",
    "FAN_REPORT_PIDFD",
    "INFO_HEADER",
    "INFO_PIDFD",
    "WATCH_MASK",
    "ContentSample",
    "EventBatch",
    "FanEvent",
    "FanotifyError",
    "FanotifyGroup",
    "FanotifyWatcher",
    "MarkKind",
    "RawEvent",
    "events_from_buffer",
    "fanotify_available",
    "mask_names",
    "parse_metadata",
    "read_content",
]

log = logging.getLogger(__name__)

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
        self._rehome = Rehome()  # events through a fenced lane's mounts (linux/mountview.py)
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

    def mark_inode(self, path: str | os.PathLike[str], mask: int) -> None:
        """Watch one file (an inode mark: it follows the file, not its name) for `mask`; the
        audit marks each written file for reads (FAN_ACCESS, FAN_CLOSE_NOWRITE) this way."""
        if mask & FAN_ALL_PERM_EVENTS:
            raise ValueError("permission events are never used: a writer must never wait on us")
        libc = _require_libc()
        raw = os.fsencode(path)
        with self._lock:
            fd = self.fileno()
            if (
                libc.fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_DONT_FOLLOW, mask, AT_FDCWD, raw)
                == 0
            ):
                return
            err = ctypes.get_errno()
        raise FanotifyError(err, _reason(err, f"marking {os.fsdecode(raw)}"))

    def read(
        self,
        *,
        max_events: int = DEFAULT_MAX_EVENTS,
        accept: Callable[[str], bool] | None = None,
    ) -> EventBatch:
        """Read up to `max_events` queued events without blocking; close the batch after use."""
        lease = _Lease()
        size = self.event_size
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
        events, records = events_from_buffer(buf, accept=accept, lease=lease, rehome=self._rehome)
        return EventBatch(events, records, lease, drained=len(buf) <= (max_events - 1) * size)

    @property
    def event_size(self) -> int:
        """Every event we ask for has the same size: the metadata, plus a pidfd record if any."""
        return EVENT_METADATA.size + (INFO_HEADER.size + INFO_PIDFD.size) * self.reports_pidfds

    def queued(self) -> int:
        """Events queued in the kernel now (FIONREAD); 0 when it cannot tell."""
        buf = array.array("i", [0])
        try:
            fcntl.ioctl(self.fileno(), termios.FIONREAD, buf, True)
        except (OSError, ValueError):
            return 0
        return -(-buf[0] // self.event_size)

    def close(self) -> None:
        """Close the group; the kernel drops all its marks with it."""
        with self._lock:
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                os.close(fd)
            self._rehome.close()

    def __enter__(self) -> FanotifyGroup:
        return self

    def __exit__(self, *_: object) -> None:
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
        after_read: Callable[[int, int], None] | None = None,
    ) -> None:
        self._paths = [os.fspath(p) for p in paths]
        self._callback = callback
        # Called on the reader after every read that returned records, with how many it read
        # and how many it delivered (0: all were dropped, and the callback was not called).
        self._after_read = after_read
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
        # Kernel ignore marks on busy folders outside the prefixes (kernel.fanignore).
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
        # Reads begun and reads whose events were delivered (`caught_up`), on the reader.
        self._reads_begun = self._reads_done = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def queued(self) -> int:
        """Events queued in the kernel now, not yet read (call on the reader, in the callback:
        they are the first records of the next reads)."""
        group = self._group
        return group.queued() if group is not None and not group.closed else 0

    def caught_up(self) -> bool:
        """True when every event queued before this call has been read and delivered (its
        callback returned); from any thread. False while the reader is not running. Nothing
        queued now means every earlier event was taken by a read begun before now; that read
        is over when as many reads are done as were begun."""
        group = self._group
        if group is None or group.closed or not self.running:
            return False
        probe = select.poll()
        try:
            probe.register(group.fileno(), select.POLLIN)
            if probe.poll(0):
                return False  # events queued (or the group gone: POLLNVAL)
        except (OSError, ValueError):  # closed meanwhile
            return False
        return self._reads_begun == self._reads_done

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

    def mark_file(self, path: str | os.PathLike[str], mask: int) -> None:
        """Watch one more file for `mask` while running (an inode mark; raises FanotifyError)."""
        if self._group is None:
            raise RuntimeError("watcher not started")
        self._group.mark_inode(path, mask)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the reader promptly and release everything; idempotent."""
        self._stopping.set()
        if self._stop_w >= 0:
            # A full pipe means a wake-up is already pending; a closed one, that the reader saw
            # `_stopping` first and ended (closing its end) before this write.
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
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

    def __exit__(self, *_: object) -> None:
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
                    self._reads_begun += 1
                    with group.read(max_events=self._max_events, accept=self._accept) as batch:
                        self.records += batch.records
                        if batch.events:
                            self._deliver(batch.events)
                    if batch.records and self._after_read is not None:
                        self._after_read(batch.records, len(batch.events))
                    self._reads_done += 1
                    if batch.drained:
                        self.window = mark
                        # Empty when read: read again only if more came meanwhile (a poll is
                        # cheaper than a read that finds nothing). Nothing queued after a
                        # fresh mark: every later event comes after it, as after an empty read.
                        mark = self._before_read() if self._before_read is not None else None
                        if not queued.poll(0):
                            self.window = mark
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
