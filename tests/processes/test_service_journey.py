"""The always-on watcher as a user meets it, with no systemd and no dashboard: the recorder is
started exactly as docs/service.md says for such machines (`nohup … record --service … &`),
lane B's detached writer (it left B's process tree and group: `setsid -f`) writes into lane
A's namespace, and:

- the service names the writer (lane B, its pid, its command) within 2 s of its first write:
  the write asks for a prompt probe, which finds B's process by the marker `lanewatch run`
  exported into its environment (before, only the full scan found it, up to 60 s later);
- `lanewatch status`, with only the service running, shows that incident and says a service
  watches; its attribution line is one line;
- no file in the user's root belongs to another uid.

Also run as a normal user by the non-root tier (.ci/unprivileged), beside root's and another
user's processes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes.stamp import read_stamp
from lanewatch.processes.markers import MarkerMemo
from lanewatch.processes.prober import probe
from lanewatch.records.incident_log import read_all
from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for
from tests.kits.contractkit import parsed
from tests.kits.enginekit import start_lane

pytestmark = pytest.mark.unprivileged

# Appends one line (the time) every 0.5 s to argv[1], holding it open, for at most 30 s; its
# pid goes to argv[2]. Started by lane B's command through `setsid -f`: a new session, and its
# parent exits at once, so it is in neither B's process tree nor B's process group.
WRITER = """
import os, sys, time
with open(sys.argv[2], "w") as f:
    f.write(str(os.getpid()))
out = open(sys.argv[1], "a", buffering=1)
end = time.time() + 30
while time.time() < end:
    out.write(repr(time.time()) + "\\n")
    time.sleep(0.5)
"""


def detached_writer_cmd(target: Path, pidfile: Path) -> tuple[str, ...]:
    script = 'setsid -f "$0" -c "$1" "$2" "$3" </dev/null >/dev/null 2>&1; exec sleep 60'
    return ("sh", "-c", script, sys.executable, WRITER, str(target), str(pidfile))


def kill_writer(pidfile: Path) -> None:
    """SIGKILL the detached writer if it still runs (its own session: no fixture reaches it),
    after checking the pid still names our writer."""
    try:
        pid = int(pidfile.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"sys.argv[2]" in cmdline:
        os.kill(pid, signal.SIGKILL)


def status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, "status", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_the_service_names_a_detached_writer_fast_and_status_shows_it(
    spawn: Spawn,
    repo: Path,
    root: Path,
    tmp_path: Path,
    isolated_state: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    a = start_lane(procs, repo, root, "A")  # registers the root the service will watch
    manual = subprocess.run(
        [*LANEWATCH, "service", "install", "--no-systemd"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert manual.startswith("nohup ") and manual.endswith(" &")
    # The docs' command, as a shell runs it. The shell exits at once, so the fixture's kill of
    # its group would not run: `service uninstall` stops the recorder (by identity) at the end.
    spawn(["sh", "-c", manual], cwd=tmp_path)
    try:
        _journey(repo, root, tmp_path, isolated_state, procs, a)
    finally:
        subprocess.run([*LANEWATCH, "service", "uninstall"], capture_output=True, timeout=60)


def _journey(
    repo: Path,
    root: Path,
    tmp_path: Path,
    isolated_state: Path,
    procs: list[subprocess.Popen[bytes]],
    a: Any,
) -> None:
    log = isolated_state / "service.log"
    wait_for(lambda: log.exists() and re.search(r"state\s+live\s+A:", log.read_text()), 30)
    said = subprocess.run(
        [*LANEWATCH, "service", "status"], capture_output=True, text=True, timeout=60
    )
    assert said.returncode == 0 and said.stdout.startswith("service: watching: pid"), said
    doctor = parsed("doctor", lanewatch("doctor", "--json", cwd=tmp_path).stdout)
    (service,) = [c for c in doctor["checks"] if c["name"] == "service"]
    assert service["status"] == "ok" and service["summary"].startswith("watching: pid"), service

    target = a.namespace / "tmp" / "b-was-here.txt"
    pidfile = tmp_path / "writer.pid"
    try:
        b = start_lane(procs, repo, root, "B", detached_writer_cmd(target, pidfile))
        writer_pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), 20))
        first_write = float(wait_for(lambda: target.exists() and target.read_text(), 20).split()[0])
        b_stamp = read_stamp(b.namespace).stamp
        assert b_stamp is not None and writer_pid not in (b_stamp.pid, b_stamp.child_pid)

        def recorded() -> object:
            found = [
                r
                for r in read_all([str(root.resolve())]).values()
                if r.kind == "cross-lane-write" and r.intruder.get("pid") == writer_pid
            ]
            return found[0] if found else None

        incident = wait_for(recorded, 20, what="the service's cross-lane-write incident on disk")
        assert incident.victim == str(a.namespace)
        assert incident.intruder["lane"] == "B"
        assert sys.executable in incident.intruder["command"]
        assert incident.first_seen - first_write <= 2.0, incident.first_seen - first_write

        # No dashboard runs: status shows the incident the service recorded, and the service.
        shown = status("--json")
        assert shown.returncode == 4, shown.stderr
        picture = json.loads(shown.stdout)
        assert picture["service"]["watching"] is True
        mine = [i for i in picture["incidents"] if i["intruder"].get("pid") == writer_pid]
        assert mine and mine[0]["intruder"]["lane"] == "B", picture["incidents"]
        text = status().stdout
        assert text.count("attribution:") == 1 and "service: watching: pid" in text
    finally:
        kill_writer(pidfile)
    me = os.geteuid()
    others = [str(p) for p in root.rglob("*") if p.lstat().st_uid != me]
    assert others == []


def test_the_fast_probe_reads_processes_found_only_by_their_lane_marker(
    repo: Path, root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    a = start_lane(procs, repo, root, "A")
    target = a.namespace / "tmp" / "held.txt"
    pidfile = tmp_path / "writer.pid"
    try:
        # Since the runner is a subreaper, B's own detached children stay in its tree; what only
        # the marker finds is a process of lane B started elsewhere with B's environment (a
        # server the lane handed work to): here, started by the test in a session of its own.
        b = start_lane(procs, repo, root, "B")
        env = {**os.environ, "LANEWATCH_NAMESPACE": str(b.namespace), "LANEWATCH_LANE": "B"}
        writer = [sys.executable, "-c", WRITER, str(target), str(pidfile)]
        procs.append(subprocess.Popen(writer, env=env, start_new_session=True))
        writer_pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), 20))
        wait_for(target.exists, 20)
        stamps = {}
        for lane in (a, b):
            s = read_stamp(lane.namespace).stamp
            assert s is not None
            stamps[str(lane.namespace)] = s
        prefixes = [str(root.resolve())]

        def held_by_writer(markers: MarkerMemo | None) -> bool:
            report = probe(stamps, prefixes, full=False, markers=markers)
            return any(h.pid == writer_pid for h in report.holdings or ())

        # Outside the owners' trees and groups the fast probe alone cannot see it ...
        assert not held_by_writer(None)
        # ... with the markers it does, and a second probe reads no environment again.
        memo = MarkerMemo()
        assert held_by_writer(memo)
        reads, seen = memo.reads, memo.seen()
        assert held_by_writer(memo)
        # Only processes it had not seen were read: those born since (the machine's, not ours;
        # a busy machine forks many). Before, `<= 5` reads failed beside a fork load.
        assert memo.reads - reads == len(memo.seen() - seen)
    finally:
        kill_writer(pidfile)
