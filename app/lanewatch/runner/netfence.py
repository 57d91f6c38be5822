"""`--fence net`: a network namespace of the lane's own, connected by slirp4netns.

The fence's stub (runner/fence.py) makes the namespace (`unshare(CLONE_NEWNET)`, in the user
namespace it made for a normal user) beside the private mounts, reports it, and waits. The
runner then starts slirp4netns on the stub's pid: it brings the namespace's loopback up, adds a
`tap0` (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3) and carries the lane's outbound traffic
through the host's sockets, as the user. Only once slirp4netns says it is ready (`--ready-fd`)
does the stub exec CMD, so CMD never sees a namespace without its network. Where slirp4netns
cannot start (no /dev/net/tun for this user, a refusing kernel), the stub exits before CMD
runs and the runner starts it again without the network namespace, saying so.

slirp4netns lives as long as the runner: `--exit-fd` is a pipe only the runner holds, so it
ends when the runner releases the lane, and also when the runner is SIGKILLed. docs/fence.md
("A private loopback per lane") says why slirp4netns rather than pasta, and what the lane gives
up (the host's 127.0.0.1 is 10.0.2.2 from inside).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass

from lanewatch.linux.procid import start_ticks
from lanewatch.linux.tunkeep import keep_tap, pidfd_of

TUN = "/dev/net/tun"
READY_TIMEOUT = 10.0  # seconds slirp4netns may take to say ready (it takes ~10 ms)
MTU = "65520"  # slirp4netns's largest: fewer, larger packets through the user-mode stack


def tool() -> tuple[str, str]:
    """(slirp4netns's path, "") where the network fence can be tried, else ("", why not)."""
    import shutil  # `--fence net` only: `run` starts without it

    path = shutil.which("slirp4netns")
    if path is None:
        return "", "slirp4netns is not installed (Debian: apt-get install slirp4netns)"
    if not os.access(TUN, os.R_OK | os.W_OK):
        return "", _tun_note()
    return path, ""


def _tun_note() -> str:
    try:
        mode = f"mode {os.stat(TUN).st_mode & 0o777:04o}"
    except OSError:
        return f"{TUN} does not exist here (no tun driver)"
    return f"{TUN} is not open to this user ({mode}; udev's default is 0666)"


@dataclass
class Slirp:
    """A running slirp4netns for one lane's namespace; `stop` ends it and reaps it."""

    proc: subprocess.Popen[bytes]
    exit_fd: int
    ticks: int | None
    net_ns: str | None = None  # the namespace it connects ("net:[N]"), as the stub reported
    pidfd: int = -1  # opened while it was our un-reaped child: `close` acts through it only

    @property
    def before_entry(self) -> tuple[int, int]:
        """(pid, start ticks): what the runner's linger must not wait for (runner/linger.py)."""
        return self.proc.pid, self.ticks or 0

    def close(self) -> None:
        """Close its exit pipe: it ends on its own, at once with its tap device left to the
        namespace (`linux/tunkeep.py`: else its exit unregisters it, 15 to 40 ms)."""
        if self.exit_fd >= 0:
            keep_tap(self.pidfd, self.proc.pid)
            with contextlib.suppress(OSError):
                os.close(self.exit_fd)
            self.exit_fd = -1

    def stop(self) -> None:
        """`close`, and reap it: a PID 1 that reaps no orphans (a container's, this kind of
        VM's) would keep it a zombie for ever."""
        self.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def connect(path: str, pid: int) -> Slirp | str:
    """Start slirp4netns (at `path`) on the namespace of `pid` (the fence's stub, waiting for
    its go-ahead) and wait until it is ready; the handle, or why it could not."""
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    argv = [path, "--configure", f"--mtu={MTU}", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}"]
    if os.geteuid() != 0:  # the stub's user namespace owns the network namespace
        argv.append(f"--userns-path=/proc/{pid}/ns/user")
    argv += [str(pid), "tap0"]
    try:
        proc = subprocess.Popen(
            argv,
            pass_fds=(ready_w, exit_r),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a signal to the runner's group is not its end
        )
    except OSError as exc:
        for fd in (ready_r, ready_w, exit_r, exit_w):
            os.close(fd)
        return f"slirp4netns cannot start ({exc.strerror})"
    os.close(ready_w)
    os.close(exit_r)
    ready = _read_ready(ready_r)
    if ready:
        return Slirp(proc, exit_w, start_ticks(proc.pid), pidfd=pidfd_of(proc.pid))
    os.close(exit_w)
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    note = tool()[1]  # the likeliest cause, said where it can be told
    return note or f"slirp4netns could not connect the namespace (exit {code})"


def _read_ready(fd: int) -> bool:
    """Whether slirp4netns wrote its ready byte before it closed `fd` (or READY_TIMEOUT)."""
    import select

    try:
        readable, _, _ = select.select([fd], [], [], READY_TIMEOUT)
        return bool(readable) and os.read(fd, 1) == b"1"
    except OSError:
        return False
    finally:
        os.close(fd)


def no_net_line(lane: str, why: str) -> str:
    """The one line `run --fence net` prints when the lane gets no network of its own. `lane`
    and `why` are made inert by the caller."""
    return (
        f"lanewatch: lane {lane} has no private network ({why}): it shares the host's "
        "loopback; its port lease and port incidents still hold (docs/fence.md)"
    )
