"""Claiming lanes with real processes: one owner, fail-closed refusals, locks, the ledger."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.errors import ClaimRefused, LanewatchError
from lanewatch.lanes import lane as lane_module
from lanewatch.lanes import ledger
from lanewatch.lanes.lane import Lane, locate
from lanewatch.lanes.lock import NamespaceLock, is_lock_held, lock_path
from lanewatch.lanes.roots import Registry
from lanewatch.lanes.stamp import (
    OwnerState,
    StampRead,
    StampStatus,
    read_stamp,
    stamp_path,
    write_stamp,
)
from lanewatch.linux import procid
from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness
from tests.conftest import Spawn, wait_for

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

RACERS = 8

# A claimant in its own process. argv: lane root checkout barrier release out
CLAIMANT = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from lanewatch.errors import ClaimRefused
    from lanewatch.lanes.lane import Lane

    name, root, checkout, barrier, release, out = sys.argv[1:7]
    out = Path(out)

    def report(data):
        tmp = out.with_name(out.name + ".part")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, out)

    def wait(path):
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                sys.exit(9)
            time.sleep(0.002)

    lane = Lane(name, root=root, checkout=checkout, command=["claimant", str(os.getpid())])
    Path(out.with_name(out.name + ".ready")).touch()
    wait(barrier)
    try:
        lane.claim()
    except ClaimRefused as exc:
        owner = exc.owner.pid if exc.owner is not None else None
        report({"won": False, "pid": os.getpid(), "message": str(exc), "owner": owner})
        sys.exit(3)
    report({"won": True, "pid": os.getpid()})
    wait(release)
    lane.release(exit_code=0)
    """
)


def start_claimant(
    spawn: Spawn, tmp_path: Path, tag: str, lane: str, root: Path, checkout: Path
) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / f"claimant-{tag}.json"
    args = [
        lane,
        str(root),
        str(checkout),
        str(tmp_path / "go"),
        str(tmp_path / "release"),
        str(out),
    ]
    proc = spawn([sys.executable, "-c", CLAIMANT, *args])
    return proc, out


def test_claim_writes_a_complete_stamp_and_release_keeps_files(repo: Path, root: Path) -> None:
    lane = Lane("worker/1", root=root, checkout=repo, heartbeat=2.5, command=["pytest", "-k", "x"])
    with lane:
        result = read_stamp(lane.namespace)
        assert result.status is StampStatus.OK
        stamp = result.stamp
        assert stamp is not None and stamp == lane.stamp
        me = ProcessIdentity.current()
        assert (stamp.pid, stamp.start_ticks, stamp.boot_id) == (me.pid, me.start_ticks, me.boot_id)
        assert stamp.start_ticks == procid.start_ticks(os.getpid())
        assert stamp.lane == "worker/1"
        assert stamp.namespace == lane.namespace.name
        assert stamp.checkout_path == os.path.realpath(repo)
        assert stamp.host == procid.hostname()
        assert stamp.uid == os.getuid()
        assert stamp.command == ["pytest", "-k", "x"]
        assert stamp.heartbeat_interval == 2.5
        assert stamp.state is OwnerState.LIVE
        assert stamp.root == str(root.resolve())
        for sub in ("tmp", "scratch", "receipts"):
            assert (lane.namespace / sub).is_dir()
        assert lane.env()["TMPDIR"] == str(lane.namespace / "tmp")
        (lane.scratch_dir / "kept.txt").write_text("kept")
    after = read_stamp(lane.namespace).stamp
    assert after is not None and after.state is OwnerState.RELEASED and after.exit_code == 0
    assert after.released_at is not None and after.started_at <= after.released_at
    assert (lane.scratch_dir / "kept.txt").read_text() == "kept"
    events = [line.event for line in ledger.read(lane.namespace)]
    assert events == ["started", "released"]
    assert str(root.resolve()) in [e.path for e in Registry().list()]


def test_an_exception_in_the_block_releases_with_exit_code_1(repo: Path, root: Path) -> None:
    lane = Lane("boom", root=root, checkout=repo)
    with pytest.raises(RuntimeError), lane:
        raise RuntimeError("boom")
    after = read_stamp(lane.namespace).stamp
    assert after is not None and after.state is OwnerState.RELEASED and after.exit_code == 1
    assert is_lock_held(lane.namespace) is False


def test_the_lock_is_never_unlinked(repo: Path, root: Path) -> None:
    lane = Lane("locky", root=root, checkout=repo)
    lane.claim()
    path = lock_path(lane.namespace)
    inode = os.stat(path).st_ino
    assert is_lock_held(lane.namespace) is True
    assert lane._lock.held
    lane.release()
    assert path.exists() and os.stat(path).st_ino == inode
    assert is_lock_held(lane.namespace) is False
    with Lane("locky", root=root, checkout=repo):  # the next owner takes the same inode
        assert os.stat(path).st_ino == inode
        assert is_lock_held(lane.namespace) is True
    assert os.stat(path).st_ino == inode


def flock_modes_on(path: Path) -> list[str]:
    """READ/WRITE of every granted flock on `path`'s inode, from the kernel's lock table."""
    st = os.stat(path)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    modes = []
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == key:
            modes.append(parts[3])
    return modes


def test_the_owner_holds_a_shared_lock_on_the_namespace_folder(repo: Path, root: Path) -> None:
    lane = Lane("folder", root=root, checkout=repo)
    with lane:
        assert flock_modes_on(lane.namespace) == ["READ"]  # what systemd-tmpfiles respects
        assert flock_modes_on(lock_path(lane.namespace)) == ["WRITE"]
    assert flock_modes_on(lane.namespace) == []
    assert flock_modes_on(lock_path(lane.namespace)) == []


def test_a_heartbeat_no_stamp_can_carry_is_refused(repo: Path, root: Path) -> None:
    for bad in (float("inf"), float("nan"), 1e300):
        with pytest.raises(LanewatchError, match="heartbeat"):
            Lane("beat", root=root, checkout=repo, heartbeat=bad)
    assert Lane("beat", root=root, checkout=repo, heartbeat=None).heartbeat_interval == 5.0


def test_is_lock_held_without_a_lock_file(tmp_path: Path) -> None:
    assert is_lock_held(tmp_path / "nothing") is None


def test_a_second_claim_in_the_same_process_is_refused(repo: Path, root: Path) -> None:
    with Lane("solo", root=root, checkout=repo, command=["first"]) as first:
        second = Lane("solo", root=root, checkout=repo, command=["second"])
        with pytest.raises(ClaimRefused) as info:
            second.claim()
        assert f"pid {os.getpid()}" in str(info.value)
        assert info.value.owner == first.stamp
        assert read_stamp(first.namespace).stamp == first.stamp  # untouched by the loser
        assert NamespaceLock(first.namespace).try_acquire() is False
    refused = [line for line in ledger.read(first.namespace) if line.event == "claim-refused"]
    assert len(refused) == 1


def test_claiming_twice_on_one_object_is_an_error(repo: Path, root: Path) -> None:
    lane = Lane("twice", root=root, checkout=repo)
    with lane:
        with pytest.raises(LanewatchError):
            lane.claim()
        assert lane.stamp.state is OwnerState.LIVE
    assert is_lock_held(lane.namespace) is False


def test_a_lane_object_can_claim_again_after_release(repo: Path, root: Path) -> None:
    lane = Lane("again", root=root, checkout=repo, heartbeat=0.05)
    for _ in range(2):
        lane.claim()
        first = os.stat(stamp_path(lane.namespace)).st_mtime
        wait_for(lambda t=first: os.stat(stamp_path(lane.namespace)).st_mtime > t)  # heartbeat
        lane.release()
        assert is_lock_held(lane.namespace) is False


def test_racing_claims_from_separate_processes(
    spawn: Spawn, repo: Path, root: Path, tmp_path: Path
) -> None:
    racers = [
        start_claimant(spawn, tmp_path, str(i), "contested", root, repo) for i in range(RACERS)
    ]
    wait_for(lambda: all(out.with_name(out.name + ".ready").exists() for _, out in racers), 60)
    (tmp_path / "go").touch()
    wait_for(lambda: all(out.exists() for _, out in racers), 60)
    results = [json.loads(out.read_text()) for _, out in racers]
    winners = [r for r in results if r["won"]]
    losers = [r for r in results if not r["won"]]
    assert len(winners) == 1, results
    winner = winners[0]["pid"]
    for r in losers:
        assert r["owner"] == winner, r
        assert f"pid {winner}" in r["message"], r
        assert "already owned" in r["message"]
    for proc, _ in racers:
        if proc.pid != winner:
            assert proc.wait(timeout=30) == 3

    namespace = locate("contested", root=root, checkout=repo).namespace
    stamp = read_stamp(namespace).stamp
    assert stamp is not None and stamp.pid == winner and stamp.state is OwnerState.LIVE
    lines = ledger.read(namespace)
    refused = [line for line in lines if line.event == "claim-refused"]
    assert sorted(line.pid for line in refused) == sorted(r["pid"] for r in losers)
    assert all(line.fields.get("owner_pid") == winner for line in refused)
    assert [line.pid for line in lines if line.event == "started"] == [winner]

    (tmp_path / "release").touch()
    winner_proc = next(p for p, _ in racers if p.pid == winner)
    assert winner_proc.wait(timeout=30) == 0
    assert read_stamp(namespace).stamp.state is OwnerState.RELEASED  # type: ignore[union-attr]
    assert is_lock_held(namespace) is False


def test_a_killed_owner_leaves_a_live_stamp_that_readers_can_judge(
    spawn: Spawn, repo: Path, root: Path, tmp_path: Path
) -> None:
    proc, out = start_claimant(spawn, tmp_path, "victim", "victim", root, repo)
    (tmp_path / "go").touch()
    wait_for(out.exists, 30)
    namespace = locate("victim", root=root, checkout=repo).namespace
    assert is_lock_held(namespace) is True
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL

    result = read_stamp(namespace)
    stamp = result.stamp
    assert stamp is not None and stamp.state is OwnerState.LIVE and stamp.pid == proc.pid
    state, reason = liveness(ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id))
    assert state is Liveness.DEAD, reason
    assert str(proc.pid) in reason
    assert is_lock_held(namespace) is False

    with Lane("victim", root=root, checkout=repo, command=["next"]) as successor:
        assert successor.stamp.pid == os.getpid()
    events = [line.event for line in ledger.read(namespace)]
    assert events == ["started", "started", "released"]


def test_a_refusal_names_the_live_owner_not_an_old_stamp(
    spawn: Spawn, repo: Path, root: Path, tmp_path: Path
) -> None:
    """The loser of a race may read the stamp before the winner wrote its own: it must not name
    the previous (released or dead) owner."""
    with Lane("handover", root=root, checkout=repo, command=["previous"]):
        pass
    proc, out = start_claimant(spawn, tmp_path, "holder", "handover", root, repo)
    (tmp_path / "go").touch()
    wait_for(out.exists, 30)
    with pytest.raises(ClaimRefused) as info:
        Lane("handover", root=root, checkout=repo).claim()
    assert f"pid {proc.pid}" in str(info.value)
    (tmp_path / "release").touch()
    assert proc.wait(timeout=30) == 0


def test_a_loser_that_reads_before_the_winner_wrote_waits_for_the_winners_stamp(
    repo: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between the winner's lock and its stamp, made deterministic: the loser's
    first read sees the previous owner's released stamp; the winner writes its own right after."""
    with Lane("window", root=root, checkout=repo, command=["previous"]) as previous:
        pass
    winner = Lane("window", root=root, checkout=repo, command=["winner"])
    assert winner._lock.try_acquire()  # the winner holds the lock but has no stamp yet
    reads: list[StampStatus] = []
    real_read = lane_module.read_stamp

    def read_then_winner_writes(namespace: Path) -> StampRead:
        result = real_read(namespace)
        reads.append(result.status)
        if len(reads) == 1:
            assert result.stamp is not None and result.stamp.state is OwnerState.RELEASED
            write_stamp(
                namespace,
                previous.stamp.with_changes(
                    state=OwnerState.LIVE, command=["winner"], released_at=None, exit_code=None
                ),
            )
        return result

    monkeypatch.setattr(lane_module, "read_stamp", read_then_winner_writes)
    try:
        with pytest.raises(ClaimRefused) as info:
            Lane("window", root=root, checkout=repo, command=["loser"]).claim()
    finally:
        winner._lock.release()
    assert len(reads) >= 2
    assert info.value.owner is not None and info.value.owner.command == ["winner"]
    assert "(winner)" in str(info.value)


def test_a_holder_without_a_live_stamp_is_not_misnamed(repo: Path, root: Path) -> None:
    with Lane("silent", root=root, checkout=repo, command=["previous"]) as previous:
        pass
    holder = NamespaceLock(previous.namespace)
    assert holder.try_acquire()  # locked, but the stamp is still the released one
    try:
        with pytest.raises(ClaimRefused) as info:
            Lane("silent", root=root, checkout=repo).claim()
    finally:
        holder.release()
    assert info.value.owner is None
    assert "no live stamp" in str(info.value)
    refused = [line for line in ledger.read(previous.namespace) if line.event == "claim-refused"]
    assert len(refused) == 1 and refused[0].fields["owner_pid"] is None


SCRATCH_USER = textwrap.dedent(
    """
    import os, sys, time
    from lanewatch.lanes.lane import scratch_dir_for
    root, checkout, ready, stop = sys.argv[1:5]
    path = scratch_dir_for("worker-3", root=root, checkout=checkout)
    assert scratch_dir_for("worker-3", root=root, checkout=checkout) == path
    (path / "made-here").write_text(str(os.getpid()))
    if os.fork() == 0:
        sys.exit(0)  # a forked child that exits normally must not release the parent's claim
    os.wait()
    with open(ready, "w") as f:
        f.write(str(path))
    deadline = time.monotonic() + 60
    while not os.path.exists(stop) and time.monotonic() < deadline:
        time.sleep(0.01)
    """
)


def test_scratch_dir_for_claims_for_the_process_life(
    spawn: Spawn, repo: Path, root: Path, tmp_path: Path
) -> None:
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    proc = spawn([sys.executable, "-c", SCRATCH_USER, str(root), str(repo), str(ready), str(stop)])
    wait_for(ready.exists, 30)
    wait_for(lambda: ready.read_text(), 10)
    scratch = Path(ready.read_text())
    namespace = locate("worker-3", root=root, checkout=repo).namespace
    assert scratch == namespace / "scratch"
    assert (scratch / "made-here").read_text() == str(proc.pid)
    # the forked child has exited: the claim is still the parent's
    stamp = read_stamp(namespace).stamp
    assert stamp is not None and stamp.state is OwnerState.LIVE and stamp.pid == proc.pid
    assert is_lock_held(namespace) is True

    second = subprocess.run(
        [sys.executable, "-c", SCRATCH_USER, str(root), str(repo), str(ready), str(stop)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode != 0
    assert "ClaimRefused" in second.stderr and f"pid {proc.pid}" in second.stderr

    stop.touch()
    assert proc.wait(timeout=30) == 0
    stamp = read_stamp(namespace).stamp
    assert stamp is not None and stamp.state is OwnerState.RELEASED  # released at exit
    assert is_lock_held(namespace) is False


def test_a_symlinked_namespace_is_refused(repo: Path, root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = locate("linked", root=root, checkout=repo)
    target.namespace.symlink_to(elsewhere)
    with pytest.raises(LanewatchError, match="symlink"):
        Lane("linked", root=root, checkout=repo).claim()
    assert list(elsewhere.iterdir()) == []


# -- the ledger -------------------------------------------------------------------------------

APPENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from lanewatch.lanes import ledger
    namespace, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(count):
        ledger.append(namespace, "note", lane=tag, i=i, pad="x" * 3000)
    """
)


def test_concurrent_appends_never_interleave(spawn: Spawn, tmp_path: Path) -> None:
    namespace = tmp_path / "ns"
    (namespace / ".lanewatch").mkdir(parents=True)
    writers = [
        spawn([sys.executable, "-c", APPENDER, str(namespace), f"w{i}", "150"]) for i in range(4)
    ]
    for w in writers:
        assert w.wait(timeout=60) == 0
    lines = ledger.read(namespace)
    assert len(lines) == 600
    raw = ledger.ledger_path(namespace).read_bytes().splitlines()
    assert len(raw) == 600 and all(json.loads(r)["event"] == "note" for r in raw)
    for tag in ("w0", "w1", "w2", "w3"):
        assert [line.fields["i"] for line in lines if line.lane == tag] == list(range(150))


def test_readers_skip_corrupt_lines(tmp_path: Path) -> None:
    namespace = tmp_path / "ns"
    (namespace / ".lanewatch").mkdir(parents=True)
    ledger.append(namespace, "started", lane="a")
    with ledger.ledger_path(namespace).open("ab") as f:
        f.write(b'not json\n[1,2]\n\xff\xfe\n{"event": 5}\n{"time": 1, "event": "x"\n')
        f.write(b'{"time": "soon", "event": "x", "lane": "a"}\n' + b"x" * 70_000 + b"\n")
    ledger.append(namespace, "released", lane="a", exit_code=0)
    assert [line.event for line in ledger.read(namespace)] == ["started", "released"]
    assert [line.event for line in ledger.read(namespace, tail=1)] == ["released"]
    assert ledger.read(namespace, tail=0) == []
    assert ledger.read(tmp_path / "missing") == []
    # The last line, read from the end: corrupt and over-long lines after it are passed over.
    last = ledger.last(namespace)
    assert last is not None and last.event == "released" and last.fields == {"exit_code": 0}
    with ledger.ledger_path(namespace).open("ab") as f:
        f.write(b"x" * 70_000 + b"\nnot json\n")
    assert ledger.last(namespace) is None  # nothing whole in the last line's reach
    assert ledger.last(tmp_path / "missing") is None
    ledger.append(namespace, "cleared", lane="a")
    last = ledger.last(namespace)
    assert last is not None and last.event == "cleared"


def test_a_symlinked_ledger_is_not_written_through(tmp_path: Path) -> None:
    namespace = tmp_path / "ns"
    (namespace / ".lanewatch").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    ledger.ledger_path(namespace).symlink_to(victim)
    # Skipped and said why, like any ledger that is not a regular file (a diary never fails
    # or blocks the action that writes it).
    assert ledger.append(namespace, "note", lane="a") == "ledger.jsonl is a symlink, not a file"
    assert victim.read_text() == "precious\n"


@pytest.fixture
def btrfs_subvolume(tmp_path: Path) -> Iterator[Path]:
    """A subvolume of a btrfs filesystem on a loop device (root and btrfs-progs needed)."""
    mkfs = shutil.which("mkfs.btrfs")
    if os.geteuid() != 0 or mkfs is None or "btrfs" not in Path("/proc/filesystems").read_text():
        pytest.skip("needs root, btrfs in the kernel and mkfs.btrfs")
    image, mount = tmp_path / "btrfs.img", tmp_path / "btrfs"
    with image.open("wb") as f:
        f.truncate(150 * 1024 * 1024)
    subprocess.run([mkfs, "-q", str(image)], check=True, capture_output=True)
    mount.mkdir()
    done = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot loop-mount: {done.stderr.decode(errors='replace').strip()}")
    try:
        subprocess.run(
            ["btrfs", "subvolume", "create", str(mount / "sub")], check=True, capture_output=True
        )
        yield mount / "sub"
    finally:
        subprocess.run(["umount", str(mount)], check=True, capture_output=True)


@pytest.mark.privileged
def test_is_lock_held_on_btrfs_where_stat_and_proc_locks_disagree(
    repo: Path, btrfs_subvolume: Path
) -> None:
    """stat() reports a subvolume's own device; /proc/locks the filesystem's."""
    lane = Lane("btrfs", root=btrfs_subvolume / "root", checkout=repo)
    with lane:
        assert is_lock_held(lane.namespace) is True
    assert is_lock_held(lane.namespace) is False
