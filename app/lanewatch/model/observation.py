"""One sighting of a collision, as a detector reports it, and the deterministic incident id. Pure.

An incident's id is a function of its kind, its victim and its intruder, so two engines that see
the same collision name it alike and their records merge instead of duplicating.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanewatch.model.views import Evidence, IncidentKind


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
