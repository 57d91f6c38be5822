"""Short, stable renderings of ages, sizes and times for table cells and the detail pane.

Pure functions of their arguments (the clock is passed in), so the dashboard's snapshots can
freeze time. Durations use the units `LaneTable.duration_key` sorts by (`s`, `m`, `h`, `d`).
"""

from __future__ import annotations

import math
import time

from lanewatch.inert import inert
from lanewatch.lanes.names import decode_lane
from lanewatch.model import units
from lanewatch.model.units import size
from lanewatch.model.views import NamespaceView

__all__ = ["size"]  # shared with the CLI (`model/units.py`)

NONE = "–"


def ago(then: float | None, now: float) -> str:
    """`12s`, `4m`, `3h`, `2d`: how long before `now`; `–` when unknown."""
    if then is None:
        return NONE
    return duration(max(0.0, now - then))


def ago_changes_at(then: float | None, now: float) -> float:
    """When `ago(then, ·)` next shows another text (inf for `–`): at the next whole second
    under a minute, the next whole minute under a day, the next whole hour after that."""
    if then is None:
        return math.inf
    s = int(max(0.0, now - then))
    step = 1 if s < 60 else 60 if s < 86400 else 3600
    return then + (s // step + 1) * step


def duration(seconds: float) -> str:
    """A compact duration with one unit (two for hours and days)."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(s // 3600, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def many(n: int, word: str, plural: str | None = None) -> str:
    """`1 item`, `3 items`, `0 items`: a count and its noun, agreeing."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def count(value: int | None) -> str:
    return "…" if value is None else str(value)


def clock(then: float | None) -> str:
    """Local wall-clock time of day, `14:03:07`."""
    if then is None:
        return NONE
    return time.strftime("%H:%M:%S", time.localtime(then))


def stamp_time(then: float | None) -> str:
    """Local date and time, `2025-03-01 14:03:07`."""
    if then is None:
        return NONE
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(then))


def iso(then: float | None) -> str | None:
    """UTC ISO 8601 with milliseconds, for exports."""
    if then is None:
        return None
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(then))
    return f"{whole}.{int((then % 1) * 1000):03d}Z"


def sizes(allocated: int | None, apparent: int | None) -> str:
    """`28MB on disk (449kB of data)`: the disk first (what a clear frees, what alerts use),
    the files' lengths beside; just the lengths where the disk is not known (a far host's
    older lanewatch)."""
    if allocated is None:
        return size(apparent)
    return f"{size(allocated)} on disk ({size(apparent)} of data)"


def checkout_label(checkout_id: str | None, checkout_path: str | None) -> str:
    """`slug:abcd` (`model/units.py`, shared with `lanewatch status`)."""
    return units.checkout_label(checkout_id, checkout_path, NONE)


def short_command(command: tuple[str, ...] | list[str], limit: int = 60) -> str:
    """A stamp's command on one line, inert, cut at `limit` characters."""
    text = inert(" ".join(command))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def lane_label(ns: NamespaceView) -> str:
    """The lane's name; without a stamp, decoded from the folder name (which encodes it)."""
    if ns.lane is not None:
        return ns.lane
    checkout_id, _, encoded = ns.name.partition(".")
    try:
        return decode_lane(encoded) if checkout_id and encoded else ns.name
    except ValueError:
        return ns.name
