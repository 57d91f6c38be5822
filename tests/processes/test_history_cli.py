"""`lanewatch history PATH`: every recorded write of a file, after the fact.

The privileged test records real writes with a real engine (kernel attribution) and reads them
back with the real CLI once the engine is gone. The others write the root's history file with
`WriteLog` (no privilege needed) to check reading, de-duplication, rotation and exit codes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lanewatch.records.writes import LOG_FILE, OLD_FILE, WriteEntry, WriteLog, history
from tests.conftest import LANEWATCH
from tests.kits.attributionkit import kernel_engine, privileged, sha, wait_known
from tests.kits.enginekit import start_lane


def cli(*args: str, cwd: Path, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)} if columns else None
    return subprocess.run(
        [*LANEWATCH, *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=env
    )


@privileged
def test_history_lists_every_recorded_write_with_its_writer(
    repo: Path, root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with kernel_engine(root) as (_, rec):
        a = start_lane(procs, repo, root, "A")
        target = a.namespace / "tmp" / "state.json"
        for lane, text in (("B", "one"), ("C", "two, longer")):
            script = 'printf %s "$1" > "$2"; exec sleep 60'
            start_lane(procs, repo, root, lane, ("sh", "-c", script, "sh", text, str(target)))
            wait_known(rec, "cross-lane-write", target, text.encode())
    out = cli("history", str(target), "--root", str(root), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    writes = [w for w in json.loads(out.stdout)["writes"] if w["sha256"]]
    assert [(w["lane"], w["size"], w["sha256"]) for w in writes] == [
        ("B", 3, sha(b"one")),
        ("C", 11, sha(b"two, longer")),
    ]
    assert all(w["pid"] > 0 and w["command"] and w["identified"] for w in writes)
    table = cli("history", str(target), "--root", str(root), cwd=tmp_path)
    assert table.returncode == 0 and "sleep" in table.stdout and sha(b"one")[:16] in table.stdout


def entry(path: str, t: float, **changes: object) -> WriteEntry:
    values: dict[str, object] = {
        "path": path,
        "time": t,
        "size": 2,
        "sha256": sha(b"hi"),
        "stored": True,
        "pid": 4242,
        "start_ticks": 99,
        "identified": True,
        "lane": "B",
        "namespace": "/r/ns.B",
        "command": ("sh", "-c", "echo [red]x"),
        "how": "$LANEWATCH_NAMESPACE",
        "event": "close-write",
    }
    values.update(changes)
    return WriteEntry(**values)  # type: ignore[arg-type]


def test_history_reads_rotated_logs_and_drops_duplicates(root: Path, tmp_path: Path) -> None:
    path = str(tmp_path / "f.json")
    line = len(json.dumps(entry(path, 1.0).to_json(), sort_keys=True)) + 1
    log = WriteLog(str(root), max_bytes=3 * line - 10)  # rotates once, after the third
    log.append([entry(path, 1.0)])
    log.append([entry(path, 1.2)])  # the same event seen by a second engine
    log.append([entry(path, 5.0, lane="C", sha256=sha(b"yo"))])
    log.append([entry(str(tmp_path / "other"), 6.0)])
    assert (root / ".lanewatch-root" / OLD_FILE).exists()
    assert (root / ".lanewatch-root" / LOG_FILE).exists()
    found = history([str(root)], path)
    assert [(e.time, e.lane) for e in found] == [(1.0, "B"), (5.0, "C")]
    out = cli("history", path, "--root", str(root), cwd=tmp_path)
    assert out.returncode == 0
    assert "[red]x" in out.stdout  # printed as typed, never as markup


@pytest.mark.parametrize("columns", [80, 200])
def test_the_command_reads_at_80_columns_and_wide(root: Path, tmp_path: Path, columns: int) -> None:
    """The command tells one writer from another: at 80 columns it keeps the room the fixed
    columns leave, folded over lines, not cut to "st…" (the `how` column gives way: the JSON
    has it). Wide, every column is there."""
    path = str(tmp_path / "tmp" / "state.json")
    script = ("sh", "-c", 'printf %s "$1" > "$2"; exec sleep 60', "sh", "two, longer", path)
    WriteLog(str(root)).append([entry(path, 1.0, lane="agent-2", command=script)])
    out = cli("history", path, "--root", str(root), cwd=tmp_path, columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns, out.stdout
    words = out.stdout.split()
    assert {"exec", "sleep", "60", "two,", "longer"} <= set(words), out.stdout
    assert "agent-2" in words and sha(b"hi")[:12] in out.stdout
    header = next(line for line in lines if "time" in line and "command" in line)
    assert ("how" in header.split()) == (columns > 80), header


def test_history_of_an_unrecorded_path_says_so(root: Path, tmp_path: Path) -> None:
    out = cli("history", str(tmp_path / "nothing"), "--root", str(root), cwd=tmp_path)
    assert out.returncode == 8 and "no recorded write" in out.stderr  # not found
