"""Judge a namespace's state from its stamp and the evidence about its owner. Pure.

Inputs are what the sources read (the stamp, the kernel's verdict on the owner's pid + start
ticks + boot id, whether the lock is held) plus `now` and this host's name and boot id; the
output is a state, a reason in stable words (no ages: readers compute those from timestamps)
and a grade: `known` when the kernel or the stamp said so, `inferred` when judged by timing.

Rules, in order:
- no valid stamp: orphan (unreadable: unknown; newer schema: unknown);
- a local stamp whose claims do not match what the kernel says (`claims_mismatch`: the stamp
  file or the namespace folder owned by another uid than the stamp names, pid 1 named as an
  owner, an owner process running as another uid): unknown, "claims do not match: ...". A
  stamp is a file anyone can write in their own folder; its `uid` is only a claim, and a
  namespace whose claims are false is never live, never killed, never cleared;
- stamp released: released;
- stamp from another host: judged only by its heartbeat (fresh: live, else stale), never by
  a local pid;
- written before this boot: stale;
- a local runner gone (dead, zombie, pid reused, or released) while processes of its lane
  still run (`members`, from `processes/members.py`): headless, never stale or clearable;
  while processes that may be in its mount namespace cannot be read (`unreadable`, another
  user's, as a normal user): unknown, never stale or clearable;
- local owner: dead, zombie or pid reused: stale; stopped: hung; alive with the heartbeat
  overdue: hung; alive: live; cannot inspect (permission): live if the heartbeat is fresh or
  the lock is held (inferred), else unknown. A permission error is never read as death.
"""

from __future__ import annotations

from dataclasses import dataclass

from lanewatch.lanes.stamp import OwnerState, Stamp, StampRead, StampStatus
from lanewatch.linux.procid import Liveness
from lanewatch.model.timing import is_overdue, overdue_after
from lanewatch.model.views import Grade, LaneMember, LanePort, NsState

_DEAD = {
    Liveness.DEAD: "dead",
    Liveness.ZOMBIE: "zombie",
    Liveness.REUSED: "pid reused",
    Liveness.OTHER_BOOT: "other boot",
}


@dataclass(frozen=True, slots=True)
class LivenessEvidence:
    """The kernel's verdict on one owner identity, probed at `at`."""

    pid: int
    start_ticks: int
    liveness: Liveness
    reason: str
    at: float
    child: Liveness | None = None  # the command `lanewatch run` started, if probed
    child_reason: str = ""
    lock_held: bool | None = None  # read from /proc/locks; None when not asked or unknown
    uid: int | None = None  # real uid of the owner while it runs; None when not read
    child_uid: int | None = None  # the same for the command
    members: tuple[LaneMember, ...] = ()  # the lane's running processes, runner left out
    # Processes started since the runner whose mount namespace cannot be read here (another
    # user's, as a normal user) while the lane has one of its own: maybe members, maybe not.
    unreadable: int = 0
    ports: tuple[LanePort, ...] = ()  # what the lane's processes listen on (the probe's intake)

    def same_verdict(self, other: LivenessEvidence | None) -> bool:
        """The same judgement as `other`, whenever each was made."""
        if other is None:
            return False
        return (self.pid, self.start_ticks, self.liveness, self.reason, self.child,
                self.child_reason, self.lock_held, self.uid, self.child_uid, self.members,
                self.unreadable, self.ports) == (
            other.pid, other.start_ticks, other.liveness, other.reason, other.child,
            other.child_reason, other.lock_held, other.uid, other.child_uid,
            other.members, other.unreadable, other.ports)  # fmt: skip

    def about(self, stamp: Stamp) -> bool:
        """Whether this evidence is about the owner this stamp names."""
        return self.pid == stamp.pid and self.start_ticks == stamp.start_ticks


@dataclass(frozen=True, slots=True)
class Verdict:
    state: NsState
    reason: str
    grade: Grade
    mismatch: str | None = None  # what the stamp claims that is not so (state is then unknown)


def is_local(stamp: Stamp, host: str) -> bool:
    return stamp.host == host


def classify(
    read: StampRead,
    evidence: LivenessEvidence | None,
    now: float,
    *,
    host: str,
    boot_id: str,
) -> Verdict:
    """The state of a namespace whose stamp read is `read`."""
    stamp = read.stamp
    if stamp is None or read.status is not StampStatus.OK:
        return _no_stamp(read)
    if is_local(stamp, host):
        mismatch = claims_mismatch(read, evidence)
        if mismatch is not None:
            return Verdict(
                NsState.UNKNOWN, f"claims do not match: {mismatch}", Grade.KNOWN, mismatch
            )
    if stamp.state is OwnerState.RELEASED:
        code = "" if stamp.exit_code is None else f" (exit code {stamp.exit_code})"
        if evidence is not None and evidence.about(stamp) and evidence.members:
            why = f"released by its owner{code}; {still_running(evidence.members)}"
            return Verdict(NsState.HEADLESS, why, Grade.KNOWN)
        if evidence is not None and evidence.about(stamp) and evidence.unreadable:
            why = f"released by its owner{code}; {cannot_tell(evidence.unreadable)}"
            return Verdict(NsState.UNKNOWN, why, Grade.INFERRED)
        return Verdict(NsState.RELEASED, f"released by its owner{code}", Grade.KNOWN)
    beat = read.heartbeat_at or stamp.heartbeat_at
    overdue = is_overdue(stamp, beat, now)
    if not is_local(stamp, host):
        if overdue:
            return Verdict(
                NsState.STALE,
                f"heartbeat expired on host {stamp.host} (none for over {overdue_after(stamp):g}s)",
                Grade.INFERRED,
            )
        return Verdict(NsState.LIVE, f"heartbeat fresh on host {stamp.host}", Grade.INFERRED)
    if stamp.boot_id and boot_id and stamp.boot_id != boot_id:
        return Verdict(NsState.STALE, "stamp written before this boot", Grade.KNOWN)
    if evidence is None or not evidence.about(stamp):
        return _unprobed(stamp, overdue)
    return _local(stamp, evidence, overdue)


_RUNNING = (Liveness.ALIVE, Liveness.STOPPED)


def run_over(stamp: Stamp, evidence: LivenessEvidence | None) -> bool:
    """Whether the run `stamp` names is over: released by its owner, or its owner dead, with
    no process of the lane left running (or unreadable: maybe running). A headless lane's
    processes still run, so its run is not over."""
    about = evidence is not None and evidence.about(stamp)
    if about and evidence is not None and (evidence.members or evidence.unreadable):
        return False
    if stamp.state is OwnerState.RELEASED:
        return True
    return about and evidence is not None and evidence.liveness in _DEAD


def claims_mismatch(read: StampRead, evidence: LivenessEvidence | None) -> str | None:
    """What a valid local stamp claims that is not so, or None. Only what was read counts:
    an owner not yet read (no uid, not probed) is not a mismatch, and a kill checks again.

    Not compared across hosts: a shared folder's uids need not map between machines, and a
    remote lane is neither killed nor cleared from here."""
    stamp = read.stamp
    if stamp is None:
        return None
    uid = stamp.uid
    wrong: list[str] = []
    if read.file_uid is not None and read.file_uid != uid:
        wrong.append(f"the stamp file is owned by uid {read.file_uid}, the stamp names uid {uid}")
    if read.folder_uid is not None and read.folder_uid != uid:
        wrong.append(
            f"the namespace folder is owned by uid {read.folder_uid}, the stamp names uid {uid}"
        )
    if stamp.state is OwnerState.LIVE:
        named = {"owner": stamp.pid, "command": stamp.child_pid, "group leader": stamp.pgid}
        for what, pid in named.items():
            if pid is not None and pid <= 1:
                who = "pid 1 (init)" if pid == 1 else f"pid {pid} (no process)"
                wrong.append(f"it names {who} as its {what}")
        if evidence is not None and evidence.about(stamp):
            if evidence.liveness in _RUNNING and evidence.uid not in (None, uid):
                wrong.append(f"its owner pid {stamp.pid} runs as uid {evidence.uid}, not {uid}")
            if evidence.child in _RUNNING and evidence.child_uid not in (None, uid):
                wrong.append(
                    f"its command pid {stamp.child_pid} runs as uid {evidence.child_uid}, not {uid}"
                )
    return "; ".join(wrong) or None


def _no_stamp(read: StampRead) -> Verdict:
    detail = read.detail or read.status.value
    if read.status is StampStatus.UNREADABLE:
        return Verdict(NsState.UNKNOWN, f"stamp unreadable: {detail}", Grade.KNOWN)
    if read.status is StampStatus.FUTURE_SCHEMA:
        return Verdict(NsState.UNKNOWN, detail, Grade.KNOWN)
    return Verdict(NsState.ORPHAN, f"no valid stamp: {detail}", Grade.KNOWN)


def _unprobed(stamp: Stamp, overdue: bool) -> Verdict:
    if overdue:
        return Verdict(
            NsState.UNKNOWN, f"pid {stamp.pid} not probed yet; heartbeat overdue", Grade.INFERRED
        )
    return Verdict(NsState.LIVE, f"pid {stamp.pid} not probed yet; heartbeat fresh", Grade.INFERRED)


def still_running(members: tuple[LaneMember, ...]) -> str:
    """The stable words for a headless lane's members: "2 processes of the lane still run"."""
    n = len(members)
    return f"{n} process{'' if n == 1 else 'es'} of the lane still run{'s' if n == 1 else ''}"


def cannot_tell(unreadable: int) -> str:
    """The stable words for processes that may be a fenced lane's, unreadable here."""
    n = unreadable
    return (
        f"the mount namespace of {n} process{'' if n == 1 else 'es'} started since cannot be "
        "read here (another user's): they may be the lane's"
    )


def _local(stamp: Stamp, ev: LivenessEvidence, overdue: bool) -> Verdict:
    if ev.liveness in _DEAD:
        if ev.members and ev.liveness is not Liveness.OTHER_BOOT:  # none outlives a boot
            return Verdict(
                NsState.HEADLESS, f"runner {ev.reason}; {still_running(ev.members)}", Grade.KNOWN
            )
        if ev.unreadable and ev.liveness is not Liveness.OTHER_BOOT:
            why = f"runner {ev.reason}; {cannot_tell(ev.unreadable)}"
            return Verdict(NsState.UNKNOWN, why, Grade.INFERRED)
        return Verdict(NsState.STALE, ev.reason, Grade.KNOWN)
    if ev.liveness is Liveness.STOPPED:
        return Verdict(NsState.HUNG, f"{ev.reason} (SIGSTOP or traced)", Grade.KNOWN)
    if ev.liveness is Liveness.UNKNOWN:
        if not overdue:
            return Verdict(NsState.LIVE, f"{ev.reason}; heartbeat fresh", Grade.INFERRED)
        if ev.lock_held:
            return Verdict(NsState.LIVE, f"{ev.reason}; lock held", Grade.INFERRED)
        return Verdict(NsState.UNKNOWN, f"{ev.reason}; heartbeat overdue", Grade.INFERRED)
    # ALIVE
    if ev.child is Liveness.STOPPED:
        return Verdict(NsState.HUNG, f"command {ev.child_reason} (SIGSTOP or traced)", Grade.KNOWN)
    if overdue:
        return Verdict(
            NsState.HUNG,
            f"pid {stamp.pid} alive but no heartbeat for over {overdue_after(stamp):g}s",
            Grade.INFERRED,
        )
    return Verdict(NsState.LIVE, ev.reason, Grade.KNOWN)
