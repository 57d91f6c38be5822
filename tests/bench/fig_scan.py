"""Figure `first_picture`: from `Engine.start` to the first delivered picture in which every
namespace has its state, file count and bytes; against a bare `os.scandir` recursion with an
`lstat` of every entry over the same root.

    python -m tests.bench.fig_scan warm|cold ROOT REPS

Warm: the floor and the engine alternate `REPS` times after one untimed run of each; medians.
Cold: before each timed run, `sync` and `echo 3 > /proc/sys/vm/drop_caches` (root only; the
answer says when it could not). Every module is loaded before any cache is dropped; the tree
is walked once more at the end, so what runs next does not start cold. `bench.py` runs the
cold measure last, after every other figure, for the same reason.
"""

from __future__ import annotations

import os
import stat
import statistics
import sys
import threading
import time
from typing import Any

from lanewatch.engine.engine import Engine
from lanewatch.model.views import Changes
from tests.bench.common import emit

DROP_CACHES = "/proc/sys/vm/drop_caches"


def floor_walk(top: str) -> tuple[int, int]:
    """Bare scandir recursion, `lstat` of every entry: (files, bytes)."""
    files = size = 0
    stack = [top]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                else:
                    files += 1
                    size += st.st_size
    return files, size


def namespaces(root: str) -> int:
    with os.scandir(root) as it:
        return sum(1 for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))


def engine_picture(root: str, expected: int) -> dict[str, Any]:
    """Seconds from start to the delivery that completes states, then counts."""
    counted: set[str] = set()
    files = 0
    done = threading.Event()
    marks: dict[str, float] = {}
    totals: dict[str, int] = {}

    def on_changes(changes: Changes) -> None:
        now = time.perf_counter()
        if changes.full and "states" not in marks:
            marks["states"] = now
        for key, view in changes.upserts.items():
            if view.files is not None:
                counted.add(key)
                totals[key] = view.files
        if len(counted) >= expected and not done.is_set():
            marks["counts"] = now
            done.set()

    engine = Engine([root])
    t0 = time.perf_counter()
    engine.start(on_changes)
    try:
        if not done.wait(300):
            raise TimeoutError(f"only {len(counted)} of {expected} namespaces counted")
    finally:
        engine.stop()
    files = sum(totals.values())
    return {
        "states": marks["states"] - t0,
        "counts": marks["counts"] - t0,
        "files": files,
    }


def drop_caches() -> str | None:
    """Drop the page, dentry and inode caches; why not, if we cannot."""
    try:
        os.sync()
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as exc:
        return f"cannot drop caches ({exc.strerror}): cold figures skipped"
    return None


def timed_floor(root: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    files, _ = floor_walk(root)
    return time.perf_counter() - t0, files


def warm(root: str, reps: int) -> dict[str, Any]:
    expected = namespaces(root)
    floor_walk(root)  # warm the caches and the code
    engine_picture(root, expected)
    floors: list[float] = []
    states: list[float] = []
    counts: list[float] = []
    floor_files = engine_files = 0
    for _ in range(reps):
        took, floor_files = timed_floor(root)
        floors.append(took)
        run = engine_picture(root, expected)
        states.append(run["states"])
        counts.append(run["counts"])
        engine_files = run["files"]
    return {
        "namespaces": expected,
        "floor_files": floor_files,
        "engine_files": engine_files,
        "floor_s": [round(x, 4) for x in floors],
        "states_s": [round(x, 4) for x in states],
        "counts_s": [round(x, 4) for x in counts],
        "floor": statistics.median(floors),
        "states": statistics.median(states),
        "counts": statistics.median(counts),
    }


def cold(root: str, reps: int) -> dict[str, Any]:
    expected = namespaces(root)
    engine_picture(root, expected)  # every module the engine needs is loaded
    floors: list[float] = []
    states: list[float] = []
    counts: list[float] = []
    for _ in range(reps):
        why = drop_caches()
        if why:
            return {"note": why}
        floors.append(timed_floor(root)[0])
        drop_caches()
        run = engine_picture(root, expected)
        counts.append(run["counts"])
        states.append(run["states"])
    floor_walk(root)  # leave the tree warm for whatever runs next
    return {
        "floor_s": [round(x, 4) for x in floors],
        "counts_s": [round(x, 4) for x in counts],
        "states_s": [round(x, 4) for x in states],
        "floor": statistics.median(floors),
        "counts": statistics.median(counts),
        "states": statistics.median(states),
    }


def main(argv: list[str]) -> None:
    what, root, reps = argv[0], argv[1], int(argv[2])
    emit(warm(root, reps) if what == "warm" else cold(root, reps))


if __name__ == "__main__":
    main(sys.argv[1:])
