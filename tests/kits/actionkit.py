"""Helpers for the tests of kill, clear, restore and purge: real `lanewatch run` lanes, stamps
written by hand for the owners a test needs, helper processes that hold things inside a
namespace, and teardown that kills and reaps every one of them. All under tmp_path."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes.checkout import resolve_checkout
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.roots import Registry, ensure_root
from lanewatch.lanes.stamp import OwnerState, Stamp, read_stamp
from lanewatch.processes.holders import process_table
from tests.conftest import LANEWATCH, mount_table, wait_for
from tests.kits.enginekit import CHECKOUT as CHECKOUT  # one stamp maker for every kit
from tests.kits.enginekit import LaneProc as Lane  # a `lanewatch run` and its namespace
from tests.kits.enginekit import make_stamp as make_stamp
from tests.kits.groups import Groups
from tests.kits.prockit import alive as alive  # one liveness check for every kit
from tests.kits.userkit import NOBODY as NOBODY  # code run as another user: userkit
from tests.kits.userkit import as_user as as_user
from tests.kits.userkit import python_as as python_as

DEADLINE = 20.0

# Prints "ready" once it holds what it was asked to hold inside the folder argv[2], then
# sleeps until killed. argv[1]: cwd | file | dir | deleted | mmap | lock.
HOLDER = textwrap.dedent(
    """
    import fcntl, mmap, os, sys, time
    kind, where = sys.argv[1], sys.argv[2]
    keep = []
    if kind == "cwd":
        os.chdir(where)
    elif kind == "file":
        keep.append(open(os.path.join(where, "held.txt"), "w"))
    elif kind == "dir":
        keep.append(os.open(where, os.O_RDONLY | os.O_DIRECTORY))
    elif kind == "deleted":
        f = open(os.path.join(where, "gone.txt"), "w")
        os.unlink(f.name)
        keep.append(f)
    elif kind == "mmap":  # through libc: Python's mmap module keeps a dup of the fd
        import ctypes
        path = os.path.join(where, "mapped.bin")
        with open(path, "wb") as f:
            f.write(b"x" * 4096)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        fd = os.open(path, os.O_RDONLY)
        keep.append(libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0))
        os.close(fd)
    elif kind == "lock":
        fd = os.open(where, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        keep.append(fd)
    print("ready", flush=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.5)
    """
)


def register_root(path: Path) -> Path:
    root = ensure_root(path)
    Registry().add(root)
    return root


def checkout_id(repo: Path) -> str:
    return resolve_checkout(repo).checkout_id


def released_namespace(root: Path, lane: str, files: int = 3) -> Path:
    """A namespace whose owner released it cleanly, with a few files."""
    ns = make_stamp(root, lane, state=OwnerState.RELEASED, released_at=time.time(), exit_code=0)
    (ns / "tmp").mkdir(exist_ok=True)
    for i in range(files):
        (ns / "tmp" / f"f{i}.txt").write_text(f"file {i}\n" * 10)
    return ns


def group_members(pgid: int) -> list[int]:
    return [p for p, st in process_table().items() if st.pgid == pgid and st.state not in "ZX"]


class Procs:
    """Every process a test starts: runner processes, their command groups, helpers. At the
    end each group is SIGKILLed and every child reaped; orphans come to us (subreaper)."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        self.pgids = Groups()  # our children's groups and their commands' (tests/kits/groups.py)

    def start(self, args: Sequence[str], **kw: Any) -> subprocess.Popen[bytes]:
        kw.setdefault("process_group", 0)
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc: subprocess.Popen[bytes] = subprocess.Popen(list(args), **kw)
        self.started.append(proc)
        self.pgids.append(proc.pid)
        return proc

    def holder(self, kind: str, where: Path, **kw: Any) -> subprocess.Popen[bytes]:
        """A process holding `where` the way `kind` says; returns once it does."""
        proc = self.start(
            [sys.executable, "-c", HOLDER, kind, str(where)], stdout=subprocess.PIPE, **kw
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == b"ready", f"holder {kind} failed: {line!r}"
        return proc

    def lane(
        self,
        repo: Path,
        root: Path,
        lane: str,
        cmd: Sequence[str] = ("sleep", "600"),
        env: dict[str, str] | None = None,
    ) -> Lane:
        """A real `lanewatch run`; returns once its stamp names its command's group."""
        args = [*LANEWATCH, "run", "--root", str(root), "--lane", lane, "--", *cmd]
        proc = self.start(args, cwd=repo, env=env, stdout=subprocess.DEVNULL)
        ns = root / namespace_name(checkout_id(repo), lane)

        def spawned() -> Stamp | None:
            s = read_stamp(ns).stamp
            if s is not None and s.pid == proc.pid and s.child_pid:
                return s
            assert proc.poll() is None, f"lanewatch run exited early: {proc.returncode}"
            return None

        stamp = wait_for(spawned, DEADLINE)
        assert isinstance(stamp, Stamp) and stamp.pgid
        self.pgids.append(stamp.pgid)
        return Lane(proc, ns)

    def close(self) -> None:
        self.pgids.kill()
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=DEADLINE)
            if proc.stdout is not None:
                proc.stdout.close()
        reap_orphans()


def reap_orphans() -> None:
    """Kill and reap every process that was re-parented to us (we are a subreaper)."""
    me = os.getpid()
    for pid, st in process_table().items():
        if st.ppid == me:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if not any(st.ppid == me for st in process_table().values()):
                return
            time.sleep(0.01)


@contextlib.contextmanager
def started() -> Iterator[Procs]:
    """For a fixture: a Procs that is closed (everything killed and reaped) at the end."""
    procs = Procs()
    try:
        yield procs
    finally:
        procs.close()


@contextlib.contextmanager
def bind_mounted(source: Path, point: Path) -> Iterator[None]:
    """`source` bind-mounted on `point` for the block (skips the test where that is not
    possible: not root, no mount(8), a sandbox that forbids it), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount(8) here")
    with mount_table():
        done = subprocess.run([mount, "--bind", str(source), str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"mount --bind failed here: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["umount", str(point)], check=True)


# Fixtures of the action tests: a module imports them by name (`from tests.kits.actionkit
# import lw, scratch`), which is how pytest finds them there.


@pytest.fixture
def lw(subreaper: Any) -> Iterator[Procs]:
    """Every process a test starts, killed and reaped at its end (the test is their reaper)."""
    with started() as procs:
        yield procs


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A scratch root under tmp_path, registered (in the test's own state folder)."""
    return register_root(tmp_path / "root")
