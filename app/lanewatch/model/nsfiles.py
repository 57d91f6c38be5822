"""A namespace's files as the files view and `lanewatch files --json` give them: plain data, read
on this host (`tui/backend/lane_files.py`) or on another one through its lanewatch
(`hosts/farfiles.py`)."""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("file", "link", "fifo", "socket", "device", "other")


@dataclass(frozen=True, slots=True)
class NsFile:
    rel: str  # relative to the namespace
    kind: str  # one of KINDS
    size: int
    mtime: float
    writer: str | None  # the last recorded writer (the roots' write history), if any
    target: str | None = None  # a symlink's target, as text (never followed)


@dataclass(frozen=True, slots=True)
class NsListing:
    key: str
    files: tuple[NsFile, ...]
    truncated: bool
    error: str | None = None
    elsewhere: str | None = None  # another host's lane not listed: why, and how to see it
    host: str | None = None  # another host's lane, listed there by its lanewatch
