"""`/proc/PID/status` parsed by looking up the four lines it needs (`linux/proc.parse_status`):
the same answer as reading every line, for every process here and for broken content. And the
prober's owner uid from it (`status_uid`): what `procid.uid_and_tgid` accepts, nothing else."""

from __future__ import annotations

import os

import pytest

from lanewatch.linux.proc import ProcStatus, parse_status, status_uid


def every_line(data: bytes) -> ProcStatus:
    """The reference: every line split at its first colon."""
    state = tgid = uid = euid = cap = None
    for line in data.splitlines():
        key, _, value = line.partition(b":")
        try:
            if key == b"State":
                state = value.split()[0].decode("ascii", "replace")
            elif key == b"Tgid":
                tgid = int(value)
            elif key == b"Uid":
                ids = value.split()
                uid, euid = int(ids[0]), int(ids[1])
            elif key == b"CapEff":
                cap = int(value, 16)
        except (IndexError, ValueError):
            pass
    return ProcStatus(state, tgid, uid, euid, cap)


def test_every_process_here_reads_the_same() -> None:
    seen = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                data = f.read()
        except OSError:
            continue  # gone meanwhile
        assert parse_status(data) == every_line(data), data[:200]
        assert status_uid(data) == _uid(data), data[:200]
        seen += 1
    assert seen > 0


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"Name:\tx\nState:\n",
        b"Uid:\t1\t2\t3\t4",
        b"State:\tS (sleeping)\nUid:\tx\n",
        b"Tgid:\t12\nCapEff:\tzz",
        b"Uid:\t5\n",
        b"Name:\tTgid: 7\nTgid:\t8\n",  # a command named like a key: only a line's start counts
        b"Name:\tx\nState:\tT (stopped)\nTgid:\t9\nUid:\t0\t1000\t0\t0\nCapEff:\t000001ffffffffff",
    ],
)
def test_broken_or_partial_content_reads_the_same(data: bytes) -> None:
    assert parse_status(data) == every_line(data)
    assert status_uid(data) == _uid(data)


def _uid(data: bytes) -> int | None:
    """The uid `procid.owner_uid` takes from a status: none without both Uid and Tgid."""
    status = every_line(data)
    return status.uid if status.tgid is not None else None
