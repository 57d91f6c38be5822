"""`lanewatch run`'s cgroup: made after the claim, CMD forked into it, removed once empty.

The runner enters the lane's cgroup for the fork of CMD and leaves it at once (`forking`): CMD
is in its cgroup before its exec, and the runner is not (a `cgroup.kill` ends the lane, never
the runner that records its end). Where the cgroup cannot be made or entered, the lane runs as
before, its processes found by the membership rules; as root (where it was expected to work)
`run` says so in one line, and the stamp always says why (`cgroup_note`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lanewatch.inert import inert
from lanewatch.linux import cgroup

if TYPE_CHECKING:
    from lanewatch.lanes.lane import Lane


class LaneCgroup:
    def __init__(self, path: str | None, note: str | None, back: str | None = None) -> None:
        self.path = path
        self.note = note
        self._back = back  # the runner's own cgroup, to go back to after the fork
        self._made = path

    @classmethod
    def make(cls, lane: Lane) -> LaneCgroup:
        """The lane's cgroup, or why there is none (said in one line where it was expected)."""
        stamp = lane.stamp
        path, why = cgroup.make(stamp.pid, stamp.start_ticks)
        if path is None:
            return cls._without(lane, why)
        back = cgroup.own_cgroup()
        if back is None:
            cgroup.remove(path)
            return cls._without(lane, "cannot read the runner's own cgroup")
        return cls(path, None, back)

    @classmethod
    def _without(cls, lane: Lane, why: str) -> LaneCgroup:
        expected = os.geteuid() == 0 and not why.startswith("$")
        if expected:
            line = (
                f"lanewatch: lane {inert(repr(lane.name))} has no cgroup of its own "
                f"({inert(why)}); its processes are found by the membership rules"
            )
            print(line, file=sys.stderr, flush=True)
        return cls(None, why)

    @contextlib.contextmanager
    def forking(self) -> Iterator[None]:
        """While the runner forks CMD: inside the lane's cgroup."""
        if self.path is None or self._back is None:
            yield
            return
        try:
            cgroup.enter(self.path)
        except OSError as exc:
            self._give_up(f"cannot enter {self.path}: {os.strerror(exc.errno or 0)}")
            yield
            return
        try:
            yield
        finally:
            try:
                cgroup.leave(self._back)
            except OSError as exc:  # the runner would die with its lane: do not use the cgroup
                self._give_up(f"the runner could not leave it: {os.strerror(exc.errno or 0)}")

    def _give_up(self, why: str) -> None:
        print(
            f"lanewatch: the lane's cgroup is not used ({inert(why)}); its processes are "
            "found by the membership rules",
            file=sys.stderr,
            flush=True,
        )
        self.path, self.note = None, why

    def stamp_fields(self) -> dict[str, Any]:
        return {"cgroup": self.path} if self.path else {"cgroup_note": self.note}

    def remove(self) -> None:
        """Remove the cgroup if nothing runs in it any more (else it stays, with its lane)."""
        if self._made is not None:
            cgroup.remove(self._made)
