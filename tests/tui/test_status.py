"""The status line tells the truth about the sources (real engine): a missing root, a polled
root; and about the view: paused, filtered, following. Follow mode keeps the cursor on the
newest activity."""

from __future__ import annotations

from pathlib import Path

from lanewatch.tui.app import make_app
from lanewatch.tui.state.dashboard_store import View

from .conftest import Lanes
from .helpers import shows, until


async def test_missing_and_polled_roots_are_named(tmp_path: Path, scratch: Path) -> None:
    missing = tmp_path / "gone-root"
    app = make_app([missing, scratch], poll=True)
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        text = await shows(pilot, "missing", str(missing), "polling")
        status = text.splitlines()[-2]
        assert "missing" in status and "polling" in status, status
        assert app.main.query_one("#status").has_class("-degraded")
        missing.mkdir()
        # The other root keeps working meanwhile, and the status line says when it recovers.
        await until(
            pilot,
            lambda: all(h.status != "missing" for h in app.picture.health),
            timeout=30,
            what="missing root noticed again",
        )


async def test_follow_keeps_the_cursor_on_the_newest_writer(lanes: Lanes, scratch: Path) -> None:
    quiet = lanes.start("a-quiet")
    app = make_app([scratch])
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row(quiet.key))
        await pilot.press("f")
        await shows(pilot, "follow")
        busy = lanes.start(
            "b-busy",
            cmd=("sh", "-c", 'while :; do date > "$TMPDIR/tick"; sleep 0.1; done'),
            wait=False,
        )
        await until(
            pilot,
            lambda: app.main.table().cursor_key == busy.key,
            timeout=20,
            what="cursor follows the writing lane",
        )
        await pilot.press("f")
        await until(pilot, lambda: not app.main.follow)
        assert app.main.view is View.LANES


async def test_a_default_root_not_made_yet_is_not_a_fault(isolated_state: Path) -> None:
    """A new user's first `lanewatch`: the default root appears with the first lane."""
    from lanewatch.lanes.roots import default_root

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        text = await shows(pilot, "no lane has run yet", "lanewatch run --lane NAME -- CMD")
        assert "missing" not in text.splitlines()[-2]
        assert not app.main.query_one("#status").has_class("-degraded")
        assert str(default_root()) in text
