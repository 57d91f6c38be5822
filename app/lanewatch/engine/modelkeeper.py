"""The worker's model keeping: events gathered and applied in one `apply` per batch, the views
of what changed handed to `deliver`, and incidents persisted to each root's log.

The bottom layer of the engine's worker (`engine/worker.py`): the walks, the probe results
and the tail items (`workscan.py`, `workprobe.py`, `worktail.py`) only `emit` events and
`commit` them here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from lanewatch.linux import procid
from lanewatch.model import incidents as inc
from lanewatch.model import model as m
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.views import Changes, NamespaceView, SourceHealth
from lanewatch.records.incidents import IncidentLog

PERSIST_LAST_SEEN = 60.0  # a last_seen-only change is written at most this often


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


class ModelKeeper:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        self.roots = list(dict.fromkeys(r.rstrip("/") or "/" for r in roots))
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
            (
                "batches",
                "items",
                "overflows",
                "overruns",
                "rescans",
                "rewatches",
                "probes",
                "full_probes",
                "probe_ms",
            ),
            0,
        )
        self._delta = m.Delta()
        self._due: dict[str, float] = {}  # when time alone next changes a view
        self._persisted: dict[str, tuple[int, float | None, float, float]] = {}
        self._events: list[m.Event] = []
        self._applied_paths: list[str] = []

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

    # -- persistence ---------------------------------------------------------------------------
    def load_incidents(self) -> None:
        for ilog in self.logs.values():
            records = ilog.load()
            if records:
                self.emit(m.IncidentsLoaded(tuple(records)))
            for r in records:
                self._persisted[r.id] = (r.count, r.ack_at, r.last_seen, time.time())

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
