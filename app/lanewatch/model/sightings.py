"""What the two writer detectors (`foreign_writer`: cross-lane-write, `unbound_writer`:
shared-file) report once they have
judged a sighting a collision: one Observation from a holding the prober saw, or from a write
the kernel reported. Pure."""

from __future__ import annotations

from lanewatch.model.holdings import Holding, Owner, holding_evidence, owner_json
from lanewatch.model.kernelwrites import KernelWrite, write_evidence, write_intruder
from lanewatch.model.observation import Observation


def from_holding(
    kind: str,
    victim: str | None,
    owner: Owner,
    h: Holding,
    how: str,
    at: float,
    summary: str,
    *,
    group: str,
    path: str | None = None,
    victim_lane: str | None = None,
) -> Observation:
    """The prober saw `owner`'s process `h.pid` hold `h.path` (inferred). `group`, with the
    kind and the victim, makes the incident's id (`model/observation.py`)."""
    return Observation(
        kind=kind,
        victim=victim,
        intruder_key=group,
        intruder=owner_json(owner, h),
        evidence=holding_evidence(h, owner.lane, how, at),
        summary=summary,
        victim_lane=victim_lane,
        path=path,
    )


def from_write(
    kind: str,
    victim: str | None,
    w: KernelWrite,
    what: str,
    summary: str,
    *,
    group: str,
    path: str | None = None,
    victim_lane: str | None = None,
) -> Observation:
    """The kernel reported lane `w.lane`'s write of `w.path` (known)."""
    assert w.namespace is not None  # the detectors return before this for a writer with no lane
    return Observation(
        kind=kind,
        victim=victim,
        intruder_key=group,
        intruder=write_intruder(w),
        evidence=write_evidence(w, what),
        summary=summary,
        victim_lane=victim_lane,
        path=path,
    )
