"""Figure `burst`: a burst of filesystem events with state changes in it; how long after its end
the engine's picture matches the disk, and whether it ever does.

    python -m tests.bench.fig_burst ROOT PLAN EVENTS_PER_S SECONDS WORKDIR
    python -m tests.bench.fig_burst truth ROOT

An `Engine` on ROOT (settled) receives `writer.py --burst`: new files in new subfolders of every
namespace, about EVENTS_PER_S inotify events a second (three per new file), with 20 state
changes a second among them (a live lane released, a new namespace with a live stamp, a
namespace removed). After the writer is done, the truth is read from disk: every namespace,
its stamp's state, its file count and bytes (every non-folder entry, as the engine counts).
The picture the engine delivered (merged `Changes`, what the UI would hold) is kept as it was
after each delivery, with the delivery's time; `catch_up` is the time from the burst's last
write to the first delivery after which the picture matched. The truth is read by a child
process (`truth ROOT`), so the bench's own walk of ~50,000 files neither holds this process's
interpreter lock while the engine drains its backlog nor counts as the engine's time (it used
to: the catch-up included that walk, 0.2-0.5 s). No match within 30 s means something was
lost: the differences are reported.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lanewatch.engine.engine import Engine
from lanewatch.lanes.stamp import OwnerState, read_stamp
from lanewatch.linux import heap
from lanewatch.model.views import Changes, NsState, merge_changes
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


Summary = dict[str, tuple[str, int | None, int | None]]


class Picture:
    """The engine's deliveries merged, as the UI would hold them; once `record` is on, what
    the picture summed up to after each delivery, with its time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changes: Changes | None = None
        self.history: list[tuple[float, Summary]] | None = None

    def __call__(self, changes: Changes) -> None:
        with self.lock:
            base = self.changes
            self.changes = changes if base is None else merge_changes(base, changes)
            if self.history is not None:
                self.history.append((time.time(), summary(self.changes)))

    def record(self) -> None:
        with self.lock:
            self.history = []

    def health(self) -> tuple[Any, ...]:
        with self.lock:
            return self.changes.health if self.changes is not None else ()

    def now(self) -> Summary:
        with self.lock:
            c = self.changes
        return {} if c is None else summary(c)

    def matched_at(self, want: Summary, after: float) -> float | None:
        """The time of the first delivery after `after` that left the picture equal to `want`
        (before `after`: the time the last delivery before it was made, if that matched)."""
        with self.lock:
            history = list(self.history or ())
        before = [t for t, got in history if t <= after]
        for t, got in history:
            if t > after and got == want:
                return t
        if history and before and history[len(before) - 1][1] == want:
            return after
        return None


def vars_of(h: Any) -> dict[str, Any]:
    return {"root": h.root, "status": h.status, "detail": h.detail}


def summary(changes: Changes) -> Summary:
    return {k: (v.state.value, v.files, v.bytes) for k, v in changes.upserts.items()}


def truth_of(root: str) -> Summary:
    """`truth(root)`, read by a child process (see the module's docstring)."""
    out = subprocess.run(
        module_cmd("fig_burst", "truth", root), capture_output=True, text=True, check=True
    )
    return {k: (v[0], v[1], v[2]) for k, v in json.loads(out.stdout).items()}


KEEP_DIFFERENCES = 500  # namespaces whose differences a miss keeps, in full


def differences(want: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """Every way the picture differs from the disk (bounded), kept with the figure: a miss
    must be explainable after the run, when the work folder is gone."""
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
        "all": {
            "missing": {k: want[k] for k in missing[:KEEP_DIFFERENCES]},
            "extra": {k: got[k] for k in extra[:KEEP_DIFFERENCES]},
            "wrong": dict(list(wrong.items())[:KEEP_DIFFERENCES]),
        },
    }


def describe(diff: dict[str, Any]) -> str:
    """One line for the figure's note: the counts and one example."""
    parts = [f"{diff['wrong']} wrong ({diff['wrong_states']} in state)"]
    parts += [f"{diff['missing']} missing", f"{diff['extra']} extra"]
    ex = diff["examples"]
    if ex["wrong"]:
        key, v = next(iter(ex["wrong"].items()))
        parts.append(f"e.g. {key}: want {v['want']}, got {v['got']}")
    elif ex["missing"] or ex["extra"]:
        parts.append(f"e.g. {(ex['missing'] or ex['extra'])[0]}")
    return ", ".join(parts)


def main(argv: list[str]) -> None:
    if argv[0] == "truth":
        print(json.dumps(truth(argv[1])))
        return
    root, plan, rate, seconds, work = argv[0], argv[1], float(argv[2]), float(argv[3]), argv[4]
    picture = Picture()
    engine = Engine([root])
    engine.start(picture)
    log = Path(work) / f"burst-{os.getpid()}.json"
    try:
        if not engine.settled.wait(300):
            raise TimeoutError("the engine did not settle")
        heap.freeze()  # as `record` does once its engine settles (linux/heap.py)
        time.sleep(0.3)
        picture.record()
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
        end = result["end"]
        want = truth_of(root)
        matched_at = picture.matched_at(want, end)
        deadline = time.time() + SETTLE
        while matched_at is None and time.time() < deadline:
            time.sleep(0.05)
            matched_at = picture.matched_at(want, end)
        cpu, wall = cpu_seconds() - cpu0, time.monotonic() - wall0
        after = engine.stats
        diff = None
        if matched_at is None:
            # The disk may have moved on during the wait (a state the clock changes): judged
            # against the truth then too, and both kept.
            got, again = picture.now(), truth_of(root)
            diff = differences(again, got)
            diff["truth_changed_while_waiting"] = again != want
            diff["against_first_truth"] = differences(want, got)
            diff["health"] = [vars_of(h) for h in (picture.health())]
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
