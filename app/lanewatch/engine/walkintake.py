"""The engine's walks: roots listed, stamps read and judged, namespaces walked (a queue of them,
`SCAN_CHUNK` between two looks at the event queue), and what a walk met read: the ledger's
new lines and the receipts. The disk side is `files/walk.py`; this turns it into model events
and hands them back (`intake.Found`); the model keeper applies them.

The tail's readers are these too (`stamp_changed`, `catch_up_ledger`, `receipt`, `seen`):
a write the tail saw is read exactly as a walk would read it.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from lanewatch.engine.intake import DiskMemo, Found, LedgerState, Namespaces, NsFiles
from lanewatch.engine.stampversions import sha256
from lanewatch.files import walk as scanner
from lanewatch.files.treecount import TreeCount
from lanewatch.lanes.names import split_namespace_name
from lanewatch.lanes.stamp import LEDGER_FILE, META_DIR, STAMP_FILE, OwnerState
from lanewatch.linux import procid
from lanewatch.model import model as m
from lanewatch.model.detectors.takeover import owner_key
from lanewatch.model.facts import LedgerLine, ReceiptFound
from lanewatch.model.incidents import RELEASE_EVENTS
from lanewatch.model.kinds import detect
from lanewatch.model.views import HealthStatus, SourceHealth
from lanewatch.processes.prober import judge, judge_once, shared_table

SCAN_CHUNK = 25  # namespaces walked between two looks at the event queue


class WalkIntake:
    def __init__(self, *, namespaces: Namespaces, memo: DiskMemo, host: str) -> None:
        """`namespaces`: the model as applied so far (read only); `memo`: sizes and ledger
        offsets it keeps up to date; `host`: this host's name (an owner here is asked about)."""
        self._namespaces = namespaces
        self.memo = memo
        self.host = host
        self._scan_queue: deque[str] = deque()
        self._scan_pending: set[str] = set()
        self._scan_bare: set[str] = set()  # queued for counts only (ledger, receipts: later)
        self._batch: dict[tuple[object, ...], object] | None = None  # `one_table`'s judgements
        self._counting: dict[str, TreeCount] = {}  # the first walk's finds, per root
        self.counted_by_find = 0  # namespaces the first walk took from find's counts

    @contextmanager
    def one_table(self) -> Iterator[None]:
        """The owners judged meanwhile (lanes seen, stamps rewritten) share one read of the
        process table and one verdict per owner, as a listing's do (`list_root`). The tail's
        batch is one: a read of /proc per lane made each new lane cost a read of every
        process's stat, and on a loaded machine a batch with many new lanes took longer than
        the lanes took to come, so each batch was longer than the last and nothing reached
        the picture meanwhile. A process newer than the table is asked itself (`liveness`)."""
        self._batch = {}
        try:
            yield
        finally:
            self._batch = None

    # -- listing -------------------------------------------------------------------------------
    def list_root(self, root: str, *, count: bool = False) -> tuple[list[str] | None, Found]:
        """Phase 1 for one root: every namespace with its stamp (and owner verdict).

        Keys None (and the root's health says why) when the root cannot be listed. `count`:
        the first picture's; its namespaces are counted by `find` on another core meanwhile
        (`files.treecount`), and the counting walk (`queue(counts_only=True)`) reads that."""
        out = Found()
        listing = scanner.list_root(root)
        if listing.error is not None:
            status = HealthStatus.MISSING if listing.missing else HealthStatus.DEGRADED
            out.emit(m.HealthChanged(SourceHealth(root, status.value, listing.error)))
            out.emit(m.RootListed(root, frozenset()))
            return None, out
        if count and root not in self._counting:
            self._counting[root] = TreeCount(root, listing.names)
        keys = []
        now = time.time()
        known: dict[tuple[object, ...], object] = {}  # one kernel question per owner
        for name in listing.names:
            key = f"{root}/{name}"
            keys.append(key)
            out.emit(self.seen(root, name, key, now, known))
        out.emit(m.RootListed(root, frozenset(keys)))
        return keys, out

    def list_new(self, root: str) -> tuple[list[str], Found]:
        """Namespaces of `root` not in the model yet (made while the watch was being set up)."""
        out = Found()
        listing = scanner.list_root(root)
        now = time.time()
        keys = []
        known: dict[tuple[object, ...], object] = {}
        namespaces = self._namespaces()
        for name in listing.names:
            key = f"{root}/{name}"
            if key not in namespaces:
                keys.append(key)
                out.emit(self.seen(root, name, key, now, known))
        return keys, out

    def seen(
        self,
        root: str,
        name: str,
        key: str,
        now: float,
        known: dict[tuple[object, ...], object] | None = None,
    ) -> m.NamespaceSeen:
        """A namespace found: its stamp and the owner's verdict. Callers listing many pass one
        `known` to all, so 1,000 lanes of four owners ask the kernel four times."""
        read = scanner.read_stamp_at(key)
        self.memo.stamps.read(key, read, now)  # the first read: the namespace's baseline
        ev = None
        if known is None:
            known = {} if self._batch is None else self._batch
        if read.stamp is not None:
            ev = judge_once(key, read.stamp, now, known)
        return m.NamespaceSeen(key, root, name, read, ev)

    # -- the walk queue ------------------------------------------------------------------------
    @property
    def scanning(self) -> bool:
        return bool(self._scan_queue)

    def queue(self, keys: Iterable[str], *, counts_only: bool = False) -> None:
        """Queue walks. `counts_only`: files and bytes only, no size per path, ledger or
        receipts (the first walk: a full walk follows once the watches are set). A full walk
        asked for while a counting one waits replaces it."""
        pending, bare, files = self._scan_pending, self._scan_bare, self.memo.files
        for key in keys:
            if not counts_only:
                bare.discard(key)
            elif key not in pending:
                bare.add(key)
            if key not in pending:
                pending.add(key)
                self._scan_queue.append(key)
                files.pop(key, None)  # stale until walked again

    def walk_some(self, limit: int = SCAN_CHUNK) -> tuple[bool, Found]:
        """Walk up to `limit` queued namespaces (all read against the same applied model: the
        keeper applies what they found together); True if more are queued."""
        out = Found()
        bare = self._scan_bare
        for _ in range(min(limit, len(self._scan_queue))):
            key = self._scan_queue.popleft()
            self._scan_pending.discard(key)
            if bare and key in bare:
                bare.discard(key)
                self._walk(key, out, counts_only=True)
            else:
                self._walk(key, out)
        if not self._scan_queue:
            self.close_counts()  # the first walk is done: what find did not count, was walked
        return bool(self._scan_queue), out

    def cancel_counts(self) -> None:
        """Stop the first walk's finds (from any thread: the engine stops)."""
        for tc in list(self._counting.values()):
            tc.cancel()

    def close_counts(self) -> None:
        for tc in self._counting.values():
            tc.close()
        self._counting.clear()

    def unqueue(self, key: str) -> None:
        """`key` is walked now, out of turn: its queued walk is moot."""
        self._scan_pending.discard(key)
        self._scan_bare.discard(key)

    # -- walking -------------------------------------------------------------------------------
    def walk(self, key: str) -> Found:
        """One namespace walked now (it arrived, or was recreated): sizes, ledger, receipts."""
        out = Found()
        self._walk(key, out)
        return out

    def _walk(self, key: str, out: Found, *, counts_only: bool = False) -> None:
        rec = self._namespaces().get(key)
        if rec is None:
            return
        if counts_only:
            self._count(key, rec, out)
            return
        s = scanner.scan_namespace(key)
        if s.vanished:
            out.emit(m.NamespaceGone(key))
            return
        self.memo.files[key] = NsFiles(s.sizes, s.bytes, s.usage)
        out.emit(m.Counted(key, s.files, s.bytes, s.last_write, s.allocated))
        if s.stamp_mtime != rec.stamp.mtime:  # changed while nobody watched: judge it too
            self.stamp_changed(key, rec, time.time(), out)
        if s.ledger is not None:
            self._ledger_lines(key, rec.root, s.ledger, LedgerState(), out)
        for r in s.receipts:
            self.receipt(key, rec.root, rec.name, r, out)

    def _count(self, key: str, rec: m.NsRecord, out: Found) -> None:
        """The first walk: files, bytes and the newest write. No size per path (incremental
        counts start with the walk after the watches, which keeps them), no ledger, no
        receipts (that walk reads them too)."""
        tc = self._counting.get(rec.root)
        c = None if tc is None else tc.counts().pop(rec.name, None)
        if c is None:
            c = scanner.count_namespace(key)
        else:
            self.counted_by_find += 1
        if c.vanished:
            out.emit(m.NamespaceGone(key))
            return
        out.emit(m.Counted(key, c.files, c.bytes, c.last_write, c.allocated))
        if c.stamp_mtime != rec.stamp.mtime:  # changed while nobody watched: judge it too
            self.stamp_changed(key, rec, time.time(), out)

    def stamp_changed(self, key: str, rec: m.NsRecord, now: float, out: Found) -> None:
        """The stamp was rewritten (or removed): read it and judge the new owner. An owner
        replaced while live is asked about (if it is of this host) and looked up in the ledger
        (a release written before the handover)."""
        read = scanner.read_stamp_at(key)
        old, new = rec.owner, read.stamp
        alive = None
        released = False
        if (
            old is not None
            and new is not None
            and old.state is OwnerState.LIVE
            and owner_key(old) != owner_key(new)
        ):
            if old.host == self.host:
                alive, _ = procid.liveness(
                    procid.ProcessIdentity(old.pid, old.start_ticks, old.boot_id)
                )
            st = self.catch_up_ledger(key, rec.root, out)
            released = st.releases.get(old.pid, 0.0) >= old.started_at - 1.0
            if not released:  # the stamp before and this one: the takeover's evidence
                self.memo.stamps.keep_replaced(rec.root, key, read, now)
        self.memo.stamps.read(key, read, now)
        table = None if self._batch is None else shared_table(self._batch)
        ev = judge(key, new, now, table) if new is not None else None
        path = os.path.join(key, META_DIR, STAMP_FILE)
        sha = sha256(read.data) if read.data is not None else None
        out.emit(m.StampChanged(key, read, now, alive, released, ev, sha256=sha, path=path))

    # -- ledger and receipts -------------------------------------------------------------------
    def _ledger_lines(
        self, key: str, root: str, read: scanner.LedgerRead, st: LedgerState, out: Found
    ) -> None:
        st.offset, st.inode = read.offset, read.inode
        self.memo.ledgers[key] = st
        path = os.path.join(key, META_DIR, LEDGER_FILE)
        for line in read.lines:
            event, pid, t = line.get("event"), line.get("pid"), line.get("time")
            if event in RELEASE_EVENTS and isinstance(pid, int) and isinstance(t, int | float):
                st.releases[pid] = max(float(t), st.releases.get(pid, 0.0))
                if len(st.releases) > 64:
                    st.releases.pop(next(iter(st.releases)))
            for obs in detect(LedgerLine(key, line, path)):
                out.emit(m.Observed(obs, root))

    def catch_up_ledger(self, key: str, root: str, out: Found) -> LedgerState:
        """The ledger's lines since the last read (from where it was read up to)."""
        st = self.memo.ledgers.get(key) or LedgerState()
        path = os.path.join(key, META_DIR, LEDGER_FILE)
        self._ledger_lines(key, root, scanner.read_ledger(path, st.offset, st.inode), st, out)
        return st

    def receipt(self, key: str, root: str, name: str, r: scanner.ReceiptRead, out: Found) -> None:
        self.memo.history.record(r.path, r.mtime, r.size, r.sha256)
        split = split_namespace_name(name)
        rec = self._namespaces().get(key)
        own = split[0] if split else (rec.owner.checkout_id if rec and rec.owner else None)
        if own is None:
            return
        fact = ReceiptFound(key, own, r.path, r.data, r.mtime, r.size, r.sha256)
        for obs in detect(fact):
            out.emit(m.Observed(obs, root))
