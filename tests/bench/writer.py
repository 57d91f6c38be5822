"""The benchmark's write load, in a process of its own.

    python -m tests.bench.writer PLAN.json RATE SECONDS LOG.json
    python -m tests.bench.writer --burst PLAN.json EVENTS_PER_S SECONDS LOG.json

Rewrites the data files of the plan's lanes, `RATE` files a second in all, lanes in turn and
each lane's files in turn, for `SECONDS`. A write is open + truncate + write + close of a few
hundred bytes, its size different from the last one, so every write changes what the model
holds. The log records, for every write, `time.time()` just before the open: the latency
figures are measured from that instant.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import META_DIR, OwnerState, read_stamp, write_stamp
from tests.bench.common import CHECKOUT_ID, dump_json, load_json


def run(data: dict[str, list[str]], rate: float, seconds: float) -> dict[str, object]:
    lanes = [files for files in data.values() if files]
    total = int(rate * seconds)
    writes: list[tuple[float, str]] = []
    lag = 0.0
    start = time.time() + 0.05
    for i in range(total):
        due = start + i / rate
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        else:
            lag = max(lag, -delay)
        files = lanes[i % len(lanes)]
        path = files[(i // len(lanes)) % len(files)]
        t = time.time()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"w" * (16 + i % 997))
        finally:
            os.close(fd)
        writes.append((t, path))
    took = time.time() - start
    t = os.times()
    return {
        "writes": writes,
        "took": took,
        "rate": total / took if took > 0 else 0.0,
        "lag": lag,
        "cpu_us_per_write": round((t.user + t.system) / max(1, total) * 1e6, 1),
    }


EVENTS_PER_FILE = 3  # IN_CREATE, IN_MODIFY, IN_CLOSE_WRITE
FILES_PER_FOLDER = 50
CHANGES_PER_S = 20  # state changes during a burst: release, new namespace, removal, in turn


def burst(keys: list[str], rate: float, seconds: float) -> dict[str, object]:
    """New files in new subfolders of every namespace at `rate` inotify events a second, and
    `CHANGES_PER_S` state changes: a live lane released (its stamp rewritten), a new namespace
    with a live stamp, a namespace removed. Ends with nothing more to happen on disk."""
    files_per_s = rate / EVENTS_PER_FILE
    total = int(files_per_s * seconds)
    every = max(1, int(files_per_s / CHANGES_PER_S))
    alive = list(keys)
    half = len(alive) // 2
    to_release, to_remove = alive[:half], alive[half:]
    template = read_stamp(Path(keys[0])).stamp
    assert template is not None, "the burst needs a live stamp to copy"
    folders: dict[str, tuple[str, int]] = {}
    changes: list[tuple[float, str, str]] = []
    lag = 0.0
    made = 0
    start = time.time() + 0.05
    for i in range(total):
        due = start + i / files_per_s
        delay = due - time.time()
        if delay > 0.0005:
            time.sleep(delay)
        elif delay < 0:
            lag = max(lag, -delay)
        if i % every == 0:
            kind = (i // every) % 3
            if kind == 0 and to_release:
                key = to_release.pop()
                stamp = read_stamp(Path(key)).stamp
                if stamp is not None:
                    now = time.time()
                    write_stamp(
                        Path(key),
                        stamp.with_changes(state=OwnerState.RELEASED, released_at=now, exit_code=0),
                    )
                    changes.append((time.time(), "released", key))
            elif kind == 1:
                made += 1
                lane = f"burst-{made:04d}"
                ns = Path(keys[0]).parent / namespace_name(CHECKOUT_ID, lane)
                (ns / META_DIR).mkdir(parents=True)
                (ns / "tmp").mkdir()
                now = time.time()
                write_stamp(
                    ns,
                    template.with_changes(
                        lane=lane, namespace=ns.name, started_at=now, heartbeat_at=now
                    ),
                )
                alive.append(str(ns))
                changes.append((time.time(), "created", str(ns)))
            elif kind == 2 and to_remove:
                key = to_remove.pop()
                alive.remove(key)
                shutil.rmtree(key)
                changes.append((time.time(), "removed", key))
        key = alive[i % len(alive)]
        folder, count = folders.get(key, ("", FILES_PER_FOLDER))
        if count >= FILES_PER_FOLDER:
            folder = os.path.join(key, "tmp", f"b{i}")
            os.mkdir(folder)
            count = 0
        folders[key] = (folder, count + 1)
        fd = os.open(os.path.join(folder, f"f{count}"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"b" * (1 + i % 300))
        finally:
            os.close(fd)
    end = time.time()
    return {
        "files": total,
        "took": end - start,
        "end": end,
        "rate": total * EVENTS_PER_FILE / (end - start),
        "lag": lag,
        "changes": changes,
    }


def main(argv: list[str]) -> None:
    if argv[0] == "--burst":
        plan = load_json(argv[1])
        result = burst(plan["keys"], float(argv[2]), float(argv[3]))
        dump_json(argv[4], result)
        return
    plan = load_json(argv[0])
    result = run(plan["data"], float(argv[1]), float(argv[2]))
    dump_json(argv[3], result)


if __name__ == "__main__":
    main(sys.argv[1:])
