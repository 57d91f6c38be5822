"""The detail pane's "Recent writes" names who wrote each file: the root's write
history (what kernel attribution records) first, else an open incident's evidence about that
path; a file nobody recorded says so. Real files in tmp_path, a real write history written by
the real `WriteLog`; the engine is the stand-in of fakes.py (the rows are fixed). Writers'
names and commands are shown as typed, never parsed as markup."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.model.views import Changes, Evidence, SourceHealth
from lanewatch.records.writes import WriteEntry, WriteLog
from lanewatch.tui.app import make_app
from lanewatch.tui.backend.lane_details import load_detail

from .fakes import NOW, FakeEngine, incident, ns_view
from .helpers import shows, until


class OneRoot(FakeEngine):
    """The stand-in engine, watching the test's root (the pane reads that root's history)."""

    def __init__(self, root: Path, *args, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kw)
        self.root = str(root)

    def snapshot(self) -> Changes:
        return replace(super().snapshot(), health=(SourceHealth(self.root, "ok", ""),))


def _entry(path: Path, lane: str, pid: int, command: tuple[str, ...], at: float) -> WriteEntry:
    return WriteEntry(
        path=str(path),
        time=at,
        size=path.stat().st_size,
        sha256=None,
        stored=False,
        pid=pid,
        start_ticks=1,
        identified=True,
        lane=lane,
        namespace=None,
        command=command,
        how="marker",
        event="close-write",
        victim=None,
    )


def _world(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    root = tmp_path / "root"
    ns = root / "repo-0123456789ab.agent-1"
    (ns / "tmp").mkdir(parents=True)
    mine, theirs, nobody = ns / "tmp" / "mine.txt", ns / "tmp" / "theirs.log", ns / "tmp" / "x"
    for n, f in enumerate((nobody, theirs, mine)):
        f.write_text("data\n")
        os.utime(f, (NOW - 30 + n, NOW - 30 + n))
    assert WriteLog(str(root)).append(
        [
            _entry(mine, "other", 77, ("old",), NOW - 50),
            _entry(mine, "[red]agent-1", 4242, ("[bold]pytest", "-x"), NOW - 28),
        ]
    )
    return root, ns, mine, theirs


def _holder_incident(ns: Path, theirs: Path):  # type: ignore[no-untyped-def]
    ev = Evidence(str(theirs), NOW - 29, 5, None, "inferred", "pid 555 (lane tests)", "held")
    return incident("cross-lane-write-1", str(ns), kind="cross-lane-write", evidence=(ev,))


@pytest.mark.unprivileged
def test_each_recent_write_names_its_last_recorded_writer(tmp_path: Path) -> None:
    root, ns, _, theirs = _world(tmp_path)
    detail = load_detail(ns, roots=[str(root)], incidents=[_holder_incident(ns, theirs)])
    writers = {w.path: w.writer for w in detail.writes}
    assert writers == {
        "tmp/mine.txt": "lane [red]agent-1, pid 4242: [bold]pytest -x",  # the newest entry
        "tmp/theirs.log": "pid 555 (lane tests)",  # from the incident's evidence
        "tmp/x": None,  # nobody recorded it
    }
    assert load_detail(ns).writes[0].writer is None  # no roots, no incidents: not guessed


@pytest.mark.unprivileged
async def test_the_pane_shows_who_wrote_each_file_as_text(tmp_path: Path) -> None:
    root, ns, _, theirs = _world(tmp_path)
    view = ns_view("agent-1", key=str(ns), root=str(root))
    engine = OneRoot(root, [view], [_holder_incident(ns, theirs)])
    app = make_app([root], engine=engine, clock=lambda: NOW)
    async with app.run_test(size=(160, 60)) as pilot:
        await until(pilot, lambda: app.main.details.detail is not None, what="the detail read")
        text = await shows(
            pilot,
            "tmp/mine.txt  by lane [red]agent-1, pid 4242: [bold]pytest -x",
            "tmp/theirs.log  by pid 555 (lane tests)",
            "tmp/x  by writer not recorded",
        )
        assert "Recent writes" in text
