"""What the prober saw a process hold, the owners it may belong to, and which lane it is. Pure.

The prober hands over `Holding`s (a process, a path it holds as cwd or open file, and its lane
evidence: $LANEWATCH_NAMESPACE, $LANEWATCH_LANE, its ancestry and process group); `lane_of`
says which lane's process it is and how we know. The writer detectors
(`model/detectors/foreign_writer.py`, `unbound_writer.py`) judge whether the holding is a
collision; `model/writers.py` hands each holding to the detector its place calls for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanewatch.model.family import FileId
from lanewatch.model.observation import intruder_json
from lanewatch.model.views import Evidence, Grade


@dataclass(frozen=True, slots=True)
class Holding:
    """One path a process holds (cwd or open file), as the prober saw it."""

    pid: int
    start_ticks: int
    path: str
    kind: str  # cwd | fd | map | root
    access: str | None  # read | write | readwrite | path | None
    deleted: bool
    directory: bool
    lane_env: str | None  # $LANEWATCH_LANE
    namespace_env: str | None  # $LANEWATCH_NAMESPACE
    lineage: tuple[int, ...]  # pid, parent, grandparent, ...
    pgid: int
    command: tuple[str, ...]
    size: int | None = None
    fd: int | None = None
    file_id: FileId | None = None  # (device, inode) of a file held open for writing


@dataclass(frozen=True, slots=True)
class Owner:
    """A namespace's owner, for attribution: its pids and where it is bound."""

    key: str  # namespace path
    lane: str
    checkout_id: str
    checkout_path: str
    pids: frozenset[int]  # stamp pid and the command's pid
    pgid: int | None
    pid: int | None = None  # the stamp's pid: `lanewatch run` itself, or the claiming process
    # The common git dir of the checkout's repository (`git rev-parse --git-common-dir`), where
    # the checkout's own git writes (objects, refs, a linked worktree's index); None: unknown.
    git_common_dir: str | None = None
    family: str | None = None  # the stamp's family: its head's folder name (`model/family.py`)
    # The files the lane was started with on fds 0-2 (`model/family.py`); None: not recorded.
    handed: frozenset[FileId] | None = None


def writes(h: Holding) -> bool:
    """Whether the holding is a write: an fd open for writing or a shared writable mapping.
    An fd whose access could not be read (closed meanwhile) is no evidence of a write."""
    return h.kind in ("fd", "map") and h.access in ("write", "readwrite")


class OwnerIndex:
    """Owners looked up by namespace, pid, process group and lane name: built once per probe,
    so attributing each holding costs a few dict look-ups, not a pass over every owner."""

    def __init__(self, owners: Mapping[str, Owner]) -> None:
        self.by_key = owners
        self.by_pid: dict[int, Owner] = {}
        self.by_pgid: dict[int, Owner] = {}
        self.by_lane: dict[str, list[Owner]] = {}
        # The process that wrote each stamp: a lane of its own, whatever else it is a member of.
        self.by_stamp_pid: dict[int, Owner] = {}
        for owner in owners.values():
            if owner.pid is not None:
                self.by_stamp_pid.setdefault(owner.pid, owner)
            for pid in owner.pids:
                self.by_pid.setdefault(pid, owner)
            if owner.pgid is not None:
                self.by_pgid.setdefault(owner.pgid, owner)
            self.by_lane.setdefault(owner.lane, []).append(owner)


def lane_of(h: Holding, owners: Mapping[str, Owner] | OwnerIndex) -> tuple[Owner, str] | None:
    """The lane a process belongs to, with how we know: an owner process is its own lane's
    (whatever environment it inherited: an xdist worker owns `pytest-gw0` though it was
    started with `pytest`'s variables), else its environment, else its ancestry. The order
    is the kernel's (`processes/pidlane.py`): one pid is never two lanes at once."""
    index = owners if isinstance(owners, OwnerIndex) else OwnerIndex(owners)
    own = index.by_stamp_pid.get(h.pid)
    if own is not None:
        return own, "owner process"
    if h.namespace_env:
        key = h.namespace_env.rstrip("/")
        bound = index.by_key.get(key) or Owner(
            key, h.lane_env or key.rsplit("/", 1)[-1], "", "", frozenset(), None
        )
        return bound, "$LANEWATCH_NAMESPACE"
    for pid in h.lineage:
        owner = index.by_pid.get(pid)
        if owner is not None:
            how = "owner process" if pid == h.pid else f"descends from owner pid {pid}"
            return owner, how
    owner = index.by_pgid.get(h.pgid)
    if owner is not None:
        return owner, f"in owner's process group {owner.pgid}"
    if h.lane_env:
        matches = index.by_lane.get(h.lane_env, [])
        if len(matches) == 1:
            return matches[0], "$LANEWATCH_LANE"
    return None


def _writer(h: Holding, lane: str) -> str:
    cmd = " ".join(h.command)[:120]
    return f"pid {h.pid} (lane {lane}): {cmd}"


def holding_evidence(h: Holding, lane: str, how: str, at: float) -> Evidence:
    what = "working directory" if h.kind == "cwd" else f"{h.kind} open for {h.access or '?'}"
    return Evidence(
        path=h.path,
        time=at,
        size=h.size,
        sha256=None,
        grade=Grade.INFERRED.value,
        writer=_writer(h, lane),
        note=f"{what}; lane known by {how}",
        key=f"hold:{h.pid}:{h.start_ticks}:{h.kind}:{h.path}",
    )


def owner_json(owner: Owner, h: Holding) -> dict[str, Any]:
    return intruder_json(owner.lane, owner.key, owner.checkout_id, h.pid, h.start_ticks, h.command)
