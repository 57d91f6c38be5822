"""The prober's quiet rounds read only what can have changed (`processes/quietpace.py`): the
listening sockets while a process started lately, the footprints of lanes that use CPU, the
full /proc scan when a pid was handed out or something was probed for a cause; and a member
whose stat cannot be read is never taken for ended (`linux/procid.ended`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux import proc, procid
from lanewatch.linux.procid import Liveness, ProcessIdentity
from lanewatch.model.views import Footprint
from lanewatch.processes import prober as prober_module
from lanewatch.processes import quietpace
from lanewatch.processes.prober import QUIET_EVERY, Prober, ProbeReport, _stops_changed, judge_all
from lanewatch.processes.quietpace import (
    FULL_SCAN_EVERY,
    FULL_SCAN_QUIET,
    SOCKETS_SLOW,
    START_WINDOW,
    QuietPace,
)
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp


class LastPid:
    """ns_last_pid as the pace reads it: a quiet machine (no pid handed out) cannot exist on a
    shared test machine, so this one read is replaced; `start` hands a pid out."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pid = 4242
        monkeypatch.setattr(quietpace, "LastPid", lambda: self)  # the pace's, and its prober's

    def read(self) -> int | None:
        return self.pid

    def start(self) -> None:
        self.pid += 1


class NoLastPid:
    """A kernel without ns_last_pid (or one we may not read)."""

    def read(self) -> int | None:
        return None


def _footprint(cpu: float | None) -> Footprint:
    return Footprint(0.0, cpu, 2.0, 1 << 20, 1, "rules")


def test_sockets_are_read_often_only_after_a_process_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pids = LastPid(monkeypatch)
    pace = QuietPace()
    assert pace.sockets_due(100.0)  # the first look: a start for all it knows
    assert pace.sockets_due(100.5)  # inside the window it opened
    quiet = 100.0 + START_WINDOW + 0.1
    assert not pace.sockets_due(quiet)  # no pid handed out since: not every round
    assert pace.sockets_due(100.5 + SOCKETS_SLOW)  # the slow pass
    pids.start()
    later = 100.5 + SOCKETS_SLOW + 0.5
    assert pace.sockets_due(later)  # a process started: the window opens again
    assert pace.sockets_due(later + 0.5)


def test_without_ns_last_pid_every_look_counts_as_a_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quietpace, "LastPid", NoLastPid)
    pace = QuietPace()
    assert all(pace.sockets_due(100.0 + 60 * i) for i in range(5))
    pace.probed(100.0, full=True, caused=False)
    assert pace.full_due(100.0 + FULL_SCAN_EVERY)


def test_the_full_scan_waits_for_a_change_or_the_slow_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    pids = LastPid(monkeypatch)
    pace = QuietPace()
    assert pace.full_due(0.0)  # none yet
    pace.probed(0.0, full=True, caused=False)
    assert not pace.full_due(FULL_SCAN_EVERY - 1)
    assert not pace.full_due(FULL_SCAN_EVERY + 1)  # nothing happened: not yet
    pace.probed(FULL_SCAN_EVERY + 2, full=False, caused=True)  # a write, a stamp, a death...
    assert pace.full_due(FULL_SCAN_EVERY + 3)
    pace.probed(FULL_SCAN_EVERY + 3, full=True, caused=False)
    t = 2 * FULL_SCAN_EVERY + 4
    assert not pace.full_due(t)
    pids.start()  # a process started: it may hold something
    assert pace.full_due(t)
    pace.probed(t, full=True, caused=False)
    assert not pace.full_due(t + FULL_SCAN_QUIET - 1)
    assert pace.full_due(t + FULL_SCAN_QUIET)  # the safety net


def test_footprints_between_checks_only_of_lanes_using_cpu() -> None:
    pace = QuietPace()
    pace.read(
        {"busy": _footprint(12.5), "idle": _footprint(0.0), "new": _footprint(None)}, every=True
    )
    assert pace.metered({"busy", "idle", "new", "other"}) == {"busy", "new"}
    pace.read({"busy": _footprint(0.0)}, every=False)  # went quiet
    assert pace.metered({"busy", "idle", "new"}) == {"new"}
    pace.read({"idle": _footprint(3.0)}, every=True)  # the check found it running again
    assert pace.metered({"busy", "idle", "new"}) == {"idle"}


def _denied(
    pid: int, real: Callable[[int | str, str], bytes | None]
) -> Callable[..., bytes | None]:
    def read(p: int | str, name: str) -> bytes | None:
        if str(p) == str(pid) and name == "stat":
            raise PermissionError(13, "Permission denied")
        return real(p, name)

    return read


@pytest.mark.processes
def test_a_member_whose_stat_is_denied_is_not_taken_for_ended(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A denied read (hidepid, another user's process) says nothing about an end: the light
    quiet check must not report a change it cannot see. /proc/PID/stat cannot be denied to
    root here, so the one read is made to fail as it would."""
    lane = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    try:
        ident = ProcessIdentity.of(lane.pid)
        ns = make_stamp(root, "owner", pid=ident.pid, start_ticks=ident.start_ticks)
        stamp = read_stamp(ns).stamp
        assert stamp is not None
        stamps = {str(ns): stamp}

        def members() -> tuple[int, ...]:
            return tuple(
                m.pid for ev in judge_all(stamps, time.time()).values() for m in ev.members
            )

        wait_for(lambda: len(members()) == 1, what="the lane's sleep as its member")
        last = judge_all(stamps, time.time())
        (member,) = next(iter(last.values())).members
        monkeypatch.setattr(procid, "read_file", _denied(member.pid, procid.read_file))
        monkeypatch.setattr(proc, "read_file", _denied(member.pid, proc.read_file))
        assert procid.liveness(ProcessIdentity(member.pid, member.start_ticks, ""))[0] is (
            Liveness.UNKNOWN
        )
        assert not procid.ended(member.pid, member.start_ticks)
        assert not _stops_changed(stamps, last)
        monkeypatch.undo()
        os.kill(member.pid, signal.SIGKILL)
        wait_for(lambda: procid.ended(member.pid, member.start_ticks), what="the member's end")
        assert _stops_changed(stamps, last)
    finally:
        lane.kill()
        lane.wait()


BURN = "while True: pass"


@pytest.mark.processes
def test_between_quiet_checks_only_a_busy_lanes_members_are_read(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle lane's member is read at the quiet check (every QUIET_EVERY rounds), a lane
    whose member burns CPU at every round."""
    LastPid(monkeypatch)
    idle = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    burn = [sys.executable, "-c", BURN]
    busy = subprocess.Popen(["sh", "-c", '"$@" & wait', "sh", *burn], start_new_session=True)
    stamps = {}
    for name, p in (("idle", idle), ("busy", busy)):
        ident = ProcessIdentity.of(p.pid)
        ns = make_stamp(root, name, pid=ident.pid, start_ticks=ident.start_ticks)
        s = read_stamp(ns).stamp
        assert s is not None
        stamps[name] = s
    reads: list[tuple[int, int]] = []  # (pid, the prober's quiet checks so far)
    lock = threading.Lock()
    reports: list[ProbeReport] = []
    prober = Prober(0.2, lambda: stamps, lambda: [str(root)], lambda r: reports.append(r))  # type: ignore[arg-type, misc]
    real = prober_module.fresh_stat

    def counted(pid: int) -> object:
        with lock:
            reads.append((pid, prober.checks))
        return real(pid)

    monkeypatch.setattr(prober_module, "fresh_stat", counted)
    prober.start()
    try:
        wait_for(lambda: prober.checks >= 3, timeout=0.2 * QUIET_EVERY * 6 + 10)
        first = prober.checks
        wait_for(lambda: prober.checks >= first + 2, timeout=0.2 * QUIET_EVERY * 6 + 10)
        evidence = next(r for r in reversed(reports) if isinstance(r, ProbeReport)).evidence
        idle_pids = {m.pid for m in evidence["idle"].members}
        busy_pids = {m.pid for m in evidence["busy"].members}
        assert idle_pids and busy_pids
        with lock:
            window = [(pid, c) for pid, c in reads if first <= c < first + 2]
        idle_reads = sum(1 for pid, _ in window if pid in idle_pids)
        busy_reads = sum(1 for pid, _ in window if pid in busy_pids)
        assert idle_reads <= 2, window  # at the checks only
        assert busy_reads > idle_reads, window
    finally:
        prober.stop()
        for p in (idle, busy):
            os.killpg(p.pid, signal.SIGKILL)  # the shell and its child, by their own group
            p.wait()
