"""The model: namespaces, incidents and source health as plain data, changed only by `apply`.

`apply(state, events)` is a pure function: it returns a new `ModelState` (sharing what did not
change) and a `Delta` naming what did. No I/O, no clock, no threads: the sources read the disk
and /proc and hand over typed events; the engine turns a Delta into views for the UI.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, TypeVar

from lanewatch.lanes.scheme import stated
from lanewatch.lanes.stamp import OwnerState, Stamp, StampRead
from lanewatch.linux.procid import Liveness
from lanewatch.model import flood, timing
from lanewatch.model import footprint as fp
from lanewatch.model import incidents as inc
from lanewatch.model.classify import LivenessEvidence, classify
from lanewatch.model.detectors.takeover import owner_key
from lanewatch.model.facts import StampReplaced
from lanewatch.model.kinds import detect
from lanewatch.model.observation import Observation
from lanewatch.model.timing import RATE_WINDOW
from lanewatch.model.views import (
    STALE_STATES,
    Footprint,
    LaneMember,
    LanePort,
    NamespaceView,
    NsState,
    SourceHealth,
)


@dataclass(frozen=True, slots=True)
class NsRecord:
    key: str  # absolute path of the namespace
    root: str
    name: str
    stamp: StampRead
    previous: Stamp | None = None  # the owner before the current one
    liveness: LivenessEvidence | None = None
    files: int | None = None
    bytes: int | None = None  # apparent: the sum of file lengths
    allocated: int | None = None  # on disk, as `du` counts (files and folders, links once)
    last_write: float | None = None
    rate: tuple[tuple[int, int], ...] = ()  # (epoch second, writes), oldest first
    # The newest footprint reading, the CPU history, since when it is quiet, and
    # the allocated bytes at each reading (`model/footprint.py`).
    footprint: Footprint | None = None
    cpu_history: tuple[int, ...] = ()
    quiet_since: float | None = None
    disk_marks: fp.Marks = ()

    @property
    def owner(self) -> Stamp | None:
        return self.stamp.stamp


K = TypeVar("K")
V = TypeVar("V")


def _frozen() -> Mapping[str, Any]:
    return MappingProxyType({})


def _thawed(mapping: Mapping[K, V]) -> dict[K, V]:
    """A private copy of one of the state's maps. `dict(proxy)` goes key by key through the
    proxy (110 us for 1,000 lanes here); the proxy's own `copy()` copies the dict under it at
    once (5 us), and a commit makes one copy per batch."""
    if isinstance(mapping, (MappingProxyType, dict)):
        return mapping.copy()
    return dict(mapping)


@dataclass(frozen=True, slots=True)
class ModelState:
    namespaces: Mapping[str, NsRecord] = field(default_factory=_frozen)
    incidents: Mapping[str, inc.IncidentRecord] = field(default_factory=_frozen)
    by_ns: Mapping[str, tuple[str, ...]] = field(default_factory=_frozen)  # ns key -> incident ids
    health: Mapping[str, SourceHealth] = field(default_factory=_frozen)


# --- events --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NamespaceSeen:
    """A scan read this namespace: its stamp and, for a local owner, the kernel's verdict."""

    key: str
    root: str
    name: str
    stamp: StampRead
    liveness: LivenessEvidence | None = None


@dataclass(frozen=True, slots=True)
class StampChanged:
    """The tail saw the stamp rewritten; the source judged the previous owner right then."""

    key: str
    stamp: StampRead
    at: float
    previous_alive: Liveness | None = None  # kernel verdict on the previous (local) owner
    previous_released: bool = False  # its release is in the ledger
    liveness: LivenessEvidence | None = None  # verdict on the new owner, if probed
    sha256: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    key: str
    mtime: float


@dataclass(frozen=True, slots=True)
class NamespaceGone:
    key: str


@dataclass(frozen=True, slots=True)
class RootListed:
    """A full listing of `root`: namespaces of it not in `keys` are gone."""

    root: str
    keys: frozenset[str]


@dataclass(frozen=True, slots=True)
class Counted:
    """A walk of the namespace: file count, bytes (apparent), its newest write (by mtime),
    and the bytes allocated on disk (as `du` counts; None: not known)."""

    key: str
    files: int
    bytes: int
    last_write: float | None = None
    allocated: int | None = None


@dataclass(frozen=True, slots=True)
class Wrote:
    key: str
    at: float
    writes: int = 1


@dataclass(frozen=True, slots=True)
class Probed:
    evidence: Mapping[str, LivenessEvidence]


@dataclass(frozen=True, slots=True)
class Metered:
    """Footprint readings of running lanes, by namespace key (`processes/footprintmeter.py`)."""

    footprints: Mapping[str, Footprint]


@dataclass(frozen=True, slots=True)
class Observed:
    observation: Observation
    root: str = ""


@dataclass(frozen=True, slots=True)
class IncidentsLoaded:
    records: tuple[inc.IncidentRecord, ...]


@dataclass(frozen=True, slots=True)
class Acknowledged:
    incident_id: str
    at: float
    by: str | None = None
    note: str = ""  # why, when lanewatch resolved it by itself


@dataclass(frozen=True, slots=True)
class WritersGone:
    """Processes an incident names were found exited (the engine looks: `inc.gone_pids`)."""

    incident_id: str
    gone: tuple[tuple[int, int | None], ...]
    at: float


@dataclass(frozen=True, slots=True)
class HealthChanged:
    health: SourceHealth


Event = (
    NamespaceSeen
    | StampChanged
    | Heartbeat
    | NamespaceGone
    | RootListed
    | Counted
    | Wrote
    | Probed
    | Metered
    | Observed
    | IncidentsLoaded
    | Acknowledged
    | WritersGone
    | HealthChanged
)


@dataclass(slots=True)
class Delta:
    touched: set[str] = field(default_factory=set)  # namespace keys to re-view
    removed: set[str] = field(default_factory=set)
    incidents: set[str] = field(default_factory=set)
    health: bool = False

    def __bool__(self) -> bool:
        return bool(self.touched or self.removed or self.incidents or self.health)


# --- apply ---------------------------------------------------------------------------------------


class _Builder:
    """Copy-on-first-write dicts over an immutable state: one copy per batch, not per event."""

    def __init__(self, state: ModelState) -> None:
        self.state = state
        self.ns: dict[str, NsRecord] | None = None
        self.inc: dict[str, inc.IncidentRecord] | None = None
        self.by_ns: dict[str, tuple[str, ...]] | None = None
        self.health: dict[str, SourceHealth] | None = None
        self.delta = Delta()

    def namespaces(self) -> dict[str, NsRecord]:
        if self.ns is None:
            self.ns = _thawed(self.state.namespaces)
        return self.ns

    def get(self, key: str) -> NsRecord | None:
        return (self.ns if self.ns is not None else self.state.namespaces).get(key)

    def put(self, rec: NsRecord) -> None:
        self.namespaces()[rec.key] = rec
        self.delta.touched.add(rec.key)
        self.delta.removed.discard(rec.key)

    def drop(self, key: str) -> None:
        if self.get(key) is not None:
            del self.namespaces()[key]
            self.delta.removed.add(key)
            self.delta.touched.discard(key)

    def incidents(self) -> dict[str, inc.IncidentRecord]:
        if self.inc is None:
            self.inc = _thawed(self.state.incidents)
        return self.inc

    def put_incident(self, rec: inc.IncidentRecord) -> None:
        incidents = self.incidents()
        if incidents.get(rec.id) == rec:
            return
        incidents[rec.id] = rec
        self.delta.incidents.add(rec.id)
        if self.by_ns is None:
            self.by_ns = _thawed(self.state.by_ns)
        for key in _involved(rec):
            ids = self.by_ns.get(key, ())
            if rec.id not in ids:
                self.by_ns[key] = (*ids, rec.id)
            if self.get(key) is not None:
                self.delta.touched.add(key)

    def ids_of(self, key: str) -> tuple[str, ...]:
        """The incidents that name namespace `key` (victim or writer)."""
        return (self.by_ns if self.by_ns is not None else self.state.by_ns).get(key, ())

    def set_health(self, h: SourceHealth) -> None:
        if self.health is None:
            self.health = _thawed(self.state.health)
        if self.health.get(h.root) != h:
            self.health[h.root] = h
            self.delta.health = True

    def build(self) -> ModelState:
        return ModelState(
            namespaces=MappingProxyType(self.ns) if self.ns is not None else self.state.namespaces,
            incidents=MappingProxyType(self.inc) if self.inc is not None else self.state.incidents,
            by_ns=MappingProxyType(self.by_ns) if self.by_ns is not None else self.state.by_ns,
            health=MappingProxyType(self.health) if self.health is not None else self.state.health,
        )


def _involved(rec: inc.IncidentRecord) -> list[str]:
    keys = [rec.victim] if rec.victim else []
    for who in (rec.intruder, *rec.writers):  # every lane that wrote
        ns = who.get("namespace")
        if isinstance(ns, str) and ns not in keys:
            keys.append(ns)
    return keys


def apply(state: ModelState, events: Iterable[Event] | Event) -> tuple[ModelState, Delta]:
    """The model after `events` (one or many), and what changed."""
    b = _Builder(state)
    batch = (events,) if not isinstance(events, Iterable) else events
    for event in batch:
        _apply_one(b, event)
    return b.build(), b.delta


def _apply_one(b: _Builder, ev: Event) -> None:
    if isinstance(ev, Wrote):
        rec = b.get(ev.key)
        if rec is not None:
            b.put(_wrote(rec, ev))
    elif isinstance(ev, Heartbeat):
        rec = b.get(ev.key)
        if rec is not None and rec.stamp.mtime != ev.mtime:
            b.put(replace(rec, stamp=replace(rec.stamp, mtime=ev.mtime)))
    elif isinstance(ev, NamespaceSeen):
        _seen(b, ev)
    elif isinstance(ev, StampChanged):
        _stamp_changed(b, ev)
    elif isinstance(ev, Counted):
        rec = b.get(ev.key)
        if rec is not None:
            last = rec.last_write
            if ev.last_write is not None and (last is None or ev.last_write > last):
                last = ev.last_write
            counted = (ev.files, ev.bytes, ev.allocated, last)
            if (rec.files, rec.bytes, rec.allocated, rec.last_write) != counted:
                b.put(
                    replace(
                        rec,
                        files=ev.files,
                        bytes=ev.bytes,
                        allocated=ev.allocated,
                        last_write=last,
                    )
                )
    elif isinstance(ev, NamespaceGone):
        b.drop(ev.key)
    elif isinstance(ev, RootListed):
        for key, rec in list((b.ns if b.ns is not None else b.state.namespaces).items()):
            if rec.root == ev.root and key not in ev.keys:
                b.drop(key)
    elif isinstance(ev, Probed):
        for key, evidence in ev.evidence.items():
            rec = b.get(key)
            if rec is None or not _probed_owner(rec.owner):
                continue  # judged while live, landed after the release: out of date
            if not evidence.same_verdict(rec.liveness):
                b.put(replace(rec, liveness=evidence))
    elif isinstance(ev, Metered):
        for key, reading in ev.footprints.items():
            rec = b.get(key)
            if rec is not None and _probed_owner(rec.owner):
                b.put(_metered(rec, reading))
    elif isinstance(ev, Observed):
        obs = ev.observation
        current = b.incidents().get(obs.id)
        if current is None and isinstance(obs.intruder.get("namespace"), str):
            ids = b.ids_of(str(obs.intruder["namespace"]))
            obs = flood.fold(obs, ids, b.incidents().get)  # a lane's thousandth file: one more
            current = b.incidents().get(obs.id)
        b.put_incident(inc.merge(current, obs, ev.root))
    elif isinstance(ev, IncidentsLoaded):
        for record in ev.records:
            current = b.incidents().get(record.id)
            b.put_incident(record if current is None else inc.merge_records(current, record))
    elif isinstance(ev, Acknowledged):
        current = b.incidents().get(ev.incident_id)
        if current is not None:
            b.put_incident(replace(current, ack_at=ev.at, ack_by=ev.by, ack_note=ev.note))
    elif isinstance(ev, WritersGone):
        current = b.incidents().get(ev.incident_id)
        if current is not None:
            b.put_incident(inc.writers_gone(current, ev.gone, ev.at))
    elif isinstance(ev, HealthChanged):
        b.set_health(ev.health)


def _probed_owner(owner: Stamp | None) -> bool:
    """Whether the prober judges this owner again: only live ones (`ProbeIntake.local_stamps`)."""
    return owner is not None and owner.state is OwnerState.LIVE


def _kept(
    rec: NsRecord, read: StampRead, fresh: LivenessEvidence | None
) -> LivenessEvidence | None:
    """The evidence after a stamp read: `fresh` when it was judged, else the old one while the
    prober keeps it up to date. A released owner is never probed again, so members seen while
    it ran would keep the lane headless for ever after they are gone."""
    if fresh is not None or not _probed_owner(read.stamp):
        return fresh
    return rec.liveness


def _seen(b: _Builder, ev: NamespaceSeen) -> None:
    rec = b.get(ev.key)
    if rec is None:
        b.put(NsRecord(ev.key, ev.root, ev.name, ev.stamp, liveness=ev.liveness))
        return
    previous = rec.previous
    old, new = rec.owner, ev.stamp.stamp
    if old is not None and new is not None and owner_key(old) != owner_key(new):
        previous = old
        rec = _unmetered(rec)
    b.put(
        replace(rec, stamp=ev.stamp, previous=previous, liveness=_kept(rec, ev.stamp, ev.liveness))
    )


def _stamp_changed(b: _Builder, ev: StampChanged) -> None:
    rec = b.get(ev.key)
    if rec is None:
        return
    old, new = rec.owner, ev.stamp.stamp
    previous = rec.previous
    if old is not None and new is not None and owner_key(old) != owner_key(new):
        previous = old
        beat = rec.stamp.heartbeat_at
        fresh = beat is not None and not timing.is_overdue(old, beat, ev.at)
        fact = StampReplaced(
            ev.key,
            old,
            new,
            previous_alive=ev.previous_alive,
            previous_released=ev.previous_released,
            previous_fresh=fresh,
            at=ev.at,
            sha256=ev.sha256,
            path=ev.path,
        )
        for obs in detect(fact):
            b.put_incident(inc.merge(b.incidents().get(obs.id), obs, rec.root))
        rec = _unmetered(rec)
    b.put(
        replace(rec, stamp=ev.stamp, previous=previous, liveness=_kept(rec, ev.stamp, ev.liveness))
    )


def _wrote(rec: NsRecord, ev: Wrote) -> NsRecord:
    sec = int(ev.at)
    floor = sec - RATE_WINDOW
    rate = [pair for pair in rec.rate if pair[0] > floor]
    if rate and rate[-1][0] == sec:
        rate[-1] = (sec, rate[-1][1] + ev.writes)
    else:
        rate.append((sec, ev.writes))
    last = ev.at if rec.last_write is None else max(rec.last_write, ev.at)
    return replace(rec, last_write=last, rate=tuple(rate))


def _unmetered(rec: NsRecord) -> NsRecord:
    """A new owner: the readings were about the last one."""
    if rec.footprint is None and not rec.disk_marks:
        return rec
    return replace(rec, footprint=None, cpu_history=(), quiet_since=None, disk_marks=())


def _metered(rec: NsRecord, reading: Footprint) -> NsRecord:
    return replace(
        rec,
        footprint=reading,
        cpu_history=fp.history(rec.cpu_history, reading),
        quiet_since=fp.quiet_since(rec.quiet_since, reading),
        disk_marks=fp.disk_marks(rec.disk_marks, reading.at, rec.allocated),
    )


# --- views ---------------------------------------------------------------------------------------


def write_rate(rec: NsRecord, now: float) -> tuple[int, ...]:
    end = int(now)
    counts = [0] * RATE_WINDOW
    for sec, n in rec.rate:
        i = RATE_WINDOW - 1 - (end - sec)
        if 0 <= i < RATE_WINDOW:
            counts[i] += n
    return tuple(counts)


def next_change(rec: NsRecord, now: float) -> float | None:
    """When time alone may next change this record's view (`timing.next_change`)."""
    last = rec.rate[-1][0] if rec.rate else None
    return timing.next_change(rec.owner, rec.stamp.heartbeat_at, last, now)


def view_of(
    rec: NsRecord, state: ModelState, now: float, *, host: str, boot_id: str
) -> NamespaceView:
    verdict = classify(rec.stamp, rec.liveness, now, host=host, boot_id=boot_id)
    s = rec.owner
    return NamespaceView(
        key=rec.key,
        root=rec.root,
        name=rec.name,
        lane=s.lane if s else None,
        checkout_id=s.checkout_id if s else None,
        checkout_path=s.checkout_path if s else None,
        host=s.host if s else None,
        pid=s.pid if s else None,
        user=s.user if s else None,
        command=tuple(s.command) if s else (),
        state=verdict.state,
        reason=verdict.reason,
        grade=verdict.grade.value,
        started_at=s.started_at if s else None,
        heartbeat_at=rec.stamp.heartbeat_at,
        heartbeat_interval=s.heartbeat_interval if s else None,
        released_at=s.released_at if s else None,
        exit_code=s.exit_code if s else None,
        last_write=rec.last_write,
        files=rec.files,
        bytes=rec.bytes,
        allocated=rec.allocated,
        write_rate=write_rate(rec, now),
        stamp_status=rec.stamp.status.value,
        incident_ids=state.by_ns.get(rec.key, ()),
        uid=s.uid if s else None,
        mismatch=verdict.mismatch,
        fence=s.fence if s else None,
        fence_note=s.fence_note if s else None,
        fence_private=tuple(s.fence_private or ()) if s else (),
        members=_members(rec),
        scheme=stated(s.scheme) if s else None,
        lease=(s.ports[0], s.ports[1]) if s and s.ports and s.state is OwnerState.LIVE else None,
        ports=_ports(rec),
        **_footprint(rec, verdict.state, host),
    )


def _footprint(rec: NsRecord, state: NsState, host: str) -> dict[str, Any]:
    """The footprint fields of the view: while something of the lane may run, and only
    readings about its current owner (a reading is dropped with the owner it was about)."""
    s = rec.owner
    out: dict[str, Any] = {}
    if s is not None and s.host == host:
        out["membership"] = "cgroup" if s.cgroup else "rules"
    if rec.footprint is None or state in STALE_STATES:
        return out
    out.update(
        footprint=rec.footprint,
        cpu_history=rec.cpu_history,
        cpu_quiet_since=rec.quiet_since,
        disk_growth=fp.growth(rec.disk_marks),
    )
    return out


def _ports(rec: NsRecord) -> tuple[LanePort, ...]:
    """What the lane's processes listen on, from the newest evidence about its owner."""
    ev, s = rec.liveness, rec.owner
    return ev.ports if ev is not None and s is not None and ev.about(s) else ()


def _members(rec: NsRecord) -> tuple[LaneMember, ...]:
    """The running processes of the lane, from the newest liveness evidence about its owner."""
    ev, s = rec.liveness, rec.owner
    return ev.members if ev is not None and s is not None and ev.about(s) else ()
