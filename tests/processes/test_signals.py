"""send_checked against real processes and real signals: it hits the process it was shown, or
nothing. Refusal tests that aim at precious processes send signal 0, so a broken check
would still hurt nothing."""

from __future__ import annotations

import dataclasses
import os
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

from lanewatch.actions.signals import SignalResult, precheck, send_checked
from lanewatch.linux.procid import ProcessIdentity, process_state
from lanewatch.processes import holders
from tests.conftest import wait_for
from tests.kits import prockit
from tests.kits.prockit import DEADLINE, alive, read_line

CLK_TCK = os.sysconf("SC_CLK_TCK")
METHODS = [True, False]  # use_pidfd: the pidfd path and the psutil fallback


class Procs(prockit.Procs):
    def sleeper(self, **kw: object) -> subprocess.Popen[bytes]:
        proc = self.start(["sleep", "600"], **kw)
        wait_for(
            lambda: os.readlink(f"/proc/{proc.pid}/exe").endswith("sleep"), DEADLINE, what="exec"
        )
        return proc


procs = prockit.procs_fixture(Procs)


def exited(pidfd: int) -> bool:
    ready, _, _ = select.select([pidfd], [], [], 0)
    return bool(ready)


def assert_refused(result: SignalResult, code: str) -> None:
    assert (result.outcome, result.code, result.method) == ("refused", code, None), result
    assert not result.sent


# --- the happy path -----------------------------------------------------------------------------


@pytest.mark.parametrize("use_pidfd", METHODS)
def test_sends_to_the_right_process(procs: Procs, use_pidfd: bool) -> None:
    proc = procs.sleeper()
    result = send_checked(ProcessIdentity.of(proc.pid), signal.SIGTERM, use_pidfd=use_pidfd)
    assert (result.outcome, result.code) == ("sent", "sent")
    assert result.method == ("pidfd" if use_pidfd else "psutil")
    assert result.signal_name == "SIGTERM"
    assert proc.wait(timeout=DEADLINE) == -signal.SIGTERM


def test_auto_picks_pidfd_here(procs: Procs) -> None:
    proc = procs.sleeper()
    assert send_checked(ProcessIdentity.of(proc.pid), 0).method == "pidfd"
    assert precheck(ProcessIdentity.of(proc.pid)) is None


# --- pid reuse ----------------------------------------------------------------------------------


@pytest.mark.parametrize("use_pidfd", METHODS)
def test_wrong_start_ticks_is_refused_and_the_process_lives(procs: Procs, use_pidfd: bool) -> None:
    proc = procs.sleeper()
    real = ProcessIdentity.of(proc.pid)
    # What a listing taken before the pid was reused would hold: same pid, older process.
    stale = dataclasses.replace(real, start_ticks=real.start_ticks - 1)
    result = send_checked(stale, signal.SIGKILL, use_pidfd=use_pidfd)
    assert_refused(result, "pid-reused")
    assert proc.poll() is None and alive(proc.pid)
    assert_refused(precheck(stale) or pytest.fail("precheck let it through"), "pid-reused")


def _next_pid_is(pid: int) -> None:
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))


@pytest.mark.privileged
def test_real_pid_reuse_is_refused(procs: Procs) -> None:
    """Force the kernel to hand a dead process's pid to a new one (ns_last_pid), then signal
    the dead one's identity: the new process must not be hit."""
    try:
        _next_pid_is(os.getpid())  # harmless probe: is ns_last_pid writable here?
    except OSError as exc:
        pytest.skip(f"cannot set ns_last_pid: {exc.strerror}")
    old = subprocess.Popen(["sleep", "600"])
    old_identity = ProcessIdentity.of(old.pid)
    old.kill()
    old.wait()
    # Start ticks count 1/CLK_TCK s: let a tick pass, or the two are indistinguishable.
    wait_for(
        lambda: time.clock_gettime(time.CLOCK_BOOTTIME) * CLK_TCK > old_identity.start_ticks + 2,
        DEADLINE,
        what="a clock tick",
    )
    new = None
    for _ in range(50):  # other processes on the machine may take the pid first
        _next_pid_is(old_identity.pid)
        candidate = procs.start(["sleep", "600"])
        if candidate.pid == old_identity.pid:
            new = candidate
            break
        candidate.kill()
        if holders.read_stat(old_identity.pid) is not None:
            pytest.skip("another process took the pid")
    if new is None:
        pytest.skip("could not get the pid reused")
    wait_for(lambda: alive(new.pid), DEADLINE, what="new process")
    assert ProcessIdentity.of(new.pid) != old_identity
    for use_pidfd in METHODS:
        result = send_checked(old_identity, signal.SIGKILL, use_pidfd=use_pidfd)
        assert_refused(result, "pid-reused")
    assert new.poll() is None and alive(new.pid)


# --- never these --------------------------------------------------------------------------------


@pytest.mark.parametrize("pid", [1, 0, -1])
def test_init_and_nonsense_pids_are_refused(pid: int) -> None:
    identity = ProcessIdentity(pid, 1, ProcessIdentity.current().boot_id)
    for group in (False, True):
        assert_refused(send_checked(identity, 0, group=group), "init")


def test_ourselves_is_refused() -> None:
    assert_refused(send_checked(ProcessIdentity.current(), 0), "self")
    assert_refused(send_checked(ProcessIdentity.current(), 0, group=True), "self")


def test_our_parents_are_refused() -> None:
    chain = holders.ancestors(os.getpid())
    assert chain and chain[0] == os.getppid()
    for pid in chain:
        if pid <= 1:
            continue
        identity = ProcessIdentity.of(pid)
        for use_pidfd in METHODS:
            assert_refused(send_checked(identity, 0, use_pidfd=use_pidfd), "ancestor")


def test_a_thread_of_ours_is_refused() -> None:
    """A thread id looks like a pid in /proc; kill(2) on it would hit the whole process."""
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        tid = worker.native_id
        assert tid is not None and tid != os.getpid()
        identity = ProcessIdentity.of(tid)
        for use_pidfd in METHODS:
            assert_refused(send_checked(identity, 0, use_pidfd=use_pidfd), "not-a-process")
    finally:
        release.set()
        worker.join()


def test_kernel_thread_is_refused() -> None:
    st = holders.read_stat(2)
    if st is None or not st.kernel_thread:
        pytest.skip("pid 2 is not a kernel thread here")
    assert_refused(send_checked(ProcessIdentity.of(2), 0), "kernel-thread")


@pytest.mark.privileged
def test_another_users_process_only_when_root_asks(procs: Procs) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as another user")
    proc = procs.sleeper(user=65534, group=65534, extra_groups=[], cwd="/")
    identity = ProcessIdentity.of(proc.pid)
    for use_pidfd in METHODS:
        assert_refused(send_checked(identity, signal.SIGKILL, use_pidfd=use_pidfd), "other-user")
    assert proc.poll() is None
    result = send_checked(identity, signal.SIGTERM, allow_other_user=True)
    assert result.sent
    assert proc.wait(timeout=DEADLINE) == -signal.SIGTERM


@pytest.mark.unprivileged
def test_a_process_of_another_uid_than_expected_is_refused(procs: Procs) -> None:
    """A lane's stamp names the uid its processes run as; the signal checks it again."""
    proc = procs.sleeper()
    identity = ProcessIdentity.of(proc.pid)
    for use_pidfd in METHODS:
        refused = send_checked(
            identity, signal.SIGKILL, expect_uid=os.getuid() + 1, use_pidfd=use_pidfd
        )
        assert_refused(refused, "uid-mismatch")
        assert f"runs as uid {os.getuid()}, not uid {os.getuid() + 1}" in refused.reason
    assert proc.poll() is None
    assert send_checked(identity, signal.SIGTERM, expect_uid=os.getuid()).sent
    assert proc.wait(timeout=DEADLINE) == -signal.SIGTERM


def test_other_boot_is_gone_and_no_boot_is_cannot_tell(procs: Procs) -> None:
    proc = procs.sleeper()
    real = ProcessIdentity.of(proc.pid)
    other = send_checked(dataclasses.replace(real, boot_id="0" * 36), signal.SIGKILL)
    assert (other.outcome, other.code) == ("gone", "other-boot")
    assert_refused(
        send_checked(dataclasses.replace(real, boot_id=""), signal.SIGKILL), "cannot-tell"
    )
    assert proc.poll() is None


# --- gone, zombies, stopped ---------------------------------------------------------------------


@pytest.mark.parametrize("use_pidfd", METHODS)
def test_exited_and_reaped_is_gone(procs: Procs, use_pidfd: bool) -> None:
    proc = procs.sleeper()
    identity = ProcessIdentity.of(proc.pid)
    proc.kill()
    proc.wait()
    if holders.read_stat(identity.pid) is not None:
        pytest.skip("the pid was reused at once")
    for group in (False, True):
        result = send_checked(identity, signal.SIGTERM, group=group, use_pidfd=use_pidfd)
        assert (result.outcome, result.code, result.sent) == ("gone", "exited", False)


@pytest.mark.parametrize("use_pidfd", METHODS)
def test_zombie_is_gone(procs: Procs, use_pidfd: bool) -> None:
    proc = procs.sleeper()
    identity = ProcessIdentity.of(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    wait_for(lambda: process_state(proc.pid) == "Z", DEADLINE, what="zombie")
    result = send_checked(identity, signal.SIGTERM, use_pidfd=use_pidfd)
    assert (result.outcome, result.code) == ("gone", "zombie")


def test_stopped_process_gets_term_on_cont_and_kill_at_once(procs: Procs) -> None:
    first, second = procs.sleeper(), procs.sleeper()
    for proc in (first, second):
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda p=proc: process_state(p.pid) == "T", DEADLINE, what="stop")  # type: ignore[misc]

    term = send_checked(ProcessIdentity.of(first.pid), signal.SIGTERM)
    assert term.sent and term.stopped
    assert "SIGCONT" in term.reason
    assert process_state(first.pid) == "T"  # TERM stays pending while stopped
    cont = send_checked(ProcessIdentity.of(first.pid), signal.SIGCONT)
    assert cont.sent
    assert first.wait(timeout=DEADLINE) == -signal.SIGTERM

    kill = send_checked(ProcessIdentity.of(second.pid), signal.SIGKILL)
    assert kill.sent and kill.stopped
    assert second.wait(timeout=DEADLINE) == -signal.SIGKILL


# --- process groups -----------------------------------------------------------------------------


def _group(procs: Procs, script: str) -> tuple[subprocess.Popen[bytes], list[int]]:
    """Start `sh -c script` as a group leader; the script prints its children's pids."""
    leader = procs.start(["sh", "-c", script])
    members = [int(p) for p in read_line(leader).split()]
    for pid in members:
        procs.adopt(pid)
        assert holders.read_stat(pid).pgid == leader.pid  # type: ignore[union-attr]
    return leader, members


@pytest.mark.parametrize("use_pidfd", METHODS)
def test_group_signal_reaches_every_member(procs: Procs, use_pidfd: bool) -> None:
    leader, members = _group(procs, "sleep 600 & a=$!; sleep 600 & echo $a $!; wait")
    fds = procs.pidfds[-len(members) :]
    result = send_checked(
        ProcessIdentity.of(leader.pid), signal.SIGTERM, group=True, use_pidfd=use_pidfd
    )
    assert result.sent and result.pgid == leader.pid and result.group
    assert leader.wait(timeout=DEADLINE) == -signal.SIGTERM
    wait_for(lambda: all(exited(fd) for fd in fds), DEADLINE, what="every member to exit")


def test_group_needs_the_leader(procs: Procs) -> None:
    leader, (member,) = _group(procs, "sleep 600 & echo $!; wait")
    result = send_checked(ProcessIdentity.of(member), signal.SIGKILL, group=True)
    assert_refused(result, "not-group-leader")
    assert leader.poll() is None and alive(member)


def test_group_of_an_unreaped_leader_is_still_verified(procs: Procs) -> None:
    """The owner exited but is not reaped (a zombie) while its forked child lives on: the
    zombie still pins the pgid, so the group can be signalled safely."""
    leader, (member,) = _group(procs, "sleep 600 & echo $!")
    wait_for(lambda: process_state(leader.pid) == "Z", DEADLINE, what="leader to exit")
    identity = ProcessIdentity.of(leader.pid)
    assert (send_checked(identity, signal.SIGKILL).code) == "zombie"  # alone: gone
    assert alive(member)
    result = send_checked(identity, signal.SIGKILL, group=True)
    assert result.sent
    wait_for(lambda: exited(procs.pidfds[-1]), DEADLINE, what="the orphan to die")


def test_group_of_a_reaped_leader_cannot_be_verified(procs: Procs) -> None:
    leader, (member,) = _group(procs, "sleep 600 & echo $!")
    identity = ProcessIdentity.of(leader.pid)
    leader.wait(timeout=DEADLINE)
    result = send_checked(identity, signal.SIGKILL, group=True)
    assert (result.outcome, result.sent) == ("gone", False)
    assert alive(member)  # left for the caller to signal one by one, by identity
    assert send_checked(ProcessIdentity.of(member), signal.SIGKILL).sent
    wait_for(lambda: exited(procs.pidfds[-1]), DEADLINE, what="the orphan to die")


OWN_GROUP = r"""
import os, signal, subprocess, sys
from lanewatch.actions.signals import send_checked
from lanewatch.linux.procid import ProcessIdentity
leader = subprocess.Popen(["sleep", "600"], process_group=0)
try:
    os.setpgid(0, leader.pid)  # join the leader's group, as if lanewatch ran inside a lane
    r = send_checked(ProcessIdentity.of(leader.pid), 0, group=True)
    print(r.outcome, r.code)
finally:
    leader.kill()
    leader.wait()
"""


def test_a_group_holding_us_is_refused(procs: Procs) -> None:
    # In a child of our own, so that pytest's process group is never changed.
    # Its own group but not its own session: a session leader may not change groups.
    proc = procs.start([sys.executable, "-c", OWN_GROUP], start_new_session=False, process_group=0)
    assert read_line(proc) == "refused own-group"
    assert proc.wait(timeout=DEADLINE) == 0
