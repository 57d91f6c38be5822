"""A batch of the engine's tail judges every owner it meets on one read of the process table.

Each new lane was judged on a read of its own (every process's stat), and so was each
rewritten stamp. Under load (the churn journey at load average 40 to 150) a batch with many
new lanes then took longer than the lanes took to come: each batch was longer than the last
(4 batches in a 100 s churn) and nothing reached the picture meanwhile (docs/flakes.md).
Real namespaces under tmp_path and the real /proc; the read is counted, not replaced."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.engine.worker import Worker
from lanewatch.lanes.stamp import META_DIR, STAMP_FILE, read_stamp, write_stamp
from lanewatch.linux.proc import ProcStat
from lanewatch.model.views import NsState
from lanewatch.processes import holders
from tests.kits.enginekit import make_stamp

LANES = 6


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the process table was read (each read is the real one)."""
    counted: list[int] = []
    real: Callable[[], dict[int, ProcStat]] = holders.process_table

    def counting() -> dict[int, ProcStat]:
        counted.append(1)
        return real()

    monkeypatch.setattr(holders, "process_table", counting)
    return counted


def test_new_lanes_in_one_batch_are_judged_on_one_read_of_the_process_table(
    root: Path, reads: list[int]
) -> None:
    w = Worker([str(root)])
    w.list_root(str(root))
    w.keeper.commit()
    made = [make_stamp(root, f"lane-{i}") for i in range(LANES)]
    reads.clear()
    w.process([("c", str(root), ns.name, str(ns), True) for ns in made])
    assert len(reads) == 1
    now = time.time()
    views = {key: w.keeper.view(key, now) for key in map(str, made)}
    assert {key: v.state for key, v in views.items() if v is not None} == dict.fromkeys(
        views, NsState.LIVE
    )


def test_stamps_rewritten_in_one_batch_are_judged_on_one_read_of_the_process_table(
    root: Path, reads: list[int]
) -> None:
    made = [make_stamp(root, f"lane-{i}") for i in range(LANES)]
    w = Worker([str(root)])
    w.list_root(str(root))
    w.keeper.commit()
    for ns in made:  # the owner writes its stamp again (a new heartbeat time in it)
        stamp = read_stamp(ns).stamp
        assert stamp is not None
        write_stamp(ns, replace(stamp, heartbeat_at=time.time() + 1))
    reads.clear()
    w.process([("c", str(root), ns.name, str(ns / META_DIR / STAMP_FILE), False) for ns in made])
    assert len(reads) == 1
    now = time.time()
    states = [getattr(w.keeper.view(str(ns), now), "state", None) for ns in made]
    assert states == [NsState.LIVE] * LANES
