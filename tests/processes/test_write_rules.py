"""What counts as a write, with real lanes and real processes: a file held read-only is read,
not written (no incident), the same file held for writing is one; a lane's git writing the
common dir of its own checkout's repository (a linked worktree's `git commit`) is the
checkout's, not an unbound write.

The prober's shared temp is `/tmp`, `/var/tmp` and `/dev/shm`; here the real probe reads the
real processes under a folder of tmp_path, and the rules (`model.writers.writers`) are told
that folder is shared temp, as test_incidents.py tells them `/tmp`. The kernel's part
(fanotify, root only) runs on real `/tmp`, where tmp_path lies.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import Stamp, read_stamp
from lanewatch.model import writers as wr
from lanewatch.processes.prober import probe
from lanewatch.records.writes import entries
from tests.conftest import git, wait_for
from tests.kits.attributionkit import kernel_engine, privileged, wait_known
from tests.kits.enginekit import LaneProc, start_lane

# A lane's command: opens each MODE:PATH (Python's modes: rb read-only, ab append, r+b read
# and write, wb write), says so by creating READY (outside every prefix), and holds them.
HOLDER = r"""
import sys, time
ready, *specs = sys.argv[1:]
held = [open(path, mode) for mode, path in (s.split(":", 1) for s in specs)]
open(ready, "w").close()
time.sleep(600)
"""


def holding(ready: Path, *specs: str) -> tuple[str, ...]:
    return (sys.executable, "-c", HOLDER, str(ready), *specs)


Seen = set[tuple[str, str]]


def stamps_of(*lanes: LaneProc) -> dict[str, Stamp]:
    out = {}
    for lane in lanes:
        s = read_stamp(lane.namespace).stamp
        assert s is not None
        out[str(lane.namespace)] = s
    return out


def found(stamps: dict[str, Stamp], root: Path, shared: Path, *, full: bool) -> Seen:
    """(kind, path) of every incident the prober's rules see now: every process read (full)
    or the live lanes' processes only (the fast probe)."""
    report = probe(stamps, [str(root), str(shared)], full=full)
    assert report.holdings is not None
    observed = wr.writers(
        report.holdings,
        report.owners,
        stamps.keys(),
        roots=[str(root)],
        shared=[str(shared)],
        at=report.at,
    )
    return {(o.kind, o.evidence.path) for o in observed}


def both_probes(stamps: dict[str, Stamp], root: Path, shared: Path) -> Iterable[Seen]:
    return (found(stamps, root, shared, full=full) for full in (True, False))


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    path = tmp_path / "shared"
    path.mkdir()
    return path.resolve()


@pytest.mark.unprivileged
def test_a_file_held_read_only_in_shared_temp_is_no_incident(
    repo: Path, root: Path, shared: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    for name in ("big.txt", "appended.log", "both.bin"):
        (shared / name).write_text("input\n")
    ready = tmp_path / "ready"
    cmd = holding(
        ready,
        f"rb:{shared / 'big.txt'}",  # what `sort big.txt` does
        f"ab:{shared / 'appended.log'}",
        f"r+b:{shared / 'both.bin'}",
        f"wb:{shared / 'written.json'}",
    )
    lane = start_lane(procs, repo, root.resolve(), "A", cmd)
    wait_for(ready.exists, 20)
    writes = {str(shared / n) for n in ("appended.log", "both.bin", "written.json")}
    for seen in both_probes(stamps_of(lane), root.resolve(), shared):
        assert seen == {("shared-file", p) for p in writes}


@pytest.mark.unprivileged
def test_another_lanes_file_held_read_only_is_no_foreign_write(
    repo: Path, root: Path, shared: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    a = start_lane(procs, repo, root.resolve(), "A")
    read, written = a.namespace / "tmp" / "input.txt", a.namespace / "tmp" / "output.txt"
    read.write_text("A's input\n")
    ready = tmp_path / "ready"
    b = start_lane(procs, repo, root.resolve(), "B", holding(ready, f"rb:{read}", f"ab:{written}"))
    wait_for(ready.exists, 20)
    for seen in both_probes(stamps_of(a, b), root.resolve(), shared):
        assert seen == {("cross-lane-write", str(written))}


@pytest.mark.unprivileged
def test_a_linked_worktrees_git_writing_its_common_dir_is_no_unbound_write(
    root: Path, shared: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """The repository and its linked worktree both in shared temp (a CI job's clone in /tmp):
    git in the worktree writes the main checkout's `.git`, outside the worktree."""
    main, linked = shared / "repo", shared / "wt"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    (main / "README").write_text("hello\n")
    git("add", "README", cwd=main)
    git("commit", "-q", "-m", "init", cwd=main)
    git("worktree", "add", "-q", str(linked), "-b", "side", cwd=main)
    common = git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=linked).strip()
    assert Path(common) == main / ".git"
    pack = main / ".git" / "objects" / "pack" / "tmp_pack_gc"  # what `git gc` holds
    index = main / ".git" / "worktrees" / "wt" / "index.lock"  # what `git commit` holds
    ready = tmp_path / "ready"
    cmd = holding(ready, f"wb:{pack}", f"wb:{index}", f"wb:{shared / 'elsewhere.json'}")
    lane = start_lane(procs, linked, root.resolve(), "G", cmd)
    wait_for(ready.exists, 20)
    for seen in both_probes(stamps_of(lane), root.resolve(), shared):
        assert seen == {("shared-file", str(shared / "elsewhere.json"))}


@privileged
def test_kernel_reports_no_read_and_no_common_dir_write_as_unbound(
    worktrees: tuple[Path, Path], root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """tmp_path lies in /tmp: shared temp for the kernel attribution. The lane in the linked
    worktree reads a file there, commits (git writes the main checkout's `.git`), then writes
    a control file there, which is an unbound write; by then the rest was reported too."""
    main, linked = worktrees
    if not str(tmp_path.resolve()).startswith(os.path.realpath("/tmp") + "/"):
        pytest.skip("tmp_path is not under /tmp: not shared temp for the kernel attribution")
    read = tmp_path / "big.txt"
    read.write_text("input\n")
    control = tmp_path / "control.json"
    script = (
        'cat "$1" > /dev/null && echo change > f && git add f'
        " && git -c user.name=t -c user.email=t@example.invalid commit -q -m change"
        ' && sleep 1.2 && printf %s done > "$2" && exec sleep 60'
    )
    with kernel_engine(root) as (_, rec):
        start_lane(procs, linked, root, "G", ("sh", "-c", script, "sh", str(read), str(control)))
        incident, _ = wait_known(rec, "shared-file", control)
        with rec.lock:
            evidence = {e.path for i in rec.picture.incidents.values() for e in i.evidence}
    assert incident.intruder["lane"] == "G"
    common = str((main / ".git").resolve())
    assert git("log", "-1", "--format=%s", cwd=linked).strip() == "change"
    # The kernel saw git's writes in the common dir (the lane's, in the history) ...
    recorded = {e.path for e in entries([str(root)]) if e.lane == "G"}
    assert [p for p in recorded if p.startswith(common + "/")]
    # ... and none of them, nor the read, is an incident.
    assert not [p for p in evidence if p and p.startswith(common + "/")]
    assert str(read) not in evidence and str(read) not in recorded
