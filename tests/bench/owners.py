"""One owner process of the benchmark: claims many lanes and keeps them alive.

    python -m tests.bench.owners PLAN.json quiet|beat

What it simulates: for each of its lanes, what `Lane.claim` leaves on disk and holds (the
`owner.lock` filelock and the shared flock on the folder, a stamp naming this process, a
"started" ledger line) and what the lane's heartbeat thread does (one `os.utime` of the stamp
per interval). What it does not: one process per lane. A lane's liveness is judged per pid, so
the 1,000 lanes of the benchmark share a few pids; the prober's /proc scan therefore sees a
few owner processes, not 1,000 (the process-probe figure measures 500 real processes apart).
One thread beats every lane of this process, in the order of their phases, instead of one
thread per lane: the disk sees the same utimes at the same times.

Protocol: prints "ready" once every lane is claimed; then reads lines from stdin: "quiet" or
"beat" rewrites every stamp with the new interval, "release" marks every stamp released (the
locks stay held); each answers "ok". Exits on end of input or
SIGTERM (the kernel drops the locks).
"""

from __future__ import annotations

import getpass
import os
import signal
import sys
import threading
import time
from pathlib import Path

from lanewatch.lanes import ledger
from lanewatch.lanes.lock import NamespaceLock
from lanewatch.lanes.names import split_namespace_name
from lanewatch.lanes.stamp import (
    DEFAULT_HEARTBEAT,
    OwnerState,
    Stamp,
    touch_heartbeat,
    write_stamp,
)
from lanewatch.linux.procid import ProcessIdentity, hostname
from tests.bench.common import load_json

QUIET_INTERVAL = 3600.0  # no beat due, nothing hung, within any measurement


class Owner:
    def __init__(self, keys: list[str], index: int, of: int, total: int) -> None:
        self.keys = [Path(k) for k in keys]
        self.index, self.of, self.total = index, of, total
        self.me = ProcessIdentity.current()
        self.host = hostname()
        self.user = getpass.getuser()
        self.started = time.time()
        self.locks: list[NamespaceLock] = []
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def claim(self) -> None:
        for ns in self.keys:
            lock = NamespaceLock(ns)
            if not lock.try_acquire():
                raise SystemExit(f"cannot lock {ns}")
            lock.hold_folder()
            self.locks.append(lock)
            self.write(ns, QUIET_INTERVAL)
            split = split_namespace_name(ns.name)
            ledger.append(ns, "started", lane=split[1] if split else ns.name, command=["bench"])

    def write(self, ns: Path, interval: float, *, released: bool = False) -> None:
        split = split_namespace_name(ns.name)
        checkout, lane = split if split else ("", ns.name)
        now = time.time()
        write_stamp(
            ns,
            Stamp(
                lane=lane,
                namespace=ns.name,
                checkout_id=checkout,
                checkout_path="/nonexistent/bench-checkout",
                host=self.host,
                boot_id=self.me.boot_id,
                pid=self.me.pid,
                start_ticks=self.me.start_ticks,
                user=self.user,
                uid=os.getuid(),
                command=["bench-owner", lane],
                started_at=self.started,
                heartbeat_at=now,
                heartbeat_interval=interval,
                state=OwnerState.RELEASED if released else OwnerState.LIVE,
                root=str(ns.parent),
                released_at=now if released else None,
                exit_code=0 if released else None,
            ),
        )

    def mode(self, mode: str) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        interval = DEFAULT_HEARTBEAT if mode == "beat" else QUIET_INTERVAL
        for ns in self.keys:
            try:
                self.write(ns, interval, released=mode == "release")
            except FileNotFoundError:
                continue  # removed (the burst removes namespaces)
        if mode == "beat":
            self._stop = threading.Event()
            self._beat = threading.Thread(target=self.beat, args=(self._stop,), daemon=True)
            self._beat.start()

    def beat(self, stop: threading.Event) -> None:
        """Every lane once per interval; lane j of this process is lane j*of+index overall."""
        interval = DEFAULT_HEARTBEAT
        t0 = time.time()
        share = interval / self.total
        phases = [(j * self.of + self.index) * share for j in range(len(self.keys))]
        k = 0
        while not stop.is_set():
            for ns, phase in zip(self.keys, phases, strict=True):
                due = t0 + k * interval + phase
                delay = due - time.time()
                if delay > 0 and stop.wait(delay):
                    return
                try:
                    touch_heartbeat(ns)
                except OSError:
                    continue
            k += 1


def main(argv: list[str]) -> None:
    plan = load_json(argv[0])
    owner = Owner(plan["keys"], plan["index"], plan["of"], plan["total"])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    owner.claim()
    if argv[1] == "beat":
        owner.mode("beat")
    print("ready", flush=True)
    for line in sys.stdin:
        owner.mode(line.strip())
        print("ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
