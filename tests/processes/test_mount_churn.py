"""The recorder's view of other mount namespaces never goes stale.

The kernel gives a dead mount namespace's number (`mnt:[4026532174]`) to the next one made, at
once. A table of mounts remembered by that number described a lane long gone: a new lane's
writes were renamed through it into paths that never existed
(`<root>/<a lane long gone>/tmp/<real checkout>/…`), each a `shared-file` incident. Root:
unshare(2), mounts inside namespaces of our own, kernel attribution.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.linux import mountns
from lanewatch.linux.mountns import mount_ns
from lanewatch.linux.mountview import MountViews
from lanewatch.records.writes import entries
from tests.conftest import git, wait_for
from tests.kits.attributionkit import kernel_engine, privileged, shared_temp_dir
from tests.kits.enginekit import start_lane

UNSHARE = shutil.which("unshare")
needs_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or UNSHARE is None, reason="needs root and unshare(1)"
)


@pytest.fixture
def tmp_entry() -> Iterator[Path]:
    """A folder of its own at the first level of /tmp (so a fenced lane binds it back on its
    own, apart from pytest's folder), unique to the run; removed at the end."""
    with shared_temp_dir() as path:
        yield path


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("hello\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "init", cwd=path)
    return path


def in_namespace(
    procs: list[subprocess.Popen[bytes]], folder: Path, at: Path
) -> subprocess.Popen[bytes]:
    """A process in a mount namespace of its own where `folder` is bound at `at`; returns
    once the mount is made."""
    assert UNSHARE is not None
    script = 'mount --bind "$1" "$2" && echo ready && exec sleep 60'
    cmd = [UNSHARE, "-m", "--propagation", "private", "sh", "-c", script, "sh"]
    proc = subprocess.Popen([*cmd, str(folder), str(at)], stdout=subprocess.PIPE)
    procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


@privileged
@needs_unshare
@pytest.mark.parametrize("unique_ids", [True, False], ids=["ns-ids", "numbers-only"])
def test_a_namespace_that_inherits_a_dead_ones_number_is_read_afresh(
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    unique_ids: bool,
) -> None:
    if not unique_ids:  # a kernel without NS_GET_MNTNS_ID: the number and a live process
        monkeypatch.setattr(mountns, "_unsupported", True)
    at, first, second = tmp_path / "at", tmp_path / "first", tmp_path / "second"
    for d in (at, first, second):
        d.mkdir()
    views = MountViews()
    a = in_namespace(procs, first, at)
    number = mount_ns(a.pid)
    assert number is not None
    assert views.ours(a.pid, str(at / "x")) == str(first / "x")
    a.kill()
    a.wait()
    # The next namespace made gets the number back (the lowest free); others may be making
    # namespaces on this machine too: a few tries.
    for _ in range(20):
        b = in_namespace(procs, second, at)
        now = mount_ns(b.pid)
        assert now is not None
        if now.inode == number.inode:
            break
        b.kill()
        b.wait()
    else:
        pytest.skip("the kernel never handed the dead namespace's number on here")
    assert views.ours(b.pid, str(at / "x")) == str(second / "x")


@needs_unshare
def test_our_own_table_is_read_again_when_a_mount_is_made(tmp_path: Path) -> None:
    # In a mount namespace of its own (ours is the machine's): a table kept, then a tmpfs
    # mounted, then the table asked for again.
    assert UNSHARE is not None
    code = textwrap.dedent(
        """
        import subprocess, sys
        from lanewatch.linux.mountinfo import OurMounts
        ours = OurMounts()
        before = ours.table()
        assert ours.table() is before  # unchanged: not read again
        subprocess.run(["mount", "-t", "tmpfs", "lw-test", sys.argv[1]], check=True)
        after = ours.table()
        assert any(m.mount_point == sys.argv[1] for m in after), after
        subprocess.run(["umount", sys.argv[1]], check=True)
        assert not any(m.mount_point == sys.argv[1] for m in ours.table())
        print(ours.version)
        """
    )
    target = tmp_path / "mnt"
    target.mkdir()
    cmd = [UNSHARE, "-m", "--propagation", "private", sys.executable, "-c", code, str(target)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


@privileged
@needs_unshare
def test_a_new_lane_after_hundreds_of_dead_namespaces_invents_no_incident(
    repo: Path, root: Path, tmp_entry: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    # Lane A (its checkout in pytest's folder) writes in its checkout, then runs 300 children,
    # each in a mount namespace of its own (a copy of A's fence) writing in the checkout too:
    # each a write we name through the writer's mounts. Then lane B, in a checkout at a first
    # level of /tmp that A's fence never bound, writes in its checkout from a new namespace,
    # which gets a number one of A's had. None of it is anyone's collision.
    churn = 300
    child = 'echo $1 > "$2/churn-$1"; sleep 1'
    loop = (
        'echo a > "$1/a.txt"; i=0; while [ $i -lt "$2" ]; do '
        f"{UNSHARE} -m sh -c '{child}' sh $i \"$1\" & i=$((i+1)); done; wait"
    )
    other = make_repo(tmp_entry / "repo")
    written = [other / f"b-{n}.txt" for n in range(20)]
    script = 'for f in "$@"; do echo b > "$f"; done; sleep 1'
    with kernel_engine(root) as (_, rec):
        cmd_a = ("sh", "-c", loop, "sh", str(repo), str(churn))
        a = start_lane(procs, repo, root, "A", cmd_a, wait_child=False)
        assert a.proc.wait(timeout=120) == 0
        assert len(list(repo.glob("churn-*"))) == churn
        cmd_b = ("sh", "-c", script, "sh", *map(str, written))
        b = start_lane(procs, other, root, "B", cmd_b, wait_child=False)
        assert b.proc.wait(timeout=60) == 0

        def by_b() -> list[str]:
            """B's writes outside its namespace, as the recorder named them."""
            ns = str(b.namespace)
            found = entries([str(root)])
            return [e.path for e in found if e.lane == "B" and not e.path.startswith(ns)]

        wait_for(lambda: len(by_b()) >= len(written), 30)
        paths = sorted(set(by_b()))
        with rec.lock:
            incidents = list(rec.picture.incidents.values())
    invented = [(i.kind, [e.path for e in i.evidence][:1]) for i in incidents]
    assert invented == []
    assert paths == sorted(map(str, written))  # real paths, not through a dead lane's mounts
