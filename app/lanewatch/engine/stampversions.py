"""Owner stamps as the engine read them, kept as evidence when a live owner is replaced.

The engine remembers, per namespace, the stamp it last read (bytes and all: a stamp is small;
the first read of a namespace is its baseline). When a stamp it reads names another owner while
the one before was live (what `takeover` judges), both versions go to the root's evidence store
and write history: the one before (at the time it was first read) and the new one. No kernel saw
those writes: each is named by the owner its stamp names, marked so (`writes.STAMP_CLAIM`). So
a takeover's timeline shows the victim's stamp, the intruder's and the diff, with or without
kernel attribution (which, where it runs, also records the intruder's write as it happens).

One thread (the engine's worker). Two appends per takeover, none otherwise.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from lanewatch.lanes.stamp import META_DIR, STAMP_FILE, Stamp, StampRead
from lanewatch.records.evidence import EvidenceStore
from lanewatch.records.writes import STAMP_CLAIM, WriteEntry, WriteLog

BEFORE = "stamp as the engine read it before"
AFTER = "stamp as the engine read it"


@dataclass(frozen=True, slots=True)
class StampVersion:
    at: float  # when the engine first read these bytes
    data: bytes
    stamp: Stamp


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class StampVersions:
    def __init__(self) -> None:
        self._last: dict[str, StampVersion] = {}
        self._stores: dict[str, EvidenceStore] = {}
        self._logs: dict[str, WriteLog] = {}

    def read(self, key: str, read: StampRead, at: float) -> None:
        """The engine read `key`'s stamp: remember it if its bytes are new."""
        if read.data is None or read.stamp is None:
            return
        last = self._last.get(key)
        if last is None or last.data != read.data:
            self._last[key] = StampVersion(at, read.data, read.stamp)

    def last(self, key: str) -> StampVersion | None:
        return self._last.get(key)

    def keep_replaced(self, root: str, key: str, read: StampRead, at: float) -> None:
        """`key`'s live owner was replaced: keep the stamp read before and the new one."""
        before = self._last.get(key)
        if read.data is None or read.stamp is None or before is None:
            return
        after = StampVersion(at, read.data, read.stamp)
        path = os.path.join(key, META_DIR, STAMP_FILE)
        store = self._stores.get(root) or self._stores.setdefault(root, EvidenceStore(root))
        kept = store.put_many([(before.data, None), (after.data, None)])
        entries = [
            _entry(path, key, v, n in kept, event)
            for n, (v, event) in enumerate(((before, BEFORE), (after, AFTER)))
        ]
        log = self._logs.get(root) or self._logs.setdefault(root, WriteLog(root))
        log.append(entries)

    def forget(self, key: str) -> None:
        self._last.pop(key, None)


def _entry(path: str, key: str, v: StampVersion, stored: bool, event: str) -> WriteEntry:
    s = v.stamp
    return WriteEntry(
        path=path,
        time=v.at,
        size=len(v.data),
        sha256=sha256(v.data),
        stored=stored,
        pid=s.pid,
        start_ticks=s.start_ticks,
        identified=False,  # the stamp names its owner; no kernel saw who wrote it
        lane=s.lane,
        namespace=None,  # whose lane wrote it is the claim, not a fact
        command=tuple(s.command),
        how=STAMP_CLAIM,
        event=event,
        victim=key,
    )
