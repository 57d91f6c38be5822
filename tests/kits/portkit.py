"""A fixed port for a test: one a lane would choose itself (outside every lease and the kernel's
ephemeral range), free when asked."""

from __future__ import annotations

import random
import socket

FIXED_PORTS = (10000, 19999)  # below the leases' range, above the well-known ports


def free_fixed_port() -> int:
    """A port in FIXED_PORTS that nothing listens on now (tried for real)."""
    for _ in range(50):
        port = random.randint(*FIXED_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {FIXED_PORTS} after 50 tries")
