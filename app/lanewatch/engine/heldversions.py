"""Shared files as the engine read them while lanes held them, kept as inferred versions.

Without kernel attribution no one reads a file at its close, so a shared-file incident (lanes'
processes writing one file in shared temp) had no contents to show. When the prober sees lane
processes hold such a file open for writing, the engine reads its bytes (a small regular text
file only, the evidence store's size limit; never a FIFO, a device or a symlink; and only the
very file the holder has open) and, when they differ from the last version kept for that path,
keeps them in the holder's root: evidence store and write history, as the kernel path does.

The writer is inferred (`writes.HELD_READ`): the lane that held the file when it was read. When
several lane processes held it, each is named in `held_by` and none is taken as the writer.

One thread (the engine's worker, on a probe report); at most one read a path a second.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lanewatch.kernel.writefacts import worth_keeping
from lanewatch.lanes.fsutil import read_nofollow_in
from lanewatch.linux.proc import fd_stat
from lanewatch.model.holdings import Holding
from lanewatch.records.evidence import SMALL_FILE, EvidenceStore
from lanewatch.records.writes import HELD_READ, WriteEntry, WriteLog

EVERY = 1.0  # seconds: at most one read of a path this often
LAST = 4096  # paths whose last kept content hash is remembered
PER_REPORT = 32  # paths read for one probe report, at most
# seconds: a file modified this recently may be mid-rewrite (truncated, half written): read it at
# a later probe instead (the kernel reads at the close; we can only wait for a quiet moment)
SETTLE = 0.2
# seconds: a file's mtime comes from the kernel's coarse clock, which lags the wall clock by up
# to a tick; a content written this close to the holders' sampling may postdate it
COARSE = 0.02


@dataclass(frozen=True, slots=True)
class Holder:
    """A lane process that holds the file open for writing."""

    lane: str
    namespace: str
    holding: Holding


def read_held(
    path: str,
    holders: Sequence[Holding],
    *,
    settle: float = SETTLE,
    sampled_at: float | None = None,
) -> bytes | None:
    """`path`'s bytes if it is a small regular text file and the very file (device and inode)
    a holder has open; None otherwise. Never opens a FIFO or device (lstat first, then
    `open_regular`'s O_NOFOLLOW|O_NONBLOCK and fstat check), never follows a symlink.

    `sampled_at`: when `holders` were read (the probe's start). A content written after that
    may be the work of a process the probe did not yet see holding the file (it opened it
    since): naming only the holders seen would name the wrong writer, so it is read at a
    later probe, whose holders were sampled after the write."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > SMALL_FILE or not worth_keeping(path):
        return None
    if time.time() - st.st_mtime < settle:
        return None  # being written now, maybe: a torn read would be a version no one wrote
    if sampled_at is not None and st.st_mtime > sampled_at - COARSE:
        return None  # written after (or as) the holders were sampled: they may miss its writer
    same = False
    for h in holders:
        if h.fd is None:
            continue
        try:  # the open file's inode, through /proc: a stat, not an open
            held = fd_stat(h.pid, h.fd)
        except OSError:
            continue  # closed since, or not ours to look at
        same = same or (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino)
    if not same:
        return None  # another file now has that name (or another mount namespace's)
    p = Path(path)
    try:
        data, fst = read_nofollow_in(p.parent, p.name, SMALL_FILE)
    except OSError:  # NotAFile too: replaced by a FIFO since the lstat
        return None
    if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or len(data) > SMALL_FILE:
        return None
    if (fst.st_mtime_ns, fst.st_size) != (st.st_mtime_ns, st.st_size) or len(data) != st.st_size:
        return None  # written while we read
    if b"\0" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # text only: a binary file's bytes would show nothing to a person
    return data


def label(h: Holder) -> str:
    return f"lane {h.lane}, pid {h.holding.pid}"


class HeldVersions:
    def __init__(self, *, every: float = EVERY) -> None:
        self.every = every
        self._last: OrderedDict[str, str] = OrderedDict()  # path -> sha256 last kept
        self._read_at: dict[str, float] = {}  # path -> monotonic time of the last read
        self._stores: dict[str, EvidenceStore] = {}
        self._logs: dict[str, WriteLog] = {}
        self.kept = 0

    def seen(
        self,
        held: Mapping[str, Sequence[Holder]],
        root_of: Mapping[str, str],
        *,
        at: float | None = None,
    ) -> None:
        """Lane processes hold each path of `held` (a shared-file incident's file) open for
        writing (`at`: when the probe sampled them); `root_of` names each holding namespace's
        root. Keep what changed."""
        now = time.monotonic()
        for path, holders in list(held.items())[:PER_REPORT]:
            if not holders or now - self._read_at.get(path, -1e9) < self.every:
                continue
            self._read_at[path] = now
            data = read_held(path, [h.holding for h in holders], sampled_at=at)
            if data is None:
                continue
            sha = hashlib.sha256(data).hexdigest()
            if self._last.get(path) == sha:
                continue
            self._last[path] = sha
            self._last.move_to_end(path)
            if len(self._last) > LAST:
                old, _ = self._last.popitem(last=False)
                self._read_at.pop(old, None)
            root = root_of.get(holders[0].namespace)
            if root:
                self._keep(root, path, data, sha, holders)

    def _keep(self, root: str, path: str, data: bytes, sha: str, holders: Sequence[Holder]) -> None:
        store = self._stores.get(root) or self._stores.setdefault(root, EvidenceStore(root))
        stored = 0 in store.put_many([(data, sha)])
        first = holders[0]
        one = len({(h.lane, h.holding.pid) for h in holders}) == 1
        entry = WriteEntry(
            path=path,
            time=time.time(),
            size=len(data),
            sha256=sha,
            stored=stored,
            pid=first.holding.pid,
            start_ticks=first.holding.start_ticks,
            identified=False,  # read while held: the writer is inferred, never known
            lane=first.lane if one else None,
            namespace=first.namespace if one else None,
            command=tuple(first.holding.command) if one else (),
            how=HELD_READ,
            event="read while held",
            held_by=tuple(dict.fromkeys(label(h) for h in holders)),
        )
        log = self._logs.get(root) or self._logs.setdefault(root, WriteLog(root))
        if log.append([entry]):
            self.kept += 1
