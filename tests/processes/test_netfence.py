"""`run --fence net` and `lanewatch forward`: every lane its own 127.0.0.1, one published on
the host's loopback. Real lanes, real namespaces, real slirp4netns; only loopback and the
lanes' own namespaces are addressed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import read_stamp
from lanewatch.model.views import LaneMember, NamespaceView, NsState
from lanewatch.runner import fence as fences
from lanewatch.runner import netfence
from lanewatch.tui.state.forward_hint import forward_hint
from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for
from tests.kits.enginekit import stamp_after_spawn
from tests.kits.netfencekit import why_no_net_fence

pytestmark = [pytest.mark.unprivileged, pytest.mark.processes]

# In the lane: serve the checkout's `served/` on 127.0.0.1:3000, read back who.txt through it,
# print it, then keep serving until stopped.
SERVE_AND_READ = textwrap.dedent(
    """
    import subprocess, sys, time, urllib.request
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "3000", "--bind", "127.0.0.1"],
        cwd="served", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:3000/who.txt", timeout=2) as r:
                print(r.read().decode(), flush=True)
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                print("server-failed", server.poll(), flush=True)
                sys.exit(1)
            time.sleep(0.05)
    sys.exit(server.wait())
    """
)


def _serving(spawn: Spawn, checkout: Path, who: str) -> subprocess.Popen[bytes]:
    served = checkout / "served"
    served.mkdir()
    (served / "who.txt").write_text(who)
    args = [*LANEWATCH, "run", "--lane", "web", "--fence", "net", "--"]
    return spawn(
        [*args, sys.executable, "-c", SERVE_AND_READ],
        cwd=checkout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    os.killpg(proc.pid, signal.SIGINT)
    return proc.wait(timeout=30)


def test_two_lanes_serve_on_their_own_3000_and_forward_publishes_one(
    spawn: Spawn, worktrees: tuple[Path, Path]
) -> None:
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")
    lanes = [_serving(spawn, wt, f"lane-{i}") for i, wt in enumerate(worktrees)]
    for i, proc in enumerate(lanes):
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()  # the lane's own 127.0.0.1:3000
        assert line == f"lane-{i}", (line, proc.stderr.read().decode() if proc.poll() else "")
    # Both serve at once on one port: neither has exited (EADDRINUSE would end it).
    assert [proc.poll() for proc in lanes] == [None, None]

    first = locate("web", checkout=worktrees[0]).namespace
    stamp = stamp_after_spawn(first)
    assert stamp.net_ns and stamp.net_ns.startswith("net:[")
    assert stamp.fence_private is not None and "network" in stamp.fence_private
    assert stamp.child_pid is not None and stamp.child_start_ticks is not None
    # The ports a net-fenced lane's view carries (the dashboard's `o` reads them) are the
    # prober's: test_private_ports.py.

    # Published on the host's loopback: one by Ctrl-C's end, the other until its lane ends.
    fwd = _forward(spawn, worktrees[0], first.name)
    with urllib.request.urlopen(_url(fwd) + "who.txt", timeout=10) as r:
        assert r.read().decode() == "lane-0"
    assert _stop(fwd) == 0
    second = locate("web", checkout=worktrees[1]).namespace
    fwd = _forward(spawn, worktrees[1], second.name)
    with urllib.request.urlopen(_url(fwd) + "who.txt", timeout=10) as r:
        assert r.read().decode() == "lane-1"
    for proc in lanes:
        _stop(proc)
    assert fwd.wait(timeout=30) == 0  # the lane ended: so does its forward
    assert fwd.stderr is not None and "ended" in fwd.stderr.read().decode()


def _forward(spawn: Spawn, cwd: Path, name: str) -> subprocess.Popen[bytes]:
    return spawn(
        [*LANEWATCH, "forward", name, "3000", "0"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _url(fwd: subprocess.Popen[bytes]) -> str:
    """The URL `forward` prints on its first line."""
    assert fwd.stdout is not None
    said = fwd.stdout.readline().decode()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", said)
    assert found, (
        said,
        fwd.stderr.read().decode() if fwd.stderr and fwd.poll() is not None else "",
    )
    return found.group(0)


def test_forward_refuses_a_lane_that_is_not_net_fenced(
    spawn: Spawn, worktrees: tuple[Path, Path]
) -> None:
    main = worktrees[0]
    ready = main / "ready"
    script = f'touch "{ready}"; exec sleep 60'
    lane = spawn(
        [*LANEWATCH, "run", "--lane", "plain", "--", "sh", "-c", script],
        cwd=main,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(ready.exists, timeout=30, what="the lane's command")
    ns = locate("plain", checkout=main).namespace
    wait_for(lambda: (s := read_stamp(ns).stamp) is not None and s.child_pid, what="child pid")
    done = lanewatch("forward", ns.name, "3000", "0", cwd=main)
    assert done.returncode == 3, done.stderr
    assert "is not net-fenced" in done.stderr
    assert "--fence net" in done.stderr
    _stop(lane)
    gone = lanewatch("forward", "no-such-lane", "3000", cwd=main)
    assert gone.returncode == 8, gone.stderr


def test_without_slirp4netns_the_lane_runs_and_says_it_shares_the_network(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    if fences.kernel_refusal() is not None:
        pytest.skip(f"the kernel refuses the fence here: {fences.kernel_refusal()}")
    empty = tmp_path / "no-tools"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}  # no slirp4netns (and no bwrap) to be found
    sh = shutil.which("sh")
    assert sh is not None
    done = lanewatch(
        "run", "--lane", "n", "--fence", "net", "--", sh, "-c", 'echo "$LANEWATCH_NET"',
        cwd=worktrees[0],
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "shared"
    lines = [line for line in done.stderr.splitlines() if "private network" in line]
    assert len(lines) == 1 and "slirp4netns is not installed" in lines[0], done.stderr
    stamp = read_stamp(locate("n", checkout=worktrees[0]).namespace).stamp
    assert stamp is not None and stamp.net_ns is None
    assert stamp.net_note is not None and "slirp4netns" in stamp.net_note
    assert stamp.fence == "kernel" and stamp.fence_private == ["/tmp", "/var/tmp"]
    shown = json.loads(lanewatch("status", "--json", cwd=worktrees[0]).stdout)
    notes = [ns.get("fence_note") for ns in shown["namespaces"]]
    assert any(note and "no private network" in note for note in notes), notes


def test_when_slirp4netns_fails_the_command_runs_once_without_a_private_network(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    """A slirp4netns that refuses (here a stand-in that exits 1, as one does without
    /dev/net/tun): the stub ends before CMD, the runner starts it again without the network
    namespace; CMD runs once, and the line says why."""
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")
    tools = tmp_path / "refusing tools"
    tools.mkdir()
    fake = tools / "slirp4netns"
    fake.write_text("#!/bin/sh\necho 'cannot open /dev/net/tun' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    ran = tmp_path / "ran"
    script = f'echo "$LANEWATCH_NET"; echo once >> "{ran}"'
    done = lanewatch(
        "run", "--lane", "n", "--fence", "net", "--", "sh", "-c", script,
        cwd=worktrees[0],
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "shared"
    assert ran.read_text() == "once\n"
    lines = [line for line in done.stderr.splitlines() if "private network" in line]
    assert len(lines) == 1 and "slirp4netns could not connect" in lines[0], done.stderr
    stamp = read_stamp(locate("n", checkout=worktrees[0]).namespace).stamp
    assert stamp is not None and stamp.net_ns is None and stamp.fence == "kernel"


def no_net_namespaces() -> list[str] | None:
    """A prefix that runs a command as this uid (a normal uid inside, as test_fence's
    `no_user_namespaces`) where the kernel refuses new network namespaces: a user namespace
    whose user.max_net_namespaces is 0. The kernel's own answer; None where it cannot be made."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    uid, gid = os.getuid() or 1000, os.getgid() or 1000
    inner = f'exec {unshare} --user --map-user={uid} --map-group={gid} -- "$@"'
    script = f"echo 0 > /proc/sys/user/max_net_namespaces && {inner}"
    prefix = [unshare, "--user", "--map-root-user", "--", "sh", "-c", script, "sh"]
    probe = subprocess.run(
        [*prefix, unshare, "--user", "--net", "true"], capture_output=True, text=True
    )
    if probe.returncode == 0 or "No space left" not in probe.stderr:
        return None
    return prefix


def test_where_the_kernel_refuses_a_network_namespace_the_lane_runs_fenced_without_it(
    repo: Path, tmp_path: Path
) -> None:
    prefix = no_net_namespaces()
    if prefix is None:
        pytest.skip("cannot make a place where the kernel refuses network namespaces")
    if not netfence.tool()[0]:
        pytest.skip(f"no network fence here to be refused: {netfence.tool()[1]}")
    ran = tmp_path / "ran"
    cmd = ["sh", "-c", f'echo "$LANEWATCH_NET $LANEWATCH_FENCE"; echo once >> "{ran}"']
    done = subprocess.run(
        [*prefix, *LANEWATCH, "run", "--lane", "k", "--fence", "net", "--", *cmd],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "shared kernel"  # /tmp still fenced, the network shared
    assert ran.read_text() == "once\n"
    lines = [line for line in done.stderr.splitlines() if "private network" in line]
    assert len(lines) == 1 and "no network namespace" in lines[0], done.stderr
    stamp = read_stamp(locate("k", checkout=repo).namespace).stamp
    assert stamp is not None and stamp.net_ns is None and stamp.fence == "kernel"
    assert "user.max_net_namespaces" in (stamp.net_note or "")


@pytest.mark.tui
def test_the_dashboards_hint_names_the_forward_command_and_the_url() -> None:
    title, said = forward_hint(_view("repo-web", (), "/tmp", "/var/tmp", "network"))
    assert title == "forward"  # no process of it running: its PORT, the lease's first
    assert "lanewatch forward repo-web 20000" in said and "http://127.0.0.1:20000/" in said
    assert "--fence net" in forward_hint(_view("repo-x", (), "/tmp"))[1]


def _view(name: str, members: tuple[LaneMember, ...], *private: str) -> NamespaceView:
    return NamespaceView(
        key=f"/r/{name}", root="/r", name=name, lane="web", checkout_id=None,
        checkout_path=None, host=None, pid=None, user=None, command=(),
        state=NsState.LIVE, reason="", grade="known", started_at=None, heartbeat_at=None,
        heartbeat_interval=None, released_at=None, exit_code=None, last_write=None,
        files=None, bytes=None, write_rate=(), stamp_status="ok", incident_ids=(),
        fence_private=private, lease=(20000, 10), members=members,
    )  # fmt: skip
