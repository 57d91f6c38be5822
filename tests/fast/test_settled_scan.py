"""A clear's scan looks again when what stood in its way may pass (`actions/checks.py`
`settled_scan`): a normal user's own process that could not be read and that the kernel does not
hide for good was between two states. The race itself (a process exiting, or exec'ing a set-id
program, between two reads of /proc) cannot be made to happen on cue on a test machine, so the
scans here are stand-ins for `holders.scan`; what is real is the loop that judges them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.actions import checks
from lanewatch.processes.holders import ProcScan, Unreadable

pytestmark = pytest.mark.unprivileged  # its loop-again path is a normal user's: the tier runs it
ME = os.geteuid()


def scanned(*unreadable: Unreadable) -> ProcScan:
    return ProcScan(prefixes=("/x",), holders=(), unreadable=unreadable, procs={})


def scans(monkeypatch: pytest.MonkeyPatch, *answers: ProcScan) -> list[ProcScan]:
    """`checks.scan` answers `answers` in turn (the last one again); the scans made are kept."""
    made: list[ProcScan] = []
    it: Iterator[ProcScan] = iter(answers)

    def scan(*args: object, **kwargs: object) -> ProcScan:
        answer = next(it, answers[-1])
        made.append(answer)
        return answer

    monkeypatch.setattr(checks, "scan", scan)
    return made


@pytest.mark.skipif(ME == 0, reason="root reads every process: no process is between states")
def test_an_own_process_read_between_two_states_is_looked_at_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passing = scanned(Unreadable(4242, "fd", "EACCES: Permission denied", ME, False))
    made = scans(monkeypatch, passing, scanned())
    assert checks.settled_scan([Path("/x")]) == scanned()
    assert len(made) == 2


@pytest.mark.skipif(ME == 0, reason="root reads every process: no process is between states")
def test_one_that_stays_unreadable_is_the_answer_once_the_settle_time_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stuck = scanned(Unreadable(4242, "fd", "EACCES: Permission denied", ME, False))
    scans(monkeypatch, stuck)
    assert checks.settled_scan([Path("/x")], settle=0.2) == stuck  # still refuses


def test_a_non_dumpable_or_another_users_process_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for u in (
        Unreadable(4242, "fd", "EACCES: Permission denied", ME, True),  # hidden for good
        Unreadable(4243, "fd", "EACCES: Permission denied", ME + 1, False),  # not ours
        Unreadable(4244, "fd", "EACCES: Permission denied", None, False),  # unknown owner
    ):
        made = scans(monkeypatch, scanned(u), scanned())
        assert checks.settled_scan([Path("/x")]) == scanned(u)
        assert len(made) == 1
