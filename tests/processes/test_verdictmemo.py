"""The prober's memo of verdicts (`processes/verdictmemo.py`): a quiet lane's verdict is not
made again, a change elsewhere on the machine keeps it, and whatever the verdict looked at
(a new child of the owner, a process joining the command's group, an owner stopped) makes it
again, at once. Every memo'd verdict says what a probe without a memo says."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import Stamp, read_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, process_state
from lanewatch.model.classify import LivenessEvidence
from lanewatch.processes.prober import ProbeMemo, ProbeReport, probe
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp
from tests.kits.prockit import DEADLINE, read_line

# The owner: forks on "fork" a child that leads a group of its own and sleeps.
OWNER = r"""
import os, signal, sys
print("ready", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        signal.pause()
        os._exit(0)
    print(pid, flush=True)
"""

# Not the owner's descendant: joins process group ARGV[1] on "join" (the same session).
JOINER = r"""
import os, sys
print("ready", flush=True)
sys.stdin.readline()
os.setpgid(0, int(sys.argv[1]))
print("joined", flush=True)
sys.stdin.read()
"""


@dataclass
class Lane:
    root: Path
    ns: Path
    owner: subprocess.Popen[bytes]
    memo: ProbeMemo

    def probe(self, stamp: Stamp) -> LivenessEvidence:
        """One probe with the memo, checked against one without."""
        stamps, prefixes = {str(self.ns): stamp}, [str(self.root)]
        kept = probe(stamps, prefixes, memo=self.memo).evidence[str(self.ns)]
        plain = probe(stamps, prefixes).evidence[str(self.ns)]
        assert kept.same_verdict(plain), (kept, plain)
        return kept

    def fork(self) -> int:
        assert self.owner.stdin is not None
        self.owner.stdin.write(b"fork\n")
        self.owner.stdin.flush()
        child = int(read_line(self.owner))
        wait_for(lambda: process_state(child) == "S", DEADLINE, what="the child to sleep")
        return child


@pytest.fixture
def lane(root: Path) -> Iterator[Lane]:
    ns = make_stamp(root, "owner")
    (ns / "tmp").mkdir()
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        cwd=ns / "tmp",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert read_line(owner) == "ready"
        yield Lane(root, ns, owner, ProbeMemo())
    finally:
        kill_group_and(owner)


def kill_group_and(proc: subprocess.Popen[bytes]) -> None:
    for child in _children(proc.pid):
        _kill(child)
    proc.kill()
    proc.wait()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def stamp_of(lane: Lane, **changes: object) -> Stamp:
    ident = ProcessIdentity.of(lane.owner.pid)
    make_stamp(lane.root, "owner", pid=ident.pid, start_ticks=ident.start_ticks, **changes)
    stamp = read_stamp(lane.ns).stamp
    assert stamp is not None
    return stamp


def reused(lane: Lane, stamp: Stamp) -> LivenessEvidence:
    """Probe until the verdict is the memo's (the same members, not made again): the first
    probe makes it, the next reuses it unless something it looked at changed meanwhile."""
    got: list[LivenessEvidence] = [lane.probe(stamp)]

    def again() -> bool:
        got.append(lane.probe(stamp))
        return got[-1].members is got[-2].members

    wait_for(again, DEADLINE, what="a verdict the memo kept")
    return got[-1]


def test_a_quiet_lane_is_not_judged_again_and_a_change_elsewhere_keeps_it(lane: Lane) -> None:
    child = lane.fork()
    stamp = stamp_of(lane)
    first = reused(lane, stamp)
    assert first.liveness is Liveness.ALIVE
    assert [m.pid for m in first.members] == [child]
    # Another process starts and ends elsewhere: this lane's verdict stands, judged anew in time.
    subprocess.run(["true"], check=True)
    other = subprocess.Popen(["sleep", "60"])
    try:
        wait_for(lambda: process_state(other.pid) == "S", DEADLINE, what="the sleeper")
        now = lane.probe(stamp)
        assert now.members is first.members
        assert now.at >= first.at and now is not first
    finally:
        other.kill()
        other.wait()


def test_a_new_child_of_the_owner_is_a_member_at_once(lane: Lane) -> None:
    stamp = stamp_of(lane)
    assert reused(lane, stamp).members == ()
    child = lane.fork()
    assert [m.pid for m in lane.probe(stamp).members] == [child]
    with_child = reused(lane, stamp)
    _kill(child)
    wait_for(lambda: process_state(child) in (None, "Z"), DEADLINE, what="the child to end")
    after = lane.probe(stamp)
    assert after.members != with_child.members
    assert child not in [m.pid for m in after.members]


def test_a_stopped_owner_is_judged_again(lane: Lane) -> None:
    stamp = stamp_of(lane)
    reused(lane, stamp)
    os.kill(lane.owner.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: process_state(lane.owner.pid) == "T", DEADLINE, what="the stop")
        assert lane.probe(stamp).liveness is Liveness.STOPPED
    finally:
        os.kill(lane.owner.pid, signal.SIGCONT)
    wait_for(lambda: process_state(lane.owner.pid) != "T", DEADLINE, what="the resume")
    assert lane.probe(stamp).liveness is Liveness.ALIVE


def test_a_process_joining_the_command_s_group_is_a_member_at_once(lane: Lane) -> None:
    command = lane.fork()  # leads its own group, as `lanewatch run`'s command does
    ticks = ProcessIdentity.of(command).start_ticks
    stamp = stamp_of(lane, child_pid=command, child_start_ticks=ticks, pgid=command)
    assert [m.pid for m in reused(lane, stamp).members] == [command]
    joiner = subprocess.Popen(
        [sys.executable, "-c", JOINER, str(command)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert read_line(joiner) == "ready"
        assert [m.pid for m in reused(lane, stamp).members] == [command]  # not yet in it
        assert joiner.stdin is not None
        joiner.stdin.write(b"join\n")
        joiner.stdin.flush()
        assert read_line(joiner) == "joined"
        members = {m.pid: m.how for m in lane.probe(stamp).members}
        assert members == {command: "descendant", joiner.pid: "group"}
    finally:
        joiner.kill()
        joiner.wait()


def test_the_owner_made_of_the_same_verdict_is_the_same_owner(lane: Lane) -> None:
    stamp = stamp_of(lane)
    stamps, prefixes = {str(lane.ns): stamp}, [str(lane.root)]
    reused(lane, stamp)

    def owner(report: ProbeReport) -> object:
        return report.owners[str(lane.ns)]

    before = owner(probe(stamps, prefixes, memo=lane.memo))
    assert owner(probe(stamps, prefixes, memo=lane.memo)) is before
    child = lane.fork()
    after = owner(probe(stamps, prefixes, memo=lane.memo))
    assert after is not before and after == owner(probe(stamps, prefixes))
    assert child in after.pids  # type: ignore[attr-defined]
