"""Listening sockets from `/proc/net/{tcp,tcp6,udp,udp6}`: the one parser of those tables.

A TCP socket listens in state `0A` (LISTEN). A UDP socket has no such state: one bound to a
local port with no peer (state `07`, remote port 0) is counted as listening (a DNS server, a
test's UDP echo). Each row names the socket's inode; a process's fd on it reads
`socket:[INODE]` (`link`), which is how the prober maps a socket to the processes holding it.

`listening_inodes` and `ports_listening` ask the kernel's socket diagnostics instead (netlink,
filtered in the kernel): the cheap question the prober asks twice a second.

Blind spots: the tables are those of *our* network namespace: a process in another one (a
container, `--fence net`) lists its sockets in `/proc/PID/net/*`, not here (a `--fence net`
lane's are read there by `linux/netnsports.py`). A socket that
listens and closes between two reads is never seen.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PROC_NET = "/proc/net"
TABLES = (("tcp", 4), ("tcp6", 6), ("udp", 4), ("udp6", 6))
_TCP_LISTEN = "0A"
_UDP_UNCONNECTED = "07"
LOCAL_PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
_DEFAULT_EPHEMERAL = (32768, 60999)  # the kernel's own default


@dataclass(frozen=True, slots=True)
class Listening:
    """One listening socket: `proto` "tcp" or "udp", the local address and port, its inode
    and the uid the kernel says created it; `private`: in a network namespace other than ours
    (a `--fence net` lane's, `linux/netnsports.py`), where it collides with nobody's."""

    proto: str
    address: str
    port: int
    inode: int
    uid: int
    private: bool = False

    def as_private(self) -> Listening:
        return Listening(self.proto, self.address, self.port, self.inode, self.uid, True)

    @property
    def link(self) -> str:
        """What a process's fd on this socket reads as (`readlink /proc/PID/fd/N`)."""
        return f"socket:[{self.inode}]"

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


def _address(hexed: str) -> str:
    """`0100007F` -> 127.0.0.1; 32 hex digits -> an IPv6 address. Each 32-bit word is in the
    host's byte order (little-endian on every machine lanewatch runs on)."""
    raw = bytes.fromhex(hexed)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse(text: str, proto: str) -> list[Listening]:
    """The listening sockets of one table's text (`proto`: "tcp" or "udp"). Lines that are not
    rows (the header, a truncated last line) are skipped, never raised on."""
    out: list[Listening] = []
    want = _TCP_LISTEN if proto == "tcp" else _UDP_UNCONNECTED
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != want:
            continue
        try:
            local, port_hex = parts[1].rsplit(":", 1)
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            port, uid, inode = int(port_hex, 16), int(parts[7]), int(parts[9])
            address = _address(local)
        except (ValueError, IndexError):
            continue
        if port == 0 or inode == 0 or (proto == "udp" and remote_port != 0):
            continue  # not bound yet; a socket being torn down; a connected UDP socket
        out.append(Listening(proto, address, port, inode, uid))
    return out


def listening(proc_net: str = PROC_NET) -> list[Listening]:
    """Every listening TCP and UDP socket (IPv4 and IPv6) of our network namespace. A table
    that cannot be read (no IPv6 here) is left out: the others are still true."""
    out: list[Listening] = []
    for name, _family in TABLES:
        try:
            with open(f"{proc_net}/{name}", encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        out.extend(parse(text, name.rstrip("6")))
    return out


# The kernel's socket diagnostics (netlink, what `ss` uses): the inodes of listening sockets,
# filtered by state in the kernel. Reading /proc/net/tcp walks the kernel's whole hash table
# (about 3 ms a table here, however few sockets); this takes a fraction of a millisecond, so
# the prober can ask it twice a second while lanes live. Tables and the probe stay /proc/net.
_SOCK_DIAG, _BY_FAMILY, _DUMP = 4, 20, 0x301  # NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, REQ|DUMP
_DONE, _ERROR = 3, 2
_LISTEN_STATES = ((socket.IPPROTO_TCP, 1 << 10), (socket.IPPROTO_UDP, 1 << 7))  # LISTEN, CLOSE
_INODE_AT = 16 + 4 + 48 + 16  # nlmsghdr, inet_diag_msg's head, its id, expires..uid


def listening_inodes() -> frozenset[int]:
    """The inodes of every listening TCP and bound UDP socket (IPv4 and IPv6) of our network
    namespace, from the kernel's socket diagnostics; from /proc/net where netlink is refused.
    A cheap "did anything start or stop listening" (a connected UDP socket is left out)."""
    try:
        return frozenset(inode for _port, inode in _diag_all())
    except OSError:
        return frozenset(s.inode for s in listening())


def listening_pairs() -> frozenset[tuple[int, int]]:
    """(port, inode) of the same sockets, the same cheap way."""
    try:
        return frozenset(_diag_all())
    except OSError:
        return frozenset((s.port, s.inode) for s in listening())


def ports_listening() -> frozenset[int]:
    """The local ports of those sockets (what a lease must not hand out), the same cheap way."""
    try:
        return frozenset(port for port, _inode in _diag_all())
    except OSError:
        return ports_in_use(listening())


def _diag_all() -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for family in (socket.AF_INET, socket.AF_INET6):
        for proto, states in _LISTEN_STATES:
            found.extend(_diag(family, proto, states))
    return found


def _diag(family: int, proto: int, states: int) -> list[tuple[int, int]]:
    """(local port, inode) of each socket of `family` and `proto` in one of `states`."""
    req = struct.pack("=BBBBI", family, proto, 0, 0, states) + bytes(48)
    hdr = struct.pack("=IHHII", 16 + len(req), _BY_FAMILY, _DUMP, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _SOCK_DIAG) as s:
        s.sendto(hdr + req, (0, 0))
        out: list[tuple[int, int]] = []
        while True:
            data = s.recv(65536)
            if not data:
                return out
            off = 0
            while off + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, off)
                if kind == _DONE:
                    return out
                if kind == _ERROR:
                    raise OSError(-struct.unpack_from("=i", data, off + 16)[0], "sock_diag")
                if length < _INODE_AT + 4:
                    raise OSError(0, "sock_diag: a short message")
                port = struct.unpack_from(">H", data, off + 16 + 4)[0]  # id.sport, big-endian
                out.append((port, struct.unpack_from("=I", data, off + _INODE_AT)[0]))
                off += (length + 3) & ~3


class Tables:
    """`listening()` for a caller that asks again and again (the prober): the /proc/net tables
    are parsed again only when the cheap inode set (`listening_inodes`) changed since."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inodes: frozenset[int] | None = None
        self._found: list[Listening] = []

    def listening(self) -> list[Listening]:
        inodes = listening_inodes()
        with self._lock:
            if inodes == self._inodes:
                return list(self._found)
        found = listening()
        with self._lock:
            self._inodes, self._found = frozenset(s.inode for s in found), found
        return list(found)


def by_link(sockets: Iterable[Listening]) -> Mapping[str, Listening]:
    """The sockets keyed by what an fd on each reads (`socket:[INODE]`)."""
    return {s.link: s for s in sockets}


def ports_in_use(sockets: Iterable[Listening]) -> frozenset[int]:
    return frozenset(s.port for s in sockets)


def ephemeral_range(path: str = LOCAL_PORT_RANGE) -> tuple[int, int]:
    """The ports the kernel picks from for a bind to port 0 or an outgoing connection."""
    try:
        with open(path, encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high <= 65535 else _DEFAULT_EPHEMERAL
