"""`processes.holders` against real processes: cwd, open files, directory fds, deleted files,
mappings, lane variables, orphans, unreadable processes and processes vanishing mid-scan."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lanewatch.linux.procid import ProcessIdentity, process_state
from lanewatch.processes import holders
from lanewatch.processes.holders import Holder, ProcScan
from tests.conftest import wait_for
from tests.kits import prockit
from tests.kits.prockit import DEADLINE, read_line

# A helper process: takes hold of TARGET in the way MODE says, prints "ready [PID]" and holds it
# until its stdin closes.
HELPER = r"""
import ctypes, mmap, os, sys, time
mode, target = sys.argv[1], sys.argv[2]
keep = []
extra = ""
if mode == "open":
    keep.append(open(target, "w"))
elif mode == "dirfd":
    keep.append(os.open(target, os.O_RDONLY | os.O_DIRECTORY))
elif mode == "deleted":
    f = open(target, "w")
    os.unlink(target)
    keep.append(f)
elif mode == "map":
    # Through libc: Python's mmap keeps a dup of the fd, and only the mapping must remain.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    fd = os.open(target, os.O_RDWR)
    addr = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    os.close(fd)
elif mode == "fork":
    child = os.fork()
    if child == 0:
        os.chdir(target)
        sys.stdin.close()
        time.sleep(600)
        os._exit(0)
    extra = f" {child}"
print("ready" + extra, flush=True)
sys.stdin.read()
"""


class Procs(prockit.Procs):
    stdin = subprocess.PIPE  # the helper holds its target until its stdin closes

    def helper(self, mode: str, target: Path, **kw: object) -> tuple[subprocess.Popen[bytes], str]:
        proc = self.start([sys.executable, "-c", HELPER, mode, str(target)], **kw)
        line = read_line(proc)
        assert line.startswith("ready"), line
        return proc, line


procs = prockit.procs_fixture(Procs)
ns = prockit.ns  # the kit's fixture, found by pytest under this name


def holder_of(result: ProcScan, pid: int) -> Holder:
    h = result.holder(pid)
    assert h is not None, f"pid {pid} not among holders {[x.pid for x in result.holders]}"
    return h


def sleeper(procs: Procs, cwd: Path, env: dict[str, str] | None = None) -> int:
    proc = procs.start(["sleep", "600"], cwd=cwd, env=env)
    wait_for(lambda: process_state(proc.pid) == "S", DEADLINE, what="sleep to start")
    wait_for(
        lambda: os.readlink(f"/proc/{proc.pid}/exe").endswith("sleep"),
        DEADLINE,
        what="sleep to exec",
    )
    return proc.pid


# --- what counts as holding ---------------------------------------------------------------------


def test_cwd_inside_is_found_with_identity(procs: Procs, ns: Path) -> None:
    pid = sleeper(procs, ns)
    h = holder_of(holders.scan([ns]), pid)
    assert [(p.kind, p.path, p.directory) for p in h.paths] == [("cwd", str(ns), True)]
    assert h.identity == ProcessIdentity.of(pid)
    assert h.ppid == os.getpid()
    assert h.pgid == pid  # start_new_session
    assert h.cmdline == ("sleep", "600")
    assert h.comm == "sleep"
    assert h.uid == os.geteuid()


def test_open_file_is_found_with_its_mode(procs: Procs, ns: Path, tmp_path: Path) -> None:
    target = ns / "out.txt"
    proc, _ = procs.helper("open", target, cwd=tmp_path)
    h = holder_of(holders.scan([ns]), proc.pid)
    (held,) = h.paths
    assert (held.kind, held.path, held.access, held.deleted) == ("fd", str(target), "write", False)
    assert held.fd is not None and held.fd > 2
    assert h.writing


def test_directory_fd_is_found(procs: Procs, ns: Path, tmp_path: Path) -> None:
    sub = ns / "sub"
    sub.mkdir()
    proc, _ = procs.helper("dirfd", sub, cwd=tmp_path)
    (held,) = holder_of(holders.scan([ns]), proc.pid).paths
    assert (held.kind, held.path, held.access, held.directory) == ("fd", str(sub), "read", True)


def test_deleted_file_is_found_and_marked(procs: Procs, ns: Path, tmp_path: Path) -> None:
    target = ns / "gone.bin"
    proc, _ = procs.helper("deleted", target, cwd=tmp_path)
    assert not target.exists()
    (held,) = holder_of(holders.scan([ns]), proc.pid).paths
    assert (held.kind, held.path, held.deleted) == ("fd", str(target), True)


def test_removed_cwd_is_found_and_marked(procs: Procs, ns: Path) -> None:
    sub = ns / "sub"
    sub.mkdir()
    pid = sleeper(procs, sub)
    sub.rmdir()
    (held,) = holder_of(holders.scan([ns]), pid).paths
    assert (held.kind, held.path, held.deleted) == ("cwd", str(sub), True)


def test_unlinked_file_with_another_link_is_deleted_here(ns: Path, tmp_path: Path) -> None:
    """Unlinked inside the namespace but still linked elsewhere: its nlink is not 0, yet the
    kernel's " (deleted)" is right about the path we care about."""
    target = ns / "linked.bin"
    target.write_text("x")
    os.link(target, tmp_path / "elsewhere.bin")
    with open(target) as f:
        target.unlink()
        h = holder_of(holders.scan([ns]), os.getpid())
        (held,) = [p for p in h.paths if p.fd == f.fileno()]
        assert (held.path, held.deleted, held.directory) == (str(target), True, False)


def test_a_live_file_named_deleted_is_not_deleted(ns: Path) -> None:
    target = ns / "x (deleted)"
    with open(target, "w") as f:
        h = holder_of(holders.scan([ns]), os.getpid())
        (held,) = [p for p in h.paths if p.fd == f.fileno()]
        assert (held.path, held.deleted) == (str(target), False)


def test_a_prefix_itself_deleted_or_only_so_named(ns: Path) -> None:
    """ "<prefix> (deleted)" is the prefix unlinked when it is the same inode, and a sibling of
    the prefix (not under it) when a live folder is merely named so."""
    gone = ns / "gone"
    gone.mkdir()
    named = ns / "kept (deleted)"
    named.mkdir()
    (ns / "kept").mkdir()
    fd_gone = os.open(gone, os.O_RDONLY | os.O_DIRECTORY)
    fd_named = os.open(named, os.O_RDONLY | os.O_DIRECTORY)
    try:
        gone.rmdir()
        h = holder_of(holders.scan([gone, ns / "kept"]), os.getpid())
        held = {p.fd: p for p in h.paths if p.kind == "fd"}
        assert (held[fd_gone].path, held[fd_gone].deleted) == (str(gone), True)
        assert held[fd_gone].directory
        assert fd_named not in held  # beside the prefix "kept", not inside it
    finally:
        os.close(fd_gone)
        os.close(fd_named)


def test_mapping_only_shows_with_maps(procs: Procs, ns: Path, tmp_path: Path) -> None:
    target = ns / "mapped.bin"
    target.write_bytes(b"x" * 4096)
    proc, _ = procs.helper("map", target, cwd=tmp_path)
    assert holders.scan([ns]).holder(proc.pid) is None  # no fd, no cwd: only the mapping
    (held,) = holder_of(holders.scan([ns], with_maps=True), proc.pid).paths
    assert (held.kind, held.path, held.access) == ("map", str(target), "write")  # MAP_SHARED rw
    assert proc.pid in {h.pid for h in holders.holders(ns).holders}  # clear's check sees it


def test_access_modes_of_our_own_fds(ns: Path) -> None:
    (ns / "r").write_text("r")
    opened = {
        os.open(ns / "r", os.O_RDONLY): "read",
        os.open(ns / "w", os.O_WRONLY | os.O_CREAT): "write",
        os.open(ns / "rw", os.O_RDWR | os.O_CREAT): "readwrite",
        os.open(ns / "r", os.O_PATH): "path",
        os.open(ns / "a", os.O_WRONLY | os.O_APPEND | os.O_CREAT): "write",
        os.open(ns / "r", os.O_RDONLY | os.O_APPEND): "read",  # append, but cannot write
    }
    try:
        h = holder_of(holders.scan([ns], with_env=False), os.getpid())
        seen = {p.fd: p.access for p in h.paths if p.kind == "fd"}
        assert {fd: seen.get(fd) for fd in opened} == opened
    finally:
        for fd in opened:
            os.close(fd)


def test_a_process_with_many_fds_is_read_as_one_with_few(ns: Path) -> None:
    """Past a few dozen fds the scan opens their folder once (`holders._MANY_FDS`): modes,
    folders, deleted files and file ids read the same through it."""
    assert len(os.listdir("/proc/self/fd")) + 48 > holders._MANY_FDS
    (ns / "folder").mkdir()
    opened: dict[int, tuple[str, str | None, bool, bool]] = {}
    for i in range(16):
        for mode, flags in (
            ("read", os.O_RDONLY),
            ("write", os.O_WRONLY),
            ("readwrite", os.O_RDWR),
        ):
            path = ns / f"{mode}-{i}"
            fd = os.open(path, flags | os.O_CREAT)
            opened[fd] = (str(path), mode, False, False)
    gone = os.open(ns / "gone", os.O_WRONLY | os.O_CREAT)
    (ns / "gone").unlink()
    opened[gone] = (str(ns / "gone"), "write", True, False)
    folder = os.open(ns / "folder", os.O_RDONLY | os.O_DIRECTORY)
    opened[folder] = (str(ns / "folder"), "read", False, True)
    try:
        h = holder_of(holders.scan([ns], with_env=False), os.getpid())
        seen = {p.fd: (p.path, p.access, p.deleted, p.directory) for p in h.paths}
        assert {fd: seen.get(fd) for fd in opened} == opened
        ids = {p.fd: p.file_id for p in h.paths if p.fd is not None}
        for fd, (_path, mode, _deleted, _folder) in opened.items():
            st = os.fstat(fd)
            want = (st.st_dev, st.st_ino) if mode in ("write", "readwrite") else None
            assert ids[fd] == want
    finally:
        for fd in opened:
            os.close(fd)


def test_own_fds_are_ignored_but_our_cwd_is_not(ns: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fd = os.open(ns / "owner.lock", os.O_RDWR | os.O_CREAT)
    try:
        assert os.getpid() in {h.pid for h in holders.holders(ns).holders}
        assert os.getpid() not in {h.pid for h in holders.holders(ns, own_fds=[fd]).holders}
        monkeypatch.chdir(ns)
        h = holder_of(holders.scan([ns], own_fds=[fd]), os.getpid())
        assert [p.kind for p in h.paths] == ["cwd"]
    finally:
        os.close(fd)


def test_lane_variables_from_environ(procs: Procs, ns: Path) -> None:
    env = dict(os.environ, LANEWATCH_LANE="lane [a]", LANEWATCH_NAMESPACE="ck.lane-a")
    pid = sleeper(procs, ns, env=env)
    h = holder_of(holders.scan([ns]), pid)
    assert (h.lane, h.namespace, h.env_readable) == ("lane [a]", "ck.lane-a", True)
    bare = holder_of(holders.scan([ns], with_env=False), pid)
    assert (bare.lane, bare.env_readable) == (None, False)
    plain = sleeper(procs, ns, env={k: v for k, v in os.environ.items() if "LANEWATCH" not in k})
    assert holder_of(holders.scan([ns]), plain).lane is None


def test_forked_child_outlives_its_parent(procs: Procs, ns: Path, tmp_path: Path) -> None:
    env = dict(os.environ, LANEWATCH_LANE="lane-b")
    parent, line = procs.helper("fork", ns, cwd=tmp_path, env=env)
    child = int(line.split()[1])
    procs.adopt(child)
    wait_for(lambda: os.readlink(f"/proc/{child}/cwd") == str(ns), DEADLINE, what="child to chdir")
    assert child in holders.descendants(parent.pid)
    assert holders.ancestors(child)[:2] == [parent.pid, os.getpid()]

    assert parent.stdin is not None
    parent.stdin.close()  # the parent exits; the child is re-parented and keeps its cwd
    parent.wait(timeout=DEADLINE)
    wait_for(
        lambda: holders.read_stat(child).ppid != parent.pid,  # type: ignore[union-attr]
        DEADLINE,
        what="child re-parented",
    )

    result = holders.scan([ns], with_tree=True)
    h = holder_of(result, child)
    assert [(p.kind, p.path) for p in h.paths] == [("cwd", str(ns))]
    assert h.lane == "lane-b"  # the lane still shows, by environment
    assert h.pgid == parent.pid  # and by process group, though not by descent
    assert child not in result.descendants(parent.pid)
    assert parent.pid not in result.procs


def test_stopped_process_still_holds(procs: Procs, ns: Path) -> None:
    pid = sleeper(procs, ns)
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: process_state(pid) == "T", DEADLINE, what="stop")
    assert holder_of(holders.scan([ns]), pid).stat.state == "T"


def test_zombie_holds_nothing_and_is_not_unreadable(procs: Procs, ns: Path) -> None:
    proc = procs.start(["sh", "-c", "exit 0"], cwd=ns)
    wait_for(lambda: process_state(proc.pid) == "Z", DEADLINE, what="zombie")
    result = holders.scan([ns], with_maps=True)
    assert result.holder(proc.pid) is None
    assert proc.pid not in result.unreadable_pids


# --- prefixes -----------------------------------------------------------------------------------


def test_a_prefix_is_a_folder_not_a_string_prefix(procs: Procs, ns: Path) -> None:
    sibling = ns.parent / (ns.name + "2")
    sibling.mkdir()
    outside = sleeper(procs, sibling)
    inside = sleeper(procs, ns)
    pids = {h.pid for h in holders.scan([ns]).holders}
    assert inside in pids
    assert outside not in pids


def test_a_symlinked_prefix_matches_the_kernel_path(procs: Procs, ns: Path, tmp_path: Path) -> None:
    link = tmp_path / "via-link"
    link.symlink_to(ns)
    pid = sleeper(procs, ns)
    (held,) = holder_of(holders.scan([link]), pid).paths
    assert held.path == str(ns)
    assert held.prefix == str(link)  # reported under the caller's prefix


def test_several_prefixes(procs: Procs, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    pa, pb = sleeper(procs, a), sleeper(procs, b)
    result = holders.scan([a, b])
    assert holder_of(result, pa).paths[0].prefix == str(a)
    assert holder_of(result, pb).paths[0].prefix == str(b)


# --- cannot tell, races, trees ------------------------------------------------------------------


def scan_as_nobody(path: Path) -> dict[str, object]:
    """Run holders(path) in a forked child that dropped to uid/gid 65534."""
    # Once here first: what the scan imports or caches on its first call (the boot id, read
    # with the "ascii" codec, imported at first use) is then in the child already. Uid 65534
    # cannot import it: the interpreter may live in root's 0700 home (pyenv), and the child
    # failed whenever this test was its worker's first scan.
    holders.holders(path)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            r = holders.holders(path)
            out = {
                "holders": [h.pid for h in r.holders],
                "unreadable": {str(u.pid): [u.what, u.uid] for u in r.unreadable},
                "complete": r.complete,
            }
            os.write(write_end, json.dumps(out).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        data = b""
        while chunk := os.read(read_end, 65536):
            data += chunk
    finally:
        os.close(read_end)
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


@pytest.mark.privileged
def test_permission_error_is_cannot_tell_never_not_holding(procs: Procs, ns: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to scan as another user")
    pid = sleeper(procs, ns)  # a root process the unprivileged scanner may not inspect
    seen = scan_as_nobody(ns)
    assert pid not in seen["holders"]  # type: ignore[operator]
    assert seen["unreadable"][str(pid)][1] == 0  # type: ignore[index]  # its owner: root
    assert seen["complete"] is False


def test_complete_means_nothing_unreadable(ns: Path) -> None:
    result = holders.holders(ns)
    assert result.complete == (not result.unreadable and result.hidden is None)
    assert not result.held or all(h.pid for h in result.holders)


def test_processes_vanishing_mid_scan_never_raise(ns: Path) -> None:
    stop = threading.Event()
    spawned = [0]

    def churn() -> None:
        while not stop.is_set():
            subprocess.run(["sh", "-c", "cd . && true"], cwd=ns, check=False)
            spawned[0] += 1

    workers = [threading.Thread(target=churn) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        wait_for(lambda: spawned[0] >= 2, DEADLINE, what="churn to start")
        for _ in range(10):
            holders.scan([ns], with_maps=True, with_tree=True)
            holders.holders(ns)
            holders.process_table()
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=DEADLINE)
    assert spawned[0] > 2


def test_process_tree(procs: Procs, tmp_path: Path) -> None:
    proc = procs.start(["sh", "-c", "sleep 600 & echo $!; wait"], cwd=tmp_path)
    child = int(read_line(proc))
    procs.adopt(child)  # killing sh would leave the sleep behind
    assert child in holders.descendants(proc.pid)
    assert holders.ppid_map()[child] == proc.pid
    assert holders.ancestors(child)[:2] == [proc.pid, os.getpid()]
    assert proc.pid in holders.descendants(os.getpid())
    table = holders.scan([tmp_path / "none"], with_tree=True)
    assert child in table.descendants(proc.pid)
    assert table.procs[child].pgid == proc.pid
    assert holders.read_stat(child).ppid == proc.pid  # type: ignore[union-attr]
    assert holders.read_stat(2**22 + 7) is None  # beyond any pid_max: no such process


def test_descendants_in_survives_a_ppid_loop() -> None:
    def st(pid: int, ppid: int) -> holders.ProcStat:
        return holders.ProcStat(pid, "x", "S", ppid, pid, pid, 0, 1)

    table = {10: st(10, 11), 11: st(11, 10), 12: st(12, 11)}
    assert holders.descendants_in(table, 10) == {11, 12}
