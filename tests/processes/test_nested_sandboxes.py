"""Sandboxes inside a fenced lane: a lane's command starts bubblewrap (as
Codex runs its commands) or `unshare`, and what they write in /tmp is still the lane's; a
sandboxed process that leaves the lane's mount namespace, its session and its environment is
still a member. Real `lanewatch run`, real bwrap and util-linux `unshare`; as root and, in
the unprivileged tier, as a normal user. No container runtime is tested: none runs here
(docs/launchers.md says what one would lose)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import read_stamp
from lanewatch.records.writes import history
from tests.conftest import Spawn, Subreaper, lanewatch, wait_for
from tests.kits.attributionkit import kernel_engine, privileged
from tests.kits.enginekit import start_lane
from tests.processes.test_members import (
    DEADLINE,
    fenced_here,
    member,
    ns_of,
    start_lingering,
    status_of,
)

pytestmark = pytest.mark.unprivileged  # user journeys: also run as a normal user

WAYS = [w for w in ("kernel", "bwrap") if w == "kernel" or shutil.which("bwrap")]

# Three nested sandboxes, each writing /tmp/$0-TAG: bubblewrap over the whole tree (Codex's
# way), a user namespace alone, and a user + mount namespace of its own.
NESTED = (
    'bwrap --dev-bind / / sh -c "echo b > /tmp/$0-b" && '
    'unshare -Ur sh -c "echo u > /tmp/$0-u" && '
    'unshare -Urm sh -c "echo m > /tmp/$0-m"'
)

# CMD leaves behind a sandbox that took a mount namespace of its own, a session of its own and
# an empty environment (`unshare` execs: no process of it stays in the lane's namespace); it
# writes its pid to $0 and waits for $1.
ESCAPED = (
    "setsid env -i unshare -Urm sh -c "
    '\'echo $$ > "$0.part" && mv "$0.part" "$0"; while [ ! -e "$1" ]; do sleep 0.05; done\' '
    '"$0" "$1" </dev/null >/dev/null 2>&1 &'
)


def nesting_allowed() -> None:
    probe = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are off here: {probe.stderr.decode().strip()}")
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed (.ci/run installs it)")


@pytest.mark.parametrize("way", WAYS)
def test_bwrap_and_unshare_run_in_a_fenced_lane_and_write_in_its_tmp(way: str, repo: Path) -> None:
    nesting_allowed()
    name = f"nested-{uuid.uuid4().hex}"
    env = {**os.environ, "LANEWATCH_FENCE_WITH": way}

    ran = lanewatch(
        "run", "--lane", "nest", "--fence", "require", "--", "sh", "-c", NESTED, name,
        cwd=repo, env=env, timeout=60,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    stamp = read_stamp(ns_of("nest", repo)).stamp
    assert stamp is not None and stamp.fence == way
    tmp = ns_of("nest", repo) / "tmp"
    for tag in "bum":
        assert (tmp / f"{name}-{tag}").read_text() == f"{tag}\n"
        assert not Path("/tmp", f"{name}-{tag}").exists()  # the real /tmp never saw it


def test_a_sandbox_that_left_the_lanes_mount_namespace_stays_a_member(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    """`setsid env -i unshare -Urm …` from a fenced lane: once the runner is SIGKILLed, it is
    in no tree or group of the lane, carries no marker, and its mount namespace is not the
    lane's but one below it. Its /tmp is still the lane's folder: it is a member, the lane
    headless, and `kill` ends it. Before, the lane went stale under it."""
    nesting_allowed()
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: no mount namespace of the lane's own")
    out, go = tmp_path / "esc.pid", tmp_path / "esc.go"
    cmd = ["sh", "-c", ESCAPED, str(out), str(go)]
    runner, pid, _go = start_lingering(spawn, repo, "esc", cmd, out, go, "--fence", "auto")
    subreaper.adopt(pid)
    stamp = read_stamp(ns_of("esc", repo)).stamp
    assert stamp is not None and stamp.fence == "kernel"
    assert os.readlink(f"/proc/{pid}/ns/mnt") not in (
        stamp.mnt_ns,
        os.readlink("/proc/self/ns/mnt"),
    )

    runner.kill()
    runner.wait(timeout=DEADLINE)
    gone = status_of(repo, "esc")

    assert gone["state"] == "headless", gone
    assert member(gone, pid)["how"] == "mount-ns"
    killed = lanewatch("kill", "esc", "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr + killed.stdout
    wait_for(lambda: status_of(repo, "esc")["state"] == "stale", DEADLINE, what="stale")


@privileged
def test_a_write_from_bwrap_inside_a_fenced_lane_is_the_lanes(
    repo: Path, root: Path, procs: list, tmp_path: Path
) -> None:
    """With kernel attribution: the nested sandbox's write to /tmp/x lands in the lane's
    tmp/, is recorded there and credited to the lane, and is no shared-file incident."""
    nesting_allowed()
    name = f"nested-{uuid.uuid4().hex}.json"
    script = f'bwrap --dev-bind / / sh -c "printf %s nested > /tmp/{name}"'
    with kernel_engine(root) as (_, rec):
        a = start_lane(procs, repo, root, "A", ("sh", "-c", script))
        assert a.proc.wait(timeout=30) == 0
        own = a.namespace / "tmp" / name
        written = wait_for(lambda: history([str(root)], str(own)), 20, what="the write")
    assert own.read_text() == "nested"
    assert written[0].lane == "A" and written[0].namespace == str(a.namespace), written
    with rec.lock:
        kinds = [i.kind for i in rec.picture.incidents.values()]
    assert kinds == [], kinds  # neither a shared-file nor a cross-lane-write
