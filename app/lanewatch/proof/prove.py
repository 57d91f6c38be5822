"""`lanewatch prove`: run a step in its lane, exactly as `lanewatch run` does, and write a receipt.

The git state is read before the command starts (what the step ran against) and again when it
ends; a difference is written into the receipt, and the gate refuses such a receipt. The
receipt is sealed with this user's key (`proof.seal`), read (or made) before the command starts:
a key that cannot be trusted fails the prove before anything runs.

Two cases:

- The lane is free: it is claimed through `run_in_lane` (same process group, signal forwarding,
  heartbeat and ledger lines as `run`), and the receipt is written while the lock is still held,
  just before the release.
- The lane is already held by the `lanewatch run` this process runs inside (same namespace in
  `$LANEWATCH_NAMESPACE`, the stamp's live owner is an ancestor; see `lanes.nested`): nothing is
  claimed; the command runs in its own process group with signals forwarded and the terminal
  handed over, as `run` does, and the receipt goes into the outer run's namespace. Any other
  holder makes the prove fail closed (exit 3).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lanewatch.lanes.lane import DEFAULT_LANE, ENV_LANE, Lane, LaneTarget, locate
from lanewatch.lanes.nested import outer_owner
from lanewatch.lanes.stamp import OwnerState
from lanewatch.proof.gitstate import GitState
from lanewatch.proof.receipts import (
    Receipt,
    StepRun,
    WrittenReceipt,
    encode_step,
    state_of,
    write_run,
)
from lanewatch.proof.seal import SealKey, ensure_key
from lanewatch.runner.fence import Mode
from lanewatch.runner.run import run_in_lane, run_unclaimed


@dataclass(frozen=True, slots=True)
class ProveResult:
    exit_code: int
    receipt: Receipt | None  # None only if the receipt could not be written
    path: Path | None
    nested: bool  # written into the namespace of the `lanewatch run` we run inside


class _ProvingLane(Lane):
    """A Lane that writes the step's receipt just before it lets go of the lock."""

    def __init__(
        self,
        step: str,
        before: GitState,
        lane: str,
        *,
        root: str | os.PathLike[str],
        checkout: str | os.PathLike[str],
        heartbeat: float | None,
        command: list[str],
        key: SealKey,
    ) -> None:
        super().__init__(lane, root=root, checkout=checkout, heartbeat=heartbeat, command=command)
        self.step = step
        self.before = before
        self.key = key
        self.started_at = time.time()
        self.written: WrittenReceipt | None = None

    def claim(self) -> Lane:
        self.started_at = time.time()
        return super().claim()

    def release(self, exit_code: int | None = None, event: str = "released") -> None:
        try:
            if self._stamp is not None and self.stamp.state is OwnerState.LIVE:
                self.written = _write(
                    self.step,
                    self.target,
                    exit_code=1 if exit_code is None else exit_code,
                    command=self.command,
                    started_at=self.started_at,
                    before=self.before,
                    key=self.key,
                )
        finally:
            super().release(exit_code=exit_code, event=event)


def _write(
    step: str,
    target: LaneTarget,
    *,
    exit_code: int,
    command: Sequence[str],
    started_at: float,
    before: GitState,
    key: SealKey,
) -> WrittenReceipt:
    """The receipt of a step that just ended: `before` is the git state it started from."""
    run = StepRun(step, command, exit_code, started_at, finished_at=time.time())
    return write_run(target, run, git=before, git_after=state_of(target), key=key)


def prove(
    step: str,
    cmd: Sequence[str],
    *,
    lane: str | None = None,
    root: str | os.PathLike[str] | None = None,
    checkout: str | os.PathLike[str] | None = None,
    heartbeat: float | None = None,
    fence: Mode = Mode.AUTO,
    shm: bool = False,
) -> ProveResult:
    """Run `cmd` as `step` in its lane and write the receipt. Returns CMD's exit code.

    Raises Unbound outside a checkout, BadStep / BadLaneName for names that cannot be paths,
    ClaimRefused when another owner (not our own outer `lanewatch run`) holds the lane,
    BadSealKey when this user's seal key cannot be trusted (CMD has not run then).
    """
    encode_step(step)
    argv = list(cmd)
    name = lane if lane is not None else os.environ.get(ENV_LANE) or DEFAULT_LANE
    target = locate(name, root=root, checkout=checkout)
    key = ensure_key()
    before = state_of(target)
    if outer_owner(target) is not None:
        started = time.time()
        code = run_unclaimed(argv)
        written = _write(
            step, target, exit_code=code, command=argv, started_at=started, before=before, key=key
        )
        return ProveResult(code, written.receipt, written.path, nested=True)
    owner = _ProvingLane(
        step,
        before,
        name,
        root=target.root,
        checkout=target.checkout.root,
        heartbeat=heartbeat,
        command=argv,
        key=key,
    )
    code = run_in_lane(owner, argv, fence=fence, shm=shm)
    if owner.written is None:
        return ProveResult(code, None, None, nested=False)
    return ProveResult(code, owner.written.receipt, owner.written.path, nested=False)
