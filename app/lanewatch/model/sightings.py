"""What the two writer detectors (`foreign_writer`, `unbound_writer`) report once they have
judged a sighting a collision: one Observation from a holding the prober saw, or from a write
the kernel reported. Pure."""

from __future__ import annotations

from lanewatch.model.holdings import Holding, Owner, holding_evidence, owner_json
from lanewatch.model.kernelwrites import KernelWrite, write_evidence, write_intruder
from lanewatch.model.observation import Observation
from lanewatch.model.views import IncidentKind


def from_holding(
    kind: IncidentKind,
    victim: str | None,
    owner: Owner,
    h: Holding,
    how: str,
    at: float,
    summary: str,
) -> Observation:
    """The prober saw `owner`'s process `h.pid` hold `h.path` (inferred)."""
    return Observation(
        kind=kind,
        victim=victim,
        intruder_key=owner.key,
        intruder=owner_json(owner, h),
        evidence=holding_evidence(h, owner.lane, how, at),
        summary=summary,
    )


def from_write(
    kind: IncidentKind, victim: str | None, w: KernelWrite, what: str, summary: str
) -> Observation:
    """The kernel reported lane `w.lane`'s write of `w.path` (known)."""
    assert w.namespace is not None  # the detectors return before this for a writer with no lane
    return Observation(
        kind=kind,
        victim=victim,
        intruder_key=w.namespace,
        intruder=write_intruder(w),
        evidence=write_evidence(w, what),
        summary=summary,
    )
