"""`pytest -p lanewatch`: a real inner pytest (with real xdist workers) in a real git checkout,
watched from outside with `lanewatch status --json` while its tests are still running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import OwnerState, read_stamp
from tests.conftest import Spawn, inner_pytest_env, lanewatch, wait_for

pytestmark = pytest.mark.unprivileged  # the plugin as a normal user runs it

# Each inner test says where it ran, then waits (with a deadline) for the outer test's "go":
# while they wait, every worker holds its lane, so `status` sees them all live.
INNER = textwrap.dedent(
    """
    import json, os, tempfile, time
    from pathlib import Path

    import pytest

    HANDSHAKE = Path(os.environ["HANDSHAKE"])

    @pytest.mark.parametrize("n", range(int(os.environ.get("INNER_TESTS", "1"))))
    def test_where_am_i(n, tmp_path):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        info = {
            "worker": worker,
            "lane": os.environ["LANEWATCH_LANE"],
            "namespace": os.environ["LANEWATCH_NAMESPACE"],
            "tmp_path": str(tmp_path),
            "TMPDIR": os.environ["TMPDIR"],
            "gettempdir": tempfile.gettempdir(),
            "mkstemp": tempfile.mkstemp()[1],
            "worker_var": os.environ.get("LANEWATCH_XDIST_WORKER_LANE"),
            "command_var": os.environ.get("LANEWATCH_XDIST_WORKER_COMMAND"),
        }
        ready = HANDSHAKE / f"ready-{worker}-{n}.json"
        Path(f"{ready}.tmp").write_text(json.dumps(info))
        os.replace(f"{ready}.tmp", ready)  # whole, or not there: the outer test reads it
        deadline = time.monotonic() + 120
        while not (HANDSHAKE / "go").exists():
            assert time.monotonic() < deadline, "the outer test never said go"
            time.sleep(0.01)
    """
)


def inside(path: str, folder: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(top + os.sep)


def start_inner(
    spawn: Spawn,
    repo: Path,
    handshake: Path,
    log: Path,
    *pytest_args: str,
    tests: int = 1,
    prefix: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    (repo / "test_inner.py").write_text(INNER)
    handshake.mkdir(exist_ok=True)
    env = inner_pytest_env({**os.environ, "HANDSHAKE": str(handshake), "INNER_TESTS": str(tests)})
    argv = [*prefix, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args]
    with log.open("wb") as out:
        return spawn(
            [*argv, "test_inner.py"],
            cwd=repo,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def go_at_once(handshake: Path) -> None:
    """The inner tests find "go" said already: they run through without waiting."""
    handshake.mkdir()
    (handshake / "go").touch()


def ready(handshake: Path, count: int) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted(handshake.glob("ready-*.json"))]
    return found if len(found) >= count else []


def test_four_xdist_workers_get_four_lanes_seen_live_from_outside(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    inner = start_inner(spawn, repo, handshake, log, "-p", "lanewatch", "-n", "4", tests=4)
    infos = wait_for(lambda: ready(handshake, 4), 180, what="four workers ready")
    assert sorted(i["worker"] for i in infos) == ["gw0", "gw1", "gw2", "gw3"]

    status = lanewatch("status", "--json", cwd=tmp_path)  # from outside the checkout
    lanes = {ns["lane"]: ns for ns in json.loads(status.stdout)["namespaces"]}
    for info in infos:
        lane = f"pytest-{info['worker']}"
        assert info["lane"] == lane
        seen = lanes[lane]
        assert seen["state"] == "live", seen
        assert seen["checkout_path"] == str(repo)
        assert seen["pid"] != inner.pid  # the worker itself owns it, not the main process
        assert os.path.realpath(seen["key"]) == os.path.realpath(info["namespace"])
        for where in ("TMPDIR", "gettempdir", "mkstemp"):
            assert inside(info[where], info["namespace"]), (where, info)
        # tmp_path: xdist's popen-gwN under the main process's basetemp, in the main lane
        assert inside(info["tmp_path"], lanes["pytest"]["key"]), info
        assert f"popen-{info['worker']}" in Path(info["tmp_path"]).parts, info
    assert lanes["pytest"]["state"] == "live"  # the main process, which spawned them
    assert lanes["pytest"]["pid"] == inner.pid
    assert len({i["namespace"] for i in infos}) == 4

    (handshake / "go").touch()
    assert inner.wait(timeout=120) == 0, log.read_text()
    out = log.read_text()
    assert "lanewatch: lane pytest, claimed by this pytest, in " in out
    assert "lanewatch: each of 4 xdist workers claims its own lane (pytest-gw0," in out
    for info in infos:
        worker = info["worker"]
        assert f"lanewatch: {worker} ran in lane pytest-{worker}, basetemp " in out
    head = locate("pytest", checkout=repo).namespace.name
    for lane in ("pytest", "pytest-gw0", "pytest-gw1", "pytest-gw2", "pytest-gw3"):
        stamp = read_stamp(locate(lane, checkout=repo).namespace).stamp
        assert stamp.state is OwnerState.RELEASED and stamp.exit_code == 0, lane  # not stale
        assert stamp.family == (None if lane == "pytest" else head), lane  # one family
        # A worker's own argv is execnet's `-c`: its stamp shows the main command, named.
        worker = lane.removeprefix("pytest").lstrip("-")
        said = tuple(stamp.command)
        if worker:
            assert said[-1] == f"(xdist worker {worker})", said
            said = said[:-1]
        assert said[-3:] == ("-n", "4", "test_inner.py"), stamp.command
    # The main process told each worker its lane; the worker dropped the word before its tests.
    assert all(i["worker_var"] is None and i["command_var"] is None for i in infos)


def test_without_the_plugin_asked_for_nothing_is_claimed(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    go_at_once(handshake)
    inner = start_inner(spawn, repo, handshake, log, "-n", "2")  # in no lane: nothing to say
    assert inner.wait(timeout=120) == 1  # the inner test needs LANEWATCH_LANE: not set
    out = log.read_text()
    assert "KeyError: 'LANEWATCH_LANE'" in out and "lanewatch:" not in out
    assert not locate("pytest", checkout=repo).namespace.exists()


def test_one_process_claims_the_base_lane_and_releases_it(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    inner = start_inner(spawn, repo, handshake, log, "-p", "lanewatch", "--lanewatch-lane", "ci-7")
    (info,) = wait_for(lambda: ready(handshake, 1), 120, what="the inner test ready")
    namespace = locate("ci-7", checkout=repo).namespace
    assert os.path.realpath(info["namespace"]) == os.path.realpath(namespace)
    assert read_stamp(namespace).stamp.state is OwnerState.LIVE
    assert inside(info["tmp_path"], str(namespace)) and inside(info["mkstemp"], str(namespace))
    (handshake / "go").touch()
    assert inner.wait(timeout=120) == 0, log.read_text()
    assert read_stamp(namespace).stamp.state is OwnerState.RELEASED
    assert f"lanewatch: lane ci-7, claimed by this pytest, in {namespace}; basetemp" in (
        log.read_text()
    )


def test_inside_lanewatch_run_the_run_owns_the_lane_and_workers_take_their_own(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    run = (sys.executable, "-m", "lanewatch", "run", "--lane", "agent-1", "--")
    inner = start_inner(
        spawn, repo, handshake, log, "-p", "lanewatch", "-n", "2", tests=2, prefix=run
    )
    infos = wait_for(lambda: ready(handshake, 2), 180, what="two workers ready")
    assert sorted(i["lane"] for i in infos) == ["agent-1-gw0", "agent-1-gw1"]
    outer = read_stamp(locate("agent-1", checkout=repo).namespace).stamp
    assert outer.pid == inner.pid  # `lanewatch run`, not the pytest inside it
    head = locate("agent-1", checkout=repo).namespace.name
    for lane in ("agent-1-gw0", "agent-1-gw1"):  # the run's family: it is their ancestor
        assert read_stamp(locate(lane, checkout=repo).namespace).stamp.family == head
    (handshake / "go").touch()
    assert inner.wait(timeout=120) == 0, log.read_text()
    out = log.read_text()
    assert "lanewatch: lane agent-1, owned by the lanewatch run around this pytest, pid" in out
    assert "shared lane" not in out  # asked for: each worker has its own


def test_inside_lanewatch_run_unasked_the_workers_sharing_the_lane_are_named(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """Without `-p lanewatch`, `lanewatch run -- pytest -n 2` is one lane: both workers write
    in its one /tmp, where a fixed temp name races its twin. The summary says so, even with
    `-q`, which hides the header."""
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    run = (sys.executable, "-m", "lanewatch", "run", "--lane", "agent-1", "--")
    inner = start_inner(spawn, repo, handshake, log, "-q", "-n", "2", tests=2, prefix=run)
    infos = wait_for(lambda: ready(handshake, 2), 180, what="two workers ready")
    assert sorted(i["worker"] for i in infos) == ["gw0", "gw1"]
    assert infos[0]["TMPDIR"] == infos[1]["TMPDIR"]  # the fact the line reports
    (handshake / "go").touch()
    assert inner.wait(timeout=120) == 0, log.read_text()
    out = log.read_text()
    assert (
        "lanewatch: these 2 xdist workers shared lane agent-1's TMPDIR and /tmp; "
        "`-p lanewatch` gives each worker a lane and a TMPDIR of its own"
    ) in out
    assert out.count("shared lane") == 1  # the main process says it; workers do not


# pytest-xdist's documented recipe for a session fixture run once across workers: the first
# worker to take the lock makes the data, the others read it. Each maker writes a line.
ONCE = textwrap.dedent(
    """
    import json, os

    import pytest
    from filelock import FileLock


    def produce():
        with open(os.environ["MADE"], "a") as out:
            out.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
        return {"v": 42}


    @pytest.fixture(scope="session")
    def session_data(tmp_path_factory, worker_id):
        if worker_id == "master":
            return produce()
        fn = tmp_path_factory.getbasetemp().parent / "data.json"
        with FileLock(str(fn) + ".lock"):
            if fn.is_file():
                return json.loads(fn.read_text())
            data = produce()
            fn.write_text(json.dumps(data))
        return data


    @pytest.mark.parametrize("n", range(8))
    def test_uses_it(session_data, n):
        assert session_data == {"v": 42}
    """
)


def test_xdists_session_fixture_run_once_recipe_still_runs_it_once(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """With a lane per worker, the workers' basetemps still share xdist's parent folder (in
    the main lane), where the recipe's file and lock meet: the data is made once."""
    (repo / "test_once.py").write_text(ONCE)
    made, log = tmp_path / "made", tmp_path / "inner.log"
    env = inner_pytest_env({**os.environ, "MADE": str(made)})
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "lanewatch"]
    with log.open("wb") as out:
        inner = spawn([*argv, "-n", "2", "test_once.py"], cwd=repo, env=env, stdout=out,
                      stderr=subprocess.STDOUT)  # fmt: skip
    assert inner.wait(timeout=120) == 0, log.read_text()
    out = log.read_text()
    assert "8 passed" in out and "lanewatch: gw1 ran in lane pytest-gw1" in out, out
    assert len(made.read_text().split()) == 1, made.read_text()  # one worker made it


def test_inside_lanewatch_run_one_process_shares_nothing(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    go_at_once(handshake)
    run = (sys.executable, "-m", "lanewatch", "run", "--lane", "agent-1", "--")
    for extra in ((), ("-n", "1"), ("-n", "0")):
        inner = start_inner(spawn, repo, handshake, log, *extra, prefix=run)
        assert inner.wait(timeout=120) == 0, log.read_text()
        assert "1 passed" in log.read_text() and "lanewatch:" not in log.read_text(), extra


def test_outside_a_checkout_it_fails_closed_before_any_test(spawn: Spawn, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    inner = start_inner(spawn, plain, handshake, log, "-p", "lanewatch", "-n", "2")
    assert inner.wait(timeout=120) == 4  # pytest's usage error
    out = log.read_text()
    assert "ERROR: lanewatch: " in out and "is not inside a git checkout" in out
    assert not any(handshake.iterdir())  # no test ran


def test_a_lane_owned_by_another_process_is_refused_before_any_test(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    first_hs, first_log = tmp_path / "first", tmp_path / "first.log"
    first = start_inner(spawn, repo, first_hs, first_log, "-p", "lanewatch")
    wait_for(lambda: ready(first_hs, 1), 120, what="the first run holding lane pytest")
    second_hs, second_log = tmp_path / "second", tmp_path / "second.log"
    second = start_inner(spawn, repo, second_hs, second_log, "-p", "lanewatch")
    assert second.wait(timeout=120) == 4
    assert f"lane 'pytest' is already owned by pid {first.pid}" in second_log.read_text()
    assert not any(second_hs.iterdir())
    (first_hs / "go").touch()
    assert first.wait(timeout=120) == 0


def test_a_basetemp_outside_the_lane_is_refused(spawn: Spawn, repo: Path, tmp_path: Path) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    elsewhere = tmp_path / "elsewhere"
    inner = start_inner(
        spawn, repo, handshake, log, "-p", "lanewatch", "--basetemp", str(elsewhere)
    )
    assert inner.wait(timeout=120) == 4
    assert f"--basetemp {elsewhere} is outside lane 'pytest'" in log.read_text()
    assert not elsewhere.exists()
    assert not locate("pytest", checkout=repo).namespace.exists()  # refused before the claim


def test_the_plugin_loaded_unasked_costs_one_small_module() -> None:
    """pytest loads the entry point in every session where lanewatch is installed."""
    code = (
        "import sys, lanewatch.pytest_plugin\n"
        "heavy = ('lanewatch.', 'textual', 'watchdog', 'filelock', 'psutil', 'rich')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['lanewatch.pytest_plugin']"


def test_a_lane_name_with_escapes_reaches_the_terminal_inert(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    handshake, log = tmp_path / "handshake", tmp_path / "inner.log"
    go_at_once(handshake)
    lane = "red\x1b[31m-\u202eevil"
    inner = start_inner(spawn, repo, handshake, log, "-p", "lanewatch", "--lanewatch-lane", lane)
    assert inner.wait(timeout=120) == 0, log.read_text()
    out = log.read_bytes()
    assert b"\x1b" not in out and "\u202e".encode() not in out
    assert b"lanewatch: lane red\\x1b[31m-\\u202eevil, claimed by this pytest" in out
