"""The engine's model keeper: the one owner of the model's mutable state. It holds the model,
the events the intakes found and it has not applied yet, the views it handed out and when time
alone next changes each, and the incidents it persisted to each root's log.

The intakes (`walkintake.py`, `tailintake.py`, `probeintake.py`, `kernelintake.py`) only read
and return what they found (`intake.Found`); the worker (`worker.py`) hands it here with
`take`, and `commit` applies everything pending in one `model.apply` (one per batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

from lanewatch.engine.intake import Found
from lanewatch.linux import procid
from lanewatch.model import incidents as inc
from lanewatch.model import model as m
from lanewatch.model.views import Changes, NamespaceView, SourceHealth
from lanewatch.records.incident_log import IncidentLog

PERSIST_LAST_SEEN = 60.0  # a last_seen-only change is written at most this often
RESOLVE_EVERY = 10.0  # seconds between two looks for incidents to resolve automatically
GONE_EVERY = 2.0  # seconds between two looks for writers that exited (shown as gone, and when)
MAX_DEAD = 65536  # (pid, start ticks) remembered as exited: they never come back


class ModelKeeper:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
        forget: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        """`roots` as the worker normalised them. `forget(keys)` is told, in the commit that
        removed them, which namespaces left the model (the intakes' memo drops them)."""
        self.roots = list(roots)
        self.logs = {r: IncidentLog(r) for r in self.roots}
        self.host, self.boot_id = procid.hostname(), procid.boot_id()
        self.state = m.ModelState()
        self.views: dict[str, NamespaceView] = {}
        self.deliver = deliver
        self.on_applied = on_applied
        self.forget = forget
        self._delta = m.Delta()
        self._due: dict[str, float] = {}  # when time alone next changes a view
        # No due time is earlier than this (it may be earlier than the earliest: a view whose
        # due time went later or away leaves it; the next pass over `_due` makes it exact).
        self._soonest = float("inf")
        # id: (count, ack_at, acknowledged, last_seen, when written)
        self._persisted: dict[str, tuple[int, float | None, bool, float, float, int]] = {}
        self._events: list[m.Event] = []
        self._applied_paths: list[str] = []
        # Incidents this engine observed itself: their writers' pids are of this machine and
        # boot, so "every writer gone" can be judged here (never for another host's record).
        self._local: set[str] = set()
        self._resolve_at = 0.0
        self._gone_at = 0.0
        self._dead: set[tuple[int, int | None]] = set()

    # -- applying ------------------------------------------------------------------------------
    def namespaces(self) -> Mapping[str, m.NsRecord]:
        """The namespaces as applied so far: what the intakes consult (read-only)."""
        return self.state.namespaces

    def emit(self, *events: m.Event) -> None:
        self._events.extend(events)
        self._note_local(events)

    def take(self, found: Found) -> None:
        """What an intake found, applied with the next `commit`."""
        self._events.extend(found.events)
        self._applied_paths.extend(found.paths)
        self._note_local(found.events)

    def _note_local(self, events: Iterable[m.Event]) -> None:
        for ev in events:
            if isinstance(ev, m.Observed) and ev.observation.intruder.get("pid"):
                self._local.add(ev.observation.id)

    def resolve_quiet(self, now: float) -> None:
        """Resolve (acknowledge as lanewatch, saying why) the open incidents seen here whose
        writers all exited and that had no evidence for `inc.QUIET_FOR` seconds."""
        if now - self._resolve_at < RESOLVE_EVERY:
            return
        self._resolve_at = now
        for iid in list(self._local):
            rec = self.state.incidents.get(iid)
            if rec is None:
                self._local.discard(iid)
                continue
            done = inc.resolve_quiet(rec, now, _gone)
            if done is not None:
                self.emit(m.Acknowledged(iid, now, inc.RESOLVER, done.ack_note))

    def mark_gone(self, now: float) -> None:
        """Mark the writers of the open incidents seen here whose processes exited: shown as
        gone, since about `now` (GONE_EVERY), never named as if they still wrote."""
        if now - self._gone_at < GONE_EVERY:
            return
        self._gone_at = now
        if len(self._dead) > MAX_DEAD:
            self._dead.clear()
        for iid in list(self._local):
            rec = self.state.incidents.get(iid)
            if rec is None or rec.acknowledged:
                continue
            named = inc.gone_pids(rec)
            for p in named - self._dead:
                if _gone(*p):
                    self._dead.add(p)
            gone = named & self._dead
            if gone:
                self.emit(m.WritersGone(iid, tuple(sorted(gone, key=str)), now))

    def drop_pending(self) -> None:
        """After an unexpected error: what was half done is not applied."""
        self._events = []
        self._applied_paths = []

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
        if delta.removed and self.forget is not None:
            self.forget(delta.removed)
        if self.on_applied is not None and self._applied_paths:
            self.on_applied(time.time(), self._applied_paths)
        self._applied_paths = []

    def health(self, h: SourceHealth) -> None:
        self.emit(m.HealthChanged(h))

    def touch_due(self, now: float) -> None:
        """Views that time alone changed by `now` are judged again at the next flush. Once a
        second: with 1,000 lanes whose views change only in minutes, a look at one number."""
        if now < self._soonest:
            return
        self._delta.touched.update(k for k, due in self._due.items() if due <= now)
        self._soonest = min(self._due.values(), default=float("inf"))

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
        self.persist(d.incidents)
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
                self._soonest = min(self._soonest, due)
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
            now = time.time()
            for r in records:
                self._persisted[r.id] = _persisted(r, now)

    def read_new_incidents(self, root: str) -> None:
        """What others appended to `root`'s incident log since we last read it."""
        records = self.logs[root].read_new()
        if records:
            self.emit(m.IncidentsLoaded(tuple(records)))

    def persist(self, ids: Iterable[str]) -> None:
        now = time.time()
        by_root: dict[str, list[inc.IncidentRecord]] = {}
        for iid in ids:
            rec = self.state.incidents.get(iid)
            if rec is None:
                continue
            seen = self._persisted.get(iid)
            if seen is not None:
                count, ack, acked, last, wrote_at, gone = seen
                # New evidence after an acknowledgement (a write again) opens it: written now;
                # so is a writer found gone.
                same = count == rec.count and ack == rec.ack_at and acked == rec.acknowledged
                same = same and gone == _gone_count(rec)
                if same and (rec.last_seen == last or now - wrote_at < PERSIST_LAST_SEEN):
                    continue
            if rec.root in self.logs:
                by_root.setdefault(rec.root, []).append(rec)
        for root, records in by_root.items():
            if self.logs[root].persist(records):
                for r in records:
                    self._persisted[r.id] = _persisted(r, now)


def _gone_count(rec: inc.IncidentRecord) -> int:
    return ("gone_at" in rec.intruder) + sum("gone_at" in w for w in rec.writers)


def _persisted(
    rec: inc.IncidentRecord, now: float
) -> tuple[int, float | None, bool, float, float, int]:
    """What decides whether a record changed enough to be written again."""
    return (rec.count, rec.ack_at, rec.acknowledged, rec.last_seen, now, _gone_count(rec))


def _gone(pid: int, start_ticks: int | None) -> bool:
    """The process exited (or its pid is another's now); a process we may not read is not gone."""
    try:
        ticks = procid.start_ticks(pid)
    except procid.ProbeError:
        return False
    return ticks is None or (start_ticks is not None and ticks != start_ticks)
