"""`lanewatch record`: the engine headless, one line per change, until SIGINT, SIGTERM or SIGHUP.

For CI jobs, servers, and a privileged recorder beside an unprivileged dashboard: it keeps
incidents, evidence and write history in the roots exactly as the dashboard does. Each state
change of a namespace, each new or grown incident, each change of a root's health and of the
attribution is printed as it is delivered: a JSON object a line with `--json` (`type` is
"start", "state", "incident", "health", "attribution", "roots", "metrics" or "stop"), else a
short line of text. `--metrics ADDR:PORT` and `--metrics-textfile PATH` expose Prometheus
metrics of the engine's picture (engine/metrics.py, docs/metrics.md); a "metrics" line says
where.

`--service` is the always-on watcher (`lanewatch service install`, docs/service.md): it also
keeps a heartbeat in its state folder (`records/service.py`) so `status` and the dashboard can
tell that something watches, follows the registry (a root registered later is watched
within ROOTS_EVERY seconds: "roots" line), ignores SIGHUP, and refuses to start beside
another live service of the same folder. `--system` (root) watches every user's registered
roots, with kernel attribution, and keeps its beat in the system's state folder; what it
records in a user's root is the user's (`records/ownership.py`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import click

from lanewatch.cli.common import friendly_errors
from lanewatch.cli.lanes.status_cmd import incident_json, namespace_json
from lanewatch.cli.reports import schema_id
from lanewatch.cli.rootopts import read_roots
from lanewatch.cli.service.metricsopts import metrics_options
from lanewatch.errors import LanewatchError
from lanewatch.inert import inert
from lanewatch.lanes.roots import state_dir
from lanewatch.model.views import Changes, Incident, NamespaceView

log = logging.getLogger(__name__)
ROOTS_EVERY = 10.0  # seconds between two looks at the registry (a service: new roots)


class Printer:
    """Turns delivered Changes into lines; remembers what it printed, so only changes print."""

    def __init__(
        self, as_json: bool, roots: Sequence[str], views: bool = False, beats: float | None = None
    ) -> None:
        self.as_json = as_json
        self.views = views  # --views: every change of a namespace, with the whole of it
        # --beats: a change that only moves a namespace's heartbeat waits (at most `beats`
        # seconds) in `beating`, then goes out with the others in one `beats` line.
        self.beats = beats if views else None
        self.beating: dict[str, float] = {}
        self._beats_at = time.monotonic()
        self.seen: dict[str, NamespaceView] = {}
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
                # {mode, hint} as in status --json; the top-level `hint` is 0.1's, kept for 0.2
                attribution={"mode": changes.attribution, "hint": changes.attribution_hint},
                hint=changes.attribution_hint,
                namespaces=len(changes.upserts),
                incidents=len(changes.incidents),
            )
        elif changes.attribution and changes.attribution != self.attribution:
            self.attribution = changes.attribution
            self.emit(
                "attribution",
                attribution={"mode": changes.attribution, "hint": changes.attribution_hint},
                mode=changes.attribution,  # 0.1's keys, kept for 0.2
                hint=changes.attribution_hint,
            )
        for h in changes.health:
            if self.health.get(h.root) != (h.status, h.detail):
                self.health[h.root] = (h.status, h.detail)
                self.emit("health", root=h.root, status=h.status, detail=h.detail)
        for key, v in sorted(changes.upserts.items()):
            changed = self.states.get(key) != (v.state.value, v.reason)
            if not changed and self._only_beat(key, v):
                self.beating[key] = v.heartbeat_at or 0.0
                self.seen[key] = v
            elif changed or (self.views and self.seen.get(key) != v):
                self.states[key] = (v.state.value, v.reason)
                self.seen[key] = v
                self.beating.pop(key, None)  # the whole view carries its heartbeat
                self.state(v)
        for key in sorted(changes.removed):
            self.seen.pop(key, None)
            self.beating.pop(key, None)
            if self.states.pop(key, None) is not None:
                self.emit("state", key=key, state="removed")
        for i in sorted(changes.incidents.values(), key=lambda i: i.last_seen):
            seen = (i.count, i.acknowledged)
            if self.incidents.get(i.id) != seen:
                new = i.id not in self.incidents
                self.incidents[i.id] = seen
                self.incident(i, new)

    def _only_beat(self, key: str, v: NamespaceView) -> bool:
        """--beats: `v` differs from what was last printed of it by its heartbeat alone."""
        before = self.seen.get(key)
        if self.beats is None or before is None or before.heartbeat_at == v.heartbeat_at:
            return False
        return replace(v, heartbeat_at=before.heartbeat_at) == before

    def flush_beats(self, force: bool = False) -> None:
        """The heartbeats that waited, in one line, once `beats` seconds passed since the
        last such line (called by the record loop; hold the lock)."""
        if self.beats is None or not self.beating or self.closed:
            return
        now = time.monotonic()
        if force or now - self._beats_at >= self.beats:
            self._beats_at = now
            beating, self.beating = self.beating, {}
            self.emit("beats", beats=dict(sorted(beating.items())))

    def state(self, v: NamespaceView) -> None:
        extra: dict[str, Any] = {}
        if self.views:  # the whole namespace, as `status --json` has it (the many-host stream)
            extra["view"] = {**namespace_json(v, time.time()), "write_rate": list(v.write_rate)}
        self.emit(
            "state",
            key=v.key,
            root=v.root,
            lane=v.lane,
            pid=v.pid,
            state=v.state.value,
            reason=v.reason,
            grade=v.grade,
            **extra,
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
            out = {"schema": schema_id("record"), "type": line_type, "at": at, **fields}
            line = json.dumps(out, sort_keys=True, default=str)
        else:
            when = time.strftime("%H:%M:%S", time.localtime(at))
            line = f"{when} {line_type:<11} {inert(_text(fields))}"
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            self.closed = True


def _until_eof(stop: threading.Event, received: list[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read1(4096):
            pass
    received.append("EOF")
    stop.set()


def _wanted_roots(system: bool) -> list[str] | None:
    """The roots a service should watch now: the user's registry (root's `--system`: every
    user's); None when the registry cannot be read (keep watching what we watch)."""
    from lanewatch.engine.engine import resolve_roots
    from lanewatch.records import service as svc

    try:
        return resolve_roots([r for _, r in svc.users_roots()] if system else None)
    except (LanewatchError, OSError) as exc:
        log.warning("cannot read the registered roots: %s", exc)
        return None


def _beat(path: Path, beat: Any, attribution: str | None, alive: bool) -> Any:
    """Keep the service's beat fresh while its engine runs; say its attribution once known.
    A beat that cannot be written is logged, never fatal: the recording goes on."""
    from lanewatch.records import service as svc

    if not alive:  # a dead engine must not look like a watching service
        return beat
    try:
        if attribution and attribution != beat.attribution:
            beat = replace(beat, attribution=attribution)
            svc.write_beat(path.parent, beat)
        else:
            svc.touch(path)
    except OSError as exc:
        log.warning("cannot keep the service's heartbeat %s: %s", path, exc)
    return beat


class _Metrics:
    """`--metrics` and `--metrics-textfile` (engine/metrics.py). prometheus_client is imported
    only when one is asked for: `record` without them, and `run`, never load it."""

    def __init__(
        self, engine: Any, address: str | None, textfile: str | None, reap: bool = False
    ) -> None:
        self.engine, self.address, self.textfile = engine, address, textfile
        self.reap = reap  # the reaper's metrics too (engine/reapmetrics.py)
        self.http: Any = None
        self.file: Any = None
        self.failing = False  # the textfile could not be written: said once, retried

    def start(self, printer: Printer) -> None:
        if self.address is None and self.textfile is None:
            return
        from lanewatch.engine import metrics

        registry = metrics.registry_for(self.engine, reap=self.reap)
        if self.address is not None:
            try:
                self.http = metrics.HttpExporter.start(self.address, registry)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--metrics") from exc
            except OSError as exc:
                raise click.ClickException(
                    f"cannot serve metrics on {self.address}: {exc.strerror or exc}"
                ) from exc
        if self.textfile is not None:
            self.file = metrics.TextfileExporter(self.textfile, registry, self._picture)
        with printer._lock:
            printer.emit(
                "metrics",
                url=self.http.url if self.http else None,
                textfile=self.file.path if self.file else None,
            )

    def _picture(self) -> object:
        return self.engine().snapshot()

    def tick(self, *, force: bool = False) -> None:
        if self.file is None:
            return
        try:
            self.file.tick(force=force)
            self.failing = False
        except OSError as exc:
            if not self.failing:
                log.warning("cannot write the metrics file %s: %s", self.file.path, exc)
            self.failing = True

    def stop(self) -> None:
        if self.http is not None:
            self.http.stop()
        self.tick(force=True)  # the last picture: the engine is down (lanewatch_engine_up 0)


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
    if "url" in f:
        return f"metrics at {f['url'] or '-'}, textfile {f['textfile'] or '-'}"
    if "hint" in f:
        return f"attribution {f['attribution']['mode']}: {f['hint']}"
    return " ".join(f"{k}={v}" for k, v in f.items())


@click.command("record")
@read_roots
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@click.option("--poll", is_flag=True, help="Poll the roots (network filesystems).")
@click.option(
    "--service",
    is_flag=True,
    help="Run as the always-on service: keep a heartbeat that `status` reads (docs/service.md).",
)
@click.option(
    "--system",
    is_flag=True,
    help="With --service, as root: watch every user's registered roots.",
)
@click.option(
    "--views",
    is_flag=True,
    help="With --json: a state line on every change of a namespace, carrying all of it (`view`).",
)
@click.option(
    "--beats",
    type=click.FloatRange(0.1, 60.0),
    metavar="SECONDS",
    help="With --views: a change that only moves a heartbeat is sent at most every SECONDS, "
    "with the others, in one `beats` line (the many-host stream; `hello` lists it).",
)
@click.option(
    "--until-eof",
    is_flag=True,
    help="Also stop when stdin closes (the far end of `ssh HOST lanewatch record`).",
)
@click.option(
    "--reap",
    is_flag=True,
    help="Also run the reaper's policy (reap.toml in the state folder): clear and purge by "
    "age and budget (docs/reaper.md).",
)
@click.option(
    "--reap-config",
    type=click.Path(dir_okay=False),
    help="With --reap: the policy file (default: reap.toml in the state folder).",
)
@metrics_options
@friendly_errors
def record_command(
    roots: Sequence[str],
    as_json: bool,
    poll: bool,
    service: bool,
    system: bool,
    views: bool,
    beats: float | None,
    until_eof: bool,
    reap: bool,
    reap_config: str | None,
    metrics_at: str | None,
    metrics_textfile: str | None,
) -> None:
    """Run the engine without a screen and print each change until SIGINT or SIGTERM.

    Incidents, evidence and write history are kept in the roots as the dashboard keeps them.
    As root (or with CAP_SYS_ADMIN) writers are attributed by the kernel.
    """
    from lanewatch.engine.child import DELIVERY_INTERVAL
    from lanewatch.engine.engine import MIN_INTERVAL, Engine
    from lanewatch.linux import heap

    heap.cap_arenas()  # before the engine's threads: a recorder runs for days (linux/heap.py)

    # --views feeds another host's dashboard (docs/hosts.md): changes go out as often as that
    # dashboard's own engine process hands it changes (one frame), not at the default 50 ms
    # pacing, which alone added up to ~33 ms to a far lane's write → screen (bench fig_hosts).
    pace = DELIVERY_INTERVAL if views else MIN_INTERVAL
    from lanewatch.records import service as svc

    if system and (not service or os.geteuid() != 0):
        raise click.UsageError(
            "--system is for root's service: `sudo lanewatch record --service --system`"
        )
    if reap and system:
        raise click.UsageError(
            "--reap is for a user's own service: each user's service reaps that user's roots"
        )
    beat_dir = (svc.system_state_dir() if system else state_dir()) if service else None
    if beat_dir is not None:
        running = svc.judge(beat_dir)
        if running is not None and running.watching:
            raise click.ClickException(
                f"a service already watches ({running.reason}; {running.path}): one is enough"
            )
    follow = service and not roots  # a service follows the registry: new roots are watched
    engine = Engine(
        _wanted_roots(system) if system and not roots else (list(roots) or None),
        poll=poll,
        min_interval=pace,
    )
    printer = Printer(as_json, engine.roots, views=views, beats=beats)
    exporters = _Metrics(lambda: engine, metrics_at, metrics_textfile, reap)  # reads `engine`
    stop = threading.Event()
    received: list[str] = []
    if until_eof:  # over ssh: the local side went away (no SIGHUP without a terminal)
        threading.Thread(target=_until_eof, args=(stop, received), daemon=True).start()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    # HUP: its terminal went away
    stops: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    if service:  # a service outlives the terminal that started it (`nohup … &`)
        stops = (signal.SIGINT, signal.SIGTERM)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    previous = {s: signal.signal(s, on_signal) for s in stops}
    beat = None
    if service:
        beat = replace(
            svc.Beat.mine("system" if system else "user", engine.roots),
            attribution=engine.attribution,
        )
    beat_path = None
    reaper = None
    if reap:
        from lanewatch.cli.service.reaper_thread import ServiceReaper

        def say_reap(fields: dict[str, object]) -> None:
            with printer._lock:
                printer.emit("reap", **fields)

        config = Path(reap_config).absolute() if reap_config else None
        reaper = ServiceReaper(lambda: engine.roots, say_reap, config)
    try:
        exporters.start(printer)
        engine.start(printer)
        if reaper is not None:
            reaper.start()
        if beat_dir is not None and beat is not None:
            beat_path = svc.write_beat(beat_dir, beat)
        next_beat = time.monotonic() + svc.BEAT_EVERY
        next_roots = time.monotonic() + ROOTS_EVERY
        next_trim = time.monotonic() + heap.TRIM_EVERY
        next_refreeze = time.monotonic() + heap.REFREEZE_EVERY
        frozen = False
        while not stop.wait(0.5) and not printer.closed:
            now = time.monotonic()
            if not frozen and engine.settled.is_set():
                heap.freeze()  # the first picture's heap, out of the collector's walks
                frozen = True
            if now >= next_refreeze:
                next_refreeze = now + heap.REFREEZE_EVERY
                heap.refreeze()
            if follow and now >= next_roots:
                next_roots = now + ROOTS_EVERY
                wanted = _wanted_roots(system)
                if wanted is not None and wanted != engine.roots:
                    engine.stop()
                    engine = Engine(wanted, poll=poll, min_interval=pace)
                    frozen = False
                    with printer._lock:
                        printer.roots = list(engine.roots)
                        printer.emit("roots", roots=printer.roots)
                    engine.start(printer)
                    if beat_path is not None and beat is not None:
                        beat = replace(beat, roots=tuple(engine.roots))
                        svc.write_beat(beat_path.parent, beat)
            if beat_path is not None and beat is not None and now >= next_beat:
                next_beat = now + svc.BEAT_EVERY
                beat = _beat(beat_path, beat, printer.attribution, engine.alive())
            if now >= next_trim:
                next_trim = now + heap.TRIM_EVERY
                heap.trim()
            exporters.tick()
            with printer._lock:
                printer.flush_beats()
    finally:
        if reaper is not None:
            reaper.stop()
        engine.stop()
        exporters.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
        if beat_path is not None and beat is not None:
            with contextlib.suppress(OSError):
                svc.write_beat(beat_path.parent, svc.stopped(beat))
    with printer._lock:
        printer.flush_beats(force=True)
        printer.emit("stop", signal=received[0] if received else None)
