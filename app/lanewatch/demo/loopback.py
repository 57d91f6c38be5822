"""Loopback ports for the demo's port incidents: a fixed port nobody uses, and ::1 where the
machine has IPv6. Only loopback is ever bound."""

from __future__ import annotations

import contextlib
import random
import socket

from lanewatch.linux.netsockets import ephemeral_range, listening

FIXED_RANGE = (18000, 19999)  # below the leases' default range and the kernel's ephemeral one


def ipv6_loopback() -> str | None:
    """ "::1" when a socket can be bound there, else None."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return None
    return "::1"


def free_port() -> int:
    """A port of FIXED_RANGE no socket listens on and that binds on 127.0.0.1 now. The search
    starts at a random place in the range: two demos (or a demo and a test) started at once on
    one machine would otherwise both take its first free port, and the later one to listen
    would wait on the other."""
    low, high = ephemeral_range()
    taken = {s.port for s in listening()}
    ports = range(*FIXED_RANGE)
    start = random.randrange(len(ports))
    for port in (*ports[start:], *ports[:start]):
        if port in taken or low <= port <= high:
            continue
        with contextlib.suppress(OSError), socket.socket() as s:
            s.bind(("127.0.0.1", port))
            return port
    return FIXED_RANGE[0]
