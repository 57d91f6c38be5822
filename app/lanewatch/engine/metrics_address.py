"""`--metrics ADDR:PORT` read into (host, port), without prometheus_client: `record` and
`service install` check the address when the command line is read (engine/metrics.py serves it)."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"  # loopback unless an address is given: the picture names paths


def parse_address(text: str) -> tuple[str, int]:
    """ "PORT", "HOST:PORT" or "[V6]:PORT" -> (host, port); the host is loopback unless named.
    ValueError with a reason people can read."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r} is not ADDR:PORT (a port from 0 to 65535)")
    return host, int(port)
