"""The picture's watchdog: the dashboard never goes quiet without saying so.

Two ways the screen can stop being current while it still looks alive, both checked once a
second (the app's age tick):

- the UI stops applying what arrives: changes have waited in the bridge's buffer for more than
  `STALL` seconds while nothing holds them (not paused, no modal open), not counting the time
  the UI's loop was held up (each tick's lateness past its second: a loop starting or starved
  of a CPU could not drain, and what waited only for it is drained at the next tick without a
  word). Only the first batch into an empty buffer wakes the UI, so one lost wake-up freezes
  the screen for good; the watchdog drains at once and says so.
- the engine process stops sending: no frame, not even its once-a-second keep-alive, for more
  than `QUIET` seconds (stopped, wedged, starved). `EngineProcess` restarts a child silent for
  longer (`SILENCE_RESTART`).

Either shows as degraded in the status line, with the reason, until the next check finds the
picture current again, which is said too.

A third check ends the dashboard: its terminal hung up (the window closed, ssh dropped without a
SIGHUP reaching us). Textual's input thread then spins on the terminal's end of file at 100 % of
a core for ever (Textual PR #6690), and a dashboard nobody can see has nothing left to do.
"""

from __future__ import annotations

import os
import select
from dataclasses import dataclass, field

STALL = 3.0
QUIET = 5.0
TICK = 1.0  # the watch runs once a second (the app's age tick); later, the loop was held up
LATE_KEPT = 120  # ticks remembered with their lateness: a stall is judged over at most these


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str  # "stall" or "quiet"
    text: str
    age: float = field(default=0.0, compare=False)  # seconds since it began


def judge(*, stalled_for: float | None, quiet_for: float | None) -> Problem | None:
    """What is wrong with the picture now: `stalled_for` seconds of changes not applied while
    nothing holds them, `quiet_for` seconds without a frame from the engine process."""
    if quiet_for is not None and quiet_for > QUIET:
        text = f"the engine process has sent nothing for {quiet_for:.0f}s"
        return Problem("quiet", text, quiet_for)
    if stalled_for is not None and stalled_for > STALL:
        return Problem(
            "stall",
            f"changes waited {stalled_for:.0f}s without reaching the screen: re-drained",
            stalled_for,
        )
    return None


def recovered(problem: Problem, lasted: float) -> str:
    """What the dashboard says when the picture is current again."""
    if problem.kind == "quiet":
        return f"the engine process is sending again after {lasted:.0f}s; the picture is current"
    return "the screen had stopped applying changes (a lost wake-up); it caught up by itself"


def terminal_gone(fd: int) -> bool:
    """The terminal on `fd` hung up or is no longer open: one `poll`, no read (a read would
    take a key from Textual's input thread)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        events = poller.poll(0)
    except OSError:
        return True
    return any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in events)


def terminal_fd(headless: bool) -> int | None:
    """The descriptor to watch for a hang-up: standard input when it is a terminal and the app
    draws on one (not under `run_test`, not with stdin redirected)."""
    if headless:
        return None
    try:
        return 0 if os.isatty(0) else None
    except OSError:
        return None
