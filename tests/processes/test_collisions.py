"""Collisions end to end, with real `lanewatch run` lanes, real fanotify and a real engine: two
lanes writing one file in shared temp are one collision naming both; acknowledging it covers
what was seen, a new write opens it again and `lanewatch status` exits 4 again.

The shared file is in a folder of this test's own under tmp_path (in /tmp: shared temp for the
kernel attribution), outside the root and its lanes: never a fixed /tmp name.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.records import evidence
from lanewatch.records.writes import WriteEntry, history
from tests.conftest import LANEWATCH, wait_for
from tests.kits.attributionkit import kernel_engine, privileged, sha
from tests.kits.enginekit import Recorder, start_lane

# Write $1 into $2; once $3 exists, write it again (the same bytes); then stay.
TWICE = (
    'printf %s "$1" > "$2"; while [ ! -e "$3" ]; do sleep 0.05; done; '
    'printf %s "$1" > "$2"; exec sleep 60'
)


def shared_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "shared"
    folder.mkdir()
    if not str(folder.resolve()).startswith(os.path.realpath("/tmp") + "/"):
        pytest.skip("tmp_path is not under /tmp: not shared temp for the kernel attribution")
    return folder


def shared_file_incident(rec: Recorder, path: Path, lanes: set[str], shas: set[str]) -> Any:
    """The shared-file incident of `path`, once it names `lanes` and holds every content."""

    def found() -> Any:
        with rec.lock:
            incidents = list(rec.picture.incidents.values())
        for i in incidents:
            if i.kind == "shared-file" and i.path == str(path):
                named = {w.get("lane") for w in i.writers} == lanes
                if named and shas <= {e.sha256 for e in i.evidence}:
                    return i
        return None

    try:
        return wait_for(found, 30, what=f"one shared-file incident for {path} naming {lanes}")
    except AssertionError as exc:  # say what there was instead
        with rec.lock:
            seen = [
                (i.kind, i.path, [w.get("lane") for w in i.writers], [e.sha256 for e in i.evidence])
                for i in rec.picture.incidents.values()
            ]
        raise AssertionError(f"{exc}; incidents: {seen}") from None


def status(root: Path, cwd: Path) -> tuple[int, dict[str, Any]]:
    out = subprocess.run(
        [*LANEWATCH, "status", "--json", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert out.returncode in (0, 4, 5), out.stderr
    return out.returncode, json.loads(out.stdout)


@privileged
def test_two_lanes_writing_one_tmp_file_are_one_incident_and_ack_holds_until_new_evidence(
    repo: Path, root: Path, procs: list[Any], tmp_path: Path
) -> None:
    folder = shared_folder(tmp_path)
    target, again = folder / "receipt.json", tmp_path / "again"
    with kernel_engine(root) as (_, rec):
        start_lane(
            procs, repo, root, "agent-1", ("sh", "-c", TWICE, "sh", "one", str(target), str(again))
        )
        # agent-2 writes once agent-1's write is read: a recorder behind (a loaded machine) that
        # read both in one go could not tell whose content it read (unknown, honestly), and the
        # incident would never hold both contents.
        first = wait_for(lambda: recorded(root, target, "agent-1"), 30, what="agent-1's write")
        assert first.sha256 == sha(b"one"), first
        start_lane(
            procs,
            repo,
            root,
            "agent-2",
            ("sh", "-c", TWICE, "sh", "two", str(target), str(tmp_path / "never")),
        )
        contents = {sha(b"one"), sha(b"two")}
        incident = shared_file_incident(rec, target, {"agent-1", "agent-2"}, contents)
        assert incident.summary == f"agent-1 and agent-2 both write {target}" or (
            incident.summary == f"agent-2 and agent-1 both write {target}"
        )
        assert {e.sha256 for e in incident.evidence if e.sha256} == contents
        others = [i for i in rec.picture.incidents.values() if i.id != incident.id]
        assert not [i for i in others if i.kind == "shared-file" and i.path == str(target)]

        # Acknowledged: it covers both writes; `status` has nothing open (exit 0).
        wait_for(lambda: _status_is(root, tmp_path, 4), 30, what="status exits 4")
        ack = subprocess.run(
            [*LANEWATCH, "incidents", incident.id, "--ack", "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert ack.returncode == 0, ack.stderr
        code, doc = status(root, tmp_path)
        mine = next(i for i in doc["incidents"] if i["id"] == incident.id)
        assert mine["acknowledged"] and mine["ack_by"] and not mine["reopened"]
        assert code == 0, doc

        # agent-1 writes the same bytes again: new evidence, open again, `status` exits 4.
        again.touch()
        code, doc = wait_for(lambda: _status_is(root, tmp_path, 4), 30, what="reopened")
        mine = next(i for i in doc["incidents"] if i["id"] == incident.id)
        assert mine["reopened"] and not mine["acknowledged"] and doc["open_incidents"] == 1
        listing = subprocess.run(
            [*LANEWATCH, "incidents", "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert "reopened" in listing.stdout


def _status_is(root: Path, cwd: Path, want: int) -> tuple[int, dict[str, Any]] | None:
    code, doc = status(root, cwd)
    return (code, doc) if code == want else None


# Once $5 exists, write "$1 $i" into $2, $3 times, with $6 seconds between writes (printf is
# a builtin: the lane's command itself writes), then create $4; once $4.more exists, write
# "$1 alone" into $2; then stay.
RACE = (
    'while [ ! -e "$5" ]; do sleep 0.02; done; i=0; '
    'while [ $i -lt "$3" ]; do printf "%s %s" "$1" $i > "$2"; i=$((i+1)); sleep "$6"; done; '
    ': > "$4"; while [ ! -e "$4.more" ]; do sleep 0.02; done; '
    'printf "%s alone" "$1" > "$2"; exec sleep 60'
)


@privileged
def test_racing_writers_every_recorded_content_is_its_writers(
    repo: Path, root: Path, procs: list[Any], tmp_path: Path
) -> None:
    """Two lanes overwrite one file as fast as they can: each version in the history is the
    content its writer wrote, or marked unknown; never the other lane's content.

    Which racing writes can be told apart depends on how the recorder's reads fall among them
    (on a loaded machine one read can hold them all: all unknown, honestly). So each lane then
    writes once more, alone, after the recorder has read every racing write (each lane's done
    flag, written after its last racing write, is in the history): those two are known."""
    target = shared_folder(tmp_path) / "race.txt"
    done, go = {"A": tmp_path / "A.done", "B": tmp_path / "B.done"}, tmp_path / "go"
    with kernel_engine(root):
        for lane, flag in done.items():
            # Both at once, each every few milliseconds: some writes race, some do not.
            cmd = ("sh", "-c", RACE, "sh", lane, str(target), "150", str(flag), str(go), "0.002")
            start_lane(procs, repo, root, lane, cmd)
        go.touch()  # both at once
        # The kernel's queue is in order: once both flags are in, every racing write was read.
        flags = [(flag, lane) for lane, flag in done.items()]
        wait_for(lambda: all(recorded(root, *f) for f in flags), 60, what="the done flags")
        alone = [write_alone(root, target, flag, lane) for lane, flag in done.items()]
        got = history([str(root)], str(target))  # the last write is in: every one before is
    assert alone == [sha(b"A alone"), sha(b"B alone")], got
    assert got[-1].sha256 == sha(b"B alone"), got[-1]
    known = [e for e in got if e.sha256]
    unknown = [e for e in got if not e.sha256]
    assert {e.lane for e in known} == {"A", "B"}, got
    assert all("content unknown" in e.event for e in unknown if e.event.startswith("close"))
    stored = [e for e in known if e.stored]
    assert stored, known
    for e in stored:
        content = evidence.load([str(root)], e.sha256 or "")
        assert content is not None and content.split()[:1] == [e.lane.encode()], (e, content)


def recorded(root: Path, path: Path, lane: str, since: float = 0.0) -> WriteEntry | None:
    """`lane`'s last close-write of `path` read by the recorder at `since` or later."""
    mine = [
        e
        for e in history([str(root)], str(path))
        if e.lane == lane and e.event.startswith("close") and e.time >= since
    ]
    return mine[-1] if mine else None


def write_alone(root: Path, target: Path, flag: Path, lane: str) -> str | None:
    """Have `lane` write `target` once more; its content as recorded (None: unknown)."""
    asked = time.time()
    Path(f"{flag}.more").touch()
    got = wait_for(lambda: recorded(root, target, lane, asked), 30, what=f"{lane}'s last write")
    return got.sha256
