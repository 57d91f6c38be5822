"""A fixed port for a test: one a lane would choose itself (outside every lease and the kernel's
ephemeral range), free when asked.

Sessions run side by side (`.ci/run` runs the normal-user tier beside the root suite), and a
port found free is only taken later, so whoever picks from one range can meet another holding
the port for long. The ranges are kept apart by who holds a port how long: the demo's
(`demo/loopback.FIXED_RANGE`, 18000-19999) for its whole life, the corpus's plants for up to a
minute, the other tests' for a few seconds (each of their servers retries or holds briefly).

And each range is cut in `SLOTS` parts, one per (root or not, xdist worker): a worker runs one
test at a time, so two tests that run at once (the root suite's and the tier's, or the two
workers') pick from parts no other picks from. Picked at random within a range, they met
rarely but surely: both take the same free port before either binds it, and one test's
server (a lane serving its $PORT for its life) kept the other's run from it for a minute."""

from __future__ import annotations

import os
import random
import socket

from lanewatch.lanes.leases import DEFAULT_RANGE

CORPUS_PORTS = (10000, 13999)  # the corpus's plants and docs previews
TEST_PORTS = (14000, 17999)  # every other test's fixed port
LEASE_WINDOW = 200  # ports of the lease range each test leases from
WORKER_SLOTS = 4  # xdist workers told apart (gw4 shares gw0's part)
SLOTS = 2 * WORKER_SLOTS  # root's and the others', each per worker
_pick = random.SystemRandom()  # not `random`'s own state, which a seeded run shares


def slot() -> int:
    """This session's part of each range: root's or not, and which xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % WORKER_SLOTS if worker.isdigit() else 0
    return (0 if os.geteuid() == 0 else WORKER_SLOTS) + index


def part(ports: tuple[int, int], which: int | None = None) -> tuple[int, int]:
    """Part `which` (this session's: `slot()`) of the range `ports`, both ends in it."""
    low, high = ports
    size = (high - low + 1) // SLOTS
    start = low + size * (slot() if which is None else which)
    return start, start + size - 1


def free_fixed_port(ports: tuple[int, int] = TEST_PORTS) -> int:
    """A port of this session's part of `ports` that nothing listens on now (tried for real)."""
    for _ in range(50):
        port = _pick.randint(*part(ports))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {ports} after 50 tries")


def lease_window() -> str:
    """A `$LANEWATCH_PORT_RANGE` of its own for a test: LEASE_WINDOW ports at random in the
    leases' default range. With a lease folder of its own, every test's first lane leased the
    range's first port, so two tests of sessions side by side (the root suite and the tier)
    started servers on one $PORT, and one waited a minute for it. A port listened on when a
    lease is taken is never leased; one bound later by another test's lane can be: the window
    is in this session's part of the range (`part`)."""
    low, high = part(DEFAULT_RANGE)
    start = _pick.randrange(low, high - LEASE_WINDOW + 2)
    return f"{start}-{start + LEASE_WINDOW - 1}"
