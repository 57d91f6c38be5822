"""`lanewatch run` as its lane's child subreaper: it reaps whatever CMD leaves behind, and the
lane stays live until the last of the lane's processes has ended.

Why wait (docs/launchers.md): a command that daemonizes (`tmux new -d`, `nohup x &`, a double
fork) returns at once while its work goes on; if the runner released the lane then, the lane
would read "released" (clearable) while its processes still write to it. So after CMD exits
the runner says, once, which processes still run and keeps the lane until they end; its exit
code is still CMD's. Ctrl-C (any forwarded signal) then goes to each of those processes,
identity-checked (`linux.reaper.signal_exact`), and `lanewatch kill LANE` ends them too.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lanewatch.inert import inert
from lanewatch.lanes import ledger
from lanewatch.lanes.lane import Lane
from lanewatch.linux import reaper
from lanewatch.linux.proc import ProcStat, own_children, stat_table
from lanewatch.linux.procid import ProbeError, ProcessIdentity, boot_id, start_ticks
from lanewatch.runner.launchers import listening

MAX_NAMED = 5
# How long the processes CMD leaves may take to end on their own before the runner says the
# lane lingers: a helper that ends with its program (multiprocessing's resource tracker, which
# exits once it reads the end of its pipe from the exited CMD) is not work going on.
SETTLE = 0.5


def become_subreaper() -> str | None:
    """Make the runner its descendants' reaper of last resort; None, or why it could not."""
    return reaper.set_child_subreaper()


def wait_for_command(proc: subprocess.Popen[bytes]) -> int:
    """Wait for CMD as `proc.wait()` would, reaping on the way every orphan re-parented to us
    (a subreaper that never reaped would collect zombies). Returns the raw return code."""
    while proc.returncode is None:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # reaped elsewhere: ask Popen, which knows
            return proc.wait()
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode


Before = frozenset[tuple[int, int]]  # (pid, start ticks) of processes that predate the run


def processes_before() -> Before:
    """Our descendants before CMD starts: none for `lanewatch run` (no child yet, so no /proc
    scan); an embedding program's own children (pytest's xdist workers, a server's helpers)
    when `run_in_lane` is called in-process. They are not the lane's: never waited for, never
    signalled."""
    try:  # asks, reaps nothing: fails only when there is no child at all
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return frozenset()
    return frozenset((st.pid, st.start_ticks) for st in reaper.descendants(os.getpid()))


def lane_descendants(before: Before = frozenset()) -> list[ProcStat]:
    """Our running descendants, less those that predate the run and everything below them."""
    procs = stat_table()
    every = reaper.descendants(os.getpid(), procs)
    if not before:
        return every
    old = {pid for pid, ticks in before if pid in procs and procs[pid].start_ticks == ticks}
    me = os.getpid()
    out = []
    for st in every:
        pid = st.pid
        while pid != me and pid in procs and pid not in old:
            pid = procs[pid].ppid
        if pid not in old:
            out.append(st)
    return out


def signal_descendants(sig: int, before: Before = frozenset()) -> None:
    """Send `sig` to each of the lane's descendants, each checked by identity at the signal."""
    boot = boot_id()
    for st in lane_descendants(before):
        reaper.signal_exact(ProcessIdentity(st.pid, st.start_ticks, boot), sig)


def _is_socket(entry: os.DirEntry[str]) -> bool:
    """A socket, not followed if a link (DirEntry has no `is_socket`)."""
    try:
        return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return False


def _tmux_hint(lane: Lane) -> str:
    """A tmux server started in a fenced lane has its socket in the lane's private /tmp, which
    is `<namespace>/tmp` outside: name the path to attach from outside (`tmux -L` cannot).
    Only sockets a server answers on: one left by an earlier run's server is no way in."""
    if lane.fence is None or "/tmp" not in lane.fence.private:
        return ""
    return "".join(
        f" Attach from outside the lane: tmux -S {inert(s)} attach."
        for s in live_sockets(lane.tmp_dir / f"tmux-{os.getuid()}")
    )


def live_sockets(folder: Path) -> list[str]:
    """The sockets in `folder` a server answers on, sorted (none: `folder` unreadable)."""
    try:
        with os.scandir(folder) as entries:
            sockets = sorted(e.path for e in entries if _is_socket(e))
    except OSError:
        return []
    return [s for s in sockets if listening(s)]


def _childless(helpers: Before = frozenset()) -> bool:
    """Whether the runner has no child left but its `helpers` (reaping, on the way, any that
    already ended). Then it has no process of the lane either: one is below a living child of
    ours, or was re-parented to us when its parent died. The common case, and it costs no
    /proc scan; `helpers` (slirp4netns, `--fence net`) cost the read of our children's list."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            break
    if not helpers:
        return False
    children = own_children()
    if children is None:
        return False  # no list to read (a kernel without CONFIG_PROC_CHILDREN): the scan tells
    known = dict(helpers)
    return all(pid in known and _ticks(pid) == known[pid] for pid in children)


def _ticks(pid: int) -> int | None:
    try:
        return start_ticks(pid)
    except ProbeError:
        return None


def linger(
    lane: Lane,
    command: str,
    code: int,
    retarget: Callable[[], None],
    before: Before = frozenset(),
    helpers: Before = frozenset(),
) -> None:
    """After CMD exited with `code`: while processes of the lane run (our descendants, with
    the subreaper: every one it started), say so once and reap them until none is left.
    `retarget` points the runner's signal forwarding at those processes. `before`: processes
    that predate the run (`processes_before`): not the lane's, never waited for. `helpers`:
    those of `before` that are the runner's own children (slirp4netns)."""
    left = _settled(before, helpers)
    if not left:
        return
    retarget()
    named = ", ".join(f"pid {st.pid} ({inert(st.comm)})" for st in left[:MAX_NAMED])
    more = f" and {len(left) - MAX_NAMED} more" if len(left) > MAX_NAMED else ""
    print(
        f"lanewatch: {inert(command)} exited ({code}); lane {inert(lane.name)} stays live while "
        f"its {len(left)} process(es) run: {named}{more}. Ctrl-C or "
        f"`lanewatch kill {inert(lane.name)}` ends them.{_tmux_hint(lane)}",
        file=sys.stderr,
        flush=True,
    )
    ledger.append(
        lane.namespace, "lingering", lane=lane.name, pids=[st.pid for st in left], exit_code=code
    )
    if before:
        _wait_for_the_lanes(before)
    else:
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
    ledger.append(lane.namespace, "processes-ended", lane=lane.name)


def _settled(before: Before, helpers: Before) -> list[ProcStat]:
    """The lane's processes still running once those that end with CMD have ended (up to
    SETTLE seconds, reaping them on the way). The runner's own children are asked first, which
    costs no /proc scan; the scan runs only while a process of the lane may be left."""
    deadline = time.monotonic() + SETTLE
    while True:
        if before <= helpers and _childless(helpers):
            return []
        left = lane_descendants(before)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)  # a helper ending on its own takes a few milliseconds


def _wait_for_the_lanes(before: Before) -> None:
    """Reap the lane's children one by one (each by its pid: the embedding program's own
    children are its to reap) until no process of the lane is left below us."""
    me = os.getpid()
    while True:
        children = [st.pid for st in lane_descendants(before) if st.ppid == me]
        if not children:
            return  # none left (or, without the subreaper, none we could wait for)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(children[0], 0)
