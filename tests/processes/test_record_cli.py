"""`lanewatch record`: the headless engine prints JSON lines and stops cleanly on a signal.

Runs the real CLI in a subprocess (its own process group, killed and reaped at the end) with
real lanes. The privileged test needs root or CAP_SYS_ADMIN; the unprivileged one drops
CAP_SYS_ADMIN with `setpriv` to see `record` fall back to inferred attribution.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LANEWATCH, Spawn, wait_for
from tests.kits.attributionkit import json_lines, privileged, setpriv_prefix, sha
from tests.kits.contractkit import valid
from tests.kits.enginekit import start_lane

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

TYPES = {"start", "state", "incident", "health", "attribution", "stop"}


def record(spawn: Spawn, root: Path, cwd: Path, prefix: list[str] | None = None) -> Any:
    return spawn(
        [*(prefix or []), *LANEWATCH, "record", "--json", "--root", str(root)],
        stdout=subprocess.PIPE,
        cwd=cwd,
    )


def first(lines: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = wait_for(
        lambda: next((x for x in lines if all(x.get(k) == v for k, v in match.items())), None),
        30,
    )
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_record_prints_json_lines_and_stops_on_a_signal(
    spawn: Spawn,
    repo: Path,
    root: Path,
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
    sig: signal.Signals,
) -> None:
    proc = record(spawn, root, tmp_path)
    lines: list[dict[str, Any]] = []
    reader = json_lines(proc, lines)
    start = first(lines, type="start")
    assert start["roots"] == [str(root.resolve())] and start["attribution"]["mode"] in (
        "kernel",
        "inferred",
    )
    lane = start_lane(procs, repo, root, "A")
    live = first(lines, type="state", key=str(lane.namespace), state="live")
    assert live["lane"] == "A" and live["pid"] == lane.proc.pid
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == 0
    reader.join(timeout=10)
    assert lines[-1] == {**lines[-1], "type": "stop", "signal": sig.name}
    assert all(x["type"] in TYPES and isinstance(x["at"], float) for x in lines)
    for line in lines:  # every line is a `lanewatch.record/1` object (the shipped schema)
        valid("record", line)


@privileged
def test_record_prints_a_known_foreign_write_as_it_happens(
    spawn: Spawn, repo: Path, root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    proc = record(spawn, root, tmp_path)
    lines: list[dict[str, Any]] = []
    json_lines(proc, lines)
    assert first(lines, type="start")["attribution"]["mode"] == "kernel"
    a = start_lane(procs, repo, root, "A")
    target = a.namespace / "tmp" / "out.json"
    start_lane(
        procs, repo, root, "B", ("sh", "-c", 'printf B > "$1"; exec sleep 60', "sh", str(target))
    )
    line = first(lines, type="incident", kind="cross-lane-write")
    assert line["grade"] == "known" and line["new"] is True
    assert line["latest"]["path"] == str(target) or line["latest"]["sha256"] in (None, sha(b"B"))
    assert line["intruder"]["lane"] == "B"
    proc.terminate()
    assert proc.wait(timeout=30) == 0


def test_record_without_cap_sys_admin_says_inferred(
    spawn: Spawn, root: Path, tmp_path: Path
) -> None:
    prefix = setpriv_prefix()
    if prefix is None:
        pytest.skip(
            "cannot run without CAP_SYS_ADMIN here (not root with setpriv, or fanotify works)"
        )
    proc = record(spawn, root, tmp_path, prefix)
    lines: list[dict[str, Any]] = []
    json_lines(proc, lines)
    start = first(lines, type="start")
    assert start["attribution"]["mode"] == "inferred" and "CAP_SYS_ADMIN" in start["hint"]
    proc.terminate()
    assert proc.wait(timeout=30) == 0
