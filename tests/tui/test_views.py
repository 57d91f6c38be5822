"""Each view, the filter, sorting, the incident timeline, export and acknowledge, driven with
keys against real lanes (`lanewatch run` subprocesses) through the real engine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.command import CommandPalette

from lanewatch.lanes.roots import state_dir
from lanewatch.records.incident_log import IncidentLog
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.backend.report_export import default_folder
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.screens.path_prompt import PathPrompt
from lanewatch.tui.state.dashboard_store import View
from tests.conftest import wait_for

from .conftest import Lanes, RealLane
from .helpers import cancelled, confirm_export, screen_text, settle, shows, until


@dataclass
class World:
    lanes: dict[str, RealLane]
    scratch: Path


@pytest.fixture
def world(lanes: Lanes, scratch: Path) -> World:
    """alpha, beta, gamma live; done released; a refused claim on beta."""
    started = {name: lanes.start(name) for name in ("alpha", "beta", "gamma")}
    done = lanes.start("done", cmd=("true",), wait=False)
    wait_for(lambda: (s := done.stamp()) is not None and s.state == "released", timeout=20)
    started["done"] = done
    assert lanes.refused("beta").returncode == 3
    return World(started, scratch)


async def loaded(pilot, app: LanewatchApp) -> None:  # type: ignore[no-untyped-def]
    await until(
        pilot,
        lambda: app.picture.counts() == {View.LANES: 3, View.COLLISIONS: 1, View.STALE: 1},
        what=f"the world on screen, have {app.picture.counts()}",
    )
    await pilot.pause()


def lane_names(app: LanewatchApp) -> list[str]:
    return [app.picture.namespaces[str(k)].lane or "" for k in app.main.table().visible_keys]


async def test_each_view_a_key_apart(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        text = await shows(pilot, "1 Lanes 3", "2 Collisions 1", "3 Stale 1")
        assert "1 Lanes 3" in text and "2 Collisions 1" in text and "3 Stale 1" in text
        assert all(name in text for name in ("alpha", "beta", "gamma"))
        await pilot.press("2")
        assert app.main.view is View.COLLISIONS
        await shows(pilot, "refused-claim")
        await pilot.press("3")
        assert app.main.view is View.STALE
        text = await shows(pilot, "released", "done")
        assert "released" in text and "done" in text
        await pilot.press("tab")
        assert app.main.view is View.LANES
        await pilot.press("shift+tab")
        assert app.main.view is View.STALE


async def test_filter_and_sort(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        assert lane_names(app) == ["alpha", "beta", "gamma"]
        await pilot.press("I")
        assert lane_names(app) == ["gamma", "beta", "alpha"]
        await pilot.press("I")
        await pilot.press("slash", *"ta", "enter")
        assert lane_names(app) == ["beta"]
        await pilot.press("escape")
        assert lane_names(app) == ["alpha", "beta", "gamma"]
        app.main.action_sort("pid")
        pids = [app.picture.namespaces[str(k)].pid or 0 for k in app.main.table().visible_keys]
        assert pids == sorted(pids)
        await pilot.press("greater_than_sign")
        assert app.main.table().sort_column == "beat"
        cursor = app.main.table().cursor_key
        await pilot.press("less_than_sign", "less_than_sign")
        assert app.main.table().sort_column == "checkout"
        assert app.main.table().cursor_key == cursor, "the cursor keeps its row across sorts"


async def test_sort_keys_step_over_hidden_columns(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        table = app.main.table()
        keys = [c.key for c in table.columns]
        table.set_hidden({"checkout"})  # what `C` does
        app.main.action_sort("pid")
        await pilot.press("less_than_sign")
        assert table.sort_column == keys[keys.index("checkout") - 1], "< skips the hidden column"
        await pilot.press("greater_than_sign")
        assert table.sort_column == "pid", "> skips it too"


async def test_timeline_and_export(world: World, in_tmp_cwd: Path) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("2")
        await settle(pilot)  # an action key typed with the view switch is not a command
        await confirm_export(pilot, "e")
        await until(pilot, lambda: app.last_export is not None, what="export from the view")
        md = app.last_export
        # Into the state folder, never the current one (a checkout: `gate` would refuse it).
        assert md is not None and md.parent == default_folder() and md.suffix == ".md"
        assert md.parent.is_relative_to(state_dir()) and not list(in_tmp_cwd.iterdir())
        text = md.read_text()
        assert "refused-claim" in text and "beta" in text and "## Evidence" in text
        assert str(md) in " ".join(n.message for n in app.notices.notices)

        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen))
        screen = app.screen
        assert isinstance(screen, IncidentScreen)
        await until(pilot, lambda: screen.report is not None, what="timeline report")
        await pilot.pause()
        text = await shows(pilot, "claim-refused")
        assert "refused-claim" in text and "claim-refused" in text  # ledger line around it
        app.last_export = None
        await settle(pilot)
        await confirm_export(pilot, "E")
        await until(pilot, lambda: app.last_export is not None, what="json export")
        data = json.loads(app.last_export.read_text())  # type: ignore[union-attr]
        assert data["incident"]["kind"] == "refused-claim"
        assert data["incident"]["victim"] == world.lanes["beta"].key
        assert any(line["event"] == "claim-refused" for line in data["ledger"])

        target = in_tmp_cwd / "chosen" / "postmortem.json"
        target.parent.mkdir()
        app.last_export = None
        await settle(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, PathPrompt))
        prompt_input = app.screen.query_one("#prompt-input")
        prompt_input.value = str(target)  # type: ignore[attr-defined]
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="export dialog")
        assert str(target) in app.screen.what  # type: ignore[attr-defined]
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: app.last_export == target, what="export to a chosen path")
        assert json.loads(target.read_text())["incident"]["kind"] == "refused-claim"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_acknowledge_cancel_then_confirm(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        text = await shows(pilot, "Acknowledge 1 incident?")
        assert "Acknowledge 1 incident?" in text and "refused-claim" in text and "beta" in text
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await cancelled(pilot, "Acknowledge")
        assert app.picture.counts()[View.COLLISIONS] == 1
        iid = next(iter(app.picture.incidents))

        await settle(pilot)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: app.picture.counts()[View.COLLISIONS] == 0, what="acknowledged")
        await until(pilot, lambda: "2 Collisions 0" in screen_text(app))
        assert app.main.check_action("acknowledge", ()) is None
        log = IncidentLog(str(world.scratch.resolve()))
        log.load()
        assert log.known[iid].ack_at is not None


async def test_command_palette_offers_the_selection_actions(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"kill lane")
        await shows(pilot, "Kill lane 'alpha'")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="kill confirm")
        await shows(pilot, "Kill 1 lane?", "alpha")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert world.lanes["alpha"].owner.poll() is None


async def test_acknowledge_from_the_timeline_updates_it(world: World) -> None:
    app = make_app([world.scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot, app)
        await pilot.press("2", "enter")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen))
        screen = app.screen
        assert isinstance(screen, IncidentScreen)
        await settle(pilot)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: screen.incident.acknowledged, what="timeline follows the ack")
        await shows(pilot, "state    acknowledged")
        assert screen.check_action("acknowledge", ()) is None
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await shows(pilot, "2 Collisions 0", "No collisions")
