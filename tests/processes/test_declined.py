"""Answering no at a real terminal: `kill`, `clear` and `purge` do nothing and exit 7,
"not confirmed" (docs/exit-codes.md), never the 1 of an action that tried and failed. The
question is asked on a real pseudo-terminal; the lanes and namespaces are real."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch.cli.exits import Exit
from lanewatch.lanes import ledger
from tests.conftest import LANEWATCH
from tests.kits import actionkit
from tests.kits.actionkit import DEADLINE, Procs, alive, released_namespace

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

lw = actionkit.lw
scratch = actionkit.scratch


def answer(args: list[str], reply: bytes, cwd: Path) -> tuple[int, str]:
    """Run lanewatch on a pseudo-terminal, type `reply` at its [y/N]; its exit code and screen."""
    master, slave = os.openpty()
    proc = subprocess.Popen([*LANEWATCH, *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    screen = b""
    replied = False
    deadline = time.monotonic() + DEADLINE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: every end of the terminal closed
                    break
                if not chunk:
                    break
                screen += chunk
            if not replied and b"[y/N]" in screen:
                os.write(master, reply)
                replied = True
            if proc.poll() is not None and not ready:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert replied, screen.decode(errors="replace")
    return code, screen.decode(errors="replace")


def test_declining_kill_exits_7_and_the_lane_runs_on(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "asked")
    code, screen = answer(["kill", "asked"], b"n\r", cwd=repo)
    assert code == Exit.NEEDS_CONFIRMATION, screen
    assert "declined: nothing done" in screen and "Aborted" not in screen
    assert lane.proc.poll() is None and alive(lane.stamp.child_pid or 0)
    assert "killed" not in [line.event for line in ledger.read(lane.namespace)]


def test_enter_is_no_for_clear_and_purge_too(repo: Path, scratch: Path) -> None:
    ns = released_namespace(scratch, "kept")
    code, screen = answer(["clear", "kept"], b"\r", cwd=repo)
    assert code == Exit.NEEDS_CONFIRMATION and "declined: nothing done" in screen, screen
    assert (ns / "tmp" / "f0.txt").exists()
    assert subprocess.run([*LANEWATCH, "clear", "kept", "--yes"], cwd=repo).returncode == 0
    code, screen = answer(["purge", "--older-than", "0"], b"n\r", cwd=repo)
    assert code == Exit.NEEDS_CONFIRMATION and "declined: nothing done" in screen, screen
    trash = subprocess.run(
        [*LANEWATCH, "trash"], cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert "kept" in trash.stdout, trash.stdout  # still in the trash, restorable
