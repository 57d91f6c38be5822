"""Figure `process_probe`: one full probe of the prober (`processes.prober.probe`: liveness of
every local live owner, then who holds what under the roots and shared temp, with environment
and ancestry) with PROCS extra processes running, against a raw `readlink` of `/proc/*/cwd`
and of every `/proc/*/fd/*`.

    python -m tests.bench.fig_probe ROOT PROCS REPS

Half the processes (`sleep`) own a lane each: a stamp under ROOT names the process (pid and
start ticks), the process runs in its namespace's `tmp/` with stdout open on a file there and
`LANEWATCH_LANE`/`LANEWATCH_NAMESPACE` set, as under `lanewatch run`. The probe is timed as
the prober runs it, again and again with its memo (`ProbeMemo`: what a holder's fds and
environment were, reused while it provably did not run); the same probe without a memo (as
a one-shot `lanewatch status` runs it) is timed too, as `probe_no_memo_ms`. Also timed: the
/proc scan alone (`holders.scan`) and the prober's fast probe (`full=False`: only the
processes of live lanes), which it runs between two full probes. The other half run
elsewhere (`/`, output to /dev/null). They stay in this process's group (so `bench.py` can
kill the lot if this process overruns) and are killed and reaped at the end. The two
measures alternate REPS times after one untimed run of each; medians.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import META_DIR, OwnerState, Stamp, read_stamp, write_stamp
from lanewatch.linux.procid import ProcessIdentity, boot_id, hostname, start_ticks
from lanewatch.processes import holders
from lanewatch.processes.prober import SHARED_TEMP, ProbeMemo, probe
from tests.bench.common import CHECKOUT_ID, emit

SLEEP = "300"  # bounded even if the kill below never ran


def raw_scan() -> tuple[int, int]:
    """The floor: readlink of every process's cwd and of every one of its fds."""
    procs = links = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        procs += 1
        base = f"/proc/{name}"
        with contextlib.suppress(OSError):
            os.readlink(f"{base}/cwd")
            links += 1
        try:
            fds = os.listdir(f"{base}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                os.readlink(f"{base}/fd/{fd}")
                links += 1
    return procs, links


def spawn(root: Path, count: int) -> list[subprocess.Popen[bytes]]:
    procs: list[subprocess.Popen[bytes]] = []
    for i in range(count):
        owner = i % 2 == 0
        if owner:
            lane = f"probe-{i:04d}"
            ns = root / namespace_name(CHECKOUT_ID, lane)
            (ns / "tmp").mkdir(parents=True, exist_ok=True)
            (ns / META_DIR).mkdir(exist_ok=True)
            cwd = ns / "tmp"
            env = {**os.environ, "LANEWATCH_LANE": lane, "LANEWATCH_NAMESPACE": str(ns)}
            out = os.open(cwd / f"out-{i}.log", os.O_WRONLY | os.O_CREAT, 0o644)
        else:
            cwd, env = Path("/"), dict(os.environ)
            out = os.open(os.devnull, os.O_WRONLY)
        try:
            p = subprocess.Popen(
                ["sleep", SLEEP], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out
            )
        finally:
            os.close(out)
        procs.append(p)
        if owner:
            write_owner_stamp(ns, lane, p.pid)
    return procs


def write_owner_stamp(ns: Path, lane: str, pid: int) -> None:
    ticks = start_ticks(pid)
    if ticks is None:
        raise RuntimeError(f"process {pid} is gone")
    now = time.time()
    write_stamp(
        ns,
        Stamp(
            lane=lane,
            namespace=ns.name,
            checkout_id=CHECKOUT_ID,
            checkout_path="/nonexistent/bench-checkout",
            host=hostname(),
            boot_id=boot_id(),
            pid=pid,
            start_ticks=ticks,
            user="bench",
            uid=os.getuid(),
            command=["sleep", SLEEP],
            started_at=now,
            heartbeat_at=now,
            heartbeat_interval=3600.0,
            state=OwnerState.LIVE,
            root=str(ns.parent),
        ),
    )


def kill(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        p.wait()


def main(argv: list[str]) -> None:
    root, count, reps = Path(argv[0]), int(argv[1]), int(argv[2])
    root.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs = spawn(root, count)
        me = ProcessIdentity.current()
        assert me.pid == os.getpid()
        stamps = {}
        for entry in os.scandir(root):
            s = read_stamp(Path(entry.path)).stamp
            if s is not None:
                stamps[entry.path] = s
        prefixes = [str(root), *SHARED_TEMP]
        raw_scan()
        memo = ProbeMemo()
        report = probe(stamps, prefixes, memo=memo)
        floors: list[float] = []
        probes: list[float] = []
        cold: list[float] = []
        scans: list[float] = []
        fast: list[float] = []
        for _ in range(reps):
            t0 = time.perf_counter()
            seen, links = raw_scan()
            floors.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            report = probe(stamps, prefixes, memo=memo)
            probes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            probe(stamps, prefixes)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            holders.scan([p for p in prefixes if os.path.isdir(p)], with_env=True, with_tree=True)
            scans.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            probe(stamps, prefixes, full=False)
            fast.append(time.perf_counter() - t0)
        alive = sum(1 for ev in report.evidence.values() if ev.liveness.value == "alive")
        result: dict[str, Any] = {
            "processes_in_proc": seen,
            "links_read": links,
            "spawned": len(procs),
            "owners": len(stamps),
            "owners_alive": alive,
            "holdings": len(report.holdings or ()),
            "partial": report.partial,
            "floor": statistics.median(floors),
            "probe": statistics.median(probes),
            "probe_no_memo_ms": round(statistics.median(cold) * 1000, 2),
            "procscan_only": statistics.median(scans),
            "fast_probe": statistics.median(fast),
            "floor_s": [round(x, 5) for x in floors],
            "probe_s": [round(x, 5) for x in probes],
            "probe_no_memo_s": [round(x, 5) for x in cold],
        }
    finally:
        kill(procs)
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
