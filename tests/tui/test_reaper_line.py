"""The status line shows what the service's reaper did last and when it runs next
(records/reaping.py, docs/reaper.md), from a real reap.json in the test's own state folder."""

from __future__ import annotations

import time
from pathlib import Path

from lanewatch.records import reaping
from lanewatch.tui.app import make_app
from lanewatch.tui.widgets.status_line import StatusLine

from .fakes import FakeEngine
from .helpers import until


async def test_the_status_line_shows_the_reapers_last_and_next_pass(isolated_state: Path) -> None:
    now = time.time()
    summary = reaping.PassSummary(at=now - 120, cleared=3, purged=2, cleared_bytes=4_000_000,
                                  purged_bytes=9_000_000)  # fmt: skip
    reaping.record_pass(summary, reaping.ReapPolicy(age=3600.0), now + 300)
    app = make_app([Path("/roots/r1")], engine=FakeEngine())
    async with app.run_test(size=(200, 30)) as pilot:
        line = app.main.query_one(StatusLine)
        await until(pilot, lambda: "reaper" in str(line.render()), what="the reaper's line")
        text = str(line.render())
        assert "cleared 3 (4.0MB)" in text and "purged 2 (9.0MB freed)" in text, text
        assert "next in 4m" in text or "next in 5m" in text, text


async def test_no_reaper_no_line(isolated_state: Path) -> None:
    app = make_app([Path("/roots/r1")], engine=FakeEngine())
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.pause()
        assert app.state.reaper_line is None
        assert "reaper" not in str(app.main.query_one(StatusLine).render())
