"""What crosses from the engine to the UI: immutable snapshots (see docs/architecture.md).

Every class here is a frozen dataclass; the UI may keep them, compare them and hash their keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class NsState(StrEnum):
    LIVE = "live"  # owner alive, heartbeat fresh
    HUNG = "hung"  # owner alive but stopped, or its heartbeat overdue
    STALE = "stale"  # owner dead, pid reused, other boot, or heartbeat expired on another host
    ORPHAN = "orphan"  # no valid stamp
    RELEASED = "released"  # owner exited cleanly, files kept
    UNKNOWN = "unknown"  # could not tell (permission error, newer schema): never treated as dead
    HEADLESS = "headless"  # the runner is gone (dead or released) but processes of the lane run


# Nobody runs in these any more: the stale view lists them and `clear` acts on them, no other.
# UNKNOWN ("could not tell") may be alive: it stays with the lanes and is never cleared.
STALE_STATES = frozenset({NsState.STALE, NsState.ORPHAN, NsState.RELEASED})


@dataclass(frozen=True, slots=True)
class LaneMember:
    """One running process of a lane (`processes/members.py` says how membership is known)."""

    pid: int
    start_ticks: int
    command: str  # the command line, or the kernel's short name; untrusted text
    started_at: float | None  # epoch seconds
    how: str  # how it is known to be the lane's: descendant | group | marker | mount-ns
    uid: int | None = None  # the effective uid it runs as; None: could not be read
    pgid: int | None = None


@dataclass(frozen=True, slots=True)
class Footprint:
    """What a lane's processes cost now (`processes/footprintmeter.py` measures it)."""

    at: float  # epoch seconds of the reading
    cpu: float | None  # percent of one core (200: two cores busy) over `window`; None: unknown
    window: float  # seconds the cpu figure covers (a first reading: the processes' lives)
    memory: int | None  # bytes: the members' resident pages summed, or the cgroup's working set
    processes: int  # how many processes were counted
    membership: str  # "cgroup": read from the lane's cgroup; "rules": its members (members.py)
    memory_from: str = "rss"  # "rss" (resident pages, shared ones counted per process) | "cgroup"


@dataclass(frozen=True, slots=True)
class LanePort:
    """A socket a lane's process listens on (`linux/netsockets.py`), as the prober saw it."""

    proto: str  # tcp | udp
    address: str  # the local address: 127.0.0.1, ::, 0.0.0.0 ...
    port: int
    pid: int  # the eldest of the lane's processes holding it
    command: str = ""  # its command line; untrusted text
    # In the lane's own network namespace (`--fence net`): collides with no one's.
    private: bool = False

    @property
    def label(self) -> str:
        """`3000`, or `3000/udp`: how a PORTS cell and `lanewatch ports` name it."""
        return str(self.port) if self.proto == "tcp" else f"{self.port}/{self.proto}"

    @property
    def shown(self) -> str:
        """`label`, with ` (private)` for a port of the lane's own network namespace."""
        return f"{self.label} (private)" if self.private else self.label


class Grade(StrEnum):
    KNOWN = "known"  # the kernel or the library reported it
    INFERRED = "inferred"  # inferred from timing or from open files


class HealthStatus(StrEnum):
    OK = "ok"
    POLLING = "polling"
    DEGRADED = "degraded"
    MISSING = "missing"
    OVERFLOW_RESCAN = "overflow-rescan"


@dataclass(frozen=True, slots=True)
class NamespaceView:
    """One row of the dashboard."""

    key: str  # absolute path of the namespace (unique across roots)
    root: str
    name: str
    lane: str | None
    checkout_id: str | None
    checkout_path: str | None
    host: str | None
    pid: int | None
    user: str | None
    command: tuple[str, ...]
    state: NsState
    reason: str  # stable wording: ages are computed by the reader from the timestamps
    grade: str  # "known" | "inferred": how the state was judged
    started_at: float | None
    heartbeat_at: float | None
    heartbeat_interval: float | None
    released_at: float | None
    exit_code: int | None
    last_write: float | None
    files: int | None  # None: not counted yet
    bytes: int | None  # apparent size: the sum of the files' lengths
    write_rate: tuple[int, ...]  # writes per second, oldest first (sparkline)
    stamp_status: str  # StampStatus value
    incident_ids: tuple[str, ...]
    uid: int | None = None  # the uid the stamp names (a claim: see `mismatch`)
    mismatch: str | None = None  # what the stamp claims that is not so; the state is unknown
    fence: str | None = None  # how CMD is fenced: "kernel", "bwrap", "none" (runner/fence.py)
    fence_note: str | None = None  # why it runs unfenced
    fence_private: tuple[str, ...] = ()  # the mount points that are the lane's own
    members: tuple[LaneMember, ...] = ()  # the lane's running processes (not its runner)
    scheme: int | None = None  # the scheme its stamp names (lanes/scheme.py); None: no stamp
    # On disk, as `du -s` counts it (st_blocks of files and folders, a hard link once): what
    # a clear frees and what alerts use. None: not counted yet (or a host that does not say).
    allocated: int | None = None
    # The footprint of a local running lane (None: not measured, or nothing runs).
    footprint: Footprint | None = None
    cpu_history: tuple[int, ...] = ()  # CPU % per reading, oldest first (sparkline)
    cpu_quiet_since: float | None = None  # since when every reading was under `BUSY_CPU` %
    disk_growth: float | None = None  # bytes allocated per second over the last minute
    membership: str | None = None  # "cgroup" | "rules" for a local stamp; None: no stamp
    # Port leases (lanes/leases.py, docs/ports.md): the block its stamp names, (first, count),
    # and the sockets its processes listen on (a PORTS column, `status --json`).
    lease: tuple[int, int] | None = None
    ports: tuple[LanePort, ...] = ()


@dataclass(frozen=True, slots=True)
class Evidence:
    """One observation behind an incident."""

    path: str | None
    time: float
    size: int | None
    sha256: str | None  # only where the content was read
    grade: str
    writer: str | None  # who wrote or held it, where known
    note: str
    key: str = ""  # deterministic: the same observation seen twice (or by two engines) is one


@dataclass(frozen=True, slots=True)
class Incident:
    id: str  # deterministic: "<kind>-<12 hex>" from kind + victim + intruder
    kind: str  # a name of the registry's (`model/kinds.py`: `IncidentKind`)
    victim: str | None  # namespace key; None for an unbound writer (shared temp)
    intruder: Mapping[str, Any]  # lane, pid, checkout_id, namespace, command where known
    first_seen: float
    last_seen: float
    count: int  # distinct observations
    grade: str  # "known" if any evidence is known, else "inferred"
    evidence: tuple[Evidence, ...]  # oldest first, bounded
    acknowledged: bool  # every evidence so far was acknowledged (by a person, or resolved)
    summary: str = ""  # one line for people; built from untrusted strings: never markup
    # Additive. Every lane that wrote, oldest first: lane, namespace, checkout_id,
    # pid, start_ticks, command, first_seen, last_seen, count (`model/writerlist.py`).
    writers: tuple[Mapping[str, Any], ...] = ()
    path: str | None = None  # the one file of a shared-file incident
    ack_at: float | None = None  # when acknowledged (or resolved); None: never
    ack_by: str | None = None  # who: a user name, or "lanewatch" when resolved automatically
    resolved: bool = False  # acknowledged by lanewatch: every writer gone and quiet (ack_note)
    reopened: bool = False  # acknowledged once, new evidence since: open again
    ack_note: str = ""  # why it was resolved automatically
    evidence_at: float | None = None  # the newest evidence (a write repeated counts again)

    @property
    def ack_state(self) -> str:
        """ "resolved", "acknowledged", "reopened", or "" (open, never acknowledged)."""
        if self.resolved:
            return "resolved"
        if self.acknowledged:
            return "acknowledged"
        return "reopened" if self.reopened else ""


@dataclass(frozen=True, slots=True)
class SourceHealth:
    root: str
    status: str  # HealthStatus value
    detail: str


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since the last call (or, with `full`, the whole picture)."""

    upserts: Mapping[str, NamespaceView] = field(default_factory=_empty)
    removed: frozenset[str] = frozenset()
    incidents: Mapping[str, Incident] = field(default_factory=_empty)
    health: tuple[SourceHealth, ...] = ()
    full: bool = False
    at: float = 0.0
    # How writers are known: "kernel" (fanotify reports each writer) or "inferred" (open files
    # and timing); None where the producer did not say. The hint is one line for people: what
    # kernel attribution covers, or why it is off and how to get it.
    attribution: str | None = None
    attribution_hint: str = ""

    @property
    def empty(self) -> bool:
        return not (self.upserts or self.removed or self.incidents or self.full)


def merge_changes(older: Changes, newer: Changes) -> Changes:
    """One Changes equivalent to delivering `older` then `newer`."""
    if newer.full:
        return newer
    upserts = dict(older.upserts)
    removed = set(older.removed)
    for key in newer.removed:
        upserts.pop(key, None)
        removed.add(key)
    for key, view in newer.upserts.items():
        upserts[key] = view
        removed.discard(key)
    if older.full:
        removed = set()  # a full picture lists what exists; nothing to remove from it
    incidents = {**older.incidents, **newer.incidents}
    return Changes(
        upserts=MappingProxyType(upserts),
        removed=frozenset(removed),
        incidents=MappingProxyType(incidents),
        health=newer.health or older.health,
        full=older.full,
        at=newer.at,
        attribution=newer.attribution or older.attribution,
        attribution_hint=newer.attribution_hint or older.attribution_hint,
    )
