"""A write the kernel attributed (fanotify), and how it reads as an incident's evidence. Pure.

The kernel layer (`kernel/attribution.py`) says who wrote which path, how it knows the writer's
lane, and what the file held when it was closed; the writer detectors
(`model/detectors/foreign_writer.py`, `unbound_writer.py`) say whether that is a collision.
Their ids are those of the prober's sightings: kind + victim + the intruder's namespace, so a
collision seen by the prober (inferred) and by the kernel (known) is one incident, graded known.
"""

from __future__ import annotations

from dataclasses import dataclass

from lanewatch.model.observation import intruder_json
from lanewatch.model.views import Evidence, Grade


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
    handed: bool = False  # a file its lane was started with on fds 0-2 (`model/family.py`)
    git_common_dir: str | None = None  # of the writer's checkout's repository, when known
    family: str | None = None  # its lane's stamp's family (`model/family.py`)


def write_intruder(w: KernelWrite) -> dict[str, object]:
    return intruder_json(w.lane, w.namespace, w.checkout_id, w.pid, w.start_ticks, w.command)


def write_evidence(w: KernelWrite, what: str) -> Evidence:
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
