"""Signalling a process group a test learned of (the CMD group of a `lanewatch run`), only
while the number is still that group's.

A group whose leader is not our child is not held for us: once its last process has ended its
number is free, and on a machine with `pid_max` 32768 beside a fork load (the flake hunt's
stress-ng, another suite) the kernel hands it to a new process within minutes. A teardown that
SIGKILLed every group it had learned of then killed a stranger's: the churn journey's lane,
started seconds before by the other job of the same CI, died with exit 137 while its runner
lived ("released by its owner (exit code 137)", the test saw it running). So the leader's start
time is taken when the group is learned, and the group is signalled only while the process of
that number is the same leader, or none: without its leader the group lives on only while it
has members, and while it does no new process can take its number."""

from __future__ import annotations

import contextlib
import os
import signal

from lanewatch.linux.proc import read_stat


def leader_ticks(pgid: int) -> int | None:
    """The start ticks of `pgid`'s leader now; None if no process has that number, or the one
    that has it leads no group of that number."""
    st = read_stat(pgid)
    return st.start_ticks if st is not None and st.pgid == pgid else None


def signal_group(pgid: int, ticks: int | None, sig: int = signal.SIGKILL) -> bool:
    """`sig` to group `pgid` learned with its leader's start `ticks`, if it is still that
    group; whether it was sent."""
    if pgid <= 1 or pgid == os.getpgrp():
        return False  # 0 would be our own group, 1 init's: never
    st = read_stat(pgid)
    if st is not None and (ticks is None or st.start_ticks != ticks):
        return False  # the number is another process's now (or we never knew whose)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
        return True
    return False


class Groups(list[int]):
    """Process groups a test learns of, each with its leader's start time taken at `append`;
    `kill` SIGKILLs those still theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.ticks: dict[int, int | None] = {}

    def append(self, pgid: int) -> None:
        self.ticks.setdefault(pgid, leader_ticks(pgid))
        super().append(pgid)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        for pgid in dict.fromkeys(self):
            signal_group(pgid, self.ticks.get(pgid), sig)
