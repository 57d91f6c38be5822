"""A short, bounded history of writes per path: the evidence behind "who wrote what".

At most `max_paths` paths are remembered (least recently written dropped first), each with at
most `per_path` writes, so memory is bounded by the limits, never by the number of events.
Owned by one thread (the engine's worker); readers get immutable tuples.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

DEFAULT_MAX_PATHS = 4096
DEFAULT_PER_PATH = 8


@dataclass(frozen=True, slots=True)
class WriteRecord:
    time: float
    size: int | None  # None: the path was gone when we looked
    sha256: str | None = None  # only where the content was read (receipts, stamps)
    writer: str | None = None  # who held it open for writing, where the prober saw it


class FileHistory:
    def __init__(
        self, max_paths: int = DEFAULT_MAX_PATHS, per_path: int = DEFAULT_PER_PATH
    ) -> None:
        self.max_paths = max_paths
        self.per_path = per_path
        self._writes: OrderedDict[str, deque[WriteRecord]] = OrderedDict()
        self._writers: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._writes)

    def record(
        self,
        path: str,
        time: float,
        size: int | None,
        sha256: str | None = None,
        writer: str | None = None,
    ) -> WriteRecord:
        """One write; `writer` where the source knows it (the kernel), else the one noted."""
        rec = WriteRecord(time, size, sha256, writer or self._writers.get(path))
        writes = self._writes.get(path)
        if writes is None:
            writes = self._writes[path] = deque(maxlen=self.per_path)
            if len(self._writes) > self.max_paths:
                self._writes.popitem(last=False)
        else:
            self._writes.move_to_end(path)
        last = writes[-1] if writes else None
        if last is not None and last.size == size and last.sha256 == sha256 and sha256:
            writes[-1] = rec  # the same content seen again: one write, newer time
        elif last is not None and _same_write(last, rec):
            writes[-1] = _richer(last, rec)  # one write seen by the tail and by the kernel
        else:
            writes.append(rec)
        return rec

    def note_writer(self, path: str, writer: str) -> None:
        """Remember who holds `path` open for writing; later writes name them."""
        self._writers[path] = writer
        self._writers.move_to_end(path)
        if len(self._writers) > self.max_paths:
            self._writers.popitem(last=False)

    def history(self, path: str) -> tuple[WriteRecord, ...]:
        return tuple(self._writes.get(path, ()))

    def forget_under(self, prefix: str) -> None:
        """Drop every path under `prefix` (a namespace that went away)."""
        slashed = prefix.rstrip("/") + "/"
        for store in (self._writes, self._writers):
            for path in [p for p in store if p.startswith(slashed)]:
                del store[path]


SAME_WRITE = 1.0  # seconds: a tail record and a kernel record this close, same size, are one


def _same_write(a: WriteRecord, b: WriteRecord) -> bool:
    if abs(a.time - b.time) > SAME_WRITE or a.size != b.size:
        return False
    # The tail reads no content and the kernel source does: one hashed, the other not.
    return (a.sha256 is None) != (b.sha256 is None)


def _richer(a: WriteRecord, b: WriteRecord) -> WriteRecord:
    return WriteRecord(max(a.time, b.time), b.size, b.sha256 or a.sha256, b.writer or a.writer)
