"""The reaper's policy (`reap.toml`) and what its passes did (`reap.json`), in the state folder.

    # ~/.local/state/lanewatch/reap.toml (`lanewatch hello` prints the folder as state_dir)
    [reap]
    age = "2d"              # clear stale, orphan and released namespaces idle this long
    trash_retention = "7d"  # purge trash entries cleared this long ago
    budget = "20G"          # per root: clear the oldest stale first while its namespaces
                            #   hold more than this on disk (as `du -sB1` counts)
    every = "10m"           # one pass this often (the service)

Every key is optional; a policy with none of age, trash_retention and budget does nothing.
`lanewatch service install --reap-age 2d …` writes this file; the service reads it again
before each pass, so an edit counts from the next pass on. `reap.json` is written by whoever
runs a pass (the service, `lanewatch reap`): the last pass (when, what it cleared and purged,
the bytes each freed), when the next is due, and totals since the file was made (the
service's Prometheus counters). docs/reaper.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import open_regular, write_atomic
from lanewatch.lanes.roots import state_dir
from lanewatch.proof.gate import format_duration, parse_duration

CONFIG_FILE = "reap.toml"
STATE_FILE = "reap.json"
DEFAULT_EVERY = 600.0
MIN_EVERY = 1.0
_MAX = 256 * 1024
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


class ReapConfigError(LanewatchError):
    """reap.toml cannot be read, or a value in it cannot be one."""


def parse_size(text: str | int) -> int:
    """Bytes in `20G` / `20GB` (decimal, as the dashboard shows sizes), `20GiB` (binary),
    `500M`, `1.5T`, `4096`; ValueError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"not a size: {text!r}")
        return text
    m = _SIZE.match(str(text))
    if m is None:
        raise ValueError(f"not a size: {text!r} (try 500M, 20G, 1T)")
    if m.group(3).lower() == "i" or (m.group(3).lower() == "ib" and not m.group(2)):
        raise ValueError(f"not a size: {text!r} (try 500M, 20G, 20GiB)")
    base = 1024 if m.group(3).lower() == "ib" else 1000
    value = float(m.group(1)) * base ** _POWERS[m.group(2).lower()]
    if not math.isfinite(value):
        raise ValueError(f"not a size: {text!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class ReapPolicy:
    age: float | None = None  # seconds a stale/orphan/released namespace is idle before a clear
    trash_retention: float | None = None  # seconds in the trash before a purge
    budget: int | None = None  # bytes on disk per root, namespaces outside the trash
    every: float = DEFAULT_EVERY  # seconds between two passes of the service

    @property
    def active(self) -> bool:
        return bool(self._limits())

    def _limits(self) -> list[tuple[str, float]]:
        """The limits that are set, (name, value), in the order people read them."""
        named = {"age": self.age, "trash_retention": self.trash_retention, "budget": self.budget}
        return [(name, value) for name, value in named.items() if value is not None]

    def describe(self) -> str:
        parts = [_LIMIT_WORDS[name](value) for name, value in self._limits()]
        return ", ".join(parts) or "nothing to do (no age, trash_retention or budget)"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_toml(self) -> str:
        lines = ["# Written by `lanewatch service install --reap-…`; docs/reaper.md.", "[reap]"]
        for name, value in self._limits():  # a budget is bytes; the others are durations
            text = str(value) if name == "budget" else f'"{_seconds(value)}"'
            lines.append(f"{name} = {text}")
        lines.append(f'every = "{_seconds(self.every)}"')
        return "\n".join(lines) + "\n"


_LIMIT_WORDS: dict[str, Callable[[float], str]] = {
    "age": lambda v: f"clear after {format_duration(v)} idle",
    "trash_retention": lambda v: f"purge trash after {format_duration(v)}",
    "budget": lambda v: f"budget {_gib(int(v))} per root",
}


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _gib(n: int) -> str:
    from lanewatch.model.units import size

    return size(n)


def config_path(folder: Path | None = None) -> Path:
    return (folder if folder is not None else state_dir()) / CONFIG_FILE


def policy_of(table: Mapping[str, Any], where: str = CONFIG_FILE) -> ReapPolicy:
    """A policy from reap.toml's `[reap]` table; ReapConfigError naming the bad key."""
    known = {f.name for f in fields(ReapPolicy)}
    extra = sorted(set(table) - known)
    if extra:
        raise ReapConfigError(f"{where}: unknown key {extra[0]!r} (known: {', '.join(known)})")
    values: dict[str, Any] = {}
    for key in ("age", "trash_retention", "every"):
        if key in table:
            try:
                raw = table[key]
                seconds = float(raw) if isinstance(raw, int | float) else parse_duration(raw)
            except (ValueError, TypeError) as exc:
                raise ReapConfigError(f"{where}: {key}: {exc}") from None
            if not math.isfinite(seconds) or seconds < 0:
                raise ReapConfigError(f"{where}: {key}: not a duration: {raw!r}")
            values[key] = seconds
    if "budget" in table:
        try:
            values["budget"] = parse_size(table["budget"])
        except (ValueError, TypeError) as exc:
            raise ReapConfigError(f"{where}: budget: {exc}") from None
    values["every"] = max(MIN_EVERY, values.get("every", DEFAULT_EVERY))
    return ReapPolicy(**values)


def load(path: Path | None = None) -> ReapPolicy | None:
    """The policy in `path` (default: the state folder's reap.toml); None when there is none."""
    path = path if path is not None else config_path()
    try:
        data = _read_small(path)
    except FileNotFoundError:
        return None
    except (OSError, LanewatchError) as exc:
        raise ReapConfigError(f"cannot read {path}: {exc}") from None
    if len(data) > _MAX:
        raise ReapConfigError(f"{path} is larger than {_MAX} bytes")
    try:
        doc = tomllib.loads(data.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ReapConfigError(f"{path}: {exc}") from None
    table = doc.get("reap", {})
    if not isinstance(table, dict):
        raise ReapConfigError(f"{path}: [reap] must be a table")
    return policy_of(table, str(path))


def _read_small(path: Path) -> bytes:
    """At most _MAX + 1 bytes of a regular file (never a FIFO, never through a symlink)."""
    fd = open_regular(path, os.O_RDONLY)
    try:
        return os.read(fd, _MAX + 1)
    finally:
        os.close(fd)


def save(policy: ReapPolicy, path: Path | None = None) -> Path:
    path = path if path is not None else config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, policy.to_toml().encode())
    return path


@dataclass(frozen=True, slots=True)
class PassSummary:
    """One pass, as `reap.json` keeps it."""

    at: float
    cleared: int = 0
    purged: int = 0
    refused: int = 0
    failed: int = 0
    cleared_bytes: int = 0  # on disk, moved into the trash (freed at their purge)
    purged_bytes: int = 0  # on disk, deleted for good: freed now
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class ReapState:
    """What `reap.json` holds."""

    last: PassSummary | None = None
    next_at: float | None = None  # when the service runs its next pass (None: no service)
    policy: dict[str, Any] | None = None
    pid: int | None = None  # who wrote it last
    totals: dict[str, int] = field(default_factory=dict)  # passes, cleared, purged, bytes…

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["schema"] = "lanewatch.reap/1"
        return out


TOTAL_KEYS = ("passes", "cleared", "purged", "cleared_bytes", "purged_bytes")


def state_path(folder: Path | None = None) -> Path:
    return (folder if folder is not None else state_dir()) / STATE_FILE


def read_state(path: Path | None = None) -> ReapState | None:
    """The last state written; None when there is none or it cannot be read (never fatal)."""
    path = path if path is not None else state_path()
    try:
        doc = json.loads(_read_small(path))
    except (OSError, LanewatchError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    try:
        last = doc.get("last")
        summary = PassSummary(**last) if isinstance(last, dict) else None
        totals = {k: int(v) for k, v in (doc.get("totals") or {}).items() if k in TOTAL_KEYS}
        next_at = doc.get("next_at")
        return ReapState(
            last=summary,
            next_at=float(next_at) if isinstance(next_at, int | float) else None,
            policy=doc.get("policy") if isinstance(doc.get("policy"), dict) else None,
            pid=doc.get("pid") if isinstance(doc.get("pid"), int) else None,
            totals=totals,
        )
    except (TypeError, ValueError):
        return None


def record_pass(
    summary: PassSummary,
    policy: ReapPolicy | None,
    next_at: float | None,
    path: Path | None = None,
) -> ReapState:
    """Write a pass into reap.json (a dry run only moves `next_at`); the totals add up."""
    path = path if path is not None else state_path()
    old = read_state(path) or ReapState()
    totals = {k: old.totals.get(k, 0) for k in TOTAL_KEYS}
    last = old.last
    if not summary.dry_run:
        last = summary
        totals["passes"] += 1
        totals["cleared"] += summary.cleared
        totals["purged"] += summary.purged
        totals["cleared_bytes"] += summary.cleared_bytes
        totals["purged_bytes"] += summary.purged_bytes
    state = ReapState(
        last=last,
        next_at=next_at,
        policy=policy.to_json() if policy is not None else old.policy,
        pid=os.getpid(),
        totals=totals,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(state.to_json(), indent=1).encode())
    return state


def next_text(state: ReapState | None, now: float | None = None) -> str | None:
    """One short line for the dashboard's status line: what the last pass freed, when the
    next is due; None when no reaper ever ran here."""
    if state is None or (state.last is None and state.next_at is None):
        return None
    from lanewatch.model.units import size

    now = time.time() if now is None else now
    if state.last is not None:
        last = state.last
        text = (
            f"reaper {format_duration(now - last.at)} ago: cleared {last.cleared} "
            f"({size(last.cleared_bytes)}), purged {last.purged} ({size(last.purged_bytes)} "
            "freed)"
        )
    else:
        text = "reaper: no pass yet"
    if state.next_at is not None:
        due = state.next_at - now
        text += f"; next in {format_duration(due)}" if due > 0 else "; next due now"
    return text
