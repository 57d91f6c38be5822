"""The ports the audit's runs listen on, outside their leases: the migration queue's "tests bind
:8000". While the runs go, the prober's fast probe (`processes/prober.py`: the runs' processes
only, found from their owners' stamps, with the listening sockets named by the fd readlinks it
makes anyway) is asked every SAMPLE_EVERY seconds.

A run on its own `$PORT` (its lease) is fine; a port the kernel picked (bind to port 0, in its
ephemeral range) is nobody's choice. Blind spot: a socket that listens and closes between two
samples.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from lanewatch.lanes.stamp import OwnerState, Stamp, read_stamp
from lanewatch.linux.netsockets import ephemeral_range
from lanewatch.model.ports import listeners
from lanewatch.processes.privateports import PrivateNets
from lanewatch.processes.prober import probe

SAMPLE_EVERY = 0.25
FIX = (
    "listen on $PORT (each lane leases a block of ports: PORT is its first, LANEWATCH_PORTS "
    "the block), or on port 0 and pass the port the kernel gave on"
)


class PortWatch:
    def __init__(self) -> None:
        self.runs: dict[str, int] = {}  # namespace -> run index
        # (run, proto, port) -> when first seen (ns): ports outside the run's lease
        self.seen: dict[tuple[int, str, int], int] = {}
        self.failed: str | None = None  # why sampling stopped, if it did
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ephemeral = ephemeral_range()
        self._private = PrivateNets()  # a --fence net run's tables read again only on a change

    def add_lane(self, run: int, namespace: str) -> None:
        self.runs[namespace] = run

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lanewatch-audit-ports")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.sample()  # once more: a listener of the last moments

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def sample(self) -> None:
        stamps: dict[str, Stamp] = {}
        for ns in list(self.runs):
            s = read_stamp(Path(ns)).stamp
            if s is not None and s.state is OwnerState.LIVE:
                stamps[ns] = s
        if not stamps:
            return
        try:
            report = probe(stamps, [], full=False, private=self._private)
        except OSError as exc:  # /proc unreadable as a whole
            self.failed = f"the runs' ports could not be read: {exc.strerror or exc}"
            return
        now = time.time_ns()
        for one in listeners(report.holdings or (), report.owners, report.listening):
            run = self.runs.get(one.owner.key)
            port = one.socket.port
            lease = stamps[one.owner.key].ports if one.owner.key in stamps else None
            if run is None or (lease and lease[0] <= port < lease[0] + lease[1]):
                continue
            if one.socket.private:  # a --fence net run's own loopback: shared with no one
                continue
            if self._ephemeral[0] <= port <= self._ephemeral[1]:
                continue
            self.seen.setdefault((run, one.socket.proto, port), now)
