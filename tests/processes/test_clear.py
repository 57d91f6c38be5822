"""Clear against real lanes, real holders, real locks, real mounts: it moves a dead namespace
into the trash in one rename, or it refuses and moves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lanewatch.actions import clear as clear_mod
from lanewatch.actions import pin as pin_mod
from lanewatch.actions.clear import ClearResult, clear
from lanewatch.actions.results import ActionRefused
from lanewatch.actions.targets import TargetError
from lanewatch.actions.trashbox import PAYLOAD, RECORD, trash_dir
from lanewatch.lanes import ledger
from lanewatch.lanes.lane import Lane as SchemeLane
from lanewatch.lanes.lock import lock_path
from lanewatch.lanes.roots import ROOT_META
from lanewatch.lanes.stamp import META_DIR, OwnerState, read_stamp
from tests.conftest import LANEWATCH, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import (
    DEADLINE,
    NOBODY,
    Procs,
    as_user,
    bind_mounted,
    make_stamp,
    python_as,
    released_namespace,
)

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# An orphan folder made by a plain mkdir is 0755: a normal user's clear cannot see past the
# processes it cannot inspect there, and refuses (test_clear_normal_user.py says so).
plain_folders_need_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="clears a 0755 folder made by a plain mkdir: root only"
)

lw = actionkit.lw  # the kit's fixtures, found by pytest under these names
scratch = actionkit.scratch


def inode(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def assert_refused(result: ClearResult, ns: Path, *words: str) -> None:
    assert result.outcome == "refused", result.message
    for word in words:
        assert word in result.message, result.message
    assert ns.is_dir(), "a refused clear moved it"


def cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        [*LANEWATCH, *args], capture_output=True, text=True, timeout=60, **kw
    )  # fmt: skip


# --- the move -------------------------------------------------------------------------------


def test_clear_moves_the_very_folder_in_one_rename(scratch: Path) -> None:
    ns = released_namespace(scratch, "done")
    before = inode(ns)
    result = clear("done")
    assert result.outcome == "cleared", result.message
    assert not os.path.lexists(ns)
    entry = trash_dir(scratch) / str(result.trash_id)
    assert inode(entry / PAYLOAD) == before  # moved, not copied
    assert (entry / PAYLOAD / "tmp" / "f0.txt").read_text().startswith("file 0")
    record = json.loads((entry / RECORD).read_text())
    assert record["original"] == str(ns) and record["name"] == ns.name
    assert record["state"] == "released" and record["lane"] == "done"
    assert record["cleared_by"]["pid"] == os.getpid() and record["bytes"] == result.bytes
    assert [line.event for line in ledger.read(entry / PAYLOAD)][-1] == "cleared"
    # 3 files, the stamp, and the owner.lock the clear took (created: the namespace had none)
    assert "released" in result.message and result.files == 5


@plain_folders_need_root
def test_dry_run_moves_nothing_and_creates_nothing(scratch: Path) -> None:
    ns = scratch / "junk"
    (ns / "a").mkdir(parents=True)
    result = clear("junk", dry_run=True)
    assert result.outcome == "would-clear", result.message
    assert sorted(os.listdir(ns)) == ["a"]
    assert not trash_dir(scratch).exists()


@plain_folders_need_root
def test_stale_orphan_and_released_are_cleared_by_name_path_or_lane(
    lw: Procs, scratch: Path
) -> None:
    dead = lw.start(["true"])
    dead.wait()
    stale = make_stamp(scratch, "stale-lane", pid=dead.pid, start_ticks=1)
    (scratch / "orphan-folder").mkdir()
    released = released_namespace(scratch, "released-lane")
    assert clear("stale-lane").state == "stale"
    assert clear(str(scratch / "orphan-folder")).state == "orphan"
    assert clear(released.name).state == "released"
    assert not stale.exists() and not released.exists()


# --- never live or hung ---------------------------------------------------------------------


def test_live_lane_is_refused(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "live")
    assert_refused(clear("live", check=False), lane.namespace, "live")
    with pytest.raises(ActionRefused):
        clear("live")
    assert "clear-refused" in [line.event for line in ledger.read(lane.namespace)]


def test_hung_lane_is_refused(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "hung")
    os.kill(lane.proc.pid, signal.SIGSTOP)
    try:
        assert_refused(clear("hung", check=False), lane.namespace, "hung")
    finally:
        os.kill(lane.proc.pid, signal.SIGCONT)


def test_held_lock_is_refused_even_when_the_stamp_says_released(lw: Procs, scratch: Path) -> None:
    ns = released_namespace(scratch, "locked")
    lock_path(ns).touch()
    holder = lw.holder("lock", lock_path(ns))
    assert_refused(clear("locked", check=False), ns, "lock", "held")
    holder.kill()
    holder.wait()
    assert clear("locked").outcome == "cleared"


def test_dead_owner_whose_python_fork_keeps_the_lock(lw: Procs, repo: Path, scratch: Path) -> None:
    """A Lane in Python forks; the parent dies; the child inherited the lock's fd."""
    code = textwrap.dedent(
        f"""
        import os, sys, time
        from lanewatch.lanes.lane import Lane
        lane = Lane("forked", root={str(scratch)!r}, checkout={str(repo)!r}).claim()
        if os.fork() == 0:
            print(os.getpid(), flush=True)
            time.sleep(300)
        else:
            time.sleep(300)
        """
    )
    parent = lw.start([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    ns = SchemeLane("forked", root=scratch, checkout=repo).namespace
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    result = clear("forked", check=False)
    assert_refused(result, ns, "lock")
    assert read_stamp(ns).stamp.pid == parent.pid  # type: ignore[union-attr]
    os.kill(child, signal.SIGKILL)


def test_dead_owner_whose_command_lives_on_is_headless_not_stale(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    """The runner is SIGKILLed (pid dead, lock free); its command lives on in tmp/: the lane is
    headless, and the clear is refused naming the process and the way to end it."""
    lane = lw.lane(repo, scratch, "cwd", ["sh", "-c", 'cd "$TMPDIR" && exec sleep 600'])
    child = lane.stamp.child_pid
    assert child is not None
    wait_for(
        # Inside the fence the kernel names that cwd /tmp: compare the folders themselves.
        lambda: os.path.samefile(f"/proc/{child}/cwd", lane.namespace / "tmp"),
        DEADLINE,
        what="cd",
    )
    os.kill(lane.proc.pid, signal.SIGKILL)
    lane.proc.wait()
    result = clear("cwd", check=False)
    assert result.state == "headless"
    assert_refused(
        result, lane.namespace, f"pid {child} (sleep 600)", "still run", "lanewatch kill"
    )


RELEASE_AND_LEAVE = textwrap.dedent(
    """
    import os, subprocess, sys
    from lanewatch.lanes.lane import Lane
    lane = Lane("fork", root=sys.argv[1], checkout=sys.argv[2], command=["leaver"]).claim()
    env = {**os.environ, **lane.env()}
    left = subprocess.Popen(["sleep", "600"], cwd=lane.tmp_dir, env=env, start_new_session=True)
    print(left.pid, flush=True)
    lane.release(exit_code=0)
    """
)


def test_a_process_left_behind_a_clean_release_is_found_by_its_marker(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    """An owner that released without waiting (a `Lane` in Python) left a process of its own
    session: no tree, no group ties it to the lane, its $LANEWATCH_NAMESPACE does."""
    proc = lw.start(
        [sys.executable, "-c", RELEASE_AND_LEAVE, str(scratch), str(repo)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    left = int(proc.stdout.readline())
    assert proc.wait(timeout=DEADLINE) == 0
    ns = SchemeLane("fork", root=scratch, checkout=repo).namespace
    assert read_stamp(ns).stamp.state is OwnerState.RELEASED  # type: ignore[union-attr]
    result = clear("fork", check=False)
    assert result.state == "headless"
    assert_refused(result, ns, f"pid {left} (sleep 600)", "still run")


@pytest.mark.parametrize("kind", ["cwd", "file", "dir", "deleted", "mmap"])
def test_any_process_holding_anything_inside_refuses(lw: Procs, scratch: Path, kind: str) -> None:
    ns = released_namespace(scratch, f"held-{kind}")
    holder = lw.holder(kind, ns / "tmp")
    if kind == "mmap":  # a mapping with no fd left: only /proc/PID/maps shows it
        assert not any(
            os.readlink(f"/proc/{holder.pid}/fd/{fd}").startswith(str(ns))
            for fd in os.listdir(f"/proc/{holder.pid}/fd")
        )
    result = clear(f"held-{kind}", check=False)
    assert_refused(result, ns, f"pid {holder.pid}")
    holder.kill()
    holder.wait()
    assert clear(f"held-{kind}").outcome == "cleared"


def test_a_file_opened_for_a_moment_does_not_block(lw: Procs, scratch: Path) -> None:
    """Like a fanotify listener or an indexer: it opens a file inside, then closes it."""
    ns = released_namespace(scratch, "glance")
    code = textwrap.dedent(
        """
        import sys, time
        f = open(sys.argv[1])
        print("ready", flush=True)
        time.sleep(0.3)
        f.close()
        time.sleep(300)
        """
    )
    reader = lw.start([sys.executable, "-c", code, str(ns / "tmp" / "f0.txt")],
                      stdout=subprocess.PIPE, cwd="/")  # fmt: skip
    assert reader.stdout is not None and reader.stdout.readline() == b"ready\n"
    result = clear("glance", check=False)
    assert result.outcome == "cleared", result.message
    assert reader.poll() is None


# A fanotify listener with an event it has not read yet: it holds the event's file open,
# read-only, for as long as it takes (a busy recorder: seconds). Its read-write file inside
# is a real use and still refuses.
FANOTIFY_HOLDER = textwrap.dedent(
    """
    import ctypes, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    group = libc.fanotify_init(0, 0)  # FAN_CLASS_NOTIF: root (CAP_SYS_ADMIN) only
    assert group >= 0, ctypes.get_errno()
    f = open(sys.argv[1], sys.argv[2])
    print("ready", flush=True)
    time.sleep(300)
    """
)


@pytest.mark.privileged
@pytest.mark.parametrize("mode", ["r", "r+"])
def test_a_fanotify_listeners_event_file_does_not_block(
    lw: Procs, scratch: Path, mode: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("fanotify_init needs root (CAP_SYS_ADMIN)")
    ns = released_namespace(scratch, "watched")
    (ns / "tmp" / "f0.txt").write_text("x")
    args = [sys.executable, "-c", FANOTIFY_HOLDER, str(ns / "tmp" / "f0.txt"), mode]
    listener = lw.start(args, stdout=subprocess.PIPE, cwd="/")
    assert listener.stdout is not None and listener.stdout.readline() == b"ready\n"
    result = clear("watched", check=False)
    if mode == "r":
        assert result.outcome == "cleared", result.message
    else:
        assert_refused(result, ns, f"pid {listener.pid}")
    assert listener.poll() is None


def test_stamp_is_read_again_under_the_lock(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the first look (released) and the lock, a new owner claimed and wrote its stamp."""
    ns = released_namespace(scratch, "reclaimed")
    real_pin = pin_mod.pin

    def pin_then_claim(path: Path, **kw: Any) -> pin_mod.Pinned:
        pinned = real_pin(path, **kw)
        make_stamp(scratch, "reclaimed")  # live: names this very process
        return pinned

    monkeypatch.setattr(clear_mod, "pin", pin_then_claim)
    assert_refused(clear("reclaimed", check=False), ns, "live")


def test_an_owner_changed_since_shown_is_refused(lw: Procs, scratch: Path) -> None:
    ns = released_namespace(scratch, "shown")
    from lanewatch.actions.assess import Seen

    result = clear("shown", seen=Seen(12345, 1.0), check=False)
    assert_refused(result, ns, "owner changed")


def test_a_permission_error_while_checking_refuses(scratch: Path) -> None:
    """As another uid, this test's own processes cannot be inspected: cannot tell, refuse."""
    prefix = as_user(NOBODY, caps=("dac_override", "dac_read_search"))
    ns = released_namespace(scratch, "unseen")
    done = python_as(
        prefix,
        f"""
        from pathlib import Path
        from lanewatch.actions.clear import clear
        r = clear({str(ns)!r}, roots=[Path({str(scratch)!r})], check=False)
        print(r.outcome)
        print(r.message)
        """,
    )
    assert done.returncode == 0, done.stderr
    outcome, message = done.stdout.splitlines()[:2]
    assert outcome == "refused" and "cannot tell" in message, message
    assert "could not be inspected" in message and "EACCES" in message
    assert ns.is_dir()


# --- only a real folder directly inside a known root ----------------------------------------


def test_only_folders_directly_inside_a_known_root(scratch: Path, tmp_path: Path) -> None:
    ns = released_namespace(scratch, "deep")
    (ns / "sub").mkdir()
    other = tmp_path / "unregistered"
    (other / "x").mkdir(parents=True)
    for spec, why in [
        (str(scratch), "scratch root itself"),
        (str(scratch / ROOT_META), ROOT_META),
        (str(ns / "sub"), "not directly inside"),
        (str(other / "x"), "not inside a known scratch root"),
        ("../x", "not inside a known"),
    ]:
        with pytest.raises(TargetError, match=why):
            clear(spec)
        assert clear(spec, check=False).outcome == "refused"
    assert ns.is_dir() and (other / "x").is_dir()


def test_never_through_a_symlink(scratch: Path, tmp_path: Path) -> None:
    ns = released_namespace(scratch, "target")
    (scratch / "link").symlink_to(ns)
    assert_refused(clear(str(scratch / "link"), check=False), ns, "symlink")
    assert_refused(clear("link", check=False), ns, "symlink")
    assert (scratch / "link").is_symlink()
    # A namespace whose .lanewatch is a symlink to somewhere else.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    odd = scratch / "odd"
    odd.mkdir()
    (odd / META_DIR).symlink_to(elsewhere)
    assert_refused(clear("odd", check=False), odd, "symlink")
    assert os.listdir(elsewhere) == []  # no lock file created through the link


def test_a_symlink_inside_is_moved_not_followed(scratch: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    ns = released_namespace(scratch, "links")
    (ns / "tmp" / "out").symlink_to(outside)
    result = clear("links")
    assert result.outcome == "cleared"
    assert (outside / "keep").read_text() == "mine"
    assert os.readlink(Path(str(result.trash_path)) / "tmp" / "out") == str(outside)


@pytest.fixture
def bind_mount(tmp_path: Path, scratch: Path) -> Iterator[tuple[Path, Path]]:
    source = tmp_path / "precious"
    source.mkdir()
    (source / "data").write_text("not yours")
    ns = released_namespace(scratch, "mounted")
    point = ns / "tmp" / "bound"
    point.mkdir()
    with bind_mounted(source, point):
        yield ns, point


@pytest.mark.privileged
def test_a_bind_mount_inside_refuses(bind_mount: tuple[Path, Path]) -> None:
    ns, point = bind_mount
    assert point.stat().st_dev == ns.stat().st_dev  # the cheap checks would miss it
    result = clear("mounted", check=False)
    assert_refused(result, ns, "mount point", str(point))
    assert (point / "data").read_text() == "not yours"


# --- races ----------------------------------------------------------------------------------


def test_two_clears_at_once_one_moves_the_other_finds_it_gone(scratch: Path) -> None:
    for round_ in range(3):
        ns = released_namespace(scratch, f"race{round_}")
        procs = [
            subprocess.Popen(
                [*LANEWATCH, "clear", str(ns), "--yes"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=60) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        said = sorted("cleared" if "cleared lane" in o else o for o, _ in outs)
        assert said[0] == "cleared" and "already gone" in said[1], outs
        assert not ns.exists()


def test_two_clears_in_threads_neither_errors(scratch: Path) -> None:
    ns = released_namespace(scratch, "threads")
    results: list[ClearResult] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        barrier.wait()
        results.append(clear(str(ns), check=False))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert sorted(r.outcome for r in results) == ["cleared", "gone"]


@plain_folders_need_root
def test_a_writer_recreating_it_after_the_move_makes_a_new_namespace(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    args = [*LANEWATCH, "run", "--root", str(scratch), "--lane", "again", "--", "true"]
    assert lw.start(args, cwd=repo).wait(timeout=DEADLINE) == 0
    ns = SchemeLane("again", root=scratch, checkout=repo).namespace
    old = inode(ns)
    cleared = clear("again")
    assert lw.start(args, cwd=repo).wait(timeout=DEADLINE) == 0
    assert ns.is_dir() and inode(ns) != old
    events = [line.event for line in ledger.read(ns)]
    assert events == ["started", "spawned", "exited", "released"]  # no history of the old one
    assert read_stamp(ns).stamp.pid != read_stamp(Path(str(cleared.trash_path))).stamp.pid  # type: ignore[union-attr]
    # A plain writer that recreates the folder makes an orphan, not the old lane.
    assert clear("again").outcome == "cleared"
    (ns / "tmp").mkdir(parents=True)
    (ns / "tmp" / "late.txt").write_text("late write")
    assert clear("again", dry_run=True).state == "orphan"


# --- the CLI --------------------------------------------------------------------------------


def test_cli_without_a_terminal_refuses_and_moves_nothing(scratch: Path) -> None:
    ns = released_namespace(scratch, "ask")
    done = cli("clear", "ask")
    assert done.returncode == 7 and "pass --yes" in done.stderr  # needs confirmation
    assert "released" in done.stdout and ns.is_dir()


def test_cli_stale_clears_every_namespace_nobody_runs_in(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    """`--stale` is the dashboard's Stale view: stale, orphan and released (docs/clearing.md).
    Formerly it left released ones, while lanewatch_stale_bytes counted them."""
    dead = lw.start(["true"])
    dead.wait()
    stale = [make_stamp(scratch, f"s{i}", pid=dead.pid, start_ticks=1) for i in range(2)]
    released = released_namespace(scratch, "done")
    orphan = scratch / "no-stamp"
    (orphan / "tmp").mkdir(parents=True, mode=0o700)
    orphan.chmod(0o700)  # as lanewatch makes them: private (a normal user can tell it unused)
    live = lw.lane(repo, scratch, "alive")
    done = cli("clear", "--stale", "--yes")
    assert done.returncode == 0, done.stderr
    assert "cleared 4 namespace(s)" in done.stdout and "on disk" in done.stdout
    assert not any(s.exists() for s in [*stale, released, orphan])
    assert live.namespace.is_dir()


def test_cli_reports_refusals_with_exit_3(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "busy")
    released_namespace(scratch, "free")
    done = cli("clear", "busy", "free", "--yes")
    assert done.returncode == 3
    assert "refused to clear lane 'busy'" in done.stderr and "cleared lane 'free'" in done.stdout
    assert lane.namespace.is_dir()


def test_cli_dry_run_refuses_a_live_lane(scratch: Path) -> None:
    ns = make_stamp(scratch, "shown")  # owned by this test's process: live
    done = cli("clear", "shown", "--dry-run")
    assert done.returncode == 3 and "live" in done.stderr
    assert ns.is_dir()


def test_the_actions_and_their_commands_load_no_ui() -> None:
    """The dashboard imports the actions; the actions never import the dashboard."""
    probe = (
        "import sys, lanewatch.actions.kill, lanewatch.actions.clear, lanewatch.actions.restore, "
        "lanewatch.cli.actions.kill_cmd, lanewatch.cli.actions.clear_cmd, "
        "lanewatch.cli.actions.trash_cmd; "
        "print(sorted(m for m in ('textual', 'watchdog') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
