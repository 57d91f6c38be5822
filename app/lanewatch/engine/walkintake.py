"""The worker's walks: roots listed, stamps read and judged, namespaces walked (a queue of them,
`SCAN_CHUNK` between two looks at the event queue), and what a walk met read: the ledger's
new lines and the receipts. The disk side is `files/walk.py`; this turns it into events.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from lanewatch.engine.modelkeeper import LedgerState, ModelKeeper, NsFiles
from lanewatch.files import walk as scanner
from lanewatch.lanes.names import split_namespace_name
from lanewatch.lanes.stamp import LEDGER_FILE, META_DIR, STAMP_FILE, OwnerState
from lanewatch.linux import procid
from lanewatch.model import incidents as inc
from lanewatch.model import model as m
from lanewatch.model.views import Changes, HealthStatus, SourceHealth
from lanewatch.processes.prober import judge, judge_once

SCAN_CHUNK = 25  # namespaces walked between two looks at the event queue


class NamespaceWalks(ModelKeeper):
    def __init__(
        self,
        roots: Sequence[str],
        *,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        super().__init__(roots, deliver=deliver, on_applied=on_applied)
        self._scan_queue: deque[str] = deque()
        self._scan_pending: set[str] = set()
        self._scan_bare: set[str] = set()  # queued for counts only (ledger, receipts: later)

    # -- listing and walking -------------------------------------------------------------------
    def list_root(self, root: str) -> list[str] | None:
        """Phase 1 for one root: every namespace with its stamp (and owner verdict).

        None (and the root's health says why) when the root cannot be listed."""
        listing = scanner.list_root(root)
        if listing.error is not None:
            status = HealthStatus.MISSING if listing.missing else HealthStatus.DEGRADED
            self.health(SourceHealth(root, status.value, listing.error))
            self.emit(m.RootListed(root, frozenset()))
            return None
        keys = []
        now = time.time()
        known: dict[tuple[object, ...], object] = {}  # one kernel question per owner
        for name in listing.names:
            key = f"{root}/{name}"
            keys.append(key)
            self.emit(self._seen(root, name, key, now, known))
        self.emit(m.RootListed(root, frozenset(keys)))
        return keys

    def list_new(self, root: str) -> list[str]:
        """Namespaces of `root` not in the model yet (made while the watch was being set up)."""
        listing = scanner.list_root(root)
        now = time.time()
        keys = []
        known: dict[tuple[object, ...], object] = {}
        for name in listing.names:
            key = f"{root}/{name}"
            if key not in self.state.namespaces:
                keys.append(key)
                self.emit(self._seen(root, name, key, now, known))
        return keys

    @property
    def scanning(self) -> bool:
        return bool(self._scan_queue)

    def _seen(
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
        ev = None
        if read.stamp is not None:
            ev = judge_once(key, read.stamp, now, {} if known is None else known)
        return m.NamespaceSeen(key, root, name, read, ev)

    def queue_scan(self, keys: Iterable[str], *, counts_only: bool = False) -> None:
        """Queue walks. `counts_only`: files and bytes only, no size per path, ledger or
        receipts (the first walk: a full walk follows once the watches are set). A full walk
        asked for while a counting one waits replaces it."""
        pending, bare = self._scan_pending, self._scan_bare
        for key in keys:
            if not counts_only:
                bare.discard(key)
            elif key not in pending:
                bare.add(key)
            if key not in pending:
                pending.add(key)
                self._scan_queue.append(key)
                self.files.pop(key, None)  # stale until walked again

    def scan_some(self, limit: int = SCAN_CHUNK) -> bool:
        """Walk up to `limit` queued namespaces; True if more are queued."""
        bare = self._scan_bare
        for _ in range(min(limit, len(self._scan_queue))):
            key = self._scan_queue.popleft()
            self._scan_pending.discard(key)
            if bare and key in bare:
                bare.discard(key)
                self.scan_namespace(key, counts_only=True)
            else:
                self.scan_namespace(key)
        self.commit()
        return bool(self._scan_queue)

    def _unqueue(self, key: str) -> None:
        """`key` is walked now, out of turn: its queued walk is moot."""
        self._scan_pending.discard(key)
        self._scan_bare.discard(key)

    def scan_namespace(self, key: str, *, counts_only: bool = False) -> None:
        rec = self.state.namespaces.get(key)
        if rec is None:
            return
        if counts_only:
            self._count_namespace(key, rec)
            return
        s = scanner.scan_namespace(key)
        if s.vanished:
            self.emit(m.NamespaceGone(key))
            return
        self.files[key] = NsFiles(s.sizes, s.bytes)
        self.emit(m.Counted(key, s.files, s.bytes, s.last_write))
        if s.stamp_mtime != rec.stamp.mtime:  # changed while nobody watched: judge it too
            self._stamp(key, rec, time.time())
        if s.ledger is not None:
            self._ledger_lines(key, rec.root, s.ledger, LedgerState())
        for r in s.receipts:
            self._receipt(key, rec.root, rec.name, r)

    def _count_namespace(self, key: str, rec: m.NsRecord) -> None:
        """The first walk: files, bytes and the newest write. No size per path (incremental
        counts start with the walk after the watches, which keeps them), no ledger, no
        receipts (that walk reads them too)."""
        c = scanner.count_namespace(key)
        if c.vanished:
            self.emit(m.NamespaceGone(key))
            return
        self.emit(m.Counted(key, c.files, c.bytes, c.last_write))
        if c.stamp_mtime != rec.stamp.mtime:  # changed while nobody watched: judge it too
            self._stamp(key, rec, time.time())

    def rescan_root(self, root: str) -> None:
        self.stats["rescans"] += 1
        keys = self.list_root(root)
        self.commit()
        self.queue_scan(keys or ())

    def _stamp(self, key: str, rec: m.NsRecord, now: float) -> None:
        read = scanner.read_stamp_at(key)
        old, new = rec.owner, read.stamp
        alive = None
        released = False
        if (
            old is not None
            and new is not None
            and old.state is OwnerState.LIVE
            and inc.owner_key(old) != inc.owner_key(new)
        ):
            if old.host == self.host:
                alive, _ = procid.liveness(
                    procid.ProcessIdentity(old.pid, old.start_ticks, old.boot_id)
                )
            st = self.catch_up_ledger(key, rec.root)
            released = st.releases.get(old.pid, 0.0) >= old.started_at - 1.0
        ev = judge(key, new, now) if new is not None else None
        path = os.path.join(key, META_DIR, STAMP_FILE)
        self.emit(m.StampChanged(key, read, now, alive, released, ev, path=path))

    # -- ledger and receipts -------------------------------------------------------------------
    def _ledger_lines(self, key: str, root: str, read: scanner.LedgerRead, st: LedgerState) -> None:
        st.offset, st.inode = read.offset, read.inode
        self.ledgers[key] = st
        path = os.path.join(key, META_DIR, LEDGER_FILE)
        for line in read.lines:
            event, pid, t = line.get("event"), line.get("pid"), line.get("time")
            if event in inc.RELEASE_EVENTS and isinstance(pid, int) and isinstance(t, int | float):
                st.releases[pid] = max(float(t), st.releases.get(pid, 0.0))
                if len(st.releases) > 64:
                    st.releases.pop(next(iter(st.releases)))
            obs = inc.refused_claim(key, line, path)
            if obs is not None:
                self.emit(m.Observed(obs, root))

    def catch_up_ledger(self, key: str, root: str) -> LedgerState:
        st = self.ledgers.get(key) or LedgerState()
        path = os.path.join(key, META_DIR, LEDGER_FILE)
        self._ledger_lines(key, root, scanner.read_ledger(path, st.offset, st.inode), st)
        return st

    def _receipt(self, key: str, root: str, name: str, r: scanner.ReceiptRead) -> None:
        self.history.record(r.path, r.mtime, r.size, r.sha256)
        split = split_namespace_name(name)
        rec = self.state.namespaces.get(key)
        own = split[0] if split else (rec.owner.checkout_id if rec and rec.owner else None)
        if own is None:
            return
        obs = inc.foreign_receipt(
            key, own, r.path, r.data, mtime=r.mtime, size=r.size, sha256=r.sha256
        )
        if obs is not None:
            self.emit(m.Observed(obs, root))
