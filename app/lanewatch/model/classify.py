"""Judge a namespace's state from its stamp and the evidence about its owner. Pure.

Inputs are what the sources read (the stamp, the kernel's verdict on the owner's pid + start
ticks + boot id, whether the lock is held) plus `now` and this host's name and boot id; the
output is a state, a reason in stable words (no ages: readers compute those from timestamps)
and a grade: `known` when the kernel or the stamp said so, `inferred` when judged by timing.

Rules, in order:
- no valid stamp: orphan (unreadable: unknown; newer schema: unknown);
- stamp released: released;
- stamp from another host: judged only by its heartbeat (fresh: live, else stale), never by
  a local pid;
- written before this boot: stale;
- local owner: dead, zombie or pid reused: stale; stopped: hung; alive with the heartbeat
  overdue: hung; alive: live; cannot inspect (permission): live if the heartbeat is fresh or
  the lock is held (inferred), else unknown. A permission error is never read as death.
"""

from __future__ import annotations

from dataclasses import dataclass

from lanewatch.model.views import Grade, NsState
from lanewatch.scheme.procid import Liveness
from lanewatch.scheme.stamp import OwnerState, Stamp, StampRead, StampStatus

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

    def same_verdict(self, other: LivenessEvidence | None) -> bool:
        """The same judgement as `other`, whenever each was made."""
        if other is None:
            return False
        return (self.pid, self.start_ticks, self.liveness, self.reason, self.child,
                self.child_reason, self.lock_held) == (
            other.pid, other.start_ticks, other.liveness, other.reason, other.child,
            other.child_reason, other.lock_held)  # fmt: skip

    def about(self, stamp: Stamp) -> bool:
        """Whether this evidence is about the owner this stamp names."""
        return self.pid == stamp.pid and self.start_ticks == stamp.start_ticks


@dataclass(frozen=True, slots=True)
class Verdict:
    state: NsState
    reason: str
    grade: Grade


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
    if stamp.state is OwnerState.RELEASED:
        code = "" if stamp.exit_code is None else f" (exit code {stamp.exit_code})"
        return Verdict(NsState.RELEASED, f"released by its owner{code}", Grade.KNOWN)
    beat = read.heartbeat_at or stamp.heartbeat_at
    overdue = now - beat > stamp.overdue_after()
    if not is_local(stamp, host):
        if overdue:
            return Verdict(
                NsState.STALE,
                f"heartbeat expired on host {stamp.host} (none for over "
                f"{stamp.overdue_after():g}s)",
                Grade.INFERRED,
            )
        return Verdict(NsState.LIVE, f"heartbeat fresh on host {stamp.host}", Grade.INFERRED)
    if stamp.boot_id and boot_id and stamp.boot_id != boot_id:
        return Verdict(NsState.STALE, "stamp written before this boot", Grade.KNOWN)
    if evidence is None or not evidence.about(stamp):
        return _unprobed(stamp, overdue)
    return _local(stamp, evidence, overdue)


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


def _local(stamp: Stamp, ev: LivenessEvidence, overdue: bool) -> Verdict:
    if ev.liveness in _DEAD:
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
            f"pid {stamp.pid} alive but no heartbeat for over {stamp.overdue_after():g}s",
            Grade.INFERRED,
        )
    return Verdict(NsState.LIVE, ev.reason, Grade.KNOWN)
