"""Sort keys for a `Column`: text, numbers and sizes, durations."""

from __future__ import annotations

import re

from lanewatch.tui.widgets.lane_table._column import Cell, plain


def text_key(cell: Cell) -> str:
    """Default sort key: case-insensitive text."""
    return plain(cell).casefold()


_NUMBER_RE = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*([A-Za-z]*)")
_MULTIPLIERS = {
    "": 1.0,
    "b": 1.0,
    "k": 1e3,
    "kb": 1e3,
    "m": 1e6,
    "mb": 1e6,
    "g": 1e9,
    "gb": 1e9,
    "t": 1e12,
    "tb": 1e12,
    "p": 1e15,
    "pb": 1e15,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
    "pib": 2.0**50,
}


def number_key(cell: Cell) -> tuple[int, float | str]:
    """Sort key for numbers and sizes: `12`, `-3.5`, `1.2 kB`, `3 MiB`, `4G`.

    Cells that are not numbers (`-`, empty) sort after all numbers, by text.
    """
    text = plain(cell)
    match = _NUMBER_RE.match(text.replace(",", ""))
    if match is None:
        return (1, text.casefold())
    # An unknown unit ("12 files") counts as a plain number.
    multiplier = _MULTIPLIERS.get(match.group(2).lower(), 1.0)
    return (0, float(match.group(1)) * multiplier)


_DURATION_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}
_DURATION_UNITS.update({"h": 3600.0, "d": 86400.0, "w": 604800.0})
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(µs|us|ms|min|s|m|h|d|w)(?![a-z])")
_CLOCK_RE = re.compile(r"^\s*(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)\s*$")


def duration_key(cell: Cell) -> tuple[int, float | str]:
    """Sort key for durations: `850ms`, `3.5s`, `2m 10s`, `1h2m`, `5 min`, `3d`, `01:02:03`.

    A bare number counts as seconds. Cells that are not durations sort after all durations.
    """
    text = plain(cell).strip()
    clock = _CLOCK_RE.match(text)
    if clock is not None:
        hours, minutes, seconds = clock.groups()
        return (0, int(hours or 0) * 3600.0 + int(minutes) * 60.0 + float(seconds))
    parts = _DURATION_RE.findall(text)
    if parts and not _DURATION_RE.sub("", text).strip():
        return (0, sum(float(value) * _DURATION_UNITS[unit] for value, unit in parts))
    try:
        return (0, float(text))
    except ValueError:
        return (1, text.casefold())
