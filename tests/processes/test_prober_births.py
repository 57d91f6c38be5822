"""With the process connector, the prober's quiet rounds tell pids handed out to processes
already gone from a process that started and still runs (`ProcLives.born_alive_since`): the
listening sockets' window and the stop check's full membership read follow a start that still
runs, not every pid the machine hands out (counted, not timed)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity
from lanewatch.processes import prober as prober_module
from lanewatch.processes import quietpace
from lanewatch.processes.deaths import DeathWatch
from lanewatch.processes.prober import QUIET_EVERY, Prober, ProbeReport
from lanewatch.processes.proclives import ProcLives
from lanewatch.processes.quietpace import SOCKETS_EVERY, SOCKETS_SLOW, START_WINDOW, QuietPace
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp
from tests.processes.test_proc_events import exit_, fork


def _taken(lives: ProcLives, *messages: bytes) -> None:
    with lives._lock:
        lives._take([bytearray(m) for m in messages])


def test_born_alive_since_tells_a_start_that_still_runs_from_one_gone() -> None:
    """Messages as the kernel sends them (the connector's own bytes), fed to the table; the
    real connector is checked below, where only "still runs" can be asserted."""
    lives = ProcLives()
    assert lives.born_alive_since(0.0) is None  # not listening: cannot tell
    lives.available, lives._whole_from = True, time.monotonic() - 10
    base = time.monotonic() - 5
    ns = lambda t: int((base + t) * 1e9)  # noqa: E731
    _taken(lives, fork(1, 11, 11, ns(1)), exit_(11, 11, ns(2)), fork(1, 12, 12, ns(3)))
    assert lives.born_alive_since(base) is True  # 12 still runs
    assert lives.born_alive_since(base + 3.5) is False  # nothing born since
    _taken(lives, exit_(12, 12, ns(4)))
    assert lives.born_alive_since(base) is False  # both gone: every process now ran then
    _taken(lives, fork(1, 13, 13, ns(4.5)))
    assert lives.born_alive_since(base + 4.2) is True
    assert lives.born_alive_since(base + 4.8) is False
    assert lives.born_alive_since(base - 20) is None  # before the record is whole
    lives._losses.append((base + 0.5, base + 0.6))  # the kernel dropped messages then
    assert lives.born_alive_since(base) is None
    assert lives.born_alive_since(base + 4.8) is False


@pytest.mark.privileged
@pytest.mark.processes
def test_the_connector_says_a_child_that_still_runs_was_born() -> None:
    """The table's clock is `time.monotonic()`'s: a child started after `t` and running now
    is a birth since `t` (that none is, other users' processes decide on a shared machine)."""
    lives = ProcLives()
    if not lives.start():
        pytest.skip(f"no process connector here: {lives.reason}")
    child = None
    try:
        t = time.monotonic()
        child = subprocess.Popen(["sleep", "60"])
        answer = lives.born_alive_since(t)
        if answer is None:  # only when the kernel dropped messages (a fork storm beside us)
            assert lives.stats["losses"]
            pytest.skip("the process connector dropped messages during the test")
        assert answer is True
        (life,) = [x for x in lives.lives_of(child.pid) if x.born >= t]
        assert life.ended is None and life.parent == os.getpid()
    finally:
        if child is not None:
            child.kill()
            child.wait()
        lives.close()
    assert lives.born_alive_since(t) is None  # closed: cannot tell


class MovingPid:
    """ns_last_pid on a busy machine: another pid handed out at every read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pid = 4242
        monkeypatch.setattr(quietpace, "LastPid", lambda: self)  # the pace's, and its prober's

    def read(self) -> int:
        self.pid += 1
        return self.pid


@pytest.mark.parametrize("answer", [False, True, None])
def test_the_sockets_window_opens_for_a_start_that_still_runs(
    monkeypatch: pytest.MonkeyPatch, answer: bool | None
) -> None:
    MovingPid(monkeypatch)
    asked: list[float] = []
    pace = QuietPace()
    pace.births = lambda t: asked.append(t) or answer
    assert pace.sockets_due(100.0)  # the first look: the slow pass is due
    # Pids were handed out since: a window (a read every SOCKETS_EVERY) only if a process
    # born since the last look still runs, or if that cannot be told.
    assert pace.sockets_due(100.5) is (answer is not False)
    assert asked[-1] == 100.0  # born since the last look
    assert pace.sockets_due(101.0) is (answer is not False)
    assert pace.sockets_due(100.0 + SOCKETS_SLOW)  # the slow pass, whatever the answer


def _stamped(root: Path, pid: int) -> tuple[str, object]:
    ident = ProcessIdentity.of(pid)
    ns = make_stamp(root, "owner", pid=ident.pid, start_ticks=ident.start_ticks)
    stamp = read_stamp(ns).stamp
    assert stamp is not None
    return str(ns), stamp


def _owner_prober(root: Path, pid: int, interval: float) -> tuple[Prober, list[ProbeReport]]:
    """A prober (not started) of one lane whose owner is `pid`, and the reports it sends."""
    key, stamp = _stamped(root, pid)
    reports: list[ProbeReport] = []
    prober = Prober(
        interval,
        lambda: {key: stamp},  # type: ignore[dict-item]
        lambda: [str(root)],
        lambda r: reports.append(r) if isinstance(r, ProbeReport) else None,
    )
    return prober, reports


@pytest.mark.processes
@pytest.mark.parametrize("gone", [True, False])
def test_pids_handed_out_to_processes_gone_keep_the_stop_check_light(
    root: Path, monkeypatch: pytest.MonkeyPatch, gone: bool
) -> None:
    """Pids move at every look (a busy machine); when every process born since the last full
    read has ended, the stop check reads no process table, and a stop is still seen; when one
    still runs, membership is read in full as before."""
    MovingPid(monkeypatch)
    monkeypatch.setattr(prober_module, "_listening_now", lambda *a, **k: frozenset())
    proc = subprocess.Popen(["sleep", "60"])
    prober, reports = _owner_prober(root, proc.pid, 0.2)
    prober.use_births(lambda t: not gone)
    tables: list[int] = []
    real_table = prober_module.holders.process_table

    def latest() -> Liveness | None:
        return next(iter(reports[-1].evidence.values())).liveness if reports else None

    prober.start()
    try:
        wait_for(lambda: latest() is Liveness.ALIVE)
        monkeypatch.setattr(
            prober_module.holders,
            "process_table",
            lambda *a, **k: tables.append(1) or real_table(*a, **k),
        )
        wait_for(lambda: prober.checks >= 2, timeout=0.2 * QUIET_EVERY * 6 + 10)
        if gone:
            assert prober.light_checks == prober.checks and not tables
            os.kill(proc.pid, signal.SIGSTOP)  # a pidfd says nothing of a stop: the check does
            wait_for(lambda: latest() is Liveness.STOPPED, timeout=0.2 * QUIET_EVERY * 3 + 5)
            os.kill(proc.pid, signal.SIGCONT)
        else:
            assert prober.light_checks == 0 and tables
    finally:
        prober.stop()
        proc.kill()
        proc.wait()


def test_a_birth_calls_the_armed_waiter_once() -> None:
    """`on_birth` is one call at the next fork taken in (or loss of messages), then disarmed:
    on a machine that forks all the time the prober is woken once per sleep, not per fork."""
    lives = ProcLives()
    lives.available, lives._whole_from = True, time.monotonic() - 10
    ns = int(time.monotonic() * 1e9)
    calls: list[int] = []
    lives.on_birth(lambda: calls.append(1))
    _taken(lives, exit_(21, 21, ns))  # an exit is no start
    assert calls == []
    _taken(lives, fork(1, 22, 22, ns), fork(1, 23, 23, ns))
    assert calls == [1]
    _taken(lives, fork(1, 24, 24, ns))  # disarmed until armed again
    assert calls == [1]
    lives.on_birth(lambda: calls.append(2))
    with lives._lock:
        lives._lost = True  # as `_drain` marks an ENOBUFS: a birth may have been dropped
        lives._take([])
    assert calls == [1, 2]
    lives.on_birth(lambda: calls.append(3))
    lives.on_birth(None)
    _taken(lives, fork(1, 25, 25, ns))
    assert calls == [1, 2]


def test_a_birth_ends_the_death_watch_wait_without_a_death() -> None:
    deaths = DeathWatch()
    try:
        deaths.born()
        t0 = time.monotonic()
        assert deaths.wait(30) is False  # early, and nothing died
        assert time.monotonic() - t0 < 30
        assert deaths.wait(0) is False  # the birth was taken: nothing left to wake on
        deaths.wake()
        assert deaths.wait(30) is True  # a poke still says so
    finally:
        deaths.close()


def test_the_look_waits_for_the_slow_pass_outside_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    MovingPid(monkeypatch)
    pace = QuietPace()
    pace.births = lambda t: False  # pids move, but every process born since is gone
    assert pace.sockets_due(100.0)  # the slow pass
    assert pace.look_in(100.0) == pytest.approx(SOCKETS_SLOW - 0.05)
    assert pace.look_in(104.0) == pytest.approx(SOCKETS_SLOW - 4.05)
    pace.births = lambda t: True  # one still runs: a window, looked at at its pace
    pace.look(105.0)
    assert pace.look_in(105.0) == SOCKETS_EVERY
    pace.births = lambda t: False
    assert pace.sockets_due(114.9)  # the window's last look
    assert pace.look_in(105.0 + START_WINDOW) == pytest.approx(114.9 + SOCKETS_SLOW - 0.05 - 115)


def _chosen_port_listener() -> socket.socket:
    """A listening socket on a port someone chose (outside the ephemeral range, which the
    prober's socket look ignores)."""
    for port in random.sample(range(20000, 30000), 200):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.listen()
        return s
    pytest.skip("no free port between 20000 and 30000")


@pytest.mark.processes
def test_a_birth_wakes_a_prober_that_sleeps_until_one(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the connector's table (`use_lives`), outside a start's window the prober sleeps
    until the slow pass (here never) instead of looking every SOCKETS_EVERY; a birth ends the
    sleep, and a port bound meanwhile is probed at once. The table is fed the kernel's own
    messages (not started: no CAP_NET_ADMIN needed, and no other process's fork counts)."""
    monkeypatch.setattr(quietpace, "SOCKETS_SLOW", 10_000.0)
    monkeypatch.setattr(quietpace, "START_WINDOW", 1.0)
    lives = ProcLives()
    lives.available, lives._whole_from = True, time.monotonic() - 10
    proc = subprocess.Popen(["sleep", "120"])
    prober, reports = _owner_prober(root, proc.pid, 10_000.0)
    prober.use_lives(lives)
    listener = None
    prober.start()
    try:
        wait_for(lambda: reports, what="the first probe")
        wait_for(lambda: lives._on_birth is not None, timeout=30, what="a sleep until a birth")
        listener = _chosen_port_listener()  # seen only at a look: none is due before 10,000 s
        born = subprocess.Popen(["sleep", "120"])  # a pid handed out, as at every birth
        try:
            ns = int(time.monotonic() * 1e9)
            _taken(lives, fork(os.getpid(), born.pid, born.pid, ns))  # and still running
        finally:
            born.kill()
            born.wait()
        wait_for(
            lambda: any(r.cause == "sockets" for r in reports), what="a probe for the new port"
        )
        assert lives._on_birth is None or prober.runs >= 2  # taken, then armed again later
    finally:
        prober.stop()
        if listener is not None:
            listener.close()
        proc.kill()
        proc.wait()
