"""Families and handed files, as the model judges them (pure): `model/family.py` and the two
writer detectors, for the prober's holdings and the kernel's writes; and the stamp fields that
carry them. The real thing (xdist under a recorder) is tests/processes/test_xdist_family.py."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.engine.probeintake import ProbeIntake
from lanewatch.lanes.familyclaim import family_of_parent
from lanewatch.lanes.stamp import (
    META_DIR,
    OwnerState,
    Stamp,
    StampRead,
    StampStatus,
    parse_stamp,
    write_stamp,
)
from lanewatch.linux.procid import ProcessIdentity, boot_id, hostname, start_ticks
from lanewatch.model import model as m
from lanewatch.model import writers as wr
from lanewatch.model.detectors.foreign_writer import foreign_write
from lanewatch.model.detectors.unbound_writer import unbound_write
from lanewatch.model.family import Stamped, file_ids, handed, head, one_family
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.holdings import Holding, Owner
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.kinds import IncidentKind
from lanewatch.processes.prober import ProbeReport
from tests.kits.enginekit import make_stamp
from tests.processes.test_incidents import hold

MAIN, GW0, GW1, OTHER = "/r/c.pytest", "/r/c.pytest-gw0", "/r/c.pytest-gw1", "/r/c.agent"
LOG = (2049, 77)  # (device, inode) of the user's /tmp/log
OWNERS = {
    MAIN: Owner(MAIN, "pytest", "c", "/co", frozenset({10}), 10, 10, handed=frozenset({LOG})),
    GW0: Owner(GW0, "pytest-gw0", "c", "/co", frozenset({20}), 10, 20, family="c.pytest"),
    GW1: Owner(GW1, "pytest-gw1", "c", "/co", frozenset({30}), 10, 30, family="c.pytest"),
    OTHER: Owner(OTHER, "agent", "c", "/co", frozenset({40}), 40, 40, handed=frozenset()),
}
KEYS = list(OWNERS)


def find(holdings: list[Holding], **kw: object) -> list[str]:
    found = wr.writers(holdings, OWNERS, KEYS, roots=["/r"], shared=["/tmp"], at=1.0, **kw)  # type: ignore[arg-type]
    return [o.summary for o in found]


def test_head_and_one_family() -> None:
    assert head(GW0, "c.pytest") == MAIN == head(MAIN, None) == head(MAIN + "/", None)
    assert one_family(GW0, "c.pytest", MAIN, None)
    assert one_family(GW0, "c.pytest", GW1, "c.pytest")  # siblings
    assert not one_family(GW0, "c.pytest", OTHER, None)
    assert not one_family("/r/c.pytest-gw0", None, MAIN, None)  # a name alone is no family
    assert not one_family("/elsewhere/c.pytest-gw0", "c.pytest", MAIN, None)  # another root


def test_workers_writing_in_their_family_are_no_intruders() -> None:
    # A worker still bound to the main lane's variables, writing its capture file there.
    assert not find([hold(f"{MAIN}/tmp/#123", pid=20, namespace_env=MAIN)])
    # A worker (by its own stamp) in the main lane, and in a sibling's.
    assert not find([hold(f"{MAIN}/tmp/x", pid=20)])
    assert not find([hold(f"{GW1}/tmp/x", pid=20)])
    assert not find([hold(f"{GW0}/tmp/x", pid=10)])  # the main process in a worker's
    # Another lane is an intruder in every one of them.
    for victim in (MAIN, GW0, GW1):
        assert find([hold(f"{victim}/tmp/x", pid=40)]) != []
    # An unlinked file (O_TMPFILE, as pytest's capture makes) has no name to clobber.
    assert not find([hold(f"{OTHER}/tmp/#7", pid=20, deleted=True)])
    # A worker of the family in another lane is an intruder too.
    assert find([hold(f"{OTHER}/tmp/x", pid=20)]) != []


def test_an_owner_process_is_its_own_lane_whatever_it_inherited() -> None:
    """The xdist worker was started with `pytest`'s $LANEWATCH_NAMESPACE, and owns pytest-gw0:
    it is pytest-gw0's, here as in the kernel (`processes/pidlane.py`)."""
    (obs,) = wr.writers(
        [hold("/tmp/fixed.json", pid=20, namespace_env=MAIN)],
        OWNERS,
        KEYS,
        roots=["/r"],
        shared=["/tmp"],
        at=1.0,
    )
    assert obs.intruder["lane"] == "pytest-gw0" and obs.kind == IncidentKind.SHARED_FILE


def test_a_released_owner_holding_its_own_files_is_no_intruder() -> None:
    """A worker releases its lane when its tests end, then holds its files a moment: its stamp
    (released: no longer among the live owners) still names it."""
    owners = {k: v for k, v in OWNERS.items() if k != GW0}
    stamped = {GW0: Stamped(20, 1, "c.pytest")}
    held = [hold(f"{GW0}/tmp/#9", pid=20, namespace_env=MAIN)]
    assert not wr.writers(
        held, owners, KEYS, roots=["/r"], shared=["/tmp"], at=1.0, stamped=stamped
    )
    other = [hold(f"{GW0}/tmp/#9", pid=40)]
    assert wr.writers(other, owners, KEYS, roots=["/r"], shared=["/tmp"], at=1.0, stamped=stamped)
    # Another process with the released owner's pid (reused: other start ticks) is not it.
    reused = [hold(f"{GW0}/tmp/#9", pid=20, start_ticks=99, namespace_env=OTHER)]
    assert wr.writers(reused, owners, KEYS, roots=["/r"], shared=["/tmp"], at=1.0, stamped=stamped)


def test_a_claim_in_progress_is_no_intruder() -> None:
    """`Lane.claim` pins the namespace folder (its flock) before it writes the stamp: a worker
    seen in that moment, still bound to the main lane's variables, holds a stampless folder."""
    owners = {k: v for k, v in OWNERS.items() if k != GW0}
    pin = hold(GW0, pid=20, namespace_env=MAIN, access="read", directory=True)
    assert not wr.writers([pin], owners, KEYS, roots=["/r"], shared=["/tmp"], at=1.0, stamped={})
    inside = replace(pin, path=f"{GW0}/tmp", pid=40, namespace_env=OTHER)  # not the pin
    assert wr.writers([inside], owners, KEYS, roots=["/r"], shared=["/tmp"], at=1.0, stamped={})
    stamped = {GW0: Stamped(99, 1, None)}  # stamped by another: the folder held is no pin
    assert wr.writers(
        [replace(pin, namespace_env=OTHER, pid=40)],
        owners,
        KEYS,
        roots=["/r"],
        shared=["/tmp"],
        at=1.0,
        stamped=stamped,
    )


def test_a_handed_file_is_judged_by_what_it_is_not_by_fd_or_name() -> None:
    # The main process holds /tmp/log on the fd pytest's capture saved it to (not 0-2).
    assert not find([hold("/tmp/log", pid=10, fd=7, file_id=LOG)])
    # A worker writing it on its stderr (`2>&1`): its family's head was handed it.
    assert not find([hold("/tmp/log", pid=20, fd=2, file_id=LOG)])
    # The same name, another file: written by the lane, outside its lane.
    assert find([hold("/tmp/log", pid=10, fd=7, file_id=(2049, 78))]) != []
    # A lane that records its handed files is judged by them alone: stdout is no excuse.
    assert find([hold("/tmp/out.txt", pid=40, fd=1, file_id=(2049, 5))]) != []


def kw(
    path: str, *, namespace: str, family: str | None = None, handed: bool = False
) -> KernelWrite:
    return KernelWrite(
        path=path,
        time=1.0,
        event="close-write",
        size=1,
        sha256="0" * 64,
        pid=20,
        start_ticks=1,
        lane=namespace.rsplit(".", 1)[-1],
        namespace=namespace,
        checkout_id="c",
        checkout_path="/co",
        command=("python",),
        how="test",
        writer="pid 20",
        handed=handed,
        family=family,
    )


def test_the_kernels_writes_follow_the_same_rules() -> None:
    w = kw(f"{MAIN}/tmp/#5", namespace=GW0, family="c.pytest")
    assert foreign_write(w, MAIN, victim_owner=False) is None
    assert (
        foreign_write(
            replace(w, path=f"{GW1}/tmp/x"), GW1, victim_owner=False, victim_family="c.pytest"
        )
        is None
    )
    assert foreign_write(replace(w, family=None), MAIN, victim_owner=False) is not None
    assert foreign_write(w, OTHER, victim_owner=False) is not None
    shared = kw("/tmp/log", namespace=MAIN)
    assert unbound_write(shared, ["/r"]) is not None
    assert unbound_write(replace(shared, handed=True), ["/r"]) is None


def test_handed_sets() -> None:
    assert file_ids(None) is None and file_ids([[1, 2]]) == frozenset({(1, 2)})
    assert handed((1, 2), None, frozenset({(1, 2)})) and not handed(None, frozenset({(1, 2)}))
    assert not handed((1, 3), frozenset({(1, 2)}), None)


def _stamp() -> Stamp:
    return Stamp(
        lane="pytest-gw0",
        namespace="c.pytest-gw0",
        checkout_id="c",
        checkout_path="/co",
        host="h",
        boot_id="b",
        pid=20,
        start_ticks=1,
        user="u",
        uid=1000,
        command=["pytest"],
        started_at=1.0,
        heartbeat_at=1.0,
        heartbeat_interval=5.0,
    )


def test_the_stamp_carries_family_and_stdio_and_rejects_garbage() -> None:
    data = _stamp().to_json()
    assert "family" not in data and "stdio" not in data  # older shapes stay as they were
    full = {**data, "family": "c.pytest", "stdio": [[2049, 77]]}
    read = parse_stamp(json.dumps(full).encode())
    assert read.ok and read.stamp is not None
    assert read.stamp.family == "c.pytest" and read.stamp.stdio == [[2049, 77]]
    for bad in (
        {"family": "../x"},
        {"family": ""},
        {"family": 3},
        {"stdio": [[1]]},
        {"stdio": [["a", 1]]},
        {"stdio": [[1, -2]]},
        {"stdio": "x"},
    ):
        assert parse_stamp(json.dumps({**full, **bad}).encode()).status is StampStatus.GARBAGE, bad


def worker_stamped_on_disk(
    tmp_path: Path,
) -> tuple[Path, Path, Path, dict[str, m.NsRecord]]:
    """A lane `c.pytest` and its worker `c.pytest-gw0` whose stamp is on disk (pid 20) while
    the model knows both without one: (root, main, gw0, the model's namespaces)."""
    root = tmp_path / "root"
    main, gw0 = root / "c.pytest", root / "c.pytest-gw0"
    for ns in (main, gw0):
        (ns / META_DIR).mkdir(parents=True)
    stamp = replace(
        _stamp(), namespace=gw0.name, pid=20, host=hostname(), family="c.pytest", root=str(root)
    )
    write_stamp(gw0, stamp)
    known = {
        str(ns): m.NsRecord(str(ns), str(root), ns.name, StampRead(StampStatus.MISSING))
        for ns in (main, gw0)
    }
    return root, main, gw0, known


def test_a_stamp_the_model_has_not_seen_yet_is_read_from_disk(tmp_path: Path) -> None:
    """A worker writes in its new lane the moment its stamp is written; the prober may judge
    it before the tail tells the model. The stamp on disk says whose the lane is."""
    root, main, gw0, known = worker_stamped_on_disk(tmp_path)
    intake = ProbeIntake(
        [str(root)], namespaces=lambda: known, history=FileHistory(), host=hostname()
    )
    owners = {str(main): replace(OWNERS[MAIN], key=str(main))}
    worker = hold(f"{gw0}/tmp/basetemp.lock", pid=20, namespace_env=str(main))
    found = intake.probed(ProbeReport(1.0, {}, (worker,), owners))
    assert not [e for e in found.events if isinstance(e, m.Observed)]
    stranger = hold(f"{gw0}/tmp/basetemp.lock", pid=40, namespace_env=str(main))  # not its owner
    found = intake.probed(ProbeReport(1.0, {}, (stranger,), owners))
    assert not [e for e in found.events if isinstance(e, m.Observed)]  # main is gw0's family
    other = hold(f"{gw0}/tmp/x", pid=50, namespace_env=str(root / "c.agent"))
    found = intake.probed(ProbeReport(1.0, {}, (other,), owners))
    assert [e for e in found.events if isinstance(e, m.Observed)]


def test_a_worker_names_a_family_only_when_its_head_is_its_live_ancestor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    worker = root / "c.pytest-gw0"
    parent = ProcessIdentity(os.getppid(), start_ticks(os.getppid()), boot_id())
    me = ProcessIdentity.current()

    def head_named(**changes: object) -> str | None:
        ns = make_stamp(root, "pytest", **changes)
        monkeypatch.setenv("LANEWATCH_NAMESPACE", str(ns))
        return family_of_parent(root, worker)

    name = head_named(pid=parent.pid, start_ticks=parent.start_ticks)
    assert name is not None and name.endswith(".pytest")
    assert head_named(pid=parent.pid, start_ticks=parent.start_ticks, family="c.top") == "c.top"
    assert head_named(pid=me.pid, start_ticks=me.start_ticks) is None  # not an ancestor
    assert head_named(pid=parent.pid, start_ticks=parent.start_ticks + 1) is None  # reused pid
    assert head_named(pid=1, start_ticks=start_ticks(1)) is None  # everyone's ancestor
    released = {"state": OwnerState.RELEASED}
    assert head_named(pid=parent.pid, start_ticks=parent.start_ticks, **released) is None
    monkeypatch.setenv("LANEWATCH_NAMESPACE", str(tmp_path / "elsewhere" / "c.pytest"))
    assert family_of_parent(root, worker) is None  # another root
    monkeypatch.delenv("LANEWATCH_NAMESPACE")
    assert family_of_parent(root, worker) is None
