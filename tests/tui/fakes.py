"""A stand-in engine for pure-UI unit tests only (rendering, keys, greying, palette).

It speaks the `Engine` interface of docs/architecture.md and delivers what the test hands it,
from a thread like the real one. Every test of behaviour against lanes uses the real engine on
real `lanewatch run` processes (see test_live.py and test_actions.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from lanewatch.model.views import (
    Changes,
    Evidence,
    Incident,
    NamespaceView,
    NsState,
    SourceHealth,
)

NOW = 1_700_000_000.0


def ns_view(name: str, state: NsState = NsState.LIVE, **changes: Any) -> NamespaceView:
    values: dict[str, Any] = {
        "key": f"/roots/r1/{name}",
        "root": "/roots/r1",
        "name": f"repo-0123456789ab.{name}",
        "lane": name,
        "checkout_id": "repo-0123456789ab",
        "checkout_path": "/work/repo",
        "host": "host-a",
        "pid": 4242,
        "user": "ada",
        "command": ("pytest", "-x"),
        "state": state,
        "reason": "owner alive, heartbeat fresh",
        "grade": "known",
        "started_at": NOW - 300,
        "heartbeat_at": NOW - 2,
        "heartbeat_interval": 5.0,
        "released_at": None,
        "exit_code": None,
        "last_write": NOW - 1,
        "files": 12,
        "bytes": 34_567,
        "allocated": 61_440,
        "write_rate": (0, 1, 3, 5, 2, 0, 0, 8, 20, 4),
        "stamp_status": "ok",
        "incident_ids": (),
    }
    values.update(changes)
    return NamespaceView(**values)


def incident(iid: str, victim: str, **changes: Any) -> Incident:
    values: dict[str, Any] = {
        "id": iid,
        "kind": "takeover",
        "victim": victim,
        "intruder": {"lane": "intruder", "pid": 555},
        "first_seen": NOW - 100,
        "last_seen": NOW - 10,
        "count": 3,
        "grade": "known",
        "evidence": (
            Evidence(
                "/roots/r1/x/tmp/receipt.json",
                NOW - 100,
                120,
                "ab" * 32,
                "known",
                "pid 555",
                "rewritten",
            ),
        ),
        "acknowledged": False,
    }
    values.update(changes)
    return Incident(**values)


class FakeEngine:
    """Delivers `Changes` the test pushes, on a thread of its own, through `on_changes`."""

    def __init__(
        self, views: Iterable[NamespaceView] = (), incidents: Iterable[Incident] = ()
    ) -> None:
        self.views = {v.key: v for v in views}
        self.incidents = {i.id: i for i in incidents}
        self.on_changes: Callable[[Changes], None] | None = None
        self.acknowledged: list[str] = []
        self.rescans = 0
        self.stopped = False

    def start(self, on_changes: Callable[[Changes], None]) -> None:
        self.on_changes = on_changes
        self.push(self.snapshot())

    def snapshot(self) -> Changes:
        return Changes(
            upserts=dict(self.views),
            incidents=dict(self.incidents),
            health=(SourceHealth("/roots/r1", "ok", ""),),
            full=True,
            at=NOW,
        )

    def push(self, changes: Changes) -> None:
        assert self.on_changes is not None
        thread = threading.Thread(target=self.on_changes, args=(changes,))
        thread.start()
        thread.join()

    def stop(self) -> None:
        self.stopped = True

    def rescan(self) -> None:
        self.rescans += 1

    def acknowledge(self, incident_id: str) -> None:
        self.acknowledged.append(incident_id)

    def quiet_for(self) -> float | None:
        return None
