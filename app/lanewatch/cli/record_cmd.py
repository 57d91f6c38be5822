"""`lanewatch record`: the engine headless, one line per change, until SIGINT, SIGTERM or SIGHUP.

For CI jobs, servers, and a privileged recorder beside an unprivileged dashboard: it keeps
incidents, evidence and write history in the roots exactly as the dashboard does. Each state
change of a namespace, each new or grown incident, each change of a root's health and of the
attribution is printed as it is delivered: a JSON object a line with `--json` (`type` is
"start", "state", "incident", "health", "attribution" or "stop"), else a short line of text.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

import click

from lanewatch.cli.common import friendly_errors
from lanewatch.cli.status_cmd import incident_json
from lanewatch.inert import inert
from lanewatch.model.views import Changes, Incident, NamespaceView


class Printer:
    """Turns delivered Changes into lines; remembers what it printed, so only changes print."""

    def __init__(self, as_json: bool, roots: Sequence[str]) -> None:
        self.as_json = as_json
        self.roots = list(roots)
        self.states: dict[str, tuple[str, str]] = {}
        self.incidents: dict[str, tuple[int, bool]] = {}
        self.health: dict[str, tuple[str, str]] = {}
        self.attribution: str | None = None
        self.started = False
        self.closed = False  # stdout went away
        self._lock = threading.Lock()

    def __call__(self, changes: Changes) -> None:
        with self._lock:
            if not self.closed:
                self._changes(changes)

    def _changes(self, changes: Changes) -> None:
        if not self.started:
            self.started = True
            self.attribution = changes.attribution
            self.emit(
                "start",
                roots=self.roots,
                attribution=changes.attribution,
                hint=changes.attribution_hint,
                namespaces=len(changes.upserts),
                incidents=len(changes.incidents),
            )
        elif changes.attribution and changes.attribution != self.attribution:
            self.attribution = changes.attribution
            self.emit("attribution", mode=changes.attribution, hint=changes.attribution_hint)
        for h in changes.health:
            if self.health.get(h.root) != (h.status, h.detail):
                self.health[h.root] = (h.status, h.detail)
                self.emit("health", root=h.root, status=h.status, detail=h.detail)
        for key, v in sorted(changes.upserts.items()):
            if self.states.get(key) != (v.state.value, v.reason):
                self.states[key] = (v.state.value, v.reason)
                self.state(v)
        for key in sorted(changes.removed):
            if self.states.pop(key, None) is not None:
                self.emit("state", key=key, state="removed")
        for i in sorted(changes.incidents.values(), key=lambda i: i.last_seen):
            seen = (i.count, i.acknowledged)
            if self.incidents.get(i.id) != seen:
                new = i.id not in self.incidents
                self.incidents[i.id] = seen
                self.incident(i, new)

    def state(self, v: NamespaceView) -> None:
        self.emit(
            "state",
            key=v.key,
            root=v.root,
            lane=v.lane,
            pid=v.pid,
            state=v.state.value,
            reason=v.reason,
            grade=v.grade,
        )

    def incident(self, i: Incident, new: bool) -> None:
        latest = max(i.evidence, key=lambda e: e.time, default=None)
        extra: dict[str, Any] = {"new": new, **incident_json(i)}
        if latest is not None:
            extra["latest"] = {
                "path": latest.path,
                "time": latest.time,
                "size": latest.size,
                "sha256": latest.sha256,
                "grade": latest.grade,
                "writer": latest.writer,
                "note": latest.note,
            }
        self.emit("incident", **extra)

    def emit(self, line_type: str, /, **fields: Any) -> None:
        at = time.time()
        if self.as_json:
            out = {"type": line_type, "at": at, **fields}
            line = json.dumps(out, sort_keys=True, default=str)
        else:
            when = time.strftime("%H:%M:%S", time.localtime(at))
            line = f"{when} {line_type:<11} {inert(_text(fields))}"
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            self.closed = True


def _text(f: dict[str, Any]) -> str:
    if "summary" in f:
        ack = " acknowledged" if f.get("acknowledged") else " reopened" if f.get("reopened") else ""
        ack = " resolved" if f.get("resolved") else ack
        return f"{f['kind']} [{f['grade']}] x{f['count']}{ack}: {f['summary']} ({f['id']})"
    if "state" in f:
        who = f.get("lane") or f["key"].rsplit("/", 1)[-1]
        return f"{f['state']:<8} {who}: {f.get('reason', '')}".rstrip(": ")
    if "status" in f:
        return f"{f['root']}: {f['status']} ({f['detail']})"
    if "hint" in f:
        return f"attribution {f.get('attribution') or f.get('mode')}: {f['hint']}"
    return " ".join(f"{k}={v}" for k, v in f.items())


@click.command("record")
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Only this root (repeat).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@click.option("--poll", is_flag=True, help="Poll the roots (network filesystems).")
@friendly_errors
def record_command(roots: Sequence[str], as_json: bool, poll: bool) -> None:
    """Run the engine without a screen and print each change until SIGINT or SIGTERM.

    Incidents, evidence and write history are kept in the roots as the dashboard keeps them.
    As root (or with CAP_SYS_ADMIN) writers are attributed by the kernel.
    """
    from lanewatch.engine.engine import Engine

    engine = Engine(list(roots) if roots else None, poll=poll)
    printer = Printer(as_json, engine.roots)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # HUP: its terminal went away
    previous = {s: signal.signal(s, on_signal) for s in stops}
    try:
        engine.start(printer)
        while not stop.wait(0.5) and not printer.closed:
            pass
    finally:
        engine.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    with printer._lock:
        printer.emit("stop", signal=received[0] if received else None)
