"""The prober's pace: an owner's death is learned at once through its pidfd, and when nothing
can have changed the rounds slow down (idle CPU, docs/performance.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from lanewatch.engine.worker import Worker
from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, process_state
from lanewatch.model.holdings import Holding
from lanewatch.processes import prober as prober_module
from lanewatch.processes import quietpace
from lanewatch.processes.prober import (
    QUIET_EVERY,
    ProbeMemo,
    Prober,
    ProbeReport,
    judge,
    judge_all,
    owners_of,
    probe,
)
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp


def _prober(root: Path, pid: int, interval: float) -> tuple[Prober, list[ProbeReport]]:
    ident = ProcessIdentity.of(pid)
    ns = make_stamp(root, "owner", pid=ident.pid, start_ticks=ident.start_ticks)
    stamp = read_stamp(ns).stamp
    assert stamp is not None
    reports: list[ProbeReport] = []
    lock = threading.Lock()

    def sink(r: object) -> None:
        if not isinstance(r, ProbeReport):  # a lane's footprint between probes (Metering)
            return
        with lock:
            reports.append(r)

    p = Prober(interval, lambda: {str(ns): stamp}, lambda: [str(root)], sink)
    p.start()
    return p, reports


def test_an_owner_death_is_seen_at_once_while_quiet(root: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    prober, reports = _prober(root, proc.pid, interval=5.0)  # quiet rounds 25 s apart
    try:
        wait_for(lambda: reports)
        assert next(iter(reports[0].evidence.values())).liveness is Liveness.ALIVE
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        wait_for(
            lambda: any(
                ev.liveness is not Liveness.ALIVE for r in reports for ev in r.evidence.values()
            ),
            timeout=4.0,  # under one interval: the pidfd woke the prober
        )
        assert time.monotonic() - t0 < 4.0
    finally:
        prober.stop()
        proc.kill()


# What may call a probe while the lanes are quiet: the machine around them. Another user's
# process binding a port changes the listening sockets; the full scan comes on its own clock.
OUTSIDE = {"sockets", "full"}


def test_quiet_rounds_only_check_and_a_write_restores_the_pace(root: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    prober, reports = _prober(root, proc.pid, interval=0.2)
    try:
        wait_for(lambda: reports)
        first = len(reports)
        # Quiet: every QUIET_EVERY intervals the owner is asked whether it stopped; no probe
        # but those the machine around calls (this test does not own its sockets).
        wait_for(lambda: prober.checks >= 2)
        assert {r.cause for r in reports[first:]} <= OUTSIDE
        before = len(reports)
        prober.active()  # what the engine calls when a batch held a write
        # The next probe comes within the quiet check's period (a probe the machine around
        # called at that moment takes the write's turn: the pace is restored all the same).
        wait_for(lambda: len(reports) > before, 0.2 * QUIET_EVERY)
    finally:
        prober.stop()
        proc.kill()
        proc.wait()


def test_a_watched_owner_that_stops_is_seen_by_the_quiet_check(root: Path) -> None:
    """A pidfd tells of a death, not of a stop: the quiet rounds' check does. A probe the
    machine around called (OUTSIDE) may find the stop first: then again, a few times; the
    check must be the one that finds it at least once, and nothing else may."""
    proc = subprocess.Popen(["sleep", "60"])
    prober, reports = _prober(root, proc.pid, interval=0.2)

    def stopped_by() -> str | None:
        found = [r for r in list(reports) if _liveness(r) is Liveness.STOPPED]
        return found[0].cause if found else None

    try:
        causes = []
        for _ in range(3):
            wait_for(lambda: reports and _liveness(reports[-1]) is Liveness.ALIVE)
            del reports[:]
            os.kill(proc.pid, signal.SIGSTOP)
            causes.append(wait_for(stopped_by, timeout=0.2 * QUIET_EVERY * 3 + 5))
            os.kill(proc.pid, signal.SIGCONT)  # stopped: not watched, judged every interval
            if causes[-1] == "check":
                break
        assert set(causes) <= OUTSIDE | {"check"} and causes[-1] == "check", causes
        wait_for(lambda: _liveness(reports[-1]) is Liveness.ALIVE)
    finally:
        prober.stop()
        proc.kill()
        proc.wait()


def _liveness(report: ProbeReport) -> Liveness:
    return next(iter(report.evidence.values())).liveness


def test_owners_sharing_one_process_are_judged_once_each(root: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ident = ProcessIdentity.of(proc.pid)
        stamps = {}
        for lane in ("a", "b", "c"):
            ns = make_stamp(root, lane, pid=ident.pid, start_ticks=ident.start_ticks)
            stamp = read_stamp(ns).stamp
            assert stamp is not None
            stamps[str(ns)] = stamp
        stale = make_stamp(root, "d", pid=ident.pid, start_ticks=ident.start_ticks + 1)
        stale_stamp = read_stamp(stale).stamp
        assert stale_stamp is not None
        stamps[str(stale)] = stale_stamp
        got = judge_all(stamps, 1.0)
        one = {judge(k, s, 1.0) for k, s in stamps.items()}
        assert {ev.liveness for ev in got.values()} == {Liveness.ALIVE, Liveness.REUSED}
        assert set(got.values()) == one  # the same verdicts as one judge per stamp
        assert len({id(got[k]) for k in stamps if k != str(stale)}) == 1  # asked once
    finally:
        proc.kill()
        proc.wait()


def test_a_full_probe_with_a_memo_says_what_one_without_says(root: Path) -> None:
    ns = make_stamp(root, "owner")
    (ns / "tmp").mkdir()
    with open(ns / "tmp" / "out.log", "w") as out:
        proc = subprocess.Popen(["sleep", "60"], cwd=ns / "tmp", stdout=out)
    try:
        wait_for(lambda: process_state(proc.pid) == "S")
        ident = ProcessIdentity.of(proc.pid)
        make_stamp(root, "owner", pid=ident.pid, start_ticks=ident.start_ticks)
        stamp = read_stamp(ns).stamp
        assert stamp is not None
        stamps, prefixes = {str(ns): stamp}, [str(root)]

        def held(report: ProbeReport) -> list[Holding]:
            return [h for h in report.holdings or () if h.pid == proc.pid]

        memo = ProbeMemo()
        runs = [held(probe(stamps, prefixes, memo=memo)) for _ in range(4)]
        plain = held(probe(stamps, prefixes))
        assert {(h.kind, h.path, h.access) for h in plain} == {
            ("cwd", str(ns / "tmp"), None),
            ("fd", str(ns / "tmp" / "out.log"), "write"),
        }
        for run in runs:
            assert set(run) == set(plain)
        # Once the sleeper is vouched for, the very same Holdings come back.
        assert all(a is b for a, b in zip(runs[-2], runs[-1], strict=True))
    finally:
        proc.kill()
        proc.wait()


def test_the_worker_hands_the_same_owners_until_a_namespace_changes(root: Path) -> None:
    """Idle prober rounds tell "nothing new" by identity (no 1,000-stamp rebuild every 2 s):
    the same mapping until the model changes, then a fresh one that has the change."""
    make_stamp(root, "a")
    w = Worker([str(root)])
    w.list_root(str(root))
    w.keeper.commit()
    first = w.probes.local_stamps()
    assert len(first) == 1 and w.probes.local_stamps() is first
    b = make_stamp(root, "b")
    w.list_root(str(root))
    w.keeper.commit()
    second = w.probes.local_stamps()
    assert second is not first and set(second) == {*first, str(b)}
    assert w.probes.local_stamps() is second


def test_listing_a_root_asks_the_kernel_once_per_owner(root: Path) -> None:
    """The first picture judges 1,000 lanes of four owners with four reads of /proc, not
    1,000; each lane still gets its verdict, and a stamp of another owner its own."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ident = ProcessIdentity.of(proc.pid)
        mine = [make_stamp(root, f"lane{i}") for i in range(3)]
        theirs = make_stamp(root, "other", pid=ident.pid, start_ticks=ident.start_ticks)
        w = Worker([str(root)])
        w.list_root(str(root))
        w.keeper.commit()
        evidence = {str(ns): w.keeper.state.namespaces[str(ns)].liveness for ns in (*mine, theirs)}
        assert all(ev is not None and ev.liveness is Liveness.ALIVE for ev in evidence.values())
        assert len({id(evidence[str(ns)]) for ns in mine}) == 1  # asked once for the three
        assert evidence[str(theirs)] is not evidence[str(mine[0])]
        assert evidence[str(theirs)].pid == proc.pid  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def test_a_stamp_whose_claims_cannot_be_so_makes_no_lane_members(root: Path) -> None:
    """A stamp naming pid 1 would make every process a member of its lane; one naming a
    process of another uid, that process's whole tree. Neither becomes an attribution owner."""
    ours = read_stamp(make_stamp(root, "ours")).stamp
    init = read_stamp(make_stamp(root, "init", pid=1, start_ticks=1)).stamp
    other_uid = read_stamp(make_stamp(root, "theirs", uid=os.getuid() + 4242)).stamp
    assert ours is not None and init is not None and other_uid is not None
    stamps = {"ours": ours, "init": init, "theirs": other_uid}

    owners = owners_of(stamps, judge_all(stamps, time.time()))

    assert set(owners) == {"ours"}
    assert set(owners_of({"ours": ours, "theirs": other_uid})) == {"ours", "theirs"}, (
        "without evidence of the uid the stamp is taken as it claims"
    )


def _children_args(pid: int) -> set[str]:
    """The last argument of each of a process's children (an exec'd `sleep 61` gives "61")."""
    out: set[str] = set()
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for kid in kids:
            argv = Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")
            if len(argv) >= 2 and argv[0].endswith(b"sleep"):
                out.add(argv[-2].decode() if argv[-1] == b"" else argv[-1].decode())
    except (OSError, UnicodeDecodeError):
        pass
    return out


class QuietMachine:
    """ns_last_pid where no pid is ever handed out."""

    def read(self) -> int:
        return 4242


def _no_process_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quiet machine: no pid handed out, no socket opened or closed to listen. Neither can
    exist on a shared test machine (other tests and users start processes and servers; a change
    of the machine's listening set rightly wakes a probe, which reads the process table), so
    the prober's reads of ns_last_pid and of the listening set are the two things replaced."""
    monkeypatch.setattr(quietpace, "LastPid", QuietMachine)
    monkeypatch.setattr(prober_module, "_listening_now", lambda *a, **k: frozenset())


def test_with_no_process_started_the_quiet_check_reads_no_process_table(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_process_starts(monkeypatch)
    proc = subprocess.Popen(["sleep", "60"])
    prober, reports = _prober(root, proc.pid, interval=0.2)

    def latest() -> Liveness | None:
        return next(iter(reports[-1].evidence.values())).liveness if reports else None

    tables: list[int] = []
    real_table = prober_module.holders.process_table
    try:
        wait_for(lambda: latest() is Liveness.ALIVE)
        monkeypatch.setattr(
            prober_module.holders,
            "process_table",
            lambda *a, **k: tables.append(1) or real_table(*a, **k),
        )
        wait_for(lambda: prober.light_checks >= 2)
        assert tables == []  # owners asked one stat each, no /proc scan
        os.kill(proc.pid, signal.SIGSTOP)  # still seen by the light check
        wait_for(lambda: latest() is Liveness.STOPPED, timeout=0.2 * QUIET_EVERY * 3 + 5)
        os.kill(proc.pid, signal.SIGCONT)
    finally:
        prober.stop()
        proc.kill()
        proc.wait()


def test_with_no_process_started_a_member_that_exits_is_seen_by_the_light_check(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Membership is read in full only when a process started; with none started, the quiet
    check still reads each member's stat: an exit is seen within a quiet round."""
    _no_process_starts(monkeypatch)
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 61 & wait"])
    # With no process start ever seen, membership is read in full once, at the first probe: the
    # shell's two sleepers must exist (forked and exec'd) by then, or they are never members (under
    # load the shell can be slower than the first probe; seen in CI).
    wait_for(lambda: {"60", "61"} <= _children_args(proc.pid))
    prober, reports = _prober(root, proc.pid, interval=0.2)

    def members() -> set[str]:
        if not reports:
            return set()
        return {m.command for ev in reports[-1].evidence.values() for m in ev.members}

    try:
        wait_for(lambda: any("61" in c for c in members()) and any("60" in c for c in members()))
        ev = next(iter(reports[-1].evidence.values()))
        sleeper = next(m.pid for m in ev.members if "61" in m.command)
        wait_for(lambda: prober.light_checks >= 1)
        light = prober.light_checks
        os.kill(sleeper, signal.SIGKILL)
        wait_for(lambda: not any("61" in c for c in members()), timeout=0.2 * QUIET_EVERY * 3 + 5)
        assert prober.light_checks > light  # seen by a light check, not by a probe due anyway
    finally:
        prober.stop()
        proc.kill()
        proc.wait()
