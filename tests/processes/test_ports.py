"""Sockets seen: /proc/net parsed in the Linux layer, listening sockets mapped to
lanes through the prober's fd readlinks, shown by `status` and `lanewatch ports`.

Only loopback is ever bound or addressed."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from lanewatch.lanes import leases
from lanewatch.linux import netsockets
from lanewatch.model.ports import ports_cell
from lanewatch.model.views import LanePort
from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0
   1: 0100007F:0BB9 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0
   2: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0
   3: garbage
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 77 1 0
"""  # noqa: E501
UDP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
 100: 0100007F:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 55 2 0
 101: 0100007F:14EA 0100007F:0035 01 00000000:00000000 00:00000000 00000000  1000        0 56 2 0
"""


def test_the_tables_are_parsed_listening_only() -> None:
    tcp = netsockets.parse(TCP, "tcp")
    assert [(s.address, s.port, s.inode, s.uid) for s in tcp] == [("127.0.0.1", 3000, 4242, 1000)]
    assert tcp[0].link == "socket:[4242]" and tcp[0].loopback
    (six,) = netsockets.parse(TCP6, "tcp")
    assert (six.address, six.port, six.inode) == ("::1", 8080, 77)
    (udp,) = netsockets.parse(UDP, "udp")  # the connected one is a client, not a listener
    assert (udp.proto, udp.port) == ("udp", 5353)
    assert netsockets.parse("", "tcp") == []


def test_the_cell_stays_narrow() -> None:
    ports = [LanePort("tcp", "127.0.0.1", n, 1) for n in (3000, 3001, 3002)]
    assert ports_cell(ports[:2]) == "3000 3001"
    assert ports_cell(ports) == "3000 +2"
    v6 = LanePort("tcp", "::1", 3000, 1)
    assert ports_cell([ports[0], v6]) == "3000"  # one port on both families counts once
    assert ports_cell([LanePort("udp", "127.0.0.1", 53, 1)]) == "53/udp"


def _serve(spawn: Spawn, checkout: Path, lane: str) -> None:
    script = 'exec python3 -m http.server --bind 127.0.0.1 "$PORT"'
    spawn(
        [*LANEWATCH, "run", "--lane", lane, "--", "sh", "-c", script],
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _served(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.unprivileged
@pytest.mark.processes
def test_two_worktrees_serve_on_their_own_ports_and_ports_names_the_lane(
    worktrees: tuple[Path, Path], spawn: Spawn
) -> None:
    main, side = worktrees
    _serve(spawn, main, "web")
    _serve(spawn, side, "web")
    held = wait_for(lambda: len(found := leases.read_leases()) == 2 and found, what="two leases")
    first, second = (lease.first for lease in held)
    assert first != second and abs(first - second) >= 10
    for lease in held:
        wait_for(lambda lease=lease: _served(lease.first), timeout=30, what=f":{lease.first}")

    done = lanewatch("ports", str(first), cwd=main)
    assert done.returncode == 0, done.stderr
    owner = next(lease for lease in held if lease.first == first)
    assert f":{first} lane web" in done.stdout
    assert owner.checkout_id.split("-")[0] in done.stdout  # the checkout: which of the two

    report = json.loads(lanewatch("ports", "--json", cwd=main).stdout)
    assert report["schema"] == "lanewatch.ports/1"
    on = {(li["port"], li["namespace"], li["in_own_lease"]) for li in report["listeners"]}
    assert on == {(lease.first, lease.namespace, True) for lease in held}

    status = json.loads(lanewatch("status", "--json", cwd=main).stdout)
    by_key = {ns["key"]: ns for ns in status["namespaces"]}
    for lease in held:
        ns = by_key[lease.namespace]
        assert ns["lease"] == {"first": lease.first, "last": lease.last, "count": 10}
        assert [p["port"] for p in ns["ports"]] == [lease.first]

    free = first + 5  # leased, nobody listens
    missing = lanewatch("ports", str(free), cwd=main)
    assert missing.returncode == 8
    assert "no lane of the known roots listens" in missing.stderr


def test_a_far_hosts_lease_and_ports_come_back_from_its_json() -> None:
    from lanewatch.cli.lanes.portsview import ports_json
    from lanewatch.hosts.farviews import view
    from lanewatch.model.ports import lease_from_json, ports_from_json
    from lanewatch.model.views import NamespaceView, NsState

    ports = (LanePort("tcp", "127.0.0.1", 20000, 42, "srv"), LanePort("udp", "::1", 53, 43))
    near = NamespaceView(
        "/r/ns", "/r", "ns", "web", None, None, None, 1, None, (), NsState.LIVE, "", "known",
        None, None, None, None, None, None, None, None, (), "ok", (),
        lease=(20000, 10), ports=ports,
    )  # fmt: skip
    data = {"key": "/r/ns", "root": "/r", "name": "ns", "state": "live", **ports_json(near)}
    far = view("far", data)
    assert (far.lease, far.ports) == ((20000, 10), ports)
    assert lease_from_json({"first": "1", "count": 2}) is None
    assert ports_from_json([{"proto": "sctp", "address": "x", "port": 1, "pid": 1}, 7]) == ()


def test_the_lane_table_has_a_narrow_ports_column() -> None:
    from lanewatch.tui.widgets.lane_table import Column
    from lanewatch.tui.widgets.view_columns import LANES, lanes_row

    names = [c.key for c in LANES if isinstance(c, Column)]
    assert "ports" in names
    from lanewatch.model.views import NamespaceView, NsState

    ns = NamespaceView(
        "/r/ns", "/r", "ns", "[red]web", None, None, None, 1, None, (), NsState.LIVE, "", "known",
        None, None, None, None, None, None, None, None, (), "ok", (),
        ports=tuple(LanePort("tcp", "127.0.0.1", p, 1) for p in (20000, 20001, 20002)),
    )  # fmt: skip
    row = lanes_row(ns, 0.0)
    assert str(row[names.index("ports")]) == "20000 +2"


def test_the_cheap_change_check_agrees_with_the_tables() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        inode = os.fstat(s.fileno()).st_ino
        assert inode in netsockets.listening_inodes()
        assert inode in {x.inode for x in netsockets.listening()}
        assert s.getsockname()[1] in netsockets.ports_listening()
    assert inode not in netsockets.listening_inodes()  # closed: gone from both
    assert inode not in {x.inode for x in netsockets.listening()}


def test_the_tables_are_parsed_again_only_when_a_listener_came_or_went() -> None:
    import socket

    tables = netsockets.Tables()
    before = {s.inode for s in tables.listening()}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        inode = os.fstat(s.fileno()).st_ino
        assert inode not in before
        seen = tables.listening()
        assert inode in {x.inode for x in seen}
        assert inode in {x.inode for x in tables.listening()}  # asked again: still there
    assert inode not in {x.inode for x in tables.listening()}  # closed: parsed again, gone
