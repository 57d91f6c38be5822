"""`lanewatch run --lane-auto` and `--wait`: a busy lane is waited for, or passed over for the
next free one, instead of a refusal. Real runs, real locks, no sleeps: handshakes on files."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.lanes import ledger
from lanewatch.lanes.stamp import OwnerState, read_stamp
from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for
from tests.processes.test_run_cli import WAIT_FOR_FILE, ns_of, released, start_run, wait_spawned

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# A CMD that writes its lane's name to a file.
SAY_LANE = "import os, sys; open(sys.argv[1], 'w').write(os.environ['LANEWATCH_LANE'])"


def hold(spawn: Spawn, repo: Path, lane: str, stop: Path) -> subprocess.Popen[bytes]:
    """A run that owns `lane` until `stop` exists."""
    owner = start_run(spawn, repo, [sys.executable, "-c", WAIT_FOR_FILE, str(stop)], "--lane", lane)
    wait_spawned(ns_of(lane, repo))
    return owner


def refusals(namespace: Path) -> int:
    return sum(1 for line in ledger.read(namespace) if line.event == "claim-refused")


def test_lane_auto_takes_the_next_free_lane_without_a_refusal_on_record(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    stops = [tmp_path / "stop-1", tmp_path / "stop-2"]
    holders = [hold(spawn, repo, "ci", stops[0]), hold(spawn, repo, "ci-2", stops[1])]
    said = tmp_path / "said"
    auto = lanewatch(
        "run", "--lane", "ci", "--lane-auto", "--", sys.executable, "-c", SAY_LANE, str(said),
        cwd=repo,
    )  # fmt: skip
    assert auto.returncode == 0, auto.stderr
    assert said.read_text() == "ci-3"
    assert "lane 'ci' is busy; running in lane 'ci-3'" in auto.stderr
    assert released(ns_of("ci-3", repo)).exit_code == 0
    for lane in ("ci", "ci-2"):  # passed over by their stamps, never by a refused claim
        assert refusals(ns_of(lane, repo)) == 0
        assert read_stamp(ns_of(lane, repo)).stamp.state is OwnerState.LIVE
    for stop, holder in zip(stops, holders, strict=True):
        stop.touch()
        assert holder.wait(timeout=30) == 0


def test_lane_auto_takes_the_named_lane_when_it_is_free(repo: Path, tmp_path: Path) -> None:
    said = tmp_path / "said"
    auto = lanewatch(
        "run", "--lane", "ci", "--lane-auto", "--", sys.executable, "-c", SAY_LANE, str(said),
        cwd=repo,
    )  # fmt: skip
    assert auto.returncode == 0 and said.read_text() == "ci" and "busy" not in auto.stderr


def test_wait_runs_once_the_owner_lets_go(spawn: Spawn, repo: Path, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    holder = hold(spawn, repo, "one", stop)
    said, log = tmp_path / "said", tmp_path / "waiter.log"
    waiter = start_run(
        spawn, repo, [sys.executable, "-c", SAY_LANE, str(said)], "--lane", "one", "--wait",
        log=log,
    )  # fmt: skip
    wait_for(lambda: "is busy; waiting for it" in log.read_text(), 60, what="the waiter waits")
    assert waiter.poll() is None and not said.exists()
    assert refusals(ns_of("one", repo)) == 0  # waiting is no conflict: nothing on record
    stop.touch()
    assert holder.wait(timeout=30) == 0
    assert waiter.wait(timeout=60) == 0, log.read_text()
    assert said.read_text() == "one"
    assert released(ns_of("one", repo)).pid == waiter.pid


def test_wait_with_a_deadline_is_refused_naming_the_owner(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    holder = hold(spawn, repo, "one", stop)
    marker = tmp_path / "ran"
    late = lanewatch(
        "run", "--lane", "one", "--wait", "0.3", "--", sys.executable, "-c",
        f"open({str(marker)!r}, 'w')", cwd=repo,
    )  # fmt: skip
    assert late.returncode == 3
    assert f"already owned by pid {holder.pid}" in late.stderr
    assert not marker.exists()
    assert refusals(ns_of("one", repo)) == 1  # the one last claim at the deadline
    stop.touch()
    assert holder.wait(timeout=30) == 0


def test_a_signal_while_waiting_ends_the_wait(spawn: Spawn, repo: Path, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    holder = hold(spawn, repo, "one", stop)
    marker, log = tmp_path / "ran", tmp_path / "waiter.log"
    waiter = start_run(
        spawn, repo, [sys.executable, "-c", f"open({str(marker)!r}, 'w')"], "--lane", "one",
        "--wait", log=log,
    )  # fmt: skip
    # Its handlers are in place before it looks at the lane, so once it says it waits, a
    # signal is caught, ends the wait, and it exits as if CMD had died of it.
    wait_for(lambda: "is busy; waiting for it" in log.read_text(), 60, what="the waiter waits")
    waiter.send_signal(signal.SIGTERM)
    assert waiter.wait(timeout=30) == 128 + signal.SIGTERM
    assert not marker.exists()
    assert read_stamp(ns_of("one", repo)).stamp.pid == holder.pid  # the owner is untouched
    stop.touch()
    assert holder.wait(timeout=30) == 0


def test_lane_auto_and_wait_exclude_each_other(repo: Path) -> None:
    both = lanewatch("run", "--lane-auto", "--wait", "1", "--", "true", cwd=repo)
    assert both.returncode == 2 and "exclude each other" in both.stderr


@pytest.mark.parametrize("how", [(), ("--wait",)])
def test_a_run_nested_in_its_own_lanes_run_is_refused_at_once(
    how: tuple[str, ...], repo: Path, tmp_path: Path
) -> None:
    # The inner run inherits $LANEWATCH_LANE, so it asks for the lane its parent holds: with
    # --wait it once waited for its own parent for ever (and its parent for it).
    marker = tmp_path / "ran"
    inner = [*LANEWATCH, "run", *how, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    outer = lanewatch("run", "--lane", "outer", "--", *inner, cwd=repo, timeout=20)
    assert outer.returncode == 3, outer.stderr
    assert "held by the run this command runs inside" in outer.stderr
    assert "--lane NAME or --lane-auto" in outer.stderr
    assert not marker.exists()
    assert refusals(ns_of("outer", repo)) == 0  # no claim was tried: no collision on record
    assert released(ns_of("outer", repo)).exit_code == 3
