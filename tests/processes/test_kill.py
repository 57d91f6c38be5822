"""Kill against real lanes and real signals: it stops the lane it was shown, or nothing.

Tests aimed at precious processes (pid 1, this test, its parents) send signal 0, so a broken
check would still hurt nothing.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.actions import kill as kill_mod
from lanewatch.actions.assess import Seen
from lanewatch.actions.kill import KillResult, kill
from lanewatch.actions.results import ActionRefused
from lanewatch.lanes import ledger
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import OwnerState, read_stamp
from lanewatch.linux.procid import ProcessIdentity, process_state
from lanewatch.processes.holders import read_stat
from tests.conftest import LANEWATCH, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import (
    CHECKOUT,
    DEADLINE,
    NOBODY,
    Lane,
    Procs,
    alive,
    as_user,
    group_members,
    make_stamp,
)

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

lw = actionkit.lw  # the kit's fixtures, found by pytest under these names
scratch = actionkit.scratch

CLK_TCK = os.sysconf("SC_CLK_TCK")
IGNORES_TERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "deadline = time.monotonic() + 300\n"
    "while time.monotonic() < deadline: time.sleep(0.1)\n"
)


def events(ns: Path) -> list[str]:
    return [line.event for line in ledger.read(ns)]


def killed_line(ns: Path) -> dict[str, Any]:
    lines = [line for line in ledger.read(ns) if line.event == "killed"]
    assert len(lines) == 1, events(ns)
    return lines[0].fields


def assert_ended(lane: Lane) -> None:
    stamp = lane.stamp
    assert lane.proc.wait(timeout=DEADLINE) is not None
    assert stamp.pgid is not None and group_members(stamp.pgid) == []


# --- the happy path -------------------------------------------------------------------------


def test_kill_stops_the_lanes_whole_group(lw: Procs, repo: Path, scratch: Path) -> None:
    cmd = ["sh", "-c", "sleep 600 & sleep 600 & wait"]
    lane = lw.lane(repo, scratch, "busy", cmd)
    pgid = lane.stamp.pgid
    assert pgid is not None
    wait_for(lambda: len(group_members(pgid)) == 3, DEADLINE, what="sh and its two sleeps")
    result = kill("busy")
    assert result.outcome == "stopped", result.message
    assert result.method == "pidfd" and not result.escalated
    assert_ended(lane)
    stamp = read_stamp(lane.namespace).stamp
    assert stamp is not None and stamp.state is OwnerState.RELEASED
    assert stamp.exit_code == 128 + signal.SIGTERM
    line = killed_line(lane.namespace)
    assert line["signal"] == "SIGTERM" and line["outcome"] == "stopped"
    assert line["pgid"] == pgid and line["owner_pid"] == lane.proc.pid
    assert line["sends"][0]["method"] == "pidfd" and line["sends"][0]["group"] is True
    assert line["by"]["pid"] == os.getpid()


@pytest.mark.parametrize("name", ["INT", "KILL"])
def test_cli_kill_with_yes(lw: Procs, repo: Path, scratch: Path, name: str) -> None:
    lane = lw.lane(repo, scratch, f"cli-{name}")
    # Without --grace kill watches 5 s for the lane to end, and a loaded machine can take longer
    # to end `lanewatch run` (it said "still running after 5s", exit 1): the grace lets it watch
    # until the lane ends, and a SIGKILL it would then send (the signal did not work) fails.
    done = subprocess.run(
        [*LANEWATCH, "kill", lane.namespace.name, "--signal", name, "--yes", "--grace", "60"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "stopped" in done.stdout and (name == "KILL" or "SIGKILL" not in done.stdout)
    assert_ended(lane)
    assert killed_line(lane.namespace)["signal"] == f"SIG{name}"


def test_cli_without_a_terminal_refuses_and_kills_nothing(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    lane = lw.lane(repo, scratch, "asked")
    done = subprocess.run(
        [*LANEWATCH, "kill", "asked"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 7  # needs confirmation: never the 3 of a safety refusal
    assert "pass --yes" in done.stderr and "process group" in done.stdout
    assert lane.proc.poll() is None and alive(lane.stamp.child_pid or 0)
    assert "killed" not in events(lane.namespace)


# --- a stopped lane -------------------------------------------------------------------------


@pytest.mark.parametrize("stop_owner", [False, True], ids=["command-stopped", "all-stopped"])
def test_sigstopped_lane_gets_term_then_cont(
    lw: Procs, repo: Path, scratch: Path, stop_owner: bool
) -> None:
    lane = lw.lane(repo, scratch, "frozen")
    stamp = lane.stamp
    assert stamp.pgid is not None
    os.killpg(stamp.pgid, signal.SIGSTOP)
    if stop_owner:
        os.kill(lane.proc.pid, signal.SIGSTOP)
    wait_for(lambda: process_state(stamp.pgid or 0) == "T", DEADLINE, what="the command to stop")
    result = kill("frozen")
    assert result.outcome == "stopped", result.message
    sent = [(s.signal_name, s.identity.pid) for s in result.sends if s.sent]
    assert sent[0] == ("SIGTERM", stamp.pgid)
    assert ("SIGCONT", stamp.pgid) in sent
    assert (("SIGCONT", lane.proc.pid) in sent) is stop_owner
    assert "SIGKILL" not in [name for name, _ in sent]
    assert_ended(lane)


def test_term_ignored_then_sigkill_after_grace(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "stubborn", [sys.executable, "-c", IGNORES_TERM])
    pgid = lane.stamp.pgid
    assert pgid is not None
    wait_for(lambda: _ignores_term(pgid), DEADLINE, what="the command to ignore SIGTERM")
    without = kill("stubborn", wait=0.3)
    assert without.outcome == "running" and "--grace" in without.message
    assert without.ok and not without.ended, "not refused, but not what the user asked for"
    assert group_members(pgid) == [pgid]
    result = kill("stubborn", grace=0.3)
    assert result.outcome == "stopped" and result.escalated, result.message
    assert result.ended
    assert [s.signal_name for s in result.sends if s.sent] == ["SIGTERM", "SIGKILL"]
    assert_ended(lane)
    assert read_stamp(lane.namespace).stamp.exit_code == 128 + signal.SIGKILL  # type: ignore[union-attr]


def _ignores_term(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            ign = next(line for line in f if line.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return False
    return bool(int(ign.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


# --- identity -------------------------------------------------------------------------------


def test_stale_identity_of_a_live_pid_is_never_signalled(lw: Procs, scratch: Path) -> None:
    owner = lw.start(["sleep", "600"])
    other = lw.start(["sleep", "600"])  # leads its own group, like a lane's command
    wait_for(
        lambda: read_stat(other.pid) is not None and read_stat(owner.pid) is not None,
        DEADLINE,
        what="exec",
    )
    real = ProcessIdentity.of(other.pid)
    make_stamp(
        scratch,
        "reused",
        pid=owner.pid,
        start_ticks=ProcessIdentity.of(owner.pid).start_ticks,
        child_pid=other.pid,
        child_start_ticks=real.start_ticks - 1,  # the listing's process, long gone
        pgid=other.pid,
    )
    result = kill("reused", check=False)
    assert result.outcome == "refused" and "another process" in result.message
    assert [s.code for s in result.sends] == ["pid-reused"]
    assert alive(other.pid) and alive(owner.pid)
    assert "kill-refused" in events(scratch / namespace_name(CHECKOUT, "reused"))


def _next_pid_is(pid: int) -> None:
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))


@pytest.mark.privileged
def test_pid_reused_between_listing_and_pidfd_is_not_hit(
    lw: Procs, repo: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane is judged live, then, right before the pidfd is opened, its command dies and
    the kernel hands its pid to a new process (ns_last_pid): the new one must not be hit."""
    try:
        _next_pid_is(os.getpid())  # harmless probe
    except OSError as exc:
        pytest.skip(f"cannot set ns_last_pid: {exc.strerror}")
    lane = lw.lane(repo, scratch, "racy")
    stamp = lane.stamp
    victim = stamp.child_pid
    assert victim is not None and stamp.child_start_ticks is not None
    real_open = os.pidfd_open
    usurper: list[subprocess.Popen[bytes]] = []

    def racing_open(pid: int, flags: int = 0) -> int:
        if pid == victim and not usurper:
            os.killpg(victim, signal.SIGKILL)
            wait_for(
                lambda: read_stat(victim) is None, DEADLINE, what="the runner to reap its command"
            )
            floor = stamp.child_start_ticks + 2  # type: ignore[operator]
            wait_for(
                lambda: time.clock_gettime(time.CLOCK_BOOTTIME) * CLK_TCK > floor,
                DEADLINE,
                what="a tick",
            )
            for _ in range(50):
                _next_pid_is(victim)
                candidate = lw.start(["sleep", "600"])
                if candidate.pid == victim:
                    usurper.append(candidate)
                    break
                candidate.kill()
            else:
                pytest.skip("could not get the pid reused")
        return real_open(pid, flags)

    monkeypatch.setattr(os, "pidfd_open", racing_open)
    result = kill("racy", check=False)
    monkeypatch.undo()
    assert usurper, "the race was not staged"
    assert result.outcome == "refused", result.message
    assert [s.code for s in result.sends] == ["pid-reused"]
    new = usurper[0]
    wait_for(lambda: read_stat(new.pid) is not None, DEADLINE, what="the usurper to run")
    assert new.poll() is None and alive(new.pid)


def test_acts_on_what_was_seen(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "seen")
    shown = Seen(lane.stamp.pid + 1, lane.stamp.started_at)
    result = kill("seen", seen=shown, check=False)
    assert result.outcome == "refused" and "changed since it was shown" in result.message
    assert result.sends == () and lane.proc.poll() is None


# --- never these ----------------------------------------------------------------------------


def _stamp_owned_by(root: Path, lane: str, pid: int, **extra: Any) -> None:
    make_stamp(root, lane, pid=pid, start_ticks=ProcessIdentity.of(pid).start_ticks, **extra)


@pytest.mark.parametrize(
    ("who", "code"), [("init", None), ("self", "self"), ("parent", "ancestor")]
)
def test_never_init_lanewatch_or_its_parents(scratch: Path, who: str, code: str | None) -> None:
    pid = {"init": 1, "self": os.getpid(), "parent": os.getppid()}[who]
    _stamp_owned_by(scratch, who, pid)
    result = kill(who, sig=0, check=False)
    assert result.outcome == "refused", result.message
    if code is None:  # a stamp naming init is flagged before any signal is tried
        assert result.sends == () and "names pid 1 (init) as its owner" in result.message
    else:
        assert [s.code for s in result.sends] == [code]
    with pytest.raises(ActionRefused) as caught:
        kill(who, sig=0)
    assert isinstance(caught.value.result, KillResult)


GROUP_LEADER_KILLS_ITSELF = """
import os, sys
os.setpgid(0, 0)  # lead a group of our own, as a shell's job would
print(os.getpid(), flush=True)
sys.stdin.readline()  # the test writes the stamp naming us, then says go
from lanewatch.actions.kill import kill
result = kill("ours", sig=0, check=False)
print(result.outcome, result.sends[0].code if result.sends else "-", flush=True)
"""


def test_never_a_group_that_holds_lanewatch(scratch: Path) -> None:
    """A lanewatch that leads the lane's group (the lane is its own job) refuses to signal it.
    Run in a child that leads a fresh group: the pytest worker's own group leader may be gone."""
    child = subprocess.Popen(
        [sys.executable, "-c", GROUP_LEADER_KILLS_ITSELF],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        pid = int(child.stdout.readline())
        them = ProcessIdentity.of(pid)
        make_stamp(scratch, "ours", child_pid=pid, pgid=pid, child_start_ticks=them.start_ticks,
                   pid=pid, start_ticks=them.start_ticks)  # fmt: skip
        child.stdin.write("go\n")
        child.stdin.flush()
        outcome, code = child.stdout.readline().split()
    finally:
        child.kill()
        child.wait(timeout=DEADLINE)
    assert outcome == "refused"
    assert code in ("self", "ancestor", "own-group")


def test_another_users_lane_only_when_root_asks(lw: Procs, scratch: Path) -> None:
    prefix = as_user(NOBODY)
    theirs = lw.start([*prefix, "sleep", "600"])
    wait_for(
        lambda: _uid(theirs.pid) == NOBODY and _exe(theirs.pid).endswith("sleep"),
        DEADLINE,
        what="exec",
    )
    _stamp_owned_by(scratch, "theirs", theirs.pid, uid=NOBODY)
    ns = scratch / namespace_name(CHECKOUT, "theirs")
    written_by_root = kill("theirs", allow_other_user=True, check=False)  # not theirs: refused
    assert written_by_root.outcome == "refused" and written_by_root.sends == ()
    assert "the stamp file is owned by uid 0, the stamp names uid 65534" in written_by_root.message
    for path in (ns, ns / ".lanewatch", ns / ".lanewatch" / "owner.json"):
        os.chown(path, NOBODY, NOBODY)  # now the stamp, its folder and the process are theirs
    refused = kill("theirs", check=False)
    assert refused.outcome == "refused" and refused.sends == ()
    assert "(uid 65534), not yours" in refused.message and "--allow-other-user" in refused.message
    assert theirs.poll() is None
    result = kill("theirs", allow_other_user=True)
    assert result.outcome == "stopped" and "(uid 65534)" in result.message, result.message
    assert theirs.wait(timeout=DEADLINE) == -signal.SIGTERM


def _uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


# --- nothing to kill ------------------------------------------------------------------------


def test_released_or_dead_owner_is_gone_and_nothing_is_signalled(lw: Procs, scratch: Path) -> None:
    make_stamp(scratch, "done", state=OwnerState.RELEASED, released_at=time.time(), exit_code=0)
    done = kill("done")
    assert done.outcome == "gone" and done.ended
    dead = lw.start(["true"])
    dead.wait()
    make_stamp(scratch, "dead", pid=dead.pid, start_ticks=1)
    result = kill("dead")
    assert result.outcome == "gone" and result.sends == ()


def test_orphan_has_nothing_to_kill_and_remote_is_refused(scratch: Path) -> None:
    # An orphan has no valid stamp: no owner to name, so nothing is signalled (as for a stale
    # lane: "nothing to kill", exit 0), never a refusal that reads like a safety stop.
    (scratch / "foreign").mkdir()
    orphan = kill("foreign", check=False)
    assert orphan.outcome == "gone" and orphan.sends == () and "orphan" in orphan.message
    make_stamp(scratch, "remote", host="elsewhere.example")
    remote = kill("remote", check=False)
    assert remote.outcome == "refused" and "elsewhere.example" in remote.message


def test_dashboard_row_needs_the_same_owner(lw: Procs, repo: Path, scratch: Path) -> None:
    """What the dashboard passes: a NamespaceView-like row with the pid the user saw."""
    lane = lw.lane(repo, scratch, "row")

    @dataclasses.dataclass
    class Row:
        key: str
        root: str
        name: str
        pid: int | None
        started_at: float | None

    stale_row = Row(str(lane.namespace), str(scratch), lane.namespace.name, 1, 0.0)
    with pytest.raises(ActionRefused):
        kill(stale_row)
    assert lane.proc.poll() is None
    row = dataclasses.replace(stale_row, pid=lane.stamp.pid, started_at=lane.stamp.started_at)
    assert kill(row).outcome == "stopped"
    assert_ended(lane)


def test_wait_until_has_a_deadline() -> None:
    t0 = time.monotonic()
    assert not kill_mod.wait_until(lambda: False, 0.05)
    assert time.monotonic() - t0 < 2
