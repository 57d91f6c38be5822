"""Shared pieces of the benchmark: scales, statistics, child processes, result records.

Every figure runs in a child process of `bench.py` (`python -m tests.bench.<module> ...`) that
prints one JSON object on its last stdout line; this module is what both sides share.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lanewatch.processes.quietpace import FULL_SCAN_EVERY

REPO = Path(__file__).resolve().parents[2]
CHECKOUT_ID = "bench-0123456789ab"  # a well-formed checkout id no real checkout has
LANE_PREFIX = "lane-"
SCREEN = (160, 50)  # the headless terminal: 160 columns, 50 lines


@dataclass(frozen=True)
class Scale:
    """How big each workload is and how long each load runs. `full` is the issue's table."""

    mode: str
    namespaces: int = 1000
    files: int = 100  # data files per namespace (plus the stamp, lock and ledger)
    owners: int = 4  # processes holding the lanes (a lane's liveness is per pid)
    writers: int = 200  # lanes writing
    write_rate: int = 1000  # files written per second, in all
    write_seconds: float = 10.0
    beat_seconds: float = 12.0  # > two default heartbeat intervals
    burst_rate: int = 10_000  # inotify events per second
    burst_seconds: float = 10.0
    burst_namespaces: int = 200
    # One full /proc scan's period: a shorter window holds that scan or not by chance (0.19 to
    # 0.33 % of a core on one quiet machine with 20 s).
    idle_seconds: float = FULL_SCAN_EVERY
    idle_settle: float = 90.0  # the most the idle window waits for every age to read minutes
    probe_procs: int = 500
    probe_reps: int = 15
    scan_reps: int = 5
    cold_reps: int = 3
    screen_reps: int = 5
    frame_samples: int = 40
    idle_variants: bool = True  # also the engine alone, and with every lane released
    fence_reps: int = 15  # `lanewatch run -- true`, fenced and not
    guard_calls: int = 1000  # `lanewatch guard` fed a PreToolUse payload
    service_seconds: float = 60.0  # `record --service`: CPU over this long, per phase
    service_warmup: float = 65.0  # its start (a full scan's cycle) before the first window
    foreign_rate: int = 10_000  # files a second another process writes outside every root

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


SCALES: dict[str, Scale] = {
    "full": Scale("full"),
    # The lane counts stay (the screen figures are about 1,000 rows); files, durations and
    # repetitions shrink. Figures are comparable in kind, not in value, to a full run.
    "quick": Scale(
        "quick",
        files=10,
        write_seconds=2.0,
        beat_seconds=2.0,
        burst_seconds=2.0,
        burst_namespaces=50,
        write_rate=1000,
        idle_seconds=3.0,
        idle_settle=0.0,
        probe_procs=200,
        probe_reps=5,
        scan_reps=2,
        cold_reps=0,
        screen_reps=1,
        frame_samples=8,
        idle_variants=False,
        fence_reps=5,
        guard_calls=200,
        service_seconds=20.0,
        service_warmup=0.0,
    ),
    # For the test suite: checks the machinery, not the machine.
    "smoke": Scale(
        "smoke",
        namespaces=40,
        files=4,
        owners=2,
        writers=10,
        write_rate=100,
        write_seconds=0.5,
        beat_seconds=0.5,
        burst_rate=1000,
        burst_seconds=0.5,
        burst_namespaces=10,
        idle_seconds=0.5,
        idle_settle=0.0,
        probe_procs=20,
        probe_reps=2,
        scan_reps=1,
        cold_reps=0,
        screen_reps=1,
        frame_samples=2,
        idle_variants=False,
        fence_reps=2,
        guard_calls=12,
        service_seconds=0.5,
        service_warmup=0.0,
        foreign_rate=500,
    ),
}


# -- statistics --------------------------------------------------------------------------------
def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (no interpolation): p99 of 100 samples is the 99th smallest."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def summary_ms(values: Sequence[float]) -> dict[str, float | int]:
    if not values:
        return {"samples": 0}
    return {
        "samples": len(values),
        "p50_ms": ms(statistics.median(values)),
        "p90_ms": ms(quantile(values, 0.90)),
        "p99_ms": ms(quantile(values, 0.99)),
        "max_ms": ms(max(values)),
    }


def first_after(seen: dict[str, list[float]], path: str, t: float) -> float | None:
    """The first time in `seen[path]` (sorted) at or after `t`."""
    times = seen.get(path)
    if not times:
        return None
    i = bisect.bisect_left(times, t)
    return times[i] if i < len(times) else None


def index_times(records: Iterable[tuple[float, Iterable[str]]]) -> dict[str, list[float]]:
    """path -> sorted times it was seen, from (time, paths) records."""
    out: dict[str, list[float]] = {}
    for t, paths in records:
        for p in paths:
            out.setdefault(p, []).append(t)
    for times in out.values():
        times.sort()
    return out


def tail_seconds(load_seconds: float) -> float:
    """How long to wait after a load for its last events to land."""
    return min(1.0, max(0.3, load_seconds / 2))


def cpu_seconds() -> float:
    """CPU time of this process, every thread (ended ones too), user + system, to the
    nanosecond (`os.times` counts in clock ticks of 10 ms: an idle window of 20 s held a
    handful of them)."""
    return time.process_time()


def process_cpu(pid: int) -> float:
    """CPU seconds of another process so far, every thread, user + system (0.0 once gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def per_thread(pid: int | None, name: str) -> dict[int, str]:
    """/proc/PID/task/TID/`name` of each thread of this process (or of `pid`), by native
    thread id; a thread that ended since the listing is left out."""
    out: dict[int, str] = {}
    proc = "self" if pid is None else str(pid)
    try:
        tids = os.listdir(f"/proc/{proc}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{proc}/task/{tid}/{name}") as f:
                out[int(tid)] = f.read()
        except OSError:
            continue
    return out


def thread_cpu(pid: int | None = None) -> dict[int, float]:
    """CPU seconds of each thread of this process (or of `pid`), by native thread id: its time
    on a CPU to the nanosecond (`schedstat`, the sum that `stat`'s utime + stime are scaled to,
    in clock ticks of 10 ms), or from `stat` where the kernel keeps no schedstat."""
    out = {tid: int(text.split()[0]) / 1e9 for tid, text in per_thread(pid, "schedstat").items()}
    if out:
        return out
    tick = os.sysconf("SC_CLK_TCK")
    for tid, text in per_thread(pid, "stat").items():
        fields = text.rsplit(")", 1)[1].split()
        out[tid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out


def thread_comms(pid: int) -> dict[int, str]:
    """Each thread of `pid`, native id → kernel name (`main` for the process's own thread;
    tests/bench/named_threads.py names the others)."""
    return {
        tid: "main" if tid == pid else name.strip() for tid, name in per_thread(pid, "comm").items()
    }


def thread_shares(
    before: dict[int, float], after: dict[int, float], names: dict[int, str], wall: float
) -> dict[str, float]:
    """Per thread name, the share of one core (in %) it used between two `thread_cpu` reads."""
    shares: dict[str, float] = {}
    for tid, cpu in after.items():
        used = cpu - before.get(tid, 0.0)
        if used > 0:
            name = names.get(tid, "other")
            shares[name] = round(shares.get(name, 0.0) + used / wall * 100, 2)
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def engine_threads(
    engine: Any, before: dict[int, float], after: dict[int, float], wall: float
) -> dict[str, float]:
    """`thread_shares` of the dashboard's engine process, names prefixed "engine:"."""
    names = {tid: f"engine:{name}" for tid, name in engine.thread_names().items()}
    for tid in after:
        names.setdefault(tid, "engine:other")
    return thread_shares(before, after, names, wall)


# -- waiting -----------------------------------------------------------------------------------
def wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


# -- child processes -----------------------------------------------------------------------------
def child_env(workdir: Path) -> dict[str, str]:
    """Environment of every child: lanewatch's state and temp under the workdir."""
    env = dict(os.environ)
    env["LANEWATCH_STATE_DIR"] = str(workdir / "state")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    for var in ("LANEWATCH_ROOT", "LANEWATCH_LANE", "LANEWATCH_NAMESPACE", "LANEWATCH_HEARTBEAT"):
        env.pop(var, None)
    return env


def module_cmd(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"tests.bench.{module}", *args]


def stop_process(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace`; always reaped."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
    else:
        proc.wait()


def last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            result = json.loads(line)
            if isinstance(result, dict):
                return result
    raise ValueError("no JSON object in the output")


def emit(result: dict[str, Any]) -> None:
    """A figure child's answer: one JSON line on stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def load_json(path: str | os.PathLike[str]) -> Any:
    with open(path, "rb") as f:
        return json.load(f)


def dump_json(path: str | os.PathLike[str], data: Any) -> None:
    with open(path, "w") as f:
        json.dump(data, f)
