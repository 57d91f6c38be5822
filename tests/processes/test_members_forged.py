"""A forged stamp's runner: init's tree, or another uid's process's, is never taken for the
lane's (a stamp naming pid 1 made `clear` say "12 process(es) of the lane still run", listing
unrelated system processes). A real runner's children still are its members."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.processes.holders import process_table
from lanewatch.processes.members import members_of
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp

PARENT = "import subprocess, sys; subprocess.Popen(['sleep', '60']); sys.stdin.read()"


def members(ns: Path) -> list[int]:
    stamp = read_stamp(ns).stamp
    assert stamp is not None
    return [m.pid for m in members_of(stamp, str(ns), process_table(), runner_alive=True)]


def parent_with_child(procs: list[subprocess.Popen[bytes]]) -> tuple[ProcessIdentity, int]:
    """A process of ours with one child (a sleep), both running."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE)
    procs.append(parent)

    def child() -> int | None:
        kids = [st.pid for st in process_table().values() if st.ppid == parent.pid]
        return kids[0] if kids else None

    wait_for(lambda: child() is not None, timeout=20)
    return ProcessIdentity.of(parent.pid), child() or 0


def test_a_stamp_naming_pid_1_has_no_members(root: Path) -> None:
    init = ProcessIdentity.of(1)
    ns = make_stamp(root, "forged-init", pid=1, start_ticks=init.start_ticks)
    assert members(ns) == []


def test_a_stamp_naming_another_uids_process_has_none_of_its_children(
    root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    runner, child = parent_with_child(procs)
    forged = make_stamp(
        root, "forged-uid", pid=runner.pid, start_ticks=runner.start_ticks, uid=os.getuid() + 1
    )
    assert child not in members(forged)
    real = make_stamp(root, "real", pid=runner.pid, start_ticks=runner.start_ticks)
    assert child in members(real), "a real runner's child is the lane's"
