"""The dashboard's CPU and MEM columns on a real lane burning a core: the figure
shown agrees with the kernel's own count for that process (a whole core only where the
machine has one to spare: see tests/processes/test_footprint.py)."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from lanewatch.linux.proc import read_stat
from lanewatch.processes.pidclock import CLK_TCK
from lanewatch.tui.app import make_app
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.widgets import view_columns
from lanewatch.tui.widgets.lane_table import plain
from tests.processes.test_footprint import agree

from .conftest import Lanes
from .helpers import until

BURN = textwrap.dedent(
    """
    import os, sys, time
    out = sys.argv[1]
    open(out + ".part", "w").write(str(os.getpid())); os.rename(out + ".part", out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pass
    """
)
CPU = [c.key for c in view_columns.LANES].index("cpu")
MEM = [c.key for c in view_columns.LANES].index("mem")


async def test_a_burning_lane_shows_its_cpu_and_memory(
    lanes: Lanes, scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "burner.pid"
    lane = lanes.start("burner", cmd=(sys.executable, "-c", BURN, str(out)))
    app = make_app([scratch])
    async with app.run_test(size=(200, 30)) as pilot:
        table = app.main.table(View.LANES)
        await until(pilot, lambda: out.exists() and table.has_row(lane.key), what="the row")
        pid = int(out.read_text())
        samples: list[tuple[float, int]] = []
        seen: list[tuple[str, float]] = []

        def agrees() -> bool:
            st = read_stat(pid)
            assert st is not None
            now = time.monotonic()
            samples.append((now, st.cpu_ticks))
            old = [s for s in samples if s[0] <= now - 2.5]
            row = table.get_row(lane.key)
            if not old or row is None:
                return False
            got = (st.cpu_ticks - old[-1][1]) / CLK_TCK / (now - old[-1][0]) * 100
            text = plain(row[CPU])
            seen.append((text, round(got, 1)))
            if not text.endswith("%"):
                return False
            return agree(float(text[:-1]), got, got)

        try:
            await until(pilot, agrees, timeout=60, interval=0.2, what="CPU shown")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; (shown, kernel's %): {seen}") from None
        row = table.get_row(lane.key)
        assert row is not None and plain(row[MEM]).endswith("B"), row
