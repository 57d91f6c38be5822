"""A fixed port for a test: one a lane would choose itself (outside every lease and the kernel's
ephemeral range), free when asked.

Sessions run side by side (`.ci/run` runs the normal-user tier beside the root suite), and a
port found free is only taken later, so whoever picks from one range can meet another holding
the port for long. The ranges are kept apart by who holds a port how long: the demo's
(`demo/loopback.FIXED_RANGE`, 18000-19999) for its whole life, the corpus's plants for up to a
minute, the other tests' for a few seconds (each of their servers retries or holds briefly)."""

from __future__ import annotations

import random
import socket

from lanewatch.lanes.leases import DEFAULT_RANGE

CORPUS_PORTS = (10000, 13999)  # the corpus's plants and docs previews
TEST_PORTS = (14000, 17999)  # every other test's fixed port
LEASE_WINDOW = 200  # ports of the lease range each test leases from
_pick = random.SystemRandom()  # not `random`'s own state, which a seeded run shares


def free_fixed_port(ports: tuple[int, int] = TEST_PORTS) -> int:
    """A port in `ports` that nothing listens on now (tried for real)."""
    for _ in range(50):
        port = _pick.randint(*ports)
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
    lease is taken is never leased; one bound later by another test's lane can be."""
    low, high = DEFAULT_RANGE
    start = _pick.randrange(low, high - LEASE_WINDOW + 1)
    return f"{start}-{start + LEASE_WINDOW - 1}"
