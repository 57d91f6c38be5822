"""Write → model latency, against a bare watchdog observer's write → handler latency.

    python -m tests.bench.fig_latency model ROOT PLAN RATE SECONDS WORKDIR
    python -m tests.bench.fig_latency floor ROOT PLAN RATE SECONDS WORKDIR

`model`: an `Engine` on ROOT, settled (first picture, sizes, one probe), then the write load
of `writer.py`; a write's latency runs from the writer's clock before its `open` to the
engine's `on_applied` call that has its path in the model (both `time.time()`, one machine).
`floor`: the same load and measure with a bare `watchdog` inotify observer (recursive, the
same kinds of events as the engine asks for) whose handler only notes the time and path.

A write that never shows is counted in `not_reached`, never dropped from the figure quietly.
The process's own CPU time over the load is reported as a share of one core.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from watchdog.events import (
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from lanewatch.engine.engine import Engine
from lanewatch.files.tail import FILTER
from lanewatch.linux import heap
from tests.bench.common import (
    cpu_seconds,
    emit,
    first_after,
    index_times,
    summary_ms,
    tail_seconds,
    thread_cpu,
    thread_shares,
)
from tests.bench.workload import finish_writer, start_writer

# What lanewatch's tail asks the kernel for, so the floor's observer pays the same.
EVENTS: list[type[FileSystemEvent]] = FILTER


def correlate(
    writes: list[tuple[float, str]], records: list[tuple[float, list[str]]]
) -> tuple[list[float], int]:
    seen = index_times(records)
    latencies: list[float] = []
    lost = 0
    for t_w, path in writes:
        t = first_after(seen, path, t_w)
        if t is None:
            lost += 1
        else:
            latencies.append(t - t_w)
    return latencies, lost


def load(plan: str, rate: float, seconds: float, work: str, tag: str) -> dict[str, Any]:
    log = Path(work) / f"writes-{tag}-{os.getpid()}.json"
    cpu0, threads0 = cpu_seconds(), thread_cpu()
    t0 = time.monotonic()
    writer = start_writer(Path(plan), rate, seconds, log)
    result = finish_writer(writer, log, timeout=seconds + 60)
    time.sleep(tail_seconds(seconds))  # the tail of the load
    wall = time.monotonic() - t0
    result["cpu_share"] = round((cpu_seconds() - cpu0) / wall, 3)
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    result["threads_pct"] = thread_shares(threads0, thread_cpu(), names, wall)
    return result


def measure_model(root: str, plan: str, rate: float, seconds: float, work: str) -> Any:
    records: list[tuple[float, list[str]]] = []
    engine = Engine([root], on_applied=lambda t, paths: records.append((t, paths)))
    engine.start(lambda changes: None)
    try:
        if not engine.settled.wait(300):
            raise TimeoutError("the engine did not settle")
        heap.freeze()  # as `record` does once its engine settles (linux/heap.py)
        time.sleep(0.3)
        before = engine.stats
        result = load(plan, rate, seconds, work, "model")
        after = engine.stats
    finally:
        engine.stop()
    latencies, lost = correlate(result["writes"], records)
    return {
        "latency": summary_ms(latencies),
        "not_reached": lost,
        "writes": len(result["writes"]),
        "write_rate": round(result["rate"], 1),
        "writer_lag_ms": round(result["lag"] * 1000, 2),
        "writer_cpu_us_per_write": result["cpu_us_per_write"],
        "cpu_share": result["cpu_share"],
        "threads_pct": result["threads_pct"],
        "engine": {k: after[k] - before.get(k, 0) for k in after},
    }


def measure_floor(root: str, plan: str, rate: float, seconds: float, work: str) -> Any:
    records: list[tuple[float, list[str]]] = []
    ready = threading.Event()
    marker = os.path.join(root, ".bench-ready")

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            path = os.fsdecode(event.src_path)
            records.append((time.time(), [path]))
            if path == marker:
                ready.set()

    observer = Observer()
    observer.schedule(Handler(), root, recursive=True, event_filter=EVENTS)
    observer.start()
    try:
        Path(marker).write_bytes(b"")
        if not ready.wait(60):
            raise TimeoutError("the observer never saw its marker")
        os.unlink(marker)
        time.sleep(0.3)
        result = load(plan, rate, seconds, work, "floor")
    finally:
        observer.stop()
        observer.join()
    latencies, lost = correlate(result["writes"], records)
    return {
        "latency": summary_ms(latencies),
        "not_reached": lost,
        "writes": len(result["writes"]),
        "write_rate": round(result["rate"], 1),
        "writer_lag_ms": round(result["lag"] * 1000, 2),
        "writer_cpu_us_per_write": result["cpu_us_per_write"],
        "cpu_share": result["cpu_share"],
    }


def main(argv: list[str]) -> None:
    what, root, plan, rate, seconds, work = argv[:6]
    run = measure_model if what == "model" else measure_floor
    emit(run(root, plan, float(rate), float(seconds), work))


if __name__ == "__main__":
    main(sys.argv[1:])
