"""The dashboard stays current by itself: real `lanewatch run` lanes, the real engine, and no
key pressed while a lane appears, a refused claim becomes an incident and the owner dies."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lanewatch.model.views import NsState
from lanewatch.tui.app import make_app
from lanewatch.tui.state.dashboard_store import View

from .conftest import Lanes
from .helpers import screen_text, shows, until


async def test_appearing_lane_incident_and_stale_reach_the_screen_unprompted(
    lanes: Lanes, scratch: Path
) -> None:
    app = make_app([scratch])
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="first picture")
        await pilot.pause()
        await shows(pilot, "No lanes are running")

        lane = lanes.start("agent-1", wait=False)
        await until(pilot, lambda: app.main.table(View.LANES).has_row(lane.key), what="row")
        await until(pilot, lambda: "agent-1" in screen_text(app), what="lane on screen")
        await until(pilot, lambda: "1 Lanes 1" in screen_text(app), what="lanes count")
        await until(pilot, lane.ready, what="stamp with CMD group")

        refused = await asyncio.to_thread(lanes.refused, "agent-1")
        assert refused.returncode == 3, refused.stderr
        await until(
            pilot, lambda: "2 Collisions 1" in screen_text(app), what="incident count in header"
        )
        incidents = app.picture.rows(View.COLLISIONS)
        assert [i.kind for i in incidents.values()] == ["refused-claim"]
        assert next(iter(incidents.values())).victim == lane.key
        assert app.main.table(View.COLLISIONS).row_count == 1

        lanes.kill9(lane)
        await until(
            pilot,
            lambda: app.main.table(View.STALE).has_row(lane.key),
            timeout=20,
            what="stale row",
        )
        assert not app.main.table(View.LANES).has_row(lane.key)
        assert app.picture.namespaces[lane.key].state is NsState.STALE
        await until(pilot, lambda: "3 Stale 1" in screen_text(app), what="stale count")
        await until(pilot, lambda: "No lanes are running" in screen_text(app), what="empty")
