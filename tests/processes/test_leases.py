"""Port leases (lanes/leases.py): blocks from one machine-wide range, taken under the folder's
lock, in the stamp and the command's environment, freed with the lane, reclaimed from the dead."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from lanewatch.lanes import leases
from lanewatch.lanes.lane import Lane
from lanewatch.lanes.stamp import StampStatus, parse_stamp, read_stamp
from lanewatch.linux.procid import ProcessIdentity, boot_id
from tests.conftest import LANEWATCH

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


def _holder(lane: str = "a", identity: ProcessIdentity | None = None) -> leases.Holder:
    me = identity or ProcessIdentity.current()
    return leases.Holder(me, "u", lane, f"/nowhere/{lane}", "c-1")


def _dead_identity() -> ProcessIdentity:
    """A process that ran and was reaped: its pid names nobody (or another process) now."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        identity = ProcessIdentity.of(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert identity.boot_id == boot_id()
    return identity


def test_two_lanes_get_disjoint_blocks_in_the_stamp_and_the_environment(repo: Path) -> None:
    with Lane("one", checkout=repo) as a, Lane("two", checkout=repo) as b:
        pa, pb = a.env()["PORT"], b.env()["PORT"]
        assert pa != pb
        assert a.env()["LANEWATCH_PORTS"] == f"{pa}-{int(pa) + 9}"
        assert read_stamp(a.namespace).stamp.ports == [int(pa), 10]  # type: ignore[union-attr]
        held = leases.read_leases()
        assert [(lease.lane, lease.first) for lease in held] == [
            ("one", int(pa)),
            ("two", int(pb)),
        ]
        assert held[0].namespace == str(a.namespace)
    assert leases.read_leases() == []  # freed with the lanes
    assert list(leases.lease_dir().iterdir()) == []


def test_block_size_and_range_are_configurable(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANEWATCH_PORT_RANGE", "21000-21005")
    monkeypatch.setenv("LANEWATCH_PORT_BLOCK", "3")
    with (
        Lane("a", checkout=repo) as a,
        Lane("b", checkout=repo) as b,
        Lane("c", checkout=repo) as c,
    ):
        assert a.env()["LANEWATCH_PORTS"] == "21000-21002"
        assert b.env()["LANEWATCH_PORTS"] == "21003-21005"
        assert "PORT" not in c.env()  # the range is full: the lane runs all the same
        assert c.ports.note is not None and "no free block of 3 ports" in c.ports.note
        assert read_stamp(c.namespace).stamp.ports is None  # type: ignore[union-attr]
    monkeypatch.setenv("LANEWATCH_PORT_BLOCK", "0")
    with Lane("d", checkout=repo) as d:
        assert "PORT" not in d.env() and d.ports.note is None


def test_a_dead_owners_lease_is_reclaimed(tmp_path: Path) -> None:
    span = (22000, 22009)
    dead = leases.take(_holder("gone", _dead_identity()), 10, span=span, busy=())
    assert leases.read_leases(live_only=False) == [dead]
    assert leases.read_leases() == []  # not live: its owner is gone
    mine = leases.take(_holder("new"), 10, span=span, busy=())
    assert mine.first == 22000 and mine.lane == "new"
    assert [lease.lane for lease in leases.read_leases(live_only=False)] == ["new"]


def test_a_port_in_use_is_never_leased() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        lease = leases.take(_holder(), 5, span=(port, port + 9))  # busy: read from /proc/net
    assert lease.first == port + 5


def test_planted_files_and_a_symlinked_folder_are_never_followed(tmp_path: Path) -> None:
    folder = leases.lease_dir()
    folder.mkdir()
    target = tmp_path / "victim"
    target.write_text("keep\n")
    uid = os.getuid()
    (folder / f"23000.{uid}.json").symlink_to(target)  # a neighbour's trap under our name
    os.mkfifo(folder / f"23005.{uid}.json")
    (folder / "23010.999999.json").write_text(json.dumps({"first": 23010}))  # garbage
    lease = leases.take(_holder(), 5, span=(23000, 23014), busy=())
    assert lease.first in (23000, 23005, 23010)
    assert target.read_text() == "keep\n"  # the symlink was replaced, never written through
    assert (folder / lease.file_name).is_file() and not (folder / lease.file_name).is_symlink()
    assert [found.first for found in leases.read_leases()] == [lease.first]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "linked"
    link.symlink_to(elsewhere)
    with pytest.raises(leases.LeaseUnavailable, match="not a folder"):
        leases.take(_holder(), 5, path=link, span=(23000, 23014), busy=())
    assert list(elsewhere.iterdir()) == []


def test_the_folder_is_shared_sticky_and_free_only_removes_its_own(tmp_path: Path) -> None:
    lease = leases.take(_holder(), 10, span=(24000, 24099), busy=())
    mode = leases.lease_dir().stat().st_mode & 0o7777
    assert mode == 0o1777
    stale = leases.Lease(**{**lease.to_json(), "start_ticks": lease.start_ticks + 1})  # type: ignore[arg-type]
    assert not leases.free(stale)  # not the owner its file names
    assert leases.free(lease)
    assert leases.read_leases() == []


@pytest.mark.parametrize(
    "ports", [[0, 10], [65530, 10], [1], [1, 2, 3], ["1", 2], [100, 0]], ids=str
)
def test_a_stamp_with_a_bad_lease_is_garbage(ports: object, repo: Path) -> None:
    with Lane("a", checkout=repo) as lane:
        raw = json.loads((lane.namespace / ".lanewatch" / "owner.json").read_bytes())
    assert parse_stamp(json.dumps(raw).encode()).stamp.ports == raw["ports"]  # type: ignore[union-attr]
    raw["ports"] = ports
    assert parse_stamp(json.dumps(raw).encode()).status is StampStatus.GARBAGE


def test_lanewatch_run_exports_the_block(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    script = f'echo "$PORT $LANEWATCH_PORTS" > {out}'
    done = subprocess.run(
        [*LANEWATCH, "run", "--lane", "srv", "--", "sh", "-c", script],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    port, block = out.read_text().split()
    assert block == f"{port}-{int(port) + 9}"
    assert leases.read_leases(live_only=False) == []  # freed when the run ended
