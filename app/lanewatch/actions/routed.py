"""Kill, clear and restore, on this host or another's: the one place that decides which.

A key of another host (`NAME:…`, when the dashboard has hosts: `Routes`) goes to that host's
lanewatch, which runs the action with its own checks; anything else runs here through
`actions.kill`, `actions.clear` and `actions.restore`. Either way the answer is an
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
from lanewatch.actions.restore import restore as restore_here
from lanewatch.actions.trashbox import TrashEntry
from lanewatch.errors import LanewatchError
from lanewatch.model.engine_api import FarHost, Result, Routes
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
    seen = (ns.pid, ns.started_at)  # the far kill refuses an owner other than the row's
    name = signal.Signals(sig).name.removeprefix("SIG")
    return _routed(
        "kill",
        label,
        ns.key,
        routes,
        lambda host, key: host.kill(key, name, seen),
        lambda: kill_mod.kill(
            ns, sig=sig, roots=[Path(ns.root)], allow_other_user=allow_other_user, check=False
        ),
        succeeded=lambda result: result.ended,
    )


def clear(ns: NamespaceView, label: str, routes: Routes | None) -> ActionOutcome:
    here = lambda: clear_mod.clear(ns, roots=[Path(ns.root)], check=False)  # noqa: E731
    return _routed("clear", label, ns.key, routes, lambda host, key: host.clear(key), here)


def restore(item: TrashEntry, routes: Routes | None) -> ActionOutcome:
    """Another host's entry: its lanewatch restores it, with its checks."""
    here = lambda: restore_here(item, roots=[Path(item.root)], check=False)  # noqa: E731
    label = item.lane or item.name
    return _routed("restore", label, item.id, routes, lambda host, i: host.restore(i), here)


def _ok(result: Result) -> bool:
    return result.ok


def _routed(
    verb: str,
    label: str,
    key: str,
    routes: Routes | None,
    there: Callable[[FarHost, str], Result],
    here: Callable[[], R],
    succeeded: Callable[[R], bool] = _ok,
) -> ActionOutcome:
    """`there` on the host `key` belongs to, or `here`; either way an outcome, never a raise
    for what an action can meet (a refusal, a host gone, a file system error)."""
    try:
        far = routes.far(key) if routes is not None else None
        if far is not None:
            host, far_key = far
            answer: Result = there(host, far_key)
            return ActionOutcome(verb, label, answer.ok, answer.message)
        result = here()
    except (LanewatchError, OSError) as exc:
        return ActionOutcome(verb, label, False, str(exc))
    return ActionOutcome(verb, label, succeeded(result), result.message)
