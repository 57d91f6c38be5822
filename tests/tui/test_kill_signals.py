"""The kill dialog's signal menu against real `lanewatch run` lanes: the chosen signal is the one
the lane's command dies of (`lanewatch run` exits 128 + its number), still sent through the
actions path that re-checks the owner at the signal; TERM stays the default, and a digit typed
ahead of the dialog does not change it."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from lanewatch.tui.app import make_app
from lanewatch.tui.screens.kill_dialog import KillConfirm
from lanewatch.tui.state.dashboard_store import View

from .conftest import Lanes
from .helpers import burst, settle, shows, until
from .test_actions import outcome, show

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


@pytest.mark.parametrize(
    ("keys", "sig"),
    [
        pytest.param(["4"], signal.SIGKILL, id="4-KILL"),
        pytest.param(["s", "s"], signal.SIGHUP, id="s-s-HUP"),
    ],
)
async def test_the_chosen_signal_kills_the_lane(
    lanes: Lanes, scratch: Path, keys: list[str], sig: signal.Signals
) -> None:
    lane = lanes.start("signalled")
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await show(pilot, app, View.LANES, lane.key)
        await settle(pilot)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, KillConfirm), what="kill dialog")
        await shows(pilot, "[1 TERM]", "Send SIGTERM")
        for key in keys:
            await settle(pilot)
            await pilot.press(key)
        dialog = app.screen
        assert isinstance(dialog, KillConfirm) and dialog.signal == sig
        await shows(pilot, f"Send {sig.name}", f"{sig.name.removeprefix('SIG')}]")
        await settle(pilot)
        await pilot.press("y")
        result = await outcome(pilot, app, "kill")
        assert result.ok, result.message
        code = await asyncio.to_thread(lane.owner.wait, 20)
        assert code == 128 + sig, f"lanewatch run reports its command died of {sig.name}"


async def test_term_is_the_default_and_a_digit_typed_ahead_changes_nothing(
    lanes: Lanes, scratch: Path
) -> None:
    lane = lanes.start("typed")
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await show(pilot, app, View.LANES, lane.key)
        await settle(pilot)
        burst(pilot, ["k", "4"])  # as a paste: the 4 arrives before the dialog is up
        await until(pilot, lambda: isinstance(app.screen, KillConfirm), what="kill dialog")
        await shows(pilot, "Ignored 4")
        dialog = app.screen
        assert isinstance(dialog, KillConfirm) and dialog.signal == signal.SIGTERM
        await settle(pilot)
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, KillConfirm))
        assert lane.owner.poll() is None, "cancelled: the lane still runs"
