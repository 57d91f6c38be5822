"""`cross-lane-write` (formerly `foreign-writer`): lane B's process writing inside lane A's
namespace. One incident per victim namespace, naming every lane that wrote in it. Pure.

Two sightings of one incident: the prober's (`held`: B's process holds a path in A's namespace
open for writing, or as its cwd: inferred) and the kernel's (`foreign_write`: fanotify reported
B's write there: known). Both are grouped by A's namespace, so they share one id.
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.lanes.stamp import META_DIR
from lanewatch.linux.paths import is_under
from lanewatch.model.detection import detects
from lanewatch.model.facts import HeldInNamespace, WroteInNamespace
from lanewatch.model.family import Stamped, one_family
from lanewatch.model.holdings import (
    Holding,
    OwnerIndex,
    lane_of,
    writes,
)
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.observation import Observation
from lanewatch.model.sightings import from_holding, from_write
from lanewatch.model.writerlist import Writer, names

KIND = "cross-lane-write"  # formerly "foreign-writer" (`model.kinds.LEGACY_NAMES`)
GROUP = ""  # one incident per victim namespace, naming every lane that wrote in it


@detects(KIND, reads=HeldInNamespace)
def held(
    h: Holding, victim: str, owners: OwnerIndex, at: float, stamped: Stamped | None = None
) -> Observation | None:
    """A process of another lane holds a path in `victim` (a namespace) open for writing, as its
    cwd, or as an open folder. Not a collision: `.lanewatch/`, a read-only or unlinked file (as
    for `unbound_writer.held`), the victim's own owner (live, or the process that wrote its
    released stamp: `stamped`), the folder pinned by a claim before its stamp is written, a
    process of no lane, the victim's own lane and its family (`model/family.py`)."""
    if is_under(h.path, f"{victim}/{META_DIR}"):
        return None  # lanewatch's own files: stamps, locks, ledgers
    if not (writes(h) or h.kind == "cwd" or h.directory):
        return None  # a file held read-only (or an O_PATH fd on one) is read, not written
    if h.deleted and not h.directory:
        return None  # unlinked (pytest's capture files: O_TMPFILE): no name to clobber
    victim_owner = owners.by_key.get(victim)
    if victim_owner is not None and h.pid in victim_owner.pids:
        return None  # the owner itself, whatever environment it inherited
    if stamped is not None and (h.pid, h.start_ticks) == (stamped.pid, stamped.start_ticks):
        return None  # its owner after it released the lane (an xdist worker ending)
    if stamped is None and victim_owner is None and h.path.rstrip("/") == victim and h.directory:
        return None  # a claim in progress: its lock pins the folder, then the stamp is written
    found = lane_of(h, owners)
    if found is None:
        return None  # nobody's lane: a shell or a tool outside any lane; not attributed
    intruder, how = found
    family_of = stamped if stamped is not None else victim_owner
    victim_family = family_of.family if family_of is not None else None
    if one_family(intruder.key, intruder.family, victim, victim_family):
        return None  # the lane itself, or one of its family (`model/family.py`)
    summary = f"pid {h.pid} of lane {intruder.lane} holds {h.path}"
    lane = victim_owner.lane if victim_owner is not None else None
    return from_holding(KIND, victim, intruder, h, how, at, summary, group=GROUP, victim_lane=lane)


@detects(KIND, reads=WroteInNamespace)
def foreign_write(
    w: KernelWrite,
    victim: str,
    *,
    victim_owner: bool,
    victim_lane: str | None = None,
    victim_family: str | None = None,
) -> Observation | None:
    """Lane B's process wrote inside lane A's namespace (`victim`).

    Not a collision: a writer with no lane, the namespace's own lane and its family
    (`victim_family`, the victim's stamp's; `model/family.py`), its owner processes (whatever
    environment they inherited), and lanewatch's own files (`.lanewatch/`: stamps and ledgers
    have rules of their own).
    """
    if w.namespace is None or w.lane is None or victim_owner:
        return None
    if one_family(w.namespace, w.family, victim, victim_family):
        return None
    if is_under(w.path, f"{victim}/{META_DIR}"):
        return None
    summary = f"pid {w.pid} of lane {w.lane} wrote {w.path}"
    what = f"write by lane {w.lane}"
    return from_write(KIND, victim, w, what, summary, group=GROUP, victim_lane=victim_lane)


def title(
    writers: Sequence[Writer],
    *,
    victim: str | None,
    victim_lane: str | None,
    latest: str | None,
    **_: object,
) -> str | None:
    """ "agent-2 writes in agent-1's lane: PATH", "agent-2 and agent-3 write in agent-1's lane"."""
    if not writers or not victim:
        return None
    where = f"{victim_lane}'s lane" if victim_lane else f"the namespace {victim}"
    if len(writers) == 1:
        return f"{names(writers)} writes in {where}" + (f": {latest}" if latest else "")
    return f"{names(writers)} write in {where}"
