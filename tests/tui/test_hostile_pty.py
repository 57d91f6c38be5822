"""The real dashboard in a real pty over hostile namespaces: `lanewatch dash` is started as a
user starts it, keys are typed, and every byte it writes to the terminal is read. The dashboard
writes escapes of its own, so the check looks for the hostile sequences themselves
(tests/kits/hostile.py: `\\x1b]0;OWNED`, `\\x1b]52;`, `\\x1b[2JWIPED`, C1, raw undecodable bytes)
and for the escapes shown in their place."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lanewatch.lanes import ledger
from lanewatch.lanes.stamp import OwnerState
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.records.incident_log import log_path
from lanewatch.tui.screens.typeahead_guard import GUARD
from tests.conftest import LANEWATCH
from tests.kits import hostile
from tests.kits.actionkit import register_root
from tests.kits.enginekit import make_stamp

pytestmark = [pytest.mark.unprivileged, pytest.mark.timeout(240)]

COLS, ROWS = 200, 60
WAIT = 30.0  # seconds for one thing to appear on the screen
AGAIN = 2.0  # seconds after which an escape that changed nothing is pressed again
# `clear` inspects every process: a normal user is refused (EACCES on root's), so only root
# fills the trash; the rest of the test runs for anyone.
AS_ROOT = os.geteuid() == 0


EXPORT = "lanewatch-incident-inc-1"  # the timeline's export files, without suffix


class Terminal:
    """A process on the far side of a pty of COLS x ROWS; everything it writes is kept."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.out = bytearray()
        self.acting: tuple[str, int] | None = None  # the last action key and where it was typed

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False once the pty is closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:  # EIO: the process closed its side
            return False
        self.out += data
        self._press_again_if_refused()
        return bool(data)

    def _press_again_if_refused(self) -> None:
        """The app said the last action key was typed ahead (a focus move it made after we saw
        its screen restarts the guard, and a loaded machine can be slow to make it): wait out
        the guard again and repeat the key, as a user would."""
        if self.acting is None:
            return
        key, mark = self.acting
        refusals = (f"Ignored {key}:".encode(), f"{key} not taken as a command".encode())
        if any(self.out.find(refusal, mark) >= 0 for refusal in refusals):
            time.sleep(GUARD + 0.3)
            self.acting = (key, len(self.out))
            os.write(self.master, key.encode())

    def shows(self, text: str, since: int = 0, wait: float = WAIT) -> int:
        """Wait until `text` (shown on screen, so as it is encoded) was written after offset
        `since`; returns the offset after it."""
        needle = text.encode()
        deadline = time.monotonic() + wait
        while (found := self.out.find(needle, since)) < 0:
            if time.monotonic() > deadline or not self._read(0.2):
                tail = bytes(self.out[-3000:])
                raise AssertionError(f"{text!r} not shown within {wait}s; last output: {tail!r}")
        return found + len(needle)

    def escape_until(self, text: str) -> int:
        """Press escape until `text` is drawn after the first press. An escape that reaches a
        screen as it closes (a prompt dismissed by the escape before it) is dropped by the
        app, as type-ahead meant for that screen; a user who sees nothing happen presses it
        again, and so does this, every AGAIN seconds, within WAIT. A second escape that was
        not needed lands on the main screen, where it clears a filter there is none of."""
        deadline = time.monotonic() + WAIT
        mark = self.press("\x1b")
        while True:
            left = deadline - time.monotonic()
            try:
                return self.shows(text, mark, wait=max(0.0, min(AGAIN, left)))
            except AssertionError:
                if left <= AGAIN:
                    raise
            self.press("\x1b")

    def act(self, key: str) -> int:
        """Press an action key once the type-ahead guard of the screen now shown has passed.
        The guard counts from when the app changed screen or focus, which is before we saw its
        drawing: waiting out the guard (with a margin for a focus move just after) from now is
        the condition itself, not a guess at the app's speed. Should the app still say the key
        came too early, it is pressed again (`_press_again_if_refused`)."""
        time.sleep(GUARD + 0.3)
        mark = self.press(key)
        self.acting = (key, mark)
        return mark

    def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait for `condition`, reading the pty meanwhile (a full pty would stall the app)."""
        deadline = time.monotonic() + WAIT
        while not condition():
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(f"{what} not within {WAIT}s; last: {bytes(self.out[-500:])!r}")

    def press(self, keys: str) -> int:
        """Type `keys`; returns the output offset before they take effect."""
        mark = len(self.out)
        self.acting = None
        os.write(self.master, keys.encode())
        return mark

    def close(self) -> int | None:
        """Quit with `q` (again every second: the first may close a dialog) and read until the
        pty closes; kill it if it does not end."""
        deadline = time.monotonic() + WAIT
        pressed = 0.0
        while time.monotonic() < deadline and self._read(0.2):
            if self.proc.poll() is not None:
                if not select.select([self.master], [], [], 0)[0]:
                    break
            elif time.monotonic() - pressed > 1.0:
                os.write(self.master, b"q")
                pressed = time.monotonic()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
        code = self.proc.wait(timeout=WAIT)
        os.close(self.master)
        return code


@pytest.fixture
def owner() -> Iterator[ProcessIdentity]:
    sleeper = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    try:
        yield ProcessIdentity.of(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()


def hostile_root(tmp_path: Path, owner: ProcessIdentity) -> tuple[Path, Path]:
    """A registered root: one live hostile lane (files, ledger, an incident), two released
    ones, and (as root: see AS_ROOT) a third released one cleared into the trash. Returns
    (root, live namespace)."""
    root = register_root(tmp_path / "root")
    fields = {
        "command": hostile.COMMAND,
        "user": hostile.USER,
        "checkout_path": hostile.CHECKOUT_PATH,
    }
    live = make_stamp(root, hostile.LANE, pid=owner.pid, start_ticks=owner.start_ticks, **fields)
    for name in hostile.FILE_NAMES:
        (live / os.fsdecode(name)).write_bytes(hostile.CONTENT)
    ledger.append(live, f"claim{hostile.OSC_TITLE}", lane=hostile.LANE, note=hostile.CSI_CLEAR)
    released = {"state": OwnerState.RELEASED, "released_at": time.time(), "exit_code": 0}
    make_stamp(root, hostile.LANE_BIDI, **released, **fields)
    make_stamp(root, hostile.LANE_BYTES, **released)
    if AS_ROOT:
        doomed = make_stamp(root, hostile.LANE_C1, **released, **fields)
        cleared = subprocess.run(
            [*LANEWATCH, "clear", str(doomed), "--yes"], capture_output=True, timeout=60
        )
        assert cleared.returncode == 0, cleared.stderr
    now = time.time()
    record = {
        "id": "inc-1",
        "kind": f"takeover{hostile.OSC_TITLE}",
        "victim": str(live),
        "intruder": {"lane": hostile.LANE_C1, "pid": 4242, "command": hostile.COMMAND},
        "first_seen": now - 5,
        "last_seen": now - 1,
        "count": 1,
        "summary": f"summary {hostile.OSC_CLIPBOARD}",
        "evidence": [
            {
                "path": str(live / os.fsdecode(hostile.FILE_NAMES[0])),
                "time": now - 1,
                "grade": "known",
                "writer": f"lane {hostile.LANE}",
                "note": f"note {hostile.CSI_CLEAR}\nFAKEROW {hostile.UNDECODABLE}",
            }
        ],
    }
    path = log_path(str(root))
    path.write_text(json.dumps(record) + "\n")
    return root, live


def test_the_dashboard_never_writes_a_hostile_sequence_to_the_terminal(
    tmp_path: Path, owner: ProcessIdentity
) -> None:
    root, _ = hostile_root(tmp_path, owner)
    cwd = tmp_path / "cwd"  # never written: exports go to the state folder
    cwd.mkdir()
    state = tmp_path / f"state{hostile.OSC_TITLE}"  # exports land in it: the toast names it
    exports_dir = state / "exports"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env |= {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env["LANEWATCH_STATE_DIR"] = str(state)
    term = Terminal([*LANEWATCH, "dash", "--root", str(root)], cwd, env)

    def back() -> None:
        # A lone escape, then a pause: an escape followed at once by a key reads as alt+key.
        term.escape_until("Next view")

    try:
        # Lanes: the one live row is selected; the detail pane shows its stamp and files.
        at = term.shows("\\x1b]0;OWNED")
        at = term.shows("\\x1b]52;c;T1dORUQ=", at)  # the command, in the detail pane
        term.shows("f\\x1b[2JWIPED.txt")  # a file name among the recent writes
        term.shows("g\\xff\\x9bBYTE.txt")  # an undecodable one, as its bytes
        term.shows("claim\\x1b]0;OWNED")  # the ledger
        # A confirmation names the owner and its checkout: cancel it.
        at = term.act("k")
        term.shows("Cancel [n]", at)  # the dialog is up (the detail pane shows the user too)
        term.shows("user\\x1b]0;OWNED", at)
        term.shows("Kill cancelled", term.press("n"))
        # Collisions: the incident, its timeline (evidence, ledger, stamp), both exports.
        at = term.shows("takeover\\x1b]0;OWNED", term.press("2"))
        at = term.shows("Victim's owner stamp", term.press("\r"))
        term.shows("note \\x1b[2JWIPED\\nFAKEROW", at)
        # The toasts name the folder, `state\x1b]0;OWNED\x07`, folded over lines at any point.
        # Each export is awaited on disk: a toast folds the long path at any point.
        # Each asks first, naming the file (inert: the folder's name holds a title sequence).
        term.shows("Export incident as Markdown?", term.act("e"))
        term.act("y")
        term.until(lambda: (exports_dir / f"{EXPORT}.md").exists(), "the Markdown export")
        term.shows("Export incident as JSON?", term.act("E"))
        term.act("y")
        term.until(lambda: (exports_dir / f"{EXPORT}.json").exists(), "the JSON export")
        # "Export as…" offers a file name; not in this folder's raw name (an input shows it raw).
        term.shows("A file (.md or .json) or a folder", term.act("s"))
        # The timeline's footer is drawn again once the prompt is gone (its pane may redraw
        # under the prompt: a text of the pane proves nothing).
        term.shows("Intruder's lane", term.press("\x1b"))
        back()
        # Stale: the released lanes. Trash: the cleared one.
        term.shows("bidi\\u202eevil", term.press("3"))
        if AS_ROOT:
            term.shows("c1\\x9b31mCONE", term.press("t"))
            back()
    finally:
        code = term.close()
        (tmp_path / "pty.out").write_bytes(bytes(term.out))  # to read after a failure
    out = bytes(term.out)
    for leak in hostile.LEAKS:
        assert leak not in out, f"{leak!r} reached the terminal"
    out.decode("utf-8")  # no raw byte of an undecodable name: strict UTF-8 throughout
    assert code == 0, out[-3000:]
    assert not list(cwd.iterdir()), "an export landed in the current folder"
    exports = sorted(exports_dir.iterdir())
    assert [p.suffix for p in exports] == [".json", ".md"]
    for export in exports:
        hostile.check_text(export.read_bytes(), export.name)
