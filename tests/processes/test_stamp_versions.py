"""A takeover's evidence without the kernel: the engine keeps the stamp it read
before a live owner was replaced and the new one, in the root's evidence store and write
history, each named by the owner its stamp names; the report shows the one before whole and
the new one as a diff, and prefers the kernel's record of the same content when there is one.
Real stamps in tmp_path, the real evidence store and write log."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.engine.stampversions import StampVersions
from lanewatch.files.walk import read_stamp_at
from lanewatch.lanes.stamp import META_DIR, STAMP_FILE
from lanewatch.model.views import Incident
from lanewatch.records import evidence, writes
from lanewatch.records.report import file_story, versions
from tests.kits.enginekit import make_stamp


def takeover(victim: Path, at: float) -> Incident:
    return Incident(
        id="takeover-1",
        kind="takeover",
        victim=str(victim),
        intruder={"lane": "agent-2", "pid": 5555},
        first_seen=at,
        last_seen=at,
        count=1,
        grade="known",
        evidence=(),
        acknowledged=False,
    )


@pytest.mark.unprivileged
def test_the_stamp_before_and_after_are_kept_with_their_claimed_writers(tmp_path: Path) -> None:
    root = tmp_path / "root"
    ns = make_stamp(root, "agent-2", pid=4242, command=["pytest", "-x"])
    stamps = StampVersions()
    first = read_stamp_at(str(ns))
    assert first.data is not None  # the engine's reader keeps the bytes
    stamps.read(str(ns), first, 100.0)
    make_stamp(root, "agent-2", pid=5555, command=["intruder"])
    second = read_stamp_at(str(ns))
    stamps.keep_replaced(str(root), str(ns), second, 200.0)

    path = str(ns / META_DIR / STAMP_FILE)
    kept = writes.history([str(root)], path)
    assert [(e.time, e.pid, e.how) for e in kept] == [
        (100.0, 4242, writes.STAMP_CLAIM),
        (200.0, 5555, writes.STAMP_CLAIM),
    ]
    assert not any(e.identified for e in kept)  # a claim, never a kernel fact
    assert [evidence.load([str(root)], e.sha256 or "") for e in kept] == [first.data, second.data]

    inc = takeover(ns, 200.0)
    story = file_story([str(root)], path, versions(kept, inc, path))
    assert [s.kind for s in story.shown] == ["content", "diff"]
    assert story.shown[0].version.writer == "lane agent-2, pid 4242: pytest -x (as its stamp says)"
    assert '  "pid": 4242,' in story.shown[0].lines
    assert '-  "pid": 4242,' in story.shown[1].lines and '+  "pid": 5555,' in story.shown[1].lines


@pytest.mark.unprivileged
def test_the_version_before_the_window_is_shown_and_the_kernels_record_wins(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    ns = make_stamp(root, "agent-2", pid=4242)
    stamps = StampVersions()
    stamps.read(str(ns), read_stamp_at(str(ns)), time.time() - 7200)  # read two hours before
    make_stamp(root, "agent-2", pid=5555)
    stamps.keep_replaced(str(root), str(ns), read_stamp_at(str(ns)), time.time())
    path = str(ns / META_DIR / STAMP_FILE)
    kept = writes.history([str(root)], path)
    now = kept[-1].time
    kernel = replace(kept[-1], identified=True, how="marker", command=("python", "intruder"))
    inc = takeover(ns, now)
    shown = versions([*kept, kernel], inc, path)
    # The one before, however long ago, then the new content once: the kernel's writer.
    assert [v.time for v in shown] == [kept[0].time, now]
    assert shown[1].writer == "lane agent-2, pid 5555: python intruder"
