"""Incidents: records, merging, and the rules' observations folded into them. Pure.

An incident's id is a function of its kind, its victim and its intruder (`model/observation.py`).
Each observation carries an evidence key; seeing it again (after a restart, or from a second
engine) updates `last_seen` but does not count twice.

The detectors live one module per kind in `model/detectors/`, run by the registry
(`model/kinds.py`: `detect`); `merge` folds their `Observation`s into `IncidentRecord`s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from lanewatch.model.kinds import current_name, kind_of
from lanewatch.model.observation import Observation
from lanewatch.model.views import Evidence, Grade, Incident
from lanewatch.model.writerlist import (
    Writer,
    add_writer,
    latest_gone,
    mark_gone,
    merge_writers,
    writer_key,
    writers_from_json,
)

MAX_EVIDENCE = 200  # per incident; the first is always kept
# Ledger events that end an ownership: a stamp rewritten after one is no takeover.
RELEASE_EVENTS = frozenset({"released", "spawn-failed", "cleared", "killed"})
SCHEMA = 1
RESOLVER = "lanewatch"  # `ack_by` of an incident resolved automatically
QUIET_FOR = 600.0  # seconds without evidence, every writer gone: resolved automatically
REPEATS = "kernel:"  # evidence keys whose repeat is a new event (a write again), not a re-read


@dataclass(frozen=True, slots=True)
class IncidentRecord:
    id: str
    kind: str
    victim: str | None
    intruder: Mapping[str, Any]
    first_seen: float
    last_seen: float
    count: int
    evidence: tuple[Evidence, ...]
    summary: str = ""
    ack_at: float | None = None
    ack_by: str | None = None
    root: str = field(default="", compare=False)  # where it is persisted
    writers: tuple[Writer, ...] = ()  # every lane that wrote (`model/writerlist.py`)
    path: str | None = None  # the one file of a shared-file incident
    victim_lane: str | None = None
    # The newest evidence: a new observation, or a write the kernel reported again with the
    # same content (its key is the same, the write is not). None: the newest evidence's time.
    evidence_at: float | None = None
    ack_note: str = ""  # why lanewatch resolved it (with ack_by RESOLVER)

    @property
    def grade(self) -> str:
        known = any(e.grade == Grade.KNOWN for e in self.evidence)
        return Grade.KNOWN.value if known else Grade.INFERRED.value

    @property
    def newest_evidence(self) -> float:
        newest = max((e.time for e in self.evidence), default=self.first_seen)
        return newest if self.evidence_at is None else max(newest, self.evidence_at)

    @property
    def acknowledged(self) -> bool:
        """Acknowledged (or resolved), and no evidence came after: an acknowledgement covers
        the evidence seen up to then; anything newer opens the incident again."""
        return self.ack_at is not None and self.ack_at >= self.newest_evidence

    @property
    def resolved(self) -> bool:
        return self.acknowledged and self.ack_by == RESOLVER

    @property
    def reopened(self) -> bool:
        return self.ack_at is not None and not self.acknowledged

    def to_view(self) -> Incident:
        return Incident(
            id=self.id,
            kind=self.kind,
            victim=self.victim,
            intruder=MappingProxyType(dict(self.intruder)),
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            count=self.count,
            grade=self.grade,
            evidence=self.evidence,
            acknowledged=self.acknowledged,
            summary=self.summary,
            writers=self.writers,
            path=self.path,
            ack_at=self.ack_at,
            ack_by=self.ack_by,
            resolved=self.resolved,
            reopened=self.reopened,
            ack_note=self.ack_note if self.resolved else "",
            evidence_at=self.newest_evidence,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "id": self.id,
            "kind": self.kind,
            "victim": self.victim,
            "intruder": dict(self.intruder),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "count": self.count,
            "summary": self.summary,
            "ack_at": self.ack_at,
            "ack_by": self.ack_by,
            "ack_note": self.ack_note,
            "evidence_at": self.evidence_at,
            "writers": [dict(w) for w in self.writers],
            "path": self.path,
            "victim_lane": self.victim_lane,
            "evidence": [evidence_json(e) for e in self.evidence],
        }


def evidence_json(e: Evidence, *, key: bool = True) -> dict[str, Any]:
    """One evidence item as stored; `key=False`: as `status --json` prints it (no key)."""
    out = {
        "path": e.path,
        "time": e.time,
        "size": e.size,
        "sha256": e.sha256,
        "grade": e.grade,
        "writer": e.writer,
        "note": e.note,
    }
    if key:
        out["key"] = e.key
    return out


def _opt(obj: Mapping[str, Any], name: str, types: type | tuple[type, ...]) -> Any:
    value = obj.get(name)
    return value if isinstance(value, types) and not isinstance(value, bool) else None


def record_from_json(obj: object, root: str = "") -> IncidentRecord | None:
    """Parse one persisted line; None for anything malformed (a reader never trusts the file)."""
    if not isinstance(obj, dict):
        return None
    rid, kind = obj.get("id"), obj.get("kind")
    first, last = _opt(obj, "first_seen", (int, float)), _opt(obj, "last_seen", (int, float))
    if not (isinstance(rid, str) and isinstance(kind, str) and first is not None):
        return None
    evidence: list[Evidence] = []
    for item in obj.get("evidence") or ():
        if not isinstance(item, dict):
            continue
        t = _opt(item, "time", (int, float))
        if t is None:
            continue
        given = item.get("grade")
        grade = given if given in ("known", "inferred") and isinstance(given, str) else "inferred"
        evidence.append(
            Evidence(
                path=_opt(item, "path", str),
                time=float(t),
                size=_opt(item, "size", int),
                sha256=_opt(item, "sha256", str),
                grade=grade,
                writer=_opt(item, "writer", str),
                note=_opt(item, "note", str) or "",
                key=_opt(item, "key", str) or "",
            )
        )
    intruder = obj.get("intruder")
    intruder = dict(intruder) if isinstance(intruder, dict) else {}
    count = _opt(obj, "count", int) or len(evidence)
    last_t = float(last if last is not None else first)
    return IncidentRecord(
        id=rid,
        kind=current_name(kind),  # an old name (before the kinds were renamed) reads as today's
        victim=_opt(obj, "victim", str),
        intruder=MappingProxyType(intruder),
        first_seen=float(first),
        last_seen=last_t,
        count=max(count, len({e.key for e in evidence})),
        evidence=tuple(sorted(evidence, key=lambda e: e.time)),
        summary=_opt(obj, "summary", str) or "",
        ack_at=_opt(obj, "ack_at", (int, float)),
        ack_by=_opt(obj, "ack_by", str),
        root=root,
        writers=writers_from_json(obj.get("writers"), intruder, float(first), last_t),
        path=_opt(obj, "path", str),
        victim_lane=_opt(obj, "victim_lane", str),
        evidence_at=_opt(obj, "evidence_at", (int, float)),
        ack_note=_opt(obj, "ack_note", str) or "",
    )


def _bounded(evidence: Sequence[Evidence]) -> tuple[Evidence, ...]:
    if len(evidence) <= MAX_EVIDENCE:
        return tuple(evidence)
    return (evidence[0], *evidence[-(MAX_EVIDENCE - 1) :])


def _one_intruder(a: IncidentRecord, b: IncidentRecord, newer: IncidentRecord) -> dict[str, Any]:
    """The merged record's intruder: what both say of one process (its pid and start ticks),
    gone when either saw it gone; of two processes, the newer record's, whole (a field of
    the other, its `gone_at` say, belongs to another process)."""
    x, y = a.intruder, b.intruder
    if (x.get("pid"), x.get("start_ticks")) != (y.get("pid"), y.get("start_ticks")):
        return dict(newer.intruder)
    older = b if newer is a else a
    out = {**older.intruder, **newer.intruder}
    gone = latest_gone(x, y)
    if gone is not None:
        out["gone_at"] = gone
    return out


def merge_records(a: IncidentRecord, b: IncidentRecord) -> IncidentRecord:
    """One record from two views of the same incident (same id). Commutative."""
    by_key: dict[str, Evidence] = {}
    for e in (*a.evidence, *b.evidence):
        k = e.key or f"{e.time}:{e.path}"
        old = by_key.get(k)
        if old is None or e.time < old.time:
            by_key[k] = e
    evidence = sorted(by_key.values(), key=lambda e: (e.time, e.key))
    acks = [(r.ack_at, r.ack_by or "", r.ack_note) for r in (a, b) if r.ack_at is not None]
    ack_at, ack_by, ack_note = max(acks) if acks else (None, None, "")
    newer = max((a, b), key=lambda r: (r.last_seen, r.summary))  # deterministic on a tie
    seen = [t for t in (a.evidence_at, b.evidence_at) if t is not None]
    return IncidentRecord(
        id=a.id,
        kind=a.kind,
        victim=a.victim,
        intruder=MappingProxyType(_one_intruder(a, b, newer)),
        first_seen=min(a.first_seen, b.first_seen),
        last_seen=max(a.last_seen, b.last_seen),
        count=max(a.count, b.count, len(by_key)),
        evidence=_bounded(evidence),
        summary=newer.summary or a.summary or b.summary,
        ack_at=ack_at,
        ack_by=ack_by or None,
        root=a.root or b.root,
        writers=merge_writers(a.writers, b.writers),
        path=a.path or b.path,
        victim_lane=a.victim_lane or b.victim_lane,
        evidence_at=max(seen) if seen else None,
        ack_note=ack_note,
    )


def _since_ack(rec: IncidentRecord) -> Sequence[Writer] | None:
    """In an incident acknowledged (or resolved) before, the writers seen since: a port clash
    after the acknowledged one is titled by its own lanes ("agent-7 and agent-8 both listen on
    :8000", not with the agent-3 and agent-4 of last week). None: never acknowledged, or no
    writer seen since. The timeline and the writers list keep every one. (A shared file keeps
    every writer in its title: the file stays for the next lane to read.)"""
    if rec.ack_at is None:
        return None
    since = [w for w in rec.writers if w.get("last_seen", 0) > rec.ack_at]
    return since if since and len(since) < len(rec.writers) else None


def _titled(rec: IncidentRecord, fallback: str) -> IncidentRecord:
    """The record with its title, built from its writers for the writer kinds: for a kind
    whose lanes clash only while alive (a port), those seen since its acknowledgement when
    they make a title (`_since_ack`); else every one."""
    entry = kind_of(rec.kind)
    line = None
    if entry is not None and entry.title is not None:
        title = functools.partial(
            entry.title,
            path=rec.path,
            victim=rec.victim,
            victim_lane=rec.victim_lane,
            latest=rec.evidence[-1].path if rec.evidence else None,
        )
        since = _since_ack(rec) if entry.clashes_while_alive else None
        line = (title(since) if since is not None else None) or title(rec.writers)
    summary = line or fallback or rec.summary
    return rec if summary == rec.summary else replace(rec, summary=summary)


def merge(record: IncidentRecord | None, obs: Observation, root: str = "") -> IncidentRecord:
    """Fold one observation into its incident (creating it)."""
    t = obs.evidence.time
    if record is None:
        rec = IncidentRecord(
            id=obs.id,
            kind=obs.kind,
            victim=obs.victim,
            intruder=MappingProxyType(dict(obs.intruder)),
            first_seen=t,
            last_seen=t,
            count=1,
            evidence=(obs.evidence,),
            summary=obs.summary,
            root=root,
            writers=add_writer((), obs.intruder, t, new=True),
            path=obs.path,
            victim_lane=obs.victim_lane,
            evidence_at=t,
        )
        return _titled(rec, obs.summary)
    key = obs.evidence.key
    if key and any(e.key == key for e in record.evidence):
        if t <= record.last_seen:
            return record
        again = key.startswith(REPEATS) and t > record.newest_evidence
        seen = replace(
            record,
            last_seen=t,
            writers=add_writer(record.writers, obs.intruder, t, new=False),
            evidence_at=t if again else record.evidence_at,
        )
        return _titled(seen, record.summary)
    if writer_key(obs.intruder) == writer_key(record.intruder) and "gone_at" not in record.intruder:
        # The same lane again: the process named first (the eldest the prober saw hold it, or
        # the first writer) stays named while it lives, never a passing child after it.
        intruder = {**obs.intruder, **record.intruder}
    else:
        intruder = {**record.intruder, **obs.intruder}  # another lane, or the named one gone
        intruder.pop("gone_at", None)
    rec = replace(
        record,
        intruder=MappingProxyType(intruder),
        last_seen=max(record.last_seen, t),
        count=record.count + 1,
        evidence=_bounded([*record.evidence, obs.evidence]),
        writers=add_writer(record.writers, obs.intruder, t, new=True),
        path=record.path or obs.path,
        victim_lane=record.victim_lane or obs.victim_lane,
        evidence_at=max(record.newest_evidence, t),
    )
    return _titled(rec, obs.summary or record.summary)


def gone_pids(record: IncidentRecord) -> set[tuple[int, int | None]]:
    """(pid, start ticks) of the processes named by an incident not yet marked gone: its
    intruder and every writer's (`writers_gone` marks them)."""
    out: set[tuple[int, int | None]] = set()
    pid = record.intruder.get("pid")
    if isinstance(pid, int) and "gone_at" not in record.intruder:
        ticks = record.intruder.get("start_ticks")
        out.add((pid, ticks if isinstance(ticks, int) else None))
    for w in record.writers:
        if "gone_at" not in w:
            out.update((p[0], p[1]) for p in (w.get("pids") or ()) if isinstance(p[0], int))
    return out


def writers_gone(
    record: IncidentRecord, gone: Iterable[tuple[int, int | None]], at: float
) -> IncidentRecord:
    """The record with the intruder and each writer whose every process is in `gone` (found
    exited at `at`) marked `gone_at`: a writer that is gone is shown as gone, and since when
    (a row kept naming a child long exited)."""
    dead = set(gone)
    intruder = dict(record.intruder)
    pid, ticks = intruder.get("pid"), intruder.get("start_ticks")
    named = (pid, ticks if isinstance(ticks, int) else None)
    if isinstance(pid, int) and "gone_at" not in intruder and named in dead:
        intruder["gone_at"] = at
    writers = mark_gone(record.writers, dead, at)
    if intruder == record.intruder and writers == record.writers:
        return record
    return replace(record, intruder=MappingProxyType(intruder), writers=writers)


def resolve_quiet(
    record: IncidentRecord, now: float, gone: Callable[[int, int | None], bool]
) -> IncidentRecord | None:
    """The record resolved by lanewatch when it is open, nothing was seen of it for
    QUIET_FOR seconds and every process of every writer is `gone`; else None."""
    if record.acknowledged or now - max(record.last_seen, record.newest_evidence) < QUIET_FOR:
        return None
    pids = [(p[0], p[1]) for w in record.writers for p in (w.get("pids") or ())]
    if not pids or not all(gone(pid, ticks) for pid, ticks in pids):
        return None
    quiet = int(QUIET_FOR // 60)
    return replace(
        record,
        ack_at=now,
        ack_by=RESOLVER,
        ack_note=f"resolved automatically: every writer exited and nothing new for {quiet} min",
    )
