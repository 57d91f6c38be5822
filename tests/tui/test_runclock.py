"""The run clock the churn test counts its budget on (tests/tui/runclock.py): it stands still for
a process kept waiting for a CPU, and keeps pace with the wall clock for one that waits for
nothing (stopped, asleep). Real processes; the kernel's own accounting (schedstat)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import wait_for

from .runclock import RunClock, run_queue_waits

SPIN = "while True: pass"


@pytest.fixture
def spinners() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two processes that spin on one CPU: each waits for it about half the time."""
    cpu = min(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(2)]
    try:
        for p in procs:
            os.sched_setaffinity(p.pid, {cpu})
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def watch_for(clock: RunClock, seconds: float) -> float:
    """Tick `clock` every 0.1 s for `seconds` of wall time; the wall time it covered."""
    began = time.monotonic()
    start = clock.now
    while time.monotonic() - began < seconds:
        time.sleep(0.1)  # the sampling pace, not a wait for a condition
        clock.tick()
    return clock.now - start


def test_a_process_kept_waiting_for_a_cpu_stops_the_clock(
    spinners: list[subprocess.Popen[bytes]],
) -> None:
    pid = spinners[0].pid
    if not run_queue_waits(pid):
        pytest.skip("this kernel keeps no schedstat: the run clock is the wall clock")
    clock = RunClock(lambda: [(pid, None)])
    ran = watch_for(clock, 2.0)
    assert ran < 0.8 * 2.0, f"the clock ran {ran:.2f}s of 2s while the process shared a CPU"


def test_a_stopped_process_waits_for_no_cpu_and_the_clock_runs_on() -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        if not run_queue_waits(sleeper.pid):
            pytest.skip("this kernel keeps no schedstat: the run clock is the wall clock")
        os.kill(sleeper.pid, signal.SIGSTOP)
        wait_for(lambda: _state(sleeper.pid) == "T", 10, what="the sleeper stopped")
        clock = RunClock(lambda: [(sleeper.pid, None)])
        began = time.monotonic()
        ran = watch_for(clock, 1.0)
        assert ran >= 0.99 * (time.monotonic() - began) - 0.2, ran
    finally:
        sleeper.kill()
        sleeper.wait()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
