"""A resolver of a few fixed names on one loopback address, port 53 (root only): enough DNS for
a test to see a name looked up through it. A real UDP server answering real queries; it knows
only the names it is given (A records), says NXDOMAIN for others and no record for other types."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Mapping

A, IN = 1, 1
NXDOMAIN = 3


def answer(query: bytes, names: Mapping[str, str]) -> bytes | None:
    """The reply to one query, None where it is no query we can read."""
    if len(query) < 12:
        return None
    labels: list[str] = []
    i = 12
    while i < len(query) and query[i]:
        n = query[i]
        labels.append(query[i + 1 : i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    end = i + 5
    if end > len(query):
        return None
    qtype, _ = struct.unpack("!HH", query[i + 1 : end])
    address = names.get(".".join(labels).lower())
    records = b""
    if address is not None and qtype == A:
        records = b"\xc0\x0c" + struct.pack("!HHIH", A, IN, 60, 4) + socket.inet_aton(address)
    flags = 0x8180 | (NXDOMAIN if address is None else 0)  # a response, recursion offered
    header = query[:2] + struct.pack("!HHHHH", flags, 1, 1 if records else 0, 0, 0)
    return header + query[12:end] + records


class TinyResolver:
    """Serves `names` on `address`:53 from a thread while open; `asked` counts the queries."""

    def __init__(self, address: str, names: Mapping[str, str]) -> None:
        self.names = dict(names)
        self.asked = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((address, 53))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tinydns", daemon=True)

    def __enter__(self) -> TinyResolver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                query, peer = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            reply = answer(query, self.names)
            if reply is not None:
                self.asked += 1
                self._sock.sendto(reply, peer)
