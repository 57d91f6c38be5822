"""Idle CPU and memory, each in a process of its own.

    python -m tests.bench.fig_idle app ROOT EXPECTED SECONDS SETTLE
    python -m tests.bench.fig_idle engine ROOT SECONDS [--no-attribution]
    python -m tests.bench.fig_idle bare

- `app`: the dashboard (`make_app`, headless `run_test` at 160x50, frames encoded for a
  terminal) on ROOT, once every lane is listed and the engine has settled (sizes counted, one
  probe in): its resident memory (RSS, the UI's and its engine process's added), then their
  CPU time over SECONDS with nothing changing on disk, as a share of one core (every thread
  of both processes), then RSS again.
- `engine`: the same CPU measure for an `Engine` alone, without the UI; `--no-attribution`
  turns kernel write attribution (fanotify) off, to tell its share apart: a filesystem mark
  sees every write to the filesystem, the other users' of the machine included.
- `bare`: the floor of RSS: a bare Textual app showing one `Static`, after its first frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from textual._compositor import CompositorUpdate
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static

from lanewatch.engine.engine import Engine
from lanewatch.engine.process import EngineProcess
from lanewatch.linux import heap
from lanewatch.tui.app import LanewatchApp, make_app
from tests.bench.common import (
    SCREEN,
    cpu_seconds,
    emit,
    engine_threads,
    thread_cpu,
    thread_shares,
)
from tests.bench.fig_screen import lanes_rows, lanes_table, on_screen


def kernel_rates(before: dict[str, int], after: dict[str, int], wall: float) -> dict[str, Any]:
    """Per second over the idle window, from the engine's `kernel_*` counters (`Engine.stats`:
    records read from fanotify, those dropped at once included; events handed to attribution;
    folders ignored in the kernel): the load kernel attribution had to carry (other users'
    writes on the marked filesystems), to compare CPU shares between runs."""
    return {
        f"{k}_per_s": round((v - before.get(k, 0)) / wall, 1)
        for k, v in after.items()
        if k.startswith("kernel_")
    }


def in_window(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What the engine did during the idle window: probes (full ones apart) and their time in
    ms, batches applied. A full `/proc` scan runs every 60 s by the clock, so a 20 s window
    holds one or not: this tells the runs apart."""
    keys = ("probes", "full_probes", "probe_ms", "batches", "items")
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


def thread_names() -> dict[int, str]:
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def rss_mb(pid: int | None = None) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def encode_frames(app: App[Any]) -> list[int]:
    """Frames are encoded as for a terminal; the list returned counts them (its one item)."""
    original = app._display
    frames = [0]

    def display(screen: Any, renderable: Any) -> None:
        original(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            frames[0] += 1
            renderable.render_segments(app.console)

    app._display = display  # type: ignore[method-assign]
    return frames


SECONDS_AGE = re.compile(r"^\d+s$")


def counting_seconds(app: LanewatchApp) -> int:
    """Rows on screen one of whose ages (BEAT, WRITE, AGE) reads seconds now: each of them is
    repainted once a second for as long as it does (a lane younger than a minute). The UI's
    share of the idle figure depends on it: lanes a minute old repaint once a minute."""
    table = lanes_table(app)
    index = table.order.column_index
    ages = [index[key] for key in ("beat", "write", "age")]
    count = 0
    for key in on_screen(table):
        row = table.get_row(key) or ()
        texts = [str(row[i]) for i in ages if i < len(row)]
        count += any(SECONDS_AGE.match(t.strip()) for t in texts)
    return count


async def until(pilot: Pilot[Any], condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await pilot.pause(0.01)


async def app_idle(root: str, expected: int, seconds: float, settle: float) -> dict[str, Any]:
    """The dashboard as `lanewatch dash` runs it: the UI here, its engine in a child process.
    CPU and memory are both processes' together."""
    engine = EngineProcess([root])
    app = make_app([Path(root)], engine=engine, long_lived=True)
    frames = encode_frames(app)
    async with app.run_test(size=SCREEN) as pilot:
        await until(pilot, lambda: lanes_rows(app) >= expected, 120)
        await until(pilot, engine.settled.is_set, 300)
        await asyncio.sleep(1.0)  # the first probe's report and ages settle
        # Quiet means nothing on screen changes: a lane younger than a minute repaints its age
        # every second (the workload's lanes are 20 to 80 s old here, by how long the steps
        # before took). The window opens once every age on screen reads minutes, `settle`
        # seconds at most (docs/performance.md, "Idle: the steady state").
        waited = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await until(pilot, lambda: counting_seconds(app) == 0, settle)
        waited = round(time.monotonic() - waited, 1)
        seconds_rows = counting_seconds(app)
        frames0 = frames[0]
        child = engine.pid
        assert child is not None
        rss_settled, child_rss = rss_mb(), rss_mb(child)
        k0 = engine.stats
        cpu0, t0, threads0 = cpu_seconds(), time.monotonic(), thread_cpu()
        child0 = thread_cpu(child)
        await asyncio.sleep(seconds)
        cpu, wall = cpu_seconds() - cpu0, time.monotonic() - t0
        child1 = thread_cpu(child)
        cpu += sum(child1.values()) - sum(child0.values())
        threads = thread_shares(threads0, thread_cpu(), thread_names(), wall)
        threads.update(engine_threads(engine, child0, child1, wall))
        rss_after = rss_mb() + rss_mb(child)
        stats = engine.stats
        stats.update(kernel_rates(k0, stats, wall))
        painted = frames[0] - frames0
    return {
        "cpu_share": cpu / wall,
        "seconds": round(wall, 2),
        "in_window": in_window(k0, stats),
        "ui": {"rows_counting_seconds": seconds_rows, "frames": painted, "waited_s": waited},
        "rss_mb": round(rss_settled + child_rss, 1),
        "rss_ui_mb": rss_settled,
        "rss_engine_mb": child_rss,
        "rss_after_idle_mb": round(rss_after, 1),
        "peak_rss_mb": peak_mb(),
        "threads_pct": threads,
        "engine": stats,
    }


def engine_idle(root: str, seconds: float, attribution: bool | None = None) -> dict[str, Any]:
    engine = Engine([root], attribution=attribution)
    engine.start(lambda changes: None)
    try:
        if not engine.settled.wait(300):
            raise TimeoutError("the engine did not settle")
        heap.freeze()  # as `record` does once its engine settles (linux/heap.py)
        time.sleep(1.0)
        k0 = engine.stats
        cpu0, t0, threads0 = cpu_seconds(), time.monotonic(), thread_cpu()
        time.sleep(seconds)
        cpu, wall = cpu_seconds() - cpu0, time.monotonic() - t0
        threads = thread_shares(threads0, thread_cpu(), thread_names(), wall)
        rss = rss_mb()
        stats = engine.stats
        stats.update(kernel_rates(k0, stats, wall))
    finally:
        engine.stop()
    return {
        "cpu_share": cpu / wall,
        "seconds": round(wall, 2),
        "in_window": in_window(k0, stats),
        "rss_mb": rss,
        "threads_pct": threads,
        "engine": stats,
    }


class Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("lanewatch")


async def bare() -> dict[str, Any]:
    app = Bare()
    encode_frames(app)
    async with app.run_test(size=SCREEN) as pilot:
        await pilot.pause(0.5)
        return {"rss_mb": rss_mb(), "peak_rss_mb": peak_mb()}


def main(argv: list[str]) -> None:
    what = argv[0]
    if what == "app":
        emit(asyncio.run(app_idle(argv[1], int(argv[2]), float(argv[3]), float(argv[4]))))
    elif what == "engine":
        off = "--no-attribution" in argv[3:]
        emit(engine_idle(argv[1], float(argv[2]), attribution=False if off else None))
    elif what == "bare":
        emit(asyncio.run(bare()))
    else:
        raise SystemExit(f"unknown measure {what!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
