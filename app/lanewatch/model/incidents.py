"""Incidents: records, deterministic ids, merging, and the rules that detect them. Pure.

An incident's id is a function of its kind, its victim and its intruder, so two engines that see
the same collision name it alike and their records merge instead of duplicating. Each
observation carries an evidence key; seeing it again (after a restart, or from a second engine)
updates `last_seen` but does not count twice.

The rules here take what the sources read (stamps, ledger lines, receipts) and return
`Observation`s (who holds which path is `model/writers.py`); `merge` folds them into
`IncidentRecord`s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from lanewatch.lanes.stamp import OwnerState, Stamp
from lanewatch.linux.procid import Liveness
from lanewatch.model.views import Evidence, Grade, Incident, IncidentKind

MAX_EVIDENCE = 200  # per incident; the first is always kept
RELEASE_EVENTS = frozenset({"released", "spawn-failed", "cleared", "killed"})
SCHEMA = 1


def incident_id(kind: str, victim: str | None, intruder_key: str) -> str:
    digest = hashlib.sha256(f"{kind}\0{victim or ''}\0{intruder_key}".encode()).hexdigest()
    return f"{kind}-{digest[:12]}"


@dataclass(frozen=True, slots=True)
class Observation:
    kind: IncidentKind
    victim: str | None
    intruder_key: str
    intruder: Mapping[str, Any]
    evidence: Evidence
    summary: str

    @property
    def id(self) -> str:
        return incident_id(self.kind.value, self.victim, self.intruder_key)


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


# --- detection rules ---------------------------------------------------------------------------


def owner_key(stamp: Stamp) -> str:
    return f"{stamp.host}:{stamp.boot_id}:{stamp.pid}:{stamp.start_ticks}"


def _who(stamp: Stamp) -> dict[str, Any]:
    return {
        "lane": stamp.lane,
        "pid": stamp.pid,
        "host": stamp.host,
        "checkout_id": stamp.checkout_id,
        "command": list(stamp.command),
    }


def takeover(
    victim: str,
    previous: Stamp | None,
    current: Stamp,
    *,
    previous_alive: Liveness | None,
    previous_released: bool,
    previous_fresh: bool,
    at: float,
    sha256: str | None = None,
    path: str | None = None,
) -> Observation | None:
    """A stamp rewritten by another owner while the previous one still lives.

    `previous_alive` is the kernel's verdict on the previous owner taken when the new stamp was
    seen (None for a remote owner: then `previous_fresh`, its heartbeat, is what we have).
    `previous_released` says the ledger recorded the previous owner's release.
    """
    if previous is None or previous.state is not OwnerState.LIVE:
        return None
    if current.state is not OwnerState.LIVE or owner_key(previous) == owner_key(current):
        return None
    if previous_released:
        return None
    if previous_alive is not None:
        if previous_alive not in (Liveness.ALIVE, Liveness.STOPPED):
            return None
        grade, how = Grade.KNOWN, f"pid {previous.pid} was {previous_alive.value}"
    elif previous_fresh:
        grade, how = Grade.INFERRED, f"its heartbeat on {previous.host} was fresh"
    else:
        return None
    ev = Evidence(
        path=path,
        time=at,
        size=None,
        sha256=sha256,
        grade=grade.value,
        writer=f"pid {current.pid} on {current.host} (lane {current.lane})",
        note=(
            f"stamp of pid {previous.pid} (lane {previous.lane}) replaced by pid {current.pid} "
            f"(lane {current.lane}) while {how}, with no release in the ledger"
        ),
        key=f"takeover:{owner_key(previous)}>{owner_key(current)}",
    )
    return Observation(
        kind=IncidentKind.TAKEOVER,
        victim=victim,
        intruder_key=owner_key(current),
        intruder={**_who(current), "previous_owner": _who(previous)},
        evidence=ev,
        summary=f"stamp taken over by pid {current.pid} ({current.lane}) from live pid "
        f"{previous.pid} ({previous.lane})",
    )


def refused_claim(victim: str, line: Mapping[str, Any], ledger_path: str) -> Observation | None:
    """One `claim-refused` line of the victim's ledger (written by the refused claimant)."""
    if line.get("event") != "claim-refused":
        return None
    t = line.get("time")
    if not isinstance(t, int | float):
        return None
    by_pid = line.get("by_pid", line.get("pid"))
    lane = line.get("lane")
    owner_pid = line.get("owner_pid")
    ev = Evidence(
        path=ledger_path,
        time=float(t),
        size=None,
        sha256=None,
        grade=Grade.KNOWN.value,
        writer=f"pid {by_pid}",
        note=f"claim by pid {by_pid} refused; the lock was held (owner pid {owner_pid})",
        key=f"refused:{t}:{by_pid}",
    )
    return Observation(
        kind=IncidentKind.REFUSED_CLAIM,
        victim=victim,
        intruder_key=f"{lane}:{by_pid}",
        intruder={"lane": lane, "pid": by_pid},
        evidence=ev,
        summary=f"pid {by_pid} tried to claim lane {lane} while pid {owner_pid} owned it",
    )


def foreign_receipt(
    victim: str,
    namespace_checkout: str,
    path: str,
    receipt: object,
    *,
    mtime: float,
    size: int,
    sha256: str,
) -> Observation | None:
    """A receipt in the victim's namespace that names another checkout."""
    if not isinstance(receipt, dict):
        return None
    named = receipt.get("checkout_id")
    if not isinstance(named, str) or named == namespace_checkout:
        return None
    lane = receipt.get("lane") if isinstance(receipt.get("lane"), str) else None
    pid = receipt.get("pid") if isinstance(receipt.get("pid"), int) else None
    step = receipt.get("step") if isinstance(receipt.get("step"), str) else None
    ev = Evidence(
        path=path,
        time=mtime,
        size=size,
        sha256=sha256,
        grade=Grade.KNOWN.value,
        writer=f"lane {lane}" if lane else None,
        note=f"receipt names checkout {named}; this namespace belongs to {namespace_checkout}",
        key=f"receipt:{path}:{sha256}",
    )
    return Observation(
        kind=IncidentKind.FOREIGN_RECEIPT,
        victim=victim,
        intruder_key=named,
        intruder={"checkout_id": named, "lane": lane, "pid": pid, "step": step},
        evidence=ev,
        summary=f"receipt {step or path} names checkout {named}",
    )


def parse_receipt(data: bytes) -> object:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None
