"""Clear and restore as a normal user, beside processes that user cannot inspect (root's, and
other users'). In the non-root tier (.ci/unprivileged) these run as that user; as root they
run the same commands as uid nobody through setpriv, with this test's own root processes as
the ones that cannot be inspected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from lanewatch.actions.trashbox import trash_dir
from tests.conftest import LANEWATCH
from tests.kits import actionkit
from tests.kits.actionkit import NOBODY, Procs, as_user, released_namespace

pytestmark = pytest.mark.unprivileged

lw = actionkit.lw  # the kit's fixtures, found by pytest under these names
scratch = actionkit.scratch

# Holds its working directory inside argv[1] after making itself non-dumpable, as ssh-agent
# and gpg-agent do: then even its own user cannot read its /proc/PID/cwd or fd/. With a
# second argument it also listens on a unix socket at that path, as an agent does.
NON_DUMPABLE = textwrap.dedent(
    """
    import ctypes, os, socket, sys, time
    PR_SET_DUMPABLE = 4
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    os.chdir(sys.argv[1])
    if len(sys.argv) > 2:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(sys.argv[2])
        listener.listen()
    print("ready", flush=True)
    time.sleep(600)
    """
)


class NormalUser:
    """Runs commands as a normal user: as itself in the non-root tier; as root, as nobody
    (with CAP_DAC_OVERRIDE only to reach pytest's root-only tmp_path)."""

    def __init__(self, scratch: Path) -> None:
        self.root = os.geteuid() == 0
        self.uid = NOBODY if self.root else os.geteuid()
        self.prefix: list[str] = as_user(NOBODY, caps=("dac_override",)) if self.root else []
        self.scratch = scratch

    def namespace(self, lane: str) -> Path:
        """A released namespace of this user's, as lanewatch makes them (0700, the user's)."""
        ns = released_namespace(self.scratch, lane)
        if self.root:
            ns_stamp = ns / ".lanewatch" / "owner.json"
            data = json.loads(ns_stamp.read_text())
            data.update(uid=NOBODY, user="nobody")
            ns_stamp.write_text(json.dumps(data))
            for path in [self.scratch, *self.scratch.rglob("*")]:
                os.lchown(path, NOBODY, NOBODY)
        return ns

    def lanewatch(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *LANEWATCH, *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )

    def holder(self, lw: Procs, code: str, *args: str) -> subprocess.Popen[bytes]:
        proc = lw.start([*self.prefix, sys.executable, "-c", code, *args], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        return proc


def uninspectable_pids() -> Sequence[int]:
    """Processes of other uids that the user of this process cannot inspect (as root: none)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                os.readlink(f"/proc/{entry.name}/cwd")
            except PermissionError:
                found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_a_normal_user_clears_a_stale_namespace_and_restores_it(lw: Procs, scratch: Path) -> None:
    user = NormalUser(scratch)
    ns = user.namespace("done")
    (ns / "tmp" / "keep.txt").write_text("kept\n")
    if user.root:
        os.lchown(ns / "tmp" / "keep.txt", NOBODY, NOBODY)

    cleared = user.lanewatch("clear", "--yes", str(ns))

    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    assert not ns.exists()
    said = cleared.stdout + cleared.stderr
    if user.root or uninspectable_pids():
        assert "could not be inspected and are not counted" in said, said
        assert "mode 0700" in said and "restore puts it back" in said, said
    [entry] = [p.name for p in trash_dir(scratch).iterdir() if not p.name.startswith(".")]

    restored = user.lanewatch("restore", entry)

    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert (ns / "tmp" / "keep.txt").read_text() == "kept\n"


def test_clear_refuses_while_the_users_own_process_has_its_cwd_inside(
    lw: Procs, scratch: Path
) -> None:
    user = NormalUser(scratch)
    ns = user.namespace("busy")
    user.holder(lw, actionkit.HOLDER, "cwd", str(ns / "tmp"))

    refused = user.lanewatch("clear", "--yes", str(ns))

    assert refused.returncode != 0
    assert "in use" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    assert ns.is_dir()


def test_a_hidden_process_of_the_user_is_counted_out_like_roots(lw: Procs, scratch: Path) -> None:
    """A non-dumpable process (ssh-agent, gpg-agent, sshd's session) hides even from its own
    user. Like root's processes it cannot be seen, so it is counted out and said so: a clear is
    one rename, a process working inside keeps working, and restore puts the folder back.
    Before, every such process refused: a user with ssh-agent running could clear nothing."""
    user = NormalUser(scratch)
    ns = user.namespace("hidden")
    user.holder(lw, NON_DUMPABLE, str(ns / "tmp"))

    cleared = user.lanewatch("clear", "--yes", str(ns))

    said = cleared.stdout + cleared.stderr
    assert cleared.returncode == 0, said
    assert "yours (non-dumpable)" in said and "could not be inspected and are not counted" in said
    assert not ns.exists()
    [entry] = [p.name for p in trash_dir(scratch).iterdir() if not p.name.startswith(".")]
    restored = user.lanewatch("restore", entry)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert ns.is_dir()


def test_a_hidden_process_listening_on_a_socket_inside_refuses(lw: Procs, scratch: Path) -> None:
    """An agent started inside the folder (its socket there, as `TMPDIR=… ssh-agent` makes it)
    whose files cannot be seen: the kernel's socket table names the socket, so the clear
    refuses, naming it and the processes it could not inspect of the socket's uid (root's
    clear refuses the same: tests/processes/test_clear_sockets.py)."""
    user = NormalUser(scratch)
    ns = user.namespace("ag")
    sock = ns / "tmp" / "s"
    if len(os.fsencode(sock)) >= 108:
        pytest.skip(f"the socket path is too long to bind here: {sock}")
    hidden = user.holder(lw, NON_DUMPABLE, str(ns / "tmp"), str(sock))

    refused = user.lanewatch("clear", "--yes", str(ns))

    said = refused.stdout + refused.stderr
    assert refused.returncode != 0, said
    assert f"a live socket is bound inside: {sock} (its server of uid {user.uid} is" in said, said
    assert f"could not be inspected: pid {hidden.pid} (" in said, said
    assert ns.is_dir()


def test_a_namespace_open_to_other_users_is_not_cleared_past_what_cannot_be_seen(
    scratch: Path,
) -> None:
    user = NormalUser(scratch)
    ns = user.namespace("open")
    os.chmod(ns, 0o755)
    if not user.root and not uninspectable_pids():
        pytest.skip("every process here can be inspected: nothing is out of sight")

    refused = user.lanewatch("clear", "--yes", str(ns))

    said = refused.stdout + refused.stderr
    assert refused.returncode != 0, said
    assert "mode 0755" in said and "other users' processes could be inside" in said, said
    assert ns.is_dir()
