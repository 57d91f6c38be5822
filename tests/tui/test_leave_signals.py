"""The real `lanewatch dash` on a real pty that is its controlling terminal, as in a terminal
window or a tmux pane, ended by a real signal or a real hang-up: the dashboard and its engine
process are gone within a deadline, with 128+N, and a terminal still there is left as it was.

Before `tui/shell/leaving.py`, a hang-up (`tmux kill-server`, a closed window) could leave the
dashboard for ever: the kernel sends SIGHUP and SIGCONT, Textual's SIGCONT handler restarted
application mode on the dead terminal and its shutdown then waited on a dead writer thread's full
queue."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lanewatch.lanes.roots import state_dir
from tests.conftest import LANEWATCH, wait_for

pytestmark = pytest.mark.unprivileged

DRAWN = 30.0  # seconds for the dashboard to come up (a loaded CI machine)
GONE = 12.0  # seconds for it and its engine process to end: the watchdog's 5 s, and a margin
# The child takes the pty on its stdin as its controlling terminal, then becomes the dashboard:
# what a terminal emulator or tmux does for the program of a window.
CONTROLLING = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


class Dash:
    """`lanewatch ARGS` as the session leader of a pty of its own; every byte it draws is kept."""

    def __init__(self, args: list[str], tmpdir: Path | None = None) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.modes = termios.tcgetattr(slave)  # the terminal as the user had it
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env |= {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
        if tmpdir is not None:
            env["TMPDIR"] = str(tmpdir)  # the demo's folder in shared temp goes there
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CONTROLLING, *LANEWATCH, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.out = bytearray()

    def read(self, timeout: float = 0.2) -> None:
        if self.master >= 0 and select.select([self.master], [], [], timeout)[0]:
            with contextlib.suppress(OSError):  # EIO: no process has the pty open any more
                self.out += os.read(self.master, 1 << 16)

    def drawn(self) -> psutil.Process:
        """Wait for the footer (the app is up and reading its input) and for its engine process;
        returns the engine process."""
        deadline = time.monotonic() + DRAWN
        while b"Next view" not in self.out:
            assert self.proc.poll() is None, f"the dashboard ended: {bytes(self.out[-800:])!r}"
            assert time.monotonic() < deadline, f"never drawn: {bytes(self.out[-800:])!r}"
            self.read()
        return wait_for(self.engine, DRAWN, what="the dashboard's engine process")

    def engine(self) -> psutil.Process | None:
        for child in psutil.Process(self.proc.pid).children():
            try:
                if "lanewatch.engine.child" in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                continue
        return None

    def ended(self) -> int:
        """The dashboard's exit code, reading what it draws meanwhile; fails after GONE."""
        deadline = time.monotonic() + GONE
        while (code := self.proc.poll()) is None:
            assert time.monotonic() < deadline, f"the dashboard still runs {GONE:.0f} s later"
            self.read(0.05)
        self.read(0)
        return code

    def size(self, rows: int, cols: int) -> None:
        """Resize the terminal (the kernel sends SIGWINCH): the dashboard draws itself whole."""
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def writing_blocked(self) -> bool:
        """A thread of the dashboard sleeps in a write to the terminal (nobody reads it)."""
        tasks = Path(f"/proc/{self.proc.pid}/task")
        chans = set()
        for task in tasks.iterdir():
            with contextlib.suppress(OSError):
                chans.add((task / "wchan").read_text())
        return bool(chans & {"wait_woken", "n_tty_write"})

    def hang_up(self) -> None:
        os.close(self.master)
        self.master = -1

    def close(self) -> None:
        if self.master >= 0:
            os.close(self.master)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[Dash]:
    root = tmp_path / "root"
    root.mkdir()
    started = Dash(["dash", "--root", str(root)])
    try:
        yield started
    finally:
        started.close()


def _gone(process: psutil.Process) -> bool:
    """Ended (a zombie nobody reaps yet counts: it runs nothing)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_hang_up_ends_the_demo_and_every_process_it_started(tmp_path: Path) -> None:
    """The case seen for real: `tmux kill-server` under `lanewatch demo` left it for ever."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    demo = Dash(["demo"], tmpdir=shared)
    try:
        demo.drawn()
        started = psutil.Process(demo.proc.pid).children(recursive=True)
        assert len(started) >= 10  # the lanes, their commands, the intruder, the engine
        demo.hang_up()
        assert demo.ended() == 128 + signal.SIGHUP
        for process in started:
            wait_for(lambda p=process: _gone(p), GONE, what=f"{process.pid} ends with the demo")
        assert not (state_dir() / "demo").exists()  # its files went too
        assert list(shared.iterdir()) == []
    finally:
        demo.close()


def test_a_hang_up_ends_the_dashboard_and_its_engine(dash: Dash) -> None:
    engine = dash.drawn()
    dash.hang_up()  # the window closed, tmux was killed: SIGHUP and SIGCONT from the kernel
    assert dash.ended() == 128 + signal.SIGHUP
    wait_for(lambda: _gone(engine), GONE, what="the engine process ends with the dashboard")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_ends_the_dashboard_and_gives_the_terminal_back(
    dash: Dash, sig: signal.Signals
) -> None:
    engine = dash.drawn()
    assert termios.tcgetattr(dash.master) != dash.modes  # raw, no echo: the app has it
    mark = len(dash.out)
    dash.proc.send_signal(sig)
    assert dash.ended() == 128 + sig
    wait_for(lambda: _gone(engine), GONE, what="the engine process ends with the dashboard")
    assert termios.tcgetattr(dash.master) == dash.modes  # line mode and echo are back
    after = bytes(dash.out[mark:])
    assert b"\x1b[?1049l" in after, after[-800:]  # the alternate screen was left
    assert b"\x1b[?25h" in after, after[-800:]  # the cursor shows again


def test_a_terminal_that_stopped_reading_cannot_keep_the_dashboard(dash: Dash) -> None:
    """Textual's shutdown waits for its output thread, which waits for the terminal: the
    watchdog ends the process anyway, with the terminal's modes given back."""
    engine = dash.drawn()
    sizes = iter([(60, 200), (30, 100)] * 50)

    def blocked() -> bool:  # nobody reads: redraw until the output thread waits in a write
        if dash.writing_blocked():
            return True
        dash.size(*next(sizes))
        return False

    wait_for(blocked, DRAWN, interval=0.2, what="the dashboard blocked writing to its terminal")
    started = time.monotonic()
    dash.proc.send_signal(signal.SIGTERM)

    def ended() -> bool:
        return dash.proc.poll() is not None

    wait_for(ended, GONE, what="the dashboard ends though its terminal is stuck")
    assert dash.proc.returncode == 128 + signal.SIGTERM
    took = time.monotonic() - started
    assert took >= 4.0, f"ended in {took:.1f} s: not by the watchdog, so it proves nothing here"
    wait_for(lambda: _gone(engine), GONE, what="the engine process ends with the dashboard")
    assert termios.tcgetattr(dash.master) == dash.modes  # line mode and echo are back
