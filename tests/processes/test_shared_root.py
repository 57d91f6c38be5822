"""A scratch root shared by several hosts (NFS or similar; docs/hosts-shared-root.md).

One test machine has one hostname, so "another host" here is a stamp naming another hostname,
written by the test as that host's lanewatch would write it: the honest way to be another host
on one machine. What another host's lanewatch does is exactly that, plus touching the stamp
(its heartbeat), which the tests do with the stamp's mtime. A network filesystem cannot be
mounted here either: the one fact lanewatch takes from it, the filesystem type in mountinfo, is
given as a mountinfo line naming this root's real device (`network_fstype`'s `table`).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes.stamp import META_DIR, STAMP_FILE
from lanewatch.linux import mountinfo
from lanewatch.linux.mountinfo import network_fstype, parse_mountinfo, read_mountinfo
from tests.conftest import LANEWATCH, lanewatch, wait_for
from tests.kits import actionkit
from tests.kits.contractkit import report
from tests.kits.enginekit import make_stamp, running

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

scratch = actionkit.scratch  # a registered root under tmp_path
OTHER = "buildbox.example"  # the other host: never this machine's name


def other_host_lane(root: Path, lane: str, *, beat_age: float, interval: float = 60.0) -> Path:
    """A lane of OTHER whose last heartbeat was `beat_age` seconds ago. Its pid is this test's
    own (alive here): a verdict that looked at local pids would call it live; it must not."""
    beat = time.time() - beat_age
    # A minute between beats by default: a slow test machine never lets a fresh lane go overdue.
    ns = make_stamp(
        root, lane, host=OTHER, boot_id="their-boot", heartbeat_at=beat, heartbeat_interval=interval
    )
    os.utime(ns / META_DIR / STAMP_FILE, (beat, beat))  # their heartbeat is the stamp's mtime
    return ns


def by_key(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {ns["key"]: ns for ns in status["namespaces"]}


def test_other_hosts_owners_are_judged_by_their_heartbeat(scratch: Path, tmp_path: Path) -> None:
    fresh = other_host_lane(scratch, "fresh", beat_age=0)
    old = other_host_lane(scratch, "old", beat_age=3600)
    seen = by_key(report("status", "status", "--root", str(scratch), cwd=tmp_path, code=0))
    assert seen[str(fresh)]["state"] == "live" and seen[str(fresh)]["host"] == OTHER
    assert seen[str(fresh)]["grade"] == "inferred"  # a heartbeat, not a process we saw
    assert OTHER in seen[str(fresh)]["reason"]
    assert seen[str(old)]["state"] == "stale" and OTHER in seen[str(old)]["reason"]
    # Its heartbeat starts again (the other host came back): live again, nothing else needed.
    os.utime(old / META_DIR / STAMP_FILE)
    again = by_key(report("status", "status", "--root", str(scratch), cwd=tmp_path, code=0))
    assert again[str(old)]["state"] == "live"


def test_kill_and_clear_are_refused_on_another_hosts_owner(scratch: Path, tmp_path: Path) -> None:
    live = other_host_lane(scratch, "busy", beat_age=0)
    stale = other_host_lane(scratch, "gone-quiet", beat_age=3600)
    killed = report("kill", "kill", "busy", "--yes", cwd=tmp_path, code=3)
    assert killed["outcome"] == "refused" and killed["owner_host"] == OTHER
    assert OTHER in killed["message"]
    for name, ns in (("busy", live), ("gone-quiet", stale)):
        out = report("clear", "clear", name, "--yes", cwd=tmp_path, code=3)
        [result] = out["results"]
        assert result["outcome"] == "refused" and result["owner_host"] == OTHER, result
        assert OTHER in result["message"]
        assert (ns / META_DIR / STAMP_FILE).is_file()  # nothing moved
    # Text too names the host, and nothing was signalled: this test process (the pid the
    # stamps name) is still here to check.
    text = lanewatch("kill", "busy", "--yes", cwd=tmp_path, timeout=60)
    assert text.returncode == 3 and OTHER in text.stdout + text.stderr


def test_a_local_owners_results_name_no_other_host(scratch: Path, tmp_path: Path) -> None:
    actionkit.released_namespace(scratch, "mine")
    out = report("clear", "clear", "mine", "--dry-run", cwd=tmp_path, code=0)
    assert [r["owner_host"] for r in out["results"]] == [None]


def test_a_polled_root_sees_another_hosts_lane_arrive_and_go_quiet(
    scratch: Path, tmp_path: Path
) -> None:
    """`record --poll`, as on a shared root: a lane another host starts shows up live (the
    host named), then stale once its heartbeat stops, without inotify."""
    proc = subprocess.Popen(
        [*LANEWATCH, "record", "--json", "--poll", "--root", str(scratch)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: lines.extend(map(json.loads, proc.stdout)))  # type: ignore[arg-type]
    reader.start()

    def saw(cond: Any) -> bool:
        return any(cond(x) for x in list(lines))

    try:
        wait_for(
            lambda: saw(lambda x: x["type"] == "health" and x["status"] == "polling"),
            30,
            what=f"a polling root: {lines}",
        )
        # The other host beats every second (a touch of the stamp, as `lanewatch run` does),
        # promising one every 2 s: overdue, and so stale, 6 s after its last.
        ns = other_host_lane(scratch, "theirs", beat_age=0, interval=2.0)
        quiet = threading.Event()

        def beat() -> None:
            while not quiet.wait(1.0):
                os.utime(ns / META_DIR / STAMP_FILE)

        beats = threading.Thread(target=beat)
        beats.start()
        try:
            wait_for(
                lambda: saw(lambda x: x.get("key") == str(ns) and x.get("state") == "live"),
                30,
                what=f"the other host's lane, live: {lines}",
            )
            [live] = [x for x in list(lines) if x.get("key") == str(ns)]
            assert OTHER in live["reason"]
        finally:
            quiet.set()  # the host goes quiet: no more beats
            beats.join()
        wait_for(
            lambda: saw(lambda x: x.get("key") == str(ns) and x.get("state") == "stale"),
            40,
            what=f"stale once its heartbeat stopped: {lines}",
        )
        [stale] = [x for x in list(lines) if x.get("key") == str(ns) and x["state"] == "stale"]
        assert OTHER in stale["reason"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        reader.join(timeout=20)


def nfs_line(path: Path) -> str:
    """A mountinfo line saying `path`'s real device is an NFS mount (what the kernel would
    print for one; no NFS server can be mounted on a test machine)."""
    dev = os.stat(path).st_dev
    return f"900 1 {os.major(dev)}:{os.minor(dev)} / {path} rw - nfs4 server:/export rw\n"


def test_a_root_on_a_network_filesystem_is_known(tmp_path: Path) -> None:
    line = nfs_line(tmp_path)
    table = [*read_mountinfo(), *parse_mountinfo(line.encode())]  # mounted last: on top
    assert network_fstype(str(tmp_path), table) == "nfs4"
    local = line.replace(" nfs4 ", " ext4 ")
    assert network_fstype(str(tmp_path), parse_mountinfo(local.encode())) is None
    assert network_fstype(str(tmp_path / "nosuch"), table) is None  # cannot tell: None
    # This machine's own view of tmp_path: what `RootWatch` decides on.
    real = network_fstype(str(tmp_path))
    assert real is None or real in line, "tmp_path is on a network filesystem here"


def test_the_engine_polls_a_root_on_a_network_filesystem_unasked(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine reads the real mount table with one line added: the root's device as NFS
    (the one fact an NFS mount would change). It polls the root, says why, and sees writes."""
    real = read_mountinfo()
    line = nfs_line(root)
    monkeypatch.setattr(
        mountinfo, "read_mountinfo", lambda: [*real, *parse_mountinfo(line.encode())]
    )
    ns = make_stamp(root, "on-nfs")
    with running([root], poll_interval=0.2) as (engine, rec):
        assert engine.poll is False  # nobody asked for --poll
        assert rec.health(root) == "polling"
        with rec.lock:
            [health] = [h for h in rec.picture.health if h.root == str(root)]
        assert health.detail.startswith("nfs4, a network filesystem: polling"), health
        (ns / "written-elsewhere.txt").write_text("x")
        wait_for(lambda: (v := rec.view(ns)) is not None and v.files == 2, what="the write seen")
