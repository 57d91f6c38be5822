"""The process prober: liveness of local owners, and who holds which path.

`judge` asks the kernel about one owner (pid + start ticks + boot id, via `linux.procid`);
`judge_all` asks once per owner identity (one process may own many lanes).
`holdings` reads /proc once (`processes.holders`) for every process with its cwd or an open file
under the roots or shared temp, and tags it with its lane evidence: $LANEWATCH_NAMESPACE,
$LANEWATCH_LANE and its ancestry; between two such full scans (`processes/quietpace.py`: every
60 s, or every 5 minutes while no process starts and nothing is written) the fast probe
(`processes.fastprobe`) reads only the processes of live lanes. `Prober` runs on its own thread,
as a one-shot timer re-armed after each run (runs never overlap), and hands a `ProbeReport` to
the worker. It keeps a `ProbeMemo` so that a full scan reads again only what can have changed
(`processes.memo`), and sleeps on the owners' pidfds while nothing changes
(`processes.deaths`).
With no live local owner there is nothing to attribute: the /proc scan is skipped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from lanewatch.lanes import lock
from lanewatch.lanes.stamp import OwnerState, Stamp
from lanewatch.linux import netsockets, procid
from lanewatch.linux.mountview import MountViews
from lanewatch.linux.paths import SHARED_TEMP as SHARED_TEMP  # re-exported
from lanewatch.linux.proc import ProcStat, status_uid
from lanewatch.linux.procid import Liveness, ProcessIdentity
from lanewatch.model.classify import LivenessEvidence
from lanewatch.model.family import file_ids
from lanewatch.model.holdings import Holding, Owner
from lanewatch.model.views import Footprint, LaneMember
from lanewatch.processes import fastprobe, holders, members
from lanewatch.processes.checkoutgit import git_common_dir
from lanewatch.processes.deaths import DeathWatch
from lanewatch.processes.footprintmeter import Meter, fresh_stat, from_table
from lanewatch.processes.markers import MarkerMemo
from lanewatch.processes.memo import ProcMemo
from lanewatch.processes.ownpids import own_pids
from lanewatch.processes.privateports import PrivateNets
from lanewatch.processes.proclives import ProcLives
from lanewatch.processes.quietpace import SOCKETS_EVERY, QuietPace
from lanewatch.processes.verdictmemo import VerdictMemo

log = logging.getLogger(__name__)

QUIET_EVERY = 5  # when nothing changed, a probe every this many intervals (10 s at 2 s)
# A data write in a namespace asks for a probe at once (who wrote may still hold it), but at
# most one such prompt probe this often: a flood of writes costs 4 fast probes a second.
PROMPT_GAP = 0.25


def judge(
    namespace: str,
    stamp: Stamp,
    at: float,
    procs: Callable[[], Mapping[int, ProcStat]] | None = None,
    *,
    released: bool = False,
    uids: Mapping[int, tuple[int, int]] | None = None,
) -> LivenessEvidence | None:
    """The kernel's verdict on a local live owner, with the uid it runs as (and its
    command's) and the lane's running processes (`processes/members.py`); None for a remote
    stamp, and for a released one unless `released` (the actions' check: a runner that could
    not wait for its processes leaves them running) and some process of the lane runs.
    `procs`: the process table, read at most once by the caller's probe. `uids`: real uids
    the probe's scan read, by pid, with the start ticks read through the same pin."""
    if stamp.host != procid.hostname():
        return None
    table = procs if procs is not None else members.lazy_table(holders.process_table)
    owner = ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id)
    if stamp.state is not OwnerState.LIVE:
        if not released or stamp.boot_id != procid.boot_id():
            return None
        found = members.members_of(stamp, namespace, table(), runner_alive=False)
        unknown = 0 if found else members.unreadable(stamp, namespace, table())
        if not found and not unknown:
            return None
        return LivenessEvidence(
            stamp.pid, stamp.start_ticks, Liveness.DEAD, "released", at, members=found,
            unreadable=unknown,
        )  # fmt: skip
    now = table()  # read once per probe; its stats tell the owner's and the child's lives
    alive, why = procid.liveness(owner, now.get(stamp.pid))
    child: Liveness | None = None
    child_why = ""
    child_uid = None
    if alive is Liveness.ALIVE and stamp.child_pid and stamp.child_start_ticks:
        command = ProcessIdentity(stamp.child_pid, stamp.child_start_ticks, stamp.boot_id)
        child, child_why = procid.liveness(command, now.get(stamp.child_pid))
        child_uid = _owner_uid(command, uids) if child in _RUNNING else None
    held = lock.is_lock_held(Path(namespace)) if alive is Liveness.UNKNOWN else None
    uid = _owner_uid(owner, uids) if alive in _RUNNING else None
    found = _members(namespace, stamp, alive, now)
    unknown = 0
    if not found and alive not in (*_RUNNING, Liveness.UNKNOWN, Liveness.OTHER_BOOT):
        unknown = members.unreadable(stamp, namespace, now)
    return LivenessEvidence(
        stamp.pid, stamp.start_ticks, alive, why, at, child, child_why, held, uid, child_uid,
        found, unknown,
    )  # fmt: skip


_RUNNING = (Liveness.ALIVE, Liveness.STOPPED)  # whose uid is read: `classify.claims_mismatch`


def _owner_uid(who: ProcessIdentity, uids: Mapping[int, tuple[int, int]] | None) -> int | None:
    """`procid.owner_uid`, from the probe's scan when it read that very process (same pid and
    start ticks, through one pin); else asked afresh."""
    known = uids.get(who.pid) if uids is not None else None
    if known is not None and known[0] == who.start_ticks:
        return known[1]
    return procid.owner_uid(who)


def _members(
    namespace: str, stamp: Stamp, alive: Liveness, procs: Mapping[int, ProcStat]
) -> tuple[LaneMember, ...]:
    """The lane's running processes, given the verdict on its runner (none from another boot)."""
    if alive is Liveness.OTHER_BOOT:
        return ()
    runner = alive in (*_RUNNING, Liveness.UNKNOWN)
    return members.members_of(stamp, namespace, procs, runner_alive=runner)


_UNJUDGED = object()
_TABLE = ("process table",)  # where `judge_once` keeps the probe's one process table
_UIDS = ("uids",)  # and the uids its scan read (`judge`'s `uids`)


def judge_all(
    stamps: Mapping[str, Stamp],
    at: float,
    procs: Callable[[], Mapping[int, ProcStat]] | None = None,
    uids: Mapping[int, tuple[int, int]] | None = None,
    memo: VerdictMemo | None = None,
) -> dict[str, LivenessEvidence]:
    """`judge` of every stamp that names a local live owner; the kernel is asked once per
    owner identity (one process may own many lanes), see `judge_once`; the process table is
    read once (`procs`, else at the first stamp that needs it). `memo`: the caller's, kept
    between probes, with `procs` and `uids` from a scan: a verdict nothing of which changed
    is not made again (`processes/verdictmemo.py`); the answer is the same."""
    out: dict[str, LivenessEvidence] = {}
    known: dict[tuple[object, ...], object] = {}
    if procs is not None:
        known[_TABLE] = procs
    if uids is not None:
        known[_UIDS] = uids
    if memo is not None and procs is not None and uids is not None:
        memo.begin(procs(), uids)
    else:
        memo = None  # only a scan's table and uids are what the memo compares
    for key, s in stamps.items():
        ev = memo.reuse(key, s, at) if memo is not None else None
        if ev is None:
            ev = judge_once(key, s, at, known)
            if ev is not None and memo is not None:
                memo.keep(key, s, ev)
        if ev is not None:
            out[key] = ev
    if memo is not None:
        memo.end()
    return out


def shared_table(known: dict[tuple[object, ...], object]) -> Callable[[], Mapping[int, ProcStat]]:
    """The one process table of the judgements that share `known`, read at the first that
    needs it: every lane seen in one batch of the engine's tail is judged on one read of
    /proc, not one read each (on a busy machine a read of every process's stat is slow)."""
    table = known.get(_TABLE)
    if not callable(table):
        table = known[_TABLE] = members.lazy_table(holders.process_table)
    return table  # type: ignore[no-any-return]


def judge_once(
    key: str, s: Stamp, at: float, known: dict[tuple[object, ...], object]
) -> LivenessEvidence | None:
    """`judge`, asking the kernel once per owner identity among the calls that share `known`,
    except for an owner it would not tell about (UNKNOWN: each namespace's lock is read)."""
    who = (s.state, s.host, s.pid, s.start_ticks, s.boot_id, s.child_pid, s.child_start_ticks)
    ev = known.get(who, _UNJUDGED)
    table = shared_table(known)
    if ev is _UNJUDGED or (isinstance(ev, LivenessEvidence) and ev.liveness is Liveness.UNKNOWN):
        uids = known.get(_UIDS)
        ev = known[who] = judge(key, s, at, table, uids=uids if isinstance(uids, Mapping) else None)
    elif isinstance(ev, LivenessEvidence):  # the same owner, another lane: its own members
        found = _members(key, s, ev.liveness, table())
        ev = ev if found == ev.members else replace(ev, members=found)
    return ev if isinstance(ev, LivenessEvidence) else None


# Each namespace's `Owner`, with the stamp and members it was made of (`owners_of`'s memo).
OwnerMemo = dict[str, tuple[Stamp, tuple[LaneMember, ...] | None, Owner]]


def owners_of(
    stamps: Mapping[str, Stamp],
    evidence: Mapping[str, LivenessEvidence] | None = None,
    memo: OwnerMemo | None = None,
) -> dict[str, Owner]:
    """Attribution targets: every local live owner, by namespace key. A stamp whose claims
    cannot be so makes no lane members: one naming pid 1 (or 0) would make every process on
    the machine a member, and one naming another uid's process its whole tree. `memo`: the
    caller's, kept between calls (`ProbeMemo.owners`): an owner made of the very same stamp
    and members as last time is that one (when its checkout's git dir is the same too)."""
    host = procid.hostname()
    out: dict[str, Owner] = {}
    made: OwnerMemo = {}
    for key, s in stamps.items():
        if s.state is not OwnerState.LIVE or s.host != host:
            continue
        if any(p is not None and p <= 1 for p in (s.pid, s.child_pid, s.pgid)):
            continue
        seen = (evidence or {}).get(key)
        if seen is not None and seen.about(s) and seen.uid not in (None, s.uid):
            continue
        # Members that left the tree and the group are the lane's too.
        found = seen.members if seen is not None and seen.about(s) else None
        git = git_common_dir(s.checkout_path)
        last = memo.get(key) if memo is not None else None
        if last is not None and last[0] is s and last[1] is found and last[2].git_common_dir == git:
            owner = last[2]
        else:
            pids = {s.pid} | ({s.child_pid} if s.child_pid else set())
            pids |= {m.pid for m in found or ()}
            owner = Owner(
                key,
                s.lane,
                s.checkout_id,
                s.checkout_path,
                frozenset(pids),
                s.pgid,
                s.pid,
                git,
                family=s.family,
                handed=file_ids(s.stdio),
            )
        out[key] = owner
        made[key] = (s, found, owner)
    if memo is not None:
        memo.clear()
        memo.update(made)
    return out


def _lineage(pid: int, procs: dict[int, holders.ProcStat | None]) -> tuple[int, ...]:
    """`pid`, its parent, grandparent, ...; `procs` holds the stats read so far (the scan's
    holders) and learns each ancestor's the first time it is needed."""
    chain = [pid]
    seen = {pid}
    current = _stat_of(pid, procs)
    while current is not None and current.ppid > 0 and current.ppid not in seen:
        chain.append(current.ppid)
        seen.add(current.ppid)
        current = _stat_of(current.ppid, procs)
    return tuple(chain)


def _stat_of(pid: int, procs: dict[int, holders.ProcStat | None]) -> holders.ProcStat | None:
    if pid not in procs:
        try:
            procs[pid] = holders.read_stat(pid)
        except OSError:  # not readable: the chain stops here, as at a vanished parent
            procs[pid] = None
    return procs[pid]


_Who = tuple[int, str | None, str | None, tuple[int, ...], int, tuple[str, ...]]


@dataclass(slots=True)
class ProbeMemo:
    """What a caller that probes again and again keeps between full probes: the scan's memo
    (`processes.memo`), the owners' verdicts (`processes/verdictmemo.py`), the `Owner`s
    made of them (`owners_of`), and each holder's `Holding`s with what they were made of,
    reused when both are unchanged (at hundreds of held paths a probe, making them is a
    cost)."""

    procs: ProcMemo = field(default_factory=ProcMemo)
    verdicts: VerdictMemo = field(default_factory=VerdictMemo)
    owners: OwnerMemo = field(default_factory=dict)
    uids: dict[int, tuple[bytes, int | None]] = field(default_factory=dict)  # `_uids`
    made: dict[int, tuple[_Who, tuple[holders.HeldPath, ...], list[Holding]]] = field(
        default_factory=dict
    )


def holdings(
    prefixes: Sequence[str],
    memo: ProbeMemo | None = None,
    sockets: Collection[str] = (),
    scan: holders.ProcScan | None = None,
) -> tuple[list[Holding], str | None]:
    """Every path under `prefixes` some other process holds; and why the list may be partial.
    `memo`: the caller's, kept between calls; the answer is the same with or without.
    `sockets`: listening sockets' fd links; their holders too (kind "socket"). `scan`: the
    probe's own scan of `prefixes` with `memo` and `sockets` (`_scan`), made already."""
    if scan is None:
        # Not `with_tree`: only the holders' ancestors are needed, not every process's stat.
        scan = _scan(prefixes, memo, sockets)
    procs: dict[int, holders.ProcStat | None] = dict(scan.procs)
    own = own_pids()
    before = memo.made if memo is not None else {}
    made: dict[int, tuple[_Who, tuple[holders.HeldPath, ...], list[Holding]]] = {}
    out: list[Holding] = []
    for h in scan.holders:
        if h.pid in own:
            continue
        who: _Who = (
            h.start_ticks,
            h.lane,
            h.namespace,
            _lineage(h.pid, procs),
            h.stat.pgid,
            h.cmdline,
        )
        last = before.get(h.pid)
        # Unchanged paths are the very same objects (the scan's memo), so this is cheap.
        if last is not None and last[0] == who and last[1] == h.paths:
            mine = last[2]
        else:
            mine = _holdings_of(h.pid, who, h.paths)
        made[h.pid] = (who, h.paths, mine)
        out.extend(mine)
    if memo is not None:
        memo.made = made
    partial = None
    if not scan.complete:
        partial = scan.hidden or f"{len(scan.unreadable_pids)} processes could not be inspected"
    return out, partial


def _scan(
    prefixes: Sequence[str],
    memo: ProbeMemo | None,
    sockets: Collection[str],
    *,
    with_tree: bool = False,
    statuses: Collection[int] = (),
) -> holders.ProcScan:
    real = [p for p in prefixes if os.path.isdir(p)]
    procs_memo = memo.procs if memo is not None else None
    return holders.scan(
        real, with_env=True, with_tree=with_tree, memo=procs_memo, sockets=sockets,
        statuses=statuses,
    )  # fmt: skip


def _scan_first(stamps: Mapping[str, Stamp]) -> bool:
    """Whether a full probe scans /proc before it judges the owners, and judges them from the
    scan's stats (one pinned read of each process's stat, not a table and then the scan's):
    when some stamp names a local live owner (`owners_of` before the verdicts, which only
    drop some) and no live lane's sockets are in a network namespace of its own (those are
    read through the lane's members, known only from the verdicts)."""
    host = procid.hostname()
    local = [s for s in stamps.values() if s.state is OwnerState.LIVE and s.host == host]
    if any(s.net_ns for s in local):
        return False
    return any(all(p is None or p > 1 for p in (s.pid, s.child_pid, s.pgid)) for s in local)


def _owner_pids(stamps: Mapping[str, Stamp]) -> frozenset[int]:
    """The pids whose uid `judge` may read: every local live owner and its command."""
    host = procid.hostname()
    return frozenset(
        p
        for s in stamps.values()
        if s.state is OwnerState.LIVE and s.host == host
        for p in (s.pid, s.child_pid)
        if p
    )


def _uids(
    scan: holders.ProcScan, memo: dict[int, tuple[bytes, int | None]] | None = None
) -> dict[int, tuple[int, int]]:
    """(start ticks, real uid) by pid, from the status and stat the scan read through one pin
    (what `procid.owner_uid` reads, and as strict: a status without its Uid or Tgid line
    tells nothing). `memo`: the caller's (`ProbeMemo.uids`): a status the scan's memo gave
    back as it was (the very same bytes) is not parsed again."""
    out: dict[int, tuple[int, int]] = {}
    parsed: dict[int, tuple[bytes, int | None]] = {}
    for pid, data in scan.statuses.items():
        st = scan.procs.get(pid)
        if st is None:
            continue
        last = memo.get(pid) if memo is not None else None
        uid = last[1] if last is not None and last[0] is data else status_uid(data)
        parsed[pid] = (data, uid)
        if uid is not None:
            out[pid] = (st.start_ticks, uid)
    if memo is not None:
        memo.clear()
        memo.update(parsed)
    return out


def _holdings_of(pid: int, who: _Who, paths: Sequence[holders.HeldPath]) -> list[Holding]:
    ticks, lane, namespace, lineage, pgid, command = who
    return [
        Holding(
            pid=pid,
            start_ticks=ticks,
            path=p.path,
            kind=p.kind,
            access=p.access,
            deleted=p.deleted,
            directory=p.directory,
            lane_env=lane,
            namespace_env=namespace,
            lineage=lineage,
            pgid=pgid,
            command=command,
            fd=p.fd,
            file_id=p.file_id,
        )
        for p in paths
    ]


@dataclass(frozen=True, slots=True)
class ProbeReport:
    at: float
    evidence: Mapping[str, LivenessEvidence]
    holdings: tuple[Holding, ...] | None  # None: skipped (no live local owner)
    owners: Mapping[str, Owner] = field(default_factory=dict)
    partial: str | None = None
    took: float = 0.0  # seconds the probe took (wall clock)
    full: bool = False  # every process was read, not only the live lanes'
    # Each running lane's footprint, read from this probe's process table.
    footprints: Mapping[str, Footprint] = field(default_factory=dict)
    # The listening sockets by fd link (`socket:[INODE]`, `linux/netsockets.py`), read before
    # the processes: holdings of kind "socket" name them. Empty when nothing was probed.
    listening: Mapping[str, netsockets.Listening] = field(default_factory=dict)
    # What made the prober run this probe (`Prober._cause`); "" for a one-shot probe.
    cause: str = ""


@dataclass(frozen=True, slots=True)
class Metering:
    """Footprints read between two probes (the last probe's members only: no /proc walk)."""

    at: float
    footprints: Mapping[str, Footprint]


def probe(
    stamps: Mapping[str, Stamp],
    prefixes: Sequence[str],
    *,
    full: bool = True,
    memo: ProbeMemo | None = None,
    markers: MarkerMemo | None = None,
    meter: Meter | None = None,
    private: PrivateNets | None = None,
) -> ProbeReport:
    """Liveness of every local live owner, then (if any) who holds what: every process
    (`full`), or only the processes of live lanes, found from the process tree (fast).
    A caller that probes again and again passes its own `memo` (the same report, cheaper),
    and its `markers`: the fast probe then also reads every process carrying a lane's marker
    in its environment (`processes/markers.py`), wherever it sits in the process tree.
    `private`: the caller's memory of the `--fence net` lanes' sockets (`privateports`)."""
    t0 = time.monotonic()
    at = time.time()
    table: Callable[[], Mapping[int, ProcStat]] = members.lazy_table(holders.process_table)
    scan: holders.ProcScan | None = None
    uids: dict[int, tuple[int, int]] | None = None
    early: dict[str, netsockets.Listening] = {}
    if full and _scan_first(stamps):
        early = netsockets.by_link(_TABLES.listening())
        scan = _scan(prefixes, memo, early.keys(), with_tree=True, statuses=_owner_pids(stamps))
        scanned = scan.procs
        table, uids = (lambda: scanned), _uids(scan, memo.uids if memo is not None else None)
    verdicts = memo.verdicts if memo is not None else None  # used with a scan's uids only
    evidence = judge_all(stamps, at, table, uids, verdicts)
    footprints = meter.measure(stamps, evidence, from_table(table), at) if meter else {}
    owners = owners_of(stamps, evidence, memo.owners if memo is not None else None)
    held: tuple[Holding, ...] | None = None
    partial = None
    listening: dict[str, netsockets.Listening] = {}
    if owners:  # a --fence net lane's sockets are in its own namespace's tables
        listening = early if scan is not None else netsockets.by_link(_TABLES.listening())
        private = private if private is not None else PrivateNets()
        listening = {**listening, **private.read(stamps, evidence, fresh=full)}
    if owners and full:
        found, partial = holdings(prefixes, memo, listening.keys(), scan)
        held = tuple(found)
    elif owners:
        procs = table()
        real = [os.path.realpath(p) for p in prefixes if os.path.isdir(p)]
        pids = fastprobe.lane_pids(procs, owners.values())
        if markers is not None:
            pids |= markers.marked(procs, skip=frozenset(pids))
        views = MountViews()
        try:  # in our words while each process is pinned (not after: it may be gone by then)
            held = tuple(fastprobe.holdings_of(pids, procs, real, views, listening.keys()))
        finally:
            views.close()
    took = time.monotonic() - t0
    return ProbeReport(
        at, evidence, held, owners, partial, took, full=held is not None and full,
        footprints=footprints,
        listening=listening,
    )  # fmt: skip


def _cause(watched: bool, poked: str, active: bool, owners: bool, sockets: bool) -> str:
    """Why a probe is due now, by the first that holds; "" when none is (then only the
    clock may call one: a quiet check, or the full scan's turn). `poked`: what woke the
    wait ("poke": a death through its pidfd, or a poke; "sockets": the listening sockets)."""
    for why, holds in (
        (poked, bool(poked)),
        ("write", active),
        ("owners", owners),
        ("sockets", sockets),
        ("unwatched", not watched),
    ):
        if holds:
            return why
    return ""


def _watchable(report: ProbeReport, stamps: Mapping[str, Stamp]) -> tuple[set[int], bool]:
    """Pids whose only possible change is their exit (running owners and children); and
    whether that is every owner (stopped or unreadable ones are re-judged every interval)."""
    pids: set[int] = set()
    complete = True
    for key, ev in report.evidence.items():
        if ev.liveness is Liveness.ALIVE:
            pids.add(ev.pid)
        else:  # a headless lane turns stale when its last member ends: watch them
            pids.update(m.pid for m in ev.members)
        child = stamps[key].child_pid if key in stamps else None
        if ev.child is Liveness.ALIVE and child:
            pids.add(child)
        elif ev.liveness in (Liveness.STOPPED, Liveness.UNKNOWN):
            complete = False
        if ev.child is Liveness.STOPPED or ev.child is Liveness.UNKNOWN:
            complete = False
    return pids, complete


def _verdicts_changed(stamps: Mapping[str, Stamp], last: Mapping[str, LivenessEvidence]) -> bool:
    """Whether the kernel's verdict on some owner is no longer `last`'s. Run while every
    owner is watched by a pidfd, so it is a stop (SIGSTOP, a tracer) it looks for: a pidfd
    says nothing about that. One read of /proc/PID/stat per owner identity."""
    fresh = judge_all(stamps, time.time())
    if fresh.keys() != last.keys():
        return True
    return any(not ev.same_verdict(last[key]) for key, ev in fresh.items())


def _stops_changed(stamps: Mapping[str, Stamp], last: Mapping[str, LivenessEvidence]) -> bool:
    """`_verdicts_changed` when no process was started since `last` was judged, or every one
    that was has ended (`Prober._all_gone`): nobody can have joined a lane, and no pid can
    have been reused, so an owner's stop (or resume) and a member's exit are all there is to
    look for: one /proc/PID/stat per owner identity and per member; no process table."""
    seen: dict[tuple[object, ...], tuple[Liveness, Liveness | None]] = {}
    gone: dict[int, bool] = {}
    for key, ev in last.items():
        s = stamps.get(key)
        if s is None:
            return True
        who = (s.pid, s.start_ticks, s.boot_id, s.child_pid, s.child_start_ticks)
        now = seen.get(who)
        if now is None:
            alive, _ = procid.liveness(ProcessIdentity(s.pid, s.start_ticks, s.boot_id))
            child = None
            if alive is Liveness.ALIVE and s.child_pid and s.child_start_ticks:
                command = ProcessIdentity(s.child_pid, s.child_start_ticks, s.boot_id)
                child = procid.liveness(command)[0]
            now = seen[who] = (alive, child)
        if now != (ev.liveness, ev.child):
            return True
        for m in ev.members:
            if m.pid not in gone:
                gone[m.pid] = procid.ended(m.pid, m.start_ticks)
            if gone[m.pid]:
                return True
    return False


_TABLES = netsockets.Tables()  # /proc/net parsed again only when a listener came or went


_EPHEMERAL = netsockets.ephemeral_range()


def _listening_now(private: PrivateNets | None = None) -> frozenset[int]:
    """The inodes of the listening sockets on a port someone chose (outside the kernel's
    ephemeral range, where every `bind` to port 0 lands): a lane that starts or stops listening
    on one is probed at the next round, not at the next full scan. Sockets of port 0 binds
    (test servers, by the hundred on a busy machine) never wake the prober: they are no port
    incident, and the PORTS column learns of them at the probe's own pace. With `private`, the
    `--fence net` lanes' too (read again only where their socket counts moved)."""
    low, high = _EPHEMERAL
    pairs = netsockets.listening_pairs()
    if private is not None and (theirs := private.pairs()):
        pairs |= theirs
    return frozenset(i for port, i in pairs if not low <= port <= high)


def _identities(stamps: Mapping[str, Stamp]) -> frozenset[tuple[object, ...]]:
    return frozenset(
        (k, s.state, s.host, s.pid, s.start_ticks, s.child_pid, s.child_start_ticks)
        for k, s in stamps.items()
    )


class Prober:
    """Runs `probe` every `interval` seconds on its own thread; never two at once."""

    def __init__(
        self,
        interval: float,
        stamps: Callable[[], Mapping[str, Stamp]],
        prefixes: Callable[[], Sequence[str]],
        sink: Callable[[ProbeReport | Metering], None],
    ) -> None:
        self.interval = interval
        self._stamps = stamps
        self._prefixes = prefixes
        self._sink = sink
        self._stop = threading.Event()
        self._now = threading.Event()
        self.runs = 0  # probes
        self.checks = 0  # quiet rounds' stop checks
        self.light_checks = 0  # of which no process had started: stat of owners and members only
        self._active = True  # a write was applied since the last probe: keep the pace
        self._deaths: DeathWatch | None = None
        self._memo = ProbeMemo()  # used by this prober's thread only
        self._markers = MarkerMemo()  # the same
        self._meter = Meter()  # the same
        self._private = PrivateNets()  # the same
        self._pace = QuietPace()  # the same
        self._births: Callable[[float], bool | None] | None = None  # `use_births`
        self._lives: ProcLives | None = None  # `use_lives`: it wakes the wait at a birth
        self._prompted = float("-inf")  # monotonic time of the last prompt probe asked for
        self._thread = threading.Thread(target=self._run, name="lanewatch-prober", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """Probe as soon as possible (after the current run, if one is going)."""
        self._now.set()
        if self._deaths is not None:
            self._deaths.wake()

    def active(self) -> None:
        """Something was written: the next round probes at the normal pace (who holds what
        can change while files are written; when nothing is, holdings rarely do)."""
        self._active = True

    def written(self) -> None:
        """A data file in a namespace was written: probe at once (a writer holding it, or with
        its cwd inside, is named within the moment, not at the next round), at most once per
        PROMPT_GAP; later writes in the gap are covered by the pace `active` keeps."""
        self._active = True
        now = time.monotonic()
        if now - self._prompted >= PROMPT_GAP:
            self._prompted = now
            self.poke()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._now.set()
        if self._deaths is not None:
            self._deaths.wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def use_births(self, births: Callable[[float], bool | None]) -> None:
        """Where the process connector can be used (`ProcLives.born_alive_since`): a quiet
        round tells pids handed out to processes already gone from a process that started
        and still runs (`processes/quietpace.py`, and the stop check in `_run`)."""
        self._births = births
        self._pace.births = births

    def use_lives(self, lives: ProcLives) -> None:
        """`use_births` from the process connector's table, which also wakes the prober when a
        process starts: between two starts' windows it sleeps its whole interval instead of
        looking at `ns_last_pid` every SOCKETS_EVERY seconds (`QuietPace.look_in`)."""
        self.use_births(lives.born_alive_since)
        self._lives = lives

    def _look_in(self, deaths: DeathWatch | None) -> float:
        """Seconds until the next look at the listening sockets: SOCKETS_EVERY, or, where a
        birth ends the wait (`use_lives`, the connector still listening), until the slow pass
        while no start is recent, the connector armed to end it at the next birth."""
        lives = self._lives
        if deaths is None or lives is None or not lives.available:
            return SOCKETS_EVERY
        pace, now = self._pace, time.monotonic()
        if pace.look_in(now) <= SOCKETS_EVERY:
            return SOCKETS_EVERY
        lives.on_birth(deaths.born)  # one call, then disarmed: a busy machine wakes us once
        # A start after the last look but before the arming: this look sees it (and opens a
        # window); one after it ends the wait.
        pace.look(now)
        return pace.look_in(now)

    def _all_gone(self, since: float) -> bool:
        """Whether every process born since `since` (monotonic) is gone now: then every
        process running now already ran then (none can have joined a lane, no pid was
        reused). False when it cannot be told (no process connector, messages lost)."""
        births = self._births
        return births is not None and births(since) is False

    def _metering(
        self,
        stamps: Mapping[str, Stamp],
        verdicts: Mapping[str, LivenessEvidence],
        every: bool,
    ) -> None:
        """Between two probes: the footprint of the lanes running at the last one, from their
        members' stat alone (a round that found nothing running sends nothing); `every`: of
        all of them, else only of those that used CPU at their last reading (`quietpace`)."""
        if not every:
            keys = self._pace.metered(verdicts.keys())
            if not keys:
                return
            verdicts = {k: verdicts[k] for k in keys}
        found = self._meter.measure(stamps, verdicts, fresh_stat, every=every)
        self._pace.read(found, every=every)
        if found and not self._stop.is_set():
            self._sink(Metering(time.time(), found))

    def _wait(self, deaths: DeathWatch | None, listened: frozenset[int] | None) -> str:
        """Wait one interval; what woke it early, else "": "poke" (a death, a poke) or, with
        `listened`, "sockets" (a change of the listening sockets: looked at every
        SOCKETS_EVERY seconds while a process started lately, so a lane that binds another's
        port is probed within about that, whatever the interval; `processes/quietpace.py`)."""
        end = time.monotonic() + self.interval
        while not self._stop.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return ""
            step = left if listened is None else min(left, self._look_in(deaths))
            if deaths is None:
                if self._now.wait(step):
                    return "poke"
            elif deaths.wait(step):
                return "poke"
            if (
                listened is not None
                and self._pace.sockets_due(time.monotonic())
                and _listening_now(self._private) != listened
            ):
                return "sockets"
        return "poke"

    def _run(self) -> None:
        """A probe every `interval` while something may change: an owner came, went, was
        rewritten, or cannot be watched (stopped, unreadable, no pidfd), a data file was
        written, or a poke came; and a full probe every FULL_SCAN_EVERY seconds when something
        changed since the last, else every FULL_SCAN_QUIET (`processes/quietpace.py`). Otherwise
        (quiet) a death wakes the wait at once through its pidfd, and every QUIET_EVERY
        intervals the owners are only asked whether they stopped (`_verdicts_changed`): no
        process table, no holdings, no report unless a verdict changed."""
        try:
            deaths: DeathWatch | None = DeathWatch()
        except OSError as exc:  # no eventfd/pidfd here: probe at the full pace
            log.info("no pidfd death watch: %s", exc)
            deaths = None
        self._deaths = deaths
        last: frozenset[tuple[object, ...]] | None = None
        verdicts: Mapping[str, LivenessEvidence] = {}
        watched = False
        pace = self._pace
        last_check = float("-inf")
        # ns_last_pid when the verdicts were last read in full: unchanged, no process started
        # since (so none joined a lane, and no pid was reused). And when (monotonic): with the
        # process connector, pids handed out since to processes all gone by now say the same.
        judged_pid: int | None = None
        judged_at = float("-inf")
        seen: Mapping[str, Stamp] | None = None
        ids: frozenset[tuple[object, ...]] = frozenset()
        listened: frozenset[int] = frozenset()  # the listening sockets at the last probe
        woke = ""  # what ended the last wait early (`_wait`)
        try:
            while not self._stop.is_set():
                stamps = self._stamps()
                if stamps is not seen:  # the worker hands the same mapping while none changed
                    seen, ids = stamps, _identities(stamps)
                now = time.monotonic()
                fresh = bool(stamps) and pace.sockets_due(now)
                sockets = (
                    _listening_now(self._private) if fresh else listened if stamps else frozenset()
                )
                full = pace.full_due(now)
                poked = (woke or "poke") if self._now.is_set() else ""
                cause = _cause(watched, poked, self._active, ids != last, sockets != listened)
                due = bool(cause)  # a cause, not the clock
                checked = False
                if not due and not full and now - last_check >= self.interval * QUIET_EVERY - 0.05:
                    last_check, checked = now, True
                    self.checks += 1
                    started = pace.last_pid.read()
                    if started is not None and (started == judged_pid or self._all_gone(judged_at)):
                        judged_pid, judged_at = started, now
                        self.light_checks += 1
                        due = _stops_changed(stamps, verdicts)
                    else:
                        judged_pid, judged_at = started, now
                        due = _verdicts_changed(stamps, verdicts)
                    cause = "check" if due else ""
                if not due and not full and any(ev.members for ev in verdicts.values()):
                    self._metering(stamps, verdicts, every=checked)
                if due or full:
                    self._now.clear()
                    self._active = False
                    pace.probed(now, full=full, caused=due)
                    if stamps and not fresh:  # the probe reads them: compare with these
                        sockets = _listening_now(self._private)
                    self.runs += 1
                    last_check, last, listened = now, ids, sockets
                    # Before the probe: a start during it counts.
                    judged_pid, judged_at = pace.last_pid.read(), time.monotonic()
                    try:
                        report = probe(
                            stamps,
                            self._prefixes(),
                            full=full,
                            memo=self._memo,
                            markers=self._markers,
                            meter=self._meter,
                            private=self._private,
                        )
                    except OSError as exc:  # /proc unreadable as a whole: say so, keep trying
                        log.warning("process probe failed: %s", exc)
                        watched = False
                    else:
                        report = replace(report, cause=cause or "full")
                        verdicts = report.evidence
                        pace.read(report.footprints, every=True)
                        if deaths is not None:
                            pids, complete = _watchable(report, stamps)
                            watched = deaths.watch(pids) and complete
                        if not self._stop.is_set():
                            self._sink(report)
                # The one-shot timer, re-armed only now that this run is done.
                woke = self._wait(deaths, listened if stamps else None)
                if woke:
                    self._now.set()  # an owner exited, a poke, or a lane's port opened
        finally:
            if self._lives is not None:
                self._lives.on_birth(None)  # before its eventfd is closed (and its number reused)
            self._deaths = None
            if deaths is not None:
                deaths.close()
