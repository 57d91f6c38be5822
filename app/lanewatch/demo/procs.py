"""Processes the demo starts: spawned so they die with the demo, signalled only by identity.

Every direct child goes through a tiny launcher that asks the kernel to SIGKILL it when the demo
dies (`PR_SET_PDEATHSIG`), checks the demo is still its parent, then `exec`s the real command,
so `/proc/PID/cmdline` shows the real command and the pid stays the same. Each child is a
session and process-group leader of its own: the terminal's Ctrl-C and hang-up reach only the
demo, which tears everything down in order. Signals go to a pid only after its kernel start
ticks are re-checked, so a reused pid is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from lanewatch.errors import LanewatchError
from lanewatch.linux.procid import Liveness, ProcessIdentity, boot_id, liveness, start_ticks

T = TypeVar("T")

# The launcher: die with the demo (SIGKILL: it reaches a stopped process too), then exec.
LAUNCH = """\
import ctypes, os, sys
try:
    arg = ctypes.c_ulong
    ctypes.CDLL(None, use_errno=True).prctl(1, arg(9), arg(0), arg(0), arg(0))
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(70)
os.execv(sys.argv[2], sys.argv[2:])
"""

_GONE = (Liveness.DEAD, Liveness.REUSED, Liveness.ZOMBIE, Liveness.OTHER_BOOT)


class DemoError(LanewatchError):
    """The demo could not be built as intended."""


@dataclass
class DemoProcess:
    role: str  # "runner agent-1", "writer agent-1", "intruder", ...
    ident: ProcessIdentity
    popen: subprocess.Popen[bytes] | None = None  # set for the demo's own children
    log: Path | None = None

    @property
    def pid(self) -> int:
        return self.ident.pid

    def gone(self) -> bool:
        return liveness(self.ident)[0] in _GONE

    def to_json(self) -> dict[str, object]:
        i = self.ident
        return {"role": self.role, "pid": i.pid, "start_ticks": i.start_ticks, "boot_id": i.boot_id}

    def log_tail(self, limit: int = 800) -> str:
        if self.log is None:
            return ""
        try:
            return self.log.read_bytes()[-limit:].decode("utf-8", "replace").strip()
        except OSError:
            return ""


def spawn(
    role: str, argv: Sequence[str], *, env: dict[str, str], cwd: Path, log: Path
) -> DemoProcess:
    """Start `argv` (argv[0] an absolute path) as a child that dies with this process."""
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, str(os.getpid()), *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    ticks = start_ticks(popen.pid)  # un-reaped, so it exists; exec keeps the start time
    if ticks is None:  # pragma: no cover - the kernel keeps an un-reaped child
        raise DemoError(f"{role}: pid {popen.pid} vanished at once")
    return DemoProcess(role, ProcessIdentity(popen.pid, ticks, boot_id()), popen, log)


def signal_group(proc: DemoProcess, sig: int) -> bool:
    """Send `sig` to the process group `proc` leads (or to it alone), if it is still itself."""
    if proc.gone():
        return False
    pid = proc.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
        return True
    return False


def wait_until(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll `condition` until it returns something truthy, or raise DemoError naming `what`."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def stop_all(
    procs: Sequence[DemoProcess], *, grace: float = 3.0, timeout: float = 10.0
) -> list[str]:
    """Stop every process: wake, ask politely, then kill the groups. Returns roles left alive.

    Runners forward SIGTERM to their command's group and release their lane; whatever is still
    there after `grace` seconds is SIGKILLed by group (SIGKILL reaches a stopped process too).
    """
    for p in procs:
        signal_group(p, signal.SIGCONT)
    children = [p for p in procs if p.popen is not None]
    for p in children:
        signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.popen.poll() is None for p in children if p.popen):
        time.sleep(0.02)
    for p in procs:
        if not p.gone():
            signal_group(p, signal.SIGKILL)
    for p in children:
        assert p.popen is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.popen.wait(timeout=timeout)
    end = time.monotonic() + timeout
    while time.monotonic() < end and not all(p.gone() for p in procs):
        time.sleep(0.02)
    return [p.role for p in procs if not p.gone()]
