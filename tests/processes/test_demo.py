"""`lanewatch demo`: the scenario comes up with every state and incident on disk, made by real
processes, and leaves nothing behind: no process (checked by pid + start ticks), no temp folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lanewatch.cli.group import cli
from lanewatch.cli.tools import demo_cmd
from lanewatch.demo import DemoError, DemoScenario, disk
from lanewatch.demo.procs import DemoProcess
from lanewatch.lanes import ledger
from lanewatch.lanes.lock import is_lock_held
from lanewatch.lanes.roots import state_dir
from lanewatch.lanes.stamp import OwnerState, StampStatus, read_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness
from tests.conftest import wait_for

LANEWATCH = [sys.executable, "-m", "lanewatch"]


def _state(ident: ProcessIdentity) -> Liveness:
    return liveness(ident)[0]


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)


def _open_files(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out


def _inside(path: str, folder: Path) -> bool:
    return Path(path).is_relative_to(folder)


def _shared(tmp_path: Path) -> Path:
    shared = tmp_path / "shared-tmp"
    shared.mkdir(exist_ok=True)
    return shared


def test_scenario_has_every_kind_and_leaves_nothing(tmp_path: Path) -> None:
    shared = _shared(tmp_path)
    scenario = DemoScenario(shared_tmp=shared)
    with scenario:
        assert scenario.base == state_dir().resolve() / "demo"
        lanes = scenario.lanes
        assert dict(scenario.counts()) == {
            "live": 8,
            "hung": 1,
            "stale": 1,
            "released": 1,
            "orphan": 2,
        }
        for name in ("agent-1", "agent-3", "tests", "fuzz"):
            run = lanes[name]
            stamp = read_stamp(run.namespace).stamp
            assert stamp is not None and stamp.state is OwnerState.LIVE
            assert stamp.pid == run.runner.pid
            assert _state(run.runner.ident) is Liveness.ALIVE
            assert run.writer is not None and _state(run.writer.ident) is Liveness.ALIVE

        # takeover: the stamp names the demo's intruder, while the real owner lives and locks
        victim = lanes["agent-2"]
        forged = read_stamp(victim.namespace).stamp
        assert forged is not None and forged.pid != victim.runner.pid
        intruder = next(p for p in scenario.processes if p.role == "intruder agent-2")
        assert forged.pid == intruder.pid and "lanewatch.demo.intruder" in forged.command
        assert _state(intruder.ident) is Liveness.ALIVE
        assert _state(victim.runner.ident) is Liveness.ALIVE
        assert is_lock_held(victim.namespace) is True

        hung = lanes["pytest-gw0"]
        assert hung.writer is not None
        assert _state(hung.runner.ident) is Liveness.STOPPED
        assert _state(hung.writer.ident) is Liveness.STOPPED

        stale = lanes["agent-old"]
        stamp = read_stamp(stale.namespace).stamp
        assert stamp is not None and stamp.state is OwnerState.LIVE
        assert _state(stale.runner.ident) is Liveness.DEAD
        assert stale.writer is not None and stale.writer.gone()

        stamp = read_stamp(lanes["build"].namespace).stamp
        assert stamp is not None and stamp.state is OwnerState.RELEASED and stamp.exit_code == 0

        orphan = scenario.namespace("alpha", "agent-0")
        assert read_stamp(orphan).status is StampStatus.MISSING
        assert any((orphan / "tmp").iterdir())
        garbage = scenario.namespace("beta", "nightly")
        assert read_stamp(garbage).status is StampStatus.GARBAGE

        refused = lanes["agent-3"].namespace
        assert "claim-refused" in [line.event for line in ledger.read(refused)]
        receipt = json.loads((refused / "receipts" / "unit-tests.json").read_text())
        assert receipt["checkout_id"] == scenario.checkouts["beta"].checkout_id
        assert receipt["checkout_id"] != scenario.checkouts["alpha"].checkout_id

        # foreign writer: a process of lane beta/tests with its cwd and a file in agent-1
        foreign = lanes["tests"].writer
        assert foreign is not None
        assert _environ(foreign.pid)["LANEWATCH_LANE"] == "tests"
        a1 = lanes["agent-1"].namespace
        assert _inside(os.readlink(f"/proc/{foreign.pid}/cwd"), a1)
        assert any(_inside(f, a1) for f in _open_files(foreign.pid))
        assert any((a1 / "tmp").glob("chunk-*.bin"))

        # unbound writer: a lane process holding a file in shared temp, outside any namespace
        unbound = lanes["fuzz"].writer
        assert unbound is not None and scenario.shared_tmp is not None
        assert scenario.shared_tmp.parent == shared
        assert _environ(unbound.pid)["LANEWATCH_LANE"] == "fuzz"
        assert any(_inside(f, scenario.shared_tmp) for f in _open_files(unbound.pid))
        # and a second lane writes the same file: each version written whole and closed
        second = lanes["fuzz-2"]
        assert second.writer is not None and second.hold == lanes["fuzz"].hold
        assert _environ(second.writer.pid)["LANEWATCH_LANE"] == "fuzz-2"
        assert second.hold.read_text().startswith("written by lane fuzz")

        # the user's own roots registry is untouched: the demo has its own state dir
        assert not (state_dir() / "roots.json").exists()
        processes = list(scenario.processes)
        base = scenario.base

    assert scenario.leftover == []
    assert all(p.gone() for p in processes)
    assert not base.exists()
    assert list(shared.iterdir()) == []


def test_prepare_refuses_a_folder_that_is_not_the_demos(tmp_path: Path) -> None:
    base = tmp_path / "demo"
    base.mkdir()
    (base / "precious.txt").write_text("mine")
    with pytest.raises(DemoError, match="not a lanewatch demo folder"):
        disk.prepare(base)
    assert (base / "precious.txt").read_text() == "mine"


def test_the_demo_folder_is_removed_by_its_identity_and_only_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A removal cut short by a file written meanwhile (the dashboard's engine logs the demo's
    end in its root) can leave the folder without its marker: the folder `prepare` made is
    still known by the descriptor it keeps. One put in its place, or a symlink, is never
    removed."""
    base = tmp_path / "demo"
    made = disk.prepare(base)
    request.addfinalizer(lambda: os.close(made))
    (base / "root" / ".lanewatch-root").mkdir(parents=True)
    (base / "root" / ".lanewatch-root" / "incidents.jsonl").write_text("{}\n")
    assert disk.read_marker(base) is None  # as after a pass that took the marker first
    assert disk.remove_demo_folder(base, made) and not base.exists()

    base.mkdir()
    (base / "precious.txt").write_text("mine")
    assert not disk.remove_demo_folder(base, made)  # another folder now: another inode
    assert (base / "precious.txt").read_text() == "mine"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    there = os.open(elsewhere, os.O_RDONLY | os.O_DIRECTORY)
    request.addfinalizer(lambda: os.close(there))
    assert not disk.remove_demo_folder(link, there)
    assert (elsewhere / "precious.txt").read_text() == "mine"


def test_prepare_clears_a_crashed_demo_and_only_its_processes(tmp_path: Path) -> None:
    base = tmp_path / "demo"
    base.mkdir()
    shared = disk.make_shared_tmp(_shared(tmp_path), base)
    loop = "import time\nwhile True: time.sleep(0.05)"
    ours = subprocess.Popen([sys.executable, "-c", loop], start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", loop], start_new_session=True)
    try:
        mine = DemoProcess("writer x", ProcessIdentity.of(ours.pid))
        wrong = ProcessIdentity.of(other.pid)
        # A recorded pid whose start time differs is someone else's process now.
        reused = DemoProcess("writer y", ProcessIdentity(other.pid, wrong.start_ticks + 1, ""))
        disk.save_marker(base, ProcessIdentity.current(), shared, [mine, reused])
        (base / "leftover").write_text("x")

        os.close(disk.prepare(base))

        assert ours.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
        assert list(base.iterdir()) == []
        assert not shared.exists()
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_a_second_demo_is_refused_while_one_runs(tmp_path: Path) -> None:
    base = state_dir() / "demo"
    base.parent.mkdir(parents=True)
    lock = disk.demo_lock(base)
    lock.acquire()
    try:
        with pytest.raises(DemoError, match="another `lanewatch demo` is running"):
            DemoScenario(shared_tmp=_shared(tmp_path)).start()
    finally:
        lock.release()


def _marker_processes(base: Path) -> list[ProcessIdentity]:
    marker = disk.read_marker(base)
    assert marker is not None
    return [ProcessIdentity(p["pid"], p["start_ticks"], p["boot_id"]) for p in marker["processes"]]


def _start_cli(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "demo.out"
    env = {**os.environ, "TMPDIR": str(_shared(tmp_path))}
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            [*LANEWATCH, "demo", "--no-ui"],
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    wait_for(lambda: b"Ctrl-C stops" in out.read_bytes() or proc.poll() is not None, 60)
    assert proc.poll() is None, out.read_text()
    return proc, out


def _gone(ident: ProcessIdentity) -> bool:
    return _state(ident) in (Liveness.DEAD, Liveness.REUSED, Liveness.ZOMBIE)


def test_cli_no_ui_stops_everything_on_hangup(tmp_path: Path) -> None:
    proc, out = _start_cli(tmp_path)
    base = state_dir().resolve() / "demo"
    idents = _marker_processes(base)
    assert len(idents) >= 10
    proc.send_signal(signal.SIGHUP)  # what a closed terminal sends
    assert proc.wait(timeout=30) == 128 + signal.SIGHUP, out.read_text()
    assert all(_gone(i) for i in idents)
    assert not base.exists()
    assert list(_shared(tmp_path).iterdir()) == []
    assert "processes it started are gone" in out.read_text()


def test_demo_killed_outright_takes_its_processes_along(tmp_path: Path) -> None:
    proc, _ = _start_cli(tmp_path)
    base = state_dir().resolve() / "demo"
    idents = _marker_processes(base)
    proc.kill()  # no chance to clean up: the kernel's parent-death signal does it
    proc.wait(timeout=10)
    wait_for(lambda: all(_gone(i) for i in idents), 15)
    # The next demo clears what the dead one left on disk, temp folder included.
    os.close(disk.prepare(base))
    assert list(base.iterdir()) == []
    assert list(_shared(tmp_path).iterdir()) == []


def test_cli_opens_the_dashboard_on_the_demo_root_and_stops_on_sigterm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMPDIR", str(_shared(tmp_path)))
    seen: dict[str, Any] = {}

    class FakeApp:
        def run(self) -> None:
            seen["alive"] = [p for p in scenario_processes() if not p.gone()]
            os.kill(os.getpid(), signal.SIGTERM)  # handled: stops the demo, leaves run()

    def make_app(
        roots: list[Path],
        *,
        demo_note: str | None = None,
        on_leave: Any = None,
        on_abandon: Any = None,
        long_lived: bool = False,
    ) -> FakeApp:
        seen["roots"], seen["note"], seen["on_leave"] = roots, demo_note, on_leave
        seen["on_abandon"], seen["long_lived"] = on_abandon, long_lived
        return FakeApp()

    created: list[DemoScenario] = []
    real = demo_cmd.DemoScenario

    def scenario_factory(**kwargs: Any) -> DemoScenario:
        created.append(real(**kwargs))
        return created[-1]

    def scenario_processes() -> list[DemoProcess]:
        return created[0].processes

    monkeypatch.setattr(demo_cmd, "_dashboard_factory", lambda: make_app)
    monkeypatch.setattr(demo_cmd, "DemoScenario", scenario_factory)
    result = CliRunner().invoke(cli, ["demo"])

    assert result.exit_code == 128 + signal.SIGTERM, result.output
    (scenario,) = created
    assert seen["roots"] == [scenario.scratch_root]
    assert seen["on_leave"] == scenario.stop  # the dashboard stops the demo at its signal
    assert seen["on_abandon"] == scenario.remove_files  # and removes its files if abandoned
    assert seen["long_lived"]  # the demo is its process's one job (linux/heap.py)
    assert "takeover" in seen["note"] and str(scenario.scratch_root) in seen["note"]
    assert scenario.takeover_delay > 0  # the takeover happens in front of the dashboard
    assert len(seen["alive"]) >= 8
    assert all(p.gone() for p in scenario.processes)
    assert not scenario.base.exists()
