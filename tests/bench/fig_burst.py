"""Figure `burst`: a burst of filesystem events with state changes in it; how long after its end
the engine's picture matches the disk, and whether it ever does.

    python -m tests.bench.fig_burst ROOT PLAN EVENTS_PER_S SECONDS WORKDIR

An `Engine` on ROOT (settled) receives `writer.py --burst`: new files in new subfolders of every
namespace, about EVENTS_PER_S inotify events a second (three per new file), with 20 state
changes a second among them (a live lane released, a new namespace with a live stamp, a
namespace removed). After the writer is done, the truth is read from disk: every namespace,
its stamp's state, its file count and bytes (every non-folder entry, as the engine counts).
The picture the engine delivered (merged `Changes`, what the UI would hold) is compared with
it every 10 ms; `catch_up` is the time from the burst's last write to the first match. No
match within 30 s means something was lost: the differences are reported.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lanewatch.model.views import Changes, NsState, merge_changes
from lanewatch.scheme.stamp import OwnerState, read_stamp
from lanewatch.sources.engine import Engine
from tests.bench.common import cpu_seconds, emit, load_json, module_cmd, stop_process

SETTLE = 30.0


def truth(root: str) -> dict[str, tuple[str, int, int]]:
    """namespace key -> (expected state, files, bytes), from the disk."""
    out: dict[str, tuple[str, int, int]] = {}
    for entry in os.scandir(root):
        if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
            continue
        read = read_stamp(Path(entry.path))
        s = read.stamp
        if s is None:
            state = NsState.ORPHAN.value
        elif s.state is OwnerState.RELEASED:
            state = NsState.RELEASED.value
        else:
            state = NsState.LIVE.value  # the stamps name the owner process, alive throughout
        files = size = 0
        stack = [entry.path]
        while stack:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(e.path)
                    else:
                        files += 1
                        size += st.st_size
        out[entry.path] = (state, files, size)
    return out


class Picture:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changes: Changes | None = None

    def __call__(self, changes: Changes) -> None:
        with self.lock:
            base = self.changes
            self.changes = changes if base is None else merge_changes(base, changes)

    def now(self) -> dict[str, tuple[str, int | None, int | None]]:
        with self.lock:
            c = self.changes
        if c is None:
            return {}
        return {k: (v.state.value, v.files, v.bytes) for k, v in c.upserts.items()}


def differences(want: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = {k: {"want": want[k], "got": got[k]} for k in want if k in got and want[k] != got[k]}
    return {
        "missing": len(missing),
        "extra": len(extra),
        "wrong": len(wrong),
        "wrong_states": sum(1 for v in wrong.values() if v["want"][0] != v["got"][0]),
        "examples": {
            "missing": missing[:3],
            "extra": extra[:3],
            "wrong": dict(list(wrong.items())[:3]),
        },
    }


def main(argv: list[str]) -> None:
    root, plan, rate, seconds, work = argv[0], argv[1], float(argv[2]), float(argv[3]), argv[4]
    picture = Picture()
    engine = Engine([root])
    engine.start(picture)
    log = Path(work) / f"burst-{os.getpid()}.json"
    try:
        if not engine.settled.wait(300):
            raise TimeoutError("the engine did not settle")
        time.sleep(0.3)
        before = engine.stats
        cpu0, wall0 = cpu_seconds(), time.monotonic()
        writer = subprocess.Popen(
            module_cmd("writer", "--burst", plan, str(rate), str(seconds), str(log))
        )
        try:
            writer.wait(timeout=seconds + 120)
        finally:
            stop_process(writer)
        if writer.returncode != 0:
            raise RuntimeError(f"the burst writer exited with {writer.returncode}")
        result = load_json(log)
        during = engine.stats
        want = truth(root)
        end = result["end"]
        matched_at = None
        deadline = time.time() + SETTLE
        while time.time() < deadline:
            if picture.now() == want:
                matched_at = time.time()
                break
            time.sleep(0.01)
        cpu, wall = cpu_seconds() - cpu0, time.monotonic() - wall0
        after = engine.stats
        diff = None if matched_at is not None else differences(want, picture.now())
    finally:
        engine.stop()
    took = result["took"]
    events = during["items"] - before["items"]
    kinds: dict[str, int] = {}
    for _, kind, _ in result["changes"]:
        kinds[kind] = kinds.get(kind, 0) + 1
    emit(
        {
            "catch_up_s": None if matched_at is None else max(0.0, matched_at - end),
            "matched": matched_at is not None,
            "differences": diff,
            "namespaces": len(want),
            "files_written": result["files"],
            "state_changes": kinds,
            "writer_events_per_s": round(result["rate"], 1),
            "writer_lag_ms": round(result["lag"] * 1000, 1),
            "engine_events_per_s": round(events / took, 1),
            "seconds": round(took, 2),
            "cpu_share": round(cpu / wall, 3),
            "engine": {k: after[k] - before.get(k, 0) for k in after},
        }
    )


if __name__ == "__main__":
    main(sys.argv[1:])
