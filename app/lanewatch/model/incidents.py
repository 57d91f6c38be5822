"""Incidents: records, merging, and the rules' observations folded into them. Pure.

An incident's id is a function of its kind, its victim and its intruder (`model/observation.py`).
Each observation carries an evidence key; seeing it again (after a restart, or from a second
engine) updates `last_seen` but does not count twice.

The rules that detect incidents live one module per kind in `model/detectors/` (the registry,
`model/kinds.py`, names them); `merge` folds their `Observation`s into `IncidentRecord`s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

# The detectors and the observation type, under the names the intakes have always called.
from lanewatch.model.detectors.foreign_receipt import foreign_receipt as foreign_receipt
from lanewatch.model.detectors.foreign_receipt import parse_receipt as parse_receipt
from lanewatch.model.detectors.refused_claim import refused_claim as refused_claim
from lanewatch.model.detectors.takeover import owner_key as owner_key
from lanewatch.model.detectors.takeover import takeover as takeover
from lanewatch.model.observation import Observation
from lanewatch.model.observation import incident_id as incident_id
from lanewatch.model.views import Evidence, Grade, Incident

MAX_EVIDENCE = 200  # per incident; the first is always kept
# Ledger events that end an ownership: a stamp rewritten after one is no takeover.
RELEASE_EVENTS = frozenset({"released", "spawn-failed", "cleared", "killed"})
SCHEMA = 1


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

    @property
    def grade(self) -> str:
        known = any(e.grade == Grade.KNOWN for e in self.evidence)
        return Grade.KNOWN.value if known else Grade.INFERRED.value

    @property
    def newest_evidence(self) -> float:
        return max((e.time for e in self.evidence), default=self.first_seen)

    @property
    def acknowledged(self) -> bool:
        """Acknowledged, and nothing new was observed since."""
        return self.ack_at is not None and self.ack_at >= self.newest_evidence

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
            ack_at=self.ack_at,
            ack_by=self.ack_by,
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
            "evidence": [evidence_json(e) for e in self.evidence],
        }


def evidence_json(e: Evidence) -> dict[str, Any]:
    return {
        "path": e.path,
        "time": e.time,
        "size": e.size,
        "sha256": e.sha256,
        "grade": e.grade,
        "writer": e.writer,
        "note": e.note,
        "key": e.key,
    }


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
        grade = item.get("grade") if item.get("grade") in ("known", "inferred") else "inferred"
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
    count = _opt(obj, "count", int) or len(evidence)
    return IncidentRecord(
        id=rid,
        kind=kind,
        victim=_opt(obj, "victim", str),
        intruder=MappingProxyType(dict(intruder) if isinstance(intruder, dict) else {}),
        first_seen=float(first),
        last_seen=float(last if last is not None else first),
        count=max(count, len({e.key for e in evidence})),
        evidence=tuple(sorted(evidence, key=lambda e: e.time)),
        summary=_opt(obj, "summary", str) or "",
        ack_at=_opt(obj, "ack_at", (int, float)),
        ack_by=_opt(obj, "ack_by", str),
        root=root,
    )


def _bounded(evidence: Sequence[Evidence]) -> tuple[Evidence, ...]:
    if len(evidence) <= MAX_EVIDENCE:
        return tuple(evidence)
    return (evidence[0], *evidence[-(MAX_EVIDENCE - 1) :])


def merge_records(a: IncidentRecord, b: IncidentRecord) -> IncidentRecord:
    """One record from two views of the same incident (same id). Commutative."""
    by_key: dict[str, Evidence] = {}
    for e in (*a.evidence, *b.evidence):
        k = e.key or f"{e.time}:{e.path}"
        old = by_key.get(k)
        if old is None or e.time < old.time:
            by_key[k] = e
    evidence = sorted(by_key.values(), key=lambda e: (e.time, e.key))
    acks = [(t, who) for t, who in ((a.ack_at, a.ack_by), (b.ack_at, b.ack_by)) if t is not None]
    ack_at, ack_by = max(acks, key=lambda x: x[0]) if acks else (None, None)
    newer = max((a, b), key=lambda r: (r.last_seen, r.summary))  # deterministic on a tie
    return IncidentRecord(
        id=a.id,
        kind=a.kind,
        victim=a.victim,
        intruder=MappingProxyType({**a.intruder, **b.intruder}),
        first_seen=min(a.first_seen, b.first_seen),
        last_seen=max(a.last_seen, b.last_seen),
        count=max(a.count, b.count, len(by_key)),
        evidence=_bounded(evidence),
        summary=newer.summary or a.summary or b.summary,
        ack_at=ack_at,
        ack_by=ack_by,
        root=a.root or b.root,
    )


def merge(record: IncidentRecord | None, obs: Observation, root: str = "") -> IncidentRecord:
    """Fold one observation into its incident (creating it)."""
    t = obs.evidence.time
    if record is None:
        return IncidentRecord(
            id=obs.id,
            kind=obs.kind.value,
            victim=obs.victim,
            intruder=MappingProxyType(dict(obs.intruder)),
            first_seen=t,
            last_seen=t,
            count=1,
            evidence=(obs.evidence,),
            summary=obs.summary,
            root=root,
        )
    if any(e.key == obs.evidence.key for e in record.evidence) and obs.evidence.key:
        if t <= record.last_seen:
            return record
        return replace(record, last_seen=t)
    return replace(
        record,
        intruder=MappingProxyType({**record.intruder, **obs.intruder}),
        last_seen=max(record.last_seen, t),
        count=record.count + 1,
        evidence=_bounded([*record.evidence, obs.evidence]),
        summary=obs.summary or record.summary,
    )
