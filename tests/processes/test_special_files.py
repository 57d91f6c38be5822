"""Nothing blocks on a special file, and deletion never leaves its filesystem.

A neighbour who can write in a root can put a FIFO (or a socket) at any name lanewatch reads or
appends: a plain open(2) of a FIFO waits for the other end forever, and once a clear did so
holding the trash lock, every later clear and purge of the root waited too. Each path is
planted in turn and `clear`, `purge` and `status` (the engine's snapshot) run as real commands
that must end within the deadline and say what they met. Then purge and clear against real
bind mounts (root only): nothing outside the trash entry is ever deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lanewatch.actions import clear as clear_mod
from lanewatch.actions import fsops, trashbox
from lanewatch.actions.clear import clear
from lanewatch.actions.fsops import remove_tree
from lanewatch.actions.mounts import mounts_inside
from lanewatch.actions.purge import purge
from lanewatch.engine.engine import Engine
from lanewatch.lanes import ledger
from lanewatch.lanes.fsutil import NotAFile, open_regular, read_nofollow
from lanewatch.lanes.roots import ROOT_META, Registry
from lanewatch.lanes.stamp import LEDGER_FILE, META_DIR, STAMP_FILE, StampStatus, read_stamp
from lanewatch.records.incident_log import IncidentLog
from lanewatch.records.writes import WriteLog, entries
from tests.conftest import LANEWATCH, mount_table, plant_special, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import released_namespace
from tests.kits.enginekit import running

scratch = actionkit.scratch  # the kit's fixture, found by pytest under this name

HANG = 5.0  # seconds: what "never blocks" is held to
STARTUP = 10.0  # a cold `lanewatch` process on a busy two-core machine, on top of HANG


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI; a command still running after the deadline is killed and the test fails."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*LANEWATCH, *args],
            capture_output=True,
            text=True,
            timeout=HANG + STARTUP,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`lanewatch {' '.join(args)}` was still running after {HANG + STARTUP}s")
    assert "Traceback" not in done.stderr, done.stderr
    assert time.monotonic() - started < HANG + STARTUP
    return done


def unblock(path: Path) -> None:
    """Open the other end of a planted FIFO, so that code which did block on it (the bug these
    tests catch) wakes up and the test can end instead of hanging in its teardown."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))


@pytest.fixture
def fifos() -> Iterator[list[Path]]:
    planted: list[Path] = []
    yield planted
    for path in planted:
        unblock(path)


def plant(path: Path, kind: str = "fifo") -> None:
    plant_special(path, kind)


# Every file lanewatch reads or appends in a namespace, a root or its state folder, by where it
# lies: the stale namespace `ns` (a released lane's, to clear), the root, or a trash entry.
Where = Callable[[Path, Path, Path], Path]
PLACES: dict[str, Where] = {
    "owner.json": lambda ns, root, entry: ns / META_DIR / STAMP_FILE,
    "ledger.jsonl": lambda ns, root, entry: ns / META_DIR / LEDGER_FILE,
    "receipt": lambda ns, root, entry: ns / "receipts" / "build.json",
    "incidents.jsonl": lambda ns, root, entry: root / ROOT_META / "incidents.jsonl",
    "writes.jsonl": lambda ns, root, entry: root / ROOT_META / "writes.jsonl",
    "trash record.json": lambda ns, root, entry: entry / trashbox.RECORD,
    "trash.jsonl": lambda ns, root, entry: root / ROOT_META / "trash.jsonl",
    "trash.lock": lambda ns, root, entry: root / ROOT_META / trashbox.TRASH_LOCK,
    "entry ledger": lambda ns, root, entry: entry / trashbox.PAYLOAD / META_DIR / LEDGER_FILE,
    "roots.json": lambda ns, root, entry: Registry().path,
}


def trashed(root: Path, lane: str) -> Path:
    """A released namespace put in the trash as a clear does (record, then one rename), made
    by hand: as a normal user a clear refuses (other users' processes cannot be inspected)."""
    ns = released_namespace(root, lane)
    tid = trashbox.new_id(time.time() - 60)
    entry = trashbox.ensure_trash(root) / tid
    entry.mkdir()
    trashbox.TrashRecord(
        tid, str(root), ns.name, str(ns), lane, None, None, "released", "released by its owner",
        None, time.time() - 60, {"user": "test"}, 4, 100,
    ).write(entry)  # fmt: skip
    os.rename(ns, entry / trashbox.PAYLOAD)
    return entry


def a_root_with_a_trash_entry(root: Path) -> tuple[Path, Path]:
    """(a released namespace to clear, the folder of a trash entry due for purge)."""
    entry = trashed(root, "old")
    ns = released_namespace(root, "stale")
    (ns / "receipts").mkdir()
    (ns / META_DIR / LEDGER_FILE).write_text("")
    return ns, entry


@pytest.mark.unprivileged
@pytest.mark.parametrize("place", list(PLACES))
def test_a_fifo_anywhere_never_blocks_clear_purge_or_status(
    scratch: Path, fifos: list[Path], place: str
) -> None:
    ns, entry = a_root_with_a_trash_entry(scratch)
    fifo = PLACES[place](ns, scratch, entry)
    fifo.parent.mkdir(exist_ok=True)
    plant(fifo)
    fifos.append(fifo)

    status = cli("status", "--json")  # the engine's one picture, while the FIFO is there
    if place == "roots.json":
        assert "roots.json is a FIFO, not a file" in status.stdout + status.stderr
    else:
        shown = json.loads(status.stdout)
        assert shown["exit_code"] == status.returncode
        (row,) = [n for n in shown["namespaces"] if n["key"] == str(ns)]
        assert row["stamp_status"] == ("fifo" if place == "owner.json" else "ok"), row

    cleared = cli("clear", "--yes", str(ns))
    out = cleared.stdout + cleared.stderr
    if place in ("trash.lock", "roots.json"):  # what every clear needs: refused, named
        assert cleared.returncode != 0 and f"{fifo.name} is a FIFO, not a file" in out, out
    elif os.geteuid() != 0 and "cannot tell who uses it" in out:
        assert cleared.returncode != 0  # a normal user's refusal (which once hung too)
    else:
        assert cleared.returncode == 0 and "cleared" in out, out
        if place == "ledger.jsonl":  # the diary line is skipped, and says why
            assert "ledger.jsonl is a FIFO, not a file" in out, out

    purged = cli("purge", "--older-than", "0", "--yes")
    out = purged.stdout + purged.stderr
    if place in ("trash.lock", "roots.json"):
        assert purged.returncode != 0 and f"{fifo.name} is a FIFO, not a file" in out, out
    else:
        assert purged.returncode == 0 and "purged" in out, out
    assert not os.path.lexists(fifo) or stat.S_ISFIFO(os.lstat(fifo).st_mode)  # never replaced


@pytest.mark.unprivileged
def test_the_engine_sees_fifos_and_never_waits_on_them(scratch: Path, fifos: list[Path]) -> None:
    ns, entry = a_root_with_a_trash_entry(scratch)
    for place in ("owner.json", "ledger.jsonl", "receipt", "incidents.jsonl", "writes.jsonl"):
        fifo = PLACES[place](ns, scratch, entry)
        plant(fifo)
        fifos.append(fifo)
    started = time.monotonic()
    view = Engine([str(scratch)]).snapshot().upserts[str(ns)]  # what `status` shows
    assert time.monotonic() - started < HANG
    assert view.stamp_status == "fifo" and view.state.value == "orphan"
    assert "owner.json is a FIFO, not a file" in view.reason
    with running([scratch]) as (_, rec):  # the dashboard's: watching, probing, persisting
        (ns / "tmp" / "new.txt").write_text("a write it records")  # and walks again
        wait_for(
            lambda: (v := rec.view(ns)) is not None and v.files >= 4, HANG, what="the new file"
        )
        view = rec.view(ns)
        assert view is not None and view.stamp_status == "fifo"


@pytest.mark.unprivileged
@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_readers_and_appenders_refuse_special_files_at_once(
    tmp_path: Path, fifos: list[Path], kind: str
) -> None:
    ns = tmp_path / "ns"
    (ns / META_DIR).mkdir(parents=True)
    root = tmp_path / "root"
    (root / ROOT_META).mkdir(parents=True)
    planted = {
        "stamp": ns / META_DIR / STAMP_FILE,
        "ledger": ns / META_DIR / LEDGER_FILE,
        "incidents": root / ROOT_META / "incidents.jsonl",
        "writes": root / ROOT_META / "writes.jsonl",
    }
    for path in planted.values():
        plant(path, kind)
        fifos.append(path)
    words = {"fifo": "a FIFO", "socket": "a socket", "device": "a character device"}[kind]
    label = {"fifo": "fifo", "socket": "socket", "device": "device"}[kind]
    started = time.monotonic()
    read = read_stamp(ns)
    assert read.status is StampStatus(label) and read.detail == f"owner.json is {words}, not a file"
    assert ledger.read(ns) == [] and ledger.last(ns) is None
    assert ledger.append(ns, "x", lane="l") == f"ledger.jsonl is {words}, not a file"
    assert IncidentLog(str(root)).load() == []
    assert WriteLog(str(root)).append([]) is True  # nothing to write: not even opened
    assert entries([str(root)]) == []
    for path in planted.values():
        with pytest.raises(NotAFile, match=f"is {words}, not a file"):
            open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with pytest.raises(NotAFile):
            read_nofollow(path, 10)
        assert stat.S_IFMT(os.lstat(path).st_mode) != stat.S_IFREG  # left as it was
    assert time.monotonic() - started < HANG


@pytest.mark.unprivileged
def test_open_regular_opens_regular_files_in_blocking_mode(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = open_regular(path, os.O_WRONLY | os.O_CREAT)  # opened O_NONBLOCK, then cleared
    try:
        assert os.get_blocking(fd) and stat.S_ISREG(os.fstat(fd).st_mode)
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)
    os.symlink(path, tmp_path / "link")
    with pytest.raises(NotAFile, match="link is a symlink, not a file"):
        open_regular(tmp_path / "link", os.O_RDONLY)


@pytest.mark.unprivileged
def test_a_ledger_held_locked_forever_is_skipped_not_waited_on(tmp_path: Path) -> None:
    ns = tmp_path / "ns"
    (ns / META_DIR).mkdir(parents=True)
    (ns / META_DIR / LEDGER_FILE).write_text("")
    fd = os.open(ns / META_DIR / LEDGER_FILE, os.O_RDONLY)  # anyone who can read it can flock it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        why = ledger.append(ns, "x", lane="l")
        assert why is not None and "stayed locked" in why
        assert time.monotonic() - started < HANG
    finally:
        os.close(fd)
    assert ledger.append(ns, "y", lane="l") is None
    assert [line.event for line in ledger.read(ns)] == ["y"]


# --- deletion never leaves its filesystem ---------------------------------------------------


def bind(source: Path, point: Path) -> None:
    """`source` bind-mounted on `point` until `mounts_under` unmounts it, wherever a rename
    moved it meanwhile (skips where that is impossible, like actionkit.bind_mounted)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("bind mounts need root and mount(8)")
    done = subprocess.run(["mount", "--bind", str(source), str(point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount --bind failed here: {done.stderr.decode().strip()}")


def unmount_under(top: Path) -> None:
    """Unmount every mount at or below `top`, deepest first."""
    for point in reversed(mounts_inside(top)):
        subprocess.run(["umount", point], check=True)


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[None]:
    """Every mount a test makes under tmp_path is gone at its end, even one a purge renamed."""
    with mount_table():
        try:
            yield
        finally:
            unmount_under(tmp_path)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder with a file in it that no purge may ever touch."""
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "data").write_text("not yours")
    (folder / "sub").mkdir()
    (folder / "sub" / "more").write_text("nor this")
    return folder


def untouched(folder: Path) -> None:
    assert (folder / "data").read_text() == "not yours"
    assert (folder / "sub" / "more").read_text() == "nor this"


@pytest.mark.privileged
def test_purge_never_deletes_through_a_bind_mount(
    scratch: Path, outside: Path, mounts: None
) -> None:
    released_namespace(scratch, "lane")
    done = clear("lane")
    payload = Path(str(done.trash_path))
    point = payload / "tmp" / "bound"
    point.mkdir()
    bind(outside, point)
    assert point.stat().st_dev == payload.stat().st_dev  # st_dev alone would miss it
    result = purge(older_than=0)
    untouched(outside)
    assert not result.ok
    (item,) = result.items
    assert item.outcome == "failed" and "a mount point; not entered" in item.message
    doomed = trashbox.trash_dir(scratch) / (trashbox.PURGING + str(done.trash_id))
    assert str(doomed / "namespace" / "tmp" / "bound") in item.message
    # everything else of the entry went; the mount point is left as it was
    assert os.listdir(doomed / "namespace" / "tmp") == ["bound"]
    result = cli("purge", "--older-than", "0", "--yes")  # again, as a command
    assert result.returncode != 0 and "a mount point" in result.stdout + result.stderr
    untouched(outside)
    unmount_under(doomed)
    assert purge(older_than=0).ok  # unmounted: the next purge finishes it
    assert os.listdir(trashbox.trash_dir(scratch)) == []
    untouched(outside)


@pytest.mark.privileged
def test_remove_tree_leaves_a_mount_made_after_it_read_the_table(
    tmp_path: Path, outside: Path, mounts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    doomed = tmp_path / "doomed"
    (doomed / "a" / "b").mkdir(parents=True)
    (doomed / "a" / "f").write_text("x")
    real = fsops.mounts_inside

    def table_then_mount(path: os.PathLike[str]) -> list[str]:
        # The real table first, then a real bind mount appears: the race the table cannot see.
        found = real(path)
        bind(outside, doomed / "a" / "b")
        return found

    monkeypatch.setattr(fsops, "mounts_inside", table_then_mount)
    left = remove_tree(doomed, passes=1)
    untouched(outside)
    assert any("a mount point" in why and why.endswith("not entered") for why in left), left
    unmount_under(doomed)
    monkeypatch.setattr(fsops, "mounts_inside", real)
    assert remove_tree(doomed) == []


@pytest.mark.privileged
def test_a_mount_appearing_between_the_check_and_the_move_is_put_back(
    scratch: Path, outside: Path, mounts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = released_namespace(scratch, "racy")
    point = ns / "tmp" / "bound"
    point.mkdir()
    real = clear_mod.why_mounted

    def checked_then_mounted(path: Path) -> str | None:
        # The real check passes; then a real bind mount appears before the rename. (The
        # re-check after the rename calls this too: it mounts only once.)
        why = real(path)
        if path == ns:
            bind(outside, point)
        return why

    monkeypatch.setattr(clear_mod, "why_mounted", checked_then_mounted)
    result = clear("racy", check=False)
    assert result.outcome == "refused", result.message
    assert "mounted during the clear" in result.message and "put back" in result.message
    assert (ns / "tmp" / "bound" / "data").read_text() == "not yours"  # back, still mounted
    assert not any(trashbox.trash_dir(scratch).iterdir())
    unmount_under(ns)
    untouched(outside)
    monkeypatch.setattr(clear_mod, "why_mounted", real)
    assert clear("racy").outcome == "cleared"
