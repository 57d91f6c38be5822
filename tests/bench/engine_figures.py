"""Engine figures against their floors, measured in one run (not part of the test suite).

    python tests/bench/engine_figures.py [--namespaces 1000] [--files 100] [--json]

Builds its workload under a fresh temporary folder (removed at the end) and prints:
- first picture (states, counts, bytes) vs a bare scandir + stat walk of the same tree;
- states only (phase 1) vs reading every stamp;
- engine start to settled (watches up, sizes counted, one probe) — the inotify setup included;
- write -> model latency while 200 lanes write 1,000 files/s in all (p50/p99/max), also with
  every namespace heartbeating at the default interval;
- the engine's CPU while nothing changes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path

from lanewatch.engine.engine import Engine
from lanewatch.engine.worker import Worker
from lanewatch.files.walk import floor_walk
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import (
    META_DIR,
    OwnerState,
    Stamp,
    read_stamp,
    touch_heartbeat,
    write_stamp,
)
from lanewatch.linux.procid import ProcessIdentity, boot_id, hostname

CHECKOUT = "bench-0123456789ab"


def build(root: Path, namespaces: int, files: int) -> list[Path]:
    me = ProcessIdentity.current()
    now = time.time()
    out = []
    for i in range(namespaces):
        ns = root / namespace_name(CHECKOUT, f"lane{i}")
        (ns / META_DIR).mkdir(parents=True)
        (ns / "tmp").mkdir()
        (ns / "scratch").mkdir()
        stamp = Stamp(
            lane=f"lane{i}", namespace=ns.name, checkout_id=CHECKOUT, checkout_path="/x",
            host=hostname(), boot_id=boot_id(), pid=me.pid, start_ticks=me.start_ticks,
            user="bench", uid=os.getuid(), command=["bench"], started_at=now, heartbeat_at=now,
            heartbeat_interval=3600.0, state=OwnerState.LIVE, root=str(root),
        )  # fmt: skip
        write_stamp(ns, stamp)
        for j in range(files - 1):
            (ns / ("tmp" if j % 2 else "scratch") / f"f{j}").write_bytes(b"x" * (j % 512))
        out.append(ns)
    return out


def timed(fn, runs: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def heartbeats(nss: list[Path], per_second: float, stop: threading.Event) -> None:
    """Touch stamps round-robin, as `lanewatch run` owners do (one utime per heartbeat)."""
    n = 0
    start = time.monotonic()
    while not stop.is_set():
        touch_heartbeat(nss[n % len(nss)])
        n += 1
        delay = start + n / per_second - time.monotonic()
        if delay > 0:
            stop.wait(delay)


def latency(
    root: Path, nss: list[Path], lanes: int, rate: float, seconds: float, beats: float = 0.0
) -> dict:
    seen: dict[str, float] = {}
    lock = threading.Lock()

    def applied(_t: float, paths: object) -> None:
        now = time.monotonic()
        with lock:
            for p in paths:  # type: ignore[attr-defined]
                seen.setdefault(p, now)

    engine = Engine([str(root)], on_applied=applied)
    engine.start(lambda c: None)
    engine.settled.wait(120)
    stop = threading.Event()
    beating = threading.Thread(target=heartbeats, args=(nss, beats, stop), daemon=True)
    if beats:
        beating.start()
    written: dict[str, float] = {}
    interval = 1.0 / rate
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        ns = nss[n % lanes]
        path = f"{ns}/tmp/w{n}"
        t = time.monotonic()
        with open(path, "wb") as f:
            f.write(b"w")
        written[path] = t
        n += 1
        delay = start + n * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    stop.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(seen.keys() & written.keys()) < len(written):
        time.sleep(0.01)
    c0, t0 = cpu(), time.monotonic()
    time.sleep(5)
    idle = (cpu() - c0) / (time.monotonic() - t0)
    engine.stop()
    lat = sorted((seen[p] - t) * 1000 for p, t in written.items() if p in seen)
    return {
        "writes": len(written),
        "seen": len(lat),
        "p50_ms": round(lat[len(lat) // 2], 2),
        "p99_ms": round(lat[int(len(lat) * 0.99) - 1], 2),
        "max_ms": round(lat[-1], 2),
        "idle_cpu_percent_after": round(idle * 100, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namespaces", type=int, default=1000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    top = Path(tempfile.mkdtemp(prefix="lanewatch-bench-"))
    os.environ["LANEWATCH_STATE_DIR"] = str(top / "state")
    try:
        root = top / "root"
        nss = build(root, args.namespaces, args.files)
        floor_walk(str(root))  # warm the cache
        floor = timed(lambda: floor_walk(str(root)))
        ours = timed(lambda: Worker([str(root)]).one_shot(probe=False))
        stamps = timed(lambda: [read_stamp(ns) for ns in nss])

        def phase1() -> None:
            w = Worker([str(root)])
            w.list_root(str(root))
            w.keeper.flush(full=True)

        states = timed(phase1)

        def settle() -> None:
            e = Engine([str(root)], probe_interval=3600)
            e.start(lambda c: None)
            e.settled.wait(120)
            e.stop()

        started = timed(settle, runs=2)
        figures = {
            "first_picture_s": round(ours, 3),
            "scandir_floor_s": round(floor, 3),
            "first_picture_ratio": round(ours / floor, 2),
            "states_s": round(states, 3),
            "read_stamps_floor_s": round(stamps, 3),
            "engine_start_to_settled_s": round(started, 3),
            "write_to_model": latency(root, nss, min(200, len(nss)), 1000.0, 5.0),
            # every namespace heartbeating at the default 5 s interval, plus the same writes
            "write_to_model_with_heartbeats": latency(
                root, nss, min(200, len(nss)), 1000.0, 5.0, beats=len(nss) / 5.0
            ),
        }
        print(json.dumps(figures, indent=None if args.json else 2))
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
