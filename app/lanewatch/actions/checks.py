"""The checks a clear makes before it moves anything; each returns why not, or None.

Every "cannot tell" is a refusal: a permission error while reading /proc, an unreadable
mountinfo, an owner on another host whose processes we cannot see, a state we cannot judge.
One exception, named and reported: an uninspectable pid 1 (see NOT_COUNTED).

Open files that come and go are not an owner: a fanotify listener (lanewatch's own dashboard
among them) gets a descriptor for every file written on the filesystem and closes it at once;
indexers and virus scanners read and close. So when every holder holds only descriptors or
mappings, the scan is repeated for up to SETTLE seconds and the first clean one counts; a
holder that stays refuses. A working directory or root inside refuses at once.
"""

from __future__ import annotations

import os
import shlex
import stat
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from lanewatch.actions.assess import Assessment
from lanewatch.actions.mounts import mounts_inside
from lanewatch.lanes.stamp import Stamp
from lanewatch.linux.procid import hostname
from lanewatch.model.views import STALE_STATES, LaneMember, NsState
from lanewatch.processes.holders import HeldPath, Holder, ProcScan, Unreadable, scan

# The one process an uninspectable reading does not block: init of our pid namespace. It runs
# no lane work, and sandboxes and containers often run it with privileges even root lacks
# here (so /proc/1/cwd and /proc/1/fd/* give EACCES). Every other one refuses the clear.
NOT_COUNTED = frozenset({1})
SETTLE = 1.0
_STEP = 0.05
_KIND = {"cwd": "its working directory", "root": "its root", "map": "a mapping of"}
MAX_LISTED = 5


def foreign_host(stamp: Stamp | None) -> str | None:
    """The host a stamp's owner runs (or ran) on, when it is not this one: a shared root (NFS)
    holds lanes of other hosts, whose processes cannot be checked from here."""
    return stamp.host if stamp is not None and stamp.host != hostname() else None


def why_not_clearable(a: Assessment) -> str | None:
    if a.members and a.state not in (NsState.LIVE, NsState.HUNG):
        return (
            f"it is {a.state.value}: its runner is gone but {len(a.members)} process(es) of the "
            f"lane still run ({members_text(a.members)}); end them first: lanewatch kill "
            f"{shlex.quote(a.target.name)}"
        )
    if a.state not in STALE_STATES:
        return f"it is {a.describe()}; only stale, orphan or released namespaces are cleared"
    stamp = a.stamp
    if stamp is not None and foreign_host(stamp):
        return (
            f"its owner ran on host {stamp.host}: processes there cannot be checked from "
            f"here; clear it on {stamp.host}"
        )
    return None


def members_text(members: Sequence[LaneMember]) -> str:
    """ "pid 12 (sleep 60), pid 15 (tmux -L a new -d)" and how many more, for messages."""
    listed = ", ".join(f"pid {m.pid} ({m.command[:60]})" for m in members[:MAX_LISTED])
    more = len(members) - MAX_LISTED
    return listed + (f" and {more} more" if more > 0 else "")


def why_mounted(path: Path) -> str | None:
    try:
        found = mounts_inside(path)
    except OSError as exc:
        return f"cannot read the mount table ({exc.strerror}), so cannot tell"
    if found:
        listed = ", ".join(found[:MAX_LISTED])
        return f"a mount point lies inside it ({listed}); unmount it first"
    return None


@dataclass(frozen=True, slots=True)
class HeldVerdict:
    why: str | None  # why the clear is refused, or None
    note: str | None = None  # what the check could not see but did not count (pid 1)


def why_held(path: Path, own_fds: Collection[int] = ()) -> HeldVerdict:
    """Whether any process holds anything inside `path` (cwd, fd, root, mapping), or might."""
    found = settled_scan([path], own_fds)
    if found.holders:
        listed = "; ".join(describe(h, path) for h in found.holders[:MAX_LISTED])
        more = len(found.holders) - MAX_LISTED
        return HeldVerdict("in use: " + listed + (f" and {more} more" if more > 0 else ""))
    if found.hidden:
        return HeldVerdict(f"cannot tell who uses it: {found.hidden}")
    unreadable = [u for u in found.unreadable if u.pid not in NOT_COUNTED]
    notes = []
    if len(unreadable) < len(found.unreadable):
        notes.append("pid 1 (init) not inspectable, not counted")
    root = os.geteuid() == 0
    if unreadable and not root:
        unreadable, shut_out = split_shut_out(unreadable, path)
        if shut_out:
            notes.append(not_counted(shut_out))
    if unreadable:
        return HeldVerdict(cannot_tell(unreadable) + ("" if root else not_private(path)))
    return HeldVerdict(None, "; ".join(notes) or None)


def split_shut_out(
    unreadable: Sequence[Unreadable], path: Path
) -> tuple[list[Unreadable], list[Unreadable]]:
    """For a normal user: which uninspectable processes cannot matter, and which still refuse.

    Only from a folder of ours with no access for group or others (namespaces are made 0700).
    Another normal user's processes cannot enter it. Root's can enter anything, and so can our
    own non-dumpable ones (ssh-agent, gpg-agent, sshd's session: the kernel hides their files
    from us), but clearing is one rename inside one filesystem: a process with its working
    directory or an open file inside keeps working, and restore puts the folder back. Whether
    such a process is the lane's was judged before (a fenced lane's by its mountinfo,
    `processes/members.py`); a live socket bound inside still refuses, for everyone
    (`actions/sockets.py`, checked before this). Any other process of our own uid that we
    cannot inspect, or of an unknown uid, always refuses.
    """
    if not_private(path):
        return list(unreadable), []
    me = os.geteuid()
    refusing: list[Unreadable] = []
    shut_out: list[Unreadable] = []
    for u in unreadable:
        hidden_ours = u.uid == me and not u.non_dumpable
        (refusing if u.uid is None or hidden_ours else shut_out).append(u)
    return refusing, shut_out


def not_private(path: Path) -> str:
    """Why `path` is not a folder of ours that other users cannot enter, or "" when it is."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"; cannot read its owner and mode ({exc.strerror})"
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid():
        return f"; the folder belongs to uid {st.st_uid}, not to you"
    if mode & 0o077:
        return (
            f"; the folder has mode {mode:04o}, so other users' processes could be inside "
            "(lanewatch makes namespaces 0700)"
        )
    return ""


def not_counted(shut_out: Sequence[Unreadable]) -> str:
    """The plain words for what a normal user's clear could not see, and why it is still safe."""
    pids = sorted({u.pid for u in shut_out})
    me = os.geteuid()
    uids = sorted({u.uid for u in shut_out if u.uid is not None})
    whose = ", ".join(
        "root" if uid == 0 else "yours (non-dumpable)" if uid == me else f"uid {uid}"
        for uid in uids[:MAX_LISTED]
    )
    return (
        f"{len(pids)} process(es) of {whose} could not be inspected and are not counted: "
        "the folder is yours with mode 0700, so no other user's process can enter it, and a "
        "root or non-dumpable process inside would keep working after the move (restore puts "
        "it back)"
    )


def settled_scan(
    paths: Sequence[str | os.PathLike[str]], own_fds: Collection[int] = (), settle: float = SETTLE
) -> ProcScan:
    """Who holds anything under `paths`, scanned again while what stands in the way may pass
    (transient readers: holders of open files or mappings only; processes between two states),
    until a scan is clean or `settle` seconds pass. The last scan is the answer."""
    deadline = time.monotonic() + settle
    while True:
        found = scan(paths, with_env=False, with_maps=True, own_fds=own_fds)
        durable = any(p.kind in ("cwd", "root") for h in found.holders for p in h.paths)
        passing = found.holders or any(map(_between_states, found.unreadable))
        if not passing or durable or time.monotonic() >= deadline:
            return found
        time.sleep(_STEP)


def _between_states(u: Unreadable) -> bool:
    """A normal user's own process that the kernel neither showed nor hides for good (it is not
    non-dumpable): it was between two states as it was read (exiting after it dropped its
    memory, or exec'ing a set-id program), and a second look gives an answer. Seen in CI as the
    test user: one clear refused for such a process while other tests started and ended
    processes beside it (a non-dumpable helper exiting is one way to get there)."""
    me = os.geteuid()
    return me != 0 and u.uid == me and not u.non_dumpable


def describe(holder: Holder, path: Path) -> str:
    who = "lanewatch itself" if holder.pid == os.getpid() else f"pid {holder.pid} ({holder.comm})"
    held = ", ".join(_held(p, path) for p in holder.paths[:3])
    return f"{who} has {held}"


def _held(p: HeldPath, path: Path) -> str:
    rel = os.path.relpath(p.path, path) if p.path != str(path) else "."
    where = f"{rel}{' (deleted)' if p.deleted else ''}"
    if p.kind == "fd":
        return f"fd {p.fd} open on {where}"
    return f"{_KIND.get(p.kind, p.kind)} {where}"


def cannot_tell(unreadable: Sequence[Unreadable]) -> str:
    pids = sorted({u.pid for u in unreadable})
    listed = ", ".join(f"pid {p}" + _uid(unreadable, p) for p in pids[:MAX_LISTED])
    more = f" and {len(pids) - MAX_LISTED} more" if len(pids) > MAX_LISTED else ""
    return (
        f"cannot tell who uses it: {len(pids)} process(es) could not be inspected "
        f"({listed}{more}: {unreadable[0].reason}); a permission error is not an answer "
        "(root can usually inspect them all)"
    )


def _uid(unreadable: Sequence[Unreadable], pid: int) -> str:
    uid = next((u.uid for u in unreadable if u.pid == pid and u.uid is not None), None)
    return f" of uid {uid}" if uid is not None else ""
