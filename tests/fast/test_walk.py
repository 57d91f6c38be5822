"""The first picture: states from the stamps, then counts that match a bare walk; stamps that
lie (garbage, partial, huge, symlinked); namespaces and folders vanishing while we scan."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from lanewatch.engine.engine import Engine
from lanewatch.engine.worker import Worker
from lanewatch.files import walk
from lanewatch.lanes.stamp import MAX_STAMP_BYTES, read_stamp, stamp_path
from lanewatch.model.views import NsState
from tests.kits.enginekit import fill, make_evidence, make_stamp


def test_counts_match_a_bare_walk(root: Path) -> None:
    nss = [make_stamp(root, f"lane{i}") for i in range(5)]
    for i, ns in enumerate(nss):
        fill(ns, 10 * i, size=i + 1)
    picture = Engine([str(root)]).snapshot()
    assert len(picture.upserts) == 5
    for ns in nss:
        v = picture.upserts[str(ns)]
        assert (v.files, v.bytes) == walk.floor_walk(str(ns))
        assert v.state is NsState.LIVE  # this test process is the owner
    assert picture.health[0].status == "ok"


def test_states_come_before_sizes(root: Path) -> None:
    ns = make_stamp(root, "quick")
    fill(ns, 4)
    w = Worker([str(root)])
    keys = w.list_root(str(root))
    changes = w.keeper.flush(full=True)
    assert keys == [str(ns)] and changes is not None
    v = changes.upserts[str(ns)]
    assert v.state is NsState.LIVE and v.files is None  # counted later
    w.queue_scan(keys)
    while w.scan_some():
        pass
    later = w.keeper.flush()
    assert later is not None and later.upserts[str(ns)].files == 5  # 4 + the stamp


def test_lying_stamps_are_orphans(root: Path, tmp_path: Path) -> None:
    garbage = make_stamp(root, "garbage")
    stamp_path(garbage).write_bytes(b"\x00\xffnot json")
    partial = make_stamp(root, "partial")
    data = stamp_path(partial).read_bytes()
    stamp_path(partial).write_bytes(data[: len(data) // 2])
    huge = make_stamp(root, "huge")
    stamp_path(huge).write_bytes(b" " * (MAX_STAMP_BYTES + 10) + b"{}")
    linked = make_stamp(root, "linked")
    real = make_stamp(tmp_path / "elsewhere", "real")  # a valid, live stamp: never followed
    stamp_path(linked).unlink()
    stamp_path(linked).symlink_to(stamp_path(real))
    empty = root / "repo-0123456789ab.empty"
    empty.mkdir()
    (root / "stray-file").write_text("not a namespace")
    (root / "repo-0123456789ab.dirlink").symlink_to(real)  # a symlinked namespace: skipped
    picture = Engine([str(root)]).snapshot().upserts
    expect = {
        garbage: "garbage",
        partial: "garbage",
        huge: "oversized",
        linked: "symlink",
        empty: "missing",
    }
    for ns, status in expect.items():
        v = picture[str(ns)]
        assert (v.state, v.stamp_status) == (NsState.ORPHAN, status), v
    assert set(picture) == {str(ns) for ns in expect}


def test_namespace_vanishing_between_listing_and_walk(root: Path) -> None:
    keep, gone = make_stamp(root, "keep"), make_stamp(root, "gone")
    fill(gone, 3)
    w = Worker([str(root)])
    keys = w.list_root(str(root))
    w.keeper.commit()
    for path in sorted(gone.rglob("*"), reverse=True):
        path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    gone.rmdir()
    w.queue_scan(keys or ())
    while w.scan_some():
        pass
    assert set(w.keeper.state.namespaces) == {str(keep)}


def test_scanning_while_namespaces_and_folders_churn(root: Path) -> None:
    """Namespaces and subfolders are created and removed while scans run: no scan raises, and
    each result is one the disk could have shown."""
    for i in range(5):
        fill(make_stamp(root, f"stable{i}"), 6)
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        n = 0
        while not stop.is_set():
            ns = root / f"repo-0123456789ab.churn{n % 3}"
            try:
                fill(ns, 4)
                for p in sorted(ns.rglob("*"), reverse=True):
                    p.rmdir() if p.is_dir() else p.unlink()
                ns.rmdir()
            except OSError:
                pass
            n += 1

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(20):
            try:
                picture = Worker([str(root)]).one_shot(probe=False).upserts
            except BaseException as exc:  # collected, reported below
                errors.append(exc)
                break
            for i in range(5):
                assert picture[str(root / f"repo-0123456789ab.stable{i}")].files == 7
    finally:
        stop.set()
        t.join()
    assert not errors


def test_ledger_is_read_incrementally(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"event": "claim-refused", "time": 1, "lane": "a"}\n{"event": "rel')
    first = walk.read_ledger(str(path))
    assert [line["time"] for line in first.lines] == [1]
    with open(path, "ab") as f:
        f.write(b'eased", "time": 2, "lane": "a", "pid": 5}\n')
    second = walk.read_ledger(str(path), first.offset, first.inode)
    assert [line["event"] for line in second.lines] == ["released"]
    os.replace(tmp_path / "ledger.jsonl", tmp_path / "old")
    path.write_bytes(b'{"event": "killed", "time": 3, "lane": "a"}\n')
    third = walk.read_ledger(str(path), second.offset, second.inode)
    assert [line["event"] for line in third.lines] == ["killed"]  # replaced: read from 0


def test_missing_and_unlistable_roots(tmp_path: Path) -> None:
    assert walk.list_root(str(tmp_path / "nope")).missing
    f = tmp_path / "file"
    f.write_text("x")
    assert walk.list_root(str(f)).error == "not a folder"


def test_the_first_walk_counts_and_the_second_reads_ledgers_and_receipts(root: Path) -> None:
    """The counted first picture leaves ledgers and receipts unread (they are not states,
    counts or bytes); the walk after the watches reads them."""
    ns = make_evidence(root)
    w = Worker([str(root)])
    keys = w.list_root(str(root)) or []
    w.keeper.flush(full=True)
    w.queue_scan(keys, counts_only=True)
    while w.scan_some():
        pass
    first = w.keeper.flush()
    assert first is not None and not first.incidents
    v = first.upserts[str(ns)]
    assert (v.files, v.bytes) == walk.floor_walk(str(ns))
    w.queue_scan(keys)
    while w.scan_some():
        pass
    second = w.keeper.flush()
    assert second is not None
    kinds = {i.kind for i in second.incidents.values()}
    assert kinds == {"refused-claim", "foreign-receipt"}


def test_a_full_walk_wins_over_a_queued_counting_one(root: Path) -> None:
    ns = make_evidence(root)
    w = Worker([str(root)])
    keys = w.list_root(str(root)) or []
    w.keeper.commit()
    w.queue_scan(keys, counts_only=True)
    w.queue_scan(keys)  # a rescan asked for before the bare walk ran
    while w.scan_some():
        pass
    changes = w.keeper.flush(full=True)
    assert changes is not None and len(changes.incidents) == 2
    assert changes.upserts[str(ns)].files is not None


def test_a_heartbeat_is_an_mtime_applied_by_the_next_tick_never_a_re_read(root: Path) -> None:
    old = time.time() - 100  # no heartbeat for 100 s: 3 x 5 s overdue
    ns = make_stamp(root, "beating", heartbeat_at=old)
    stamp = stamp_path(ns)
    os.utime(stamp, (old, old))
    w = Worker([str(root)])
    w.list_root(str(root))
    w.keeper.flush(full=True)
    assert w.keeper.views[str(ns)].state is NsState.HUNG
    stamp.write_bytes(b"not json any more")  # not seen: no event is fed for it
    now = time.time()
    os.utime(stamp, (now, now))
    w.process([("a", str(root), ns.name, str(stamp), False)])
    assert w.tail.beats_due is not None  # waiting to be applied with the others
    w.tick()  # a tick applies the heartbeats before judging what time made overdue
    w.keeper.flush()
    v = w.keeper.views[str(ns)]
    assert v.state is NsState.LIVE and v.heartbeat_at == now  # the mtime, the stamp not re-read
    assert w.tail.beats_due is None


def test_the_first_pictures_stamp_reader_answers_as_read_stamp(root: Path, tmp_path: Path) -> None:
    """`walk.read_stamp_at` (a path string, no pathlib) against `lanes.stamp.read_stamp`,
    on every kind of stamp a namespace can hold."""
    cases: list[Path] = [make_stamp(root, "good"), root / "repo-0123456789ab.none"]
    (root / "repo-0123456789ab.none").mkdir()  # no .lanewatch at all
    bodies = {"garbage": b"\x00\xffnot json", "empty": b"", "huge": b" " * (MAX_STAMP_BYTES + 9)}
    for lane, body in bodies.items():
        ns = make_stamp(root, lane)
        stamp_path(ns).write_bytes(body)
        cases.append(ns)
    exact = make_stamp(root, "exact")  # exactly at the limit: read whole, judged by parse
    stamp_path(exact).write_bytes(b" " * (MAX_STAMP_BYTES - 2) + b"{}")
    real = make_stamp(tmp_path / "elsewhere", "real")
    linked = make_stamp(root, "linked")
    stamp_path(linked).unlink()
    stamp_path(linked).symlink_to(stamp_path(real))
    meta_linked = root / "repo-0123456789ab.metalinked"
    meta_linked.mkdir()
    (meta_linked / ".lanewatch").symlink_to(real / ".lanewatch")
    fifo = make_stamp(root, "fifo")
    stamp_path(fifo).unlink()
    os.mkfifo(stamp_path(fifo))
    folder = make_stamp(root, "folder")
    stamp_path(folder).unlink()
    stamp_path(folder).mkdir()
    no_stamp = make_stamp(root, "nostamp")
    stamp_path(no_stamp).unlink()
    cases += [exact, linked, meta_linked, fifo, folder, no_stamp]
    statuses = set()
    for ns in cases:
        want, got = read_stamp(ns), walk.read_stamp_at(str(ns))
        assert got == want, ns.name
        assert (got.detail, got.mtime, got.raw) == (want.detail, want.mtime, want.raw)
        statuses.add(got.status.value)
    assert statuses == {
        "ok",
        "missing",
        "garbage",
        "empty",
        "oversized",
        "symlink",
        "fifo",
        "directory",
    }


def test_the_counting_walk_counts_what_the_full_walk_counts(root: Path) -> None:
    ns = make_evidence(root)
    fill(ns, 30, size=7)
    (ns / "scratch" / "link").symlink_to("/etc")  # a symlink is a file here, never followed
    count, full = walk.count_namespace(str(ns)), walk.scan_namespace(str(ns))
    assert (count.files, count.bytes) == (full.files, full.bytes) == walk.floor_walk(str(ns))
    assert (count.last_write, count.stamp_mtime) == (full.last_write, full.stamp_mtime)
    assert not count.vanished and not count.errors
    gone = walk.count_namespace(str(root / "repo-0123456789ab.gone"))
    assert gone.vanished and gone.files == 0
