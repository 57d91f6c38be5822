"""After a clear: list the trash, restore from it, purge it, against real files and processes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.actions import trashbox
from lanewatch.actions.clear import ClearResult, clear
from lanewatch.actions.fsops import remove_tree
from lanewatch.actions.purge import DEFAULT_RETENTION, due, purge
from lanewatch.actions.restore import list_trash, restore
from lanewatch.lanes import ledger
from lanewatch.proof.gate import parse_duration
from tests.conftest import LANEWATCH, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import (
    DEADLINE,
    NOBODY,
    Procs,
    as_user,
    python_as,
    released_namespace,
)

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

lw = actionkit.lw  # the kit's fixtures, found by pytest under these names
scratch = actionkit.scratch

DAY = 86400.0


def cleared(root: Path, lane: str, files: int = 3) -> tuple[Path, ClearResult]:
    ns = released_namespace(root, lane, files)
    result = clear(lane)
    assert result.outcome == "cleared", result.message
    return ns, result


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


# --- list and restore -----------------------------------------------------------------------


def test_restore_puts_the_same_folder_back(scratch: Path) -> None:
    ns = released_namespace(scratch, "back")
    before = os.lstat(ns).st_ino
    result = clear("back")
    [entry] = list_trash(scratch)
    assert entry.id == result.trash_id and entry.name == ns.name and entry.lane == "back"
    assert entry.cleared_by and str(os.getpid()) in entry.cleared_by
    back = restore(entry)  # what the dashboard passes: a listed entry
    assert back.outcome == "restored", back.message
    assert os.lstat(ns).st_ino == before
    assert (ns / "tmp" / "f2.txt").read_text().startswith("file 2")
    assert [line.event for line in ledger.read(ns)][-2:] == ["cleared", "restored"]
    assert list_trash(scratch) == []
    assert not (trashbox.trash_dir(scratch) / str(result.trash_id)).exists()
    assert restore(str(result.trash_id), check=False).outcome == "refused"  # not there any more


def test_restore_is_refused_when_the_name_is_taken_again(scratch: Path) -> None:
    ns, result = cleared(scratch, "taken")
    ns.mkdir()  # a writer recreated it: a new (empty) namespace
    (ns / "new.txt").write_text("new")
    back = restore(str(result.trash_id), check=False)
    assert back.outcome == "refused" and "taken again" in back.message
    assert sorted(os.listdir(ns)) == ["new.txt"]
    assert [e.id for e in list_trash(scratch)] == [result.trash_id]
    os.unlink(ns / "new.txt")
    os.rmdir(ns)
    ns.mkdir()  # even an empty folder: a plain rename would have replaced it
    assert restore(str(result.trash_id), check=False).outcome == "refused"


def test_cli_trash_json_and_restore(scratch: Path) -> None:
    _, result = cleared(scratch, "listed")
    listing = cli("trash", "--json")
    assert listing.returncode == 0, listing.stderr
    data = json.loads(listing.stdout)
    assert data["schema"] == "lanewatch.trash/1" and data["retention_seconds"] == DEFAULT_RETENTION
    [entry] = data["entries"]
    assert entry["id"] == result.trash_id and entry["lane"] == "listed"
    assert entry["cleared_by_detail"]["pid"] == os.getpid()
    # what it took on disk (du -sB1) beside the files' lengths
    assert entry["allocated_bytes"] == result.allocated and result.allocated > entry["bytes"]
    table = cli("trash").stdout
    assert result.trash_id in table and "DISK" in table
    done = cli("restore", str(result.trash_id))
    assert done.returncode == 0 and "restored lane 'listed'" in done.stdout
    again = cli("restore", str(result.trash_id))
    assert again.returncode == 8 and "no entry" in again.stderr  # not found: restored already


# --- purge ----------------------------------------------------------------------------------


def test_purge_waits_for_the_retention_period(scratch: Path) -> None:
    cleared(scratch, "young")
    assert purge().items == ()
    assert due(now=time.time() + DEFAULT_RETENTION - 60) == []
    later = purge(now=time.time() + DEFAULT_RETENTION + 1)
    assert [i.outcome for i in later.items] == ["purged"], later.message
    assert os.listdir(trashbox.trash_dir(scratch)) == []
    journal = (scratch / ".lanewatch-root" / "trash.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in journal] == ["cleared", "purged"]


def test_purge_follows_no_symlink(scratch: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    ns = released_namespace(scratch, "linky")
    (ns / "tmp" / "dir-link").symlink_to(outside)
    (ns / "tmp" / "file-link").symlink_to(outside / "keep")
    clear("linky")
    assert purge(older_than=0).ok
    assert (outside / "keep").read_text() == "mine"


def test_purge_chmods_only_inside_the_trash(scratch: Path, tmp_path: Path) -> None:
    """As an unprivileged user, read-only folders in the entry need a chmod to be emptied; a
    read-only folder outside, reached through a symlink in the entry, is never touched."""
    prefix = as_user(NOBODY, caps=("dac_read_search",))  # may read anything, write only its own
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    ns = released_namespace(scratch, "readonly")
    deep = ns / "tmp" / "ro" / "deeper"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    (ns / "tmp" / "ro" / "out").symlink_to(outside)
    result = clear("readonly")
    for path in [scratch, *Path(str(result.trash_path)).parent.parent.parent.rglob("*"), outside]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    os.chown(scratch / ".lanewatch-root", NOBODY, NOBODY)
    payload = Path(str(result.trash_path))
    os.chmod(payload / "tmp" / "ro" / "deeper", 0o500)
    os.chmod(payload / "tmp" / "ro", 0o500)
    os.chmod(outside, 0o500)
    done = python_as(
        prefix,
        f"""
        from pathlib import Path
        from lanewatch.actions.purge import purge
        r = purge([Path({str(scratch)!r})], older_than=0)
        print(r.ok, r.message)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True purged 1"), done.stdout
    assert not payload.exists()
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o500
    assert (outside / "keep").read_text() == "mine"


def test_purge_resumes_one_that_died_after_its_rename(scratch: Path) -> None:
    _, result = cleared(scratch, "half", files=50)
    trash = trashbox.trash_dir(scratch)
    doomed = trash / (trashbox.PURGING + str(result.trash_id))
    os.rename(trash / str(result.trash_id), doomed)  # what a purge does first
    for f in sorted((doomed / trashbox.PAYLOAD / "tmp").iterdir())[:25]:
        f.unlink()  # and it died half-way through the delete
    assert list_trash(scratch) == []  # no longer listed: it cannot be restored
    resumed = purge()  # even with the default retention: it was already being purged
    assert [i.message for i in resumed.items] == [f"finished purging {result.trash_id} (?)"], (
        resumed.message
    )
    assert os.listdir(trash) == []


def test_a_purge_killed_mid_way_is_finished_by_the_next(lw: Procs, scratch: Path) -> None:
    ns = released_namespace(scratch, "killed")
    for i in range(200):
        sub = ns / "tmp" / f"d{i}"
        sub.mkdir()
        for j in range(50):
            (sub / f"f{j}").write_bytes(b"")
    clear("killed")
    trash = trashbox.trash_dir(scratch)
    code = (
        "from pathlib import Path; from lanewatch.actions.purge import purge; "
        f"purge([Path({str(scratch)!r})], older_than=0)"
    )
    proc = lw.start([sys.executable, "-c", code])
    wait_for(
        lambda: trashbox.purging_dirs(scratch) or proc.poll() is not None,
        DEADLINE,
        what="the purge rename",
    )
    proc.kill()
    proc.wait()
    if not trashbox.purging_dirs(scratch):
        pytest.skip("the purge finished before it could be killed")
    assert purge().ok
    assert os.listdir(trash) == []


def test_remove_tree_tolerates_entries_vanishing_under_it(lw: Procs, tmp_path: Path) -> None:
    doomed = tmp_path / "doomed"
    for i in range(40):
        (doomed / f"d{i}").mkdir(parents=True)
        for j in range(100):
            (doomed / f"d{i}" / f"f{j}").write_bytes(b"")
    deleter = textwrap.dedent(
        f"""
        import os
        print("ready", flush=True)
        for top, dirs, files in os.walk({str(doomed)!r}, topdown=False):
            for name in files + dirs:
                try:
                    (os.rmdir if name in dirs else os.unlink)(os.path.join(top, name))
                except OSError:
                    pass
        """
    )
    proc = lw.start([sys.executable, "-c", deleter], stdout=subprocess.PIPE, cwd="/")
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    assert remove_tree(doomed) == []
    assert not doomed.exists()


def test_two_purges_finishing_one_tree_at_once(scratch: Path) -> None:
    ns = released_namespace(scratch, "shared", files=0)
    for i in range(20):
        (ns / "tmp" / f"d{i}").mkdir()
        for j in range(100):
            (ns / "tmp" / f"d{i}" / f"f{j}").write_bytes(b"")
    result = clear("shared")
    trash = trashbox.trash_dir(scratch)
    os.rename(trash / str(result.trash_id), trash / (trashbox.PURGING + str(result.trash_id)))
    results: list[Any] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        barrier.wait()
        results.append(purge())

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert len(results) == 2 and all(r.ok for r in results), [r.message for r in results]
    assert sum(len(r.items) for r in results) == 1  # one finished it; the other left it alone
    assert os.listdir(trash) == []


def test_purge_keeps_an_entry_a_writer_is_still_inside(lw: Procs, scratch: Path) -> None:
    _, result = cleared(scratch, "writer")
    payload = Path(str(result.trash_path))
    writer = textwrap.dedent(
        """
        import os, sys, time
        os.chdir(sys.argv[1])
        print("ready", flush=True)
        deadline = time.monotonic() + 300
        i = 0
        while time.monotonic() < deadline:
            with open(f"w{i % 50}.txt", "w") as f:
                f.write("still writing")
            i += 1
            time.sleep(0.005)
        """
    )
    proc = lw.start([sys.executable, "-c", writer, str(payload / "tmp")], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    kept = purge(older_than=0)
    assert [i.outcome for i in kept.items] == ["kept"], kept.message
    assert f"pid {proc.pid}" in kept.message and "working directory" in kept.message
    assert payload.is_dir() and (payload / "tmp" / "f0.txt").exists()
    proc.kill()
    proc.wait()
    assert [i.outcome for i in purge(older_than=0).items] == ["purged"]
    assert not payload.exists()


def test_an_unfinished_clear_is_not_listed_and_is_purged(scratch: Path) -> None:
    trash = trashbox.ensure_trash(scratch)
    entry = trash / trashbox.new_id(time.time())
    entry.mkdir()
    (entry / trashbox.RECORD).write_text("{}")  # a record, no namespace: a clear that died
    assert list_trash(scratch) == []
    assert restore(entry.name, check=False).outcome == "refused"
    assert [i.outcome for i in purge().items] == ["purged"]
    assert not entry.exists()


def test_two_purges_at_once(scratch: Path) -> None:
    for i in range(3):
        cleared(scratch, f"p{i}")
    results = []

    def run() -> None:
        results.append(purge(older_than=0))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert all(r.ok for r in results)
    assert sum(len(r.items) for r in results) == 3
    assert os.listdir(trashbox.trash_dir(scratch)) == []


def test_cli_purge_asks_and_defaults_to_the_retention(scratch: Path) -> None:
    cleared(scratch, "cli")
    assert "nothing to purge" in cli("purge").stdout
    asked = cli("purge", "--older-than", "0s")
    assert asked.returncode == 7 and "pass --yes" in asked.stderr  # needs confirmation
    assert len(list_trash(scratch)) == 1
    done = cli("purge", "--older-than", "0", "--yes")
    assert done.returncode == 0 and "purged 1 entries" in done.stdout
    assert list_trash(scratch) == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 7 * DAY), ("2w", 14 * DAY),
     ("1d12h", 1.5 * DAY), ("0.5h", 1800)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "7x", "-1d", "1d 2h", "1.d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_remove_tree_never_leaves_its_boundary(tmp_path: Path) -> None:
    boundary = tmp_path / "b"
    (boundary / "x").mkdir(parents=True)
    outside = tmp_path / "o"
    outside.mkdir()
    assert remove_tree(boundary / "x") == []
    assert outside.is_dir()
