"""Each running owner's verdict of the last full probe, made again only when something it was
made of changed.

`prober.judge` of a local live owner reads the process table (the owner's and its command's
stat: liveness; the processes below the owner and in its command's group: the lane's
members), the real uids the probe's scan read, and lanewatch's own pids. A prober probing a
quiet machine every few seconds asks the same questions of almost the same table: hundreds of
lanes, each judged anew, were a fifth of a full probe. So the memo keeps, per namespace, the
verdict with what it was made of, and gives it back (stamped with the new probe's time) while:
- the stamp is the very same object (a new read of it makes a new one);
- no process the verdict looked at changed: the owner, its command, and every running
  process below the owner. "Changed": started, ended, or a new parent, group, start
  ticks, name, kernel-thread flag, or state as far as a verdict tells them apart (ended;
  stopped or traced; else running). A process that changed and had, before or now, a parent
  or a group among those looked at makes it again too: a new child, a child reparented to a
  subreaper, a process joining or leaving the command's group (a lane's group counts only
  while its id is the command's pid). CPU time and resident pages are not a verdict's, and a
  change elsewhere (a kernel worker started, another user's build) keeps it;
- the uids read for the owner and its command, and lanewatch's own pids, are the same.
Only verdicts of an owner that runs (and a command that runs, or none) are kept: the others
may read more than the table (a lock, the lane's tmp/ folder, the kernel asked again), and
so are a lane with a cgroup of its own (its processes are read from the cgroup, not the
table). The answer is the one `judge` would give; tests/processes/test_verdictmemo.py
compares them.

A memo belongs to one caller (the prober's thread): it is not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lanewatch.lanes.stamp import Stamp
from lanewatch.linux.proc import ProcStat
from lanewatch.linux.procid import Liveness
from lanewatch.linux.reaper import Children, descendants
from lanewatch.model.classify import LivenessEvidence
from lanewatch.processes import members
from lanewatch.processes.ownpids import own_pids

Uids = Mapping[int, tuple[int, int]]


def _kind(state: str) -> int:
    """A state as a verdict tells it apart: 0 running or asleep, 1 stopped, 2 ended."""
    if state in ("Z", "X"):
        return 2
    if state in ("T", "t"):
        return 1
    return 0


def changes(old: Mapping[int, ProcStat], new: Mapping[int, ProcStat]) -> _Changes:
    """What changed from table `old` to `new`, for a verdict (module doc)."""
    pids: set[int] = set()
    near: set[int] = set()  # their parents and groups, before and now
    for pid, st in new.items():
        was = old.get(pid)
        if was is st or (was is not None and _same(was, st)):
            continue  # (the very same stat bytes: `linux.proc.stat_at`'s memo)
        pids.add(pid)
        near.update((st.ppid, st.pgid))
        if was is not None:
            near.update((was.ppid, was.pgid))
    for pid in old.keys() - new.keys():
        was = old[pid]
        pids.add(pid)
        near.update((was.ppid, was.pgid))
    return _Changes(frozenset(pids), frozenset(near))


def _same(was: ProcStat, st: ProcStat) -> bool:
    return (
        was.ppid == st.ppid
        and was.pgid == st.pgid
        and was.start_ticks == st.start_ticks
        and was.comm == st.comm
        and was.kernel_thread == st.kernel_thread
        and (was.state == st.state or _kind(was.state) == _kind(st.state))
    )


@dataclass(frozen=True, slots=True)
class _Changes:
    pids: frozenset[int]  # started, ended or changed
    near: frozenset[int]  # the parents and groups of those, before and now


def looked_at(stamp: Stamp, procs: Mapping[int, ProcStat], children: Children) -> set[int]:
    """The processes a verdict on `stamp` read: the owner, every running process below it, and
    its command. (A zombie below it is not one: its change, even its end, is its parent's.)"""
    out = {stamp.pid, *(st.pid for st in descendants(stamp.pid, procs, children))}
    if stamp.child_pid:
        out.add(stamp.child_pid)
    return out


@dataclass(slots=True)
class _Kept:
    stamp: Stamp
    uid: tuple[int, int] | None
    child_uid: tuple[int, int] | None
    own: frozenset[int]
    looked: frozenset[int]
    evidence: LivenessEvidence


class VerdictMemo:
    """The verdicts of the last full probe, by namespace key (module doc)."""

    def __init__(self) -> None:
        self._table: Mapping[int, ProcStat] | None = None
        self._uids: Uids = {}
        self._kept: dict[str, _Kept] = {}
        self._now: dict[str, _Kept] = {}
        self._changes: _Changes | None = None

    def begin(self, table: Mapping[int, ProcStat], uids: Uids) -> None:
        """A probe judges on its scan's `table` and `uids`; a verdict of the last one is
        reused only if none of what it looked at changed since that one's."""
        self._changes = changes(self._table, table) if self._table is not None else None
        self._table, self._uids = table, uids
        self._now = {}

    def end(self) -> None:
        self._kept, self._now = self._now, {}

    def reuse(self, key: str, stamp: Stamp, at: float) -> LivenessEvidence | None:
        """The kept verdict on `key`, judged `at`, when nothing it was made of changed."""
        changed = self._changes
        kept = self._kept.get(key) if changed is not None else None
        if kept is None or changed is None or kept.stamp is not stamp:
            return None
        looked = kept.looked
        if not (looked.isdisjoint(changed.pids) and looked.isdisjoint(changed.near)):
            return None
        uids = self._uids
        if uids.get(stamp.pid) != kept.uid or _child_uid(stamp, uids) != kept.child_uid:
            return None
        own = own_pids()
        if own is not kept.own and own != kept.own:
            return None
        ev = kept.evidence
        fresh = LivenessEvidence(
            ev.pid, ev.start_ticks, ev.liveness, ev.reason, at, ev.child, ev.child_reason,
            ev.lock_held, ev.uid, ev.child_uid, ev.members, ev.unreadable, ev.ports,
        )  # fmt: skip
        kept.evidence = fresh
        self._now[key] = kept
        return fresh

    def keep(self, key: str, stamp: Stamp, ev: LivenessEvidence) -> None:
        """Remember `ev`, judged now on this probe's table, if it may be reused (module doc)."""
        if ev.liveness is not Liveness.ALIVE or ev.child not in (None, Liveness.ALIVE):
            return
        if stamp.cgroup or ev.lock_held is not None or not ev.about(stamp):
            return
        table, uids = self._table, self._uids
        uid = uids.get(stamp.pid)
        if table is None or uid is None or uid[0] != stamp.start_ticks:
            return  # asked of the kernel, not read by the scan: not the table's answer
        child = _child_uid(stamp, uids)
        if ev.child is Liveness.ALIVE and (child is None or child[0] != stamp.child_start_ticks):
            return
        looked = frozenset(looked_at(stamp, table, members.children(table)))
        self._now[key] = _Kept(stamp, uid, child, own_pids(), looked, ev)


def _child_uid(stamp: Stamp, uids: Uids) -> tuple[int, int] | None:
    return uids.get(stamp.child_pid) if stamp.child_pid else None
