"""A flood of one kind from one lane: one incident with a count, never thousands. Pure.

A kind whose incidents are one per file (`per_file` in `model/kinds.py`: today `shared-file`,
`model/detectors/unbound_writer.py`) names every lane that wrote each file: two lanes that
write one file are one collision, whatever else they write. A lane that writes thousands of
files outside its namespace (a tool that ignores TMPDIR, run unfenced) would make thousands of
incidents, one line each in the root's `incidents.jsonl`. So once a lane has FLOOD_AFTER open
incidents of a per-file kind that name it alone, a sighting that would open another one goes
into that lane's one flood incident instead: its count grows, its evidence keeps the first and
the newest writes (`incidents.MAX_EVIDENCE`), its title says "many files". A file that already
has its incident still gets the sighting (a second lane writing it is still named there).

Blind spot: a file first written by the flooding lane, and later by another lane, is the other
lane's incident alone (the first lane's write is in the flood incident and in the history).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from lanewatch.model.incidents import IncidentRecord
from lanewatch.model.kinds import kind_of
from lanewatch.model.observation import Observation
from lanewatch.model.writerlist import writer_key

FLOOD_AFTER = 10  # open per-file incidents of one kind naming one lane alone, then one more
FLOOD = "flood:"  # the group key of a flood incident: FLOOD + the writer's key


def _per_file(kind: str) -> bool:
    entry = kind_of(kind)
    return entry is not None and entry.per_file


def is_flood(record: IncidentRecord) -> bool:
    """A flood incident (it has no one path; its evidence names the files)."""
    return record.path is None and _per_file(record.kind)


def fold(
    obs: Observation,
    ids: Iterable[str],
    lookup: Callable[[str], IncidentRecord | None],
) -> Observation:
    """`obs`, which would open a new incident, or the same sighting for its lane's flood
    incident when the lane has FLOOD_AFTER open per-file ones already. `ids`: the incidents
    that name the writer's namespace (the model's index); `lookup`: an incident by id."""
    if obs.path is None or not _per_file(obs.kind):
        return obs
    who = writer_key(obs.intruder)
    alone = 0
    for iid in ids:
        rec = lookup(iid)
        if (
            rec is not None
            and rec.kind == obs.kind
            and rec.path is not None
            and not rec.acknowledged
            and len(rec.writers) == 1
            and rec.writers[0].get("key") == who
        ):
            alone += 1
            if alone >= FLOOD_AFTER:
                lane = obs.intruder.get("lane") or who
                summary = f"lane {lane} writes many files outside its namespace"
                return replace(obs, intruder_key=FLOOD + who, path=None, summary=summary)
    return obs
