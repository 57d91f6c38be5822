"""Per-lane budgets of disk and memory: `<root>/.lanewatch-root/budgets.toml`.

```toml
disk = "20G"            # every lane of this root: bytes allocated (as `du` counts)
memory = "4G"           # resident memory of its processes

[lanes."agent-*"]       # lanes whose name matches (fnmatch; the first table that matches)
disk = "5G"
```

Sizes are bytes, or a number with K, M, G or T (powers of 1024; `KiB`, `GB` read the same).
A lane over its budget, or whose disk will pass it within `AHEAD` seconds at the rate it grows,
raises an `over-budget` incident (`model/detectors/over_budget.py`): a warning before the disk
is full. A file that cannot be read as one is said once in the log and ignores no lane's
budget silently: none applies until it is fixed.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

FILE = "budgets.toml"
RESOURCES = ("disk", "memory")
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:I?B)?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(value: object) -> int:
    """Bytes of `value` (an int, or "5G", "512 MiB"); ValueError when it is none."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and (m := _SIZE.match(value)):
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    raise ValueError(f"not a size: {value!r}")


@dataclass(frozen=True, slots=True)
class Budgets:
    default: dict[str, int] = field(default_factory=dict)
    lanes: tuple[tuple[str, dict[str, int]], ...] = ()

    def of(self, lane: str | None) -> dict[str, int]:
        """The budgets of `lane`: its first matching table, else the root's defaults."""
        if lane is not None:
            for pattern, limits in self.lanes:
                if fnmatch.fnmatchcase(lane, pattern):
                    return {**self.default, **limits}
        return dict(self.default)


def _limits(table: dict[str, object], where: str) -> dict[str, int]:
    out = {}
    for name in RESOURCES:
        if name in table:
            try:
                out[name] = parse_size(table[name])
            except ValueError as exc:
                raise ValueError(f"{where}: {name}: {exc}") from None
    return out


def parse(text: str) -> Budgets:
    data = tomllib.loads(text)
    lanes = data.get("lanes", {})
    if not isinstance(lanes, dict):
        raise ValueError("`lanes` is not a table")
    tables = []
    for pattern, table in lanes.items():
        if not isinstance(table, dict):
            raise ValueError(f"lanes.{pattern} is not a table")
        tables.append((pattern, _limits(table, f"lanes.{pattern}")))
    return Budgets(_limits(data, "top"), tuple(tables))


class BudgetFiles:
    """Each root's budgets, read again when its file changes (by mtime and size)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[int, int] | None, Budgets | None]] = {}

    def of(self, root: str) -> Budgets | None:
        path = Path(root) / ".lanewatch-root" / FILE
        try:
            st = os.stat(path)
            sig: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            sig = None
        last = self._seen.get(root)
        if last is not None and last[0] == sig:
            return last[1]
        found = None
        if sig is not None:
            try:
                found = parse(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError, tomllib.TOMLDecodeError) as exc:
                log.warning("budgets in %s not used: %s", path, exc)
        self._seen[root] = (sig, found)
        return found
