"""The watchdog tail: one recursive watch per root; the handler only maps a path and queues it.

Sharp edges of watchdog 7.1 this module designs around (see docs/engine.md):
- an inotify queue overflow (IN_Q_OVERFLOW) is only logged by watchdog: our `InotifyFD`
  subclass sees the event in `handle_event` and queues an "overflow" item, and the worker
  rescans the root;
- the watch limit (ENOSPC from inotify_add_watch) raises for the root but is swallowed for a
  subfolder: our `add_callback` override records it either way, and the root falls back to a
  polling observer, said in its health;
- when the root is deleted its emitter thread stops for good: the DirDeletedEvent of the root
  is queued as "root-gone", and `RootWatch.problem()` notices a dead thread or a root replaced
  under the same path, so the worker re-watches;
- a root on a network filesystem (NFS, CIFS, … `linux.mountinfo.network_fstype`) is polled:
  inotify reports only the writes made through this kernel, never another host's;
- reads would generate IN_OPEN/IN_CLOSE_NOWRITE: the event filter keeps them out of the
  kernel mask, so our own reads of stamps and ledgers never feed back.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyEmitter
from watchdog.observers.inotify_c import InotifyEvent, InotifyFD
from watchdog.observers.polling import PollingObserverVFS

from lanewatch.lanes.roots import ROOT_META
from lanewatch.linux.mountinfo import network_fstype
from lanewatch.model.views import HealthStatus, SourceHealth

log = logging.getLogger(__name__)

# watchdog 7.1 registers a new folder twice (its own walk, then the folder's IN_CREATE) and
# warns with the whole watch table in the message; the second registration is harmless.
_DUPLICATE = r"Callback with id '\d+' already exists for watch"


def _quiet_duplicate_warning() -> None:
    warnings.filterwarnings("ignore", message=_DUPLICATE, category=RuntimeWarning)


INCIDENTS_FILE = "incidents.jsonl"
MAX_PENDING = 200_000  # queued items before the handler drops events and asks for a rescan
DEFAULT_POLL_INTERVAL = 2.0
DEGRADED_RETRY = 10.0  # seconds between two attempts to watch a root that cannot be watched

# An item is (op, root, namespace name, path, is_dir). Ops: c created, m modified, a attrib,
# w closed after write, d deleted; control ops carry the root: overflow, overrun, limit,
# root-gone, incidents.
Item = tuple[str, str, str, str, bool]

FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
_OPS: dict[type[FileSystemEvent], str] = {
    FileCreatedEvent: "c",
    DirCreatedEvent: "c",
    FileModifiedEvent: "m",
    FileAttribEvent: "a",
    FileClosedEvent: "w",
    FileDeletedEvent: "d",
    DirDeletedEvent: "d",
}


class _Handler(FileSystemEventHandler):
    """Runs on watchdog's thread: map the path to its namespace and queue. Nothing else."""

    def __init__(self, root: str, out: queue.SimpleQueue[Any]) -> None:
        self.root = root
        self.prefix = root.rstrip("/") + "/"
        self.out = out
        self.overrun = False

    def dispatch(self, event: FileSystemEvent) -> None:
        cls = type(event)
        if cls is FileMovedEvent or cls is DirMovedEvent:
            self._put("d", os.fsdecode(event.src_path), event.is_directory)
            self._put("c", os.fsdecode(event.dest_path), event.is_directory)
            return
        op = _OPS.get(cls)
        if op is not None:
            self._put(op, os.fsdecode(event.src_path), event.is_directory)

    def _put(self, op: str, path: str, is_dir: bool) -> None:
        if not path.startswith(self.prefix):
            if path == self.root and op == "d":
                self.out.put(("root-gone", self.root, "", path, True))
            return
        ns, _, inner = path[len(self.prefix) :].partition("/")
        if ns == ROOT_META:
            if inner == INCIDENTS_FILE:
                self.out.put(("incidents", self.root, ns, path, False))
            return  # the root's own data (trash, evidence): never a namespace
        if self.out.qsize() > MAX_PENDING:
            if not self.overrun:
                self.overrun = True
                self.out.put(("overrun", self.root, "", "", False))
            return  # bounded memory: the worker rescans this root instead
        self.out.put((op, self.root, ns, path, is_dir))


class _TrackedFD(InotifyFD):
    """watchdog's inotify reader, telling us what it otherwise only logs or swallows."""

    def __init__(self, on_overflow: Callable[[], None], on_limit: Callable[[bytes], None]) -> None:
        super().__init__()
        self._on_overflow = on_overflow
        self._on_limit = on_limit

    def handle_event(self, event: InotifyEvent) -> None:
        if event.is_queue_overflow:
            self._on_overflow()
        super().handle_event(event)

    def add_callback(self, path: bytes, mask: Any, callback: Any, id_: Any) -> Any:
        try:
            return super().add_callback(path, mask, callback, id_)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self._on_limit(path)
            raise


class _DirectEmitter(InotifyEmitter):
    """watchdog's inotify emitter, handing each event to our handler on its own thread instead
    of through the observer's queue to the observer's thread: one thread and one queue fewer
    per write (docs/perf-notes/tail-hand-off.md). The handler only maps a path and queues it,
    as it did on the observer's thread, and it ignores every event type it has no op for (the
    observer's `event_filter` check, which the kernel mask already applied, is not repeated).
    Stopping is unchanged: the observer stops and joins its emitters before `stop` returns."""

    def __init__(self, *args: Any, handler: _Handler, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handler = handler

    def queue_event(self, event: FileSystemEvent) -> None:
        self._handler.dispatch(event)


class _InotifyObserver(BaseObserver):
    """watchdog's InotifyObserver, with our reader instead of its own and its events handed to
    `handler` on the emitter's thread (`_DirectEmitter`); schedule it with that handler."""

    def __init__(self, fd: _TrackedFD, handler: _Handler, timeout: float = 1.0) -> None:
        self._fd = fd
        fd.start()
        super().__init__(_DirectEmitter, timeout=timeout, inotify_fd=fd, handler=handler)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self._fd.stop()
        if self._fd.is_alive() and self._fd is not threading.current_thread():
            self._fd.join(timeout=5)


class RootWatch:
    """One root's observer (inotify, else polling) and what we know of its health."""

    def __init__(
        self,
        root: str,
        out: queue.SimpleQueue[Any],
        *,
        poll: bool = False,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> None:
        self.root = root
        self.out = out
        self.want_poll = poll
        self.poll_interval = poll_interval
        self.handler = _Handler(root, out)
        self.observer: BaseObserver | None = None
        self.mode = "off"  # inotify | polling | off
        self.detail = ""  # the last health detail, e.g. why it polls
        self.limit_hit = False
        self.identity: tuple[int, int] | None = None
        self.retry_at = 0.0  # a degraded root is retried every DEGRADED_RETRY seconds
        self._lock = threading.Lock()

    # -- hooks called on watchdog's threads: only queue --------------------------------------
    def _overflow(self) -> None:
        self.out.put(("overflow", self.root, "", "", False))

    def _limit(self, path: bytes) -> None:
        self.limit_hit = True
        self.out.put(("limit", self.root, "", os.fsdecode(path), True))

    # -- control, on the worker's thread ---------------------------------------------------------
    def start(self) -> SourceHealth:
        """Watch the root; returns its health. Never raises for a bad root."""
        _quiet_duplicate_warning()
        with self._lock:
            self._stop_locked()
            self.handler.overrun = False
            try:
                st = os.stat(self.root)
            except FileNotFoundError:
                return self._health(HealthStatus.MISSING, "the root does not exist")
            except OSError as exc:
                return self._health(HealthStatus.DEGRADED, f"cannot stat the root: {exc.strerror}")
            if not os.path.isdir(self.root):
                return self._health(HealthStatus.DEGRADED, "the root is not a folder")
            self.identity = (st.st_dev, st.st_ino)
            if self.want_poll:
                return self._start_polling("polling (--poll)")
            shared = network_fstype(self.root)
            if shared is not None:  # other hosts write there: inotify would never say
                return self._start_polling(f"{shared}, a network filesystem: polling")
            return self._start_inotify()

    def _start_inotify(self) -> SourceHealth:
        self.limit_hit = False
        try:
            fd = _TrackedFD(self._overflow, self._limit)
        except OSError as exc:  # EMFILE: too many inotify instances
            return self._start_polling(f"no inotify instance ({exc.strerror}); polling")
        fd.name = f"lanewatch-inotify:{self.root}"
        observer = _InotifyObserver(fd, self.handler)
        observer.name = f"lanewatch-observer:{self.root}"
        try:
            observer.start()
            observer.schedule(self.handler, self.root, recursive=True, event_filter=FILTER)
        except OSError as exc:
            observer.stop()
            observer.join(timeout=5)
            if exc.errno == errno.ENOSPC or self.limit_hit:
                return self._start_polling(_LIMIT_DETAIL)
            if exc.errno == errno.ENOENT:
                return self._health(HealthStatus.MISSING, "the root does not exist")
            return self._health(HealthStatus.DEGRADED, f"cannot watch the root: {exc.strerror}")
        if self.limit_hit:  # a subfolder could not be watched: inotify would miss its events
            observer.stop()
            observer.join(timeout=5)
            return self._start_polling(_LIMIT_DETAIL)
        self.observer, self.mode = observer, "inotify"
        return self._health(HealthStatus.OK, "inotify")

    def _start_polling(self, why: str) -> SourceHealth:
        observer = PollingObserverVFS(os.lstat, os.scandir, polling_interval=self.poll_interval)
        observer.name = f"lanewatch-poller:{self.root}"
        try:
            observer.start()
            observer.schedule(self.handler, self.root, recursive=True, event_filter=FILTER)
        except FileNotFoundError:
            observer.stop()
            return self._health(HealthStatus.MISSING, "the root does not exist")
        except OSError as exc:
            observer.stop()
            return self._health(HealthStatus.DEGRADED, f"cannot poll the root: {exc.strerror}")
        self.observer, self.mode = observer, "polling"
        return self._health(HealthStatus.POLLING, f"{why}, every {self.poll_interval:g}s")

    def fall_back_to_polling(self) -> SourceHealth:
        with self._lock:
            self._stop_locked()
            return self._start_polling(_LIMIT_DETAIL)

    def _health(self, status: HealthStatus, detail: str) -> SourceHealth:
        if status in (HealthStatus.MISSING, HealthStatus.DEGRADED):
            self.mode = "off"
        if status is HealthStatus.DEGRADED:
            self.retry_at = time.monotonic() + DEGRADED_RETRY
        self.detail = detail
        return SourceHealth(self.root, status.value, detail)

    def problem(self) -> str | None:
        """Why this watch no longer covers the root (None when it does). Cheap: one stat."""
        try:
            st = os.stat(self.root)
            identity: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            identity = None
        if self.mode == "off":  # missing: retried as soon as it exists; degraded: now and then
            due = identity is not None and time.monotonic() >= self.retry_at
            return "retry" if due else None
        if identity is None:
            return "the root is gone"
        if identity != self.identity:
            return "the root was replaced"
        observer = self.observer
        if observer is None or not observer.is_alive():
            return "the observer stopped"
        if not observer.emitters or not all(e.is_alive() for e in observer.emitters):
            return "the watch on the root stopped"
        return None

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        observer, self.observer, self.mode = self.observer, None, "off"
        if observer is None:
            return
        try:
            observer.stop()
            if observer is not threading.current_thread():
                observer.join(timeout=5)
        except (OSError, RuntimeError) as exc:  # a half-dead observer at shutdown
            log.warning("stopping the watch on %s: %s", self.root, exc)


_LIMIT_DETAIL = "inotify watch limit reached (raise fs.inotify.max_user_watches); polling"
