"""Frame cost of LaneTable against Textual's DataTable, measured in the same run.

    python tests/bench/table_frame.py [--quick]

Prints one JSON object. Not part of the test suite. Figures:

- `frame_one_cell`: CPU from a one-cell change of a visible row in a 1,000-row table until the
  frame that shows it has been composed and encoded as terminal output, median and p90 over
  many changes. `LaneTable.apply` against `DataTable.update_cell`.
- `frame_reorder` (LaneTable only): the same when the change moves the row in the sort order,
  so every visible line is repainted (from the row cache).
- `first_frame_5000`: wall and CPU time from handing 5,000 rows to the table (in `on_mount`)
  to the end of the first frame that shows them.
- `write_to_screen`: 1,000 changes/s from a producer thread over 200 of the 1,000 rows (every
  fifth row), drained by the app 30 times a second; latency from a change's creation to the
  end of the first frame after it was applied, p50/p99, over the changes to rows on screen (a
  change off screen needs no frame). LaneTable gets one `apply` per drain, DataTable one
  `update_cell` per change (the usual way it is driven).

The apps run headless; `_display` is extended to encode each frame to ANSI as a real terminal
would need, so that cost is counted too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import textual
from textual._compositor import CompositorUpdate
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))

from lanewatch.tui.widgets.lane_table import Column, LaneTable, number_key

SIZE = (160, 50)
COLUMNS = (
    Column("lane", "LANE"),
    Column("host", "HOST"),
    Column("pid", "PID", justify="right", sort_key=number_key),
    Column("files", "FILES", justify="right", sort_key=number_key),
    Column("bytes", "BYTES", justify="right", sort_key=number_key),
    Column("state", "STATE"),
)
Row = tuple[str, ...]


def make_rows(count: int) -> dict[str, Row]:
    return {
        f"k{i}": (f"worker-{i:05}", f"host-{i % 7}", str(1000 + i), str(i), f"{i}kB", "live")
        for i in range(count)
    }


class Bench(App[None]):
    """Hosts one table; records the end of every frame."""

    def __init__(self, table: Widget, on_load: Callable[[Bench], None] | None = None) -> None:
        super().__init__()
        self.table = table
        self.on_load = on_load
        self.frames: list[tuple[float, float]] = []  # (perf_counter, process_time) at frame end
        self.loaded_at: tuple[float, float] | None = None
        self.ready: Callable[[], bool] = lambda: True
        self.first_frame: tuple[float, float] | None = None

    def compose(self) -> ComposeResult:
        yield self.table

    def on_mount(self) -> None:
        if self.on_load is not None:
            self.loaded_at = (time.perf_counter(), time.process_time())
            self.on_load(self)

    def _display(self, screen: Screen[Any], renderable: Any) -> None:
        super()._display(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            renderable.render_segments(self.console)  # what a terminal would be sent
        now = (time.perf_counter(), time.process_time())
        self.frames.append(now)
        if self.loaded_at is not None and self.first_frame is None and self.ready():
            self.first_frame = now


async def until(pilot: Pilot, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await pilot.pause()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(value: float) -> float:
    return round(value * 1000, 2)


def lane_table() -> LaneTable:
    return LaneTable(COLUMNS)


def data_table() -> DataTable[str]:
    return DataTable(cursor_type="row")  # columns need a running app: added on load


def load_lane(rows: dict[str, Row]) -> Callable[[Bench], None]:
    def load(app: Bench) -> None:
        table = app.table
        assert isinstance(table, LaneTable)
        app.ready = lambda: table.virtual_size.height > len(rows)
        table.apply(rows)

    return load


def load_data(rows: dict[str, Row]) -> Callable[[Bench], None]:
    def load(app: Bench) -> None:
        table = app.table
        assert isinstance(table, DataTable)
        # DataTable measures new rows on idle; the rows show once its virtual size has them.
        app.ready = lambda: table.virtual_size.height > len(rows)
        for column in COLUMNS:
            table.add_column(column.label, key=column.key)
        for key, row in rows.items():
            table.add_row(*row, key=key)

    return load


async def first_frame(
    make: Callable[[], Widget], load: Callable[[Bench], None]
) -> dict[str, float]:
    app = Bench(make(), on_load=load)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.first_frame is not None)
        assert app.loaded_at is not None and app.first_frame is not None
        return {
            "wall_ms": ms(app.first_frame[0] - app.loaded_at[0]),
            "cpu_ms": ms(app.first_frame[1] - app.loaded_at[1]),
        }


async def frame_costs(
    make: Callable[[], Widget],
    load: Callable[[Bench], None],
    change: Callable[[Widget, int], None],
    samples: int,
) -> dict[str, float]:
    app = Bench(make(), on_load=load)
    costs: list[float] = []
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.first_frame is not None)
        await pilot.pause()
        for i in range(samples):
            await pilot.pause()  # settle: nothing pending
            frames = len(app.frames)
            start = time.process_time()
            change(app.table, i)
            await until(pilot, lambda: len(app.frames) > frames)  # noqa: B023
            costs.append(app.frames[frames][1] - start)
        extra: dict[str, float] = {}
        if isinstance(app.table, LaneTable):
            extra = {"row_renders": app.table.row_renders, "line_renders": app.table.line_renders}
    return {
        "median_ms": ms(statistics.median(costs)),
        "p90_ms": ms(quantile(costs, 0.9)),
        "samples": samples,
        **extra,
    }


def lane_one_cell(table: Widget, i: int) -> None:
    assert isinstance(table, LaneTable)
    row = table.get_row("k5")
    assert row is not None
    table.apply({"k5": (*row[:3], str(10_000 + i), *row[4:])})


def data_one_cell(table: Widget, i: int) -> None:
    assert isinstance(table, DataTable)
    table.update_cell("k5", "files", str(10_000 + i))


def lane_reorder(table: Widget, i: int) -> None:
    # Sorted by files descending: alternately push k5 to the top and back to its place.
    assert isinstance(table, LaneTable)
    if table.sort_column != "files":
        table.sort_by("files", reverse=True)
    row = table.get_row("k995")
    assert row is not None
    files = str(10_000 + i) if i % 2 == 0 else "995"
    table.apply({"k995": (*row[:3], files, *row[4:])})


async def write_to_screen(
    make: Callable[[], Widget], rows: dict[str, Row], batched: bool, seconds: float
) -> dict[str, float]:
    """Changes from a thread at 1,000/s; latency until the first frame after they were applied."""
    events: queue.SimpleQueue[tuple[float, str, int]] = queue.SimpleQueue()
    stop = threading.Event()
    keys = list(rows)[::5][:200]
    on_screen = set(list(rows)[: SIZE[1] - 5])  # no scrolling happens: the top rows show

    def produce() -> None:
        n = 0
        start = time.perf_counter()
        while not stop.is_set():
            due = start + n / 1000
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            events.put((time.perf_counter(), keys[n % len(keys)], n))
            n += 1

    load = load_lane(rows) if batched else load_data(rows)
    app = Bench(make(), on_load=load)
    applied: list[tuple[int, list[float]]] = []  # (frames drawn before the apply, stamps)

    def drain() -> None:
        stamps: list[float] = []
        latest: dict[str, int] = {}
        while True:
            try:
                stamp, key, n = events.get_nowait()
            except queue.Empty:
                break
            if key in on_screen:
                stamps.append(stamp)
            latest[key] = n
        if not latest:
            return
        table = app.table
        if isinstance(table, LaneTable):
            table.apply({k: (*rows[k][:3], str(n), *rows[k][4:]) for k, n in latest.items()})
        else:
            assert isinstance(table, DataTable)
            for key, n in latest.items():
                table.update_cell(key, "files", str(n))
        applied.append((len(app.frames), stamps))

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.first_frame is not None)
        cpu0 = time.process_time()
        app.set_interval(1 / 30, drain)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        await asyncio.sleep(seconds)
        stop.set()
        producer.join()
        cpu = time.process_time() - cpu0
        await pilot.pause()
        latencies = [
            app.frames[frames][0] - stamp
            for frames, stamps in applied
            if frames < len(app.frames)
            for stamp in stamps
        ]
    return {
        "p50_ms": ms(statistics.median(latencies)),
        "p99_ms": ms(quantile(latencies, 0.99)),
        "events": len(latencies),
        "cpu_share_of_one_core": round(cpu / seconds, 2),
    }


async def main(quick: bool) -> dict[str, Any]:
    samples = 15 if quick else 40
    rows_1000 = make_rows(1000)
    rows_5000 = make_rows(5000)
    # Warm imports and CSS parsing so neither table pays for them.
    await first_frame(lane_table, load_lane(make_rows(10)))
    await first_frame(data_table, load_data(make_rows(10)))

    lane_first = await first_frame(lane_table, load_lane(rows_5000))
    data_first = await first_frame(data_table, load_data(rows_5000))
    lane_frame = await frame_costs(lane_table, load_lane(rows_1000), lane_one_cell, samples)
    data_frame = await frame_costs(data_table, load_data(rows_1000), data_one_cell, samples)
    lane_reorder_frame = await frame_costs(lane_table, load_lane(rows_1000), lane_reorder, samples)
    seconds = 3.0 if quick else 8.0
    lane_load = await write_to_screen(lane_table, rows_1000, batched=True, seconds=seconds)
    data_load = await write_to_screen(data_table, rows_1000, batched=False, seconds=seconds)

    return {
        "machine": {
            "python": platform.python_version(),
            "textual": textual.__version__,
            "terminal": f"{SIZE[0]}x{SIZE[1]}",
        },
        "figures": {
            "frame_one_cell": {
                "lane_table": lane_frame,
                "data_table": data_frame,
                "ratio": round(lane_frame["median_ms"] / data_frame["median_ms"], 3),
                "target_ms": 20,
                "ok": lane_frame["p90_ms"] <= 20,
            },
            "frame_reorder": {"lane_table": lane_reorder_frame, "target_ms": 20},
            "first_frame_5000": {
                "lane_table": lane_first,
                "data_table": data_first,
                "ratio": round(lane_first["wall_ms"] / data_first["wall_ms"], 3),
            },
            "write_to_screen": {
                "lane_table": lane_load,
                "data_table": data_load,
                "target_p99_ms": 150,
                "ok": lane_load["p99_ms"] <= 150,
            },
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, shorter load")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.quick)), indent=2))
