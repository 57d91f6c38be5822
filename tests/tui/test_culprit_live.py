"""From an open cross-lane collision to its culprit, on the real demo (real lanes, a real
intruder, the real engine): `2`, `enter`, `k`, `y` ends the intruding lane and nothing else;
the dialog names the lane and why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.demo import DemoScenario
from lanewatch.model.views import NsState
from lanewatch.tui.app import make_app
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.kill_dialog import KillConfirm

from .helpers import settle, shows, until
from .test_investigate import incident_of

pytestmark = pytest.mark.unprivileged


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[DemoScenario]:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    with DemoScenario(shared_tmp=shared) as scenario:
        yield scenario


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_k_on_the_timeline_kills_the_intruder_and_nothing_else(
    demo: DemoScenario, size: tuple[int, int]
) -> None:
    victim = demo.lanes["agent-1"].namespace
    intruder = demo.lanes["tests"]
    app = make_app([demo.scratch_root])
    async with app.run_test(size=size) as pilot:
        await until(
            pilot, lambda: incident_of(app, "cross-lane-write", victim) is not None, 60, what="inc"
        )
        inc = incident_of(app, "cross-lane-write", victim)
        assert inc is not None
        app.navigator.open_incident(inc)
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), what="the timeline")
        await settle(pilot)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, KillConfirm), what="the kill dialog")
        dialog = app.screen
        assert isinstance(dialog, KillConfirm)
        assert dialog.title_text == "Kill the intruding lane tests?"
        assert f"Intruder of {inc.id}" in dialog.what
        await shows(pilot, "Kill the intruding lane tests?")
        live_before = {
            k for k, ns in app.picture.namespaces.items() if ns.state is NsState.LIVE
        } - {str(intruder.namespace)}
        for _ in range(3):  # a y the dialog says came too early (under load) is pressed again
            await settle(pilot)
            await pilot.press("y")
            await until(
                pilot,
                lambda: app.screen is not dialog or dialog.ignored == "y",
                timeout=30,
                what="the dialog answered, or y refused",
            )
            if app.screen is not dialog:
                break
            dialog.ignored = None
        await until(pilot, lambda: bool(app.action_log), timeout=30, what="the kill's outcome")
        assert app.action_log[-1].ok, app.action_log[-1].message
        assert [o.target for o in app.action_log] == [app.action_log[-1].target]
        await until(pilot, intruder.runner.gone, 30, what="the intruding lane ended")
        for key in live_before:  # every other live lane still runs
            assert app.picture.namespaces[key].state is NsState.LIVE, key
        assert not demo.lanes["agent-1"].runner.gone()
