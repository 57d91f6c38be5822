"""The worker's parts joined by composition: an intake reads and hands back what it found, the
model keeper alone applies it, and what the intakes remember of a namespace's disk goes with
the namespace. Real namespaces under tmp_path; no threads, no watches."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from lanewatch.engine.tailintake import Arrived
from lanewatch.engine.worker import Worker
from lanewatch.lanes.stamp import META_DIR, STAMP_FILE
from lanewatch.model import model as m
from tests.kits.enginekit import make_stamp


def listed(root: Path) -> Worker:
    w = Worker([str(root)])
    w.list_root(str(root))
    w.keeper.commit()
    return w


def test_a_walk_changes_nothing_until_the_keeper_applies_it(root: Path) -> None:
    ns = make_stamp(root, "walked")
    (ns / "data").write_text("12345")
    w = listed(root)
    before = w.keeper.state
    w.walks.queue([str(ns)])
    more, found = w.walks.walk_some()
    assert not more
    counted = [e for e in found.events if isinstance(e, m.Counted)]
    assert [(e.key, e.files) for e in counted] == [(str(ns), 2)]  # the stamp and data
    assert w.keeper.state is before  # read, not applied
    w.keeper.take(found)
    w.keeper.commit()
    assert w.keeper.state.namespaces[str(ns)].files == 2


def test_the_tail_hands_an_arrival_back_and_applies_nothing(root: Path) -> None:
    w = listed(root)
    ns = make_stamp(root, "arrived")
    items = [("c", str(root), ns.name, str(ns), True)]
    dirty, controls = w.tail.sort(items)
    assert controls == []
    before = w.keeper.state
    got = w.tail.namespace(str(ns), dirty[str(ns)], time.time())
    assert isinstance(got, Arrived) and got.seen.key == str(ns)
    assert w.keeper.state is before and str(ns) not in w.keeper.state.namespaces
    w.process(items)  # the worker applies the arrival, then its walk
    assert w.keeper.state.namespaces[str(ns)].files == 1


def test_a_removed_namespace_is_forgotten_by_the_intakes_memo(root: Path) -> None:
    ns = make_stamp(root, "gone")
    (ns / "f").write_text("x")
    w = listed(root)
    w.queue_scan([str(ns)])
    while w.scan_some():
        pass
    (ns / "f").write_text("longer")
    w.process([("m", str(root), ns.name, str(ns / "f"), False)])
    assert w.memo.files[str(ns)].sizes[str(ns / "f")] == 6
    assert [r.size for r in w.memo.history.history(str(ns / "f"))] == [6]
    shutil.rmtree(ns)
    w.process([("d", str(root), ns.name, str(ns), True)])
    assert str(ns) not in w.keeper.state.namespaces
    assert str(ns) not in w.memo.files
    assert list(w.memo.history.history(str(ns / "f"))) == []


def test_a_temp_file_renamed_away_before_its_folders_watch_is_not_counted(root: Path) -> None:
    """The owner's stamp is written by a temporary file and a rename. watchdog watches a new
    subfolder only when it reads that folder's creation; a namespace walked on arrival before
    then counted the temporary file, the rename sent no event (no watch yet), and the folder's
    creation came after: its walk found the stamp, and the temporary file stayed counted for
    good, one file and the stamp's bytes too many (the bench's burst figure, 1 run in 40 under
    load). The walk of a new folder is what the folder holds now."""
    w = listed(root)
    ns = make_stamp(root, "late")
    (ns / "data").write_text("12345")
    stamp = ns / META_DIR / STAMP_FILE
    temporary = stamp.with_name(f".{STAMP_FILE}.4242.0a1b2c3d.tmp")
    stamp.rename(temporary)  # the stamp not yet renamed into place
    key, name = str(ns), ns.name
    w.process([("c", str(root), name, key, True)])  # arrived: walked with the temporary file
    assert w.keeper.state.namespaces[key].files == 2
    temporary.rename(stamp)  # no event: `.lanewatch/` was not watched yet
    # Then its creation, read as its watch is set, and the stamp watchdog's walk of it found.
    w.process([("c", str(root), name, str(ns / META_DIR), True)])
    w.process([("c", str(root), name, str(stamp), False)])
    rec = w.keeper.state.namespaces[key]
    assert (rec.files, rec.bytes) == (2, stamp.stat().st_size + 5)
    assert str(temporary) not in w.memo.files[key].sizes
