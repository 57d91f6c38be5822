"""`lanewatch run`: supervise one command inside a claimed lane.

The command runs in its own process group so a kill reaches everything it started. Signals
sent to us are forwarded to that group while the child is un-reaped (so its pgid cannot have
been reused); the handlers are in place before the lane is claimed, so none is lost. When we
own the terminal, it is handed to the child's group as a shell would, so Ctrl-C and
interactive programs behave as without us.

The runner is its lane's child subreaper (`runner/linger.py`): whatever CMD starts stays below
it however it daemonizes, and the lane stays live until the last of those processes ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from lanewatch.inert import inert
from lanewatch.lanes import ledger
from lanewatch.lanes.lane import Lane
from lanewatch.lanes.roots import state_dir
from lanewatch.lanes.runcgroup import LaneCgroup
from lanewatch.linux.procid import start_ticks
from lanewatch.runner import fence as fences
from lanewatch.runner.launchers import screen_in_lane, tmux_in_lane
from lanewatch.runner.linger import (
    Before,
    become_subreaper,
    linger,
    processes_before,
    signal_descendants,
    wait_for_command,
)
from lanewatch.runner.pick import Interrupted, WaitInterrupted

if TYPE_CHECKING:
    from lanewatch.runner.netfence import Slirp

FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


def exit_code_of(returncode: int) -> int:
    """Shell convention: a death by signal N exits 128+N."""
    return returncode if returncode >= 0 else 128 - returncode


class _Forwarder:
    """Forward the signals we receive to CMD's process group.

    Installed before the claim and the spawn, so no signal can arrive in between and kill us
    with our default action (leaving CMD running, unsupervised, in a lane marked live). A
    signal that arrives before CMD's group exists is held and sent once it does. A signal that
    was ignored when we started (nohup, a background job) stays ignored, by us and by CMD.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self._pending: list[int] = []
        self._pgid: int | None = None
        self._previous: dict[int, Any] = {}
        self._to: Callable[[int], None] | None = None  # after CMD: the lane's processes

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if self._pgid is None:
            self._pending.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        if self._to is not None:
            self._to(signum)
        elif self._pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pgid, signum)

    def first(self) -> int | None:
        """The first signal received so far, if any."""
        return self.received[0] if self.received else None

    def install(self) -> None:
        for sig in FORWARDED:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue
            self._previous[sig] = signal.signal(sig, self._handle)

    def target(self, pgid: int) -> None:
        """CMD's group exists: send what arrived before it did."""
        self._pgid = pgid
        while self._pending:
            self._send(self._pending.pop(0))

    def to_each(self, deliver: Callable[[int], None]) -> None:
        """CMD is reaped (its group number may be reused): send to each process instead."""
        self._to = deliver

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


@contextlib.contextmanager
def _terminal_to(pgid: int) -> Iterator[None]:
    """Give the controlling terminal to `pgid` when we are in its foreground, then take it back."""
    try:  # sys.stdin may be None, closed, or not a file at all (embedded, captured)
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
        ours = fd >= 0 and os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError):
        fd, ours = -1, False
    if not ours:
        yield
        return
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)
            # The child may have read the terminal before it was handed over and stopped.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGCONT)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, os.getpgrp())
        signal.signal(signal.SIGTTOU, old)


def _spawn(
    cmd: Sequence[str],
    env: dict[str, str] | None,
    pass_fds: Sequence[int] = (),
    cgroup: LaneCgroup | None = None,
) -> subprocess.Popen[bytes] | int:
    """Start CMD as the leader of its own process group, or say why not (126/127); in the
    lane's cgroup when it has one (`lanes/runcgroup.py`)."""
    try:
        with cgroup.forking() if cgroup is not None else contextlib.nullcontext():
            return subprocess.Popen(list(cmd), env=env, process_group=0, pass_fds=pass_fds)
    except OSError as exc:
        code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
        what = "not found" if code == EXIT_NOT_FOUND else "not executable"
        print(f"lanewatch: command {what}: {inert(cmd[0])} ({exc.strerror})", file=sys.stderr)
        return code


def _reap_on_the_way_out(proc: subprocess.Popen[bytes]) -> None:
    if proc.returncode is None:  # we are dying on an exception: do not orphan a live group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


def run_in_lane(
    lane: Lane,
    cmd: Sequence[str],
    claim: Callable[[Interrupted], Lane] | None = None,
    fence: fences.Mode = fences.Mode.AUTO,
    shm: bool = False,
) -> int:
    """Run `cmd` in the (not yet claimed) `lane`; return its exit code. Claims and releases.

    `claim`, if given, claims instead of `lane.claim()` and returns the lane it claimed (a wait,
    or the next free lane: runner.pick); a signal that arrives while it waits ends the wait, and
    we exit 128+N as if it had killed CMD. `fence`: runner/fence.py; FenceRefused (raised
    before anything is claimed or run) for `tmp`/`require` (also by `$LANEWATCH_FENCE_REQUIRE`)
    where the fence cannot be built."""
    forwarder = _Forwarder()
    fence = fences.chosen(fence, os.environ)
    cgroup: LaneCgroup | None = None
    slirp: Slirp | None = None
    try:
        _decide_fence(lane, fence, shm)
        forwarder.install()
        if claim is None:
            lane.claim()
        else:
            try:
                lane = claim(forwarder.first)
            except WaitInterrupted as exc:
                return 128 + exc.signum
            if lane.fence is None:  # the next free lane, made by the pick: its own folders
                _decide_fence(lane, fence, shm)
                lane.update_stamp(**lane.fence_fields())
        if lane.ports.note is not None:
            line = f"lanewatch: lane {inert(repr(lane.name))} runs without a port lease: "
            print(line + inert(lane.ports.note), file=sys.stderr, flush=True)
        become_subreaper()  # if it cannot, processes that daemonize leave the tree, as before
        before = processes_before()  # an embedding program's own children are not the lane's
        cgroup = LaneCgroup.make(lane)
        proc, mnt_ns, slirp = _start(lane, cmd, fence, cgroup)
        if isinstance(proc, int):
            lane.release(exit_code=proc, event="spawn-failed")
            return proc
        forwarder.target(proc.pid)
        if slirp is not None:  # the lane's network stack: not the lane's to wait for
            before = before | {slirp.before_entry}
        return _supervise(lane, proc, forwarder, cmd[0], mnt_ns, before, cgroup, slirp)
    finally:
        if slirp is not None:
            slirp.stop()  # after the lane's last process: its daemons kept their network
        forwarder.restore()
        if cgroup is not None:
            cgroup.remove()
        if lane.claimed:  # an exception on the way: never leave the stamp saying live
            lane.release(exit_code=1)


def _start(
    lane: Lane, cmd: Sequence[str], mode: fences.Mode, cgroup: LaneCgroup | None = None
) -> tuple[subprocess.Popen[bytes] | int, str | None, Slirp | None]:
    """Start CMD in its claimed lane, fenced as `lane.fence` says; with the mount namespace
    it runs in when the fence gave it one of its own (`stamp.mnt_ns`), and the slirp4netns
    that connects its network namespace (`--fence net`, runner/netfence.py).

    The kernel way reports through a pipe (`fences.read_report`): where the kernel refuses,
    `auto` chooses again (`fences.fall_back`: bubblewrap, or unfenced saying why), writes
    that into the stamp and starts CMD again; CMD itself had not run. So does `--fence net`
    where the network namespace cannot be made or connected (`fences.without_net`)."""
    said_unfenced = False
    while True:
        fence = lane.fence
        assert fence is not None
        base = {**os.environ, **lane.env()}
        stub = fence.how == "kernel" and fence.wraps(cmd, base)
        reading, report = os.pipe() if stub else (-1, -1)
        waiting, go = os.pipe() if stub and fence.net else (-1, -1)
        try:
            argv, env = fences.command_for(
                fence,
                cmd,
                base,
                lane.tmp_dir,
                state_dir(),
                None if report < 0 else report,
                None if waiting < 0 else waiting,
            )
            # tmux's line: said once this fence is CMD's (a refusing kernel changes it).
            env, told = tmux_in_lane(cmd, env, lane.name, fence.hides)
            if told is None:
                env, told = screen_in_lane(cmd, env, lane.name)
            asked = mode in (fences.Mode.AUTO, fences.Mode.NET)
            if asked and not fence.fenced and not said_unfenced:
                said_unfenced = True  # once, and only where the fence fell, not for --fence none
                line = fences.unfenced_line(inert(repr(lane.name)), inert(fence.note))
                print(line, file=sys.stderr, flush=True)
            elif fence.fenced and fence.net_note and not said_unfenced and reading < 0:
                said_unfenced = True  # `--fence net` without the network namespace
                _say(_no_net_line(lane, fence))
            if reading < 0:
                _say(told)
            fds = tuple(fd for fd in (report, waiting) if fd >= 0)
            proc = _spawn(argv, env, fds, cgroup)
        finally:
            for fd in (report, waiting):
                if fd >= 0:
                    os.close(fd)  # the stub holds the only ends now: EOF at its exec
        if reading < 0:
            if go >= 0:
                os.close(go)
            return proc, None, None
        said = fences.read_report(reading)
        if not isinstance(proc, int) and said.refusal is None and go >= 0:
            slirp = _connect(lane, fence, proc, said, go)
            if slirp is None:
                continue  # CMD did not run: started again without the network namespace
            _say(told)
            ns = fences.own_mount_ns(proc.pid, said.mnt_ns) if said.mnt_ns else None
            return proc, ns, slirp
        if go >= 0:
            os.close(go)
        if isinstance(proc, int) or said.refusal is None:
            if fence.net_note and not said_unfenced:
                _say(_no_net_line(lane, fence))
            _say(told)
            if isinstance(proc, int) or not said.mnt_ns:
                return proc, None, None
            return proc, fences.own_mount_ns(proc.pid, said.mnt_ns), None
        proc.wait()  # exited 125 before CMD ran
        if mode is not fences.Mode.AUTO:
            print(
                f"lanewatch: cannot fence the lane: {inert(said.refusal)}",
                file=sys.stderr,
                flush=True,
            )
            return proc.returncode, None, None
        lane.fence = fences.fall_back(fence, said.refusal)
        lane.update_stamp(**lane.fence_fields())


def _connect(
    lane: Lane, fence: fences.Fence, proc: subprocess.Popen[bytes], said: fences.Report, go: int
) -> Slirp | None:
    """The stub waits in its network namespace: connect it (slirp4netns) and let CMD run, or
    end the stub (CMD has not run), take the network namespace off the lane's fence, say why
    and return None, so the caller starts CMD again."""
    from lanewatch.runner.netfence import Slirp, connect  # `--fence net` only

    why = said.net_refusal
    slirp: Slirp | str | None = None
    if why is None and said.net_ns is None:
        why = "the stub did not report its network namespace"
    if why is None:
        slirp = connect(fence.net, proc.pid)
        if isinstance(slirp, str):
            why = slirp
    if isinstance(slirp, Slirp):
        with contextlib.suppress(OSError):  # the stub is gone: CMD's exit says what happened
            os.write(go, b"g")
        os.close(go)
        slirp.net_ns = said.net_ns  # written with the child's pid (`_supervise`)
        return slirp
    os.close(go)  # the stub exits 125 at EOF, before CMD
    proc.wait()
    lane.fence = fences.without_net(fence, why or "no network namespace")
    lane.update_stamp(**lane.fence_fields())
    return None


def _no_net_line(lane: Lane, fence: fences.Fence) -> str:
    from lanewatch.runner.netfence import no_net_line  # `--fence net` only

    return no_net_line(repr(lane.name), fence.net_note)


def _say(line: str | None) -> None:
    if line is not None:
        print(inert(line), file=sys.stderr, flush=True)


def _decide_fence(lane: Lane, mode: fences.Mode, shm: bool) -> None:
    need = fences.Need.of_run(lane.namespace, lane.target.checkout.root, os.environ)
    lane.fence = fences.decide(mode, lane.namespace, need, shm=shm)


def run_unclaimed(cmd: Sequence[str]) -> int:
    """Run `cmd` as `run` does, but claim nothing: for a step nested in its own lane's run,
    whose outer `lanewatch run` already owns the namespace."""
    forwarder = _Forwarder()
    proc: subprocess.Popen[bytes] | int | None = None
    try:
        forwarder.install()
        proc = _spawn(cmd, None)
        if isinstance(proc, int):
            return proc
        forwarder.target(proc.pid)
        with _terminal_to(proc.pid):
            return exit_code_of(proc.wait())
    finally:
        if isinstance(proc, subprocess.Popen):
            _reap_on_the_way_out(proc)
        forwarder.restore()


def _supervise(
    lane: Lane,
    proc: subprocess.Popen[bytes],
    forwarder: _Forwarder,
    name: str,
    mnt_ns: str | None = None,
    before: Before = frozenset(),
    cgroup: LaneCgroup | None = None,
    slirp: Slirp | None = None,
) -> int:
    code = 1
    try:
        with _terminal_to(proc.pid):
            try:
                ticks = start_ticks(proc.pid)
            except OSError:
                ticks = None
            fenced_in = {"mnt_ns": mnt_ns} if mnt_ns else {}
            if slirp is not None and slirp.net_ns:
                fenced_in["net_ns"] = slirp.net_ns
            grouped = cgroup.stamp_fields() if cgroup is not None else {}
            lane.update_stamp(
                child_pid=proc.pid,
                child_start_ticks=ticks,
                pgid=proc.pid,
                **fenced_in,
                **grouped,
            )
            ledger.append(lane.namespace, "spawned", lane=lane.name, child_pid=proc.pid)
            returncode = wait_for_command(proc)
        code = exit_code_of(returncode)
        ledger.append(
            lane.namespace,
            "exited",
            lane=lane.name,
            exit_code=code,
            signals_forwarded=[signal.Signals(s).name for s in forwarder.received],
        )
        linger(
            lane,
            name,
            code,
            lambda: forwarder.to_each(lambda sig: signal_descendants(sig, before)),
            before,
            frozenset({slirp.before_entry}) if slirp is not None else frozenset(),
        )
    finally:
        if slirp is not None:
            slirp.close()  # the lane's last process is gone: it ends while we release
        _reap_on_the_way_out(proc)
        lane.release(exit_code=code)
    return code
