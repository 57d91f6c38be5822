"""`lanewatch events [--follow]`: JSON lines an orchestrator reacts to. A real
stream beside real lanes: a lane's start and an incident (a refused claim: a second runner for
a lane that runs) each come out within a second of happening (deadlines on the condition);
then its kill and its clear. Without --follow: the picture as it is, and the end. Every line
fits the shipped schema (lanewatch/schemas/events.json)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LANEWATCH, wait_for
from tests.kits.contractkit import valid
from tests.kits.enginekit import start_lane

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user
PROMPT = 1.0  # seconds: an event comes out within this of what it tells


class Stream:
    """`lanewatch events --follow`'s lines as they come, each checked against the schema."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._lock:
                self.lines.append(json.loads(raw))

    def find(self, kind: str, match: Callable[[dict[str, Any]], bool] = lambda _: True) -> Any:
        with self._lock:
            return next((e for e in self.lines if e["type"] == kind and match(e)), None)

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.lines)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_follow_prints_a_start_and_an_incident_within_a_second_then_the_kill_and_clear(
    repo: Path, root: Path, procs: list[subprocess.Popen[Any]]
) -> None:
    proc = subprocess.Popen(
        [*LANEWATCH, "events", "--follow", "--root", str(root)],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, process_group=0,
    )  # fmt: skip
    procs.append(proc)
    stream = Stream(proc)
    wait_for(lambda: stream.find("start"), 30, what="the stream's start line")

    lane = start_lane(procs, repo, root, "A")
    wait_for(
        lambda: stream.find("lane-started", lambda e: e["lane"] == "A"),
        PROMPT, what="lane-started of A within a second of its stamp naming its command",
    )  # fmt: skip
    second = cli("run", "--root", str(root), "--lane", "A", "--", "true", cwd=repo)
    assert second.returncode == 3, second.stderr  # refused: A runs
    opened = wait_for(
        lambda: stream.find("incident-opened", lambda e: e["incident"]["kind"] == "refused-claim"),
        PROMPT, what="the refused claim's incident within a second of the refusal",
    )  # fmt: skip
    assert opened["replay"] is False and opened["incident"]["victim"] == str(lane.namespace)

    killed = cli("kill", str(lane.namespace), "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr
    wait_for(lambda: stream.find("kill", lambda e: e["lane"] == "A"), 15, what="the kill line")
    wait_for(lambda: lane.proc.poll() is not None, 15, what="A's runner gone")
    wait_for(
        lambda: cli("clear", str(lane.namespace), "--yes", cwd=repo).returncode == 0,
        15, what="A cleared once nobody runs in it",
    )  # fmt: skip
    clear = wait_for(lambda: stream.find("clear"), 15, what="the clear line")
    assert clear["key"] == str(lane.namespace) and clear["trash_id"]

    proc.send_signal(signal.SIGINT)
    wait_for(lambda: proc.poll() is not None, 15, what="the stream ends on SIGINT")
    wait_for(lambda: stream.find("stop"), 5, what="the stop line")
    for line in stream.all():
        valid("events", line)


def test_without_follow_it_prints_the_picture_and_ends(
    repo: Path, root: Path, procs: list[subprocess.Popen[Any]]
) -> None:
    start_lane(procs, repo, root, "A")
    out = cli("events", "--root", str(root), cwd=repo)
    assert out.returncode == 0, out.stderr
    lines = [valid("events", json.loads(raw)) for raw in out.stdout.splitlines()]
    assert [e["type"] for e in lines] == ["start", "lane-started"]
    assert lines[1]["lane"] == "A" and lines[1]["replay"] is True
    assert lines[1]["view"]["state"] == "live"
