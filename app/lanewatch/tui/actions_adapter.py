"""The one place the dashboard calls the actions module (kill, clear, restore) and the engine's
acknowledge. Every check lives in `lanewatch.actions`; this file only maps the row the user saw
to its calls and turns what happened into an `ActionOutcome` a screen can show.

Methods here block (a kill waits for its grace period): call them from a thread worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.model.views import Incident, NamespaceView, NsState
from lanewatch.scheme.procid import hostname
from lanewatch.tui import fmt
from lanewatch.tui.columns import lane_label as target_label

KILLABLE = frozenset({NsState.LIVE, NsState.HUNG})
CLEARABLE = frozenset({NsState.STALE, NsState.ORPHAN, NsState.RELEASED})


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    verb: str
    target: str
    ok: bool
    message: str


@dataclass(frozen=True, slots=True)
class TrashItem:
    """One cleared namespace waiting in a root's trash."""

    id: str
    name: str
    lane: str | None
    root: str
    original: str
    cleared_at: float | None
    cleared_by: str | None
    bytes: int | None


def can_kill(ns: NamespaceView) -> bool:
    """Worth offering: a live or hung owner on this host. The actions module re-checks it all."""
    return ns.state in KILLABLE and ns.pid is not None and ns.host == hostname()


def can_clear(ns: NamespaceView) -> bool:
    return ns.state in CLEARABLE


def describe_kill(ns: NamespaceView) -> str:
    command = fmt.short_command(ns.command) or "?"
    return (
        f"Send SIGTERM to pid {ns.pid} ({command}) and its process group, owner of lane "
        f"{target_label(ns)!r} (user {ns.user or '?'}, checkout {ns.checkout_path or '?'}). "
        "Its identity is re-checked at the moment of the signal."
    )


def describe_clear(ns: NamespaceView) -> str:
    return (
        f"Move namespace {ns.name} ({ns.state.value}: {ns.reason}; {fmt.size(ns.bytes)}) "
        f"into the trash of {ns.root}. It is refused if anything holds its lock or has a file "
        "open inside; `t` lists the trash and restores it."
    )


class ActionsAdapter:
    """Thin adapter between the dashboard and `lanewatch.actions` (plus the engine)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    # -- kill / clear / restore -------------------------------------------------------------

    def kill(self, ns: NamespaceView) -> ActionOutcome:
        label = target_label(ns)
        try:
            from lanewatch.actions import kill as kill_mod  # type: ignore[attr-defined]
        except ImportError:
            return _missing("kill", label)
        return _run("kill", label, kill_mod.kill, ns)

    def clear(self, ns: NamespaceView) -> ActionOutcome:
        label = target_label(ns)
        try:
            from lanewatch.actions import clear as clear_mod  # type: ignore[attr-defined]
        except ImportError:
            return _missing("clear", label)
        return _run("clear", label, clear_mod.clear, ns)

    def trash(self, roots: Sequence[str]) -> list[TrashItem]:
        try:
            from lanewatch.actions import trash as trash_mod  # type: ignore[attr-defined]
        except ImportError:
            return []
        items: list[TrashItem] = []
        for root in roots:
            items.extend(trash_mod.list_trash(Path(root)))
        return items

    def restore(self, item: TrashItem) -> ActionOutcome:
        try:
            from lanewatch.actions import trash as trash_mod  # type: ignore[attr-defined]
        except ImportError:
            return _missing("restore", item.name)
        return _run("restore", item.name, trash_mod.restore, item)

    # -- incidents ----------------------------------------------------------------------------

    def acknowledge(self, incident: Incident) -> ActionOutcome:
        try:
            self._engine.acknowledge(incident.id)
        except (OSError, KeyError, ValueError) as exc:
            return ActionOutcome("acknowledge", incident.id, False, str(exc))
        return ActionOutcome("acknowledge", incident.id, True, f"acknowledged {incident.id}")


def _missing(verb: str, label: str) -> ActionOutcome:
    return ActionOutcome(verb, label, False, f"{verb} is not available in this build")


def _run(verb: str, label: str, func: Any, arg: Any) -> ActionOutcome:
    from lanewatch.errors import LanewatchError

    try:
        message = func(arg)
    except (LanewatchError, OSError) as exc:
        return ActionOutcome(verb, label, False, str(exc))
    return ActionOutcome(verb, label, True, str(message) if message else f"{verb}: {label}")
