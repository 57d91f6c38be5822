"""Kill, clear and restore, on this host or another's: the one place that decides which.

A key of another host (`NAME:…`, when the dashboard has hosts: `Routes`) goes to that host's
lanewatch, which runs the action with its own checks; anything else runs here through
`actions.kill`, `actions.clear` and `actions.trash`. Either way the answer is an
`ActionOutcome`. Calls block (a kill waits for its grace period): run them off the UI thread.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from lanewatch.actions import clear as clear_mod
from lanewatch.actions import kill as kill_mod
from lanewatch.actions import trash as trash_mod
from lanewatch.actions.results import Result
from lanewatch.actions.trashbox import TrashEntry
from lanewatch.errors import LanewatchError
from lanewatch.model.engine_api import FarResult, Routes
from lanewatch.model.views import NamespaceView


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    verb: str
    target: str
    ok: bool
    message: str


R = TypeVar("R", bound=Result)


def kill(
    ns: NamespaceView,
    label: str,
    routes: Routes | None,
    *,
    sig: int = signal.SIGTERM,
    allow_other_user: bool = False,
) -> ActionOutcome:
    """`sig` to the lane's owner group, as the row showed it (a changed owner is refused; the
    identity is re-checked at the signal). Success means the lane ended."""
    try:
        far = routes.far(ns.key) if routes is not None else None
    except LanewatchError as exc:
        return ActionOutcome("kill", label, False, str(exc))
    if far is not None:
        host, key = far
        seen = (ns.pid, ns.started_at)  # the far kill refuses an owner other than the row's
        name = signal.Signals(sig).name.removeprefix("SIG")
        return _far("kill", label, lambda: host.kill(key, name, seen))
    return _here(
        "kill",
        label,
        lambda: kill_mod.kill(
            ns, sig=sig, roots=[Path(ns.root)], allow_other_user=allow_other_user, check=False
        ),
        succeeded=lambda result: result.ended,
    )


def clear(ns: NamespaceView, label: str, routes: Routes | None) -> ActionOutcome:
    try:
        far = routes.far(ns.key) if routes is not None else None
    except LanewatchError as exc:
        return ActionOutcome("clear", label, False, str(exc))
    if far is not None:
        host, key = far
        return _far("clear", label, lambda: host.clear(key))
    return _here("clear", label, lambda: clear_mod.clear(ns, roots=[Path(ns.root)], check=False))


def restore(item: TrashEntry, routes: Routes | None) -> ActionOutcome:
    label = item.lane or item.name
    try:
        far = routes.far(item.id) if routes is not None else None
    except LanewatchError as exc:
        return ActionOutcome("restore", label, False, str(exc))
    if far is not None:  # another host's entry: its lanewatch restores it, with its checks
        host, trash_id = far
        return _far("restore", label, lambda: host.restore(trash_id))
    return _here(
        "restore", label, lambda: trash_mod.restore(item, roots=[Path(item.root)], check=False)
    )


def _far(verb: str, label: str, act: Callable[[], FarResult]) -> ActionOutcome:
    try:
        result = act()
    except (LanewatchError, OSError) as exc:
        return ActionOutcome(verb, label, False, str(exc))
    return ActionOutcome(verb, label, result.ok, result.message)


def _ok(result: Result) -> bool:
    return result.ok


def _here(
    verb: str, label: str, act: Callable[[], R], succeeded: Callable[[R], bool] = _ok
) -> ActionOutcome:
    try:
        result = act()
    except (LanewatchError, OSError) as exc:
        return ActionOutcome(verb, label, False, str(exc))
    return ActionOutcome(verb, label, succeeded(result), result.message)
