"""A probe asks `members_of` about every lane with one process table: the children index is
built once per table (`processes/members._Tree`), and never answers for another table."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux import procid
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.processes import members
from lanewatch.processes.holders import process_table
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp


@pytest.mark.processes
def test_each_table_answers_with_its_own_children(root: Path) -> None:
    runner = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        ident = ProcessIdentity.of(runner.pid)
        ns = make_stamp(root, "tree", pid=ident.pid, start_ticks=ident.start_ticks)
        stamp = read_stamp(ns).stamp
        assert stamp is not None

        def found(table: dict[int, object]) -> set[int]:
            got = members.members_of(stamp, str(ns), table, runner_alive=True)  # type: ignore[arg-type]
            return {m.pid for m in got}

        wait_for(lambda: found(process_table()), what="the sleep as a member")
        first = process_table()
        (child,) = found(first)
        assert found(first) == {child}  # asked again with the same table: the same answer
        start = first[child].start_ticks
        os.kill(child, signal.SIGKILL)
        wait_for(lambda: procid.ended(child, start), what="the sleep's end")
        later = process_table()
        assert child not in found(later)  # another table: indexed afresh
        del first[child]  # the same table changed since it was indexed: indexed afresh too
        assert found(first) == set()
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
