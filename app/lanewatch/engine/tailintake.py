"""The engine's tail: the watches (one `files.tail.RootWatch` per root) and the items they
queue (one per event), sorted by namespace and deduplicated by path, then read (sizes, stamps,
ledgers, receipts, new subfolders) and handed back as events (`intake.Found`) for the model
keeper to apply; heartbeats gathered and read together; the roots' health notices after lost
events. Control items (probe reports, rescans, acknowledgements, kernel batches) share the
queue; the worker (`worker.py`) routes them.
"""

from __future__ import annotations

import logging
import os
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lanewatch.engine.intake import DiskMemo, Found, LedgerState, Namespaces, NsFiles
from lanewatch.files import walk as scanner
from lanewatch.files.tail import RootWatch
from lanewatch.lanes.stamp import LEDGER_FILE, META_DIR, STAMP_FILE
from lanewatch.model import model as m
from lanewatch.model.views import HealthStatus, SourceHealth

log = logging.getLogger(__name__)

OVERFLOW_NOTICE = 10.0  # how long "overflow-rescan" stays in a root's health
BEAT_DELAY = 0.25  # heartbeats (stamp utimes) wait at most this long, to be applied together

# The walks' readers the tail reads with (`WalkIntake`): a write is read as a walk reads it.
SeenReader = Callable[[str, str, str, float], m.NamespaceSeen]
StampReader = Callable[[str, m.NsRecord, float, Found], None]
LedgerReader = Callable[[str, str, Found], LedgerState]
ReceiptReader = Callable[[str, str, str, scanner.ReceiptRead, Found], None]


@dataclass(slots=True)
class Dirty:
    """What a batch of tail items says happened in one namespace."""

    paths: dict[str, str] = field(default_factory=dict)
    dirs_new: set[str] = field(default_factory=set)
    dirs_gone: set[str] = field(default_factory=set)
    stamp: bool = False  # rewritten (or removed)
    beat: bool = False  # attributes only: a heartbeat
    ledger: bool = False
    ns: str = ""  # "new" | "gone" | ""


@dataclass(slots=True)
class Arrived:
    """A namespace the tail saw arrive: the keeper applies `seen` (and all found before it)
    first, since the record must exist before its walk is applied; then it is walked."""

    key: str
    seen: m.NamespaceSeen


class TailIntake:
    def __init__(
        self,
        roots: Sequence[str],
        items: queue.SimpleQueue[Any],
        *,
        poll: bool,
        poll_interval: float,
        namespaces: Namespaces,
        memo: DiskMemo,
        seen: SeenReader,
        stamp_changed: StampReader,
        catch_up_ledger: LedgerReader,
        receipt: ReceiptReader,
    ) -> None:
        """`items`: the queue every watch puts its items on; `namespaces`: the model as
        applied so far (read only); `memo`: sizes per file and the history it keeps up to
        date; the readers: the walks' (`WalkIntake`)."""
        self.roots = list(roots)
        self._namespaces = namespaces
        self.memo = memo
        self._seen, self._stamp = seen, stamp_changed
        self._catch_up_ledger, self._receipt = catch_up_ledger, receipt
        self.watches = {
            r: RootWatch(r, items, poll=poll, poll_interval=poll_interval) for r in self.roots
        }
        self._notice_until: dict[str, float] = {}
        self.watching = False  # set by start; until then the worker's tick leaves them alone
        self._beats: set[str] = set()  # namespaces whose stamp was touched since `beats`
        self.beats_due: float | None = None  # monotonic time by which to read them

    # -- tail items ----------------------------------------------------------------------------
    def sort(self, items: list[Any]) -> tuple[dict[str, Dirty], list[tuple[Any, ...]]]:
        """A batch split: what happened per namespace (deduplicated by path), and the control
        items in their order."""
        dirty: dict[str, Dirty] = {}
        controls: list[tuple[Any, ...]] = []
        for item in items:
            op = item[0]
            if len(item) == 5 and len(op) == 1:
                self._sort(item, dirty)
            else:
                controls.append(item)
        return dirty, controls

    def _sort(self, item: tuple[str, str, str, str, bool], dirty: dict[str, Dirty]) -> None:
        op, root, ns, path, is_dir = item
        key = f"{root}/{ns}"
        d = dirty.get(key)
        if d is None:
            d = dirty[key] = Dirty()
        if path == key:
            if is_dir:
                d.ns = "new" if op == "c" else "gone" if op == "d" else d.ns
            return
        rel = path[len(key) + 1 :]
        if rel.startswith(META_DIR + "/"):
            name = rel[len(META_DIR) + 1 :]
            if name == STAMP_FILE:
                if op == "a":  # attributes only: a heartbeat (utime); the size is unchanged
                    d.beat = True
                    return
                d.stamp = True
            elif name == LEDGER_FILE:
                d.ledger = True
        if is_dir:
            if op == "c":
                d.dirs_new.add(path)
            elif op == "d":
                d.dirs_gone.add(path)
            return
        d.paths[path] = op

    def namespace(self, key: str, d: Dirty, now: float) -> Found | Arrived:
        """What happened in one namespace, read: its events, or `Arrived` (walk it)."""
        out = Found()
        rec = self._namespaces().get(key)
        if d.ns or rec is None:
            if not os.path.isdir(key) or os.path.islink(key):
                if rec is not None:
                    out.emit(m.NamespaceGone(key))
                return out
            if rec is None or d.ns == "new":
                root, _, name = key.rpartition("/")
                return Arrived(key, self._seen(root, name, key, now))
        assert rec is not None
        if d.ledger:
            self._catch_up_ledger(key, rec.root, out)
        if d.stamp:
            self._stamp(key, rec, now, out)
        elif d.beat:
            if self.beats_due is None:
                self.beats_due = time.monotonic() + BEAT_DELAY
            self._beats.add(key)
        files = self.memo.files.get(key)
        history = self.memo.history
        writes = 0
        for folder in d.dirs_gone:
            if files is not None:
                files.drop_under(folder)
        for folder in d.dirs_new:
            writes += self._walk_new(folder, files, now, out)
        meta = f"{key}/{META_DIR}/"
        for path, op in d.paths.items():
            st: os.stat_result | None = None
            if op != "d":
                try:
                    st = os.lstat(path)
                except OSError:
                    st = None
            if files is not None:
                files.set(path, st)
            if path.startswith(meta) or st is None:
                continue
            size = st.st_size
            writes += 1
            out.paths.append(path)
            if scanner.is_receipt(key, path):
                r = scanner.read_receipt(path)
                if r is not None:
                    self._receipt(key, rec.root, rec.name, r, out)
            else:
                history.record(path, now, size)
        if files is not None and (d.paths or d.dirs_new or d.dirs_gone):
            out.emit(m.Counted(key, len(files.sizes), files.bytes, None, files.usage.allocated))
        if writes:
            out.emit(m.Wrote(key, now, writes))
        return out

    def _walk_new(self, folder: str, files: NsFiles | None, now: float, out: Found) -> int:
        """A new subfolder: walk it, since files may have been written before its watch.

        What the walk finds replaces what was known under the folder: before its watch, a
        file could come and go without an event. An owner's stamp is written by a temporary
        file and a rename; a namespace walked on arrival while the temporary file existed
        counted it, the rename came before watchdog watched `.lanewatch/` (it does when it
        reads the folder's creation), and no event ever said the temporary file was gone."""
        found = scanner.NamespaceScan(folder)
        try:
            scanner.walk(folder, found)
        except FileNotFoundError:
            return 0
        if files is not None:
            files.drop_under(folder)
            for path, size in found.sizes.items():
                files.bytes += size - files.sizes.get(path, 0)
                files.sizes[path] = size
            files.usage.merge(found.usage)
        for path, size in found.sizes.items():
            self.memo.history.record(path, now, size)
        out.paths.extend(found.sizes)
        return len(found.sizes)

    # -- heartbeats ----------------------------------------------------------------------------
    @property
    def has_beats(self) -> bool:
        return bool(self._beats)

    def beats(self) -> Found:
        """Heartbeats since the last call, for one `apply`: each is an mtime (one `lstat`),
        never a re-read of the stamp. A rewrite comes as its own events (`stamp_changed`). At
        1,000 lanes beating every 5 s, one batch of ~50 instead of 200 batches a second, each
        with its own model update and delivery."""
        keys, self._beats, self.beats_due = self._beats, set(), None
        out = Found()
        now = time.time()
        namespaces = self._namespaces()
        for key in keys:
            rec = namespaces.get(key)
            if rec is None:
                continue
            try:
                mtime = os.lstat(f"{key}/{META_DIR}/{STAMP_FILE}").st_mtime
            except OSError:  # gone or replaced since: read it for what it is
                self._stamp(key, rec, now, out)
                continue
            out.emit(m.Heartbeat(key, mtime))
        return out

    # -- health notices ------------------------------------------------------------------------
    def notice(self, root: str, detail: str) -> m.HealthChanged:
        """`root`'s health says `detail` ("overflow-rescan") for `OVERFLOW_NOTICE` seconds."""
        self._notice_until[root] = time.monotonic() + OVERFLOW_NOTICE
        return m.HealthChanged(SourceHealth(root, HealthStatus.OVERFLOW_RESCAN.value, detail))

    def lost(self, root: str, op: str) -> m.HealthChanged:
        """The watch of `root` lost events (an "overflow" or "overrun" item): the notice."""
        if op == "overrun":
            self.watches[root].handler.overrun = False
        return self.notice(root, f"events were lost ({op}); rescanned at {time.strftime('%X')}")

    def notices_over(self, mono: float) -> list[m.Event]:
        """Health back to what the watch is, for every notice older than `OVERFLOW_NOTICE`."""
        out: list[m.Event] = []
        for root, until in list(self._notice_until.items()):
            if mono >= until:
                del self._notice_until[root]
                w = self.watches[root]
                if w.mode != "off":
                    status = HealthStatus.OK if w.mode == "inotify" else HealthStatus.POLLING
                    out.append(m.HealthChanged(SourceHealth(root, status.value, w.detail)))
        return out

    # -- watches -------------------------------------------------------------------------------
    def watched(self) -> list[str]:
        """The roots a watch covers now (inotify or polling): not a missing or degraded one."""
        return [root for root in self.roots if self.watches[root].mode != "off"]

    def problems(self) -> Iterator[tuple[str, str]]:
        """Each root whose watch stopped covering it, with why (none before `start`); one at
        a time, so each is looked at after the one before it was dealt with."""
        for root in self.roots if self.watching else ():
            problem = self.watches[root].problem()
            if problem is not None:
                yield root, problem

    def rewatch(self, root: str, problem: str) -> tuple[list[m.Event], bool]:
        """The watch on `root` stopped covering it: re-watch if it exists, else mark it gone.
        True with the events when it is watched again (the worker rescans it)."""
        watch = self.watches[root]
        if problem != "retry":
            log.info("re-watching %s: %s", root, problem)
        exists = os.path.isdir(root)
        if not exists:
            watch.stop()
            gone = SourceHealth(root, HealthStatus.MISSING.value, problem)
            return [m.HealthChanged(gone), m.RootListed(root, frozenset())], False
        health = watch.start()
        if watch.mode == "off":
            return [m.HealthChanged(health)], False
        self._notice_until.pop(root, None)
        return [m.HealthChanged(health)], True

    def fall_back(self, root: str) -> SourceHealth | None:
        """inotify ran out of watches on `root`: poll it instead (None if it already polls)."""
        watch = self.watches[root]
        if watch.mode != "inotify":
            return None
        return watch.fall_back_to_polling()

    def start(self) -> list[m.Event]:
        self.watching = True
        return [m.HealthChanged(self.watches[root].start()) for root in self.roots]

    def stop(self) -> None:
        for watch in self.watches.values():
            watch.stop()
