"""The clock's rules, in one place: when a heartbeat is overdue, and when a namespace's view next
changes by the passing of time alone. Pure.

`classify` judges with `is_overdue`, the takeover rule asks `is_overdue` of the previous owner,
and the engine sleeps until `next_change`: all three read the same rule, so a state the clock
will flip is re-judged exactly when it flips.
"""

from __future__ import annotations

from lanewatch.lanes.stamp import OwnerState, Stamp

OVERDUE_FACTOR = 3.0  # a heartbeat is overdue after this many missed intervals
RATE_WINDOW = 30  # seconds of write history in a view's sparkline


def overdue_after(stamp: Stamp) -> float:
    """Seconds without a heartbeat after which the owner `stamp` names is overdue."""
    return stamp.heartbeat_interval * OVERDUE_FACTOR


def is_overdue(stamp: Stamp, beat: float, now: float) -> bool:
    """Whether the heartbeat last seen at `beat` is overdue at `now`."""
    return now - beat > overdue_after(stamp)


def next_change(
    owner: Stamp | None, beat: float | None, last_write_second: int | None, now: float
) -> float | None:
    """When time alone may next change a namespace's view: its live owner's heartbeat falling
    overdue, or its sparkline (writes in the last RATE_WINDOW seconds) moving on; None if it
    never will."""
    due: float | None = None
    if owner is not None and owner.state is OwnerState.LIVE and beat is not None:
        limit = beat + overdue_after(owner)
        if limit >= now:
            due = limit + 0.001
    if last_write_second is not None and last_write_second > now - RATE_WINDOW - 1:
        tick = float(int(now) + 1)
        due = tick if due is None else min(due, tick)
    return due
