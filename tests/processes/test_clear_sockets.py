"""A live unix socket is never moved: clear refuses a namespace with a live
socket bound inside, for root as for a normal user, naming the socket and its process; purge
keeps a trash entry with one. Real servers: OpenSSH's ssh-agent, and a Python listener bound
from a mount namespace of its own (as a fenced lane names its /tmp). In the unprivileged tier
these run as that user, whose ssh-agent hides its files even from it (non-dumpable)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.actions.trashbox import trash_dir
from tests.conftest import LANEWATCH, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import Procs, released_namespace

pytestmark = pytest.mark.unprivileged

lw = actionkit.lw  # the kit's fixtures, found by pytest under these names
scratch = actionkit.scratch

# Listens on the unix socket argv[1] until killed; argv[2], when given, is a folder bound on
# /tmp first (run under `unshare --mount`): the socket is then named /tmp/... as a fenced
# lane's process names it.
LISTENER = textwrap.dedent(
    """
    import socket, subprocess, sys, time
    if len(sys.argv) > 2:
        subprocess.run(["mount", "--bind", sys.argv[2], "/tmp"], check=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(sys.argv[1])
    s.listen()
    print("ready", flush=True)
    time.sleep(600)
    """
)
SUN_PATH_MAX = 108


@contextlib.contextmanager
def bindable(folder: Path, name: str) -> Iterator[str]:
    """A path to bind `name` in `folder` at, until the binder is ready: the path itself, or,
    where that is longer than a socket address holds (a deep tmp_path), the same folder
    through /proc/OUR_PID/fd/N (that fd closed afterwards: it would hold the folder)."""
    whole = str(folder / name)
    if len(os.fsencode(whole)) < SUN_PATH_MAX:
        yield whole
        return
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/{os.getpid()}/fd/{fd}/{name}"
    finally:
        os.close(fd)


def is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def lanewatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd="/",
    )


def test_a_live_ssh_agent_socket_inside_refuses_the_clear(lw: Procs, scratch: Path) -> None:
    """`ssh-agent -a SOCK` keeps nothing open inside but its listening socket (its working
    folder is elsewhere): root's clear moved it before, and the agent served from the trash."""
    if shutil.which("ssh-agent") is None:
        pytest.skip("ssh-agent is not installed (Debian: openssh-client; .ci/run installs it)")
    ns = released_namespace(scratch, "agent")
    sock = ns / "tmp" / "agent.sock"
    with bindable(ns / "tmp", "agent.sock") as path:
        agent = lw.start(
            ["ssh-agent", "-D", "-a", path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
        wait_for(lambda: is_socket(sock), what="ssh-agent's socket")

    refused = lanewatch("clear", "--yes", str(ns))

    said = refused.stdout + refused.stderr
    assert refused.returncode == 3, said
    assert f"a live socket is bound inside: {sock} (" in said, said
    # Its command line whole, or (longer than a message holds: the test's folder is as long as
    # wherever the suite runs) the program and the end of the argument naming the socket.
    assert f"pid {agent.pid} (ssh-agent " in said and "agent.sock)" in said, said
    assert ns.is_dir() and is_socket(sock)

    agent.kill()
    agent.wait()
    cleared = lanewatch("clear", "--yes", str(ns))  # its server gone, a socket file is a file

    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    assert not ns.exists()


def test_a_socket_bound_from_another_mount_namespace_is_found_by_its_file(
    lw: Procs, scratch: Path
) -> None:
    """A process that sees the namespace's tmp/ at /tmp (as a fenced lane's do) binds
    /tmp/lsp.sock: the kernel's table names that path, which here is shared temp; the socket
    file is found by its device and inode instead, and the clear names both."""
    probe = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no user namespace here: {probe.stderr.decode().strip()}")
    ns = released_namespace(scratch, "lsp")
    server = lw.start(
        ["unshare", "-Urm", sys.executable, "-c", LISTENER, "/tmp/lsp.sock", str(ns / "tmp")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # pytest's capture file in the real /tmp: not ours to name
    )
    assert server.stdout is not None
    assert server.stdout.readline().strip() == b"ready"

    refused = lanewatch("clear", "--yes", str(ns))

    said = refused.stdout + refused.stderr
    assert refused.returncode == 3, said
    assert f"bound inside: {ns / 'tmp' / 'lsp.sock'} (" in said, said
    assert "bound as /tmp/lsp.sock)" in said and "python" in said, said
    assert ns.is_dir()


def test_purge_keeps_a_trash_entry_with_a_live_socket(lw: Procs, scratch: Path) -> None:
    """A server that binds in a namespace after it was cleared (its path from before): the
    purge keeps the entry instead of deleting the socket under it."""
    ns = released_namespace(scratch, "late")
    assert lanewatch("clear", "--yes", str(ns)).returncode == 0
    [entry] = [p for p in trash_dir(scratch).iterdir() if not p.name.startswith(".")]
    [moved] = [p for p in entry.iterdir() if p.is_dir()]
    with bindable(moved / "tmp", "late.sock") as path:
        server = lw.start([sys.executable, "-c", LISTENER, path], stdout=subprocess.PIPE)
        assert server.stdout is not None
        assert server.stdout.readline().strip() == b"ready"

    purged = lanewatch("purge", "--older-than", "0s", "--yes")

    said = purged.stdout + purged.stderr
    assert f"kept {entry.name}" in said and "a live socket is bound inside" in said, said
    assert entry.is_dir()


# --- the socket table's parts, without the kernel's answer ----------------------------------


def test_sock_diag_messages_keep_files_and_tell_abstract_names_apart() -> None:
    """A bound socket's name, file (device, inode: the kernel's dev_t is MAJOR << 20 | MINOR)
    and uid; an abstract name (leading NUL) is no file, and an unbound socket no name."""
    import struct

    from lanewatch.linux import unixsockets as us

    def attr(kind: int, value: bytes) -> bytes:
        raw = struct.pack("=HH", 4 + len(value), kind) + value
        return raw + b"\0" * (-len(raw) % 4)

    head = struct.pack("=BBBBIII", 1, 1, 10, 0, 4242, 0, 0)
    vfs = struct.pack("=II", 77, (8 << 20) | 3)
    named = us._message(
        head
        + attr(us.UNIX_DIAG_NAME, b"agent.sock")
        + attr(us.UNIX_DIAG_VFS, vfs)
        + attr(us.UNIX_DIAG_UID, struct.pack("=I", 1001))
    )
    assert named == us.BoundSocket("agent.sock", 4242, (os.makedev(8, 3), 77), 1001)
    abstract = us._message(head + attr(us.UNIX_DIAG_NAME, b"\0abstract"))
    assert abstract == us.AbstractListener("@abstract", 4242)
    assert us._message(head) is None
    st = os.stat_result((0o140755, 77 + (1 << 32), os.makedev(8, 3), 1, 0, 0, 0, 0, 0, 0))
    assert us.same_file(named, st)  # the kernel gives 32 bits of the inode


def test_without_netlink_a_socket_file_no_path_leads_to_cannot_be_told(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where netlink is refused (a seccomp filter: mocked, it cannot be made here), only
    /proc/net/unix's paths are left: a socket file none of them leads to cannot be told, and
    refuses; one without any socket file inside is cleared."""
    import socket

    from lanewatch.actions import sockets
    from lanewatch.linux import unixsockets

    def refused(*_: object) -> list[unixsockets.BoundSocket]:
        raise PermissionError(1, "netlink refused")

    monkeypatch.setattr(unixsockets, "_from_netlink", refused)
    ns = released_namespace(scratch, "nonet")
    assert sockets.why_listening(ns) is None
    left = socket.socket(socket.AF_UNIX)
    old = Path.cwd()
    os.chdir(ns / "tmp")  # bound by a relative name: the table's path leads nowhere here
    try:
        left.bind("left.sock")
    finally:
        os.chdir(old)
    try:
        why = sockets.why_listening(ns)
    finally:
        left.close()
    assert why is not None and "cannot tell whether a socket inside is live" in why, why
    assert str(ns / "tmp" / "left.sock") in why
