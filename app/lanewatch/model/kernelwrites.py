"""Incidents from writes the kernel attributed (fanotify): foreign and unbound writes. Pure.

The sources (`sources.attribution`) say who wrote which path, how they know the writer's lane,
and what the file held when it was closed; these rules say whether that is a collision. The
incident ids are those of the prober's rules (`model.incidents`): kind + victim + the
intruder's namespace, so a collision seen by the prober (inferred) and by the kernel (known)
is one incident, graded known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lanewatch.lanes.stamp import META_DIR
from lanewatch.model.incidents import Observation
from lanewatch.model.views import Evidence, Grade, IncidentKind


@dataclass(frozen=True, slots=True)
class KernelWrite:
    """One write, as the kernel reported it and the sources attributed it."""

    path: str
    time: float
    event: str  # "close-write" | "modify"
    size: int | None
    sha256: str | None
    pid: int
    start_ticks: int | None
    lane: str | None  # None: no lane, or not identified
    namespace: str | None  # the writer's namespace key
    checkout_id: str | None
    checkout_path: str | None
    command: tuple[str, ...]
    how: str  # how the lane is known
    writer: str  # one line for people: pid, lane, command
    handed: bool = False  # the path is the stdout/stderr its lane was started with
    git_common_dir: str | None = None  # of the writer's checkout's repository, when known


def _inside(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _intruder(w: KernelWrite) -> dict[str, object]:
    return {
        "lane": w.lane,
        "namespace": w.namespace,
        "checkout_id": w.checkout_id,
        "pid": w.pid,
        "command": list(w.command),
    }


def _evidence(w: KernelWrite, what: str) -> Evidence:
    content = f", {w.size} bytes" if w.size is not None else ""
    return Evidence(
        path=w.path,
        time=w.time,
        size=w.size,
        sha256=w.sha256,
        grade=Grade.KNOWN.value,
        writer=w.writer,
        note=f"{what} ({w.event}{content}) reported by the kernel (fanotify); "
        f"lane known by {w.how}",
        key=f"kernel:{w.pid}:{w.start_ticks}:{w.path}:{w.sha256 or w.event}",
    )


def foreign_write(w: KernelWrite, victim: str, *, victim_owner: bool) -> Observation | None:
    """Lane B's process wrote inside lane A's namespace (`victim`).

    Not a collision: a writer with no lane, the namespace's own lane, its owner processes
    (whatever environment they inherited), and lanewatch's own files (`.lanewatch/`: stamps
    and ledgers have rules of their own).
    """
    if w.namespace is None or w.lane is None or victim_owner:
        return None
    if w.namespace.rstrip("/") == victim or _inside(w.path, f"{victim}/{META_DIR}"):
        return None
    return Observation(
        kind=IncidentKind.FOREIGN_WRITER,
        victim=victim,
        intruder_key=w.namespace,
        intruder=_intruder(w),
        evidence=_evidence(w, f"write by lane {w.lane}"),
        summary=f"pid {w.pid} of lane {w.lane} wrote {w.path}",
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
    if not any(_inside(w.namespace, r) for r in roots) or _inside(w.path, w.namespace):
        return None
    if w.checkout_path and _inside(w.path, w.checkout_path):
        return None
    if w.git_common_dir and _inside(w.path, w.git_common_dir):
        return None
    return Observation(
        kind=IncidentKind.UNBOUND_WRITER,
        victim=None,
        intruder_key=w.namespace,
        intruder=_intruder(w),
        evidence=_evidence(w, f"write by lane {w.lane} outside its namespace"),
        summary=f"pid {w.pid} of lane {w.lane} wrote {w.path} outside its namespace",
    )
