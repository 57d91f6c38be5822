"""The kill dialog after a burst of keys, against a real lane: `kkyy` leaves it open (it never
closes by itself), and a burst `4y` in it says burst, not "typed before this dialog"."""

from __future__ import annotations

import pytest
from textual._time import get_time

from lanewatch.tui.app import make_app
from lanewatch.tui.screens.kill_dialog import KillConfirm

from .conftest import Lanes
from .helpers import burst, screen_text, settle, until

pytestmark = pytest.mark.unprivileged


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_kkyy_leaves_the_kill_dialog_open(lanes: Lanes, size: tuple[int, int]) -> None:
    lane = lanes.start("alpha")
    app = make_app([lanes.root])
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: lane.key in app.picture.namespaces, what="the lane")
        await until(pilot, lambda: app.main.table().cursor_key == lane.key, what="selected")
        await settle(pilot)
        burst(pilot, "kkyy")
        await until(pilot, lambda: isinstance(app.screen, KillConfirm), what="the dialog")
        dialog = app.screen
        stack = list(app.screen_stack)
        # Three seconds of the dashboard's life (ticks, drains, toasts expiring), watched.
        deadline = get_time() + 3.0
        while get_time() < deadline:
            await pilot.pause(0.1)
            assert app.screen is dialog, f"the dialog closed: {app.screen_stack} (was {stack})"
        assert sum(isinstance(s, KillConfirm) for s in app.screen_stack) == 1, app.screen_stack
        assert not app.action_log and lane.owner.poll() is None
        print(screen_text(app))


async def test_a_burst_in_the_dialog_is_told_as_a_burst(lanes: Lanes) -> None:
    """`4y` sent at once into a settled kill dialog: neither acts, and the note says they came
    in a burst (not "typed before this dialog was on screen": it was on screen)."""
    lane = lanes.start("alpha")
    app = make_app([lanes.root])
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.main.table().cursor_key == lane.key, what="selected")
        await settle(pilot)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, KillConfirm), what="the dialog")
        dialog = app.screen
        assert isinstance(dialog, KillConfirm)
        await settle(pilot)
        await pilot.press("3")  # one deliberate key first: HUP; the burst comes after it
        await until(pilot, lambda: dialog.signal_name == "HUP", what="HUP chosen")
        burst(pilot, "4y")
        await until(pilot, lambda: dialog.ignored == "y", what="y ignored")
        assert dialog.ignored_burst
        # The note is drawn on the next repaint: wait for it (under load the screen read at once
        # was still being laid out, blank).
        await until(
            pilot,
            lambda: "came in a burst" in screen_text(app) or "burst of keys" in screen_text(app),
            what="the note saying burst",
        )
        assert app.screen is dialog and not app.action_log and lane.owner.poll() is None
