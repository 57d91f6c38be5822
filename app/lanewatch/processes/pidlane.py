"""Which lane a writing pid belongs to: quickly, and never by a reused pid.

`PidLanes.resolve(pid, pidfd, window)` is called on the fanotify reader for each event, while
the event's pidfd is open. The writer's lane is known, in this order, because it is

1. a lane's owner process: the stamp's `pid` (`lanewatch run`) or `child_pid` (its command),
   matched by pid *and* start ticks;
2. bound by its environment: `$LANEWATCH_NAMESPACE` (or a unique `$LANEWATCH_LANE`) as
   passed to `execve` (`/proc/PID/environ`);
3. a descendant of an owner process (ancestry by ppid, each ancestor matched by pid and
   start ticks), or a member of the owner's process group.

Otherwise it is "no lane". What we read about a process is cached by (pid, start ticks), so a
process seen again costs one read of `/proc/PID/stat`, and a reused pid (a new start time) is a
new entry. The pidfd proves that `/proc/PID` is the writer: while it is open the pid cannot be
reused, and after reading we check the process had not been reaped meanwhile.

A writer already reaped when its event is read is known by the kernel's process connector
where it can be used (`processes/proclives.py`, root): the one process that held the pid
between the window's start and now, with its start time and its parent. It is credited to a
process we saw alive, or a stamp names, with that pid and start time; else to the lane of its
nearest ancestor we can identify (alive now with the same start time, or seen alive), by the
same rules as a live writer's. Without the connector (or where its record has a gap), a known
process is credited only when the pid allocator proves no other process can have held that
pid since (`processes/pidclock`). Otherwise it is "unknown pid". Never a guess.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

from lanewatch.lanes.stamp import OwnerState, Stamp
from lanewatch.linux.paths import is_below
from lanewatch.linux.proc import ProcStat, environ_values, pidfd_alive, read_file, read_stat
from lanewatch.model.family import file_ids
from lanewatch.processes.checkoutgit import git_common_dir
from lanewatch.processes.pidclock import CLK_TCK, Mark, PidClock, boottime
from lanewatch.processes.proclives import Life, ProcLives, monotonic_to_boottime

CACHE_SIZE = 4096  # processes remembered
RECHECK_ENV = 10.0  # seconds: re-read the environment of a process seen again after this
OWNER_MEMORY = 600.0  # seconds an owner is remembered after its stamp stops naming it
# ... and after its namespace left the model (cleared, removed): no stamp will name it again,
# only writes already queued may still need it. Without this, a reaper clearing lanes as fast
# as they are made kept every owner of the last 10 minutes.
GONE_MEMORY = 60.0
RECHECK_SAME = 60.0  # seconds: an unchanged list is gone through again (well inside OWNER_MEMORY)
MAX_DEPTH = 64  # ancestors walked
GONE_SUFFIX = "; exited before we read the event, pid not reused since"
_LANE_KEY = b"LANEWATCH_LANE="
_NS_KEY = b"LANEWATCH_NAMESPACE="


@dataclass(frozen=True, slots=True)
class OwnerId:
    """One lane's owner processes, from its stamp."""

    key: str  # namespace key
    root: str
    lane: str
    checkout_id: str
    checkout_path: str
    pid: int
    start_ticks: int
    child_pid: int | None = None
    child_start_ticks: int | None = None
    pgid: int | None = None
    live: bool = True
    command: tuple[str, ...] = ()  # the stamp's command
    git_common_dir: str | None = None  # of the checkout's repository (processes.checkoutgit)
    family: str | None = None  # the stamp's family: its head's folder name (`model/family.py`)
    handed: frozenset[tuple[int, int]] | None = None  # the stamp's stdio (`model/family.py`)

    def identities(self) -> list[tuple[int, int]]:
        out = [(self.pid, self.start_ticks)]
        if self.child_pid and self.child_start_ticks:
            out.append((self.child_pid, self.child_start_ticks))
        return out


def owner_of(key: str, root: str, s: Stamp) -> OwnerId:
    return OwnerId(
        key=key,
        root=root,
        lane=s.lane,
        checkout_id=s.checkout_id,
        checkout_path=s.checkout_path,
        pid=s.pid,
        start_ticks=s.start_ticks,
        child_pid=s.child_pid,
        child_start_ticks=s.child_start_ticks,
        pgid=s.pgid,
        live=s.state is OwnerState.LIVE,
        command=tuple(s.command),
        git_common_dir=git_common_dir(s.checkout_path),
        family=s.family,
        handed=file_ids(s.stdio),
    )


@dataclass(frozen=True, slots=True)
class Writer:
    """Who wrote, as far as it can be known. `identified`: the process behind the pid is
    known for sure (else `how` says why not, and there is no lane)."""

    pid: int
    start_ticks: int | None
    identified: bool
    lane: str | None = None
    namespace: str | None = None  # the writer's namespace key
    root: str | None = None  # the root of that namespace, when it is one of ours
    checkout_id: str | None = None
    checkout_path: str | None = None
    command: tuple[str, ...] = ()
    how: str = ""
    owner_pid: int | None = None  # its lane's `lanewatch run` (for stdio handed to the lane)
    owner: bool = False  # it is its lane's `lanewatch run` or that one's command
    git_common_dir: str | None = None  # of its lane's checkout's repository
    family: str | None = None  # its lane's stamp's family (`model/family.py`)
    handed: frozenset[tuple[int, int]] | None = None  # its lane's stamp's stdio, if recorded
    runner: bool = False  # its lane's owner is a `lanewatch run` (it started a command)

    @property
    def label(self) -> str:
        cmd = " ".join(self.command)[:120]
        if not self.identified:
            return f"pid {self.pid} ({self.how})"
        who = f"lane {self.lane}" if self.lane else "no lane"
        return f"pid {self.pid} ({who}): {cmd}" if cmd else f"pid {self.pid} ({who})"


@dataclass(slots=True)
class _Proc:
    pid: int
    start_ticks: int
    ppid: int
    pgid: int
    command: tuple[str, ...]
    lane_env: str | None
    ns_env: str | None
    lineage: tuple[tuple[int, int], ...]  # (pid, start ticks) of parent, grandparent, ...
    seen_at: float  # boottime of the last sighting
    read_at: float  # boottime the environment was read
    # What `_writer` made of it, and for which version of the owners: a process seen again
    # while the owners are unchanged is the same writer (no lookups, no new object).
    writer: Writer | None = None
    writer_version: int = -1


@dataclass
class Owners:
    """Every owner we know of, by identity; remembered a while after their stamp moved on."""

    by_identity: dict[tuple[int, int], OwnerId] = field(default_factory=dict)
    by_key: dict[str, OwnerId] = field(default_factory=dict)
    last_seen: dict[tuple[int, int], float] = field(default_factory=dict)
    version: int = 0
    # Indexes rebuilt when the owners change: a writer is checked in O(1), not O(owners).
    by_pid: dict[int, list[tuple[tuple[int, int], OwnerId]]] = field(default_factory=dict)
    live_by_pgid: dict[int, list[OwnerId]] = field(default_factory=dict)
    live_by_lane: dict[str, list[OwnerId]] = field(default_factory=dict)
    # The list given last and when it was gone through: the same list object again (the
    # engine's owners unchanged) is gone through only every RECHECK_SAME seconds.
    _last: object = None
    _full_at: float = float("-inf")

    def update(self, owners: Sequence[OwnerId], now: float, complete: bool = True) -> None:
        """`complete`: `owners` is every owner the engine knows (else a few new stamps): an
        owner whose namespace none of them names is forgotten after GONE_MEMORY."""
        if complete and owners is self._last and now - self._full_at < RECHECK_SAME:
            return  # nothing new; their sightings are refreshed at the next full pass
        if complete:
            self._last, self._full_at = owners, now
        changed = False
        for o in owners:
            known = self.by_key.get(o.key)
            if known is not o and known != o:
                self.by_key[o.key] = o
                changed = True
            for ident in o.identities():
                known = self.by_identity.get(ident)
                if known is not o and known != o:
                    self.by_identity[ident] = o
                    changed = True
                self.last_seen[ident] = now
        named = {o.key for o in owners} if complete else None
        for ident, t in list(self.last_seen.items()):
            known = self.by_identity.get(ident)
            left = named is not None and known is not None and known.key not in named
            if now - t > (GONE_MEMORY if left else OWNER_MEMORY):
                del self.last_seen[ident]
                gone = self.by_identity.pop(ident, None)
                if gone is not None and self.by_key.get(gone.key) == gone:
                    del self.by_key[gone.key]
                changed = True
        if changed:
            self.version += 1
            self._index()

    def _index(self) -> None:
        self.by_pid = {}
        for ident, o in self.by_identity.items():
            self.by_pid.setdefault(ident[0], []).append((ident, o))
        self.live_by_pgid, self.live_by_lane = {}, {}
        for o in self.by_key.values():  # in the order the owners came, as the scans were
            if o.live:
                if o.pgid is not None:
                    self.live_by_pgid.setdefault(o.pgid, []).append(o)
                self.live_by_lane.setdefault(o.lane, []).append(o)


class PidLanes:
    """The resolver. `resolve` runs on the fanotify reader; `set_owners` from any thread."""

    def __init__(
        self,
        clock: PidClock,
        roots: Iterable[str],
        *,
        pidfds: bool,
        lives: ProcLives | None = None,
    ) -> None:
        self.clock = clock
        self.lives = lives  # every fork and exit (root), for writers reaped before we read
        self.roots = [r.rstrip("/") for r in roots]
        self.pidfds = pidfds
        self.owners = Owners()
        self._owners_lock = threading.Lock()
        self._lock = threading.RLock()  # the reader resolves; the attribution thread retries
        self._procs: OrderedDict[tuple[int, int], _Proc] = OrderedDict()
        self._by_ino: OrderedDict[tuple[int, int], _Proc] = OrderedDict()  # (pid, pidfs inode)
        self.pidfs = _has_pidfs()
        self._by_pid: dict[int, set[int]] = {}
        self.stats = {"hits": 0, "reads": 0, "gone": 0, "credited": 0, "unknown": 0, "lives": 0}

    # -- owners ---------------------------------------------------------------------------
    def set_owners(self, owners: Iterable[OwnerId], complete: bool = True) -> None:
        """`complete`: every owner the engine knows now; False: only some stamps just seen."""
        with self._owners_lock:
            given = owners if isinstance(owners, (list, tuple)) else list(owners)
            self.owners.update(given, boottime(), complete)

    def _root_of(self, key: str) -> str | None:
        return next((r for r in self.roots if is_below(key, r)), None)

    # -- resolving ------------------------------------------------------------------------
    def resolve(self, pid: int, pidfd: int, window: Mark | None) -> Writer:
        """The writer of an event read just now (call while its pidfd is open)."""
        with self._lock:
            return self._resolve(pid, pidfd, window)

    def _resolve(self, pid: int, pidfd: int, window: Mark | None) -> Writer:
        if pid <= 0:
            return Writer(pid, None, False, how="writer outside our pid namespace")
        if self.pidfds and pidfd < 0:
            return self.resolve_gone(pid, window)
        ino = _pidfs_ino(pidfd) if self.pidfs and pidfd >= 0 else None
        if ino is not None:
            hit = self._by_ino.get((pid, ino))
            if hit is not None and boottime() - hit.read_at <= RECHECK_ENV:
                # The pidfd names this very process (pidfs inodes are never reused): no /proc.
                self.stats["hits"] += 1
                hit.seen_at = boottime()
                return self._writer(hit)
        try:
            st = read_stat(pid)
        except OSError:
            st = None
        if st is None:
            return self.resolve_gone(pid, window)
        proc = self._cached(pid, st.start_ticks)
        if proc is None:
            proc = self._read(pid, st)
            if proc is None:
                return self.resolve_gone(pid, window)
        now = boottime()
        if pidfd >= 0:
            if not pidfd_alive(pidfd):  # reaped while we read: what we read may be another's
                return self.resolve_gone(pid, window)
        elif not self.clock.proves(pid, proc.start_ticks, window, seen_at=now):
            return Writer(pid, None, False, how="pid may have been reused before we read it")
        proc.seen_at = now
        self._remember(proc)
        if ino is not None:
            self._by_ino[(pid, ino)] = proc
            self._by_ino.move_to_end((pid, ino))
            if len(self._by_ino) > CACHE_SIZE:
                self._by_ino.popitem(last=False)
        return self._writer(proc)

    def resolve_gone(self, pid: int, window: Mark | None) -> Writer:
        """A writer reaped before we read its event: credited only to a process the pid
        allocator proves was the only holder of that pid since before the write."""
        with self._lock:
            return self._resolve_gone(pid, window)

    def _resolve_gone(self, pid: int, window: Mark | None) -> Writer:
        self.stats["gone"] += 1
        by_lives = self._by_lives(pid, window)
        if by_lives is not None:
            self.stats["lives" if by_lives.identified else "unknown"] += 1
            return by_lives
        now = self.clock.sample()
        found: dict[int, Writer] = {}
        for start in list(self._by_pid.get(pid, ())):
            proc = self._procs.get((pid, start))
            if proc is not None and self.clock.proves(
                pid, start, window, seen_at=proc.seen_at, now=now
            ):
                found[start] = self._writer(proc, gone=True)
        with self._owners_lock:
            owners = list(self.owners.by_pid.get(pid, ()))
        for (p, start), o in owners:
            if start not in found and self.clock.proves(p, start, window, now=now):
                role = "command" if p == o.child_pid else "owner"
                how = (
                    f"its lane's {role} per the stamp;"
                    " exited before we read the event, pid not reused since"
                )
                found[start] = self._owner_writer(o, p, start, how)
        if len(found) == 1:
            self.stats["credited"] += 1
            return next(iter(found.values()))
        self.stats["unknown"] += 1
        return Writer(pid, None, False, how="exited before it could be identified: unknown pid")

    # -- reaped writers, by the process connector ----------------------------------------
    def _by_lives(self, pid: int, window: Mark | None) -> Writer | None:
        """The reaped writer as the process connector knows it: None when its record cannot
        tell (not running, a gap, a process older than it we never saw): then the pid clock."""
        lives = self.lives
        if lives is None or not lives.available or window is None:
            return None
        offset = monotonic_to_boottime()
        whole, life = lives.only_life(pid, window.time - offset, time.monotonic())
        if not whole:
            return None
        if life is None:
            how = "exited before it could be identified: several processes held its pid"
            return Writer(pid, None, False, how=how)
        if life.born == float("-inf"):
            proc = self._seen_since(pid, lives.whole_from + offset)
            return self._writer(proc, gone=True) if proc is not None else None
        ticks = life.start_ticks(offset)
        if any(
            x is not life and abs(x.start_ticks(offset) - ticks) <= 1 for x in lives.lives_of(pid)
        ):
            return Writer(pid, None, False, how="exited before it could be identified: pid reused")
        known = self._known(pid, ticks)
        if known is not None:
            return known
        return self._by_ancestor(pid, ticks, life, offset, lives)

    def _known(self, pid: int, ticks: int) -> Writer | None:
        """A process we saw alive, or a stamp names, with this pid and start time (to a tick:
        the connector's clock and /proc's differ by microseconds, which may cross a tick)."""
        suffix = "; exited before we read the event (process connector)"
        for start in sorted(self._by_pid.get(pid, ()), key=lambda s: abs(s - ticks)):
            proc = self._procs.get((pid, start))
            if proc is not None and abs(start - ticks) <= 1:
                w = self._writer(proc, gone=True)
                return replace(w, how=w.how.replace(GONE_SUFFIX, "") + suffix)
        with self._owners_lock:
            owners = list(self.owners.by_pid.get(pid, ()))
        for (p, start), o in owners:
            if abs(start - ticks) <= 1:
                what = "command" if p == o.child_pid else "owner"
                return self._owner_writer(o, p, start, f"its lane's {what} per the stamp{suffix}")
        return None

    def _owner_writer(self, o: OwnerId, pid: int, start: int, how: str) -> Writer:
        return Writer(
            pid,
            start,
            True,
            o.lane,
            o.key,
            self._root_of(o.key),
            o.checkout_id,
            o.checkout_path,
            o.command,
            how=how,
            owner_pid=o.pid,
            owner=True,
            git_common_dir=o.git_common_dir,
            **_lane_facts(o),
        )

    def _seen_since(self, pid: int, since: float) -> _Proc | None:
        """A process older than our record that held `pid` the whole time since: the one we
        saw alive with that pid after the record began (boottime `since`; no fork of the pid
        since, so nobody else can have held it)."""
        seen = [
            proc
            for start in self._by_pid.get(pid, ())
            if (proc := self._procs.get((pid, start))) is not None and proc.seen_at >= since
        ]
        return seen[0] if len(seen) == 1 else None

    def _by_ancestor(
        self, pid: int, ticks: int, life: Life, offset: float, lives: ProcLives
    ) -> Writer:
        """The lane of the nearest ancestor we can identify at the writer's birth."""
        unknown = Writer(pid, ticks, False, how="exited before it could be identified: unknown pid")
        chain = []
        parent, at = life.parent, life.born
        for _ in range(MAX_DEPTH):
            if parent <= 0:
                return unknown
            whole, plife = lives.only_life(parent, at, at)
            if not whole or plife is None:
                return unknown
            proc = self._ancestor_proc(parent, plife, offset, lives)
            chain.append(parent)
            if proc is not None:
                with self._owners_lock:
                    found = _lane(proc, self.owners)
                if found is None:
                    how = (
                        f"exited before it could be identified: its parent pid {parent} has no lane"
                    )
                    return Writer(pid, ticks, False, how=how)
                o, key, lane, how, _own = found
                via = f", descending from pid {parent}" if len(chain) > 1 else ""
                return self._lane_writer(
                    pid,
                    ticks,
                    o,
                    key,
                    lane,
                    (f"[exited child of pid {chain[0]}]",),
                    f"a child of pid {chain[0]}{via} ({how}); "
                    "exited before we read the event (process connector)",
                )
            if plife.born == float("-inf"):
                return unknown  # an older process, gone, never seen: its lane is not known
            parent, at = plife.parent, plife.born
        return unknown

    def _ancestor_proc(self, pid: int, life: Life, offset: float, lives: ProcLives) -> _Proc | None:
        """The ancestor `pid` (its life `life`) as a process we can judge: seen alive with
        that start time, or alive now with it; None if it is gone and was never seen."""
        if life.born == float("-inf"):
            seen = self._seen_since(pid, lives.whole_from + offset)
            if seen is not None:
                return seen
            try:
                alive = read_stat(pid)
            except OSError:
                return None
            if alive is None or alive.start_ticks / CLK_TCK > lives.whole_from + offset:
                return None  # born since the record began, yet no fork of it: not that one
            return self._cached(pid, alive.start_ticks) or self._read(pid, alive)
        ticks = life.start_ticks(offset)
        for start in self._by_pid.get(pid, ()):
            proc = self._procs.get((pid, start))
            if proc is not None and abs(start - ticks) <= 1:
                return proc
        if life.ended is not None:
            return None
        try:
            alive = read_stat(pid)
        except OSError:
            return None
        if alive is None or abs(alive.start_ticks - ticks) > 1:
            return None
        proc = self._cached(pid, alive.start_ticks) or self._read(pid, alive)
        if proc is not None:
            self._remember(proc)
        return proc

    # -- cache ----------------------------------------------------------------------------
    def _cached(self, pid: int, start: int) -> _Proc | None:
        proc = self._procs.get((pid, start))
        if proc is None or boottime() - proc.read_at > RECHECK_ENV:
            return None
        self._procs.move_to_end((pid, start))
        self.stats["hits"] += 1
        return proc

    def _remember(self, proc: _Proc) -> None:
        key = (proc.pid, proc.start_ticks)
        self._procs[key] = proc
        self._procs.move_to_end(key)
        self._by_pid.setdefault(proc.pid, set()).add(proc.start_ticks)
        while len(self._procs) > CACHE_SIZE:
            (old_pid, old_start), _ = self._procs.popitem(last=False)
            starts = self._by_pid.get(old_pid)
            if starts is not None:
                starts.discard(old_start)
                if not starts:
                    del self._by_pid[old_pid]

    def _read(self, pid: int, st: ProcStat) -> _Proc | None:
        self.stats["reads"] += 1
        try:
            env = read_file(pid, "environ")
            raw = read_file(pid, "cmdline")
        except OSError:
            env, raw = b"", b""  # a zombie, or not readable: the ancestry may still tell
        if env is None or raw is None:
            return None  # gone
        lane, ns = environ_values(env, _LANE_KEY, _NS_KEY)
        ns = ns.rstrip("/") if ns is not None else None
        command = tuple(os.fsdecode(a) for a in raw.split(b"\0") if a) or (f"[{st.comm}]",)
        now = boottime()
        lineage = _lineage(st)
        return _Proc(pid, st.start_ticks, st.ppid, st.pgid, command, lane, ns, lineage, now, now)

    # -- deciding -------------------------------------------------------------------------
    def _writer(self, proc: _Proc, *, gone: bool = False) -> Writer:
        with self._owners_lock:
            owners = self.owners
            if not gone and proc.writer is not None and proc.writer_version == owners.version:
                return proc.writer
            version = owners.version
            found = _lane(proc, owners)
        writer = self._make_writer(proc, found, gone)
        if not gone:
            proc.writer, proc.writer_version = writer, version
        return writer

    def _make_writer(
        self,
        proc: _Proc,
        found: tuple[OwnerId | None, str, str, str, bool] | None,
        gone: bool,
    ) -> Writer:
        suffix = GONE_SUFFIX if gone else ""
        if found is None:
            return Writer(proc.pid, proc.start_ticks, True, command=proc.command, how="no lane")
        o, key, lane, how, is_owner = found
        return self._lane_writer(
            proc.pid, proc.start_ticks, o, key, lane, proc.command, how + suffix, owner=is_owner
        )

    def _lane_writer(
        self,
        pid: int,
        ticks: int,
        o: OwnerId | None,
        key: str,
        lane: str,
        command: tuple[str, ...],
        how: str,
        owner: bool = False,
    ) -> Writer:
        """An identified writer in `lane` (namespace `key`), with what its lane's owner `o`
        says of the checkout and the lane."""
        return Writer(
            pid,
            ticks,
            True,
            lane,
            key,
            self._root_of(key),
            o.checkout_id if o else None,
            o.checkout_path if o else None,
            command,
            how=how,
            owner_pid=o.pid if o else None,
            owner=owner,
            git_common_dir=o.git_common_dir if o else None,
            **_lane_facts(o),
        )


def _lane(proc: _Proc, owners: Owners) -> tuple[OwnerId | None, str, str, str, bool] | None:
    """(owner, namespace key, lane, how, is an owner process) or None for no lane."""
    by_identity, by_key = owners.by_identity, owners.by_key
    own = by_identity.get((proc.pid, proc.start_ticks))
    if own is not None:
        what = "command" if proc.pid == own.child_pid else "owner (lanewatch run)"
        return own, own.key, own.lane, f"its lane's {what} per the stamp", True
    if proc.ns_env:
        o = by_key.get(proc.ns_env)
        lane = o.lane if o else proc.lane_env or proc.ns_env.rsplit("/", 1)[-1]
        return o, proc.ns_env, lane, "$LANEWATCH_NAMESPACE", False
    for ancestor in proc.lineage:
        o = by_identity.get(ancestor)
        if o is not None:
            return o, o.key, o.lane, f"descends from its lane's pid {ancestor[0]}", False
    for o in owners.live_by_pgid.get(proc.pgid, ()):
        return o, o.key, o.lane, f"in its lane's process group {o.pgid}", False
    if proc.lane_env:
        matches = owners.live_by_lane.get(proc.lane_env, [])
        if len(matches) == 1:
            o = matches[0]
            return o, o.key, o.lane, "$LANEWATCH_LANE", False
    return None


class _LaneFacts(TypedDict, total=False):
    family: str | None
    handed: frozenset[tuple[int, int]] | None
    runner: bool


def _lane_facts(o: OwnerId | None) -> _LaneFacts:
    """What the writer detectors need of the writer's lane: its family, the files it was
    handed, whether its owner is a `lanewatch run` (`model/family.py`)."""
    if o is None:
        return {}
    return {"family": o.family, "handed": o.handed, "runner": o.child_pid is not None}


def _lineage(st: ProcStat) -> tuple[tuple[int, int], ...]:
    chain: list[tuple[int, int]] = []
    seen = {st.pid}
    ppid = st.ppid
    while ppid > 0 and ppid not in seen and len(chain) < MAX_DEPTH:
        try:
            parent = read_stat(ppid)
        except OSError:
            parent = None
        if parent is None:
            break
        chain.append((parent.pid, parent.start_ticks))
        seen.add(ppid)
        ppid = parent.ppid
    return tuple(chain)


def _pidfs_ino(pidfd: int) -> int | None:
    try:
        return os.fstat(pidfd).st_ino
    except OSError:
        return None


def _has_pidfs() -> bool:
    """pidfds on pidfs (Linux 6.9+): each process has an inode number of its own, never reused,
    so a pidfd's inode identifies a process without reading /proc."""
    try:
        mine, init = os.pidfd_open(os.getpid()), os.pidfd_open(1)
    except (OSError, AttributeError):
        return False
    try:
        again = os.pidfd_open(os.getpid())
    except OSError:
        os.close(mine)
        os.close(init)
        return False
    try:
        a, b, c = (os.fstat(fd).st_ino for fd in (mine, init, again))
        return a != b and a == c and sys.maxsize > 2**32
    finally:
        for fd in (mine, init, again):
            os.close(fd)

    return True
