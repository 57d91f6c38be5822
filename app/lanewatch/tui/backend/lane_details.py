"""Read what the detail pane shows beyond the engine's view: the owner stamp as written, the
ledger tail, the most recently written files, and the abstract unix sockets (an X display) the
lane's processes listen on. Blocking I/O: call from a thread worker.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lanewatch.lanes import ledger
from lanewatch.lanes.ledger import LedgerLine
from lanewatch.lanes.stamp import META_DIR, StampRead, read_stamp
from lanewatch.model.nsfiles import NsListing
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.processes.socketlanes import lane_listeners
from lanewatch.records import writes as history
from lanewatch.records.report import entry_writer, evidence_rows

LEDGER_TAIL = 12
RECENT_WRITES = 8
SCAN_LIMIT = 20_000
WRITER_WIDTH = 48  # characters of a writer's command in the pane


@dataclass(frozen=True, slots=True)
class RecentWrite:
    path: str  # relative to the namespace
    mtime: float
    size: int
    writer: str | None = None  # who wrote it last, where recorded (inert text); None: unknown


@dataclass(frozen=True, slots=True)
class Detail:
    key: str
    stamp: StampRead | None
    ledger: tuple[LedgerLine, ...]
    writes: tuple[RecentWrite, ...]
    scanned: int
    truncated: bool
    error: str | None = None
    elsewhere: str | None = None  # another host's lane: what is not read here, how to see it
    host: str | None = None  # another host's lane whose `writes` its lanewatch listed
    # the abstract names its processes listen on, as said: "@/tmp/.X11-unix/X99 (display :99)"
    names: tuple[str, ...] = ()


def far_detail(key: str, note: str, listing: NsListing | None = None) -> Detail:
    """Another host's lane: its ledger and stamp are on that host's disk (never this one's,
    where the same path is someone else's): `note` says so. Its recent writes come from
    `listing` (hosts/farfiles.py) when that host listed them; else `listing.elsewhere` says why
    not, and how to list them there."""
    if listing is None or listing.host is None:
        why = f"Recent writes: {listing.elsewhere} · " if listing and listing.elsewhere else ""
        return Detail(key, None, (), (), 0, False, None, why + note)
    recent = [f for f in listing.files if f.kind == "file"][:RECENT_WRITES]
    writes = tuple(RecentWrite(f.rel, f.mtime, f.size, f.writer) for f in recent)
    n = len(listing.files)
    return Detail(key, None, (), writes, n, listing.truncated, listing.error, note, listing.host)


def load_detail(
    namespace: Path,
    *,
    ledger_tail: int = LEDGER_TAIL,
    writes: int = RECENT_WRITES,
    scan_limit: int = SCAN_LIMIT,
    roots: Sequence[str] = (),
    incidents: Sequence[Incident] = (),
    view: NamespaceView | None = None,
) -> Detail:
    """`roots`' write history and `incidents`' evidence name the writers of the files; the
    running processes of `view` (the namespace's) are asked for their abstract sockets."""
    error = None
    try:
        recent, scanned, truncated = recent_writes(namespace, writes, scan_limit)
    except OSError as exc:
        recent, scanned, truncated = [], 0, False
        error = f"{exc.strerror or exc} reading {namespace}"
    if recent:
        recent = with_writers(namespace, recent, roots, incidents)
    return Detail(
        key=str(namespace),
        stamp=read_stamp(namespace),
        ledger=tuple(ledger.read(namespace, tail=ledger_tail)),
        writes=tuple(recent),
        scanned=scanned,
        truncated=truncated,
        error=error,
        names=abstract_names(view) if view is not None and view.members else (),
    )


def abstract_names(view: NamespaceView) -> tuple[str, ...]:
    """The abstract unix sockets the lane's running processes listen on, each as said."""
    listened = lane_listeners([view])
    return tuple(one.socket.said for one in listened.found) if listened is not None else ()


def with_writers(
    namespace: Path,
    recent: Sequence[RecentWrite],
    roots: Sequence[str],
    incidents: Sequence[Incident],
) -> list[RecentWrite]:
    """Each file with its last writer: the roots' write history (kernel attribution) first,
    else an incident's evidence about that path (the prober's holder, a foreign write)."""
    recorded = history.latest_under(roots, str(namespace)) if roots else {}
    seen: dict[str, str] = {}
    for inc in incidents:
        for row in evidence_rows(inc):
            if row.path and row.writer and row.writer != "unknown":
                seen[row.path] = row.writer  # oldest first: the newest stays
    out = []
    for w in recent:
        full = f"{namespace}/{w.path}"
        entry = recorded.get(full)
        writer = entry_writer(entry, WRITER_WIDTH) if entry is not None else seen.get(full)
        out.append(RecentWrite(w.path, w.mtime, w.size, writer))
    return out


def recent_writes(
    namespace: Path, limit: int, scan_limit: int
) -> tuple[list[RecentWrite], int, bool]:
    """The `limit` newest regular files under `namespace` (its meta folder excluded), never
    following symlinks; stops after `scan_limit` entries. Raises OSError if the namespace
    itself cannot be read."""
    heap: list[tuple[float, str, int]] = []
    scanned = 0
    stack = [""]
    first = True
    while stack:
        rel = stack.pop()
        try:
            entries = os.scandir(namespace / rel if rel else namespace)
        except OSError:
            if first:
                raise
            continue
        first = False
        with entries:
            for entry in entries:
                scanned += 1
                if scanned > scan_limit:
                    return _sorted(heap), scanned - 1, True
                name = entry.name if not rel else f"{rel}/{entry.name}"
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if name != META_DIR:
                        stack.append(name)
                elif stat.S_ISREG(st.st_mode):
                    item = (st.st_mtime, name, st.st_size)
                    if len(heap) < limit:
                        heapq.heappush(heap, item)
                    elif item > heap[0]:
                        heapq.heapreplace(heap, item)
    return _sorted(heap), scanned, False


def _sorted(heap: list[tuple[float, str, int]]) -> list[RecentWrite]:
    return [RecentWrite(path, mtime, size) for mtime, path, size in sorted(heap, reverse=True)]
