"""States: the pure rules, then the same rules against real processes (pid reuse, SIGSTOP,
another host, a permission error reading /proc)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.engine.engine import Engine
from lanewatch.lanes.stamp import OwnerState, Stamp, StampRead, StampStatus, parse_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness
from lanewatch.model.classify import LivenessEvidence, classify, run_over
from lanewatch.model.views import STALE_STATES, Grade, LaneMember, NsState
from lanewatch.processes.prober import judge
from tests.conftest import wait_for
from tests.kits.enginekit import DRIVER, Driver, make_stamp, start_lane, stop_lane
from tests.kits.userkit import readable_by, shared_temp

HOST, BOOT, NOW = "here", "boot-1", 1_000_000.0


def stamp(**changes: object) -> Stamp:
    values: dict[str, object] = {
        "lane": "a",
        "namespace": "ns",
        "checkout_id": "c",
        "checkout_path": "/c",
        "host": HOST,
        "boot_id": BOOT,
        "pid": 100,
        "start_ticks": 5,
        "user": "u",
        "uid": 0,
        "command": ["x"],
        "started_at": NOW - 60,
        "heartbeat_at": NOW - 1,
        "heartbeat_interval": 5.0,
    }
    values.update(changes)
    return Stamp(**values)  # type: ignore[arg-type]


def read(s: Stamp, mtime: float | None = None) -> StampRead:
    return StampRead(StampStatus.OK, s, mtime=mtime)


def ev(lv: Liveness, **changes: object) -> LivenessEvidence:
    values: dict[str, object] = {
        "pid": 100,
        "start_ticks": 5,
        "liveness": lv,
        "reason": f"pid 100 {lv.value}",
        "at": NOW,
    }
    values.update(changes)
    return LivenessEvidence(**values)  # type: ignore[arg-type]


def judge_(r: StampRead, e: LivenessEvidence | None, now: float = NOW) -> tuple[NsState, Grade]:
    v = classify(r, e, now, host=HOST, boot_id=BOOT)
    assert v.reason
    return v.state, v.grade


def test_alive_and_fresh_is_live_known() -> None:
    assert judge_(read(stamp()), ev(Liveness.ALIVE)) == (NsState.LIVE, Grade.KNOWN)


def test_alive_with_heartbeat_overdue_is_hung_inferred() -> None:
    s = stamp(heartbeat_at=NOW - 16)  # 3 x 5 s missed
    assert judge_(read(s), ev(Liveness.ALIVE)) == (NsState.HUNG, Grade.INFERRED)


def test_the_stamp_mtime_is_the_heartbeat() -> None:
    s = stamp(heartbeat_at=NOW - 100)
    assert judge_(read(s, mtime=NOW - 2), ev(Liveness.ALIVE))[0] is NsState.LIVE


def test_stopped_owner_or_command_is_hung_known() -> None:
    assert judge_(read(stamp()), ev(Liveness.STOPPED)) == (NsState.HUNG, Grade.KNOWN)
    child = ev(Liveness.ALIVE, child=Liveness.STOPPED, child_reason="pid 7 is stopped")
    assert judge_(read(stamp()), child) == (NsState.HUNG, Grade.KNOWN)


@pytest.mark.parametrize(
    "lv", [Liveness.DEAD, Liveness.ZOMBIE, Liveness.REUSED, Liveness.OTHER_BOOT]
)
def test_dead_zombie_reused_other_boot_are_stale_known(lv: Liveness) -> None:
    assert judge_(read(stamp()), ev(lv)) == (NsState.STALE, Grade.KNOWN)


MEMBERS = (
    LaneMember(200, 9, "tmux -L a new -d", NOW - 30, "descendant"),
    LaneMember(201, 10, "sleep 60", NOW - 29, "marker"),
)


@pytest.mark.parametrize("lv", [Liveness.DEAD, Liveness.ZOMBIE, Liveness.REUSED])
def test_a_gone_runner_with_running_members_is_headless_known(lv: Liveness) -> None:
    v = classify(read(stamp()), ev(lv, members=MEMBERS), NOW, host=HOST, boot_id=BOOT)
    assert (v.state, v.grade) == (NsState.HEADLESS, Grade.KNOWN)
    assert v.reason == f"runner pid 100 {lv.value}; 2 processes of the lane still run"
    one = classify(read(stamp()), ev(lv, members=MEMBERS[:1]), NOW, host=HOST, boot_id=BOOT)
    assert one.reason.endswith("; 1 process of the lane still runs")


def test_a_released_lane_with_running_members_is_headless_and_never_stale() -> None:
    released = stamp(state=OwnerState.RELEASED, exit_code=0)
    found = ev(Liveness.DEAD, reason="released", members=MEMBERS)
    v = classify(read(released), found, NOW, host=HOST, boot_id=BOOT)
    assert v.state is NsState.HEADLESS and v.reason.startswith("released by its owner (exit")
    assert NsState.HEADLESS not in STALE_STATES  # never offered to clear
    # Members of a live runner are listed, the state stays what the runner says.
    assert judge_(read(stamp()), ev(Liveness.ALIVE, members=MEMBERS))[0] is NsState.LIVE
    # Another boot: nothing of it runs, whatever the evidence says.
    assert judge_(read(stamp()), ev(Liveness.OTHER_BOOT, members=MEMBERS))[0] is NsState.STALE


def test_a_run_is_over_once_released_or_dead_with_nothing_of_it_left_running() -> None:
    released = stamp(state=OwnerState.RELEASED, exit_code=0)
    assert run_over(released, None) and run_over(released, ev(Liveness.DEAD))
    assert run_over(stamp(), ev(Liveness.DEAD)) and run_over(stamp(), ev(Liveness.REUSED))
    assert not run_over(stamp(), ev(Liveness.ALIVE)) and not run_over(stamp(), None)
    assert not run_over(stamp(), ev(Liveness.STOPPED))
    # Headless (members run on), or maybe so (processes it cannot read): not over.
    assert not run_over(released, ev(Liveness.DEAD, members=MEMBERS))
    assert not run_over(stamp(), ev(Liveness.DEAD, unreadable=1))
    # Evidence about a previous owner says nothing of this run.
    assert not run_over(stamp(), ev(Liveness.DEAD, pid=99))


def test_stamp_from_before_this_boot_is_stale_without_probing() -> None:
    assert judge_(read(stamp(boot_id="boot-0")), None) == (NsState.STALE, Grade.KNOWN)


def test_permission_error_is_never_stale() -> None:
    unknown = ev(Liveness.UNKNOWN, reason="cannot read /proc/100/stat: Permission denied")
    assert judge_(read(stamp()), unknown) == (NsState.LIVE, Grade.INFERRED)
    overdue = stamp(heartbeat_at=NOW - 60)
    assert judge_(read(overdue), unknown) == (NsState.UNKNOWN, Grade.INFERRED)
    held = replace(unknown, lock_held=True)
    assert judge_(read(overdue), held) == (NsState.LIVE, Grade.INFERRED)


def test_another_host_is_judged_by_heartbeat_only() -> None:
    remote = stamp(host="elsewhere", boot_id="their-boot")
    # Evidence about a local pid with the same number means nothing for a remote owner.
    assert judge_(read(remote), ev(Liveness.DEAD)) == (NsState.LIVE, Grade.INFERRED)
    expired = replace(remote, heartbeat_at=NOW - 16)
    assert judge_(read(expired), ev(Liveness.ALIVE)) == (NsState.STALE, Grade.INFERRED)


def test_released_orphan_unknown() -> None:
    released = stamp(state=OwnerState.RELEASED, exit_code=3)
    v = classify(read(released), None, NOW, host=HOST, boot_id=BOOT)
    assert (v.state, "exit code 3" in v.reason) == (NsState.RELEASED, True)
    for status in (StampStatus.MISSING, StampStatus.GARBAGE, StampStatus.EMPTY):
        assert judge_(StampRead(status, detail="x"), None)[0] is NsState.ORPHAN
    for status in (StampStatus.OVERSIZED, StampStatus.SYMLINK):
        assert judge_(StampRead(status, detail="x"), None)[0] is NsState.ORPHAN
    for status in (StampStatus.UNREADABLE, StampStatus.FUTURE_SCHEMA):
        assert judge_(StampRead(status, detail="x"), None)[0] is NsState.UNKNOWN


def test_evidence_about_a_previous_owner_is_not_used() -> None:
    old = ev(Liveness.DEAD, pid=99)
    assert judge_(read(stamp()), old) == (NsState.LIVE, Grade.INFERRED)  # not probed yet
    assert judge_(read(stamp(heartbeat_at=NOW - 60)), old)[0] is NsState.UNKNOWN


def test_partial_stamp_is_garbage() -> None:
    assert parse_stamp(b'{"schema": 1, "lane": "a"').status is StampStatus.GARBAGE


# --- against real processes --------------------------------------------------------------------


def _state(root: Path, ns: Path) -> tuple[NsState, str]:
    v = Engine([str(root)]).snapshot().upserts[str(ns)]
    return v.state, v.reason


def test_pid_reuse_is_stale(root: Path) -> None:
    """The kernel's view of pid reuse: the pid names a live process whose start time differs."""
    me = ProcessIdentity.current()
    ns = make_stamp(root, "reused", pid=me.pid, start_ticks=me.start_ticks - 1)
    assert liveness(ProcessIdentity(me.pid, me.start_ticks - 1, me.boot_id))[0] is Liveness.REUSED
    state, reason = _state(root, ns)
    assert state is NsState.STALE and "another process" in reason


def test_stamp_of_a_dead_pid_is_stale(root: Path) -> None:
    p = subprocess.Popen(["true"])
    ident = ProcessIdentity.of(p.pid)
    p.wait()
    ns = make_stamp(root, "dead", pid=ident.pid, start_ticks=ident.start_ticks)
    assert _state(root, ns)[0] is NsState.STALE


def test_sigstopped_owner_is_hung_not_stale(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    lane = start_lane(procs, repo, root, "stopped")
    try:
        os.kill(lane.proc.pid, signal.SIGSTOP)
        wait_for(
            lambda: (
                judge(str(lane.namespace), lane.stamp, time.time()).liveness  # type: ignore[union-attr]
                is Liveness.STOPPED
            )
        )
        state, reason = _state(root, lane.namespace)
        assert state is NsState.HUNG and "stopped" in reason
        os.kill(lane.proc.pid, signal.SIGCONT)
        assert _state(root, lane.namespace)[0] is NsState.LIVE
    finally:
        stop_lane(lane)
    assert _state(root, lane.namespace)[0] is NsState.RELEASED


def test_stamp_from_another_host_ignores_local_pids(root: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    fresh = make_stamp(root, "remote-fresh", host="elsewhere.invalid", pid=dead.pid)
    me = ProcessIdentity.current()
    expired = make_stamp(
        root, "remote-old", host="elsewhere.invalid", pid=me.pid, heartbeat_at=time.time() - 600
    )
    os.utime(expired / ".lanewatch" / "owner.json", (time.time() - 600, time.time() - 600))
    picture = Engine([str(root)]).snapshot().upserts
    assert picture[str(fresh)].state is NsState.LIVE  # its pid is dead here: irrelevant
    assert picture[str(fresh)].grade == "inferred"
    assert picture[str(expired)].state is NsState.STALE  # its pid is alive here: irrelevant
    assert "elsewhere.invalid" in picture[str(expired)].reason


def _can_hide_proc() -> bool:
    return (
        os.geteuid() == 0
        and shutil.which("unshare") is not None
        and shutil.which("setpriv") is not None
        and subprocess.run(
            ["unshare", "-m", "--propagation", "private", "true"], capture_output=True
        ).returncode
        == 0
    )


@pytest.mark.skipif(not _can_hide_proc(), reason="needs root, unshare and setpriv")
def test_permission_error_reading_proc_is_never_stale(
    repo: Path, procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """As root, /proc is always readable, so the engine runs as `nobody` in a private mount
    namespace where /proc is remounted with hidepid=1: /proc/PID exists but reading its stat
    fails with EPERM, exactly as for another user's process on a hardened host."""
    shared = Path(tempfile.mkdtemp(prefix="lanewatch-test-hidepid-", dir=shared_temp()))
    try:
        shared.chmod(0o755)
        root = shared / "root"
        lane = start_lane(procs, repo, root, "hidden")
        inner = (
            "mount -t proc -o hidepid=1 proc /proc && "
            'exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"'
        )
        prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c", inner, "sh"]
        env = {**os.environ, "HOME": str(shared), "LANEWATCH_STATE_DIR": str(shared / "state")}
        copy = readable_by(prefix)  # nobody may not read the checkout (a clone in /root)
        program = copy.argv(str(copy.script(DRIVER)))
        driver = Driver([root.resolve()], tmp_path / "driver.log", prefix=prefix,
                        env=copy.env(env), program=program)  # fmt: skip
        try:
            key = str(lane.namespace)
            line = driver.wait(lambda ln: key in ln.get("ns", {}))
            seen = line["ns"][key]
            assert seen["state"] in ("live", "unknown"), seen
            assert "Operation not permitted" in seen["reason"] or "ermission" in seen["reason"]
            driver.wait(lambda ln: ln.get("settled"))
            states = [ln["ns"][key]["state"] for ln in driver.lines if key in ln.get("ns", {})]
            assert "stale" not in states
        finally:
            driver.close()
            stop_lane(lane)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


# --- claims that do not match: never live, whatever the owner's liveness ------------


def owned(s: Stamp, file_uid: int | None = 0, folder_uid: int | None = 0) -> StampRead:
    return StampRead(StampStatus.OK, s, file_uid=file_uid, folder_uid=folder_uid)


def test_consistent_claims_are_live_known() -> None:
    v = classify(owned(stamp()), ev(Liveness.ALIVE, uid=0, child_uid=0), NOW, host=HOST,
                 boot_id=BOOT)  # fmt: skip
    assert (v.state, v.grade, v.mismatch) == (NsState.LIVE, Grade.KNOWN, None)


@pytest.mark.parametrize(
    ("r", "e", "words"),
    [
        (owned(stamp(), file_uid=1000), ev(Liveness.ALIVE, uid=0),
         "the stamp file is owned by uid 1000, the stamp names uid 0"),
        (owned(stamp(), folder_uid=1000), ev(Liveness.ALIVE, uid=0),
         "the namespace folder is owned by uid 1000, the stamp names uid 0"),
        (owned(stamp(pid=1)), ev(Liveness.ALIVE, pid=1, uid=0),
         "it names pid 1 (init) as its owner"),
        (owned(stamp(child_pid=1, pgid=1)), ev(Liveness.ALIVE, uid=0),
         "it names pid 1 (init) as its command"),
        (owned(stamp()), ev(Liveness.ALIVE, uid=1000),
         "its owner pid 100 runs as uid 1000, not 0"),
        (owned(stamp()), ev(Liveness.STOPPED, uid=1000),
         "its owner pid 100 runs as uid 1000, not 0"),
        (owned(stamp(child_pid=200, child_start_ticks=9, pgid=200)),
         ev(Liveness.ALIVE, uid=0, child=Liveness.ALIVE, child_uid=1000),
         "its command pid 200 runs as uid 1000, not 0"),
        (owned(stamp(state=OwnerState.RELEASED), file_uid=7), None,
         "the stamp file is owned by uid 7"),
        (owned(stamp(), file_uid=7), ev(Liveness.DEAD), "the stamp file is owned by uid 7"),
    ],
)  # fmt: skip
def test_claims_that_do_not_match_are_flagged_unknown(
    r: StampRead, e: LivenessEvidence | None, words: str
) -> None:
    v = classify(r, e, NOW, host=HOST, boot_id=BOOT)
    assert v.state is NsState.UNKNOWN and v.grade is Grade.KNOWN
    assert v.mismatch is not None and words in v.mismatch
    assert v.reason == f"claims do not match: {v.mismatch}"


def test_what_was_not_read_is_not_a_mismatch() -> None:
    """No uid read (gone, unreadable), no owner of the file known: nothing flagged here (a kill
    requires them all read, `actions.authority`)."""
    v = classify(owned(stamp(), None, None), ev(Liveness.ALIVE), NOW, host=HOST, boot_id=BOOT)
    assert (v.state, v.mismatch) == (NsState.LIVE, None)
    dead = classify(owned(stamp()), ev(Liveness.REUSED, uid=1000), NOW, host=HOST, boot_id=BOOT)
    assert dead.state is NsState.STALE and dead.mismatch is None


def test_remote_stamps_are_not_compared_with_local_uids() -> None:
    """A shared folder's uids need not map between hosts; a remote lane is judged by its
    heartbeat only (and is neither killed nor cleared from here)."""
    r = owned(stamp(host="elsewhere"), file_uid=1000, folder_uid=1000)
    v = classify(r, None, NOW, host=HOST, boot_id=BOOT)
    assert (v.state, v.mismatch) == (NsState.LIVE, None)
