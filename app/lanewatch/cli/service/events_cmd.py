"""`lanewatch events [--follow]`: what happens to lanes, as JSON lines, for orchestrators.

The engine the dashboard and `lanewatch record` run, headless, its changes turned into events:
`lane-started` (a namespace becomes live), `lane-released` (its owner exited cleanly),
`incident-opened`, `incident-reopened`, `incident-resolved` (by lanewatch: every writer gone and
quiet), `incident-acknowledged` (by a person), `kill` (the lane's ledger records a kill),
`clear` (the namespace went to the trash) and `namespace-removed` (it went otherwise). A lane's
fields are `record --json --views`'s `view` (status --json's namespace), an incident's are
status --json's; every line has `schema` ("lanewatch.events/1"), `type` and `at`.

First the picture as it is: a `start` line, then one `lane-started` for every live lane and one
`incident-opened` for every open incident, each with `"replay": true`. Without `--follow` it
stops there; with it, it goes on until SIGINT, SIGTERM or SIGHUP (a `stop` line).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import click

from lanewatch.cli.common import friendly_errors
from lanewatch.cli.lanes.status_cmd import incident_json, namespace_json
from lanewatch.cli.reports import schema_id
from lanewatch.cli.rootopts import read_roots
from lanewatch.model.views import Changes, Incident, NamespaceView, NsState

LIVE = (NsState.LIVE, NsState.HUNG)
KILLED = "killed"  # the ledger event actions/kill.py writes


class Events:
    """Turns delivered Changes into event lines; remembers what it said."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = list(roots)
        self.states: dict[str, NsState] = {}
        self.views: dict[str, NamespaceView] = {}
        self.incidents: dict[str, Incident] = {}
        self.kills_after: dict[str, float] = {}  # key -> the newest ledger kill already said
        self.started_at = time.time()
        self.first = threading.Event()
        self.closed = False
        self._lock = threading.Lock()

    def __call__(self, changes: Changes) -> None:
        with self._lock:
            if not self.closed:
                self._changes(changes)
            self.first.set()

    def _changes(self, changes: Changes) -> None:
        replay = not self.first.is_set()
        if replay:
            self.emit(
                "start",
                roots=self.roots,
                attribution=changes.attribution,
                namespaces=len(changes.upserts),
                incidents=len(changes.incidents),
            )
        for key, v in sorted(changes.upserts.items()):
            before = self.states.get(key)
            self.states[key], self.views[key] = v.state, v
            if v.state in LIVE and before not in LIVE:
                self.lane("lane-started", v, replay)
            elif v.state is NsState.RELEASED and before is not NsState.RELEASED and not replay:
                self.lane("lane-released", v, replay)
            if not replay and (before is not v.state or v.state not in LIVE):
                self._kills(v)  # a kill ends the owner: its state moves
            else:
                self.kills_after[key] = self.started_at
        for key in sorted(changes.removed):
            self.states.pop(key, None)
            gone = self.views.pop(key, None)
            self._removed(key, gone)
        for i in sorted(changes.incidents.values(), key=lambda i: i.last_seen):
            self._incident(self.incidents.get(i.id), i, replay)
            self.incidents[i.id] = i

    def lane(self, kind: str, v: NamespaceView, replay: bool, **extra: Any) -> None:
        view = {**namespace_json(v, time.time()), "write_rate": list(v.write_rate)}
        self.emit(kind, key=v.key, lane=v.lane, root=v.root, view=view, replay=replay, **extra)

    def _kills(self, v: NamespaceView) -> None:
        from lanewatch.lanes import ledger

        after = self.kills_after.get(v.key, self.started_at)
        for line in ledger.read(Path(v.key), tail=20):
            if line.event == KILLED and line.time > after:
                after = line.time
                fields = {k: line.fields.get(k) for k in ("signal", "outcome", "owner_pid", "by")}
                self.lane("kill", v, False, killed_at=line.time, **fields)
        self.kills_after[v.key] = after

    def _removed(self, key: str, gone: NamespaceView | None) -> None:
        from lanewatch.actions.trashbox import list_trash

        lane = gone.lane if gone else None
        root = gone.root if gone else str(Path(key).parent)
        try:
            cleared = [e for e in list_trash(Path(root)) if e.original == key]
        except OSError:
            cleared = []
        if cleared:
            e = max(cleared, key=lambda e: e.cleared_at or 0.0)
            self.emit(
                "clear", key=key, lane=lane, root=root, trash_id=e.id, cleared_by=e.cleared_by,
                state=e.state, replay=False,
            )  # fmt: skip
        else:
            self.emit("namespace-removed", key=key, lane=lane, root=root, replay=False)

    def _incident(self, old: Incident | None, i: Incident, replay: bool) -> None:
        kind = None
        if old is None:
            kind = None if i.acknowledged else "incident-opened"
        elif (i.reopened and not old.reopened) or (old.acknowledged and not i.acknowledged):
            kind = "incident-reopened"
        elif i.resolved and not old.resolved:
            kind = "incident-resolved"
        elif i.acknowledged and not old.acknowledged:
            kind = "incident-acknowledged"
        if kind is not None:
            self.emit(kind, replay=replay, incident=incident_json(i))

    def emit(self, line_type: str, /, **fields: Any) -> None:
        out = {"schema": schema_id("events"), "type": line_type, "at": time.time(), **fields}
        try:
            sys.stdout.write(json.dumps(out, sort_keys=True, default=str) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            self.closed = True


@click.command("events")
@read_roots
@click.option("--follow", "-f", is_flag=True, help="Keep printing events as they happen.")
@friendly_errors
def events_command(roots: Sequence[str], follow: bool) -> None:
    """Lane and incident events as JSON lines: the picture now, then (--follow) each change."""
    from lanewatch.engine.child import DELIVERY_INTERVAL
    from lanewatch.engine.engine import Engine

    engine = Engine(list(roots) or None, min_interval=DELIVERY_INTERVAL)
    events = Events(engine.roots)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, on_signal) for s in stops}
    try:
        engine.start(events)
        if follow:
            while not stop.wait(0.5) and not events.closed:
                pass
        else:
            while not events.first.wait(0.1) and not stop.is_set():
                pass
    finally:
        engine.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if follow:
        with events._lock:
            events.emit("stop", signal=received[0] if received else None)
