"""`lanewatch mcp` driven by the MCP SDK's own client over stdio: inside a real lane
`whoami` names it (found in the client's environment, which the SDK does not pass to the
server), `is_path_mine` names the other lane for a path in its namespace, and `who_wrote`
gives the writer and the content of a file two lanes wrote (a real engine keeps the versions,
kernel attribution off: what a normal user gets). Errors are tool errors, never tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lanewatch.records import writes
from tests.conftest import LANEWATCH, wait_for
from tests.kits.attributionkit import shared_temp_file
from tests.kits.enginekit import running, start_lane

CLIENT = str(Path(__file__).resolve().parents[1] / "kits" / "mcp_client.py")
FIRST, SECOND = '{"receipt": "from A"}\n', '{"receipt": "from B"}\n'


def drive(calls: list[list[Any]], env: dict[str, str] | None = None, **run: Any) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, CLIENT, json.dumps(calls), json.dumps(env or {})],
        capture_output=True, text=True, timeout=120, **run,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


@pytest.mark.unprivileged
def test_inside_a_lane_whoami_names_it_and_a_path_of_another_lane_is_named_as_its(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]], isolated_state: Path
) -> None:
    other = start_lane(procs, repo, root, "B")
    target = other.namespace / "tmp" / "result.json"
    calls = [["whoami", {}], ["is_path_mine", {"path": str(target)}], ["my_collisions", {}]]
    env = {"LANEWATCH_STATE_DIR": str(isolated_state)}  # not the lane: the server finds that
    client = [sys.executable, CLIENT, json.dumps(calls), json.dumps(env)]
    out = subprocess.run(
        [*LANEWATCH, "run", "--root", str(root), "--lane", "A", "--", *client],
        cwd=repo, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["tools"] == [
        "is_path_mine", "my_collisions", "release_stale", "who_listens", "who_wrote", "whoami"
    ]  # fmt: skip
    me, theirs, collisions = (a["data"] for a in result["answers"])
    assert not any(a["is_error"] for a in result["answers"])
    assert me["lane"] == "A" and me["bound"] and me["state"] == "live"
    assert me["namespace"].endswith(".A") and me["tmp"] == me["namespace"] + "/tmp"
    assert me["checkout"] == os.path.realpath(repo) and me["found_in"].startswith("pid ")
    assert theirs["kind"] == "other-lane" and theirs["lane"] == "B"
    assert theirs["namespace"] == str(other.namespace) and "Fix" not in theirs["reason"]
    assert "LANEWATCH_NAMESPACE" in theirs["fix"]
    assert collisions["lane"] == "A" and collisions["open"] == []


@pytest.mark.unprivileged
def test_who_wrote_gives_the_writers_and_contents_of_a_file_two_lanes_wrote(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]], isolated_state: Path
) -> None:
    script = 'exec 3>>"$2"; printf %s "$1" > "$2"; exec sleep 60'
    roots = [str(root)]
    with shared_temp_file() as shared, running([root], probe_interval=0.3, attribution=False):
        writer = ("sh", "-c", script, "sh")
        start_lane(procs, repo, root, "A", (*writer, FIRST, str(shared)), fence="none")
        wait_for(lambda: writes.history(roots, str(shared)), 30, what="A's version kept")
        start_lane(procs, repo, root, "B", (*writer, SECOND, str(shared)), fence="none")
        wait_for(lambda: len(writes.history(roots, str(shared))) >= 2, 30, what="B's kept")
        env = {"LANEWATCH_STATE_DIR": str(isolated_state), "LANEWATCH_ROOT": str(root)}
        result = drive([["who_wrote", {"path": str(shared)}]], env, cwd=repo)
    (answer,) = result["answers"]
    assert not answer["is_error"], answer["text"]
    data = answer["data"]
    first, second = data["writes"][:2]
    assert first["lane"] == "A" and "lane A, pid" in first["writer"]
    assert first["shown"] == "content" and first["lines"] == [FIRST.strip()]
    assert second["shown"] == "diff" and f"+{SECOND.strip()}" in second["lines"]
    assert f"-{FIRST.strip()}" in second["lines"]
    assert {h.split(",")[0] for h in second["held_by"]} == {"lane A", "lane B"}
    assert json.loads(answer["text"])["path"] == str(shared)  # the text is the same JSON


def test_errors_are_tool_errors_and_release_stale_asks_for_confirmation(
    tmp_path: Path, repo: Path, isolated_state: Path
) -> None:
    env = {"LANEWATCH_STATE_DIR": str(isolated_state)}
    free = f"@lanewatch-test-{os.getpid()}-{tmp_path.name}"  # a name nobody listens on
    calls = [["my_collisions", {}], ["release_stale", {}], ["is_path_mine", {"path": ""}],
             ["who_listens", {"on": "x"}], ["who_listens", {"on": free}]]  # fmt: skip
    result = drive(calls, env, cwd=tmp_path)
    collisions, release, empty, nothing, listens = result["answers"]
    assert collisions["is_error"] and "you are in no lane" in collisions["text"]
    assert release["is_error"] and "lanewatch run --lane" in release["text"]
    assert empty["is_error"] and "give a path" in empty["text"]
    assert nothing["is_error"] and "give a port" in nothing["text"]
    assert not listens["is_error"]
    assert listens["data"]["fix"] == f"nothing listens on {free} here now"


def test_without_the_sdk_the_command_says_how_to_get_it(tmp_path: Path) -> None:
    blocker = tmp_path / "no_mcp"
    blocker.mkdir()
    (blocker / "mcp.py").write_text("raise ImportError('no', name='mcp')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    out = subprocess.run(
        [*LANEWATCH, "mcp"], capture_output=True, text=True, timeout=60, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 9 and "pip install 'lanewatch[mcp]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_whoami_says_live_stale_or_released_as_the_owner_is(root: Path) -> None:
    from lanewatch.agents.answers import whoami
    from lanewatch.agents.me import Me
    from lanewatch.lanes.stamp import OwnerState
    from tests.kits.enginekit import make_stamp

    def state(ns: Path) -> str:
        me = Me(ns.name.split(".")[-1], str(ns), None, str(root), "none")
        answer: str = whoami(me)["state"]
        return answer

    assert state(make_stamp(root, "live")) == "live"
    assert state(make_stamp(root, "gone", start_ticks=1)) == "stale"  # the pid names another
    assert state(make_stamp(root, "done", state=OwnerState.RELEASED)) == "released"


@pytest.mark.unprivileged
def test_my_collisions_lists_an_open_incident_of_my_lane_as_its_victim(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    from lanewatch.agents.answers import my_collisions
    from lanewatch.agents.me import Me
    from lanewatch.records.incident_log import read_all

    with running([root]):
        lane = start_lane(procs, repo, root, "A")
        second = subprocess.run(
            [*LANEWATCH, "run", "--root", str(root), "--lane", "A", "--", "true"],
            cwd=repo, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert second.returncode == 3, second.stderr  # refused: A runs
        wait_for(lambda: read_all([str(root)]), 30, what="the refused claim recorded")
    me = Me("A", str(lane.namespace), str(repo), str(root.resolve()), "none")
    (found,) = my_collisions(me)["open"]
    assert found["kind"] == "refused-claim" and found["my_role"] == "victim"
    b = lane.namespace.with_name(lane.namespace.name[:-1] + "B")
    other = Me("B", str(b), str(repo), str(root.resolve()), "none")
    assert my_collisions(other)["open"] == []


def test_release_stale_lists_without_confirm_and_moves_with_it(root: Path) -> None:
    from lanewatch.agents.answers import release_stale
    from lanewatch.agents.me import Me
    from tests.kits.enginekit import make_stamp

    mine = make_stamp(root, "me")  # live: this process
    stale = make_stamp(root, "gone", start_ticks=1)  # its pid names another process now
    me = Me("me", str(mine.resolve()), None, str(root.resolve()), "none")
    listed = release_stale(False, me)
    (only,) = listed["results"]
    assert only["outcome"] == "would-clear" and only["lane"] == "gone"
    assert "confirm=true" in listed["note"] and stale.exists()
    (done,) = release_stale(True, me)["results"]
    assert done["outcome"] == "cleared" and done["trash_id"] and not stale.exists()
    assert mine.exists()  # never mine, never a live lane
