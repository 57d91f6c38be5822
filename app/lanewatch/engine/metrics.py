"""Prometheus metrics of a running engine (docs/metrics.md): over HTTP or a node_exporter textfile.

A custom collector reads the engine's current picture (`Engine.snapshot`) when it is scraped;
nothing is counted as events arrive, so the watch path costs what it did. This module imports
prometheus_client at the top: only `lanewatch record --metrics…` imports it, so `lanewatch run`
and the dashboard never load it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client import start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from lanewatch import __version__
from lanewatch.engine.footprintmetrics import by_root, footprint_metrics
from lanewatch.engine.metrics_address import parse_address
from lanewatch.lanes.scheme import SCHEME_VERSION
from lanewatch.model.kinds import KINDS
from lanewatch.model.views import (
    STALE_STATES,
    Changes,
    HealthStatus,
    Incident,
    NsState,
)

GRADES = ("known", "inferred")
MODES = ("kernel", "inferred")  # attribution (Engine.attribution)
TEXTFILE_MIN_GAP = 2.0  # a changed picture is written at most this often
TEXTFILE_MAX_GAP = 15.0  # and an unchanged one this often (its ages move on)


class Source(Protocol):
    """What the collector reads: the engine (`engine.engine.Engine`)."""

    @property
    def roots(self) -> list[str]: ...
    @property
    def attribution(self) -> str: ...
    @property
    def stats(self) -> dict[str, int]: ...
    def snapshot(self) -> Changes: ...
    def alive(self) -> bool: ...


def incident_status(i: Incident) -> str:
    """open, acknowledged (by a person) or resolved (by lanewatch: every writer gone)."""
    if i.resolved:
        return "resolved"
    return "acknowledged" if i.acknowledged else "open"


class EngineCollector(Collector):
    """The metrics of whichever engine `source()` returns now (`record` may replace it)."""

    def __init__(self, source: Callable[[], Source]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        engine = self.source()
        picture = engine.snapshot()
        now = time.time()
        roots = sorted(set(engine.roots) | {v.root for v in picture.upserts.values()})
        yield from _lanes(picture, roots)
        yield from footprint_metrics(picture, roots)
        yield from _incidents(picture)
        yield from _health(picture, roots, engine.alive(), now)
        yield from _identity(engine.attribution)
        stats = engine.stats
        for name, what in (
            ("rescans", "full rescans of a root (after an overflow or a lost watch)"),
            ("overflows", "inotify queue overflows"),
            ("kernel_overflows", "fanotify queue overflows (writers lost for a moment)"),
            ("batches", "batches of file events applied"),
        ):
            counter = CounterMetricFamily(f"lanewatch_engine_{name}", what)
            counter.add_metric([], stats.get(name, 0))
            yield counter


def _lanes(picture: Changes, roots: list[str]) -> Iterator[Metric]:
    """Counts by state, and bytes: allocated (on disk, as `du` counts: what alerts should use)
    beside apparent (the files' lengths; the older metrics, kept). The stale ones count what
    `clear --stale` tries (docs/clearing.md): stale, orphan and released namespaces."""
    lanes = GaugeMetricFamily(
        "lanewatch_lanes", "Namespaces by root and state", labels=["root", "state"]
    )
    families = {
        ("stale", "allocated"): by_root(
            "lanewatch_stale_allocated_bytes",
            "Bytes on disk (as du counts) of namespaces nobody runs in (stale, orphan, "
            "released): what clear --stale would free",
        ),
        ("all", "allocated"): by_root(
            "lanewatch_lane_allocated_bytes", "Bytes on disk (as du counts) of every namespace"
        ),
        ("stale", "apparent"): by_root(
            "lanewatch_stale_bytes",
            "Apparent bytes (file lengths) of namespaces nobody runs in (stale, orphan, "
            "released); on disk: lanewatch_stale_allocated_bytes",
        ),
        ("all", "apparent"): by_root(
            "lanewatch_lane_bytes",
            "Apparent bytes (file lengths) of every namespace; on disk: "
            "lanewatch_lane_allocated_bytes",
        ),
    }
    counts = Counter((v.root, v.state.value) for v in picture.upserts.values())
    sums: dict[tuple[str, str], Counter[str]] = {k: Counter() for k in families}
    for v in picture.upserts.values():
        which = ("all", "stale") if v.state in STALE_STATES else ("all",)
        for group in which:
            sums[(group, "allocated")][v.root] += v.allocated or 0
            sums[(group, "apparent")][v.root] += v.bytes or 0
    for root in roots:  # every state of every root, zeros too: a query sees them all
        for state in NsState:
            lanes.add_metric([root, state.value], counts[(root, state.value)])
        for k, family in families.items():
            family.add_metric([root], sums[k][root])
    yield lanes
    yield from families.values()


def _incidents(picture: Changes) -> Iterator[Metric]:
    family = GaugeMetricFamily(
        "lanewatch_incidents",
        "Incidents by kind, grade and status (open, acknowledged, resolved)",
        labels=["kind", "grade", "status"],
    )
    counts = Counter((i.kind, i.grade, incident_status(i)) for i in picture.incidents.values())
    kinds = list(KINDS)  # every registered kind, 0 included
    kinds += sorted({k for k, _, _ in counts} - set(kinds))  # a kind from a newer lanewatch
    for kind in kinds:
        for grade in GRADES:
            for status in ("open", "acknowledged", "resolved"):
                family.add_metric([kind, grade, status], counts[(kind, grade, status)])
    yield family


def _health(picture: Changes, roots: list[str], alive: bool, now: float) -> Iterator[Metric]:
    health = GaugeMetricFamily(
        "lanewatch_root_health",
        "1 for the state each root's watch is in (ok, polling, degraded, missing, overflow-rescan)",
        labels=["root", "status"],
    )
    current = {h.root: h.status for h in picture.health}
    for root in roots:
        for status in HealthStatus:
            health.add_metric([root, status.value], 1 if current.get(root) == status else 0)
    up = GaugeMetricFamily("lanewatch_engine_up", "1 while the engine's thread runs")
    up.add_metric([], 1 if alive else 0)
    age = GaugeMetricFamily(
        "lanewatch_last_change_age_seconds",
        "Seconds since the engine last delivered a change (NaN before its first picture)",
    )
    age.add_metric([], max(0.0, now - picture.at) if picture.at else float("nan"))
    yield from (health, up, age)


def _identity(attribution: str) -> Iterator[Metric]:
    info = GaugeMetricFamily(
        "lanewatch_build_info", "lanewatch's version and scheme", labels=["version", "scheme"]
    )
    info.add_metric([__version__, str(SCHEME_VERSION)], 1)
    scheme = GaugeMetricFamily(
        "lanewatch_scheme_version", "The scheme version this lanewatch keeps (lanes/scheme.py)"
    )
    scheme.add_metric([], SCHEME_VERSION)
    mode = GaugeMetricFamily(
        "lanewatch_attribution_mode",
        "1 for how writers are known: kernel (fanotify) or inferred",
        labels=["mode"],
    )
    for name in MODES:
        mode.add_metric([name], 1 if attribution == name else 0)
    yield from (info, scheme, mode)


def registry_for(
    source: Callable[[], Source], *, reap: bool = False, reap_state: Path | None = None
) -> CollectorRegistry:
    """`reap`: the service reaps, so the reaper's metrics too (`reapmetrics.py`), read from
    `reap_state` (default: reap.json in the state folder)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(source))
    if reap:
        from lanewatch.engine.reapmetrics import ReapCollector

        registry.register(ReapCollector(reap_state))
    return registry


@dataclass
class HttpExporter:
    """`--metrics ADDR:PORT`: a thread of prometheus_client's HTTP server."""

    url: str
    _shutdown: Callable[[], None]

    @classmethod
    def start(cls, address: str, registry: CollectorRegistry) -> HttpExporter:
        host, port = parse_address(address)
        server, _thread = start_http_server(port, addr=host, registry=registry)
        bound = server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return cls(f"http://{shown}:{bound}/metrics", server.shutdown)

    def stop(self) -> None:
        self._shutdown()


class TextfileExporter:
    """`--metrics-textfile PATH`: node_exporter's textfile collector reads PATH. Written
    atomically (prometheus_client writes a temporary file and renames it), when the picture
    changed (at most every TEXTFILE_MIN_GAP s) and every TEXTFILE_MAX_GAP s regardless."""

    def __init__(self, path: str, registry: CollectorRegistry, picture: Callable[[], object]):
        self.path = os.path.abspath(path)
        self.registry = registry
        self.picture = picture  # the engine's current picture: a new object when it changed
        self._last: object = None
        self._written = float("-inf")

    def tick(self, now: float | None = None, *, force: bool = False) -> bool:
        """Write the file if it is due (`force`: now); True when it was written. OSError when
        it cannot be."""
        now = time.monotonic() if now is None else now
        picture = self.picture()
        gap = now - self._written
        changed = picture is not self._last
        due = gap >= TEXTFILE_MAX_GAP or (changed and gap >= TEXTFILE_MIN_GAP)
        if not (due or force):
            return False
        write_to_textfile(self.path, self.registry)
        self._last, self._written = picture, now
        return True
