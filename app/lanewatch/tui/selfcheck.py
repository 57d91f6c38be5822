"""Start the dashboard headless, wait for its first picture, say what it shows, and exit.

Used by `lanewatch dash --self-check` (and the wheel test): proves the installed app imports, finds
its stylesheet, starts the engine and renders, without a terminal.
"""

from __future__ import annotations

import asyncio
import sys
import time

from lanewatch.tui.app import LanewatchApp
from lanewatch.tui.state.dashboard_store import View

DEADLINE = 30.0


async def _self_check(app: LanewatchApp, deadline: float) -> int:
    async with app.run_test(size=(100, 30)) as pilot:
        end = time.monotonic() + deadline
        while not app.picture.loaded:
            if time.monotonic() > end:
                print("lanewatch self-check: no picture within the deadline", file=sys.stderr)
                return 1
            await pilot.pause(0.05)
        await pilot.pause()
        counts = app.picture.counts()
        rendered = app.main.table(View.LANES).row_count
        print(
            f"lanewatch self-check: ok lanes={counts[View.LANES]} collisions="
            f"{counts[View.COLLISIONS]} stale={counts[View.STALE]} rows={rendered} "
            f"css={type(app).CSS_PATH}"
        )
    return 0


def self_check_run(app: LanewatchApp, deadline: float = DEADLINE) -> int:
    return asyncio.run(_self_check(app, deadline))
