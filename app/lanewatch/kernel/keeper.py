"""The keeper: writes kernel-attributed evidence and write history to the roots, on its own
thread (`lanewatch-keeper`), so disk writes never stand between a write and the engine.

Bounded: what waits holds at most `MAX_WAITING_BYTES` of file contents; past that a content is
dropped (the write is still recorded, `stored` false) rather than memory growing with load.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lanewatch.records.evidence import EvidenceStore
from lanewatch.records.writes import WriteEntry, WriteLog

MAX_WAITING_BYTES = 16 * 1024 * 1024
BATCH = 512  # entries appended to a root's history in one write


@dataclass(frozen=True, slots=True)
class Keep:
    root: str
    entry: WriteEntry
    content: bytes | None  # the whole file, when small enough to keep


class Keeper:
    def __init__(self, roots: Sequence[str]) -> None:
        self._stores = {r: EvidenceStore(r) for r in roots}
        self._logs = {r: WriteLog(r) for r in roots}
        self._queue: queue.SimpleQueue[list[Keep] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0  # bytes of content queued
        self.stored = 0
        self.dropped = 0  # contents not kept because the keeper was behind
        self._thread = threading.Thread(target=self._run, name="lanewatch-keeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what waits, then stop."""
        self._queue.put(None)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def put(self, items: Sequence[Keep]) -> None:
        kept: list[Keep] = []
        with self._lock:
            for item in items:
                if item.root not in self._logs:
                    continue
                size = len(item.content or b"")
                if size and self._waiting + size > MAX_WAITING_BYTES:
                    item = replace(item, content=None)
                    self.dropped += 1
                    size = 0
                self._waiting += size
                kept.append(item)
        if kept:
            self._queue.put(kept)

    def _run(self) -> None:
        while True:
            items = self._queue.get()
            if items is None:
                return
            while len(items) < BATCH:  # take what else waits: one append per root
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._write(items)
                    return
                items.extend(more)
            self._write(items)

    def _write(self, items: Sequence[Keep]) -> None:
        by_root: dict[str, list[Keep]] = {}
        for item in items:
            by_root.setdefault(item.root, []).append(item)
        for root, kept in by_root.items():
            contents = [(k.content, k.entry.sha256) for k in kept if k.content is not None]
            stored = self._stores[root].put_many(contents)  # one append for the batch
            self.stored += len(stored)
            entries: list[WriteEntry] = []
            n = 0
            for k in kept:
                entry = k.entry
                if k.content is not None:
                    entry = replace(entry, stored=n in stored)
                    n += 1
                entries.append(entry)
            with self._lock:
                self._waiting -= sum(len(c) for c, _ in contents)
            self._logs[root].append(entries)
