"""Type-ahead never acts: keys that arrive in one burst (a paste, `tmux send-keys -l`, typing
while the UI is busy) are delivered with no pause between them (`burst`), against real lanes
and the real engine, and the real effects are checked: the lane's owner still runs, the
namespaces are where they were, no export file exists (in the state folder, where exports go,
or the current one), the incident is not acknowledged. A deliberate confirmation (a key pressed
once the dialog is on screen and settled) still acts."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Input

from lanewatch.linux.procid import hostname
from lanewatch.model.views import NsState
from lanewatch.records.incident_log import IncidentLog
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.backend.report_export import default_folder
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.screens.trash_screen import TrashScreen
from lanewatch.tui.screens.typeahead_guard import BURST, GUARD
from lanewatch.tui.state.dashboard_store import View
from tests.conftest import lanewatch, wait_for

from .conftest import Lanes, RealLane
from .fakes import NOW, FakeEngine, ns_view
from .helpers import burst, cancelled, screen_text, settle, shows, until

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


@dataclass
class World:
    live: RealLane  # "alpha": live, and the victim of a refused claim (one incident)
    done: RealLane  # "done": released, the Stale view's row
    cleared: RealLane  # "old": released, then cleared into the trash
    scratch: Path
    cwd: Path  # never written: exports go to the state folder

    def acknowledged(self) -> bool:
        log = IncidentLog(str(self.scratch.resolve()))
        log.load()
        return any(record.ack_at is not None for record in log.known.values())

    def untouched(self, app: LanewatchApp) -> None:
        """Nothing was signalled, cleared, restored, acknowledged or exported."""
        assert not app.action_log, app.action_log
        assert self.live.owner.poll() is None, "the live lane's owner still runs"
        assert self.done.namespace.is_dir(), "the released namespace was not cleared"
        assert not self.cleared.namespace.exists(), "the cleared namespace was not restored"
        assert not self.acknowledged(), "the incident is not acknowledged on disk"
        assert not any(i.acknowledged for i in app.picture.incidents.values())
        assert app.last_export is None and not list(self.cwd.iterdir()), "no export written"
        assert not exported(), "no export in the state folder"


def exported() -> list[Path]:
    """The files in the state folder's exports/ (where `e` / `E` write)."""
    folder = default_folder()
    return sorted(folder.iterdir()) if folder.exists() else []


def released(lane: RealLane) -> bool:
    stamp = lane.stamp()
    return stamp is not None and stamp.state == "released"


@pytest.fixture
def world(lanes: Lanes, scratch: Path, in_tmp_cwd: Path) -> World:
    live = lanes.start("alpha")
    assert lanes.refused("alpha").returncode == 3
    done = lanes.start("done", cmd=("true",), wait=False)
    old = lanes.start("old", cmd=("true",), wait=False)
    wait_for(lambda: released(done) and released(old), timeout=20)
    cleared = lanewatch("clear", "--yes", str(old.namespace), cwd=in_tmp_cwd)
    assert cleared.returncode == 0, cleared.stderr
    assert not old.namespace.exists()
    return World(live, done, old, scratch, in_tmp_cwd)


async def loaded(pilot, app: LanewatchApp) -> None:  # type: ignore[no-untyped-def]
    await until(
        pilot,
        lambda: app.picture.counts() == {View.LANES: 1, View.COLLISIONS: 1, View.STALE: 1},
        what=f"the world on screen, have {app.picture.counts()}",
    )
    await settle(pilot)


async def quiet(pilot, app: LanewatchApp) -> None:  # type: ignore[no-untyped-def]
    """Every key handled, every worker (an action, an export) finished."""
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def filter_text(app: LanewatchApp) -> str:
    return app.main.query_one("#filter", Input).value


@pytest.mark.parametrize(
    ("view", "keys"),
    [
        (View.LANES, "/ky"),
        (View.LANES, "/kill/y"),
        (View.COLLISIONS, "/agent"),
        (View.COLLISIONS, "/E"),
        (View.COLLISIONS, "/Eyy"),
        (View.COLLISIONS, "/eay"),
        (View.STALE, "/cy"),
    ],
)
async def test_keys_after_slash_go_to_the_filter(world: World, view: View, keys: str) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press({View.LANES: "1", View.COLLISIONS: "2", View.STALE: "3"}[view])
        await settle(pilot)
        assert app.main.view is view and app.main.table().cursor_key is not None
        burst(pilot, keys)
        await until(pilot, lambda: filter_text(app) == keys[1:], what=f"filter {keys[1:]!r}")
        await quiet(pilot, app)
        assert filter_text(app) == keys[1:]
        assert app.screen is app.main and app.main.focused is app.main.query_one("#filter")
        world.untouched(app)


@pytest.mark.parametrize("keys", ["2a", "2E", "3c", "2ey"])
async def test_an_action_key_right_after_a_view_switch_is_not_a_command(
    world: World, keys: str
) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        burst(pilot, keys)
        await until(pilot, lambda: app.main.view is not View.LANES, what="the view switch")
        await quiet(pilot, app)
        assert app.screen is app.main
        world.untouched(app)
        assert "not taken as a command" in " ".join(n.message for n in app.notices.notices)


async def test_a_confirming_key_typed_with_the_action_key_is_ignored(world: World) -> None:
    """`ky` in one burst opens the kill dialog and leaves it open (Cancel focused, a note);
    `y` pressed once the dialog is on screen and settled kills the lane."""
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        assert app.main.table().cursor_key == world.live.key
        burst(pilot, "ky")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="kill dialog")
        await quiet(pilot, app)
        assert isinstance(app.screen, ConfirmScreen)
        text = await shows(pilot, "Kill 1 lane?", "typed before")
        assert app.screen.focused is app.screen.query_one("#confirm-no")
        world.untouched(app)
        assert "alpha" in text

        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await until(pilot, lambda: bool(app.action_log), timeout=30, what="kill outcome")
        assert app.action_log[-1].ok, app.action_log[-1].message
        assert await asyncio.to_thread(world.live.owner.wait, 20) == 128 + 15


async def test_enter_on_a_tabbed_to_yes_button_typed_ahead_is_ignored(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        burst(pilot, ["k", "tab", "enter", "y"])
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="kill dialog")
        await quiet(pilot, app)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.focused is app.screen.query_one("#confirm-no")
        world.untouched(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        world.untouched(app)


async def test_trash_screen_type_ahead_restores_nothing(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TrashScreen))
        trash = app.screen
        assert isinstance(trash, TrashScreen)
        await until(pilot, lambda: bool(trash.items), what="trash listed")
        await shows(pilot, "old")
        await settle(pilot)

        burst(pilot, "/ry")
        await quiet(pilot, app)
        assert app.screen is trash, "r in a burst did not ask to restore"
        world.untouched(app)

        await settle(pilot)
        burst(pilot, ["enter", "y"])  # enter asks (the screen was settled); y does not answer
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="restore dialog")
        await quiet(pilot, app)
        await shows(pilot, "Restore from trash?")
        assert isinstance(app.screen, ConfirmScreen), "the y typed with enter did not answer"
        world.untouched(app)

        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: bool(app.action_log), timeout=30, what="restore outcome")
        assert app.action_log[-1].ok, app.action_log[-1].message
        assert world.cleared.namespace.is_dir()


async def test_timeline_type_ahead_exports_and_acknowledges_nothing(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen))
        timeline = app.screen
        assert isinstance(timeline, IncidentScreen)
        await until(pilot, lambda: timeline.report is not None, what="timeline report")
        await settle(pilot)

        for keys in ("/E", "/Ey", "/agent", "/e", "/s"):
            burst(pilot, keys)
            await quiet(pilot, app)
            assert app.screen is timeline, f"{keys} opened nothing"
            world.untouched(app)
            await settle(pilot)

        burst(pilot, "ay")  # a asks (the screen was settled); y does not answer
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="ack dialog")
        await quiet(pilot, app)
        await shows(pilot, "Acknowledge 1 incident?", "typed before")
        world.untouched(app)
        await pilot.press("n")
        await until(pilot, lambda: app.screen is timeline)
        assert "refused-claim" in screen_text(app)
        world.untouched(app)


async def export_dialog(pilot, app: LanewatchApp) -> ConfirmScreen:  # type: ignore[no-untyped-def]
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="export dialog")
    await quiet(pilot, app)
    dialog = app.screen
    assert isinstance(dialog, ConfirmScreen) and dialog.title_text.startswith("Export incident")
    assert dialog.focused is dialog.query_one("#confirm-no"), "Cancel has the focus"
    return dialog


@pytest.mark.parametrize("where", ["collisions", "timeline"])
async def test_export_asks_first_and_cancel_is_the_default(world: World, where: str) -> None:
    """`E` (or `e`) with letters typed behind it in one burst opens the export dialog, which
    names the file and takes none of them (not `y`, not enter); enter once it is settled
    presses Cancel and escape cancels: no file. A deliberate `y` writes exactly one file."""
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("2")
        await settle(pilot)
        if where == "timeline":
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, IncidentScreen))
            timeline = app.screen
            assert isinstance(timeline, IncidentScreen)
            await until(pilot, lambda: timeline.report is not None, what="timeline report")
            await settle(pilot)
        home = app.screen

        for keys, kind, answer in ((["E", "y", "y"], "json", "enter"), ("eay", "md", "escape")):
            burst(pilot, keys)
            dialog = await export_dialog(pilot, app)
            assert str(default_folder() / "lanewatch-incident-") in dialog.what
            assert dialog.what.rstrip(".").endswith(f".{kind}"), dialog.what
            world.untouched(app)
            await settle(pilot)
            app.clear_notifications()
            await pilot.press(answer)
            await until(pilot, lambda: app.screen is home, what=f"{answer} closes the dialog")
            await cancelled(pilot, "Export")
            await quiet(pilot, app)
            world.untouched(app)
            await settle(pilot)

        await pilot.press("E")
        await export_dialog(pilot, app)
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: app.last_export is not None, what="the export")
        written = app.last_export
        assert written is not None and exported() == [written] and written.suffix == ".json"
        assert f"Wrote {written}" in [n.message for n in app.notices.notices]
        assert not list(world.cwd.iterdir())


async def test_a_released_lane_stays_until_a_deliberate_clear(world: World) -> None:
    """The Stale view's clear, typed ahead with its `y`, then confirmed deliberately."""
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("3")
        await settle(pilot)
        assert app.main.table().cursor_key == world.done.key
        assert app.picture.namespaces[world.done.key].state is NsState.RELEASED
        burst(pilot, "cy")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="clear dialog")
        await quiet(pilot, app)
        world.untouched(app)
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: bool(app.action_log), timeout=30, what="clear outcome")
        assert app.action_log[-1].ok, app.action_log[-1].message
        assert not world.done.namespace.exists()


# -- the guard's dates, on a stand-in engine (tests/tui/fakes.py): no timing luck involved ----


def key(name: str, at: float) -> events.Key:
    event = events.Key(name, name if len(name) == 1 else None)
    event.time = at  # as if the driver had read the key at `at`
    return event


async def test_guard_dates_keys_against_the_last_change_and_the_previous_key() -> None:
    app = make_app(
        [Path("/roots/r1")], engine=FakeEngine([ns_view("one", host=hostname())]), clock=lambda: NOW
    )
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        await settle(pilot)
        main = app.main
        assert main.guards("k") and not main.guards("down") and not main.guards("slash")
        changed = main._changed_at
        long_ago = changed - 10.0
        assert main.refuses(key("k", changed + GUARD / 2), long_ago), "right after a change"
        assert not main.refuses(key("k", changed + GUARD * 2), long_ago), "a deliberate k"
        later = changed + 5.0
        assert main.refuses(key("k", later + BURST / 2), later), "in a burst with the last key"
        assert not main.refuses(key("down", changed + GUARD / 2), long_ago), "not guarded"
        await until(
            pilot,
            lambda: "not taken as a command" in " ".join(n.message for n in app.notices.notices),
            what="the notice",
        )


async def test_a_key_ignored_before_the_dialog_is_composed_shows_once_it_is() -> None:
    row = ns_view("one", host=hostname())
    app = make_app([Path("/roots/r1")], engine=FakeEngine([row]), clock=lambda: NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        await settle(pilot)
        app.flows.confirm_kill([row])  # pushes the dialog; it is composed later
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert not dialog.settled(), "not on screen yet: nothing counts as a command"
        dialog.typed_ahead("y")  # as `LanewatchApp.on_key` does for a `y` right behind the `k`
        await shows(pilot, "Ignored y: typed before this dialog was on screen")
        assert dialog.refuses(key("y", dialog._changed_at), -math.inf)
        assert not dialog.refuses(key("n", dialog._changed_at), -math.inf), "cancel always"
        await pilot.press("n")
        await until(pilot, lambda: app.screen is app.main, what="n answers at once")
