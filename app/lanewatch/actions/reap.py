"""The reaper: one pass of the policy (`records/reaping.py`) over the roots, by the clear and
purge that people use (`actions/clear.py`, `actions/purge.py`), never a second way to delete.

A pass has two halves: `plan` chooses, `run` acts.

- **Clear by age**: a namespace judged stale, orphan or released right now (`assess`, the one
  judgement of CLI, dashboard and engine) and idle for at least `policy.age`: idle since the
  newest of its stamp's times (started, heartbeat, released) and its folder's mtime.
- **Clear by budget**: while the namespaces of a root hold more than `policy.budget` on disk
  (as `du -sB1` counts, live ones included), the oldest idle stale/orphan/released ones,
  whatever their age, until what is left fits. What a clear moves stays on disk in the root's
  trash until it is purged: a tight disk wants a short `trash_retention` too.
- **Purge**: trash entries cleared at least `policy.trash_retention` ago.

Never live, hung, headless or unknown: those are never planned, and each clear is
`clear_target`, which judges the namespace again at that moment (under its lock, no process
with its cwd, a file or a mapping inside, no mount inside, same owner as planned) and refuses
otherwise; each purge is `purge`, which keeps an entry a process still holds. Cleared and
purged lines in the namespace's ledger and the root's trash journal carry `reaper`: the rule
that chose them. The clock (`now`) only chooses; every check is made on the real clock.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lanewatch.actions.assess import Assessment, Seen, assess
from lanewatch.actions.clear import ClearResult, clear_target
from lanewatch.actions.fsops import tree_size
from lanewatch.actions.purge import PurgeItem, due, purge
from lanewatch.actions.results import human_size
from lanewatch.actions.targets import Target, namespaces
from lanewatch.model.views import STALE_STATES
from lanewatch.proof.gate import format_duration
from lanewatch.records.reaping import PassSummary, ReapPolicy

Verb = Literal["clear", "purge"]


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a pass would do, and the rule that chose it."""

    verb: Verb
    root: str
    label: str  # the lane (or folder) cleared, the trash id purged
    why: str  # "released, idle 3d > 2d"; "root over budget …"; "in the trash 8d > 7d"
    allocated: int | None  # on disk
    target: Target | None = None  # clear
    seen: Seen | None = None  # clear: the owner planned on; a changed owner is refused
    trash_id: str | None = None  # purge
    idle_since: float | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "verb": self.verb,
            "root": self.root,
            "label": self.label,
            "why": self.why,
            "allocated_bytes": self.allocated,
            "namespace": str(self.target.path) if self.target else None,
            "trash_id": self.trash_id,
            "idle_since": self.idle_since,
        }


@dataclass(frozen=True, slots=True)
class Done:
    """What became of a step: cleared / purged, or why not."""

    step: Step
    outcome: str  # cleared, would-clear, purged, would-purge, refused, kept, failed, gone
    message: str
    freed: int = 0  # on disk: moved into the trash (clear) or deleted (purge)

    def to_json(self) -> dict[str, object]:
        return {**self.step.to_json(), "outcome": self.outcome, "message": self.message,
                "freed_bytes": self.freed}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Pass:
    at: float
    policy: ReapPolicy
    done: tuple[Done, ...]
    dry_run: bool
    notes: tuple[str, ...] = field(default=())  # per root: size and budget

    def summary(self) -> PassSummary:
        def n(*outcomes: str) -> int:
            return sum(1 for d in self.done if d.outcome in outcomes)

        return PassSummary(
            at=self.at,
            cleared=n("cleared"),
            purged=n("purged"),
            refused=n("refused", "kept"),
            failed=n("failed"),
            cleared_bytes=sum(d.freed for d in self.done if d.outcome == "cleared"),
            purged_bytes=sum(d.freed for d in self.done if d.outcome == "purged"),
            dry_run=self.dry_run,
        )


def idle_since(a: Assessment) -> float:
    """When the namespace last showed a sign of use: the newest of its stamp's times and its
    folder's mtime (a file made or removed at its top)."""
    times = [0.0]
    stamp = a.stamp
    if stamp is not None:
        times += [t for t in (stamp.started_at, stamp.heartbeat_at, stamp.released_at) if t]
    with contextlib.suppress(OSError):
        times.append(os.lstat(a.target.path).st_mtime)
    return max(times)


def plan(
    roots: Sequence[Path], policy: ReapPolicy, now: float | None = None
) -> tuple[list[Step], list[str]]:
    """What a pass would do now, in order (clears by age, by budget, then purges), and a note
    per root with a budget. `now` moves the clock that ages are counted on (tests pass one)."""
    now = time.time() if now is None else now
    steps: list[Step] = []
    notes: list[str] = []
    for root in roots:
        steps += _clears(root, policy, now, notes)
    if policy.trash_retention is not None:
        for entry in due(roots, older_than=policy.trash_retention, now=now):
            age = now - entry.cleared_at if entry.cleared_at is not None else None
            why = (
                f"in the trash {format_duration(age)} ≥ {format_duration(policy.trash_retention)}"
                if age is not None
                else "an unfinished clear or purge"
            )
            label = f"{entry.id} ({entry.lane or entry.name})"
            steps.append(Step("purge", entry.root, label, why, entry.allocated, trash_id=entry.id))
    return steps, notes


def _clears(root: Path, policy: ReapPolicy, now: float, notes: list[str]) -> list[Step]:
    if policy.age is None and policy.budget is None:
        return []
    judged = [(t, assess(t)) for t in namespaces([root])]
    idle = sorted(
        ((idle_since(a), t, a) for t, a in judged if a.state in STALE_STATES),
        key=lambda x: x[0],
    )
    steps: list[Step] = []
    chosen: set[str] = set()
    if policy.age is not None:
        for since, t, a in idle:
            if now - since >= policy.age:
                why = (
                    f"{a.state.value}, idle {format_duration(now - since)} ≥ "
                    f"{format_duration(policy.age)}"
                )
                steps.append(_clear_step(t, a, since, why, None))
                chosen.add(t.name)
    if policy.budget is not None:
        sizes = {t.name: tree_size(t.path)[2] for t, _a in judged}
        total = sum(sizes.values())
        left = total - sum(sizes.get(n, 0) for n in chosen)
        notes.append(
            f"{root}: namespaces hold {human_size(total)} on disk, budget "
            f"{human_size(policy.budget)}"
        )
        for since, t, a in idle:  # oldest first
            if left <= policy.budget:
                break
            if t.name in chosen:
                continue
            why = (
                f"{a.state.value}, the oldest idle ({format_duration(now - since)}): the root "
                f"holds {human_size(left)} > budget {human_size(policy.budget)}"
            )
            steps.append(_clear_step(t, a, since, why, sizes[t.name]))
            chosen.add(t.name)
            left -= sizes[t.name]
        steps = [
            s if s.allocated is not None or s.target is None else _sized(s, sizes) for s in steps
        ]
    return steps


def _sized(step: Step, sizes: dict[str, int]) -> Step:
    assert step.target is not None
    return Step(step.verb, step.root, step.label, step.why, sizes.get(step.target.name),
                step.target, step.seen, step.trash_id, step.idle_since)  # fmt: skip


def _clear_step(t: Target, a: Assessment, since: float, why: str, allocated: int | None) -> Step:
    return Step("clear", str(t.root), t.label, why, allocated, t, Seen.of(a.stamp), None, since)


def run(
    roots: Sequence[Path],
    policy: ReapPolicy,
    *,
    dry_run: bool = False,
    now: float | None = None,
    planned: tuple[list[Step], list[str]] | None = None,
) -> Pass:
    """One pass: plan (or take `planned`: what a person confirmed), then act on each step
    through `clear_target` and `purge` (dry run: the same checks, nothing moved or deleted)."""
    at = time.time()
    steps, notes = planned if planned is not None else plan(roots, policy, now)
    done = [_clear(s, dry_run) for s in steps if s.verb == "clear"]
    done += _purges([s for s in steps if s.verb == "purge"], policy, dry_run, now)
    return Pass(at, policy, tuple(done), dry_run, tuple(notes))


def _clear(step: Step, dry_run: bool) -> Done:
    assert step.target is not None
    r: ClearResult = clear_target(step.target, dry_run=dry_run, seen=step.seen, reaper=step.why)
    freed = (r.allocated or 0) if r.outcome in ("cleared", "would-clear") else 0
    return Done(step, r.outcome, r.message, freed)


def _purges(steps: list[Step], policy: ReapPolicy, dry_run: bool, now: float | None) -> list[Done]:
    if not steps or policy.trash_retention is None:
        return []
    if dry_run:
        return [
            Done(s, "would-purge", f"would purge {s.label}: {s.why}", s.allocated or 0)
            for s in steps
        ]
    by_id = {s.trash_id: s for s in steps}
    roots = sorted({Path(s.root) for s in steps})
    result = purge(
        roots,
        older_than=policy.trash_retention,
        only={i for i in by_id if i is not None},
        now=now,
        reaper=f"in the trash ≥ {format_duration(policy.trash_retention)}",
    )
    out: list[Done] = []
    for item in result.items:
        step = by_id.get(item.trash_id) or _resumed(item)
        freed = (step.allocated or item.bytes or 0) if item.outcome == "purged" else 0
        out.append(Done(step, item.outcome, item.message, freed))
    return out


def _resumed(item: PurgeItem) -> Step:
    """A purge that died before, finished by this one (not planned: it was no entry)."""
    return Step("purge", item.root, item.trash_id, "an unfinished purge", item.bytes,
                trash_id=item.trash_id)  # fmt: skip
