"""A full probe names a process's paths in our mount namespace's words once: the scan already
turns a fenced (or any other namespace's) process's paths into ours, so the probe must not
turn them again. Root: unshare(2) and a bind mount in a mount namespace of our own."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import Stamp, read_stamp
from lanewatch.linux import mountview
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.processes.prober import ProbeMemo, probe
from tests.kits.attributionkit import shared_temp_dir
from tests.kits.enginekit import make_stamp

UNSHARE = shutil.which("unshare")
needs_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or UNSHARE is None, reason="needs root and unshare(1)"
)


@pytest.fixture
def tmp_entry() -> Iterator[Path]:
    """A folder of its own in shared temp, unique to the run: a path a fenced process's
    namespace names otherwise (its /tmp is a lane's folder)."""
    with shared_temp_dir() as path:
        yield path


def _fenced_sleeper(
    root: Path, procs: list[subprocess.Popen[bytes]], script: str
) -> tuple[subprocess.Popen[bytes], Path, Stamp]:
    """As a fence does: the lane's tmp/ at /tmp in a mount namespace of its own, where `script`
    runs (given the lane's tmp/ as $1; it says "ready" once set up); the lane stamped with it
    as owner. Returns the process, the lane's namespace and its stamp."""
    ns = make_stamp(root, "fenced")
    lane_tmp = ns / "tmp"
    lane_tmp.mkdir(exist_ok=True)
    (lane_tmp / "held.txt").write_text("x")
    assert UNSHARE is not None
    proc = subprocess.Popen(
        [UNSHARE, "-m", "--propagation", "private", "sh", "-c", script, "sh", str(lane_tmp)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # no file opened before the mount (named by the old /tmp)
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    ident = ProcessIdentity.of(proc.pid)
    ns = make_stamp(root, "fenced", pid=ident.pid, start_ticks=ident.start_ticks)
    stamp = read_stamp(ns).stamp
    assert stamp is not None
    return proc, ns, stamp


@needs_unshare
@pytest.mark.parametrize("memo", [False, True], ids=["one-shot", "with-memo"])
def test_a_fenced_process_paths_are_translated_once(
    tmp_entry: Path, procs: list[subprocess.Popen[bytes]], memo: bool
) -> None:
    root = tmp_entry / "root"
    # Its cwd and a file open in what it calls /tmp.
    script = (
        'mount --bind "$1" /tmp && cd /tmp && exec 3</tmp/held.txt && echo ready && exec sleep 60'
    )
    proc, ns, stamp = _fenced_sleeper(root, procs, script)
    lane_tmp = ns / "tmp"
    kept = ProbeMemo() if memo else None
    for _ in range(3 if memo else 1):  # the memo's reuse names them the same way
        report = probe({str(ns): stamp}, [str(root)], memo=kept)
        assert report.holdings is not None
        paths = {(h.kind, h.path) for h in report.holdings if h.pid == proc.pid}
        assert paths == {("cwd", str(lane_tmp)), ("fd", str(lane_tmp / "held.txt"))}


@needs_unshare
def test_a_namespace_table_is_read_at_every_scan_and_parsed_when_it_changed(
    tmp_entry: Path, procs: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_entry / "root"
    script = 'mount --bind "$1" /tmp && cd /tmp && echo ready && exec sleep 60'
    proc, ns, stamp = _fenced_sleeper(root, procs, script)
    lane_tmp = ns / "tmp"
    # In its table: the root of its /tmp mount, named by this test's own folder (the lane's name
    # is the same in the test beside it, which another worker may run at once: seen in CI).
    mine = os.fsencode(tmp_entry.name)
    parsed: list[bool] = []
    real = mountview.parse_mountinfo

    def counted(data: bytes) -> list[mountview.MountEntry]:
        parsed.append(mine in data)
        return real(data)

    monkeypatch.setattr(mountview, "parse_mountinfo", counted)
    kept = ProbeMemo()

    def cwd() -> set[str]:
        report = probe({str(ns): stamp}, [str(root)], memo=kept)
        assert report.holdings is not None
        return {h.path for h in report.holdings if h.pid == proc.pid and h.kind == "cwd"}

    assert cwd() == {str(lane_tmp)}
    assert parsed.count(True) == 1  # its namespace's table (other namespaces here too)
    parsed.clear()
    assert cwd() == {str(lane_tmp)}
    assert cwd() == {str(lane_tmp)}
    assert parsed.count(True) == 0  # read again, the same bytes: not parsed again
    # A mount made in its namespace since: its table reads otherwise, and is parsed again.
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        return
    (lane_tmp / "sub").mkdir()
    subprocess.run(
        [nsenter, "-t", str(proc.pid), "-m", "mount", "-t", "tmpfs", "lw-test", "/tmp/sub"],
        check=True,
    )
    assert cwd() == {str(lane_tmp)}
    assert parsed.count(True) == 1  # the changed table
