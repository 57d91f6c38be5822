"""`liveness` judged with a process table read a moment ago: a table older than the process
it is asked about (the pid freed and reused since the read: under fork load pids wrap in
seconds) must not call a running owner reused. The engine judges every owner of one tail
batch on one table (`WalkIntake.one_table`), so the table can be older than a new lane."""

from __future__ import annotations

import os
from dataclasses import replace

from lanewatch.linux import procid
from lanewatch.linux.proc import ProcStat, parse_stat
from lanewatch.linux.procid import Liveness, ProcessIdentity


def _own_stat() -> ProcStat:
    with open(f"/proc/{os.getpid()}/stat", "rb") as f:
        st = parse_stat(os.getpid(), f.read())
    assert st is not None
    return st


def test_a_table_that_holds_the_pids_earlier_process_does_not_make_a_running_owner_reused() -> None:
    me = ProcessIdentity.current()
    earlier = replace(_own_stat(), start_ticks=me.start_ticks - 100)  # the pid's last owner
    assert procid.liveness(me, earlier)[0] is Liveness.ALIVE


def test_a_table_that_holds_the_owner_itself_is_believed() -> None:
    me = ProcessIdentity.current()
    stopped = replace(_own_stat(), state="T")  # what the table says is what is judged
    assert procid.liveness(me, stopped)[0] is Liveness.STOPPED


def test_an_owner_gone_from_a_reused_pid_is_still_reused() -> None:
    me = ProcessIdentity.current()
    later = replace(me, start_ticks=me.start_ticks - 100)  # a stamp of the pid's last owner
    assert procid.liveness(later, _own_stat())[0] is Liveness.REUSED
