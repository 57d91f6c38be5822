"""Process identity and liveness, judged against real processes in every state."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from lanewatch.linux import procid
from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness
from tests.conftest import Spawn, wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_this_process_is_alive() -> None:
    me = ProcessIdentity.current()
    assert me.pid == os.getpid() and me.boot_id == procid.boot_id() != ""
    assert liveness(me)[0] is Liveness.ALIVE


def test_start_ticks_are_the_kernels_and_survive_odd_names(spawn: Spawn, tmp_path: Path) -> None:
    odd = tmp_path / "a) b (c"  # comm holds spaces and parentheses
    odd.symlink_to(sys.executable)
    proc = spawn([str(odd), "-c", "import time; time.sleep(60)"])
    ticks = wait_for(lambda: procid.start_ticks(proc.pid), 10)
    assert isinstance(ticks, int) and ticks >= procid.start_ticks(os.getpid())  # type: ignore[operator]
    assert procid.start_ticks(proc.pid) == ticks  # stable for the life of the process


def test_a_reused_pid_is_not_the_same_process(spawn: Spawn) -> None:
    proc = spawn(SLEEPER)
    real = ProcessIdentity.of(proc.pid)
    impostor = ProcessIdentity(proc.pid, real.start_ticks + 1, real.boot_id)
    assert liveness(impostor)[0] is Liveness.REUSED
    other_boot = ProcessIdentity(proc.pid, real.start_ticks, "not-this-boot")
    assert liveness(other_boot)[0] is Liveness.OTHER_BOOT


def test_stopped_zombie_and_dead(spawn: Spawn) -> None:
    proc = spawn(SLEEPER)
    identity = ProcessIdentity.of(proc.pid)
    os.kill(proc.pid, signal.SIGSTOP)
    wait_for(lambda: liveness(identity)[0] is Liveness.STOPPED, 10)
    os.kill(proc.pid, signal.SIGKILL)
    wait_for(lambda: liveness(identity)[0] is Liveness.ZOMBIE, 10)  # not reaped yet
    proc.wait(timeout=10)
    state, reason = liveness(identity)
    assert state is Liveness.DEAD and str(proc.pid) in reason
    assert (
        procid.start_ticks(proc.pid) is None or procid.start_ticks(proc.pid) != identity.start_ticks
    )


def test_no_such_process() -> None:
    assert procid.start_ticks(2**22 + 12345) is None
    assert liveness(ProcessIdentity(2**22 + 12345, 1, procid.boot_id()))[0] is Liveness.DEAD
