"""One sighting of a collision, as a detector reports it, and the deterministic incident id. Pure.

An incident's id is a function of its kind, its victim and its group key, so two engines that see
the same collision name it alike and their records merge instead of duplicating. The group key
is what makes sightings one collision: the intruder's identity for most kinds, "" for every
lane writing into one namespace (one incident per victim), the path for a file in shared temp
(one incident per file, naming every lane that wrote it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lanewatch.model.views import Evidence


def incident_id(kind: str, victim: str | None, intruder_key: str) -> str:
    digest = hashlib.sha256(f"{kind}\0{victim or ''}\0{intruder_key}".encode()).hexdigest()
    return f"{kind}-{digest[:12]}"


def intruder_json(
    lane: str | None,
    namespace: str | None,
    checkout_id: str | None,
    pid: int,
    start_ticks: int | None,
    command: Sequence[str],
) -> dict[str, Any]:
    """An observation's intruder: the lane that wrote (or holds, or listens) and its process."""
    return {
        "lane": lane,
        "namespace": namespace,
        "checkout_id": checkout_id,
        "pid": pid,
        "start_ticks": start_ticks,
        "command": list(command),
    }


@dataclass(frozen=True, slots=True)
class Observation:
    kind: str  # a name of the registry's (`model/kinds.py`), as its detector declares it
    victim: str | None
    intruder_key: str  # the group key (see above); the name predates the kinds' renaming
    intruder: Mapping[str, Any]
    evidence: Evidence
    summary: str
    victim_lane: str | None = None  # the victim namespace's lane, for the title
    path: str | None = None  # the one file of a shared-file incident

    @property
    def id(self) -> str:
        return incident_id(self.kind, self.victim, self.intruder_key)
