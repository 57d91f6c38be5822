"""A dashboard whose terminal hangs up ends, instead of spinning on the terminal's end of file
(Textual's input thread does, at 100 % of a core: Textual PR #6690). The hang-up here reaches
the dashboard only through its input, as when an ssh connection drops without a SIGHUP: the
pty is not its controlling terminal."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH

pytestmark = pytest.mark.unprivileged

DEADLINE = 30.0


def test_a_dashboard_whose_terminal_hung_up_ends(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env |= {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
    dash = subprocess.Popen(
        [*LANEWATCH, "dash", "--root", str(root)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=False,  # the pty is not its controlling terminal: no SIGHUP
    )
    os.close(slave)
    try:
        drawn = b""
        deadline = time.monotonic() + DEADLINE
        while b"Next view" not in drawn:  # the footer: the app is up and reading its input
            assert time.monotonic() < deadline, f"the dashboard never drew: {drawn[-500:]!r}"
            if select.select([master], [], [], 0.2)[0]:
                drawn += os.read(master, 1 << 16)
        os.close(master)  # the terminal goes away
        master = -1

        dash.wait(timeout=DEADLINE)  # raises if it is still there (spinning, before the fix)
    finally:
        if master >= 0:
            os.close(master)
        if dash.poll() is None:
            dash.kill()
            dash.wait()
