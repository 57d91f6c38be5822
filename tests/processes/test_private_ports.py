"""A `--fence net` lane's ports: read in its own network namespace (through one of its
processes), shown as private in `lanewatch ports`, `status --json` and the engine's view, and
never a port incident (no one else can bind or reach them there).

Real lanes in real network namespaces with real slirp4netns and real `http.server`s on their own
127.0.0.1; only loopback and the lanes' own namespaces are ever addressed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lanewatch.lanes.leases import Lease
from lanewatch.linux import netnsports, netsockets
from lanewatch.linux.netsockets import Listening
from lanewatch.linux.procid import start_ticks
from lanewatch.model.detectors import port_clash
from lanewatch.model.holdings import Holding, Owner
from lanewatch.model.kinds import IncidentKind
from lanewatch.model.ports import Listener, ports_cell, ports_from_json
from lanewatch.model.views import LanePort
from lanewatch.processes import privateports
from lanewatch.processes.prober import _listening_now, judge_all, probe
from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for
from tests.kits.contractkit import parsed
from tests.kits.enginekit import LaneProc, running, stamp_after_spawn, start_lane
from tests.kits.netfencekit import why_no_net_fence

# In the lane: wait for a file `go` in the working folder (no process starts meanwhile), then
# serve on 127.0.0.1 at each port of argv, in this one process.
LATE_SERVE = textwrap.dedent(
    """
    import http.server, os, sys, threading, time
    while not os.path.exists("go"):
        time.sleep(0.05)
    for port in sys.argv[1:]:
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", int(port)), http.server.SimpleHTTPRequestHandler
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
    while True:
        time.sleep(60)
    """
)


def _need_net_fence() -> None:
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")


# --- the detector: pure ---------------------------------------------------------------------

ROOT = "/r"
EPHEMERAL = (32768, 60999)


def _listener(lane: str, port: int, pid: int, *, private: bool) -> Listener:
    owner = Owner(f"{ROOT}/c.{lane}", lane, "c", "/co", frozenset({pid}), pid, pid)
    h = Holding(pid, 7, f"socket:[{pid}]", "socket", None, False, False, lane, None, (pid,), pid,
                ("server",), fd=3)  # fmt: skip
    sock = Listening("tcp", "127.0.0.1", port, pid, 0, private)
    return Listener(owner, "owner process", h, sock)


def test_a_private_port_is_no_collision_even_on_another_lanes_lease() -> None:
    leases = [Lease(20000, 10, 0, "u", 1, 1, "b", "h", "web", f"{ROOT}/c.web", "c", 0.0)]
    # api binds web's leased port in its own network namespace: web's $PORT is untouched.
    assert port_clash.leased(_listener("api", 20003, 1, private=True), leases, at=1.0) is None
    assert port_clash.leased(_listener("api", 20003, 1, private=False), leases, at=1.0) is not None
    # Two lanes on :3000, each in its own namespace: nothing shared, and nothing remembered
    # (a host lane on :3000 later takes nothing from them either).
    memory = port_clash.PortMemory()
    for i, lane in enumerate(("a", "b")):
        one = _listener(lane, 3000, i + 1, private=True)
        assert port_clash.shared(one, [], memory, EPHEMERAL, 1.0) == []
    host = _listener("c", 3000, 9, private=False)
    assert port_clash.shared(host, [], memory, EPHEMERAL, 2.0) == []
    assert set(memory.seen[("tcp", 3000)]) == {f"{ROOT}/c.c"}


def test_a_private_port_says_so_in_the_cell() -> None:
    mine = LanePort("tcp", "127.0.0.1", 3000, 1, private=True)
    assert ports_cell([mine]) == "3000 private"  # fits the 12 columns of PORTS
    host = LanePort("tcp", "127.0.0.1", 8000, 1)
    assert ports_cell([mine, host]) == "3000 (private) 8000"
    assert LanePort("udp", "::1", 53, 1, private=True).shown == "53/udp (private)"


def test_a_far_hosts_private_port_comes_back_from_its_json() -> None:
    back = ports_from_json([{"proto": "tcp", "address": "127.0.0.1", "port": 3000, "pid": 7,
                             "command": "x", "private": True}])  # fmt: skip
    assert [(p.port, p.private) for p in back] == [(3000, True)]
    old = ports_from_json([{"proto": "tcp", "address": "::1", "port": 80, "pid": 7}])
    assert [p.private for p in old] == [False]  # a far lanewatch before `private`


def test_no_net_fenced_lane_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a lane whose stamp names a network namespace, no namespace is read: a spy on the
    two readers (the only stand-in here; the stamps are this test's own lanes')."""

    def refuse(*_: object) -> None:
        raise AssertionError("a namespace was read with no net-fenced lane")

    monkeypatch.setattr(netnsports, "counts", refuse)
    monkeypatch.setattr(netnsports, "listening", refuse)
    nets = privateports.PrivateNets()
    assert nets.pairs() == frozenset()
    report = probe({}, [], full=False, private=nets)
    assert report.listening == {}


# --- real lanes -------------------------------------------------------------------------------


@pytest.mark.unprivileged
@pytest.mark.processes
def test_two_net_fenced_lanes_on_3000_are_listed_private(
    spawn: Spawn, worktrees: tuple[Path, Path]
) -> None:
    _need_net_fence()
    main = worktrees[0]
    for checkout in worktrees:
        spawn(
            [*LANEWATCH, "run", "--lane", "web", "--fence", "net", "--",
             sys.executable, "-m", "http.server", "3000", "--bind", "127.0.0.1"],
            cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def both() -> list[dict[str, object]] | None:
        done = lanewatch("ports", "--json", cwd=main)
        listeners = parsed("ports", done.stdout)["listeners"] if done.returncode == 0 else []
        return listeners if len(listeners) == 2 else None

    listeners = wait_for(both, timeout=30, what="both lanes' :3000 in `lanewatch ports`")
    assert {(li["port"], li["private"], li["lane"]) for li in listeners} == {(3000, True, "web")}
    assert len({li["namespace"] for li in listeners}) == 2
    # Not on the host's loopback: that :3000 is nobody's here.
    assert not any(s.port == 3000 for s in netsockets.listening())

    done = lanewatch("ports", "3000", cwd=main)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith(":3000 lane web")]
    assert len(lines) == 2 and all("(private" in line for line in lines), done.stdout
    for li in listeners:  # each names its checkout
        label = str(li["checkout_id"]).split("-")[0][:4]
        assert any(label in line for line in lines), (label, lines)

    status = parsed("status", lanewatch("status", "--json", cwd=main).stdout)
    for ns in status["namespaces"]:
        if ns["key"] in {li["namespace"] for li in listeners}:
            assert [(p["port"], p["private"]) for p in ns["ports"]] == [(3000, True)]

    # The reader refuses any process but the lane's own in its own namespace.
    stamp = stamp_after_spawn(Path(str(listeners[0]["namespace"])))
    assert stamp.net_ns and stamp.child_pid and stamp.child_start_ticks
    pid, ticks = stamp.child_pid, stamp.child_start_ticks
    found = netnsports.listening(pid, ticks, stamp.net_ns)
    assert found is not None and {(s.port, s.private) for s in found} >= {(3000, True)}
    assert netnsports.listening(pid, ticks + 1, stamp.net_ns) is None  # another process
    ours = netnsports.our_net()
    assert ours is not None and netnsports.listening(pid, ticks, ours) is None  # not its net
    me = start_ticks(os.getpid())
    assert me is not None and netnsports.listening(os.getpid(), me, ours) is None  # the host's


@pytest.mark.unprivileged
@pytest.mark.processes
def test_a_lane_that_starts_listening_in_its_namespace_wakes_the_prober(
    worktrees: tuple[Path, Path], tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Between probes the prober looks at the listening sockets (`_listening_now`): a
    net-fenced lane's namespace is looked at through its socket counts, and its tables read
    again when they moved, so a listener it opens (no process started) changes the look."""
    _need_net_fence()
    main = worktrees[0]
    root = tmp_path / "root"
    root.mkdir()
    lane = start_lane(procs, main, root, "web", (sys.executable, "-c", LATE_SERVE, "3000"),
                      fence="net")  # fmt: skip
    stamps = {str(lane.namespace): lane.stamp}
    nets = privateports.PrivateNets()
    assert nets.read(stamps, judge_all(stamps, 0.0)) == {}  # read through it: nothing yet
    before = _listening_now(nets)
    (main / "go").write_text("")

    def heard() -> set[int]:
        return {inode for port, inode in nets.pairs() if port == 3000}

    (inode,) = wait_for(heard, timeout=30, what="the lane's :3000 in the look between probes")
    after = _listening_now(nets)
    assert inode in after and inode not in before
    # At the next probe, the same reading (the counts did not move since): private, by link.
    found = nets.read(stamps, judge_all(stamps, 0.0))
    assert {(s.port, s.private) for s in found.values()} == {(3000, True)}


@pytest.mark.unprivileged
@pytest.mark.processes
def test_private_lanes_on_one_port_and_on_a_leased_one_make_no_incident(
    worktrees: tuple[Path, Path], tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """web and api both serve :3000 in their own namespaces, and api also serves a port of
    web's lease there: the engine lists every one as private and calls no port incident (they
    start listening after the engine saw the lanes, with no process started meanwhile)."""
    _need_net_fence()
    main, side = worktrees
    root = tmp_path / "root"
    root.mkdir()
    with running([root]) as (_engine, rec):
        web = start_lane(procs, main, root, "web", (sys.executable, "-c", LATE_SERVE, "3000"),
                         fence="net")  # fmt: skip
        leased = web.stamp.ports
        assert leased is not None and web.stamp.net_ns
        theirs = leased[0] + 3  # in web's lease
        api = start_lane(
            procs, side, root, "api", (sys.executable, "-c", LATE_SERVE, "3000", str(theirs)),
            fence="net",
        )  # fmt: skip
        assert api.stamp.net_ns
        for lane in (web, api):
            wait_for(lambda lane=lane: rec.view(lane.namespace) is not None, what="the lanes seen")
        (main / "go").write_text("")
        (side / "go").write_text("")

        def ports_of(lane: LaneProc) -> set[tuple[int, bool]]:
            view = rec.view(lane.namespace)
            return {(p.port, p.private) for p in view.ports} if view is not None else set()

        wait_for(lambda: ports_of(web) == {(3000, True)}, timeout=30, what="web's :3000 private")
        want = {(3000, True), (theirs, True)}
        wait_for(lambda: ports_of(api) == want, timeout=30, what="api's two ports private")
        with rec.lock:
            kinds = {i.kind for i in rec.picture.incidents.values()}
    assert not kinds & {IncidentKind.LEASED_PORT.value, IncidentKind.SHARED_PORT.value}, kinds
