"""Many hosts: a real OpenSSH server on loopback (tests/kits/sshkit.py) is the second
host, with its own state folder and root; the far side runs the real `lanewatch` (hello,
status, record, kill) that ssh starts there. Nothing about the link is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from lanewatch.hosts import actions as remote
from lanewatch.hosts import flags
from lanewatch.hosts.config import Host, pick
from lanewatch.hosts.farviews import remote_key
from lanewatch.hosts.stream import HostStream
from lanewatch.lanes.stamp import read_stamp
from lanewatch.model.views import Changes, NsState
from tests.conftest import LANEWATCH, wait_for
from tests.kits.contractkit import valid
from tests.kits.enginekit import start_lane
from tests.kits.sshkit import (  # the fixtures, and those they use, by name for pytest to find
    FarLive,
    SshServer,
    far_command,
    far_lane,
    far_live,  # noqa: F401
    old_scheme_script,
    refused_far_claim,
    shared_ssh,  # noqa: F401
    ssh_server,  # noqa: F401
    start_far_live,
    write_hosts,
)

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


def status(*args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [*LANEWATCH, "status", "--json", *args], capture_output=True, text=True, timeout=120
    )
    data = json.loads(done.stdout)
    valid("status", data)
    return done.returncode, data


def test_status_shows_the_lanes_of_both_hosts(
    shared_ssh: SshServer,  # noqa: F811
    repo: Path,
    root: Path,
    tmp_path: Path,
    isolated_state: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    far_home = tmp_path / "farhome"
    write_hosts(isolated_state, {"far": far_command(far_home)})
    here = start_lane(procs, repo, root, "near-lane")
    _, far_ns = far_lane(procs, repo, far_home, "far-lane")
    code, data = status("--root", str(root), "--host", "far")
    assert code == 0, data
    lanes = {n["lane"]: n for n in data["namespaces"]}
    assert lanes["near-lane"]["from_host"] is None
    assert lanes["near-lane"]["key"] == str(here.namespace)
    assert lanes["far-lane"]["from_host"] == "far" and lanes["far-lane"]["host"] == "far"
    assert lanes["far-lane"]["key"] == remote_key("far", str(far_ns))
    assert lanes["far-lane"]["state"] == "live"
    [host] = data["hosts"]
    assert host["status"] == "ok" and host["scheme"] == 1 and host["flags"] == []
    # The text table has the HOST column, even narrow, with the host's name in it.
    text = subprocess.run(
        [*LANEWATCH, "status", "--root", str(root), "--host", "far"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},  # narrow: the HOST column comes first
    ).stdout
    far_row = next(line for line in text.splitlines() if "far-lane" in line)
    assert far_row.split()[0] == "far", text


def test_half_migrated_hosts_are_named_with_the_fix(
    shared_ssh: SshServer,  # noqa: F811
    root: Path,
    tmp_path: Path,
    isolated_state: Path,
) -> None:
    far = far_command(tmp_path / "farhome")
    write_hosts(
        isolated_state,
        {
            "bare": str(tmp_path / "nowhere" / "lanewatch"),  # no lanewatch there: ssh says 127
            "old": old_scheme_script(tmp_path / "oldhome", far),
        },
    )
    code, data = status("--root", str(root), "--host", "bare", "--host", "old")
    assert code == 5, data  # the picture is incomplete: two hosts are not watched normally
    hosts = {h["name"]: h for h in data["hosts"]}
    [missing] = hosts["bare"]["flags"]
    assert missing["kind"] == flags.MISSING and hosts["bare"]["status"] == "missing"
    assert missing["fix"] == "ssh far 'python3 -m pip install --user lanewatch'"
    [old] = hosts["old"]["flags"]
    assert old["kind"] == flags.SCHEME and "scheme 0" in old["detail"]
    assert old["fix"] == "ssh far 'python3 -m pip install -U lanewatch'"
    assert hosts["old"]["scheme"] == 0
    bad = {r["root"]: r["status"] for r in data["roots"]}
    assert bad["ssh:bare"] == "missing" and bad["ssh:old"] == "degraded"
    text = subprocess.run(
        [*LANEWATCH, "status", "--root", str(root), "--host", "bare", "--host", "old"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "fix: ssh far 'python3 -m pip install --user lanewatch'" in text
    assert "fix: ssh far 'python3 -m pip install -U lanewatch'" in text


def test_hosts_file_and_names(isolated_state: Path) -> None:
    write_hosts(isolated_state, {"far": "x/lanewatch"})
    assert pick(["far"]) == [Host("far", "far", "x/lanewatch")]
    assert pick(["elsewhere"]) == [Host("elsewhere", "elsewhere")]
    assert pick([]) == []  # none marked default
    assert Host("h", "h", "env A=1 lanewatch").argv("kill", "a b")[-1] == (
        "env A=1 lanewatch kill 'a b'"
    )


class Collect:
    def __init__(self) -> None:
        self.batches: list[Changes] = []
        self.lock = threading.Lock()

    def __call__(self, changes: Changes) -> None:
        with self.lock:
            self.batches.append(changes)


def test_stream_goes_degraded_when_the_link_drops_and_recovers(
    ssh_server: SshServer,  # noqa: F811 (its own: it stops it)
    repo: Path,
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    # Beating every 0.5 s, not 5: the newer beat below comes without waiting one out.
    far = start_far_live(procs, repo, tmp_path, heartbeat=0.5)
    key = far.key
    stream = HostStream(far.host)
    seen = Collect()
    stream.start(seen)
    try:
        wait_for(lambda: key in stream.views, 60, what="the far lane over the stream")
        assert stream.views[key].state is NsState.LIVE and stream.views[key].host == "far"
        assert stream.state.status == "ok" and stream.state.hello is not None
        # Its heartbeats come in `beats` lines (the far hello lists --beats): the view moves.
        first = stream.views[key].heartbeat_at
        assert first is not None and "beats" in stream.state.hello["record"]
        wait_for(lambda: stream.kinds["beats"] >= 1, 30, what="a beats line")
        wait_for(lambda: (stream.views[key].heartbeat_at or 0) > first, 30, what="a newer beat")
        ssh_server.stop()  # the host goes away: sshd and every session through it
        wait_for(lambda: stream.state.status == "degraded", 30, what="degraded")
        assert key in stream.views  # shown as last seen meanwhile
        assert any(h.status == "degraded" for h in seen.batches[-1].health)
        ssh_server.start()
        wait_for(lambda: stream.state.connects == 2 and stream.state.status == "ok", 60)
        assert key in stream.views and stream.views[key].state is NsState.LIVE
    finally:
        stream.stop()


def test_kill_of_a_remote_lane_ends_its_process(
    shared_ssh: SshServer,  # noqa: F811
    far_live: FarLive,  # noqa: F811
) -> None:
    proc, far_ns, host = far_live.proc, far_live.ns, far_live.host
    stamp = read_stamp(far_ns).stamp
    assert stamp is not None and stamp.started_at is not None
    # The row showed another owner (a lane replaced since): the far side refuses, sends nothing.
    other = remote.kill(host, str(far_ns), seen=(stamp.pid, stamp.started_at - 1))
    assert not other.ok and other.code == 3 and other.data is not None
    assert other.data["outcome"] == "refused" and proc.poll() is None
    result = remote.kill(host, str(far_ns), seen=(stamp.pid, stamp.started_at))
    assert result.ok, result
    assert result.data is not None and result.data["outcome"] == "stopped"
    valid("kill", result.data)
    assert proc.wait(timeout=30) is not None  # the lane's runner recorded the exit and ended
    again = remote.kill(host, str(far_ns))  # nothing left to kill: the far side says so
    assert again.data is not None and again.data["outcome"] == "gone"
    cleared = remote.clear(host, str(far_ns))  # released now: its namespace goes to the trash
    assert cleared.ok and cleared.data is not None, cleared
    valid("clear", cleared.data)
    assert [r["outcome"] for r in cleared.data["results"]] == ["cleared"]
    assert not far_ns.exists()


def test_record_views_and_until_eof(
    repo: Path, root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """What the far side runs: every change with the whole namespace, ending when ssh (its
    stdin) goes away."""
    lane = start_lane(procs, repo, root, "viewed")
    proc = subprocess.Popen(
        [*LANEWATCH, "record", "--json", "--views", "--until-eof", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        process_group=0,
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stdin is not None
    lines = []
    while True:
        line = json.loads(proc.stdout.readline())
        lines.append(line)
        if line["type"] == "state" and line["key"] == str(lane.namespace):
            break
    valid("record", line)
    assert line["view"]["lane"] == "viewed" and line["view"]["state"] == "live"
    assert [m["command"] for m in line["view"]["members"]] == ["sleep 60"]
    assert line["view"]["pid"] == lane.proc.pid
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    last = json.loads(proc.stdout.read().splitlines()[-1])
    assert last["type"] == "stop" and last["signal"] == "EOF"


def test_a_far_incident_is_streamed_and_acknowledged_there(
    shared_ssh: SshServer,  # noqa: F811
    far_live: FarLive,  # noqa: F811
    repo: Path,
    root: Path,
) -> None:
    from lanewatch.engine.engine import Engine
    from lanewatch.hosts.many import ManyHosts

    far_home = far_live.home
    stream = HostStream(far_live.host)
    many = ManyHosts(Engine([str(root)]), [stream])
    seen = Collect()
    many.start(seen)
    try:
        wait_for(lambda: far_live.key in stream.views, 60, what="far lane")
        # A second claim of the far lane there: refused, and the far engine records it.
        refused_far_claim(repo, far_home, "far-lane")
        found = wait_for(lambda: list(stream.incidents.values()), 60, what="the far incident")
        [incident] = found
        assert incident.id.startswith("far:refused-claim-") and not incident.acknowledged
        assert incident.victim == far_live.key
        with seen.lock:  # every batch the dashboard got carries the host's health
            assert all(any(h.root == "ssh:far" for h in b.health) for b in seen.batches)
        many.acknowledge(incident.id)  # runs `lanewatch incidents ID --ack` there
        wait_for(lambda: stream.incidents[incident.id].acknowledged, 60, what="acknowledged")
    finally:
        many.stop()


# Open $1 for writing, write $2 and flush, create $3, then hold the file open (the far engine's
# prober sees a lane's process holding a file outside its namespace: a shared-file incident).
_HOLD = """
import sys, time
f = open(sys.argv[1], "w"); f.write(sys.argv[2]); f.flush()
open(sys.argv[3], "w").close()
time.sleep(600)
"""


def test_far_lanes_writing_one_shared_file_flag_the_host_with_the_fix(
    shared_ssh: SshServer,  # noqa: F811
    repo: Path,
    root: Path,
    tmp_path: Path,
    isolated_state: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    """Two far lanes really write one file in the far host's shared temp (its TMPDIR, outside
    every lane): the far engine raises the shared-file incident itself, and `status --host`
    flags the host `unbound-writers` with the fix, whoever runs the test."""
    far_home = tmp_path / "farhome"
    write_hosts(isolated_state, {"far": far_command(far_home)})
    shared = far_home / "tmp" / "receipt.json"  # the far side's shared temp, not a lane's
    ready = [tmp_path / "ready-1", tmp_path / "ready-2"]
    for n, flag_file in enumerate(ready, 1):
        hold = [sys.executable, "-c", _HOLD, str(shared), f"job {n}", str(flag_file)]
        far_lane(procs, repo, far_home, f"job-{n}", hold, fence="none")  # unfenced: real temp
    wait_for(lambda: all(r.exists() for r in ready), 30, what="both far jobs wrote")

    def flagged() -> tuple[int, dict[str, Any]] | None:
        code, data = status("--root", str(root), "--host", "far")
        [host] = data["hosts"]
        return (code, data) if any(f["kind"] == flags.UNBOUND for f in host["flags"]) else None

    code, data = wait_for(flagged, 60, what="the far host flagged unbound-writers")
    [host] = data["hosts"]
    [flag] = host["flags"]
    assert host["status"] == "ok"  # a finding about the jobs there, not about the link
    assert str(shared) in flag["detail"]
    assert flag["fix"].startswith("lanewatch run --lane NAME -- CMD")
    far_incidents = [i for i in data["incidents"] if i["id"].startswith("far:")]
    assert [i["kind"] for i in far_incidents] == ["shared-file"], far_incidents
    assert far_incidents[0]["path"] == str(shared)
    assert code == 4, data  # an open collision (the far one) is in the picture
    text = subprocess.run(
        [*LANEWATCH, "status", "--root", str(root), "--host", "far"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "fix: lanewatch run --lane NAME -- CMD" in text, text


def test_record_beats_sends_heartbeat_only_changes_together(
    repo: Path, root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """`record --views --beats 1`: a lane beating every 0.2 s is not a whole view per beat but
    one `beats` line a second (its newest heartbeat); a write still comes at once as a view."""
    lane = start_lane(procs, repo, root, "beating", heartbeat=0.2)
    args = ["record", "--json", "--views", "--beats", "1", "--until-eof", "--root", str(root)]
    proc = subprocess.Popen(
        [*LANEWATCH, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        process_group=0,
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stdin is not None
    lines: list[dict[str, Any]] = []
    threading.Thread(
        target=lambda: lines.extend(json.loads(raw) for raw in proc.stdout or ()), daemon=True
    ).start()
    key = str(lane.namespace)

    def beats() -> list[float]:
        return [
            ln["beats"][key] for ln in list(lines) if ln["type"] == "beats" and key in ln["beats"]
        ]

    wait_for(lambda: len(beats()) >= 3, 60, what="three beats lines naming the lane")
    for line in list(lines):
        valid("record", line)
    said = beats()
    assert said == sorted(said) and said[-1] > said[0]  # the newest heartbeat each time
    views = [ln for ln in list(lines) if ln["type"] == "state" and ln["key"] == key]
    # ~15 beats in 3 s: without --beats each is a whole view; with it, the first view and
    # what else changed (the engine's own re-judgements), never one per beat.
    assert len(views) <= 2 * len(said), views
    (lane.namespace / "tmp").mkdir(exist_ok=True)
    (lane.namespace / "tmp" / "written").write_bytes(b"x" * 100)
    wait_for(
        lambda: any(
            ln["type"] == "state" and ln["key"] == key and (ln["view"]["bytes"] or 0) >= 100
            for ln in list(lines)
        ),
        30,
        what="the write as a whole view at once",
    )
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
