"""Prometheus metrics of the reaper (docs/metrics.md, docs/reaper.md), read from `reap.json`
when scraped: what `record --reap` (and `lanewatch reap`) cleared and purged, in namespaces,
entries and bytes on disk, and when the last pass ran and the next is due. The totals are kept
in the file, so they survive a restart of the service (a counter that only grows)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lanewatch.records import reaping


class ReapCollector(Collector):
    def __init__(self, state: Path | None = None) -> None:
        self.state = state  # None: reap.json in the state folder

    def collect(self) -> Iterator[Metric]:
        state = reaping.read_state(self.state) or reaping.ReapState()
        totals = state.totals
        cleared = CounterMetricFamily(
            "lanewatch_reaped_namespaces", "namespaces the reaper cleared (moved to the trash)"
        )
        cleared.add_metric([], totals.get("cleared", 0))
        purged = CounterMetricFamily(
            "lanewatch_reaped_trash_entries", "trash entries the reaper purged (deleted)"
        )
        purged.add_metric([], totals.get("purged", 0))
        freed = CounterMetricFamily(
            "lanewatch_reaped_bytes",
            "bytes on disk the reaper moved to the trash (how=cleared) or deleted (how=purged)",
            labels=["how"],
        )
        freed.add_metric(["cleared"], totals.get("cleared_bytes", 0))
        freed.add_metric(["purged"], totals.get("purged_bytes", 0))
        passes = CounterMetricFamily("lanewatch_reaper_passes", "passes the reaper ran")
        passes.add_metric([], totals.get("passes", 0))
        last = GaugeMetricFamily(
            "lanewatch_reaper_last_pass_timestamp_seconds", "when the last pass ran (0: never)"
        )
        last.add_metric([], state.last.at if state.last is not None else 0.0)
        nxt = GaugeMetricFamily(
            "lanewatch_reaper_next_pass_timestamp_seconds",
            "when the service runs its next pass (0: no service reaps)",
        )
        nxt.add_metric([], state.next_at or 0.0)
        yield from (cleared, purged, freed, passes, last, nxt)
