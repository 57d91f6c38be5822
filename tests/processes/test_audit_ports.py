"""`lanewatch audit` lists the ports its runs listen on outside their leases: the
migration queue's "tests bind :8000". Real runs of a sample command in 2 fenced lanes of 2
worktrees; only loopback is bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH, git
from tests.kits.portkit import free_fixed_port

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# Listen on PORT (retrying while the other run holds it) for a moment, then on $PORT (its lease):
# both runs listen on the fixed port, one after the other; their own ports are no finding.
SERVER = """
import os, socket, sys, time
def hold(port, seconds):
    deadline = time.monotonic() + 60
    while True:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            break
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                print(f"cannot bind 127.0.0.1:{port} for a minute; its sockets:", file=sys.stderr)
                for table in ("tcp", "tcp6"):  # state 0A listens, 06 waits (TIME_WAIT); uid
                    for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
                        f = line.split()
                        if int(f[1].rsplit(":", 1)[1], 16) == port:
                            print(table, "state", f[3], "uid", f[7], "inode", f[9], file=sys.stderr)
                sys.exit(3)
            time.sleep(0.05)
    s.listen()
    time.sleep(seconds)
    s.close()
hold(int(sys.argv[1]), 1.0)
hold(int(os.environ["PORT"]), 1.0)
"""


def test_two_runs_on_one_fixed_port_are_a_collision_in_the_queue(tmp_path: Path) -> None:
    repo = tmp_path / "sample"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "server.py").write_text(SERVER)
    git("add", "server.py", cwd=repo)
    git("commit", "-q", "-m", "sample", cwd=repo)
    # Not the demo's range: a demo another test runs beside this one holds its port for its
    # whole life, and both runs here failed to bind it for their minute (exit 3).
    port = free_fixed_port()
    cmd = [sys.executable, "server.py", str(port)]
    done = subprocess.run(
        [*LANEWATCH, "audit", "--parallel", "2", "--json", "--", *cmd],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    report = json.loads(done.stdout)
    runs = report["runs"]
    said = "\n".join(f"run {r['index']} exit {r['exit_code']}: {r['log_tail']}" for r in runs)
    assert [r["exit_code"] for r in runs] == [0, 0], f"fixed port {port}\n{done.stderr}\n{said}"
    (finding,) = [f for f in report["findings"] if f["path"].startswith(":")]
    assert finding["path"] == f":{port}"
    assert finding["scope"] == "unbound" and finding["owner"] == "ports"
    assert finding["shared"] and finding["runs"] == [0, 1]
    assert "$PORT" in finding["fix"]
    assert done.returncode == 4, done.stderr
