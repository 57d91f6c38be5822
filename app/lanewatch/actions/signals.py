"""Identity-checked signalling: never signal a process other than the one we were shown.

`send_checked` opens a pidfd on the pid FIRST, THEN compares the process's start ticks and boot
id with the identity, THEN signals through the pidfd. The pidfd names the process that had the
pid when it was opened; the identity was taken before that, so if the start ticks still match
after the open, the pidfd names the identity's process (a pid names one process at a time), and
a signal through it can reach no other, however the pid is reused afterwards.

Without pidfds (kernel < 5.3, or a seccomp filter), psutil's checked `Process.send_signal` is
used: it re-checks the create time right before `kill(2)`, which leaves a tiny window between
its check and the kill. The result says which method was used.

The identity itself has a limit: start ticks count 1/CLK_TCK s (10 ms), so a pid reused within
the same tick by a process started in that tick is indistinguishable. That takes a full pid
wrap-around within 10 ms, or a deliberate `ns_last_pid` write by root.

Process groups (`group=True`): `identity` must be the group leader (its pid equals its pgid,
as for a lane's command, which `lanewatch run` starts in its own group). We check the leader
through its pidfd as above, then confirm through the pidfd that the leader is not yet reaped (a
zombie still counts), then `killpg`. While the leader is unreaped its pid, and so the pgid
number, cannot be reused, and a pgid stays allocated while any member lives. The residual race:
between that last confirmation and `killpg`, the leader is reaped, every member exits, and a new
process takes the number and makes it a group: that needs a pid wrap-around in microseconds.
Members are not checked one by one (they are whoever is in the group at `killpg`), and a group
whose leader is already reaped cannot be verified at all: signal its members one by one.

`expect_uid` (a lane's stamp names the uid its processes run as): a process running as any
other uid is refused (`uid-mismatch`), checked with the rest after the pidfd is open, so a stamp
that names someone else's process never gets it signalled, whoever runs lanewatch.

A stopped process (SIGSTOP) keeps every signal but SIGKILL pending until SIGCONT; the result's
`stopped` flag says so, so a caller's TERM-then-KILL escalation can act on it.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

import psutil

from lanewatch.linux.procid import ProbeError, ProcessIdentity, boot_id, start_ticks
from lanewatch.linux.procid import uid_and_tgid as _uid_and_tgid
from lanewatch.processes.holders import ProcStat, ancestors, read_stat

Outcome = Literal["sent", "refused", "gone"]
Method = Literal["pidfd", "psutil"]
Code = Literal[
    "sent",
    # refused:
    "init",  # pid <= 1
    "self",  # our own process
    "ancestor",  # one of our parents: killing it would kill us or our terminal
    "own-group",  # the group holds us or one of our parents
    "not-group-leader",  # group=True, but the identity is not its group's leader
    "kernel-thread",
    "other-user",  # another user's process, and not (root and allow_other_user)
    "uid-mismatch",  # the process does not run as the uid the caller expects (the stamp's)
    "pid-reused",  # the pid now names another process
    "not-a-process",  # the pid names a thread, not a process
    "cannot-tell",  # identity could not be checked (permission, no boot id)
    "denied",  # the kernel refused the signal (EPERM)
    # gone:
    "exited",
    "zombie",
    "other-boot",  # the identity is from a previous boot
]


@dataclass(frozen=True, slots=True)
class SignalResult:
    outcome: Outcome
    code: Code
    reason: str  # one line for people
    identity: ProcessIdentity
    signal: int
    group: bool = False
    pgid: int | None = None  # the group signalled (group=True and sent)
    method: Method | None = None  # how it was sent; None when nothing was sent
    stopped: bool = False  # the target was stopped: only SIGKILL/SIGCONT act before a SIGCONT

    @property
    def sent(self) -> bool:
        return self.outcome == "sent"

    @property
    def signal_name(self) -> str:
        return signal_name(self.signal)


# `_verify` bound to one request: a method calls it once it holds its handle on the process.
Check = Callable[[], "SignalResult | ProcStat"]


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def send_checked(
    identity: ProcessIdentity,
    sig: int,
    *,
    group: bool = False,
    allow_other_user: bool = False,
    expect_uid: int | None = None,
    use_pidfd: bool | None = None,
) -> SignalResult:
    """Send `sig` to the process named by `identity` (or its group) after re-checking who it is.

    Never raises for expected cases: the result is sent, refused (with a code and reason) or
    gone. `use_pidfd`: None picks pidfd when the kernel has it, else psutil; True or False force
    one (False is for tests and for kernels where pidfds misbehave). `expect_uid`: the uid the
    process must run as (a lane's stamp names it); any other is refused. A number that is no
    signal at all is a programming error: ValueError.
    """
    sig = int(sig)
    if not 0 <= sig < signal.NSIG:
        raise ValueError(f"not a signal number: {sig}")
    early = _static_checks(identity, sig, group)
    if early is not None:
        return early
    check = partial(_verify, identity, sig, group, allow_other_user, expect_uid)
    want_pidfd = _have_pidfd() if use_pidfd is None else use_pidfd
    if want_pidfd:
        try:
            pidfd = os.pidfd_open(identity.pid)
        except ProcessLookupError:
            return _result("gone", "exited", f"pid {identity.pid} has exited", identity, sig, group)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                # A thread id (not a process) gives EINVAL or ENOENT, depending on the kernel.
                if _is_thread(identity.pid):
                    why = f"pid {identity.pid} names a thread, not a process"
                    return _result("refused", "not-a-process", why, identity, sig, group)
                why = f"pid {identity.pid} has exited"
                return _result("gone", "exited", why, identity, sig, group)
            if use_pidfd is None and exc.errno in (errno.ENOSYS, errno.EPERM):
                # seccomp / old kernel
                return _via_psutil(identity, sig, group, check)
            why = f"pidfd_open: {exc.strerror}"
            return _result("refused", "cannot-tell", why, identity, sig, group)
        try:
            return _via_pidfd(pidfd, identity, sig, group, check)
        finally:
            os.close(pidfd)
    return _via_psutil(identity, sig, group, check)


def precheck(
    identity: ProcessIdentity,
    *,
    group: bool = False,
    allow_other_user: bool = False,
    expect_uid: int | None = None,
) -> SignalResult | None:
    """The refusal (or "gone") `send_checked` would give right now, or None if it would try.

    For greying out a kill action; it proves nothing about the moment of the signal, which
    `send_checked` checks again.
    """
    early = _static_checks(identity, 0, group)
    if early is not None:
        return early
    verdict = _verify(identity, 0, group, allow_other_user, expect_uid)
    return verdict if isinstance(verdict, SignalResult) else None


# --- checks -------------------------------------------------------------------------------------


def _have_pidfd() -> bool:
    return hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")


def _result(
    outcome: Outcome,
    code: Code,
    reason: str,
    identity: ProcessIdentity,
    sig: int,
    group: bool,
) -> SignalResult:
    return SignalResult(outcome, code, reason, identity, sig, group)


def _exited_before(identity: ProcessIdentity, sig: int, group: bool) -> SignalResult:
    """The target was checked, then it was gone when the signal went."""
    return _result(
        "gone", "exited", f"pid {identity.pid} exited before the signal", identity, sig, group
    )


def _static_checks(identity: ProcessIdentity, sig: int, group: bool) -> SignalResult | None:
    """Refusals that need no look at the target: init, ourselves, our parents, other boots."""
    pid = identity.pid
    if pid <= 1:
        return _result("refused", "init", f"refusing to signal pid {pid}", identity, sig, group)
    if pid == os.getpid():
        return _result(
            "refused", "self", "refusing to signal lanewatch itself", identity, sig, group
        )
    if pid in ancestors(os.getpid()):
        return _result(
            "refused", "ancestor", f"pid {pid} is a parent of lanewatch", identity, sig, group
        )
    current_boot = boot_id()
    if not identity.boot_id or not current_boot:
        return _result("refused", "cannot-tell", "no boot id to compare", identity, sig, group)
    if identity.boot_id != current_boot:
        return _result(
            "gone", "other-boot", "the process ran in a previous boot", identity, sig, group
        )
    return None


def _is_thread(pid: int) -> bool:
    """True when `pid` is a thread id other than its process's (/proc/TID exists, unlisted)."""
    try:
        ids = _uid_and_tgid(pid)
    except ProbeError:
        return False
    return ids is not None and ids[1] != pid


def _verify(
    identity: ProcessIdentity,
    sig: int,
    group: bool,
    allow_other_user: bool,
    expect_uid: int | None = None,
) -> SignalResult | ProcStat:
    """Check that `identity.pid` is still the identity's process and may be signalled.

    Called after the pidfd (or psutil handle) is taken; returns the process's stat when all
    is well, else the refusal.
    """
    pid = identity.pid

    def refuse(code: Code, reason: str) -> SignalResult:
        return _result("refused", code, reason, identity, sig, group)

    def gone(code: Code, reason: str) -> SignalResult:
        return _result("gone", code, reason, identity, sig, group)

    try:
        ticks = start_ticks(pid)
        st = read_stat(pid)
        ids = _uid_and_tgid(pid)
    except (ProbeError, OSError) as exc:
        return refuse("cannot-tell", str(exc))
    if ticks is None or st is None or ids is None:
        return gone("exited", f"pid {pid} has exited")
    uid, tgid = ids
    if tgid != pid:
        return refuse("not-a-process", f"pid {pid} names a thread of process {tgid}")
    if ticks != identity.start_ticks or st.start_ticks != identity.start_ticks:
        return refuse("pid-reused", f"pid {pid} now names another process ({st.comm})")
    if st.kernel_thread:
        return refuse("kernel-thread", f"pid {pid} is a kernel thread")
    if expect_uid is not None and uid != expect_uid:
        return refuse("uid-mismatch", f"pid {pid} runs as uid {uid}, not uid {expect_uid}")
    if uid != os.getuid() and not (allow_other_user and os.geteuid() == 0):
        why = "ask explicitly, as root" if os.geteuid() == 0 else "only root may, when asked"
        return refuse("other-user", f"pid {pid} belongs to uid {uid}: {why}")
    if group:
        if st.pgid != pid:
            return refuse(
                "not-group-leader", f"pid {pid} is not the leader of its process group {st.pgid}"
            )
        mine = {os.getpgrp()}
        for parent in ancestors(os.getpid()):
            try:
                parent_stat = read_stat(parent)
            except OSError:
                continue
            if parent_stat is not None:
                mine.add(parent_stat.pgid)
        if st.pgid in mine:
            return refuse("own-group", f"process group {st.pgid} holds lanewatch or a parent")
    elif st.state in ("Z", "X"):
        return gone("zombie", f"pid {pid} has exited (not yet reaped)")
    return st


def _via_pidfd(
    pidfd: int, identity: ProcessIdentity, sig: int, group: bool, check: Check
) -> SignalResult:
    st = check()
    if isinstance(st, SignalResult):
        return st
    try:
        if group:
            # Probe the leader through its pidfd: it succeeds while the leader is unreaped
            # (zombie included), so the pgid number is still this group's (see module doc).
            signal.pidfd_send_signal(pidfd, 0)
            os.killpg(st.pgid, sig)
        else:
            signal.pidfd_send_signal(pidfd, sig)
    except ProcessLookupError:
        return _exited_before(identity, sig, group)
    except PermissionError as exc:
        return _result("refused", "denied", f"kernel refused: {exc.strerror}", identity, sig, group)
    return _sent(identity, sig, group, st, "pidfd")


def _via_psutil(identity: ProcessIdentity, sig: int, group: bool, check: Check) -> SignalResult:
    pid = identity.pid
    try:
        proc = psutil.Process(pid)  # records the create time now, before our check
    except psutil.NoSuchProcess:
        return _result("gone", "exited", f"pid {pid} has exited", identity, sig, group)
    except psutil.AccessDenied as exc:
        return _result("refused", "cannot-tell", str(exc), identity, sig, group)
    st = check()
    if isinstance(st, SignalResult):
        return st
    try:
        if group:
            if not proc.is_running():  # re-checks the create time; then the same tiny window
                return _exited_before(identity, sig, group)
            os.killpg(st.pgid, sig)
        else:
            proc.send_signal(sig)  # re-checks the create time right before kill(2)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return _exited_before(identity, sig, group)
    except (psutil.AccessDenied, PermissionError) as exc:
        return _result("refused", "denied", f"kernel refused: {exc}", identity, sig, group)
    return _sent(identity, sig, group, st, "psutil")


def _sent(
    identity: ProcessIdentity,
    sig: int,
    group: bool,
    st: ProcStat,
    method: Method,
) -> SignalResult:
    stopped = st.state in ("T", "t")  # as checked just before the signal
    target = f"process group {st.pgid}" if group else f"pid {identity.pid} ({st.comm})"
    note = " (it is stopped: pending until SIGCONT)" if stopped and sig != signal.SIGKILL else ""
    return SignalResult(
        outcome="sent",
        code="sent",
        reason=f"sent {signal_name(sig)} to {target} via {method}{note}",
        identity=identity,
        signal=sig,
        group=group,
        pgid=st.pgid if group else None,
        method=method,
        stopped=stopped,
    )
