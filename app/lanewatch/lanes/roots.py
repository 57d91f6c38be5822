"""Scratch roots: the default one, and the registry of every root a lane ever claimed in.

The registry is a JSON file in the user's state folder, rewritten atomically under a lock so
concurrent `lanewatch run` processes never lose each other's entries. A registry whose content
is not one (not JSON, not UTF-8, the wrong shape) is kept aside as `roots.json.corrupt-<time>`
and rebuilt from the roots it still names that exist, once, under the lock, saying so on
stderr: a corrupt file never stops a `run`. A registry that cannot be *read* (permissions, I/O)
is an error, never rebuilt: it may be fine.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import flock_within, open_regular, write_atomic

ENV_STATE_DIR = "LANEWATCH_STATE_DIR"
ENV_ROOT = "LANEWATCH_ROOT"
REGISTRY_WAIT = 10.0  # seconds a registry change waits for another
ROOT_META = ".lanewatch-root"  # the root's own folder; never a namespace
REGISTRY = "roots.json"


def state_dir() -> Path:
    env = os.environ.get(ENV_STATE_DIR)
    if env:
        return Path(env)
    return Path(_xdg_state_dir() or _platform_state_dir())


def _xdg_state_dir() -> str | None:
    """platformdirs' `user_state_dir("lanewatch")` in its common Linux case, without its import
    (`run` starts without it): `$XDG_STATE_HOME` when absolute, else an absolute `$HOME`'s
    `.local/state`. None for the rest (no or a relative HOME, Android, other systems), which
    platformdirs answers. tests/processes/test_import_hygiene.py holds the two to the same
    answer."""
    android = os.environ.get("ANDROID_DATA") or hasattr(sys, "getandroidapilevel")
    if sys.platform != "linux" or android:
        return None
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "lanewatch")
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        return None
    return home.rstrip("/") + "/.local/state/lanewatch"  # as os.path.expanduser("~/...") does


def _platform_state_dir() -> str:
    import platformdirs  # only where `_xdg_state_dir` cannot say

    return platformdirs.user_state_dir("lanewatch")


def default_root() -> Path:
    env = os.environ.get(ENV_ROOT)
    return Path(env) if env else state_dir() / "scratch"


def canonical_root(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def root_meta(root: Path) -> Path:
    return root / ROOT_META


def ensure_root(root: Path) -> Path:
    """Create the root (and its meta folder) if needed. A root is never a symlink target we
    silently follow: it is canonicalised once, here, and used by its real path after."""
    root = canonical_root(root)
    root.mkdir(parents=True, exist_ok=True, mode=0o755)
    (root / ROOT_META).mkdir(exist_ok=True, mode=0o755)
    return root


@dataclass(frozen=True, slots=True)
class RootEntry:
    path: str
    added_at: float


class CorruptRegistry(LanewatchError):
    """The registry file holds something that is not a registry."""


# `"path": "<json string>"`, maybe followed by its `"added_at": <number>`: what can be salvaged
# from a registry cut short or garbled around its entries.
# Compiled on first use: only a corrupt registry needs it (docs/performance.md, `run_start`).
@functools.cache
def _entry_re() -> re.Pattern[str]:
    return re.compile(
        r'"path"\s*:\s*("(?:[^"\\]|\\.)*")(?:\s*,\s*"added_at"\s*:\s*(-?[0-9][0-9.eE+-]*))?'
    )


def _tell(message: str) -> None:
    sys.stderr.write(f"lanewatch: {message}\n")
    sys.stderr.flush()


def salvage(raw: bytes) -> list[RootEntry]:
    """Entries a corrupt registry still names, kept only where a root exists there (its
    `.lanewatch-root` folder): garbage never becomes a root."""
    found: dict[str, RootEntry] = {}
    for match in _entry_re().finditer(raw.decode("utf-8", "replace")):
        try:
            path = json.loads(match.group(1))
            added = float(match.group(2)) if match.group(2) else 0.0
        except (ValueError, OverflowError):
            continue
        if not isinstance(path, str) or not os.path.isabs(path) or path in found:
            continue
        if os.path.isdir(os.path.join(path, ROOT_META)):
            found[path] = RootEntry(path, added)
    return list(found.values())


class Registry:
    """The roots registry at `<state dir>/roots.json`."""

    def __init__(self, directory: Path | None = None, tell: Callable[[str], None] = _tell) -> None:
        self.directory = directory or state_dir()
        self.path = self.directory / REGISTRY
        self.tell = tell  # says once what a recovery did (stderr by default)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """The registry's flock (`roots.json.lock`, never unlinked), waited for up to 10 s.
        fcntl.flock itself, as filelock's UnixFileLock takes it: `run` starts without filelock."""
        path = str(self.path) + ".lock"
        fd = open_regular(path, os.O_RDWR | os.O_CREAT)
        try:
            if not flock_within(fd, REGISTRY_WAIT):
                raise LanewatchError(
                    f"the roots registry is locked by another process ({path}, over "
                    f"{REGISTRY_WAIT:g}s); try again"
                )
            yield
        finally:
            os.close(fd)

    def _read(self) -> list[RootEntry]:
        try:
            with os.fdopen(open_regular(self.path, os.O_RDONLY), "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return []
        except ValueError as exc:  # not JSON, or not UTF-8
            raise CorruptRegistry(f"not JSON: {exc}") from exc
        except OSError as exc:
            raise LanewatchError(f"the roots registry {self.path} is unreadable: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("roots", []), list):
            raise CorruptRegistry("not an object with a list of roots")
        entries: list[RootEntry] = []
        for item in data.get("roots", []):
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                added = item.get("added_at")
                entries.append(
                    RootEntry(item["path"], float(added) if isinstance(added, int | float) else 0)
                )
        return entries

    def _write(self, entries: list[RootEntry]) -> None:
        payload = {
            "schema": 1,
            "roots": [{"path": e.path, "added_at": e.added_at} for e in entries],
        }
        write_atomic(self.path, (json.dumps(payload, indent=2) + "\n").encode())

    def _read_locked(self) -> list[RootEntry]:
        """`_read`, with the lock held: a corrupt registry is kept aside and rebuilt first."""
        try:
            return self._read()
        except CorruptRegistry as exc:
            why = str(exc)
        base = f"{REGISTRY}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
        aside, n = self.directory / base, 0
        while aside.exists() or aside.is_symlink():  # never replace an earlier one kept aside
            n += 1
            aside = self.directory / f"{base}-{n}"
        try:
            os.rename(self.path, aside)
            entries = salvage(aside.read_bytes())
            self._write(entries)
        except OSError as exc:
            raise LanewatchError(
                f"the roots registry {self.path} is corrupt ({why}) and could not be rebuilt: {exc}"
            ) from exc
        self.tell(
            f"the roots registry {self.path} was corrupt ({why}); kept it as {aside} and "
            f"rebuilt it with the {len(entries)} root(s) it still named that exist"
        )
        return entries

    def list(self) -> list[RootEntry]:
        """Known roots; the default root is always first, whether registered or not."""
        try:
            entries = self._read()
        except CorruptRegistry:
            with self._lock():
                entries = self._read_locked()
        default = str(canonical_root(default_root()))
        registered = [e for e in entries if e.path == default]
        others = [e for e in entries if e.path != default]
        return [registered[0] if registered else RootEntry(default, 0.0), *others]

    def paths(self) -> builtins.list[Path]:  # `list` here is the method above
        return [Path(e.path) for e in self.list()]

    def add(self, root: str | os.PathLike[str]) -> tuple[Path, bool]:
        """Register a root; returns (canonical path, whether it was new)."""
        path = canonical_root(root)
        try:
            known = self.path.exists() and any(e.path == str(path) for e in self._read())
        except CorruptRegistry:
            known = False  # rebuilt below, under the lock
        if known:
            return path, False  # the common case for every `run`: no lock, no write
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock():
            entries = self._read_locked()
            if any(e.path == str(path) for e in entries):
                return path, False
            entries.append(RootEntry(str(path), time.time()))
            self._write(entries)
        return path, True

    def remove(self, root: str | os.PathLike[str]) -> bool:
        path = str(canonical_root(root))
        if not self.path.exists():
            return False
        with self._lock():
            entries = self._read_locked()
            kept = [e for e in entries if e.path != path]
            if len(kept) == len(entries):
                return False
            self._write(kept)
        return True
