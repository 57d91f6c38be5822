"""A lane's footprint over time, pure: its CPU history, since when it has been
quiet, how fast its disk grows, and the one judgement the dashboard and `status` share: a
lane idle on CPU for long while it holds memory (`idle_holding`).

The readings come from `processes/footprintmeter.py` (the prober's thread); these functions only
fold them, with the time each reading carries: no clock here.
"""

from __future__ import annotations

from lanewatch.model.views import Footprint, NamespaceView

HISTORY = 8  # readings kept for the sparkline (one per probe interval)
BUSY_CPU = 2.0  # percent of a core: under it a reading counts as quiet
IDLE_AFTER = 600.0  # seconds quiet before a lane holding memory is called idle
IDLE_MEMORY = 64 * 1024 * 1024  # bytes: what "holding memory" means
GROWTH_WINDOW = 60.0  # seconds of disk readings the growth is measured over
GROWTH_MIN_SPAN = 5.0  # shorter than this, no growth is claimed

Marks = tuple[tuple[float, int], ...]  # (epoch seconds, bytes allocated), oldest first


def history(previous: tuple[int, ...], fp: Footprint) -> tuple[int, ...]:
    """`previous` with this reading's CPU % appended (a reading without one adds nothing)."""
    if fp.cpu is None:
        return previous
    return (*previous, round(fp.cpu))[-HISTORY:]


def quiet_since(previous: float | None, fp: Footprint) -> float | None:
    """Since when every reading was quiet: kept while they stay so, reset by a busy one."""
    if fp.cpu is None:
        return previous
    if fp.cpu >= BUSY_CPU:
        return None
    return previous if previous is not None else fp.at - fp.window


def disk_marks(previous: Marks, at: float, allocated: int | None) -> Marks:
    """`previous` with (at, allocated) added, readings older than the window dropped."""
    if allocated is None:
        return previous
    kept = [m for m in previous if m[0] >= at - GROWTH_WINDOW and m[0] < at]
    return (*kept, (at, allocated))


def growth(marks: Marks) -> float | None:
    """Bytes allocated per second over the marks; None while they span too little time."""
    if len(marks) < 2:
        return None
    (t0, b0), (t1, b1) = marks[0], marks[-1]
    if t1 - t0 < GROWTH_MIN_SPAN:
        return None
    return (b1 - b0) / (t1 - t0)


def idle_holding(view: NamespaceView, now: float) -> float | None:
    """How long a lane holding at least IDLE_MEMORY has been quiet on CPU, once that is at
    least IDLE_AFTER; else None. The dashboard marks it, `status` says it."""
    fp = view.footprint
    quiet = view.cpu_quiet_since
    if fp is None or quiet is None or fp.memory is None or fp.memory < IDLE_MEMORY:
        return None
    idle = now - quiet
    return idle if idle >= IDLE_AFTER else None
