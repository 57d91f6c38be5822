"""A net-fenced lane finds names where the host's resolver is on loopback (systemd-resolved's
127.0.0.53, dnsmasq's 127.0.0.1): its /etc/resolv.conf names slirp4netns's 10.0.2.3, which asks
the host's resolver from the host's network (`runner/netdns.py`). Real lanes, real namespaces,
real slirp4netns; the host file is one under tmp_path (`$LANEWATCH_HOST_RESOLV`), or, as root,
bound over /etc/resolv.conf in a mount namespace of the test's own, beside a real resolver on a
loopback address of its own (tests/kits/tinydns.py)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.lanes.lane import locate
from lanewatch.runner import netdns
from tests.conftest import LANEWATCH, Spawn
from tests.kits.netfencekit import why_no_net_fence
from tests.kits.tinydns import TinyResolver

pytestmark = [pytest.mark.unprivileged, pytest.mark.processes]

SHOW = [sys.executable, "-c", "print(open('/etc/resolv.conf').read(), end='')"]


@pytest.fixture
def net_fence() -> None:
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")


def _run(
    spawn: Spawn, cwd: Path, cmd: list[str], env: dict[str, str], prefix: list[str] | None = None
) -> str:
    argv = [*(prefix or []), *LANEWATCH, "run", "--lane", "dns", "--fence", "net", "--", *cmd]
    proc = spawn(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert b"private network" not in err, err.decode()  # it got the network namespace
    return out.decode()


def test_a_lane_asks_slirps_forwarder_where_the_hosts_resolver_is_on_loopback(
    net_fence: None, spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    host = tmp_path / "stub-resolv.conf"
    host.write_text("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n")
    before = Path(netdns.HOST_RESOLV).read_bytes()
    env = {**os.environ, netdns.ENV_HOST_RESOLV: str(host)}
    seen = _run(spawn, repo, SHOW, env).splitlines()
    assert f"nameserver {netdns.SLIRP_DNS}" in seen
    assert "options edns0 trust-ad" in seen and "search lan" in seen
    assert not any("127.0.0.53" in line for line in seen)
    assert Path(netdns.HOST_RESOLV).read_bytes() == before  # the host's own file is untouched
    # Outside the lane the host's file is what it was; the lane's copy is lanewatch's own.
    kept = locate("dns", checkout=repo).namespace / ".lanewatch" / netdns.LANE_RESOLV
    assert kept.read_text().splitlines()[1:] == seen[1:]


def test_a_lane_keeps_the_hosts_resolver_where_it_is_not_on_loopback(
    net_fence: None, spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    host = tmp_path / "resolv.conf"
    host.write_text("nameserver 192.0.2.1\n")
    env = {**os.environ, netdns.ENV_HOST_RESOLV: str(host)}
    assert _run(spawn, repo, SHOW, env) == Path(netdns.HOST_RESOLV).read_text()
    assert not (locate("dns", checkout=repo).namespace / ".lanewatch" / netdns.LANE_RESOLV).exists()


def test_a_name_is_found_through_the_hosts_loopback_resolver(
    net_fence: None, spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("a resolver on port 53 and a mount over /etc/resolv.conf need root")
    # A loopback address of this test's own: nothing else listens there, in parallel runs too.
    address = (
        f"127.{random.randrange(1, 255)}.{random.randrange(0, 256)}.{random.randrange(2, 255)}"
    )
    host = tmp_path / "stub-resolv.conf"
    host.write_text(f"nameserver {address}\noptions timeout:2 attempts:3\n")
    # The host's file, as both lanewatch and slirp4netns read it, in a mount namespace of ours.
    bound = ["unshare", "--mount", "--propagation", "private", "--"]
    bound += ["sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(host)]
    env = {k: v for k, v in os.environ.items() if k != netdns.ENV_HOST_RESOLV}
    look = [
        sys.executable,
        "-c",
        "import socket; print(socket.gethostbyname('probe.lanewatch.test'))",
    ]
    with TinyResolver(address, {"probe.lanewatch.test": "192.0.2.77"}) as resolver:
        assert _run(spawn, repo, look, env, prefix=bound).strip() == "192.0.2.77"
    assert resolver.asked >= 1
