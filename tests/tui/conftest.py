"""Real lanes for dashboard tests: `lanewatch run` subprocesses in a git checkout made under
tmp_path, writing into a scratch root under tmp_path. Every owner and every CMD process group
is killed and reaped at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual import constants as textual_constants

from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import Stamp, read_stamp
from tests.conftest import LANE_START, LANEWATCH, wait_for
from tests.kits.groups import leader_ticks, signal_group


@dataclass
class RealLane:
    name: str
    owner: subprocess.Popen[bytes]
    namespace: Path
    pgid: int
    ticks: int | None = None  # the start ticks of CMD, its group's leader (tests/kits/groups.py)

    @property
    def key(self) -> str:
        return str(self.namespace)

    def stamp(self) -> Stamp | None:
        return read_stamp(self.namespace).stamp

    def ready(self) -> bool:
        """The owner wrote its stamp and started CMD in its own group."""
        stamp = self.stamp()
        if stamp is None or stamp.pid != self.owner.pid or stamp.pgid is None:
            return False
        if stamp.pgid != self.pgid:
            self.pgid = stamp.pgid
            own = stamp.child_pid == stamp.pgid and stamp.child_start_ticks is not None
            self.ticks = stamp.child_start_ticks if own else leader_ticks(stamp.pgid)
        return True

    def signal(self, sig: int) -> None:
        """`sig` to CMD's group, while the number is still its (tests/kits/groups.py)."""
        signal_group(self.pgid, self.ticks, sig)


class Lanes:
    """Starts lanes with the real CLI; knows every process group it must clean up."""

    def __init__(self, repo: Path, root: Path) -> None:
        self.repo = repo
        self.root = root
        self.started: list[RealLane] = []

    def start(
        self,
        name: str,
        cmd: Sequence[str] = ("sleep", "600"),
        heartbeat: float = 0.5,
        wait: bool = True,
        fence: str = "auto",
    ) -> RealLane:
        """`fence="none"`: a lane that must reach shared temp (what an unfenced lane does)."""
        owner = subprocess.Popen(
            [
                *LANEWATCH,
                "run",
                "--root",
                str(self.root),
                "--lane",
                name,
                "--heartbeat",
                str(heartbeat),
                "--fence",
                fence,
                "--",
                *cmd,
            ],
            cwd=self.repo,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            process_group=0,
        )
        namespace = locate(name, root=self.root, checkout=self.repo).namespace
        lane = RealLane(name, owner, namespace, pgid=-1)
        self.started.append(lane)
        if wait:
            wait_for(lane.ready, timeout=LANE_START, what=f"lane {name} started")
        return lane

    def refused(self, name: str) -> subprocess.CompletedProcess[bytes]:
        """A second claimant of a held lane: refused (exit 3), written to the victim's ledger."""
        return subprocess.run(
            [*LANEWATCH, "run", "--root", str(self.root), "--lane", name, "--", "true"],
            cwd=self.repo,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )

    def kill9(self, lane: RealLane) -> None:
        """The owner and its CMD die without a word: the stamp still says live."""
        assert lane.ready()
        # The owner first: it leads a group of its own, apart from CMD's. Killed second, it
        # could see CMD die and write `released` before its own SIGKILL landed, and the test
        # would see released, not stale.
        lane.owner.kill()
        lane.owner.wait(timeout=10)
        lane.signal(signal.SIGKILL)

    def cleanup(self) -> None:
        for lane in self.started:
            lane.ready()
            lane.signal(signal.SIGKILL)
            if lane.owner.poll() is None:  # our un-reaped child: its number is still its own
                _killpg(lane.owner.pid)
            lane.owner.wait(timeout=10)
            if lane.owner.stderr is not None:
                lane.owner.stderr.close()


def _killpg(pgid: int) -> None:
    if pgid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboards these tests run in-process draw as on a 16-colour terminal (TERM=xterm,
    as the snapshots were taken: the ANSI theme, `tui/app.theme_for`), whatever terminal runs
    the suite. Under TERM=xterm-256color or tmux-256color, COLORTERM=truecolor, NO_COLOR or
    TEXTUAL_FILTERS, Textual would pick other colours and another theme, and 22 snapshots and
    the help's layout failed as soon as the suite ran in tmux. Textual reads TEXTUAL_* when it
    is imported: its constants are set here."""
    monkeypatch.setattr(textual_constants, "COLOR_SYSTEM", "standard")
    monkeypatch.setattr(textual_constants, "FILTERS", "")
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "scratch-root"
    path.mkdir()
    return path


@pytest.fixture
def lanes(repo: Path, scratch: Path) -> Iterator[Lanes]:
    started = Lanes(repo, scratch)
    try:
        yield started
    finally:
        started.cleanup()


@pytest.fixture
def in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from a folder of its own (exports land in the current folder)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd
