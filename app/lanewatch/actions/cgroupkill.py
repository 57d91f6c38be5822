"""SIGKILL to a whole lane at once through its cgroup (`cgroup.kill`, kernel 5.14 and later).

Used where kill escalates (and for a SIGKILL asked for): every process of the cgroup ends in
one write, forks racing the kill included, however they detached. Only with the checks every
signal gets (`signals.precheck`, each process of the cgroup as it is now: not pid 1, not
lanewatch or its parents, not a kernel thread, running as the stamp's uid, another user's only
when root asked explicitly); one refusal and the cgroup is not used (the processes are then
signalled one by one, each checked, as without a cgroup).

The race left: a process that enters the cgroup between the checks and the write. Only a
process of the cgroup (a fork, which runs as its parent's uid unless it executes a setuid
program) or root can put one there.
"""

from __future__ import annotations

from lanewatch.actions.signals import precheck
from lanewatch.linux import cgroup
from lanewatch.linux.procid import ProbeError, ProcessIdentity, boot_id, start_ticks


def cgroup_kill(path: str, *, uid: int, allow_other_user: bool) -> tuple[bool, str]:
    """(True, what was done) once `cgroup.kill` was written; else (False, why not)."""
    if not cgroup.can_kill(path):
        return False, "this kernel has no cgroup.kill (5.14 and later)"
    pids = cgroup.all_procs(path)
    if pids is None:
        return False, f"cannot read {path}/cgroup.procs"
    if not pids:
        return False, "nothing runs in its cgroup"
    boot = boot_id()
    for pid in pids:
        try:
            ticks = start_ticks(pid)
        except (OSError, ProbeError):
            return False, f"cannot check pid {pid} of its cgroup"
        if ticks is None:
            continue
        refused = precheck(
            ProcessIdentity(pid, ticks, boot or ""),
            allow_other_user=allow_other_user,
            expect_uid=uid,
        )
        if refused is not None and refused.outcome == "refused":
            return False, f"its cgroup holds a process not to signal: {refused.reason}"
    try:
        cgroup.kill(path)
    except OSError as exc:
        return False, f"cgroup.kill: {exc.strerror}"
    return True, f"cgroup.kill ended the {len(pids)} process(es) of its cgroup"
