"""Kill: stop a live lane's owner and its process group, or refuse.

Only a live or hung namespace whose owner runs on this host is a target. What gets the signal:
the process group `lanewatch run` started for its command (its leader's identity is in the
stamp), or, for an owner with no group of its own (a `Lane` in Python), the owner itself.
`lanewatch run` notices its command's end, records it and releases; we do not signal the
runner too, so a program that treats a second SIGINT as "abort the cleanup" gets only one.

Every signal goes through `actions.signals.send_checked`: a pidfd is opened, the start time and
boot id are compared with the stamp's, and the signal goes through the pidfd, so a pid reused
since the listing is never hit; pid 1, lanewatch itself, its parents, a group holding one of
them, and other users' processes (unless root asked explicitly) are refused there.

Authority comes from ownership (`actions.authority`): the stamp file and the namespace folder
must be owned by the uid the stamp names, and every process signalled must run as that uid
(checked again at the signal). A lane whose stamp claims otherwise is `unknown` and refused
with what did not match; another user's lane is killed only by root, when asked explicitly.

A stopped process keeps SIGTERM and SIGINT pending until it continues: after the signal, every
stopped target (the group's members, the owner) gets SIGCONT so it can act on it. With a grace
period, whatever still runs after it gets SIGKILL: the group first, then the owner.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from lanewatch.actions import journal
from lanewatch.actions.assess import Seen, aim, assess
from lanewatch.actions.authority import is_other_user, owner_label, why_not_killable_by_us
from lanewatch.actions.cgroupkill import cgroup_kill
from lanewatch.actions.results import checked
from lanewatch.actions.signals import SignalResult, send_checked, signal_name
from lanewatch.actions.targets import Target, TargetError, ViewLike
from lanewatch.lanes.stamp import OwnerState, Stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, hostname, liveness
from lanewatch.model.views import LaneMember, NsState
from lanewatch.processes.holders import process_table
from lanewatch.processes.members import lane_cgroup, members_of

Outcome = Literal["stopped", "running", "refused", "gone"]
DEFAULT_WAIT = 5.0  # without a grace period: how long to watch for the lane to end
KILL_WAIT = 5.0  # after SIGKILL
SETTLE = 2.0  # after the group's SIGKILL, before the owner's: time to notice and release
# What a person may choose (`kill --signal`, the dashboard's kill menu), in menu order; the
# first is the default.
SIGNALS = {
    "TERM": signal.SIGTERM,
    "INT": signal.SIGINT,
    "HUP": signal.SIGHUP,
    "KILL": signal.SIGKILL,
}
ALLOWED = tuple(SIGNALS.values())
# Headless: the runner is gone, processes of the lane still run; they get the signals.
KILLABLE = frozenset({NsState.LIVE, NsState.HUNG, NsState.HEADLESS})


@dataclass(frozen=True, slots=True)
class KillResult:
    outcome: Outcome
    target: str
    label: str
    message: str
    signal: str
    sends: tuple[SignalResult, ...] = ()
    escalated: bool = False
    method: str | None = None  # "pidfd", or "psutil" where pidfds are missing
    owner_host: str | None = None  # the owner's host, when it is not this one (then refused)

    @property
    def ok(self) -> bool:
        """Not refused (what `check=True` raises on). A lane still running is ok here too."""
        return self.outcome != "refused"

    @property
    def ended(self) -> bool:
        """What the user asked for happened: the lane's command no longer runs (stopped now,
        or gone before). "running" is a failure to the user, as `lanewatch kill` exits 1."""
        return self.outcome in ("stopped", "gone")

    def __str__(self) -> str:
        return self.message


@dataclass(slots=True)
class _Plan:
    """Who gets the signals, and what happened so far."""

    owner: ProcessIdentity
    group: ProcessIdentity | None  # leader of the command's group
    allow_other_user: bool
    uid: int  # the stamp's: every process signalled must run as it
    sends: list[SignalResult] = field(default_factory=list)
    # The lane's running processes now (`processes/members.py`), listed again at each use.
    members: Callable[[], list[LaneMember]] = list
    boot: str = ""
    cgroup: str | None = None  # the lane's cgroup (`linux/cgroup.lane_cgroup`), if it has one
    cgroup_done: str | None = None  # what `cgroup.kill` did, once it did

    def send(self, identity: ProcessIdentity, sig: int, group: bool) -> SignalResult:
        result = send_checked(
            identity,
            sig,
            group=group,
            allow_other_user=self.allow_other_user,
            expect_uid=self.uid,
        )
        self.sends.append(result)
        return result


def kill(
    spec: str | os.PathLike[str] | ViewLike | Target,
    *,
    sig: int = signal.SIGTERM,
    grace: float | None = None,
    allow_other_user: bool = False,
    seen: Seen | None = None,
    roots: list[Path] | None = None,
    wait: float = DEFAULT_WAIT,
    check: bool = True,
) -> KillResult:
    """Signal a lane's owner (its command's process group), wait, escalate if `grace` is set.

    Without `grace`, it watches up to `wait` seconds and reports whether the lane ended. A
    dashboard row also says which owner the user saw: a changed owner is refused.
    """
    try:
        target, seen = aim(spec, seen, roots)
    except TargetError as exc:
        if check:
            raise
        return KillResult("refused", str(spec), str(spec), str(exc), signal_name(sig))
    result = kill_target(
        target, sig=sig, grace=grace, allow_other_user=allow_other_user, seen=seen, wait=wait
    )
    return checked(result, check)


def kill_target(
    target: Target,
    *,
    sig: int = signal.SIGTERM,
    grace: float | None = None,
    allow_other_user: bool = False,
    seen: Seen | None = None,
    wait: float = DEFAULT_WAIT,
) -> KillResult:
    name = signal_name(sig)

    def end(
        outcome: Outcome, message: str, plan: _Plan | None = None, escalated: bool = False
    ) -> KillResult:
        sends = tuple(plan.sends) if plan else ()
        method = next((s.method for s in sends if s.method), None)
        if plan is not None and plan.cgroup_done:
            message = f"{message} ({plan.cgroup_done})"
        result = KillResult(
            outcome, str(target.path), target.label, message, name, sends, escalated, method
        )
        _note(target, result, plan)
        return result

    if os.path.islink(target.path) or not os.path.isdir(target.path):
        why = "a symlink" if os.path.islink(target.path) else "no namespace folder there"
        return KillResult(
            "refused",
            str(target.path),
            target.label,
            f"refused to kill {target.label}: {why}",
            name,
        )
    a = assess(target)
    stamp = a.stamp
    if a.state in (NsState.STALE, NsState.RELEASED):
        return end("gone", f"{target.label} has no live owner to kill: {a.describe()}")
    if a.state is NsState.ORPHAN:  # no valid stamp: no owner lanewatch could name, so none to hit
        return end("gone", f"{target.label} has no owner to kill: {a.describe()}")
    if a.state not in KILLABLE or stamp is None:
        return end("refused", f"refused to kill {target.label}: it is {a.describe()}")
    if stamp.host != hostname():  # its processes are not ours to see: kill it on its host
        return replace(
            end("refused", f"refused to kill {target.label}: its owner runs on {stamp.host}"),
            owner_host=stamp.host,
        )
    changed = seen.changed(stamp) if seen is not None else None
    if changed is not None:
        return end("refused", f"refused to kill {target.label}: {changed}")
    not_ours = why_not_killable_by_us(a, allow_other_user)
    if not_ours is not None:
        return end("refused", f"refused to kill {target.label}: {not_ours}")
    plan = _Plan(_owner(stamp), _group(stamp), allow_other_user, stamp.uid)
    plan.members = lambda: _members_now(target.path, stamp, plan.owner)
    plan.boot = stamp.boot_id
    plan.cgroup = lane_cgroup(stamp) if stamp.cgroup else None
    first = _signal(plan, sig)
    if sig == signal.SIGKILL and first.outcome != "refused":
        _kill_cgroup(plan)
    if first.outcome == "refused":
        return end("refused", f"refused to kill {target.label}: {first.reason}", plan)
    # Whose lane was hit, named in every message that follows when it is not ours.
    lane = f"{target.label} of {owner_label(stamp.uid)}" if is_other_user(a) else target.label
    if first.outcome == "gone" and not _alive(plan.owner):
        return end("gone", f"{lane} ended before the signal: {first.reason}", plan)
    if sig != signal.SIGKILL and sig != 0:
        _continue_stopped(plan)
    if sig == 0:
        return end("running", f"sent signal 0 to {lane}: {first.reason}", plan)
    patience = grace if grace is not None else wait
    if _wait(plan, patience):
        return end("stopped", _stopped(lane, first, plan), plan)
    if grace is None or sig == signal.SIGKILL:
        hint = "" if grace is not None else "; --grace SECONDS escalates to SIGKILL"
        msg = f"sent {name} to {lane} ({first.reason}); still running after {patience:g}s"
        return end("running", msg + hint, plan)
    _escalate(plan)
    if _wait(plan, KILL_WAIT):
        msg = f"{lane} ignored {name} for {grace:g}s; SIGKILL stopped it"
        return end("stopped", msg, plan, escalated=True)
    msg = f"sent {name}, then SIGKILL to {lane}; still not gone after {KILL_WAIT:g}s"
    return end("running", msg, plan, escalated=True)


def _owner(stamp: Stamp) -> ProcessIdentity:
    return ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id)


def _group(stamp: Stamp) -> ProcessIdentity | None:
    """The command's group leader, when the stamp says the command leads its own group."""
    if stamp.child_pid and stamp.child_start_ticks and stamp.pgid == stamp.child_pid:
        return ProcessIdentity(stamp.child_pid, stamp.child_start_ticks, stamp.boot_id)
    return None


def _members_now(path: Path, stamp: Stamp, owner: ProcessIdentity) -> list[LaneMember]:
    alive = stamp.state is OwnerState.LIVE and _alive(owner)
    return list(members_of(stamp, str(path), process_table(), runner_alive=alive))


def _signal(plan: _Plan, sig: int) -> SignalResult:
    """Signal the command's group, or, for an owner without one, the owner (not when it is
    gone: a headless lane); then every member of the lane outside that group, one by one.

    A group whose leader already ended is not a reason to signal the runner: it has seen its
    command end and is releasing the lane (a SIGTERM then could cut the release short).
    """
    start = len(plan.sends)
    main = None
    if plan.group is not None:
        main = _signal_group(plan, sig)
    elif _alive(plan.owner):
        main = plan.send(plan.owner, sig, group=False)
    if main is not None and main.outcome == "refused":
        return main  # the lane's own command may not be signalled: neither are its members
    _signal_members(plan, sig)
    done = plan.sends[start:]
    for outcome in ("sent", "refused"):
        found = next((r for r in done if r.outcome == outcome), None)
        if found is not None:
            return found
    if done:
        return done[0]
    return plan.send(plan.owner, sig, group=False)  # nothing left: says why (gone)


def _signal_members(plan: _Plan, sig: int, stopped_only: bool = False) -> None:
    """Each member outside the command's group (the group had its killpg), identity-checked
    at the signal by `send_checked`."""
    group = plan.group.pid if plan.group is not None else None
    for m in plan.members():
        if m.pgid is not None and m.pgid == group:
            continue
        identity = ProcessIdentity(m.pid, m.start_ticks, plan.boot)
        if stopped_only and liveness(identity)[0] is not Liveness.STOPPED:
            continue
        plan.send(identity, sig, group=False)


def _signal_group(plan: _Plan, sig: int) -> SignalResult:
    """killpg through the verified leader; once the leader is reaped the group cannot be
    verified as a whole, so its remaining members are signalled one by one, each checked."""
    assert plan.group is not None
    result = plan.send(plan.group, sig, group=True)
    if result.outcome != "gone":
        return result
    for member in _members(plan.group.pid, plan.group.boot_id):
        plan.send(member, sig, group=False)
    return result


def _members(pgid: int, boot: str) -> list[ProcessIdentity]:
    return [
        ProcessIdentity(st.pid, st.start_ticks, boot)
        for st in process_table().values()
        if st.pgid == pgid and st.state not in ("Z", "X")
    ]


def _stopped_members(pgid: int) -> bool:
    return any(st.pgid == pgid and st.state in ("T", "t") for st in process_table().values())


def _continue_stopped(plan: _Plan) -> None:
    """SIGCONT whatever is stopped, so the signal just sent can act."""
    if plan.group is not None and _stopped_members(plan.group.pid):
        _signal_group(plan, signal.SIGCONT)
    if liveness(plan.owner)[0] is Liveness.STOPPED:
        plan.send(plan.owner, signal.SIGCONT, group=False)
    _signal_members(plan, signal.SIGCONT, stopped_only=True)


def _kill_cgroup(plan: _Plan) -> None:
    """`cgroup.kill` of the lane's cgroup, when it has one and every process in it passes the
    checks (`actions/cgroupkill.py`); otherwise the one-by-one signals stand alone."""
    if plan.cgroup is None or plan.cgroup_done is not None:
        return
    done, what = cgroup_kill(plan.cgroup, uid=plan.uid, allow_other_user=plan.allow_other_user)
    if done:
        plan.cgroup_done = what
        whom = plan.group or plan.owner
        plan.sends.append(
            SignalResult("sent", "sent", what, whom, signal.SIGKILL, group=plan.group is not None)
        )


def _escalate(plan: _Plan) -> None:
    _kill_cgroup(plan)
    group = plan.group
    if plan.cgroup_done is not None and group is not None:
        # cgroup.kill reached every process in it at once, but they take a moment to go: a
        # group still listed right after is dying, not escaping. One SIGKILL, not two.
        wait_until(lambda: not _members(group.pid, group.boot_id), SETTLE)
    if group is not None and _members(group.pid, group.boot_id):
        _signal_group(plan, signal.SIGKILL)
    _signal_members(plan, signal.SIGKILL)
    if _wait(plan, SETTLE):
        return
    if _alive(plan.owner):
        plan.send(plan.owner, signal.SIGKILL, group=False)


def _alive(identity: ProcessIdentity) -> bool:
    return liveness(identity)[0] in (Liveness.ALIVE, Liveness.STOPPED, Liveness.UNKNOWN)


def _done(plan: _Plan) -> bool:
    """The owner has exited and no process is left in the command's group, nor in the lane."""
    if _alive(plan.owner):
        return False
    if plan.group is not None and _members(plan.group.pid, plan.group.boot_id):
        return False
    return not plan.members()


def _wait(plan: _Plan, seconds: float) -> bool:
    return wait_until(lambda: _done(plan), seconds)


def wait_until(condition: Callable[[], bool], seconds: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + max(seconds, 0.0)
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def _stopped(lane: str, first: SignalResult, plan: _Plan) -> str:
    to = (
        f"process group {first.pgid or first.identity.pid}"
        if first.group
        else f"pid {first.identity.pid}"
    )
    others = [
        s.identity.pid
        for s in plan.sends
        if s.sent and s.signal == first.signal and not s.group and s is not first
    ]
    if others:  # members outside the group, one by one
        listed = ", ".join(str(pid) for pid in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        to += f" and to each of {len(others)} more process(es) of the lane (pid {listed}{more})"
    how = f" via {first.method}" if first.method else ""
    resumed = any(s.signal == signal.SIGCONT and s.sent for s in plan.sends)
    then = "; it was stopped, so SIGCONT followed" if resumed else ""
    return f"stopped {lane}: {first.signal_name} to {to}{how}{then}"


def _note(target: Target, result: KillResult, plan: _Plan | None) -> None:
    if result.outcome == "refused":
        event = "kill-refused"
    elif any(s.sent for s in result.sends):
        event = "killed"
    else:
        return  # nothing was done: no owner left to signal
    journal.note(
        target.path,
        event,
        lane=target.lane,
        signal=result.signal,
        outcome=result.outcome,
        escalated=result.escalated,
        owner_pid=plan.owner.pid if plan else None,
        pgid=plan.group.pid if plan and plan.group else None,
        cgroup=plan.cgroup if plan else None,
        cgroup_kill=plan.cgroup_done if plan else None,
        sends=[_send_json(s) for s in result.sends],
        message=result.message,
    )


def _send_json(s: SignalResult) -> dict[str, object]:
    return {
        "to": s.identity.pid,
        "signal": s.signal_name,
        "group": s.group,
        "outcome": s.outcome,
        "code": s.code,
        "method": s.method,
    }
