"""Kernel write attribution: who wrote each file in the roots and in shared temp.

`Attribution` runs a `FanotifyWatcher` over every root and the shared temp folders, on three
threads of its own:

- the reader (`lanewatch-fanotify`), in the watcher's callback while the event descriptors are
  open: sorts each event's path (a namespace's file, shared temp, or ours: dropped), maps the
  pid to a lane (`processes.pidlane`, with the event's pidfd), and at a close-after-write reads
  the file through the event's descriptor (size, sha256, and the bytes of a small file). A
  stamp's owner is learned there and then, before the batch's later events are mapped. It
  hands plain facts to a queue and returns: no disk writes, no waiting.
- the attribution thread (`lanewatch-attribution`): turns facts into `KernelWrite`s and
  incidents (`kernel.writefacts`, `model.kernelwrites`) and hands them to the engine
  (`sink`). A writer reaped before we read its event is known by the process connector
  (`processes.proclives`, its own thread `lanewatch-proclives`) or the pid clock; one not
  provable yet is retried for
  `PENDING_FOR` seconds (its stamp may be on its way), then recorded as "unknown pid".
- the keeper (`lanewatch-keeper`, `kernel.keeper`): keeps small files in the root's evidence
  store (`records.evidence`) and each write in the root's history (`records.writes`).

Overflow (`FAN_Q_OVERFLOW`, or an event whose file the kernel could not open for us) is handed
on as `KernelBatch.lost`: the engine says so and rescans; nothing is attributed for the gap.
See docs/fanotify.md.
"""

from __future__ import annotations

import logging
import os
import queue
import tempfile
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, cast

from lanewatch.kernel.fanignore import foreign_dirs_available
from lanewatch.kernel.fanotify import (
    ContentSample,
    FanEvent,
    FanotifyError,
    FanotifyWatcher,
    fanotify_available,
)
from lanewatch.kernel.keeper import Keeper
from lanewatch.kernel.throttle import Pace
from lanewatch.kernel.writefacts import (
    RACED,
    UNSURE,
    Attributor,
    Fact,
    KernelBatch,
    Lost,
    Stats,
    is_stamp,
    raced_after,
    raced_within,
)
from lanewatch.lanes.roots import ROOT_META
from lanewatch.lanes.stamp import META_DIR, parse_stamp
from lanewatch.linux.mountview import MountViews
from lanewatch.linux.paths import SHARED_TEMP, is_under
from lanewatch.linux.proc import pidfd_alive, pin, thread_states
from lanewatch.processes.pidclock import Mark, PidClock
from lanewatch.processes.pidlane import OwnerId, PidLanes, Writer, owner_of
from lanewatch.processes.proclives import ProcLives
from lanewatch.records.evidence import SMALL_FILE

__all__ = ["Attribution", "KernelBatch", "attribution_status"]

log = logging.getLogger(__name__)

PENDING_FOR = 1.5  # seconds a gone writer is retried before it is "unknown pid"
MAX_PENDING = 4096  # writers waiting for a retry
MAX_PENDING_BYTES = 8 * 1024 * 1024  # of their contents
OWNERS_EVERY = 0.5  # seconds between two refreshes of the owners from the model
TICK = 1.0  # the attribution thread wakes at least this often (pid clock, pending, roots)
MAX_EVENTS = 128  # per read: each event holds two descriptors (the file and a pidfd)
READ_DELAY = 0.002  # seconds: let the kernel merge a write's MODIFY and CLOSE_WRITE first
# A file another process wrote within CONTESTED seconds is contested: the content read at a
# close-write waits for the other writers' events still on its way (a writer preempted between
# its data landing and its event being queued): at least GRACE seconds, then until none of
# those writers may be inside a write and the reader has read every event queued until then;
# an event of theirs read since our read makes the content unknown, and so does waiting past
# MAX_GRACE (`_judge`). Only contested files wait: one writer per file costs no latency.
CONTESTED = 1.0
GRACE = 0.1
MAX_GRACE = 2.0
RECENT_PATHS = 4096
RECENT_WRITERS = 8  # per path, the latest
ZONE_FOLDERS = 4096  # folders whose zone the reader keeps (the latest)

# Where a path lies: ("ns", namespace, root), ("shared", None, None), or None (not ours).
Zone = tuple[str, str | None, str | None] | None
HINT_KERNEL = "fanotify names the writer of every write in the roots and shared temp"
UNFILTERED = "every write on the watched filesystems wakes it"  # no kernel ignore marks
HINT_INFERRED = (
    "writers are judged from the files and folders lane processes hold when a write is seen, "
    "so a write that opens and closes at once can be missed"
)
NEEDS_PRIVILEGE = "needs root or CAP_SYS_ADMIN"  # how linux/fanotify_abi.py words EPERM


def attribution_status(probe: str | None = None) -> tuple[str, str]:
    """("kernel" | "inferred", one sentence) for this process, without starting anything."""
    ok, reason = fanotify_available(probe)
    if ok:
        filtered, why = foreign_dirs_available(probe or tempfile.gettempdir())
        return "kernel", HINT_KERNEL + ("" if filtered else f"; {UNFILTERED} ({why})")
    if reason.startswith(NEEDS_PRIVILEGE):
        how = (
            "for the exact writer of every write, run `sudo lanewatch record` beside the "
            "dashboard (fanotify needs root or CAP_SYS_ADMIN)"
        )
    else:
        how = f"kernel attribution is not available here: {reason}"
    return "inferred", f"{HINT_INFERRED}; {how}"


def _file_id(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _may_be_writing(pid: int) -> bool:
    """Whether a thread of `pid` may be inside a write whose event is not queued yet: running
    or runnable (R: preempted, even in the kernel) or in an uninterruptible sleep (D: memory
    for the event, a lock). Between its data landing and its event a writer sleeps in no other
    state (a write that faults on a userfaultfd buffer, or a FUSE file's, can: not covered).
    A process we cannot look at (pid 0: another pid namespace; denied) may be."""
    if pid <= 0:
        return True
    try:
        states = thread_states(pid)
    except OSError:
        return True
    return states is not None and ("R" in states or "D" in states)


def shared_temp() -> list[str]:
    return [p for p in SHARED_TEMP if os.path.isdir(p)]


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
        self.lives = ProcLives()  # every fork and exit: writers reaped before we read them
        self.lanes = PidLanes(self.clock, self.roots, pidfds=True, lives=self.lives)
        self.stats = Stats()
        self.views = MountViews()  # on the reader only (`_in_our_words`)
        self._queue: queue.SimpleQueue[list[Fact | Lost] | None] = queue.SimpleQueue()
        # The reader's facts held back until the events queued when we read their contents
        # are read too (one may be another writer's write of the same file), in kernel order:
        # [facts, events still to read, the read that made them].
        self._holds: deque[list[Any]] = deque()
        self._reads = 0
        # Recent writers by path: (the read that began the entry, {pid: (when read, monotonic;
        # which read)}), on the reader; read by the attribution thread for the contested
        # contents it holds (`_contested`).
        self._recent: OrderedDict[str, tuple[int, dict[int, tuple[float, int]]]] = OrderedDict()
        self._contested: list[Fact] = []
        self._pending: list[Fact] = []
        self._pending_bytes = 0
        self.attributor = Attributor(self.roots, self.stats, self._lane_of)
        self.pace = Pace()  # the reader steps back while writers flood us
        self._batch_began: float | None = None
        self.keeper = Keeper(self.roots)
        self._owners_at = 0.0
        self._pending_version = -1
        self._watcher: FanotifyWatcher | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # `_zone` by folder, on the reader; and the folders a name may be one of.
        self._zones: OrderedDict[str, Zone] = OrderedDict()
        self._prefixes = [*self.roots, *self.shared, *self.ignore]

    @property
    def running(self) -> bool:
        return self._watcher is not None and self._watcher.running

    @property
    def watcher(self) -> FanotifyWatcher | None:
        return self._watcher

    def filter_note(self) -> str:
        """For the status hint: "" when busy folders outside the watched ones are ignored in
        the kernel, else why every write on the watched filesystems still wakes us."""
        foreign = self._watcher.foreign if self._watcher is not None else None
        if foreign is not None and foreign.available:
            return ""
        why = foreign.reason if foreign is not None else "not started"
        return f"; {UNFILTERED} ({why})"

    def _lane_of(self, key: str) -> tuple[str | None, str | None]:
        """A namespace's lane and family, from its stamp (for incident titles and families)."""
        owner = self.lanes.owners.by_key.get(key)
        return (owner.lane, owner.family) if owner is not None else (None, None)

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        paths = [p for p in [*self.roots, *self.shared] if os.path.isdir(p)]
        if not paths:
            raise FanotifyError(2, "no root or shared temp folder exists to watch")
        self._refresh_owners(force=True)
        if not self.lives.start():  # then the pid clock alone proves reaped writers
            log.info("kernel attribution without the process connector: %s", self.lives.reason)
        watcher = FanotifyWatcher(
            paths,
            self._on_events,
            prefixes=[*self.roots, *self.shared],
            max_events=MAX_EVENTS,
            pidfds=True,
            before_read=self.clock.mark,
            read_delay=READ_DELAY,
            name="lanewatch-fanotify",
            ignore_foreign=True,
            after_read=self._after_read,
        )
        self._watcher = watcher
        try:
            watcher.start()
        except BaseException:
            self._watcher = None
            self.lives.close()
            raise
        self.keeper.start()
        self._thread = threading.Thread(target=self._run, name="lanewatch-attribution", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Prompt and idempotent."""
        self._stop.set()
        self.pace.stop()
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
        self.lives.close()
        self.clock.close()
        self.views.close()

    # -- the reader: keep it short -------------------------------------------------------------
    def _zone(self, path: str) -> Zone:
        """`_zone_of`, by the file's folder: every file directly in one folder has the same
        zone, unless the folder is (or is above) a root, a shared or an ignored folder (then
        a name in it may be one of those: asked each time). A neighbour writing thousands of
        files a second in shared temp asks this once per folder."""
        folder, sep, _name = path.rpartition("/")
        if not sep:
            return self._zone_of(path)
        zones = self._zones
        if folder in zones:
            return zones[folder]
        zone = self._zone_of(path)
        if not any(p == folder or p.startswith(folder + "/") for p in self._prefixes):
            zones[folder] = zone
            if len(zones) > ZONE_FOLDERS:
                zones.popitem(last=False)
        return zone

    def _zone_of(self, path: str) -> Zone:
        if f"/{ROOT_META}/" in path:
            return None  # lanewatch's own data: never anyone's write
        for root in self.roots:
            if path.startswith(root + "/"):
                name, sep, _rest = path[len(root) + 1 :].partition("/")
                if not sep or name == ROOT_META:
                    return None  # a stray file in the root, or the root's own data
                return "ns", f"{root}/{name}", root
        # Only after the roots: the default root (`<state dir>/scratch`) and the demo's are
        # inside the state folder, which is otherwise lanewatch's own (registry, exports).
        if any(is_under(path, p) for p in self.ignore):
            return None
        return ("shared", None, None) if any(is_under(path, p) for p in self.shared) else None

    def _on_events(self, events: Sequence[FanEvent]) -> None:
        self._batch_began = began = time.monotonic()
        self.pace.count(len(events))
        watcher = self._watcher
        # What our `before_read` (the pid clock's `mark`) returned before the read.
        window = cast("Mark | None", watcher.window) if watcher is not None else None
        if watcher is not None:
            self.lanes.pidfds = watcher.reports_pidfds
        at = time.time()
        facts: list[Fact | Lost] = []
        # One resolve per writer per read: a live pidfd names the event's own process, and
        # two live pidfds of one pid in one read are the same process (its number cannot come
        # round again within a read). Forgotten when a stamp is seen (owners changed).
        writers: dict[int, Writer] = {}
        for ev in events:
            self.stats.events += 1
            if ev.is_overflow or ev.fd_error is not None:
                why = "fanotify queue overflow" if ev.is_overflow else "the kernel could not "
                why += "" if ev.is_overflow else f"open a written file for us ({ev.fd_error})"
                facts.append(Lost(ev.note or why, at))
                continue
            if ev.path is None:
                continue
            path, deleted = ev.path, ev.path.endswith(" (deleted)")
            if deleted:
                path = path[: -len(" (deleted)")]
            if ev.theirs:
                path = self._in_our_words(ev, path)
            zone = self._zone(path)
            if zone is None:
                self.stats.dropped += 1
                continue
            contested = self._note_write(path, ev, began)
            writer = writers.get(ev.pid) if ev.pidfd >= 0 else None
            if writer is None:
                writer = self.lanes.resolve(ev.pid, ev.pidfd, window)
                if ev.pidfd >= 0:
                    writers[ev.pid] = writer
            if zone[0] == "shared" and writer.identified and writer.lane is None:
                continue  # nobody's lane, in shared temp: not ours to record
            sample = None
            if ev.is_close_write and ev.fd >= 0:
                try:
                    sample = ev.read_content(prefix_limit=SMALL_FILE)
                except OSError as exc:
                    log.debug("reading %s through its event: %s", path, exc)
            event = "close-write" if ev.is_close_write else "modify"
            fact = Fact(path, *zone, writer, event, ev.is_modify, sample, at, window, deleted)
            if zone[0] == "shared" and ev.fd >= 0:
                fact.file_id = _file_id(ev.fd)  # was it handed to the lane? (model/family.py)
            if sample is not None and contested:
                fact.contested_at, fact.read_no = began, self._reads
            if sample is not None and sample.size == 0:
                # An empty file at a close-write: its writer's own (`: > f`), or truncated
                # since by another open(O_TRUNC), which reports no event with a path to us (its
                # write comes later, if at all). We cannot tell: not tied to this writer.
                fact.sample, fact.raced = None, RACED
            facts.append(fact)
            if zone[0] == "ns" and is_stamp(path):
                # Its owner is known before the next event is resolved, not when the
                # attribution thread gets to it: an in-process owner (`pytest -p lanewatch`)
                # writes in shared temp right after its stamp, and a write there by a process
                # of no lane is dropped above.
                self._stamps_seen([fact])
                writers.clear()
        self._settle(events, facts)

    def _in_our_words(self, ev: FanEvent, path: str) -> str:
        """`path` of an event that came through another namespace's mount the file handle
        could not rename (`linux/mountview.py`): renamed through the writer's mount table,
        read now, while its pidfd says /proc/PID is still the writer; else as given."""
        try:
            dfd = pin(ev.pid)
        except OSError:
            return path
        try:
            if ev.pidfd >= 0 and not pidfd_alive(ev.pidfd):
                return path  # reaped before we pinned it: /proc/PID may be another's
            view = self.views.of(ev.pid, dfd)
            return path if view is None else view(path)
        finally:
            os.close(dfd)

    def _note_write(self, path: str, ev: FanEvent, now: float) -> bool:
        """Remember this write event (read at monotonic `now`, in read `self._reads`); True if
        another process wrote `path` lately. A writer dropped from a path's RECENT_WRITERS
        had that many others write after it: a content read before it is unknown anyway."""
        if not (ev.is_modify or ev.is_close_write):
            return False
        entry = self._recent.get(path)
        if entry is None:
            entry = self._recent[path] = (self._reads, {})
            if len(self._recent) > RECENT_PATHS:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(path)
        seen = entry[1]
        contested = any(pid != ev.pid and now - t < CONTESTED for pid, (t, _) in seen.items())
        seen.pop(ev.pid, None)  # to the end: the latest
        seen[ev.pid] = (now, self._reads)
        if len(seen) > RECENT_WRITERS:
            del seen[next(iter(seen))]
        return contested

    def _settle(self, events: Sequence[FanEvent], facts: list[Fact | Lost]) -> None:
        """Each content to the write that produced it, or to nobody (docs/fanotify.md): a file
        written by two processes in one batch, or by another one whose event was queued when
        we read it, has a content we cannot tie to either close-write: it is not kept as theirs."""
        for hold in self._holds:
            raced_after(hold[0], events)
        raced_within(facts, events)
        if not facts:
            return
        watcher = self._watcher
        read = any(isinstance(f, Fact) and f.sample is not None for f in facts)
        left = watcher.queued() if read and watcher is not None else 0
        if left or self._holds:
            self._holds.append([facts, left, self._reads])
        else:
            self._queue.put(facts)

    def _after_read(self, records: int, _delivered: int) -> None:
        """After each read (its events seen by `_settle`): hand on what need wait no more."""
        for hold in self._holds:
            if hold[2] != self._reads:  # not this read's own facts: its records come later
                hold[1] -= records
        self._reads += 1
        while self._holds and self._holds[0][1] <= 0:
            self._queue.put(self._holds.popleft()[0])
        if self._batch_began is not None:
            busy, self._batch_began = time.monotonic() - self._batch_began, None
            self.pace.rest(busy)

    # -- the attribution thread -----------------------------------------------------------------
    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            timeout = max(0.0, next_tick - time.monotonic())
            if self._pending or self._contested:
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

    def _handle(self, items: list[Fact | Lost]) -> None:
        lost = [i for i in items if isinstance(i, Lost)]
        facts = [i for i in items if isinstance(i, Fact)]
        self._refresh_owners()
        facts = self._uncontested(facts)
        ready = self._retry_pending() + [f for f in facts if not self._park(f)]
        if lost:
            self.stats.lost += len(lost)
            self._sink(KernelBatch(lost=lost[0].why, at=lost[0].at))
        if not ready:
            return
        writes, observations, keeps = self.attributor.attribute(ready)
        if writes or observations:  # an empty batch would still wake the engine and its prober
            self._sink(KernelBatch(tuple(writes), tuple(observations), at=time.time()))
        if self._on_attributed is not None:
            self._on_attributed(time.time(), [f.path for f in ready])
        self.keeper.put(keeps)  # disk last, on the keeper's thread

    def _uncontested(self, facts: list[Fact]) -> list[Fact]:
        """`facts` and the contested ones now judged (`_judge`), in order; the others wait
        (with every later fact of the same path, so a file's writes stay in order)."""
        now = time.monotonic()
        todo = [*self._contested, *facts]
        due = [f for f in todo if f.sample is not None and 0 < f.contested_at <= now - GRACE]
        rivals = {id(f): self._rivals(f) for f in due}
        busy = {p for pids in rivals.values() for p in pids if _may_be_writing(p)}
        # Asked after the rivals' states: every event they queued before is read (`_judge`).
        caught_up = bool(due) and self._watcher is not None and self._watcher.caught_up()
        waiting: list[Fact] = []
        out: list[Fact] = []
        blocked: set[str] = set()  # paths with a fact still waiting
        for f in todo:
            if f.path in blocked or not self._judge(f, now, rivals.get(id(f)), busy, caught_up):
                waiting.append(f)
                blocked.add(f.path)
                continue
            out.append(f)
        self._contested = waiting
        return out

    def _rivals(self, f: Fact) -> set[int]:
        """The other processes that wrote `f`'s file within CONTESTED before its content was
        read, or since (as far as the reader has read)."""
        entry = self._recent.get(f.path)
        seen = list(entry[1].items()) if entry is not None else []  # a copy: the reader adds
        since = f.contested_at - CONTESTED
        return {p for p, (t, _) in seen if p != f.writer.pid and t > since}

    def _judge(
        self, f: Fact, now: float, rivals: set[int] | None, busy: set[int], caught_up: bool
    ) -> bool:
        """Whether `f`'s content is judged now (False: it waits); unknown if another writer's
        data may have landed before our read. A rival whose data landed before it has queued
        its event by the time none of its threads is running, runnable or in uninterruptible
        sleep (`busy`: a writer preempted inside its write is runnable); once the reader has
        read every event queued after that (`caught_up`), any rival's event read since our
        read counts. No timing assumption is left, but a bound: past MAX_GRACE it is unknown."""
        if not f.contested_at or f.sample is None:
            return True
        if rivals is None:
            return False  # in its GRACE
        if rivals & busy or not caught_up:
            if now < f.contested_at + MAX_GRACE:
                return False
            f.sample, f.raced = None, UNSURE
            self.stats.unsure += 1
            return True
        entry = self._recent.get(f.path)
        if entry is None or entry[0] > f.read_no:  # dropped since (RECENT_PATHS newer paths)
            f.sample, f.raced = None, UNSURE
            self.stats.unsure += 1
        elif any(p != f.writer.pid and r > f.read_no for p, (_, r) in list(entry[1].items())):
            f.sample, f.raced = None, RACED
        return True

    def _park(self, f: Fact) -> bool:
        """Keep a fact for a retry; True if parked: a gone writer not identified yet, or a
        lane's writer in shared temp whose lane is known (by its environment) before its
        owner's stamp is, so its checkout is not (a write in its own checkout is no incident:
        it cannot be judged without it). Bounded: past MAX_PENDING it goes on as it is at
        once, past MAX_PENDING_BYTES without its bytes."""
        if f.tries_until:
            return False
        if f.writer.identified:
            if f.zone != "shared" or self._complete(f):
                return False
        elif f.writer.pid <= 0:
            return False
        if len(self._pending) >= MAX_PENDING:
            return False
        if f.sample is not None and f.sample.prefix:
            if self._pending_bytes + len(f.sample.prefix) > MAX_PENDING_BYTES:
                f.sample = ContentSample(f.sample.size, f.sample.sha256, b"")
            self._pending_bytes += len(f.sample.prefix)
        f.tries_until = time.monotonic() + PENDING_FOR
        self._pending.append(f)
        return True

    def _complete(self, f: Fact) -> bool:
        """The checkout of a lane's writer known by its environment before its owner: filled
        from the owners when they know it now. True when known (or not a lane's writer)."""
        w = f.writer
        if not w.identified or w.namespace is None or w.checkout_path is not None:
            return True
        o = self.lanes.owners.by_key.get(w.namespace)
        if o is None:
            return False
        f.writer = replace(
            w,
            checkout_id=o.checkout_id,
            checkout_path=o.checkout_path,
            git_common_dir=o.git_common_dir,
            owner_pid=o.pid,
        )
        return True

    def _retry_pending(self) -> list[Fact]:
        """Retry the parked facts once the owners changed (a stamp may name their writer, or
        their lane's checkout, now); past their time they go on as they are ("unknown pid")."""
        if not self._pending:
            return []
        done: list[Fact] = []
        keep: list[Fact] = []
        now = time.monotonic()
        version = self.lanes.owners.version
        retry, self._pending_version = version != self._pending_version, version
        for f in self._pending:
            if retry and not f.writer.identified:
                w = self.lanes.resolve_gone(f.writer.pid, f.window)
                if w.identified:
                    f.writer = w
            known = f.writer.identified and (f.zone != "shared" or self._complete(f))
            if known or now >= f.tries_until:
                done.append(f)
                self._pending_bytes -= len(f.sample.prefix) if f.sample is not None else 0
            else:
                keep.append(f)
        self._pending = keep
        return done

    def _refresh_owners(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._owners_at >= OWNERS_EVERY:
            self._owners_at = now
            self.lanes.set_owners(self._owners())

    def _stamps_seen(self, facts: Sequence[Fact]) -> None:
        """A stamp rewritten: learn its owner now (on the reader's thread, as its event is
        read), not when the engine gets to it."""
        found = []
        for f in facts:
            if not (f.victim and f.root and f.sample is not None and f.sample.complete):
                continue
            if f.path.startswith(f"{f.victim}/{META_DIR}/") and is_stamp(f.path):
                read = parse_stamp(f.sample.prefix)
                if read.stamp is not None:
                    found.append(owner_of(f.victim, f.root, read.stamp))
        if found:
            self.lanes.set_owners(found, complete=False)

    # -- facts to writes and incidents -------------------------------------------------------
