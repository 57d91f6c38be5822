"""A key pressed in a view whose table has no row (hidden behind the empty message, so the
focus may have left it) says why it does nothing, as it does over a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.tui.app import make_app
from lanewatch.tui.state.dashboard_store import View

from .conftest import Lanes
from .helpers import settle, until

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


def notices(app: object) -> list[str]:
    return [n.message for n in app.notices.notices]  # type: ignore[attr-defined]


async def test_keys_in_an_emptied_view_say_why_they_do_nothing(lanes: Lanes, scratch: Path) -> None:
    lanes.start("alpha")
    assert lanes.refused("alpha").returncode == 3
    app = make_app([scratch])
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.picture.counts()[View.COLLISIONS] == 1, what="claim")
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("a")
        await until(pilot, lambda: app.screen is not app.main, what="the dialog")
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: not app.main.table().display, what="the view emptied")
        # A hidden table cannot keep the focus: Textual takes it away at the next layout,
        # which can come after the table was hidden (under load, after a settle).
        await until(pilot, lambda: app.focused is None, what="the focus left the hidden table")
        await settle(pilot)
        for key in ("a", "e", "enter"):
            before = len(notices(app))
            await pilot.press(key)
            await until(pilot, lambda n=before: len(notices(app)) > n, what=f"notice for {key!r}")
            await settle(pilot)
        assert notices(app)[-1] == "No row is selected."
