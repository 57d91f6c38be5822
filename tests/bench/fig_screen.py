"""Figures on the dashboard (`make_app`, headless `run_test` at 160x50).

    python -m tests.bench.fig_screen first ROOT EXPECTED
    python -m tests.bench.fig_screen stamps ROOT
    python -m tests.bench.fig_screen write ROOT PLAN RATE SECONDS WORKDIR
    python -m tests.bench.fig_screen floor-write ROOT PLAN RATE SECONDS WORKDIR

Every frame is also encoded as the ANSI a terminal would be sent (headless Textual skips that),
so its cost counts, as in `table_frame.py`.

- `first`: in a fresh process, from `make_app(...)` (imports done: their time is reported
  apart) to the end of the first frame whose Lanes table holds all EXPECTED lanes.
- `stamps`: the floor of `first`: open, read and parse the 1,000 stamps.
- `write`: the write load of `writer.py`; for each write to a lane whose row is on screen when
  the write reaches the table, the time from the write to the end of the first frame after
  that. The write is followed through the engine (`on_applied`: the path is in the model), the
  app (the first drain whose picture is at least that new), to the frame. A write that changes
  nothing its row shows (a rewrite that leaves "35kB" at "35kB", "0s" at "0s") owes no frame:
  its time is the drain's (counted apart as `on_screen_row_unchanged`).
- `floor-write`: the same load and measure with nothing but a bare watchdog observer whose
  handler hands each event to the app's loop, which updates one `Static`: one Textual frame
  after the kernel's event.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

T_START = time.perf_counter()

from textual._compositor import CompositorUpdate  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.css.query import NoMatches  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from textual.screen import Screen  # noqa: E402
from textual.widgets import Static  # noqa: E402
from watchdog.events import FileSystemEvent, FileSystemEventHandler  # noqa: E402
from watchdog.observers import Observer  # noqa: E402

from lanewatch.engine.process import EngineProcess  # noqa: E402
from lanewatch.model.views import NsState  # noqa: E402
from lanewatch.tui.app import LanewatchApp, make_app  # noqa: E402
from lanewatch.tui.state.dashboard_store import View  # noqa: E402
from lanewatch.tui.widgets.lane_table import LaneTable  # noqa: E402
from tests.bench.common import (  # noqa: E402
    SCREEN,
    emit,
    engine_threads,
    first_after,
    index_times,
    summary_ms,
    tail_seconds,
    thread_cpu,
    thread_shares,
)
from tests.bench.fig_latency import EVENTS  # noqa: E402
from tests.bench.workload import finish_writer, start_writer  # noqa: E402

T_IMPORTED = time.perf_counter()


def hook_frames(app: App[Any], frames: list[float], paints: list[float] | None = None) -> None:
    """Record `time.time()` at the end of every frame, after encoding it for a terminal; and
    in `paints`, how long each frame took, from the screen's update timer to that end."""
    original = app._display
    started: list[float] = []

    def display(screen: Any, renderable: Any) -> None:
        original(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            renderable.render_segments(app.console)
        frames.append(time.time())
        if paints is not None and started:
            paints.append(time.perf_counter() - started[-1])

    app._display = display  # type: ignore[method-assign]
    if paints is None:
        return
    on_timer = Screen._on_timer_update

    def timed_update(screen: Screen[Any]) -> None:
        started.append(time.perf_counter())
        on_timer(screen)

    Screen._on_timer_update = timed_update  # type: ignore[method-assign]


async def until(pilot: Pilot[Any], condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await pilot.pause(0.005)


def lanes_table(app: LanewatchApp) -> LaneTable:
    return app.main.table(View.LANES)


def lanes_rows(app: LanewatchApp) -> int:
    """Rows in the Lanes table; -1 until the main screen is composed."""
    try:
        return lanes_table(app).row_count
    except NoMatches:
        return -1


def on_screen(table: LaneTable) -> set[str]:
    top = table.scroll_offset.y
    page = max(1, table.scrollable_content_region.height - 1)
    return set(table.visible_keys[top : top + page])


# -- first screen ----------------------------------------------------------------------------
async def first_screen(root: str, expected: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    app = make_app([Path(root)])
    frames: list[float] = []
    shown: list[float] = []
    original = app._display

    def display(screen: Any, renderable: Any) -> None:
        original(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            renderable.render_segments(app.console)
        if not shown and lanes_rows(app) >= expected:
            shown.append(time.perf_counter())
        frames.append(time.perf_counter())

    app._display = display  # type: ignore[method-assign]
    # Where the time goes: the engine's first delivery (on its thread), the UI's first apply.
    marks: dict[str, float] = {}
    put = app.buffer.put

    def first_put(changes: Any) -> None:
        marks.setdefault("delivered", time.perf_counter())
        put(changes)

    app.buffer.put = first_put  # type: ignore[method-assign]
    async with app.run_test(size=SCREEN) as pilot:
        apply_delta = app.main.rows.apply

        def first_apply(delta: Any) -> None:
            apply_delta(delta)
            if lanes_rows(app) >= expected:
                marks.setdefault("applied", time.perf_counter())

        app.main.rows.apply = first_apply  # type: ignore[method-assign]
        await until(pilot, lambda: bool(shown), 120)
        table = lanes_table(app)
        states = {v.state for v in app.picture.namespaces.values()}
        rows = table.row_count
        first_frame = frames[0] - t0 if frames else None
    return {
        "screen_s": shown[0] - t0,
        "first_frame_s": first_frame,
        "engine_delivered_s": marks["delivered"] - t0 if "delivered" in marks else None,
        "ui_applied_s": marks["applied"] - t0 if "applied" in marks else None,
        "imports_s": T_IMPORTED - T_START,
        "rows": rows,
        "states": sorted(s.value for s in states),
        "all_live": states == {NsState.LIVE},
    }


def read_stamps(root: str) -> dict[str, Any]:
    """The floor: open, read and parse every stamp (warm: the median of five)."""
    paths = [
        os.path.join(root, name, ".lanewatch", "owner.json")
        for name in os.listdir(root)
        if not name.startswith(".")
    ]
    runs = []
    for _ in range(6):
        t0 = time.perf_counter()
        for p in paths:
            with open(p, "rb") as f:
                json.loads(f.read())
        runs.append(time.perf_counter() - t0)
    return {"stamps": len(paths), "floor_s": statistics.median(runs[1:])}


# -- write -> screen ------------------------------------------------------------------------
def namespace_of(root: str, path: str) -> str:
    rel = path[len(root) + 1 :]
    return f"{root}/{rel.split('/', 1)[0]}"


async def write_to_screen(root: str, plan: str, rate: float, seconds: float, work: str) -> Any:
    applied: list[tuple[float, list[str]]] = []
    engine = EngineProcess([root], on_applied=lambda t, paths: applied.append((t, paths)))
    app = make_app([Path(root)], engine=engine, long_lived=True)  # as `lanewatch dash` makes it
    frames: list[float] = []
    paints: list[float] = []
    hook_frames(app, frames, paints)
    # time, picture at, frame, rows on screen, rows on screen whose cells the drain changed
    drains: list[tuple[float, float, int, frozenset[str], frozenset[str]]] = []
    expected = len([n for n in os.listdir(root) if not n.startswith(".")])

    puts: list[tuple[float, float]] = []  # (time the UI's buffer got it, Changes.at)
    put = app.buffer.put

    def timed_put(changes: Any) -> None:
        puts.append((time.time(), changes.at))
        put(changes)

    app.buffer.put = timed_put  # type: ignore[method-assign]
    async with app.run_test(size=SCREEN) as pilot:
        await until(pilot, lambda: lanes_rows(app) >= expected, 120)
        await until(pilot, engine.settled.is_set, 120)
        main = app.main
        original = main.rows.apply

        def apply_delta(delta: Any) -> None:
            table = lanes_table(app)
            before = {key: table.get_row(key) for key in on_screen(table)}
            original(delta)
            at = app.picture.updated_at or 0.0
            shown = frozenset(on_screen(table))
            changed = frozenset(k for k in shown if table.get_row(k) != before.get(k))
            drains.append((time.time(), at, len(frames), shown, changed))

        main.rows.apply = apply_delta  # type: ignore[method-assign]
        await pilot.pause(0.2)
        child = engine.pid
        assert child is not None
        cpu0, threads0, wall0 = os.times(), thread_cpu(), time.monotonic()
        child0 = thread_cpu(child)
        log = Path(work) / f"writes-screen-{os.getpid()}.json"
        writer = start_writer(Path(plan), rate, seconds, log)
        try:
            while writer.poll() is None:
                await asyncio.sleep(0.05)
            await asyncio.sleep(tail_seconds(seconds))  # the tail reaches the screen
        finally:
            result = finish_writer(writer, log, timeout=seconds + 60)
        cpu1, child1 = os.times(), thread_cpu(child)
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        wall = time.monotonic() - wall0
        threads = thread_shares(threads0, thread_cpu(), names, wall)
        threads.update(engine_threads(engine, child0, child1, wall))
        page = len(on_screen(lanes_table(app)))
        stats = engine.stats  # asked of the engine process while it runs
    model = index_times(applied)
    drain_at = [d[1] for d in drains]
    put_at = [p[1] for p in puts]
    to_screen: list[float] = []
    to_table: list[float] = []
    # The same writes, stage by stage: write -> model -> handed to the UI -> in the table; and
    # for those whose row on screen changed, the table -> the end of the next frame.
    stages: dict[str, list[float]] = {
        "model": [],
        "handed_to_ui": [],
        "ui_drained": [],
        "to_frame": [],
    }
    lost = off = unframed = unchanged = 0
    for t_w, path in result["writes"]:
        t_m = first_after(model, path, t_w)
        if t_m is None:
            lost += 1
            continue
        i = bisect.bisect_left(drain_at, t_m)
        if i >= len(drains):
            lost += 1
            continue
        t_d, _, frame, shown, changed = drains[i]
        to_table.append(t_d - t_w)
        j = bisect.bisect_left(put_at, t_m)
        if j < len(puts):
            stages["model"].append(t_m - t_w)
            stages["handed_to_ui"].append(puts[j][0] - t_m)
            stages["ui_drained"].append(t_d - puts[j][0])
        ns = namespace_of(root, path)
        if ns not in shown:
            off += 1
            continue
        if ns not in changed:
            # Nothing its row shows changed ("35kB" stays "35kB"): no frame is owed, and the
            # screen shows the write's effect as soon as the table has it.
            unchanged += 1
            to_screen.append(t_d - t_w)
            continue
        if frame >= len(frames):
            unframed += 1
            continue
        to_screen.append(frames[frame] - t_w)
        stages["to_frame"].append(frames[frame] - t_d)
    ui_cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    engine_cpu = sum(child1.values()) - sum(child0.values())
    return {
        "screen": summary_ms(to_screen),
        "table": summary_ms(to_table),
        "stages": {k: summary_ms(v) for k, v in stages.items()},
        "writes": len(result["writes"]),
        "write_rate": round(result["rate"], 1),
        "writer_lag_ms": round(result["lag"] * 1000, 2),
        "off_screen": off,
        "not_reached": lost,
        "no_frame_after": unframed,
        "on_screen_row_unchanged": unchanged,
        "rows_on_screen": page,
        "drains": len(drains),
        "frames": len(frames),
        "paint": summary_ms(paints),  # each frame: the screen's update timer -> encoded
        "cpu_share": round((ui_cpu + engine_cpu) / wall, 3),
        "ui_cpu_share": round(ui_cpu / wall, 3),
        "engine_cpu_share": round(engine_cpu / wall, 3),
        "threads_pct": threads,
        "engine": stats,
    }


class FloorApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("waiting", id="last")


async def floor_write(root: str, plan: str, rate: float, seconds: float, work: str) -> Any:
    app = FloorApp()
    frames: list[float] = []
    paints: list[float] = []
    hook_frames(app, frames, paints)
    got: list[tuple[float, list[str], int]] = []  # time on the app's loop, paths, frames before
    pending: list[str] = []
    lock = threading.Lock()

    def on_events() -> None:
        with lock:
            paths = pending[:]
            pending.clear()
        app.query_one("#last", Static).update(f"{len(got)} {paths[-1]}")
        got.append((time.time(), paths, len(frames)))

    async with app.run_test(size=SCREEN) as pilot:
        loop = asyncio.get_running_loop()

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                with lock:
                    pending.append(os.fsdecode(event.src_path))
                    first = len(pending) == 1
                if first:  # one wake-up of the app per batch: the cheapest way to a frame
                    loop.call_soon_threadsafe(on_events)

        observer = Observer()
        observer.schedule(Handler(), root, recursive=True, event_filter=EVENTS)
        observer.start()
        await pilot.pause(0.5)
        log = Path(work) / f"writes-floor-screen-{os.getpid()}.json"
        writer = start_writer(Path(plan), rate, seconds, log)
        try:
            while writer.poll() is None:
                await asyncio.sleep(0.05)
            await asyncio.sleep(tail_seconds(seconds))
        finally:
            result = finish_writer(writer, log, timeout=seconds + 60)
            observer.stop()
            observer.join()
    got_at = [g[0] for g in got]
    seen = index_times((t, paths) for t, paths, _ in got)
    latencies: list[float] = []
    to_frame: list[float] = []  # the event on the app's loop -> the end of the next frame
    lost = 0
    for t_w, path in result["writes"]:
        t_e = first_after(seen, path, t_w)
        if t_e is None:
            lost += 1
            continue
        t_loop, _, frame = got[bisect.bisect_left(got_at, t_e)]
        if frame < len(frames):
            latencies.append(frames[frame] - t_w)
            to_frame.append(frames[frame] - t_loop)
        else:
            lost += 1
    return {
        "screen": summary_ms(latencies),
        "to_frame": summary_ms(to_frame),
        "paint": summary_ms(paints),
        "not_reached": lost,
        "writes": len(result["writes"]),
    }


def main(argv: list[str]) -> None:
    what = argv[0]
    if what == "first":
        emit(asyncio.run(first_screen(argv[1], int(argv[2]))))
    elif what == "stamps":
        emit(read_stamps(argv[1]))
    elif what in ("write", "floor-write"):
        root, plan, rate, seconds, work = argv[1], argv[2], float(argv[3]), float(argv[4]), argv[5]
        run = write_to_screen if what == "write" else floor_write
        emit(asyncio.run(run(root, plan, rate, seconds, work)))
    else:
        raise SystemExit(f"unknown measure {what!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
