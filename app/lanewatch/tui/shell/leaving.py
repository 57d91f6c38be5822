"""How the dashboard ends when it is not asked with `q`: SIGTERM, SIGHUP (its terminal went
away), or a terminal found hung up. It ends as `q` ends it, from its own loop, with 128+N (129
for a hang-up, 143 for SIGTERM); and it ends for certain.

Textual handles neither signal (Textualize/textual#5140): SIGTERM's default would kill the process
with the terminal left in application mode. A hang-up has a trap of its own: the kernel sends
the session leader SIGHUP *and* SIGCONT, and Textual's SIGCONT handler (there for Ctrl-Z, `fg`)
starts application mode again on the dead terminal. Its new writer thread dies on its first write
(EIO), its queue of 30 fills, and `App._shutdown` then waits for ever in `LinuxDriver.close` →
`WriterThread.stop` → `Queue.put` (seen with py-spy after `tmux kill-server`: an orphan dashboard
that ignored SIGTERM and SIGHUP). So:

- a SIGCONT that finds the terminal hung up, or comes while leaving, resumes nothing;
- whatever asked the app to leave also starts a watchdog: if the process still runs `GRACE`
  seconds later (a shutdown blocked on the terminal, a thread that never ends), it restores what
  it can of a live terminal and ends the process with `os._exit` and the same code. Nothing is
  lost by that: the demo stopped its processes at the signal already (and removes its files
  once more then: `last`), and the engine process stops when its stdin ends, which `os._exit`
  closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import termios
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from lanewatch.linux.proc import reopen_own
from lanewatch.tui.shell import staleness

log = logging.getLogger(__name__)

LEAVE_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
HUNG_UP = 128 + signal.SIGHUP
GRACE = 5.0  # seconds from the signal to the process's end, one way or the other

# What Textual's `stop_application_mode` writes (keyboard protocol, alternate screen, cursor,
# focus events) plus mouse and bracketed paste off: a terminal left as the user had it.
RESTORE = (
    "\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l\x1b[?2004l"
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l"
)


class Leaving:
    """The app's way out on a signal or a dead terminal (`LanewatchApp.leaving`)."""

    def __init__(self, app: Any, grace: float = GRACE) -> None:
        self.app = app
        self.grace = grace
        self.code: int | None = None  # 128+N once leaving was asked
        self.before: Callable[[], object] | None = None  # the demo stops its processes here
        self.last: Callable[[], object] | None = None  # an abandoned process's last act

    @contextlib.contextmanager
    def on_signals(self) -> Iterator[Leaving]:
        """While the app runs: SIGTERM and SIGHUP make it leave. Main thread only (elsewhere
        signals cannot be caught; the app then runs without, as Textual does)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = {sig: signal.signal(sig, self._on_signal) for sig in LEAVE_SIGNALS}
        old[signal.SIGCONT] = signal.getsignal(signal.SIGCONT)  # Textual's driver replaces it
        try:
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def guard_resume(self, terminal: int | None) -> None:
        """Once mounted (Textual's driver has put its SIGCONT handler in place): a SIGCONT
        resumes the terminal only while it is there and the app is not leaving."""
        if terminal is None or threading.current_thread() is not threading.main_thread():
            return
        resume = signal.getsignal(signal.SIGCONT)

        def on_continue(signum: int, frame: FrameType | None) -> None:
            if self.code is not None:
                return  # leaving: nothing to resume
            if staleness.terminal_gone(terminal):  # the SIGCONT that comes with a hang-up
                self.leave(HUNG_UP, "the terminal hung up")
            elif callable(resume):
                resume(signum, frame)

        signal.signal(signal.SIGCONT, on_continue)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.leave(128 + signum, signal.Signals(signum).name)

    def leave(self, code: int, why: str) -> None:
        """Ask the app to exit with `code` from its own loop, and make sure the process ends
        within `grace` seconds. Idempotent: the first reason wins."""
        if self.code is not None:
            return
        self.code = code
        try:
            if self.before is not None:
                self.before()  # at once: the terminal may be gone, the loop may never get there
        finally:
            self._arm(code)  # after: stopping the demo's processes takes its own few seconds
        log.warning("%s: the dashboard ends", why)  # after: a handler may write to that terminal
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # the app's loop is not running (yet, or any more)
            raise SystemExit(code) from None
        loop.call_soon_threadsafe(lambda: self.app.exit(return_code=code))

    def _arm(self, code: int) -> None:
        timer = threading.Timer(self.grace, self._abandon, args=(code,))
        timer.name = "lanewatch-leave-watchdog"
        timer.daemon = True
        timer.start()

    def _abandon(self, code: int) -> None:
        """The process is still here `grace` seconds after it was asked to leave. Nothing here
        may block: no logging (its handler can write to the terminal that holds everything up).
        `last` runs first (the demo removes its files, which its `with` block would have)."""
        restore_terminal(self.app)
        if self.last is not None:
            with contextlib.suppress(Exception):
                self.last()
        os._exit(code)


def restore_terminal(app: Any) -> None:
    """Best effort, never blocking: the terminal's modes as before the app, and application mode
    off. Nothing when it is gone. `_driver`, its `fileno` (input) and `attrs_before` are
    Textual's LinuxDriver; it draws on standard error."""
    driver = getattr(app, "_driver", None)
    fd = getattr(driver, "fileno", None)
    if not isinstance(fd, int) or staleness.terminal_gone(fd):
        return
    attrs = getattr(driver, "attrs_before", None)
    if attrs is not None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
    # A description of our own, non-blocking: a terminal that stopped reading cannot hold us.
    with contextlib.suppress(OSError):
        if not os.isatty(2):
            return
        out = reopen_own(2, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            os.write(out, RESTORE.encode())
        finally:
            os.close(out)
