"""`ns_last_pid` through one descriptor kept open (`linux/proc.LastPid`): each read is the
kernel's answer at that moment, as an open per read gives it, and a closed reader still reads."""

from __future__ import annotations

import subprocess

from lanewatch.linux.proc import PID_MAX, LastPid, read_int


def handed_out_between(pid: int, before: int, after: int) -> bool:
    """`pid` was handed out after `before` and no later than `after` (pids wrap at pid_max)."""
    pid_max = read_int(PID_MAX) or 1 << 22
    return 0 < (pid - before) % pid_max <= (after - before) % pid_max


def test_a_kept_descriptor_reads_each_pid_handed_out_since() -> None:
    last = LastPid()
    try:
        for _ in range(3):  # the same descriptor, read again and again
            before = last.read()
            assert before is not None
            child = subprocess.Popen(["true"])
            child.wait()
            after = last.read()
            assert after is not None and handed_out_between(child.pid, before, after)
    finally:
        last.close()


def test_a_closed_reader_opens_the_file_each_time() -> None:
    last = LastPid()
    before = last.read()
    last.close()
    child = subprocess.Popen(["true"])
    child.wait()
    after = last.read()
    assert before is not None and after is not None
    assert handed_out_between(child.pid, before, after)
    last.close()  # twice: harmless
