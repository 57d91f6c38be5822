"""Port incidents: a lane on another lane's leased port (`leased-port`, the victim the
leaseholder) and lanes on one port outside their leases (`shared-port`).

The detector is pure (synthetic listeners); the journey runs real lanes of two worktrees and a
real engine. Only loopback is ever bound or addressed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lanewatch.lanes.leases import Lease
from lanewatch.linux import netsockets
from lanewatch.linux.netsockets import Listening
from lanewatch.model.detectors import port_clash
from lanewatch.model.family import Stamped
from lanewatch.model.holdings import Holding, Owner
from lanewatch.model.kinds import IncidentKind
from lanewatch.model.ports import Listener, PortMemory
from tests.conftest import wait_for
from tests.kits.enginekit import running, start_lane

ROOT = "/r"
EPHEMERAL = (32768, 60999)


def _lease(lane: str, first: int) -> Lease:
    return Lease(first, 10, 0, "u", 1, 1, "b", "h", lane, f"{ROOT}/c.{lane}", "c", 0.0)


def _listener(lane: str, port: int, family: str | None = None, pid: int = 100) -> Listener:
    owner = Owner(f"{ROOT}/c.{lane}", lane, "c", "/co", frozenset({pid}), pid, pid, family=family)
    h = Holding(pid, 7, f"socket:[{pid}]", "socket", None, False, False, lane, None, (pid,), pid,
                ("server",), fd=3)  # fmt: skip
    return Listener(owner, "owner process", h, Listening("tcp", "127.0.0.1", port, pid, 0))


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
