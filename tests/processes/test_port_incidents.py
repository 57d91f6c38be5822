"""Port incidents: a lane on another lane's leased port (`leased-port`, the victim the
leaseholder) and lanes on one port outside their leases (`shared-port`).

The detector is pure (synthetic listeners); the journey runs real lanes of two worktrees and a
real engine. Only loopback is ever bound or addressed."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.lanes.leases import Lease
from lanewatch.linux import netsockets
from lanewatch.model.detectors import port_clash
from lanewatch.model.family import Stamped
from lanewatch.model.kinds import IncidentKind
from lanewatch.model.ports import Listener, PortMemory
from lanewatch.model.views import Incident, NsState
from tests.conftest import wait_for
from tests.kits.attributionkit import listener
from tests.kits.enginekit import LaneProc, running, start_lane
from tests.kits.portkit import free_fixed_port

ROOT = "/r"
EPHEMERAL = (32768, 60999)


def _lease(lane: str, first: int) -> Lease:
    return Lease(first, 10, 0, "u", 1, 1, "b", "h", lane, f"{ROOT}/c.{lane}", "c", 0.0)


def _listener(lane: str, port: int, family: str | None = None, pid: int = 100) -> Listener:
    return listener(lane, port, pid, family)


def test_a_lane_on_another_lanes_lease_is_a_collision_naming_both() -> None:
    leases = [_lease("web", 20000), _lease("api", 20010)]
    obs = port_clash.leased(_listener("api", 20003), leases, at=1.0)
    assert obs is not None and obs.kind == IncidentKind.LEASED_PORT
    assert obs.victim == f"{ROOT}/c.web" and obs.victim_lane == "web"
    assert obs.intruder["lane"] == "api"
    assert "api" in obs.summary and "web" in obs.summary and "127.0.0.1:20003" in obs.summary
    assert port_clash.leased(_listener("web", 20003), leases, at=1.0) is None  # its own
    assert port_clash.leased(_listener("api", 21000), leases, at=1.0) is None  # nobody's


def test_a_family_shares_its_heads_lease() -> None:
    leases = [_lease("pytest", 20000)]
    worker = _listener("pytest-gw0", 20000, family="c.pytest")
    assert port_clash.leased(worker, leases, at=1.0) is None
    assert port_clash.in_own_lease(worker, leases, None)
    head = _listener("pytest", 20000)
    worker_lease = [_lease("pytest-gw0", 20000)]
    stamped = {f"{ROOT}/c.pytest-gw0": Stamped(1, 1, "c.pytest")}
    assert port_clash.leased(head, worker_lease, at=1.0, stamped=stamped) is None


def test_one_fixed_port_of_two_lanes_is_shared_an_ephemeral_one_is_not() -> None:
    memory = PortMemory()
    assert port_clash.shared(_listener("a", 8000, pid=1), [], memory, EPHEMERAL, 1.0) == []
    found = port_clash.shared(_listener("b", 8000, pid=2), [], memory, EPHEMERAL, 2.0)
    assert {o.intruder["lane"] for o in found} == {"a", "b"}
    assert {o.id for o in found} == {found[0].id} and found[0].kind == IncidentKind.SHARED_PORT
    assert found[0].path == ":8000"
    # Each listener's evidence is dated when it was seen listening, not when b was.
    assert {o.intruder["lane"]: o.evidence.time for o in found} == {"a": 1.0, "b": 2.0}
    # The same lane again, a lane of its family, a port the kernel picked: nothing.
    assert port_clash.shared(_listener("a", 8000, pid=3), [], memory, EPHEMERAL, 3.0) != []
    memory = PortMemory()
    port_clash.shared(_listener("p", 8001, pid=1), [], memory, EPHEMERAL, 1.0)
    kin = _listener("p-gw0", 8001, family="c.p", pid=2)
    assert port_clash.shared(kin, [], memory, EPHEMERAL, 2.0) == []
    port_clash.shared(_listener("a", 40000, pid=1), [], memory, EPHEMERAL, 1.0)
    assert port_clash.shared(_listener("b", 40000, pid=2), [], memory, EPHEMERAL, 2.0) == []
    # A port of some lane's lease is never "shared": it is that lease's (leased-port).
    leases = [_lease("web", 20000)]
    port_clash.shared(_listener("a", 20001, pid=1), leases, memory, EPHEMERAL, 1.0)
    assert port_clash.shared(_listener("b", 20001, pid=2), leases, memory, EPHEMERAL, 2.0) == []


def test_a_port_one_run_used_after_anothers_run_was_over_is_not_shared() -> None:
    """agent-1 served :5173 and its run ended; agent-2 serving :5173 later takes nothing from
    it. A run still alive (between two servers), or one that still listens, is fought with."""
    a, b, c = _listener("a", 5173, pid=1), _listener("b", 5173, pid=2), _listener("c", 5173, pid=3)
    live = {a.owner.key: Stamped(1, 1), b.owner.key: Stamped(2, 1), c.owner.key: Stamped(3, 1)}
    memory = PortMemory()
    assert port_clash.shared(a, [], memory, EPHEMERAL, 1.0, live) == []
    ended = {**live, a.owner.key: Stamped(1, 1, over=True)}
    assert port_clash.shared(b, [], memory, EPHEMERAL, 2.0, ended) == []  # a's run was over
    found = port_clash.shared(c, [], memory, EPHEMERAL, 3.0, ended)  # b's run is alive
    assert {o.intruder["lane"] for o in found} == {"b", "c"}
    # Over, but still listening (a server its lane left behind): at once, so shared.
    memory = PortMemory()
    port_clash.shared(a, [], memory, EPHEMERAL, 1.0, live)
    still = frozenset({(1, a.socket.inode)})
    found = port_clash.shared(b, [], memory, EPHEMERAL, 2.0, ended, still)
    assert {o.intruder["lane"] for o in found} == {"a", "b"}
    # Another run in a's namespace since (its stamp names another pid), or a's namespace
    # cleared: a's first run is over.
    for now in ({**live, a.owner.key: Stamped(9, 1)}, {b.owner.key: Stamped(2, 1)}):
        memory = PortMemory()
        port_clash.shared(a, [], memory, EPHEMERAL, 1.0, live)
        assert port_clash.shared(b, [], memory, EPHEMERAL, 2.0, now) == []
    # a's next run listens again while b's is alive: shared.
    again = _listener("a", 5173, pid=9)
    memory = PortMemory()
    port_clash.shared(a, [], memory, EPHEMERAL, 1.0, live)
    port_clash.shared(b, [], memory, EPHEMERAL, 2.0, ended)
    runs = {**live, a.owner.key: Stamped(9, 1)}
    found = port_clash.shared(again, [], memory, EPHEMERAL, 3.0, runs)
    assert {o.intruder["lane"] for o in found} == {"a", "b"}


def _listens(port: int) -> bool:
    return any(s.port == port for s in netsockets.listening())


SERVE = 'exec python3 -m http.server --bind 127.0.0.1 "$1"'


@pytest.mark.unprivileged
@pytest.mark.processes
def test_a_lane_binding_the_others_leased_port_makes_an_incident_within_2s(
    worktrees: tuple[Path, Path], tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    main, side = worktrees
    root = tmp_path / "root"
    root.mkdir()
    web = start_lane(procs, main, root, "web", ("sh", "-c", "exec sleep 60"))
    leased = web.stamp.ports
    assert leased is not None
    port = leased[0] + 3  # in web's lease; nobody listens on it
    with running([root]) as (_engine, rec):
        intruder = start_lane(procs, side, root, "api", ("sh", "-c", SERVE, "sh", str(port)))
        wait_for(lambda: _listens(port), timeout=30, what=f"the intruder listening on :{port}")

        def incident() -> object:
            with rec.lock:
                return next(
                    (
                        i
                        for i in rec.picture.incidents.values()
                        if i.kind == IncidentKind.LEASED_PORT.value
                    ),
                    None,
                )

        found = wait_for(incident, timeout=2.0, what="a leased-port incident")
    assert found.victim == str(web.namespace)
    assert found.intruder["lane"] == "api"
    assert found.intruder["namespace"] == str(intruder.namespace)
    assert "web" in found.summary and "api" in found.summary


# Listens on 127.0.0.1:ARGV[1] until the test knocks (connects), then closes the socket; with
# ARGV[2] "stay" the lane's run goes on (a lane between two servers), else it ends.
SERVE_ONCE = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "s.accept()[0].close()\n"
    "s.close()\n"
    "if sys.argv[2:] == ['stay']:\n"
    "    time.sleep(600)\n"
)


def _knock(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass


@pytest.mark.unprivileged
@pytest.mark.processes
def test_a_fixed_port_is_shared_by_runs_alive_together_not_by_one_after_an_ended_one(
    worktrees: tuple[Path, Path], tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """a serves a fixed port and ends; b serves it (a's run was over: no fight), stops serving
    and stays; c serves it: one incident, naming b and c, never a."""
    main, side = worktrees
    root = tmp_path / "root"
    root.mkdir()
    port = free_fixed_port()
    with running([root]) as (_engine, rec):

        def served(lane: LaneProc) -> bool:
            view = rec.view(lane.namespace)
            return view is not None and any(p.port == port for p in view.ports)

        a = start_lane(procs, main, root, "a", (sys.executable, "-c", SERVE_ONCE, str(port)))
        wait_for(lambda: served(a), timeout=30, what=f"a seen serving :{port}")
        _knock(port)
        a.proc.wait(timeout=30)

        def released(lane: LaneProc) -> bool:
            view = rec.view(lane.namespace)
            return view is not None and view.state is NsState.RELEASED

        wait_for(lambda: released(a), timeout=30, what="a's run seen over")
        b = start_lane(
            procs, side, root, "b", (sys.executable, "-c", SERVE_ONCE, str(port), "stay")
        )
        wait_for(lambda: served(b), timeout=30, what=f"b seen serving :{port}")
        _knock(port)
        wait_for(lambda: not _listens(port), timeout=30, what=f"b no longer on :{port}")
        start_lane(procs, main, root, "c", (sys.executable, "-c", SERVE_ONCE, str(port)))

        def incidents() -> list[Incident]:
            with rec.lock:
                found = rec.picture.incidents.values()
                return [i for i in found if i.kind == IncidentKind.SHARED_PORT.value]

        shared = wait_for(incidents, timeout=30, what="a shared-port incident")
        _knock(port)  # c may end
    assert len(shared) == 1, shared
    lanes = {w.get("lane") for w in shared[0].writers}
    assert lanes == {"b", "c"}, shared[0].summary
