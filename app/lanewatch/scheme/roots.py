"""Scratch roots: the default one, and the registry of every root a lane ever claimed in.

The registry is a JSON file in the user's state folder, rewritten atomically under a lock so
concurrent `lanewatch run` processes never lose each other's entries.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import platformdirs
from filelock import UnixFileLock

from lanewatch.errors import LanewatchError
from lanewatch.scheme.fsutil import open_regular, write_atomic

ENV_STATE_DIR = "LANEWATCH_STATE_DIR"
ENV_ROOT = "LANEWATCH_ROOT"
ROOT_META = ".lanewatch-root"  # the root's own folder; never a namespace
REGISTRY = "roots.json"


def state_dir() -> Path:
    env = os.environ.get(ENV_STATE_DIR)
    return Path(env) if env else Path(platformdirs.user_state_dir("lanewatch"))


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


class Registry:
    """The roots registry at `<state dir>/roots.json`."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or state_dir()
        self.path = self.directory / REGISTRY

    def _lock(self) -> UnixFileLock:
        return UnixFileLock(
            str(self.path) + ".lock",
            timeout=10,
            thread_local=False,
            fallback_to_soft=False,
            preserve_lock_file=True,
        )

    def _read(self) -> list[RootEntry]:
        try:
            with os.fdopen(open_regular(self.path, os.O_RDONLY), "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise LanewatchError(f"the roots registry {self.path} is unreadable: {exc}") from exc
        entries: list[RootEntry] = []
        for item in data.get("roots", []) if isinstance(data, dict) else []:
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

    def list(self) -> list[RootEntry]:
        """Known roots; the default root is always first, whether registered or not."""
        entries = self._read()
        default = str(canonical_root(default_root()))
        registered = [e for e in entries if e.path == default]
        others = [e for e in entries if e.path != default]
        return [registered[0] if registered else RootEntry(default, 0.0), *others]

    def paths(self) -> list[Path]:
        return [Path(e.path) for e in self.list()]

    def add(self, root: str | os.PathLike[str]) -> tuple[Path, bool]:
        """Register a root; returns (canonical path, whether it was new)."""
        path = canonical_root(root)
        if self.path.exists() and any(e.path == str(path) for e in self._read()):
            return path, False  # the common case for every `run`: no lock, no write
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock():
            entries = self._read()
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
            entries = self._read()
            kept = [e for e in entries if e.path != path]
            if len(kept) == len(entries):
                return False
            self._write(kept)
        return True
