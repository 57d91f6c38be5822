"""The worker's tail items: what the watches queued (one item per event), sorted by namespace
and deduplicated by path, then read (sizes, stamps, ledgers, receipts, new subfolders) and
turned into events; control items (probe reports, rescans, overflows, acknowledgements,
kernel attribution); heartbeats gathered and applied together; the watches themselves.
"""

from __future__ import annotations

import logging
import os
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lanewatch.engine.modelkeeper import NsFiles
from lanewatch.engine.probeintake import ProbeResults
from lanewatch.files import walk as scanner
from lanewatch.files.tail import RootWatch
from lanewatch.lanes.stamp import LEDGER_FILE, META_DIR, STAMP_FILE
from lanewatch.model import model as m
from lanewatch.model.views import Changes, HealthStatus, SourceHealth

if TYPE_CHECKING:
    from lanewatch.kernel.attribution import KernelBatch

log = logging.getLogger(__name__)

OVERFLOW_NOTICE = 10.0  # how long "overflow-rescan" stays in a root's health
BEAT_DELAY = 0.25  # heartbeats (stamp utimes) wait at most this long, to be applied together


@dataclass(slots=True)
class _Dirty:
    paths: dict[str, str] = field(default_factory=dict)
    dirs_new: set[str] = field(default_factory=set)
    dirs_gone: set[str] = field(default_factory=set)
    stamp: bool = False  # rewritten (or removed)
    beat: bool = False  # attributes only: a heartbeat
    ledger: bool = False
    ns: str = ""  # "new" | "gone" | ""


class TailItems(ProbeResults):
    def __init__(
        self,
        roots: Sequence[str],
        *,
        poll: bool = False,
        poll_interval: float = 2.0,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        super().__init__(roots, deliver=deliver, on_applied=on_applied)
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.watches = {
            r: RootWatch(r, self.queue, poll=poll, poll_interval=poll_interval) for r in self.roots
        }
        self._notice_until: dict[str, float] = {}
        self.watching = False  # set by start_watches; until then tick leaves the watches alone
        self._beats: set[str] = set()  # namespaces whose stamp was touched since apply_beats
        self.beats_due: float | None = None  # monotonic time by which to apply them

    # -- tail items ----------------------------------------------------------------------------
    def process(self, items: list[Any]) -> None:
        self.stats["batches"] += 1
        self.stats["items"] += len(items)
        dirty: dict[str, _Dirty] = {}
        roots_to_rescan: set[str] = set()
        for item in items:
            op = item[0]
            if len(item) == 5 and len(op) == 1:
                self._sort(item, dirty)
            else:
                self._control(item, roots_to_rescan)
        now = time.time()
        for key, d in dirty.items():
            self._namespace(key, d, now)
        self.commit()
        for root in roots_to_rescan:
            self.rescan_root(root)

    def _sort(self, item: tuple[str, str, str, str, bool], dirty: dict[str, _Dirty]) -> None:
        op, root, ns, path, is_dir = item
        key = f"{root}/{ns}"
        d = dirty.get(key)
        if d is None:
            d = dirty[key] = _Dirty()
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

    def _control(self, item: tuple[Any, ...], rescan: set[str]) -> None:
        op, root = item[0], item[1]
        if op == "probe":
            self.handle_probe(item[1])
        elif op == "ack":
            self.emit(m.Acknowledged(item[1], time.time(), item[2]))
        elif op == "rescan":
            rescan.update([root] if root else self.roots)
        elif op == "incidents" and root in self.logs:
            records = self.logs[root].read_new()
            if records:
                self.emit(m.IncidentsLoaded(tuple(records)))
        elif op in ("overflow", "overrun") and root in self.watches:
            self.stats[op + "s"] += 1
            if op == "overrun":
                self.watches[root].handler.overrun = False
            self._notice(root, f"events were lost ({op}); rescanned at {time.strftime('%X')}")
            rescan.add(root)
        elif op == "limit" and root in self.watches:
            watch = self.watches[root]
            if watch.mode == "inotify":
                self.health(watch.fall_back_to_polling())
                rescan.add(root)
        elif op == "root-gone" and root in self.watches:
            self.check_root(root, "the root was deleted")
        elif op == "kernel":  # writes attributed by fanotify (kernel/attribution.py)
            self.kernel_batch(item[1], rescan)

    def kernel_batch(self, batch: KernelBatch, rescan: set[str]) -> None:
        for path, rec in batch.writes:
            self.history.record(path, rec.time, rec.size, rec.sha256, writer=rec.writer)
        for obs, root in batch.observations:
            self.emit(m.Observed(obs, root))
        if batch.lost is not None:  # nothing is attributed for the gap: rescan, and say so
            self.stats["overflows"] += 1
            when = time.strftime("%X", time.localtime(batch.at))
            for root in self.roots:
                self._notice(
                    root, f"kernel attribution lost events ({batch.lost}); rescanned at {when}"
                )
            rescan.update(self.roots)

    def _notice(self, root: str, detail: str) -> None:
        self._notice_until[root] = time.monotonic() + OVERFLOW_NOTICE
        self.health(SourceHealth(root, HealthStatus.OVERFLOW_RESCAN.value, detail))

    def _namespace(self, key: str, d: _Dirty, now: float) -> None:
        rec = self.state.namespaces.get(key)
        if d.ns or rec is None:
            if not os.path.isdir(key) or os.path.islink(key):
                if rec is not None:
                    self.emit(m.NamespaceGone(key))
                return
            if rec is None or d.ns == "new":
                root, _, name = key.rpartition("/")
                self.emit(self._seen(root, name, key, now))
                self.commit()  # the record must exist before its walk is applied
                self._unqueue(key)
                self.scan_namespace(key)
                return
        assert rec is not None
        if d.ledger:
            self.catch_up_ledger(key, rec.root)
        if d.stamp:
            self._stamp(key, rec, now)
        elif d.beat:
            if self.beats_due is None:
                self.beats_due = time.monotonic() + BEAT_DELAY
            self._beats.add(key)
        files = self.files.get(key)
        writes = 0
        for folder in d.dirs_gone:
            if files is not None:
                files.drop_under(folder)
        for folder in d.dirs_new:
            writes += self._walk_new(key, folder, files, now)
        meta = f"{key}/{META_DIR}/"
        for path, op in d.paths.items():
            size: int | None = None
            if op != "d":
                try:
                    size = os.lstat(path).st_size
                except OSError:
                    size = None
            if files is not None:
                files.set(path, size)
            if path.startswith(meta) or size is None:
                continue
            writes += 1
            self._applied_paths.append(path)
            if scanner.is_receipt(key, path):
                r = scanner.read_receipt(path)
                if r is not None:
                    self._receipt(key, rec.root, rec.name, r)
            else:
                self.history.record(path, now, size)
        if files is not None and (d.paths or d.dirs_new or d.dirs_gone):
            self.emit(m.Counted(key, len(files.sizes), files.bytes))
        if writes:
            self.emit(m.Wrote(key, now, writes))

    def _walk_new(self, key: str, folder: str, files: NsFiles | None, now: float) -> int:
        """A new subfolder: walk it, since files may have been written before its watch."""
        found = scanner.NamespaceScan(folder)
        try:
            scanner.walk(folder, found)
        except FileNotFoundError:
            return 0
        if files is not None:
            for path, size in found.sizes.items():
                files.set(path, size)
        for path, size in found.sizes.items():
            self.history.record(path, now, size)
        self._applied_paths.extend(found.sizes)
        return len(found.sizes)

    def apply_beats(self) -> None:
        """Heartbeats since the last call, in one `apply`: each is an mtime (one `lstat`),
        never a re-read of the stamp. A rewrite comes as its own events (`_stamp`). At 1,000
        lanes beating every 5 s, one batch of ~50 instead of 200 batches a second, each with
        its own model update and delivery."""
        keys, self._beats, self.beats_due = self._beats, set(), None
        now = time.time()
        for key in keys:
            rec = self.state.namespaces.get(key)
            if rec is None:
                continue
            try:
                mtime = os.lstat(f"{key}/{META_DIR}/{STAMP_FILE}").st_mtime
            except OSError:  # gone or replaced since: read it for what it is
                self._stamp(key, rec, now)
                continue
            self.emit(m.Heartbeat(key, mtime))
        self.commit()

    # -- watches -------------------------------------------------------------------------------
    def check_root(self, root: str, problem: str) -> None:
        """The watch on `root` stopped covering it: re-watch if it exists, else mark it gone."""
        watch = self.watches[root]
        if problem != "retry":
            log.info("re-watching %s: %s", root, problem)
        exists = os.path.isdir(root)
        if not exists:
            watch.stop()
            self.health(SourceHealth(root, HealthStatus.MISSING.value, problem))
            self.emit(m.RootListed(root, frozenset()))
            return
        health = watch.start()
        self.health(health)
        if watch.mode != "off":
            self.stats["rewatches"] += 1
            self._notice_until.pop(root, None)
            self.rescan_root(root)

    def start_watches(self) -> None:
        self.watching = True
        for root in self.roots:
            self.health(self.watches[root].start())

    def stop_watches(self) -> None:
        for watch in self.watches.values():
            watch.stop()
