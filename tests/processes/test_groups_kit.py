"""The suite's own rule for signalling a process group it learned of (tests/kits/groups.py):
only while the number is still that group's. A teardown that SIGKILLed a number taken since by
another process killed another test's lane (the churn journey, beside the suite in CI)."""

from __future__ import annotations

import signal
import subprocess

from tests.kits.groups import Groups, leader_ticks, signal_group


def _leader(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(["sleep", "600"], process_group=0, stdin=subprocess.DEVNULL)
    procs.append(p)
    return p


def test_a_group_is_signalled_only_while_its_leader_is_the_one_learned(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    p = _leader(procs)
    ticks = leader_ticks(p.pid)
    assert ticks is not None
    # The same number, led by a process that started later: another group now. Not hit.
    assert not signal_group(p.pid, ticks + 1)
    assert not signal_group(p.pid, None)
    assert p.poll() is None
    assert signal_group(p.pid, ticks, signal.SIGTERM)
    assert p.wait(timeout=10) == -signal.SIGTERM


def test_the_groups_fixture_spares_a_number_taken_by_another_leader(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    first, other = _leader(procs), _leader(procs)
    groups = Groups()
    groups.append(first.pid)
    groups.append(other.pid)
    groups.ticks[other.pid] = (groups.ticks[other.pid] or 0) + 1  # as if learned of an earlier
    groups.kill()
    assert first.wait(timeout=10) == -signal.SIGKILL
    assert other.poll() is None
