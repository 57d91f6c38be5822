"""The first picture's counts by `find` (files/treecount.py): the walk's answers to the file on
trees that try to tell them apart, the namespaces find cannot count left to the walk, and an
engine whose first picture is the same with find and without it. Real `find` processes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lanewatch.engine.engine import Engine
from lanewatch.files import walk
from lanewatch.files.treecount import TreeCount
from lanewatch.lanes.stamp import META_DIR
from lanewatch.model.views import Changes
from tests.conftest import wait_for
from tests.kits.enginekit import make_evidence, make_stamp, running

pytestmark = [pytest.mark.processes, pytest.mark.unprivileged]  # also as a normal user


def _answer(c: walk.NamespaceCount) -> tuple[object, ...]:
    return (c.files, c.bytes, c.allocated, c.last_write, c.stamp_mtime, c.vanished, c.errors)


def _listed(root: Path) -> tuple[str, ...]:
    return walk.list_root(str(root)).names


def _odd_tree(root: Path) -> list[Path]:
    """Namespaces that differ from a plain tree in every way the two walks could disagree."""
    plain = make_stamp(root, "plain")
    deep = plain / "a" / "b c" / "d"
    deep.mkdir(parents=True)
    for i, p in enumerate([plain / "f", deep / "g", plain / "a" / "-rf", deep / "it's\nodd"]):
        p.write_bytes(b"x" * (i * 1000 + 1))
    (plain / "empty").touch()
    (plain / "a" / "to-etc").symlink_to("/etc")  # a symlink is a file here, never followed
    (plain / "a" / "dangling").symlink_to(plain / "nowhere")
    (plain / "a" / "to-file").symlink_to(plain / "f")
    os.mkfifo(plain / "a" / "fifo")
    os.link(plain / "f", deep / "f-again")  # hard links: blocks once in a namespace
    os.link(plain / META_DIR / "owner.json", plain / "stamp-again")  # one name in .lanewatch/
    (plain / META_DIR / "sub").mkdir()  # a folder in .lanewatch/: its files are writes
    (plain / META_DIR / "sub" / "h").write_bytes(b"h" * 5000)
    (plain / META_DIR / "lock").touch()

    times = make_stamp(root, "times")
    for name, when in [("old", -86400.0), ("epoch", 0.0), ("far", 10**10 + 0.5)]:
        (times / name).write_bytes(b"t")
        os.utime(times / name, (when, when))  # before 1970, 1970, after 2286 (11 digits)
    (times / "mid").write_bytes(b"m")
    os.utime(times / "mid", ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    before = make_stamp(root, "only-before-1970")
    (before / "old").write_bytes(b"o")
    os.utime(before / "old", (-5.5, -5.5))

    other = make_stamp(root, "other")
    os.link(plain / "f", other / "f-from-plain")  # across namespaces: counted in each

    odd_names = [root / "-n", root / "sp ace", root / "new\nline", root / "q'uote"]
    odd_names.append(root / os.fsdecode(b"bytes-\xff"))
    for ns in odd_names:
        (ns / "x").mkdir(parents=True)
        (ns / "x" / "y").write_bytes(b"y" * 3)
    (root / "bare").mkdir()  # no .lanewatch/ at all
    (root / "meta-link").mkdir()  # .lanewatch/ a symlink to a folder: a file, never followed
    (root / "meta-link" / META_DIR).symlink_to(plain / "a")
    (root / "meta-file").mkdir()
    (root / "meta-file" / META_DIR).write_bytes(b"not a folder")
    (root / "empty-ns").mkdir()
    (root / "empty-ns" / META_DIR).mkdir()
    extra = [root / n for n in ("bare", "empty-ns", "meta-link", "meta-file")]
    return [plain, times, before, other, *odd_names, *extra]


def test_find_counts_what_the_walk_counts(root: Path) -> None:
    made = _odd_tree(root)
    names = _listed(root)
    assert {p.name for p in made} <= set(names)
    counts = TreeCount(str(root), names).counts()
    assert set(counts) == set(names)  # nothing left to the walk: every namespace counted
    for name in names:
        want = walk.count_namespace(f"{root}/{name}")
        assert _answer(counts[name]) == _answer(want), repr(name)
        assert counts[name].key == want.key
    assert counts["bare"].files == 0 and counts["bare"].last_write is None
    far = counts[next(n for n in names if n.endswith(".times"))]
    assert far.last_write == os.stat(made[1] / "far").st_mtime  # the 11-digit mtime wins
    assert counts[made[2].name].last_write is None  # only a file before 1970: no write


def test_what_find_cannot_count_is_left_to_the_walk(root: Path) -> None:
    a, b, c = (make_stamp(root, n) for n in ("a", "b", "c"))
    for ns in (a, b, c):
        (ns / "f").write_bytes(b"f" * 10)
    gone = root / "gone"  # listed, then removed before find reached it
    into_file = root / "into-file"  # listed as a folder, a file when find reached it
    into_file.write_bytes(b"i" * 7)
    order = [a.name, gone.name, b.name, into_file.name, c.name]
    counts = TreeCount(str(root), order).counts()
    # find said the one gone is missing; the file printed no marker, so its record went to
    # the namespace before it in find's order, b, which is left to the walk as well.
    assert set(counts) == {a.name, c.name}
    for ns in (a, c):
        assert _answer(counts[ns.name]) == _answer(walk.count_namespace(str(ns)))


def test_an_unreadable_folder_is_left_to_the_walk(root: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a folder of mode 0o000")
    shut, fine = make_stamp(root, "shut"), make_stamp(root, "fine")
    (shut / "closed").mkdir()
    (shut / "closed" / "x").write_bytes(b"x")
    (shut / "closed").chmod(0)
    try:
        counts = TreeCount(str(root), _listed(root)).counts()
        assert set(counts) == {fine.name}
        assert walk.count_namespace(str(shut)).errors  # the walk says it, as it did
    finally:
        (shut / "closed").chmod(stat.S_IRWXU)


def test_no_find_means_the_walk_counts_all(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_stamp(root, "a")
    monkeypatch.setenv("PATH", str(root / "no-tools-here"))
    assert TreeCount(str(root), _listed(root)).counts() == {}


def test_a_cancelled_find_leaves_every_namespace_to_the_walk(root: Path) -> None:
    for i in range(20):
        ns = make_stamp(root, f"n{i}")
        for j in range(50):
            (ns / f"f{j}").touch()
    tc = TreeCount(str(root), _listed(root))
    tc.cancel()  # the engine stopped: find is killed (if it still runs), nothing it said is used
    assert tc.counts() == {}
    assert tc._proc is not None and tc._proc.poll() is not None  # reaped, none left behind
    tc.close()  # and again: idempotent


@pytest.mark.parametrize("with_find", [True, False], ids=["find", "no-find"])
def test_the_engines_first_picture_is_the_walks(
    root: Path, with_find: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _odd_tree(root)
    if not with_find:
        monkeypatch.setenv("PATH", str(root / "no-tools-here"))
    names = _listed(root)
    want = {f"{root}/{n}": walk.count_namespace(f"{root}/{n}") for n in names}
    seen: dict[str, tuple[object, ...]] = {}

    def on_changes(changes: Changes) -> None:
        for key, view in changes.upserts.items():
            if view.files is not None and key not in seen:
                seen[key] = (view.files, view.bytes, view.allocated, view.last_write)

    engine = Engine([str(root)])
    engine.start(on_changes)
    try:
        wait_for(lambda: len(seen) == len(want), 30, what="every namespace counted")
        by_find = engine.stats["counted_by_find"]
    finally:
        engine.stop()
    assert by_find == (len(want) if with_find else 0)
    for key, c in want.items():
        assert seen[key] == (c.files, c.bytes, c.allocated, c.last_write), repr(key)


def test_the_live_engine_reports_what_the_first_picture_left_unread(root: Path) -> None:
    make_evidence(root)
    with running([root]) as (_, rec):
        wait_for(lambda: len(rec.picture.incidents) == 2)
        assert {i.kind for i in rec.picture.incidents.values()} == {
            "refused-claim",
            "foreign-receipt",
        }
