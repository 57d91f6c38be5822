"""The scan's memo against real processes: what a quiet holder held is reused, and read afresh
when the holder ran (an fd reopened with another mode), when a path changed under it (renamed,
unlinked), and when its pid names another process (a real pid reuse, in a pid namespace)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.processes import holders
from lanewatch.processes.holders import Holder
from lanewatch.processes.memo import ProcMemo, Seen, quiet_mark
from tests.conftest import wait_for
from tests.kits import prockit
from tests.kits.prockit import DEADLINE, read_line

# Holds PATH open (read or write) with $LANEWATCH_LANE as given, prints "ready FD", then
# sleeps in a read of stdin; "reopen-write" closes the fd and opens PATH again for writing.
HOLDER = r"""
import os, sys
mode, path = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY if mode == "write" else os.O_RDONLY)
print("ready", fd, flush=True)
while line := sys.stdin.readline():
    if line.strip() == "reopen-write":
        os.close(fd)
        fd = os.open(path, os.O_WRONLY)
        print("reopened", fd, flush=True)
"""


class Procs(prockit.Procs):
    stdin = subprocess.PIPE

    def holder(self, mode: str, path: Path, lane: str = "one") -> subprocess.Popen[bytes]:
        env = {**os.environ, "LANEWATCH_LANE": lane}
        proc = self.start([sys.executable, "-c", HOLDER, mode, str(path)], env=env)
        assert read_line(proc).startswith("ready")
        return proc


procs = prockit.procs_fixture(Procs)
ns = prockit.ns  # the kit's fixture, found by pytest under this name


def said(h: Holder | None) -> object:
    """What a scan says about one holder, without its momentary state letter."""
    assert h is not None
    return (h.pid, h.start_ticks, h.paths, h.lane, h.namespace, h.cmdline, h.env_readable)


def scan_both(ns: Path, memo: ProcMemo, pid: int) -> Holder:
    """One scan with the memo and one without: they must say the same about `pid`."""
    kept = holders.scan([ns], memo=memo).holder(pid)
    assert said(kept) == said(holders.scan([ns]).holder(pid))
    assert kept is not None
    return kept


def until_trusted(ns: Path, memo: ProcMemo, pid: int) -> Holder:
    """Scan until the memo vouches for `pid`: two scans once it sleeps."""
    found: list[Holder] = []

    def vouched() -> bool:
        found.append(scan_both(ns, memo, pid))
        seen = memo.previous(pid)
        return seen is not None and seen.mark is not None

    wait_for(vouched, DEADLINE, what=f"the memo to vouch for pid {pid}")
    return found[-1]


def test_a_quiet_holder_is_reused_and_said_the_same(procs: Procs, ns: Path) -> None:
    target = ns / "out.log"
    target.write_text("")
    sub = ns / "sub"
    sub.mkdir()
    writer = procs.holder("write", target)
    reader = procs.holder("read", sub)
    memo = ProcMemo()
    for proc in (writer, reader):
        until_trusted(ns, memo, proc.pid)
    before = {p.pid: scan_both(ns, memo, p.pid) for p in (writer, reader)}
    after = {p.pid: scan_both(ns, memo, p.pid) for p in (writer, reader)}
    for pid in before:
        # The very same objects: nothing was read again but the links.
        assert all(a is b for a, b in zip(before[pid].paths, after[pid].paths, strict=True))
        assert after[pid].cmdline is before[pid].cmdline  # no read of cmdline or environ
    (w,) = after[writer.pid].paths
    assert (w.path, w.access, w.directory) == (str(target), "write", False)
    (r,) = after[reader.pid].paths
    assert (r.path, r.access, r.directory) == (str(sub), "read", True)
    assert after[reader.pid].lane == "one"


def test_an_fd_reopened_with_another_mode_is_read_again(procs: Procs, ns: Path) -> None:
    target = ns / "data.bin"
    target.write_text("x")
    proc = procs.holder("read", target)
    memo = ProcMemo()
    (held,) = until_trusted(ns, memo, proc.pid).paths
    assert held.access == "read"
    assert proc.stdin is not None
    proc.stdin.write(b"reopen-write\n")
    proc.stdin.flush()
    line = read_line(proc)
    assert line == f"reopened {held.fd}", line  # the same fd number, the same name
    (again,) = scan_both(ns, memo, proc.pid).paths
    assert (again.fd, again.path, again.access) == (held.fd, str(target), "write")


def test_a_path_renamed_or_unlinked_under_a_quiet_holder(procs: Procs, ns: Path) -> None:
    target = ns / "before.txt"
    target.write_text("x")
    proc = procs.holder("read", target)
    memo = ProcMemo()
    until_trusted(ns, memo, proc.pid)
    moved = ns / "after.txt"
    target.rename(moved)  # by us: the holder does not run
    (held,) = scan_both(ns, memo, proc.pid).paths
    assert (held.path, held.deleted) == (str(moved), False)
    moved.unlink()
    (held,) = scan_both(ns, memo, proc.pid).paths
    assert (held.path, held.deleted) == (str(moved), True)


def test_a_running_or_threaded_process_is_never_vouched_for(procs: Procs) -> None:
    spin = procs.start([sys.executable, "-c", "print('ready', flush=True)\nwhile True: pass"])
    threaded = procs.start(
        [
            sys.executable,
            "-c",
            "import sys, threading\n"
            "threading.Thread(target=sys.stdin.read, daemon=True).start()\n"
            "print('ready', flush=True)\nsys.stdin.read()",
        ]
    )
    quiet = procs.start(
        [sys.executable, "-c", "import sys\nprint('ready', flush=True)\nsys.stdin.read()"]
    )
    for proc in (spin, threaded, quiet):
        assert read_line(proc) == "ready"

    def mark(pid: int) -> bytes | None:
        dfd = os.open(f"/proc/{pid}", os.O_PATH | os.O_DIRECTORY)
        try:
            return quiet_mark(dfd)
        finally:
            os.close(dfd)

    wait_for(lambda: mark(quiet.pid) is not None, DEADLINE, what="the quiet process to sleep")
    assert mark(threaded.pid) is None
    # A spinning process is on the CPU or waiting for it: state R, whenever we look.
    assert all(mark(spin.pid) is None for _ in range(20))


# A real pid reuse needs the pid to come round again: in a pid namespace of our own nobody
# else takes pids, and ns_last_pid says which comes next. Runs as that namespace's init.
REUSE = r"""
import json, os, subprocess, sys, time
from lanewatch.processes import holders
from lanewatch.processes.memo import ProcMemo
holder, path = sys.argv[1], sys.argv[2]
ns = os.path.dirname(path)

def start(mode, lane):
    env = dict(os.environ, LANEWATCH_LANE=lane)
    p = subprocess.Popen([sys.executable, "-c", holder, mode, path], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout.readline().startswith(b"ready")
    return p

memo = ProcMemo()
first = start("read", "first")
trusted = False
deadline = time.monotonic() + 30
while not trusted and time.monotonic() < deadline:  # two scans once it sleeps in its read
    holders.scan([ns], memo=memo)
    seen = memo.previous(first.pid)
    trusted = seen is not None and seen.mark is not None
    time.sleep(0.005)
pid = first.pid
first.stdin.close()
first.wait()
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(pid - 1))
second = start("write", "second")
h = holders.scan([ns], memo=memo).holder(second.pid)
fresh = holders.scan([ns]).holder(second.pid)
print(json.dumps({
    "trusted": trusted, "reused": second.pid == pid,
    "access": [p.access for p in h.paths], "lane": h.lane,
    "same": (h.paths, h.lane, h.start_ticks) == (fresh.paths, fresh.lane, fresh.start_ticks),
}))
second.stdin.close()
second.wait()
"""


def _can_unshare_pid() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--pid", "--fork", "--mount-proc", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_unshare_pid(), reason="needs root and unshare --pid")
def test_a_reused_pid_is_read_afresh(ns: Path) -> None:
    target = ns / "shared.bin"
    target.write_text("x")
    cmd = ["unshare", "--pid", "--fork", "--mount-proc"]
    cmd += [sys.executable, "-c", REUSE, HOLDER, str(target)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE * 4)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["trusted"], "the first process never looked quiet to the memo"
    assert result["reused"], "the pid did not come round again"
    # The same pid, the same fd number and path: only the start ticks tell them apart.
    assert result["access"] == ["write"]
    assert result["lane"] == "second"
    assert result["same"]


def test_facts_are_not_reused_once_the_prefixes_changed(procs: Procs, ns: Path) -> None:
    """A fact names the prefix it lies under: scanned against other prefixes, the holder is
    read in full again (and the answer names the prefix of this scan)."""
    inner = ns / "inner"
    inner.mkdir()
    target = inner / "f"
    target.write_text("")
    proc = procs.holder("read", target)
    memo = ProcMemo()
    (trusted,) = until_trusted(ns, memo, proc.pid).paths
    assert trusted.prefix == str(ns)
    found = holders.scan([inner], memo=memo).holder(proc.pid)
    assert found is not None
    (again,) = found.paths
    assert again is not trusted
    assert (again.path, again.prefix) == (str(target), str(inner))
    assert memo.previous(proc.pid) is not None and memo.previous(proc.pid).mark is None


def test_a_memo_only_keeps_the_last_scans_holders(procs: Procs, ns: Path) -> None:
    target = ns / "f"
    target.write_text("")
    proc = procs.holder("read", target)
    memo = ProcMemo()
    until_trusted(ns, memo, proc.pid)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=DEADLINE)
    holders.scan([ns], memo=memo)
    assert memo.previous(proc.pid) is None


# Opens PATH, forks; the child keeps the very same fd table (no exec) and sleeps.
TWINS = r"""
import os, signal, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
child = os.fork()
if child == 0:
    signal.pause()
    os._exit(0)
print("ready", child, flush=True)
sys.stdin.read()
"""


def test_processes_showing_one_fd_table_are_never_vouched_for(procs: Procs, ns: Path) -> None:
    """clone(CLONE_FILES) sharers show the same table and one can change it while the other
    sleeps: the same table in two processes (here a fork's copy) is never trusted for its
    fds. What only the process itself can change (command line, environment) is reused."""
    target = ns / "twin.bin"
    target.write_text("x")
    parent = procs.start([sys.executable, "-c", TWINS, str(target)])
    child = int(read_line(parent).split()[1])
    procs.adopt(child)
    memo = ProcMemo()

    def both_quiet() -> bool:
        holders.scan([ns], memo=memo)
        seen = [memo.previous(p) for p in (parent.pid, child)]
        return all(s is not None and s.mark is not None for s in seen)

    wait_for(both_quiet, DEADLINE, what="both processes to sleep")
    for pid in (parent.pid, child):
        seen = memo.previous(pid)
        assert seen is not None and not seen.alone
        # Its fds read afresh each time (new facts), and the same as a scan without a memo.
        before = holder_of(holders.scan([ns], memo=memo), pid)
        facts = dict(seen_of(memo, pid).fds)
        again = scan_both(ns, memo, pid)
        fresh = seen_of(memo, pid).fds
        assert facts and fresh.keys() == facts.keys()
        assert all(fresh[name] is not facts[name] for name in facts)
        assert again.cmdline is before.cmdline  # not read again: it did not run


def seen_of(memo: ProcMemo, pid: int) -> Seen:
    seen = memo.previous(pid)
    assert seen is not None
    return seen


def holder_of(result: holders.ProcScan, pid: int) -> Holder:
    h = result.holder(pid)
    assert h is not None
    return h
