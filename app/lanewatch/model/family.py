"""Families and handed files: two rules the writer detectors share. Pure.

A **family** is a lane and the lanes it starts for its own workers (`pytest`, `pytest-gw0`,
`pytest-gw1`: `lanes/familyclaim.py` proves the link when a worker claims, and the worker's stamp
names its head). Its members are never intruders in each other's namespaces: a worker writes
in the main lane's `tmp/` before it has one of its own, and they are one piece of work.

A **handed** file is one on the stdin, stdout or stderr of the process that started a lane,
as it began (`pytest > /tmp/log`): whoever started the lane chose it, not the lane
(`lanes/handed.py`). A lane's process writing it is not the lane writing outside its lane.
Files are compared by (device, inode), never by path: pytest's capture moves the descriptors,
and a name can be reused.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

FileId = tuple[int, int]  # (st_dev, st_ino)


@dataclass(frozen=True, slots=True)
class Stamped:
    """What a namespace's stamp on this host says, live or released: the process that wrote it
    and the family it names. A worker releases its lane when its tests end, then lives on a
    moment holding its files there: still its own lane's process, not an intruder."""

    pid: int
    start_ticks: int
    family: str | None = None
    # The run is over: released, or its owner dead, and none of its processes left running
    # (`classify.run_over`). Its lane listened on a port no later lane can fight it for.
    over: bool = False


def head(key: str, family: str | None) -> str:
    """The namespace key of the head of `key`'s family: its own key when it names none."""
    if not family:
        return key.rstrip("/")
    return f"{key.rstrip('/').rsplit('/', 1)[0]}/{family}"


def one_family(a: str, a_family: str | None, b: str, b_family: str | None) -> bool:
    """Whether the lanes at namespace keys `a` and `b` are of one family (or one lane)."""
    return head(a, a_family) == head(b, b_family)


def file_ids(stdio: Collection[Collection[int]] | None) -> frozenset[FileId] | None:
    """A stamp's `stdio` as a set; None stays None (not recorded: an older lanewatch)."""
    if stdio is None:
        return None
    return frozenset((int(p[0]), int(p[1])) for p in (list(x) for x in stdio) if len(p) == 2)


def handed(file_id: FileId | None, *sets: frozenset[FileId] | None) -> bool:
    """The written file is one of the lane's handed files (any of `sets`: the lane's own, its
    family head's)."""
    return file_id is not None and any(s is not None and file_id in s for s in sets)
