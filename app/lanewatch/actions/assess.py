"""A target's state right now, judged exactly as the dashboard judges it.

The stamp is read, the kernel is asked about its owner (`processes.prober.judge`), and
`model.classify` gives the state: CLI, dashboard and engine can never disagree on what is live.
`Seen` is what a person was shown (the owner's pid and start time); an action refuses when the
namespace's owner changed since, so it acts on what the user saw.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lanewatch.actions.targets import Target, ViewLike, resolve
from lanewatch.lanes.stamp import Stamp, StampRead, read_stamp
from lanewatch.linux.procid import boot_id, hostname
from lanewatch.model.classify import LivenessEvidence, Verdict, classify
from lanewatch.model.views import LaneMember, NsState
from lanewatch.processes.prober import judge


@dataclass(frozen=True, slots=True)
class Assessment:
    target: Target
    read: StampRead
    verdict: Verdict
    evidence: LivenessEvidence | None
    at: float

    @property
    def state(self) -> NsState:
        return self.verdict.state

    @property
    def stamp(self) -> Stamp | None:
        return self.read.stamp if self.read.ok else None

    @property
    def members(self) -> tuple[LaneMember, ...]:
        """The lane's running processes, as judged now (its runner left out)."""
        ev, stamp = self.evidence, self.stamp
        return ev.members if ev is not None and stamp is not None and ev.about(stamp) else ()

    def describe(self) -> str:
        return f"{self.state.value}: {self.verdict.reason}"


def assess(target: Target, now: float | None = None) -> Assessment:
    at = time.time() if now is None else now
    read = read_stamp(target.path)
    stamp = read.stamp if read.ok else None
    # Released lanes too: a runner that could not wait for its processes left them running.
    evidence = judge(str(target.path), stamp, at, released=True) if stamp else None
    verdict = classify(read, evidence, at, host=hostname(), boot_id=boot_id())
    return Assessment(target, read, verdict, evidence, at)


@dataclass(frozen=True, slots=True)
class Seen:
    """The owner a person was shown: compared with the stamp at the moment of the act. `uid`:
    whose lane it was shown as (None: not shown, not compared)."""

    pid: int | None
    started_at: float | None
    uid: int | None = None

    @classmethod
    def of(cls, stamp: Stamp | None) -> Seen:
        return cls(stamp.pid, stamp.started_at, stamp.uid) if stamp else cls(None, None)

    @classmethod
    def from_view(cls, view: Any) -> Seen | None:
        """From a dashboard row (`NamespaceView`); None for a plain spec."""
        if not hasattr(view, "pid") or not hasattr(view, "started_at"):
            return None
        return cls(view.pid, view.started_at, getattr(view, "uid", None))

    def changed(self, stamp: Stamp | None) -> str | None:
        """Why the current stamp is not the one seen, or None when it is."""
        now = Seen.of(stamp)
        if self.uid is None:
            now = replace(now, uid=None)
        if now == self:
            return None
        if (now.pid, now.started_at) == (self.pid, self.started_at):
            return f"its owner's uid changed since it was shown (uid {self.uid} -> {now.uid})"
        if self.pid is None:
            return f"it has an owner now (pid {now.pid}) that was not shown"
        if now.pid is None:
            return f"its owner (pid {self.pid}) is no longer in its stamp"
        return f"its owner changed since it was shown (pid {self.pid} -> pid {now.pid})"


def aim(
    spec: str | os.PathLike[str] | ViewLike | Target,
    seen: Seen | None,
    roots: Sequence[Path] | None,
) -> tuple[Target, Seen | None]:
    """The target `spec` names, and the owner the user saw: `seen` as given, else from a
    dashboard row (a name or a path says nothing of an owner). Raises TargetError."""
    if seen is None and not isinstance(spec, str | os.PathLike | Target):
        seen = Seen.from_view(spec)
    target = spec if isinstance(spec, Target) else resolve(spec, roots)
    return target, seen
