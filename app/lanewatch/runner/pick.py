"""Claiming a lane that may be busy: wait for it (`run --wait`), or take the next free one
(`run --lane-auto`), instead of being refused at once.

Whether a lane looks busy is read from its stamp (a live owner that may hold the lock), never
by taking its lock to see: a probe that holds the lock even briefly could refuse the real owner's
next claim, and a refused claim is an incident. So a lane is only claimed when it looks free; a
race lost in between is one refused claim (recorded, as any other) and the wait goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from lanewatch.errors import ClaimRefused, LanewatchError
from lanewatch.lanes.lane import Lane, LaneTarget, _may_hold_lock
from lanewatch.lanes.stamp import read_stamp

AUTO_LIMIT = 64  # `--lane-auto` tries LANE, LANE-2 … LANE-64, then gives up
POLL = 0.1  # seconds between looks at a busy lane's stamp

# Called between looks: the number of a signal that arrived meanwhile (stop waiting), else None.
Interrupted = Callable[[], int | None]


class WaitInterrupted(LanewatchError):
    """A signal arrived while waiting for a lane: the caller exits as if it had killed CMD."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum} while waiting for the lane")
        self.signum = signum


def looks_busy(target: LaneTarget) -> bool:
    """Whether the lane's stamp names a live owner (the lock is not touched)."""
    stamp = read_stamp(target.namespace).stamp
    return stamp is not None and _may_hold_lock(stamp)


def auto_names(lane: str) -> Iterator[str]:
    yield lane
    for n in range(2, AUTO_LIMIT + 1):
        yield f"{lane}-{n}"


def claim_next_free(make: Callable[[str], Lane], lane: str) -> Lane:
    """Claim `lane`, else the first of `lane-2` … `lane-64` that is free. `make` builds a Lane
    (unclaimed) for a name. A lane that looks busy is passed over without a claim attempt."""
    for name in auto_names(lane):
        candidate = make(name)
        if looks_busy(candidate.target):
            continue
        try:
            return candidate.claim()
        except ClaimRefused:
            continue  # lost a race to another claimant: the next name
    raise ClaimRefused(f"lanes {lane!r} to '{lane}-{AUTO_LIMIT}' are all owned by live processes")


def claim_waiting(
    lane: Lane,
    timeout: float | None,
    interrupted: Interrupted,
    waiting: Callable[[], None] | None = None,
) -> Lane:
    """Claim `lane`, waiting up to `timeout` seconds (None: for ever) while another owner holds
    it; `waiting` is called once, when the wait begins. At the deadline, one last claim is
    refused as without waiting (ClaimRefused, naming the owner). Raises WaitInterrupted when a
    signal arrives meanwhile."""
    deadline = None if timeout is None else time.monotonic() + timeout
    told = False
    while True:
        signum = interrupted()
        if signum is not None:
            raise WaitInterrupted(signum)
        late = deadline is not None and time.monotonic() >= deadline
        if late or not looks_busy(lane.target):
            try:
                return lane.claim()
            except ClaimRefused:
                if late:
                    raise
        if waiting is not None and not told:
            waiting()
            told = True
        time.sleep(POLL)
