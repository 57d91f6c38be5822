"""Kill, clear and restore from the dashboard, each cancelled and confirmed, through the actions
adapter against real `lanewatch run` lanes and the real engine. The confirmation acts on the
row as it was shown: an owner that changed meanwhile is refused."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from lanewatch.model.views import NsState
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.screens.trash_screen import TrashScreen
from lanewatch.tui.state.dashboard_store import View
from tests.conftest import wait_for

from .conftest import Lanes, RealLane
from .helpers import cancelled, screen_text, settle, shows, until

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


async def show(pilot, app: LanewatchApp, view: View, key: str) -> None:  # type: ignore[no-untyped-def]
    """Select the row `key` in `view`, as a user would see it."""
    await until(pilot, lambda: app.main.table(view).has_row(key), what=f"{key} in {view}")
    await pilot.press({View.LANES: "1", View.COLLISIONS: "2", View.STALE: "3"}[view])
    assert app.main.table().move_cursor(key)
    await pilot.pause()


async def confirm(pilot, app: LanewatchApp, key: str, answer: str) -> str:  # type: ignore[no-untyped-def]
    """Press `key` and `answer` its dialog as a user does: each once what it acts on is shown
    (a key typed ahead of the screen is not a command: `screens/typeahead_guard.py`)."""
    await settle(pilot)
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation")
    text = await shows(pilot, "Cancel [n]")
    await settle(pilot)
    await pilot.press(answer)
    await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
    return text


async def outcome(pilot, app: LanewatchApp, verb: str, count: int = 1):  # type: ignore[no-untyped-def]
    await until(
        pilot,
        lambda: len([o for o in app.action_log if o.verb == verb]) >= count,
        timeout=30,
        what=f"{verb} outcome",
    )
    return [o for o in app.action_log if o.verb == verb][-1]


def alive(lane: RealLane) -> bool:
    return lane.owner.poll() is None


async def test_kill_cancel_then_confirm(lanes: Lanes, scratch: Path) -> None:
    lane = lanes.start("victim")
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await show(pilot, app, View.LANES, lane.key)
        text = await confirm(pilot, app, "k", "n")
        assert "Kill 1 lane?" in text and "victim" in text
        assert f"owner pid {lane.owner.pid}" in text and str(lanes.repo) in text
        await cancelled(pilot, "Kill")
        assert alive(lane) and not app.action_log

        await confirm(pilot, app, "k", "y")
        result = await outcome(pilot, app, "kill")
        assert result.ok, result.message
        code = await asyncio.to_thread(lane.owner.wait, 20)
        assert code == 128 + 15, "lanewatch run reports its command died of SIGTERM"
        await until(
            pilot, lambda: app.main.table(View.STALE).has_row(lane.key), what="released row"
        )
        assert app.picture.namespaces[lane.key].state is NsState.RELEASED
        assert "victim" in " ".join(n.title for n in app.notices.notices)


async def test_kill_of_marked_rows(lanes: Lanes, scratch: Path) -> None:
    started = [lanes.start(f"m{n}") for n in range(3)]
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        for lane in started:
            await until(pilot, lambda lane=lane: app.main.table().has_row(lane.key))
        table = app.main.table()
        table.set_marks([started[0].key, started[2].key])
        await pilot.pause()
        text = await confirm(pilot, app, "k", "y")
        assert "Kill 2 lanes?" in text and "m0" in text and "m2" in text
        await outcome(pilot, app, "kill", count=2)
        assert await asyncio.to_thread(started[0].owner.wait, 20) == 143
        assert await asyncio.to_thread(started[2].owner.wait, 20) == 143
        assert alive(started[1])


async def test_kill_refused_when_the_owner_changed_since_shown(lanes: Lanes, scratch: Path) -> None:
    first = lanes.start("reborn")
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await show(pilot, app, View.LANES, first.key)
        await settle(pilot)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        # While the confirmation is open, the lane ends and a new owner claims it.
        os.killpg(first.pgid, 15)
        await asyncio.to_thread(first.owner.wait, 20)
        second = await asyncio.to_thread(lanes.start, "reborn")
        assert second.owner.pid != first.owner.pid
        await settle(pilot)
        await pilot.press("y")
        result = await outcome(pilot, app, "kill")
        assert not result.ok
        assert "changed" in result.message, result.message
        await pilot.pause(0.5)
        assert alive(second), "the new owner was not signalled"


async def test_clear_cancel_confirm_and_restore(lanes: Lanes, scratch: Path) -> None:
    done = lanes.start("finished", cmd=("true",), wait=False)
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await until(
            pilot,
            lambda: (
                (ns := app.picture.namespaces.get(done.key)) is not None
                and ns.state is NsState.RELEASED
            ),
            30,  # a `lanewatch run` start and exit: ~0.3 s alone, seconds beside a busy suite
            what="released lane",
        )
        await show(pilot, app, View.STALE, done.key)
        text = await confirm(pilot, app, "c", "n")
        assert "Clear 1 namespace?" in text and "finished" in text and "trash" in text
        await cancelled(pilot, "Clear")
        assert done.namespace.is_dir() and not app.action_log

        await confirm(pilot, app, "c", "y")
        result = await outcome(pilot, app, "clear")
        assert result.ok, result.message
        # One unit convention: the message says kB/B like the dashboard, never KiB.
        pattern = r"moved \d+(\.\d)?[kMG]?B on disk \(\d+(\.\d)?[kMG]?B of data\) in \d+ files"
        assert re.search(pattern, result.message), result.message
        assert not done.namespace.exists()
        await until(pilot, lambda: not app.main.table(View.STALE).has_row(done.key))

        # Restore: the trash lists it; cancel once, then confirm.
        for answer in ("n", "y"):
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, TrashScreen))
            screen = app.screen
            assert isinstance(screen, TrashScreen)
            await until(pilot, lambda s=screen: bool(s.items), what="trash listed")
            text = await shows(pilot, "finished", "1 cleared namespace")
            assert "1 cleared namespaces" not in text  # not "1 items"

            def own_keys() -> bool:  # the footer is drawn after the list: wait for it
                footer = screen_text(app).rstrip().splitlines()[-1]
                return "Restore" in footer and "Next view" not in footer

            await until(pilot, own_keys, what="the trash's own keys in the footer")
            await settle(pilot)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await shows(pilot, "Restore from trash?")
            await settle(pilot)
            await pilot.press(answer)
            await until(pilot, lambda: isinstance(app.screen, MainScreen))
            if answer == "n":
                await cancelled(pilot, "Restore")
                assert not done.namespace.exists()
        result = await outcome(pilot, app, "restore")
        assert result.ok, result.message
        assert done.namespace.is_dir()
        await until(
            pilot, lambda: app.main.table(View.STALE).has_row(done.key), what="restored row"
        )


async def test_kill_that_leaves_the_lane_running_is_shown_as_a_failure(
    lanes: Lanes, scratch: Path, tmp_path: Path
) -> None:
    """A command that ignores SIGTERM outlives the kill's wait: the dashboard says so, as an
    error with the reason, like `lanewatch kill` (which exits non-zero) does."""
    ready = tmp_path / "trap-set"
    script = 'trap "" TERM; : > "$1"; exec sleep 600'
    lane = lanes.start("stubborn", cmd=("sh", "-c", script, "sh", str(ready)))
    wait_for(ready.exists, timeout=20)
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await show(pilot, app, View.LANES, lane.key)
        await confirm(pilot, app, "k", "y")
        result = await outcome(pilot, app, "kill")
        assert not result.ok, result.message
        assert "still running" in result.message, result.message
        assert alive(lane)
        await until(pilot, lambda: bool(app.notices.notices), what="a notification")
        shown = [n for n in app.notices.notices if "stubborn" in n.title]
        assert shown and shown[-1].severity == "error"
