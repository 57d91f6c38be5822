"""`unbound-writer`: a lane's process writing in shared temp, outside every namespace. Pure.

Two sightings of one incident: the prober's (`held`: the process holds a file there open for
writing: inferred) and the kernel's (`unbound_write`: fanotify reported the write: known).
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.model.holdings import (
    Holding,
    OwnerIndex,
    holding_evidence,
    inside,
    lane_of,
    owner_json,
    writes,
)
from lanewatch.model.kernelwrites import KernelWrite, write_evidence, write_intruder
from lanewatch.model.observation import Observation
from lanewatch.model.views import IncidentKind


def held(h: Holding, owners: OwnerIndex, roots: Sequence[str], at: float) -> Observation | None:
    """A lane's process holds a file in shared temp (outside every namespace) open for writing.
    Not a collision: a cwd, a file read, an unlinked file, a lane of a root we do not watch, a
    path in the lane's own checkout or its repository's common git dir."""
    if not writes(h) or h.deleted or h.directory:
        return None  # a cwd or a read-only file is not a write; an unlinked file has no name
    found = lane_of(h, owners)
    if found is None:
        return None
    owner, how = found
    if not any(inside(owner.key, r) for r in roots):
        return None  # a lane of a root we do not watch: its own dashboard reports it
    if owner.checkout_path and inside(h.path, owner.checkout_path):
        return None
    if owner.git_common_dir and inside(h.path, owner.git_common_dir):
        return None  # its checkout's own repository (git commit, gc in a linked worktree)
    ev = holding_evidence(h, owner.lane, how, at)
    return Observation(
        kind=IncidentKind.UNBOUND_WRITER,
        victim=None,
        intruder_key=owner.key,
        intruder=owner_json(owner, h),
        evidence=ev,
        summary=f"pid {h.pid} of lane {owner.lane} holds {h.path} outside its namespace",
    )


def unbound_write(w: KernelWrite, roots: Sequence[str]) -> Observation | None:
    """A lane's process wrote in shared temp, outside its namespace.

    Not a collision: a writer with no lane, a lane of a root we do not watch (its own engine
    reports it), a path inside the lane's own checkout or its repository's common git dir (git
    commit or gc in a linked worktree writes the main checkout's `.git`), and the stdout/stderr
    the lane was started with (chosen by whoever started it).
    """
    if w.namespace is None or w.lane is None or w.handed:
        return None
    if not any(inside(w.namespace, r) for r in roots) or inside(w.path, w.namespace):
        return None
    if w.checkout_path and inside(w.path, w.checkout_path):
        return None
    if w.git_common_dir and inside(w.path, w.git_common_dir):
        return None
    return Observation(
        kind=IncidentKind.UNBOUND_WRITER,
        victim=None,
        intruder_key=w.namespace,
        intruder=write_intruder(w),
        evidence=write_evidence(w, f"write by lane {w.lane} outside its namespace"),
        summary=f"pid {w.pid} of lane {w.lane} wrote {w.path} outside its namespace",
    )
