"""Figures `net_fence` and `forward`: what `--fence net` adds to `lanewatch run -- true`, and
how fast a forwarded port carries bytes against a direct connection.

    python -m tests.bench.fig_netfence WORK REPS

`private_ports`: with that lane serving, what the prober's look at its namespace costs between
probes (`PrivateNets.pairs`: its socket counts, the tables unread while they stay), and one read
of its tables (`netnsports.listening`), medians.

`net_fence`: `lanewatch run --fence net -- true` against `lanewatch run -- true` (the /tmp
fence), alternating REPS times after one untimed run of each; medians and minimums of wall
clock, start to exit. `forward`: a server sends SIZE bytes to each connection; the time to
read them all from it directly on the host's 127.0.0.1, and from the same server in a
net-fenced lane through `lanewatch forward`, the best of three each. The load average before
and after is in the detail (the machine may be shared).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux import netnsports
from lanewatch.linux.procid import Liveness
from lanewatch.model.classify import LivenessEvidence
from lanewatch.processes.privateports import PrivateNets
from tests.bench.common import emit
from tests.bench.run_timing import RUN, alternate, every_time, medians, run_repo, said

SIZE = 256 * 1024 * 1024
# Listens on 127.0.0.1:PORT (0: any), says the port, sends SIZE bytes to each connection.
SERVER = f"""
import socket, sys
s = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print(s.getsockname()[1], flush=True)
block = b"x" * (1 << 20)
while True:
    c, _ = s.accept()
    for _ in range({SIZE} >> 20):
        c.sendall(block)
    c.close()
"""


def _read_all(port: int) -> float:
    """Seconds to read SIZE bytes from 127.0.0.1:`port`, best of three."""
    best = float("inf")
    buf = bytearray(1 << 20)
    for _ in range(3):
        t0 = time.perf_counter()
        got = 0
        with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
            while n := c.recv_into(buf):
                got += n
        if got != SIZE:
            raise RuntimeError(f"read {got} bytes of {SIZE}")
        best = min(best, time.perf_counter() - t0)
    return best


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _outlived(members: list[psutil.Process]) -> None:
    """The lane's processes must end with its runner (SIGINT forwarded to them). One that
    outlives it would also hold the bench's pipe open (seen twice, each time with the bench
    started by `&` from a script, so SIGINT ignored by all it started: tests/kits/
    terminal_signals.py): killed (psutil re-checks each one's identity) and named, not waited
    for."""
    left = [p for p in members if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    said = [f"{p.pid} ({_name(p)})" for p in left]
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    if left:
        raise RuntimeError(f"lane processes outlived its runner: {said}")


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return "?"


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{proc.args!r} said nothing (exit {proc.wait()})")
    return line


def throughput(repo: Path, env: dict[str, str]) -> dict[str, Any]:
    lw = [sys.executable, "-m", "lanewatch"]
    opts: dict[str, Any] = {"cwd": repo, "env": env, "text": True, "process_group": 0}
    direct = subprocess.Popen([sys.executable, "-c", SERVER, "0"], stdout=subprocess.PIPE, **opts)
    lane = subprocess.Popen(
        [*lw, "run", "--lane", "served", "--fence", "net", "--", sys.executable, "-c", SERVER,
         "3000"],
        stdout=subprocess.PIPE,
        **opts,
    )  # fmt: skip
    fwd = None
    members: list[psutil.Process] = []
    try:
        direct_s = _read_all(int(_line(direct)))
        _line(lane)
        members = psutil.Process(lane.pid).children(recursive=True)
        private = private_reads(Path(env["LANEWATCH_ROOT"]))
        fwd = subprocess.Popen(
            [*lw, "forward", "served", "3000", "0", "--root", env["LANEWATCH_ROOT"]],
            stdout=subprocess.PIPE,
            **opts,
        )
        found = re.search(r"127\.0\.0\.1:(\d+)/", _line(fwd))
        if found is None:
            raise RuntimeError("forward printed no URL")
        forwarded_s = _read_all(int(found.group(1)))
    finally:
        for proc in (fwd, lane, direct):
            if proc is not None:
                _stop(proc)
        _outlived(members)
    mb = SIZE / 1e6
    return {
        "direct_s": direct_s,
        "forwarded_s": forwarded_s,
        "direct_mb_s": round(mb / direct_s),
        "forwarded_mb_s": round(mb / forwarded_s),
        "bytes": SIZE,
        **private,
    }


def _median_ms(fn: Any, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def private_reads(root: Path) -> dict[str, Any]:
    """The look between probes and one read of the tables, in the serving lane's namespace."""
    (ns,) = root.glob("*.served")
    s = read_stamp(ns).stamp
    assert s is not None and s.net_ns and s.child_pid and s.child_start_ticks
    ev = LivenessEvidence(s.pid, s.start_ticks, Liveness.ALIVE, "bench", time.time())
    nets = PrivateNets()
    if not any(sock.port == 3000 for sock in nets.read({str(ns): s}, {str(ns): ev}).values()):
        raise RuntimeError("the lane's :3000 was not read in its namespace")
    pid, ticks, net = s.child_pid, s.child_start_ticks, s.net_ns
    return {
        "private_look_ms": _median_ms(nets.pairs, 200),
        "private_tables_ms": _median_ms(lambda: netnsports.listening(pid, ticks, net), 20),
    }


def main(args: list[str]) -> None:
    work, reps = Path(args[0]), int(args[1])
    repo, env = run_repo(work, "netfence")
    load_before = os.getloadavg()[0]
    how = said([*RUN, "--fence", "net", "--", "sh", "-c", 'echo "$LANEWATCH_NET"'], repo, env)
    measures = {"tmp": [*RUN, "--", "true"], "net": [*RUN, "--fence", "net", "--", "true"]}
    times = alternate(measures, reps, repo, env)
    result = medians(times)
    result["how"] = how
    if how == "private":
        result.update(throughput(repo, env))
    result["load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    result.update(every_time(times))
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
