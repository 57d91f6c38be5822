"""How a `--fence net` lane ends: slirp4netns lives exactly as long as the lane's processes,
is gone (reaped) when `run` returns, and dies with a SIGKILLed runner; its exit leaves the
tap device to the namespace (linux/tunkeep.py) and the runner's linger does not scan /proc
for it (runner/linger.py `_childless`). Real lanes, real slirp4netns, real namespaces; only
loopback and the lanes' own namespaces are addressed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from lanewatch.linux.tunkeep import keep_tap, pidfd_of
from lanewatch.runner import netfence
from tests.conftest import LANEWATCH, Spawn, wait_for
from tests.kits.netfencekit import why_no_net_fence

pytestmark = [pytest.mark.unprivileged, pytest.mark.processes]


def _slirps_for(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of each slirp4netns whose target is `pid` (its argv names it)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if argv and argv[0].endswith(b"slirp4netns") and str(pid).encode() in argv:
            out.append((int(entry), stat.rsplit(")", 1)[1].split()[0]))
    return out


def _host_server() -> tuple[socket.socket, list[bytes]]:
    """A listener on the host's 127.0.0.1 (10.0.2.2 from a lane) that keeps what it is sent."""
    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    return server, got


def test_a_daemon_left_by_cmd_keeps_the_lanes_network_until_it_ends(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """CMD exits at once, its daemon reaches the host only afterwards: slirp4netns (the
    runner's own child beside the daemon) must still carry it, and the lane stays live. The
    daemon connects once the runner has said the lane stays live for it (by a file the test
    makes then), so it outlives CMD by more than the runner's settle."""
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")
    server, got = _host_server()
    port = server.getsockname()[1]
    go = tmp_path / "go"
    daemon = textwrap.dedent(
        f"""
        import os, socket, sys, time
        if os.fork():
            sys.exit(0)  # CMD's child exits; the grandchild is re-parented to the runner
        deadline = time.monotonic() + 60
        while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:
            time.sleep(0.02)
        with socket.create_connection(("10.0.2.2", {port}), timeout=20) as c:
            c.sendall(b"from the daemon")
        """
    )
    log = tmp_path / "run.log"
    try:
        with log.open("wb") as err:
            proc = spawn(
                [*LANEWATCH, "run", "--lane", "d", "--fence", "net", "--", sys.executable,
                 "-c", daemon],
                cwd=repo, stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        wait_for(lambda: "stays live while" in log.read_text(), 60, what="the lane lingering")
        go.touch()
        assert proc.wait(timeout=60) == 0, log.read_text()
        wait_for(lambda: got, 30, what="the daemon's bytes at the host's server")
    finally:
        server.close()
    assert got == [b"from the daemon"], log.read_text()


def test_slirp4netns_is_gone_when_run_returns_and_dies_with_a_killed_runner(
    spawn: Spawn, repo: Path
) -> None:
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")
    cmd = ["sh", "-c", 'echo "$$"']
    done = subprocess.run(
        [*LANEWATCH, "run", "--lane", "g", "--fence", "net", "--", *cmd],
        cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _slirps_for(int(done.stdout)) == []  # ended and reaped, not a zombie

    runner = spawn(
        [*LANEWATCH, "run", "--lane", "k", "--fence", "net", "--", "sh", "-c",
         'echo "$$"; exec sleep 60'],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert runner.stdout is not None
    cmd_pid = int(runner.stdout.readline())
    assert [state for _, state in _slirps_for(cmd_pid)] not in ([], ["Z"])
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)
    # Its exit pipe closed with the runner: it ends (a zombie until a reaper of orphans, if
    # any, collects it: PID 1 here need not).
    wait_for(
        lambda: all(state == "Z" for _, state in _slirps_for(cmd_pid)),
        timeout=20,
        what="slirp4netns to end with its killed runner",
    )
    with contextlib.suppress(ProcessLookupError):  # CMD (sleep), left by the killed runner
        os.killpg(cmd_pid, signal.SIGKILL)  # its own group (`run` made it its leader)


TAP_HOLDER = textwrap.dedent(
    """
    import ctypes, os, socket, sys
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        assert libc.unshare(0x10000000) == 0, "user namespace"
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
    assert libc.unshare(0x40000000) == 0, "network namespace"
    fd = os.open("/dev/net/tun", os.O_RDWR)
    name = b"tap0".ljust(16, b"\\0") + (0x1002).to_bytes(2, sys.byteorder)  # IFF_TAP|IFF_NO_PI
    req = ctypes.create_string_buffer(name, 40)
    assert libc.ioctl(fd, ctypes.c_ulong(0x400454CA), req) == 0, "TUNSETIFF"
    print(fd, flush=True)
    sys.stdin.readline()  # the test has (or has not) kept the device
    os.close(fd)
    print(" ".join(sorted(name for _, name in socket.if_nameindex())), flush=True)
    """
)


@pytest.mark.parametrize("kept", [True, False])
def test_keep_tap_leaves_the_device_to_the_namespace_past_its_last_descriptor(
    spawn: Spawn, tmp_path: Path, kept: bool
) -> None:
    """A real process in a network namespace of its own holds a tap device; `keep_tap` marks
    it persistent through a pidfd, so closing that last descriptor no longer removes it
    (without it, the device goes at the close: what costs slirp4netns's exit 15-40 ms)."""
    if not netfence.tool()[0]:
        pytest.skip(f"no tap devices here: {netfence.tool()[1]}")
    holder = spawn(
        [sys.executable, "-c", TAP_HOLDER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdin is not None and holder.stdout is not None
    line = holder.stdout.readline()
    if not line:
        assert holder.stderr is not None
        pytest.skip(f"cannot make a namespace with a tap device: {holder.stderr.read()!r}")
    pidfd = pidfd_of(holder.pid)
    if pidfd < 0:
        pytest.skip("no pidfd_open here (Linux 5.3)")
    try:
        assert keep_tap(pidfd, holder.pid) if kept else True
    finally:
        os.close(pidfd)
    holder.stdin.write(b"\n")
    holder.stdin.flush()
    names = holder.stdout.readline().decode().split()
    assert holder.wait(timeout=10) == 0
    assert names == (["lo", "tap0"] if kept else ["lo"])


def test_keep_tap_does_nothing_to_a_process_without_a_tap_device(spawn: Spawn) -> None:
    sleeper = spawn(["sleep", "30"])
    pidfd = pidfd_of(sleeper.pid)
    if pidfd < 0:
        pytest.skip("no pidfd_open here (Linux 5.3)")
    try:
        assert keep_tap(pidfd, sleeper.pid) is False
    finally:
        os.close(pidfd)


CHILDLESS = textwrap.dedent(
    """
    import subprocess, sys
    from lanewatch.linux.procid import start_ticks
    from lanewatch.runner.linger import _childless
    helper = subprocess.Popen(["sleep", "30"])
    helpers = frozenset({(helper.pid, start_ticks(helper.pid))})
    said = [_childless(helpers), _childless(frozenset())]
    other = subprocess.Popen(["sleep", "30"])  # a process of the lane beside the helper
    said.append(_childless(helpers))
    other.kill(); other.wait()
    said.append(_childless(helpers))
    stranger = frozenset({(helper.pid, start_ticks(helper.pid) + 1)})  # a reused pid's
    said.append(_childless(stranger))
    helper.kill(); helper.wait()
    print(said)
    """
)


def test_linger_is_childless_beside_its_own_helper_only(tmp_path: Path) -> None:
    """A runner whose only child left is slirp4netns has no process of the lane: no /proc scan.
    Run in a process of its own: `_childless` reaps whatever child of its caller has ended."""
    if shutil.which("sleep") is None:
        pytest.skip("no sleep(1)")
    done = subprocess.run(
        [sys.executable, "-c", CHILDLESS], capture_output=True, text=True, timeout=60,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, False, False, True, False]"
