"""The footprint's Prometheus series, by root only: a lane name is not a label
(lanes come and go by the thousand; a label per lane would grow the scraper's series without
bound). Read from the engine's picture when scraped, like every series of `metrics.py`."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from lanewatch.model.footprint import idle_holding
from lanewatch.model.views import Changes

MEMBERSHIPS = ("cgroup", "rules")


def by_root(name: str, what: str) -> GaugeMetricFamily:
    """A gauge with one series per root."""
    return GaugeMetricFamily(name, what, labels=["root"])


def footprint_metrics(picture: Changes, roots: list[str]) -> Iterator[Metric]:
    cpu = by_root(
        "lanewatch_lanes_cpu_percent",
        "CPU of the running lanes' processes, percent of one core, summed by root",
    )
    memory = by_root(
        "lanewatch_lanes_memory_bytes",
        "Resident memory of the running lanes' processes, summed by root",
    )
    growth = by_root(
        "lanewatch_lanes_disk_growth_bytes_per_second",
        "How fast the running lanes' disk allocation grows (last minute), summed by root",
    )
    idle = by_root(
        "lanewatch_lanes_idle_holding", "Running lanes quiet on CPU for long while holding memory"
    )
    member = GaugeMetricFamily(
        "lanewatch_lanes_membership",
        "Running lanes by how their processes are known: cgroup or rules",
        labels=["root", "membership"],
    )
    now = picture.at or time.time()
    sums: dict[str, defaultdict[str, float]] = {
        k: defaultdict(float) for k in ("cpu", "mem", "growth", "idle")
    }
    kinds: Counter[tuple[str, str]] = Counter()
    for v in picture.upserts.values():
        f = v.footprint
        if f is None:
            continue
        sums["cpu"][v.root] += f.cpu or 0.0
        sums["mem"][v.root] += f.memory or 0
        sums["growth"][v.root] += v.disk_growth or 0.0
        sums["idle"][v.root] += idle_holding(v, now) is not None
        kinds[(v.root, f.membership)] += 1
    for root in roots:
        cpu.add_metric([root], sums["cpu"][root])
        memory.add_metric([root], sums["mem"][root])
        growth.add_metric([root], sums["growth"][root])
        idle.add_metric([root], sums["idle"][root])
        for how in MEMBERSHIPS:
            member.add_metric([root, how], kinds[(root, how)])
    yield from (cpu, memory, growth, idle, member)
