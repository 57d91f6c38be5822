"""Kernel write attribution: who wrote each file in the roots and in shared temp.

`Attribution` runs a `FanotifyWatcher` over every root and the shared temp folders, on three
threads of its own:

- the reader (`lanewatch-fanotify`), in the watcher's callback while the event descriptors are
  open: sorts each event's path (a namespace's file, shared temp, or ours: dropped), maps the
  pid to a lane (`sources.pidlane`, with the event's pidfd), and at a close-after-write reads
  the file through the event's descriptor (size, sha256, and the bytes of a small file). It
  hands plain facts to a queue and returns: no disk writes, no waiting.
- the attribution thread (`lanewatch-attribution`): turns facts into `KernelWrite`s and
  incidents (`model.kernelwrites`) and hands them to the engine (`sink`). A writer gone before
  we read its event and not provable yet is retried for `PENDING_FOR` seconds (its stamp may
  be on its way), then recorded as "unknown pid".
- the keeper (`lanewatch-keeper`, `sources.keeper`): keeps small files in the root's evidence
  store (`sources.evidence`) and each write in the root's history (`sources.writelog`).

Overflow (`FAN_Q_OVERFLOW`, or an event whose file the kernel could not open for us) is handed
on as `KernelBatch.lost`: the engine says so and rescans; nothing is attributed for the gap.
See docs/fanotify.md.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from lanewatch.model.filehistory import WriteRecord
from lanewatch.model.incidents import Observation
from lanewatch.model.kernelwrites import KernelWrite, foreign_write, unbound_write
from lanewatch.scheme.roots import ROOT_META
from lanewatch.scheme.stamp import META_DIR, STAMP_FILE, parse_stamp
from lanewatch.sources.evidence import SMALL_FILE
from lanewatch.sources.fanotify import (
    ContentSample,
    FanEvent,
    FanotifyError,
    FanotifyWatcher,
    fanotify_available,
    lower_priority,
)
from lanewatch.sources.keeper import Keep, Keeper
from lanewatch.sources.pidclock import Mark, PidClock
from lanewatch.sources.pidlane import OwnerId, PidLanes, Writer, owner_of
from lanewatch.sources.writelog import WriteEntry

log = logging.getLogger(__name__)

SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
PENDING_FOR = 1.5  # seconds a gone writer is retried before it is "unknown pid"
OWNERS_EVERY = 0.5  # seconds between two refreshes of the owners from the model
TICK = 1.0  # the attribution thread wakes at least this often (pid clock, pending, roots)
MAX_EVENTS = 128  # per read: each event holds two descriptors (the file and a pidfd)
READ_DELAY = 0.002  # seconds: let the kernel merge a write's MODIFY and CLOSE_WRITE first
NICE = 5  # our threads yield to the writers they watch when the CPUs are busy
STDIO_FOR = 30.0  # seconds an owner's stdout/stderr targets are cached
LAST_HASHES = 4096  # paths whose last content hash we remember (unchanged closes are skipped)
HINT_KERNEL = "fanotify names the writer of every write in the roots and shared temp"
HINT_INFERRED = (
    "from open files and timing; for exact writers run `sudo lanewatch record` "
    "(root or CAP_SYS_ADMIN) beside the dashboard"
)


@dataclass(frozen=True, slots=True)
class KernelBatch:
    """What the attribution thread hands the engine's worker."""

    writes: tuple[tuple[str, WriteRecord], ...] = ()  # for the in-memory file history
    observations: tuple[tuple[Observation, str], ...] = ()  # (observation, root)
    lost: str | None = None  # events were lost: why (overflow); rescan
    at: float = 0.0


@dataclass(slots=True)
class _Fact:
    """One event, as the reader saw it while its descriptors were open."""

    path: str
    zone: str  # "ns" | "shared"
    victim: str | None  # the namespace key, for "ns"
    root: str | None  # the victim's root, for "ns"
    writer: Writer
    event: str  # "close-write" | "modify"
    modified: bool  # FAN_MODIFY was set: data was written (a bare close may be no write)
    sample: ContentSample | None
    at: float
    window: Mark | None
    deleted: bool = False
    tries_until: float = 0.0


@dataclass(slots=True)
class _Lost:
    why: str
    at: float


@dataclass
class Stats:
    events: int = 0
    attributed: int = 0
    unknown: int = 0
    dropped: int = 0
    lost: int = 0


def attribution_status(probe: str | None = None) -> tuple[str, str]:
    """("kernel" | "inferred", one line) for this process, without starting anything."""
    ok, reason = fanotify_available(probe)
    if ok:
        return "kernel", HINT_KERNEL
    return "inferred", f"{HINT_INFERRED} ({reason})"


def shared_temp() -> list[str]:
    return [p for p in SHARED_TEMP if os.path.isdir(p)]


def _inside(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _is_stamp(path: str) -> bool:
    """An owner stamp, or the temp file it is being written to (`write_atomic`'s name)."""
    folder, _, name = path.rpartition("/")
    if not folder.endswith("/" + META_DIR):
        return False
    return name == STAMP_FILE or (name.startswith(f".{STAMP_FILE}.") and name.endswith(".tmp"))


class Attribution:
    """Kernel attribution for `roots`; see the module docstring. `start` raises
    FanotifyError (with a reason fit for people) where fanotify cannot be used."""

    def __init__(
        self,
        roots: Iterable[str],
        sink: Callable[[KernelBatch], None],
        *,
        owners: Callable[[], Iterable[OwnerId]] = list,
        ignore: Sequence[str] = (),
        shared: Sequence[str] | None = None,
        on_attributed: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        self.roots = sorted({os.path.realpath(r) for r in roots}, key=len, reverse=True)
        self.shared = [os.path.realpath(p) for p in (shared_temp() if shared is None else shared)]
        self.ignore = [os.path.realpath(p) for p in ignore]
        self._sink = sink
        self._owners = owners
        self._on_attributed = on_attributed
        self.clock = PidClock()
        self.lanes = PidLanes(self.clock, self.roots, pidfds=True)
        self.stats = Stats()
        self._queue: queue.SimpleQueue[list[_Fact | _Lost] | None] = queue.SimpleQueue()
        self._pending: list[_Fact] = []
        self._hashes: OrderedDict[str, str | None] = OrderedDict()
        self.keeper = Keeper(self.roots)
        self._stdio: dict[int, tuple[float, frozenset[str]]] = {}
        self._owners_at = 0.0
        self._pending_version = -1
        self._watcher: FanotifyWatcher | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        return self._watcher is not None and self._watcher.running

    @property
    def watcher(self) -> FanotifyWatcher | None:
        return self._watcher

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        paths = [p for p in [*self.roots, *self.shared] if os.path.isdir(p)]
        if not paths:
            raise FanotifyError(2, "no root or shared temp folder exists to watch")
        self._refresh_owners(force=True)
        watcher = FanotifyWatcher(
            paths,
            self._on_events,
            prefixes=[*self.roots, *self.shared],
            max_events=MAX_EVENTS,
            pidfds=True,
            before_read=self.clock.mark,
            read_delay=READ_DELAY,
            nice=NICE,
            name="lanewatch-fanotify",
        )
        self._watcher = watcher
        try:
            watcher.start()
        except BaseException:
            self._watcher = None
            raise
        self.keeper.start()
        self._thread = threading.Thread(target=self._run, name="lanewatch-attribution", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Prompt and idempotent."""
        self._stop.set()
        if self._watcher is not None:
            try:
                self._watcher.stop()
            except TimeoutError as exc:
                log.warning("stopping kernel attribution: %s", exc)
        self._queue.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._thread is not None:
            self.keeper.stop()

    # -- the reader: keep it short -------------------------------------------------------------
    def _zone(self, path: str) -> tuple[str, str | None, str | None] | None:
        if f"/{ROOT_META}/" in path or any(_inside(path, p) for p in self.ignore):
            return None  # lanewatch's own data: never anyone's write
        for root in self.roots:
            if path.startswith(root + "/"):
                name, sep, _rest = path[len(root) + 1 :].partition("/")
                if not sep or name == ROOT_META:
                    return None  # a stray file in the root, or the root's own data
                return "ns", f"{root}/{name}", root
        return ("shared", None, None) if any(_inside(path, p) for p in self.shared) else None

    def _on_events(self, events: Sequence[FanEvent]) -> None:
        watcher = self._watcher
        window = watcher.window if watcher is not None else None
        if watcher is not None:
            self.lanes.pidfds = watcher.reports_pidfds
        at = time.time()
        facts: list[_Fact | _Lost] = []
        for ev in events:
            self.stats.events += 1
            if ev.is_overflow or ev.fd_error is not None:
                why = "fanotify queue overflow" if ev.is_overflow else "the kernel could not "
                why += "" if ev.is_overflow else f"open a written file for us ({ev.fd_error})"
                facts.append(_Lost(why, at))
                continue
            if ev.path is None:
                continue
            path, deleted = ev.path, ev.path.endswith(" (deleted)")
            if deleted:
                path = path[: -len(" (deleted)")]
            zone = self._zone(path)
            if zone is None:
                self.stats.dropped += 1
                continue
            writer = self.lanes.resolve(ev.pid, ev.pidfd, window)
            if zone[0] == "shared" and writer.identified and writer.lane is None:
                continue  # nobody's lane, in shared temp: not ours to record
            sample = None
            if ev.is_close_write and ev.fd >= 0:
                try:
                    sample = ev.read_content(prefix_limit=SMALL_FILE)
                except OSError as exc:
                    log.debug("reading %s through its event: %s", path, exc)
            event = "close-write" if ev.is_close_write else "modify"
            facts.append(
                _Fact(path, *zone, writer, event, ev.is_modify, sample, at, window, deleted)
            )
        if facts:
            self._queue.put(facts)

    # -- the attribution thread -----------------------------------------------------------------
    def _run(self) -> None:
        lower_priority(NICE)
        next_tick = time.monotonic()
        while not self._stop.is_set():
            timeout = max(0.0, next_tick - time.monotonic())
            if self._pending:
                timeout = min(timeout, 0.05)
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = []
            if item is None:
                break
            if time.monotonic() >= next_tick:
                self.clock.sample()
                next_tick = time.monotonic() + TICK
            try:
                self._handle(item)
            except Exception:  # one bad batch must not end attribution
                log.exception("kernel attribution failed on a batch")

    def _handle(self, items: list[_Fact | _Lost]) -> None:
        lost = [i for i in items if isinstance(i, _Lost)]
        facts = [i for i in items if isinstance(i, _Fact)]
        if any(_is_stamp(f.path) for f in facts):
            self._stamps_seen(facts)
        self._refresh_owners()
        ready = self._retry_pending() + [f for f in facts if not self._park(f)]
        if lost:
            self.stats.lost += len(lost)
            self._sink(KernelBatch(lost=lost[0].why, at=lost[0].at))
        if not ready:
            return
        writes, observations, persist = self._attribute(ready)
        self._sink(KernelBatch(tuple(writes), tuple(observations), at=time.time()))
        if self._on_attributed is not None:
            self._on_attributed(time.time(), [f.path for f in ready])
        self.keeper.put([k for f in persist if (k := self._keep(f)) is not None])

    def _park(self, f: _Fact) -> bool:
        """Keep a not-yet-identified gone writer for a retry; True if parked."""
        if f.writer.identified or f.writer.pid <= 0 or f.tries_until:
            return False
        f.tries_until = time.monotonic() + PENDING_FOR
        self._pending.append(f)
        return True

    def _retry_pending(self) -> list[_Fact]:
        """Retry the parked writers once the owners changed (a stamp may name them now);
        past their time they go on as "unknown pid"."""
        if not self._pending:
            return []
        done: list[_Fact] = []
        keep: list[_Fact] = []
        now = time.monotonic()
        version = self.lanes.owners.version
        retry, self._pending_version = version != self._pending_version, version
        for f in self._pending:
            if retry:
                w = self.lanes.resolve_gone(f.writer.pid, f.window)
                if w.identified:
                    f.writer = w
            if f.writer.identified or now >= f.tries_until:
                done.append(f)
            else:
                keep.append(f)
        self._pending = keep
        return done

    def _refresh_owners(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._owners_at >= OWNERS_EVERY:
            self._owners_at = now
            self.lanes.set_owners(self._owners())

    def _stamps_seen(self, facts: Sequence[_Fact]) -> None:
        """A stamp rewritten: learn its owner now, not when the engine gets to it."""
        found = []
        for f in facts:
            if not (f.victim and f.root and f.sample is not None and f.sample.complete):
                continue
            if f.path.startswith(f"{f.victim}/{META_DIR}/") and _is_stamp(f.path):
                read = parse_stamp(f.sample.prefix)
                if read.stamp is not None:
                    found.append(owner_of(f.victim, f.root, read.stamp))
        if found:
            self.lanes.set_owners(found)

    # -- facts to writes and incidents -------------------------------------------------------
    def _attribute(
        self, facts: Sequence[_Fact]
    ) -> tuple[list[tuple[str, WriteRecord]], list[tuple[Observation, str]], list[_Fact]]:
        writes: list[tuple[str, WriteRecord]] = []
        observations: list[tuple[Observation, str]] = []
        persist: list[_Fact] = []
        for f in facts:
            w = f.writer
            if f.zone == "shared" and w.lane is None:
                continue  # shared temp: only lanes' writes are ours to record
            sha = f.sample.sha256 if f.sample is not None else None
            size = f.sample.size if f.sample is not None else None
            if f.event == "close-write" and not self._changed(f.path, sha, f.modified):
                continue
            self.stats.attributed += w.identified
            self.stats.unknown += not w.identified
            kw = KernelWrite(
                path=f.path,
                time=f.at,
                event=f.event + (" (deleted since)" if f.deleted else ""),
                size=size,
                sha256=sha,
                pid=w.pid,
                start_ticks=w.start_ticks,
                lane=w.lane if w.identified else None,
                namespace=w.namespace if w.identified else None,
                checkout_id=w.checkout_id,
                checkout_path=w.checkout_path,
                command=w.command,
                how=w.how,
                writer=w.label,
                handed=f.zone == "shared" and self._handed(w, f.path),
            )
            if f.event == "close-write":
                writes.append((f.path, WriteRecord(f.at, size, sha, w.label)))
                persist.append(f)
            if f.zone == "ns" and f.victim is not None and f.root is not None:
                obs = foreign_write(kw, f.victim, victim_owner=self._owns(w, f.victim))
                root = f.root
            else:
                obs = unbound_write(kw, self.roots)
                root = w.root or ""
            if obs is not None:
                observations.append((obs, root))
        return writes, observations, persist

    def _changed(self, path: str, sha: str | None, modified: bool) -> bool:
        """False for a close without a write: opened for writing, same content as before."""
        old = self._hashes.pop(path, None)
        self._hashes[path] = sha
        if len(self._hashes) > LAST_HASHES:
            self._hashes.popitem(last=False)
        return modified or sha is None or old != sha

    def _owns(self, w: Writer, victim: str) -> bool:
        return w.owner and w.namespace == victim

    def _handed(self, w: Writer, path: str) -> bool:
        """Written by the lane's `lanewatch run` itself (it writes only lanewatch's files and
        its stdout/stderr), or into the stdout/stderr it was started with: chosen by whoever
        started the lane, not by the lane."""
        if w.owner_pid is None:
            return False
        if w.pid == w.owner_pid:
            return True
        key = w.owner_pid
        now = time.monotonic()
        cached = self._stdio.get(key)
        if cached is None or now - cached[0] > STDIO_FOR:
            links = set()
            for fd in (1, 2):
                try:
                    links.add(os.readlink(f"/proc/{w.owner_pid}/fd/{fd}"))
                except OSError:
                    continue
            if links or cached is None:  # gone since: keep what we saw while it lived
                cached = (now, frozenset(links))
                self._stdio[key] = cached
            if len(self._stdio) > 256:
                self._stdio.pop(next(iter(self._stdio)))
        return path in cached[1]

    # -- evidence and history on disk (the keeper's thread) --------------------------------------
    def _keep(self, f: _Fact) -> Keep | None:
        w = f.writer
        root = f.root if f.zone == "ns" else w.root
        if root is None:
            return None
        sample = f.sample
        small = sample is not None and sample.complete and _worth_keeping(f.path)
        entry = WriteEntry(
            path=f.path,
            time=f.at,
            size=sample.size if sample else None,
            sha256=sample.sha256 if sample else None,
            stored=False,
            pid=w.pid,
            start_ticks=w.start_ticks,
            identified=w.identified,
            lane=w.lane,
            namespace=w.namespace,
            command=w.command,
            how=w.how,
            event=f.event + (" (deleted since)" if f.deleted else ""),
            victim=f.victim,
        )
        return Keep(root, entry, sample.prefix if small and sample else None)


def _worth_keeping(path: str) -> bool:
    """Small files worth keeping: not lock files, not ledgers (append-only diaries)."""
    name = path.rsplit("/", 1)[-1]
    return not (name.endswith(".lock") or name == "ledger.jsonl")
