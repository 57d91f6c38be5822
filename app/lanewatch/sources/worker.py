"""The engine's worker: owns the model and turns what the sources saw into model events.

One thread runs it. It takes batches of tail items (deduplicated by path), scan results and
probe reports, reads what they point at (stamps, ledgers, receipts, sizes), applies the events
to the model in one `apply` per batch, and turns the model's Delta into views. Without a
thread, `one_shot` runs the same steps once (for `lanewatch status`).
"""

from __future__ import annotations

import logging
import os
import queue
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from lanewatch.model import incidents as inc
from lanewatch.model import model as m
from lanewatch.model import writers as wr
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.views import Changes, HealthStatus, NamespaceView, SourceHealth
from lanewatch.scheme import procid
from lanewatch.scheme.names import split_namespace_name
from lanewatch.scheme.roots import state_dir
from lanewatch.scheme.stamp import LEDGER_FILE, META_DIR, STAMP_FILE, OwnerState, Stamp
from lanewatch.sources import scanner
from lanewatch.sources.incidentlog import IncidentLog
from lanewatch.sources.prober import SHARED_TEMP, ProbeReport, judge
from lanewatch.sources.tail import RootWatch

if TYPE_CHECKING:
    from lanewatch.sources.attribution import KernelBatch

log = logging.getLogger(__name__)

TICK = 1.0  # seconds between time-based re-judgements and watch checks
SCAN_CHUNK = 25  # namespaces walked between two looks at the event queue
MAX_BATCH = 20_000
OVERFLOW_NOTICE = 10.0  # how long "overflow-rescan" stays in a root's health
PERSIST_LAST_SEEN = 60.0  # a last_seen-only change is written at most this often
BEAT_DELAY = 0.25  # heartbeats (stamp utimes) wait at most this long, to be applied together


@dataclass(slots=True)
class NsFiles:
    """Sizes of every file of one namespace, for incremental counts."""

    sizes: dict[str, int]
    bytes: int

    def set(self, path: str, size: int | None) -> None:
        old = self.sizes.pop(path, None)
        if old is not None:
            self.bytes -= old
        if size is not None:
            self.sizes[path] = size
            self.bytes += size

    def drop_under(self, folder: str) -> None:
        prefix = folder + "/"
        for path in [p for p in self.sizes if p.startswith(prefix)]:
            self.bytes -= self.sizes.pop(path)


@dataclass(slots=True)
class LedgerState:
    offset: int = 0
    inode: int | None = None
    releases: dict[int, float] = field(default_factory=dict)  # pid -> latest release time


@dataclass(slots=True)
class _Dirty:
    paths: dict[str, str] = field(default_factory=dict)
    dirs_new: set[str] = field(default_factory=set)
    dirs_gone: set[str] = field(default_factory=set)
    stamp: bool = False  # rewritten (or removed)
    beat: bool = False  # attributes only: a heartbeat
    ledger: bool = False
    ns: str = ""  # "new" | "gone" | ""


class Worker:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        poll: bool = False,
        poll_interval: float = 2.0,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        self.roots = list(dict.fromkeys(r.rstrip("/") or "/" for r in roots))
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.watches = {
            r: RootWatch(r, self.queue, poll=poll, poll_interval=poll_interval) for r in self.roots
        }
        self.logs = {r: IncidentLog(r) for r in self.roots}
        self.host, self.boot_id = procid.hostname(), procid.boot_id()
        self.state = m.ModelState()
        self.files: dict[str, NsFiles] = {}
        self.ledgers: dict[str, LedgerState] = {}
        self.history = FileHistory()
        self.views: dict[str, NamespaceView] = {}
        self.deliver = deliver
        self.on_applied = on_applied
        self.stats: dict[str, int] = dict.fromkeys(
            ("batches", "items", "overflows", "overruns", "rescans", "rewatches", "probes"), 0
        )
        self._delta = m.Delta()
        self._due: dict[str, float] = {}  # when time alone next changes a view
        self._scan_queue: deque[str] = deque()
        self._scan_pending: set[str] = set()
        self._scan_bare: set[str] = set()  # queued for counts only (ledger, receipts: later)
        self._persisted: dict[str, tuple[int, float | None, float, float]] = {}
        self._notice_until: dict[str, float] = {}
        self._events: list[m.Event] = []
        self._applied_paths: list[str] = []
        self.ignore = [str(state_dir())]
        self.once_status = HealthStatus.POLLING.value if poll else HealthStatus.OK.value
        self.watching = False  # set by start_watches; until then tick leaves the watches alone
        self._beats: set[str] = set()  # namespaces whose stamp was touched since apply_beats
        self.beats_due: float | None = None  # monotonic time by which to apply them

    # -- applying ------------------------------------------------------------------------------
    def emit(self, *events: m.Event) -> None:
        self._events.extend(events)

    def commit(self) -> None:
        if not self._events:
            return
        events, self._events = self._events, []
        self.state, delta = m.apply(self.state, events)
        d = self._delta
        d.touched |= delta.touched
        d.removed |= delta.removed
        d.incidents |= delta.incidents
        d.health = d.health or delta.health
        for key in delta.removed:
            self.files.pop(key, None)
            self.ledgers.pop(key, None)
            self.history.forget_under(key)
        if self.on_applied is not None and self._applied_paths:
            self.on_applied(time.time(), self._applied_paths)
        self._applied_paths = []

    def health(self, h: SourceHealth) -> None:
        self.emit(m.HealthChanged(h))

    # -- views ---------------------------------------------------------------------------------
    def view(self, key: str, now: float) -> NamespaceView | None:
        rec = self.state.namespaces.get(key)
        if rec is None:
            return None
        return m.view_of(rec, self.state, now, host=self.host, boot_id=self.boot_id)

    def flush(self, *, full: bool = False) -> Changes | None:
        """Views for what changed since the last flush; handed to `deliver` if any."""
        self.commit()
        d, self._delta = self._delta, m.Delta()
        self._persist(d.incidents)
        now = time.time()
        upserts: dict[str, NamespaceView] = {}
        keys = self.state.namespaces.keys() if full else d.touched
        for key in keys:
            v = self.view(key, now)
            if v is None:
                continue
            if full or self.views.get(key) != v:
                upserts[key] = v
                self.views[key] = v
            due = m.next_change(self.state.namespaces[key], now)
            if due is None:
                self._due.pop(key, None)
            else:
                self._due[key] = due
        removed = {k for k in d.removed if k not in self.state.namespaces}
        for key in removed:
            self.views.pop(key, None)
            self._due.pop(key, None)
        ids = self.state.incidents.keys() if full else d.incidents
        incidents = {i: self.state.incidents[i].to_view() for i in ids}
        if not (full or upserts or removed or incidents or d.health):
            return None
        changes = Changes(
            upserts=MappingProxyType(upserts),
            removed=frozenset() if full else frozenset(removed),
            incidents=MappingProxyType(incidents),
            health=self.health_tuple(),
            full=full,
            at=now,
        )
        if self.deliver is not None:
            self.deliver(changes)
        return changes

    def health_tuple(self) -> tuple[SourceHealth, ...]:
        return tuple(sorted(self.state.health.values(), key=lambda h: h.root))

    def full_changes(self) -> Changes:
        now = time.time()
        views = {k: v for k in self.state.namespaces if (v := self.view(k, now)) is not None}
        return Changes(
            upserts=MappingProxyType(views),
            incidents=MappingProxyType({i: r.to_view() for i, r in self.state.incidents.items()}),
            health=self.health_tuple(),
            full=True,
            at=now,
        )

    # -- scanning ------------------------------------------------------------------------------
    def load_incidents(self) -> None:
        for ilog in self.logs.values():
            records = ilog.load()
            if records:
                self.emit(m.IncidentsLoaded(tuple(records)))
            for r in records:
                self._persisted[r.id] = (r.count, r.ack_at, r.last_seen, time.time())

    def list_root(self, root: str) -> list[str] | None:
        """Phase 1 for one root: every namespace with its stamp (and owner verdict).

        None (and the root's health says why) when the root cannot be listed."""
        listing = scanner.list_root(root)
        if listing.error is not None:
            status = HealthStatus.MISSING if listing.missing else HealthStatus.DEGRADED
            self.health(SourceHealth(root, status.value, listing.error))
            self.emit(m.RootListed(root, frozenset()))
            return None
        keys = []
        now = time.time()
        for name in listing.names:
            key = f"{root}/{name}"
            keys.append(key)
            self.emit(self._seen(root, name, key, now))
        self.emit(m.RootListed(root, frozenset(keys)))
        return keys

    def list_new(self, root: str) -> list[str]:
        """Namespaces of `root` not in the model yet (made while the watch was being set up)."""
        listing = scanner.list_root(root)
        now = time.time()
        keys = []
        for name in listing.names:
            key = f"{root}/{name}"
            if key not in self.state.namespaces:
                keys.append(key)
                self.emit(self._seen(root, name, key, now))
        return keys

    @property
    def scanning(self) -> bool:
        return bool(self._scan_queue)

    def _seen(self, root: str, name: str, key: str, now: float) -> m.NamespaceSeen:
        read = scanner.read_stamp_at(key)
        ev = judge(key, read.stamp, now) if read.stamp is not None else None
        return m.NamespaceSeen(key, root, name, read, ev)

    def queue_scan(self, keys: Iterable[str], *, extras: bool = True) -> None:
        """Queue walks. `extras` False: count only, leave the ledger and receipts unread (the
        first walk: a second walk with extras follows once the watches are set)."""
        pending, bare = self._scan_pending, self._scan_bare
        for key in keys:
            if extras:
                bare.discard(key)
            elif key not in pending:
                bare.add(key)
            if key not in pending:
                pending.add(key)
                self._scan_queue.append(key)
                self.files.pop(key, None)  # stale until walked again

    def scan_some(self, limit: int = SCAN_CHUNK) -> bool:
        """Walk up to `limit` queued namespaces; True if more are queued."""
        bare = self._scan_bare
        for _ in range(min(limit, len(self._scan_queue))):
            key = self._scan_queue.popleft()
            self._scan_pending.discard(key)
            if bare and key in bare:
                bare.discard(key)
                self.scan_namespace(key, extras=False)
            else:
                self.scan_namespace(key)
        self.commit()
        return bool(self._scan_queue)

    def _unqueue(self, key: str) -> None:
        """`key` is walked now, out of turn: its queued walk is moot."""
        self._scan_pending.discard(key)
        self._scan_bare.discard(key)

    def scan_namespace(self, key: str, *, extras: bool = True) -> None:
        rec = self.state.namespaces.get(key)
        if rec is None:
            return
        s = scanner.scan_namespace(key, read_extras=extras)
        if s.vanished:
            self.emit(m.NamespaceGone(key))
            return
        self.files[key] = NsFiles(s.sizes, s.bytes)
        self.emit(m.Counted(key, s.files, s.bytes, s.last_write))
        if s.stamp_mtime != rec.stamp.mtime:  # changed while nobody watched: judge it too
            self._stamp(key, rec, time.time())
        if s.ledger is not None:
            self._ledger_lines(key, rec.root, s.ledger, LedgerState())
        for r in s.receipts:
            self._receipt(key, rec.root, rec.name, r)

    def rescan_root(self, root: str) -> None:
        self.stats["rescans"] += 1
        keys = self.list_root(root)
        self.commit()
        self.queue_scan(keys or ())

    # -- ledger and receipts ----------------------------------------------------------------
    def _ledger_lines(self, key: str, root: str, read: scanner.LedgerRead, st: LedgerState) -> None:
        st.offset, st.inode = read.offset, read.inode
        self.ledgers[key] = st
        path = os.path.join(key, META_DIR, LEDGER_FILE)
        for line in read.lines:
            event, pid, t = line.get("event"), line.get("pid"), line.get("time")
            if event in inc.RELEASE_EVENTS and isinstance(pid, int) and isinstance(t, int | float):
                st.releases[pid] = max(float(t), st.releases.get(pid, 0.0))
                if len(st.releases) > 64:
                    st.releases.pop(next(iter(st.releases)))
            obs = inc.refused_claim(key, line, path)
            if obs is not None:
                self.emit(m.Observed(obs, root))

    def catch_up_ledger(self, key: str, root: str) -> LedgerState:
        st = self.ledgers.get(key) or LedgerState()
        path = os.path.join(key, META_DIR, LEDGER_FILE)
        self._ledger_lines(key, root, scanner.read_ledger(path, st.offset, st.inode), st)
        return st

    def _receipt(self, key: str, root: str, name: str, r: scanner.ReceiptRead) -> None:
        self.history.record(r.path, r.mtime, r.size, r.sha256)
        split = split_namespace_name(name)
        rec = self.state.namespaces.get(key)
        own = split[0] if split else (rec.owner.checkout_id if rec and rec.owner else None)
        if own is None:
            return
        obs = inc.foreign_receipt(
            key, own, r.path, r.data, mtime=r.mtime, size=r.size, sha256=r.sha256
        )
        if obs is not None:
            self.emit(m.Observed(obs, root))

    # -- tail items -------------------------------------------------------------------------
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
        elif op == "kernel":  # writes attributed by fanotify (sources/attribution.py)
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

    def _stamp(self, key: str, rec: m.NsRecord, now: float) -> None:
        read = scanner.read_stamp_at(key)
        old, new = rec.owner, read.stamp
        alive = None
        released = False
        if (
            old is not None
            and new is not None
            and old.state is OwnerState.LIVE
            and inc.owner_key(old) != inc.owner_key(new)
        ):
            if old.host == self.host:
                alive, _ = procid.liveness(
                    procid.ProcessIdentity(old.pid, old.start_ticks, old.boot_id)
                )
            st = self.catch_up_ledger(key, rec.root)
            released = st.releases.get(old.pid, 0.0) >= old.started_at - 1.0
        ev = judge(key, new, now) if new is not None else None
        path = os.path.join(key, META_DIR, STAMP_FILE)
        self.emit(m.StampChanged(key, read, now, alive, released, ev, path=path))

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

    # -- probing -----------------------------------------------------------------------------
    def local_stamps(self) -> dict[str, Stamp]:
        """Owners the prober should judge: live stamps of this host. Safe from any thread."""
        out = {}
        for key, rec in self.state.namespaces.items():
            s = rec.owner
            if s is not None and s.state is OwnerState.LIVE and s.host == self.host:
                out[key] = s
        return out

    def prefixes(self) -> list[str]:
        return [*self.roots, *SHARED_TEMP]

    def handle_probe(self, report: ProbeReport) -> None:
        self.stats["probes"] += 1
        known = self.state.namespaces
        self.emit(m.Probed({k: v for k, v in report.evidence.items() if k in known}))
        if report.holdings is None:
            return
        owners = wr.OwnerIndex(report.owners)
        for h in report.holdings:
            if h.kind == "fd" and h.access in ("write", "readwrite"):
                found = wr.lane_of(h, owners)
                lane = found[0].lane if found else "?"
                self.history.note_writer(h.path, f"pid {h.pid} (lane {lane})")
        found_obs = wr.writers(
            report.holdings,
            report.owners,
            known.keys(),
            roots=self.roots,
            shared=SHARED_TEMP,
            ignore=self.ignore,
            at=report.at,
        )
        for obs in found_obs:
            self.emit(m.Observed(obs, self._root_of(obs)))

    def _root_of(self, obs: inc.Observation) -> str:
        key = obs.victim or obs.intruder.get("namespace")
        if isinstance(key, str):
            rec = self.state.namespaces.get(key)
            if rec is not None:
                return rec.root
            for root in self.roots:
                if key.startswith(root + "/"):
                    return root
        return ""

    def recover(self) -> None:
        """After an unexpected error: drop what was half done, rescan every root."""
        self.stats["errors"] = self.stats.get("errors", 0) + 1
        self._events = []
        self._applied_paths = []
        self.queue.put(("rescan", None))

    # -- time ----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Once a second: re-judge what time alone can change; check every root's watch."""
        if self._beats:  # a heartbeat already seen must count before anything turns overdue
            self.apply_beats()
        for root in self.roots if self.watching else ():
            problem = self.watches[root].problem()
            if problem is not None:
                self.check_root(root, problem)
        mono = time.monotonic()
        for root, until in list(self._notice_until.items()):
            if mono >= until:
                del self._notice_until[root]
                w = self.watches[root]
                if w.mode != "off":
                    status = HealthStatus.OK if w.mode == "inotify" else HealthStatus.POLLING
                    self.health(SourceHealth(root, status.value, w.detail))
        now = time.time()
        self._delta.touched.update(k for k, due in self._due.items() if due <= now)
        self.commit()
        self._persist(list(self.state.incidents))

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

    # -- persistence ---------------------------------------------------------------------------
    def _persist(self, ids: Iterable[str]) -> None:
        now = time.time()
        by_root: dict[str, list[inc.IncidentRecord]] = {}
        for iid in ids:
            rec = self.state.incidents.get(iid)
            if rec is None:
                continue
            seen = self._persisted.get(iid)
            if seen is not None:
                count, ack, last, wrote_at = seen
                same = count == rec.count and ack == rec.ack_at
                if same and (rec.last_seen == last or now - wrote_at < PERSIST_LAST_SEEN):
                    continue
            if rec.root in self.logs:
                by_root.setdefault(rec.root, []).append(rec)
        for root, records in by_root.items():
            if self.logs[root].persist(records):
                for r in records:
                    self._persisted[r.id] = (r.count, r.ack_at, r.last_seen, now)

    # -- one shot ------------------------------------------------------------------------------
    def one_shot(self, *, probe: bool = True) -> Changes:
        """The whole picture once, without threads or watches (for `lanewatch status`)."""
        from lanewatch.sources.prober import probe as run_probe

        self.load_incidents()
        for root in self.roots:
            if self.list_root(root) is not None:
                self.health(SourceHealth(root, self.once_status, "read once, not watched"))
            self.commit()
        self.queue_scan(list(self.state.namespaces))
        while self.scan_some(limit=1000):
            pass
        if probe:
            self.handle_probe(run_probe(self.local_stamps(), self.prefixes()))
        self.commit()
        self._persist(list(self.state.incidents))
        return self.full_changes()
