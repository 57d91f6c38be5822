"""What the engine's intakes share: `Found`, the result every intake hands back (model events,
for the model keeper alone to apply), and `DiskMemo`, what they remember of each namespace's
disk between two reads.

The intakes (`walkintake.py`, `tailintake.py`, `probeintake.py`, `kernelintake.py`) read; the
keeper (`modelkeeper.py`) applies; the worker (`worker.py`) hands the one to the other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from lanewatch.engine.stampversions import StampVersions
from lanewatch.files.usage import Usage
from lanewatch.model import model as m
from lanewatch.model.filehistory import FileHistory

# Read-only access to the model's namespaces as they are now (the keeper replaces the mapping
# on every change, so each call sees the latest applied state).
Namespaces = Callable[[], Mapping[str, m.NsRecord]]


@dataclass(slots=True)
class Found:
    """What an intake read, for the model keeper to apply: events in the order they were
    found, and the data files written (handed to `on_applied` once they are in the model)."""

    events: list[m.Event] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def emit(self, *events: m.Event) -> None:
        self.events.extend(events)


@dataclass(slots=True)
class NsFiles:
    """Sizes of every file of one namespace, for incremental counts: apparent (`bytes`) and
    allocated (`usage`, as `du` counts, folders too)."""

    sizes: dict[str, int]
    bytes: int
    usage: Usage = field(default_factory=Usage)

    def set(self, path: str, st: os.stat_result | None) -> None:
        """The file `path` is now `st` (None: gone)."""
        old = self.sizes.pop(path, None)
        if old is not None:
            self.bytes -= old
        if st is not None:
            self.sizes[path] = st.st_size
            self.bytes += st.st_size
        self.usage.set(path, st)

    def drop_under(self, folder: str) -> None:
        prefix = folder + "/"
        for path in [p for p in self.sizes if p.startswith(prefix)]:
            self.bytes -= self.sizes.pop(path)
        self.usage.drop_under(folder)


@dataclass(slots=True)
class LedgerState:
    offset: int = 0
    inode: int | None = None
    releases: dict[int, float] = field(default_factory=dict)  # pid -> latest release time


class DiskMemo:
    """What the intakes remember of each namespace's disk between two reads: every file's size
    (a write updates the counts without a walk), how far each ledger was read (and its recent
    releases), and the bounded in-memory history of writes per path.

    Not the model: the keeper never reads it. It forgets a namespace in the same commit that
    removes it from the model (`forget`, called by the keeper). One thread (the worker's)."""

    def __init__(self) -> None:
        self.files: dict[str, NsFiles] = {}
        self.ledgers: dict[str, LedgerState] = {}
        self.history = FileHistory()
        self.stamps = StampVersions()  # the stamp last read per namespace, bytes and all

    def forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.files.pop(key, None)
            self.ledgers.pop(key, None)
            self.history.forget_under(key)
            self.stamps.forget(key)
