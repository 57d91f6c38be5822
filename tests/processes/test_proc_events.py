"""The process connector's messages read two ways: `parse` (objects) and `lives` (the
listener's plain tuples, one unpack a message). Both must say the same of the same bytes."""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import time

import pytest

from lanewatch.linux import proc_events as pe
from lanewatch.processes.proclives import ProcLives
from tests.conftest import wait_for

HEAD = struct.Struct("=IHHII")
CN = struct.Struct("=IIIIHH")
EVENT = struct.Struct("=IIQ")


def message(what: int, ns: int, body: bytes) -> bytes:
    event = EVENT.pack(what, 1, ns) + body
    cn = CN.pack(pe.CN_IDX_PROC, pe.CN_VAL_PROC, 0, 0, len(event), 0) + event
    data = HEAD.pack(HEAD.size + len(cn), pe.NLMSG_DONE, 0, 0, 0) + cn
    return data + b"\0" * (-len(data) % 4)


def fork(parent: int, pid: int, tgid: int, ns: int) -> bytes:
    return message(pe.PROC_EVENT_FORK, ns, struct.pack("=IIII", parent, parent, pid, tgid))


def exit_(pid: int, tgid: int, ns: int) -> bytes:
    return message(pe.PROC_EVENT_EXIT, ns, struct.pack("=IIIIII", pid, tgid, 0, 17, 0, 0))


def as_tuples(data: bytes) -> list[tuple[bool, int, int, int]]:
    return [(e.kind == "fork", e.tgid, e.parent, e.ns) for e in pe.parse(data)]


def test_lives_says_what_parse_says() -> None:
    data = b"".join(
        [
            fork(10, 11, 11, 1_000),  # a process
            fork(10, 12, 11, 2_000),  # a thread of 11: skipped by both
            exit_(12, 11, 3_000),  # the thread's exit: skipped
            exit_(11, 11, 4_000),
            message(0x2, 5_000, b"\0" * 24),  # an exec: neither fork nor exit
        ]
    )
    assert pe.lives(data) == as_tuples(data) == [(True, 11, 10, 1_000), (False, 11, 0, 4_000)]
    for cut in range(len(data)):  # a truncated buffer: the same prefix from both
        assert pe.lives(data[:cut]) == as_tuples(data[:cut])


@pytest.mark.privileged
def test_the_listener_keeps_every_life_from_the_kernel() -> None:
    lives = ProcLives()
    if not lives.start():
        pytest.skip(f"no process connector here: {lives.reason}")
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        lives.sync()
        mine = lives.lives_of(pid)
        assert mine and mine[-1].parent == os.getpid() and mine[-1].ended is not None
    finally:
        lives.close()


@pytest.mark.privileged
def test_the_listener_takes_each_life_as_it_comes_and_ends_when_closed() -> None:
    """The listener sleeps until the kernel sends or `close` wakes it: a child's fork and exit
    reach the table with nobody asking (`sync` is not called), and `close` ends the thread."""
    lives = ProcLives()
    if not lives.start():
        pytest.skip(f"no process connector here: {lives.reason}")
    try:
        t0 = time.monotonic()  # the connector stamps each message with this clock
        child = subprocess.Popen(["true"])
        child.wait()
        wait_for(
            lambda: any(
                life.born >= t0 and life.parent == os.getpid() and life.ended is not None
                for life in lives.lives_of(child.pid)
            ),
            what="the child's exit in the table, taken by the listener",
        )
    finally:
        lives.close()
    assert lives._thread is not None and not lives._thread.is_alive()
