"""`--fence net`: the lane's resolver, where the host's is on loopback.

A host whose /etc/resolv.conf names a resolver on loopback (systemd-resolved's 127.0.0.53,
dnsmasq's 127.0.0.1, `::1`) would point a net-fenced lane at its own loopback, where nothing
answers: every name lookup fails. slirp4netns answers DNS at 10.0.2.3 and asks the host's
resolvers from the host's network, where the loopback ones listen. So the lane gets the host's
file with its loopback nameservers replaced by 10.0.2.3 (once, where the first stood; search
and options lines kept), bound over /etc/resolv.conf in the lane's mount namespace only (the
fence's stub, runner/fence.py). A host file without a loopback nameserver stays the lane's as
it is: slirp4netns carries the lane's queries to those addresses like any other traffic. A
file that names no nameserver means the C library's default, the local host: 10.0.2.3 too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

HOST_RESOLV = "/etc/resolv.conf"
ENV_HOST_RESOLV = "LANEWATCH_HOST_RESOLV"  # read in HOST_RESOLV's place (tests, debugging)
SLIRP_DNS = "10.0.2.3"  # slirp4netns's DNS forwarder (runner/netfence.py)
LANE_RESOLV = "resolv.conf"  # the lane's, in its namespace's `.lanewatch/`
MAX_BYTES = 64 * 1024  # a resolver file is a few lines; more is not one
HEADER = (
    "# lanewatch --fence net: the host's resolver is on its loopback, which this lane does not "
    f"share; {SLIRP_DNS} (slirp4netns) asks it (docs/fence.md)"
)


def host_text(env: Mapping[str, str]) -> str | None:
    """The host's resolver file (or `$LANEWATCH_HOST_RESOLV`'s), None where it cannot be read:
    the lane then keeps what it finds."""
    path = env.get(ENV_HOST_RESOLV) or HOST_RESOLV
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        return None
    return data.decode("utf-8", "surrogateescape")


def lane_text(host: str) -> str | None:
    """The lane's resolver file for the host's `host`, or None where the host's serves the
    lane as it is (no loopback nameserver)."""
    out: list[str] = []
    named = replaced = False
    for line in host.splitlines():
        server = _nameserver(line)
        if server is not None:
            named = True
            if _loopback(server):
                if not replaced:
                    out.append(f"nameserver {SLIRP_DNS}")
                replaced = True
                continue
        out.append(line)
    if not named:
        out.append(f"nameserver {SLIRP_DNS}")
    elif not replaced:
        return None
    return "\n".join([HEADER, *out]) + "\n"


def nameservers(text: str) -> list[str]:
    """The addresses a resolver file names, in its order."""
    return [server for line in text.splitlines() if (server := _nameserver(line)) is not None]


def _nameserver(line: str) -> str | None:
    words = line.split()
    return words[1] if len(words) >= 2 and words[0] == "nameserver" else None


def _loopback(word: str) -> bool:
    try:
        return ipaddress.ip_address(word.partition("%")[0]).is_loopback
    except ValueError:
        return False
