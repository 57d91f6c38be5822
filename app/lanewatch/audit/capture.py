"""What one audited run left behind: its fence's private temp folders, its home overlay's upper
folder, its checkout (through `git status`), and when each test ran (the injected clock)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

SLACK_NS = 20_000_000  # file times come from the kernel's coarse clock: up to a tick behind


@dataclass(frozen=True, slots=True)
class Seen:
    area: str  # "/tmp", "/var/tmp", "~" or "checkout"
    rel: str  # the path inside the area
    kind: str  # "written" or "deleted"
    mtime_ns: int | None


def _files(top: Path) -> list[tuple[str, os.stat_result]]:
    """Every entry but folders under `top`, never following a link (os.walk does not)."""
    out: list[tuple[str, os.stat_result]] = []
    for here, dirs, files in os.walk(top):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            full = os.path.join(here, name)
            try:
                out.append((os.path.relpath(full, top), os.lstat(full)))
            except OSError:
                continue
    return sorted(out)


def temp_writes(folder: Path, area: str) -> list[Seen]:
    """Files CMD wrote to `area` (/tmp or /var/tmp), found in the lane's folder for it. The fence
    leaves an empty file or folder as the mount point of each real entry it keeps: skipped."""
    out = []
    for rel, st in _files(folder):
        first = rel.split("/", 1)[0]
        if "/" not in rel and st.st_size == 0 and os.path.lexists(os.path.join(area, first)):
            continue  # a kept entry's mount point, not CMD's
        out.append(Seen(area, rel, "written", st.st_mtime_ns))
    return out


def home_writes(upper: Path) -> list[Seen]:
    """Files CMD wrote (or deleted: overlayfs leaves a 0/0 character device) in the home folder."""
    out = []
    for rel, st in _files(upper):
        deleted = stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
        out.append(Seen("~", rel, "deleted" if deleted else "written", st.st_mtime_ns))
    return out


def checkout_state(checkout: str) -> dict[str, int | None] | str:
    """Changed, untracked and ignored files of `checkout` with their mtimes, or why not."""
    try:
        done = subprocess.run(
            [
                "git",
                "-C",
                checkout,
                "status",
                "--porcelain=v1",
                "-z",
                "--ignored",
                "--untracked-files=all",
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"git status failed: {exc}"
    if done.returncode != 0:
        return f"git status failed: {done.stderr.decode(errors='replace').strip()[:200]}"
    out: dict[str, int | None] = {}
    fields = done.stdout.decode(errors="surrogateescape").split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, rel = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            i += 1  # the rename's source follows
        try:
            out[rel] = os.lstat(os.path.join(checkout, rel)).st_mtime_ns
        except OSError:
            out[rel] = None  # deleted
    return out


def checkout_writes(before: dict[str, int | None], after: dict[str, int | None]) -> list[Seen]:
    out = []
    for rel, mtime in sorted(after.items()):
        if rel in before and before[rel] == mtime:
            continue  # there before the run, untouched
        out.append(Seen("checkout", rel, "deleted" if mtime is None else "written", mtime))
    return out


@dataclass(frozen=True, slots=True)
class Tick:
    test: str
    start: int
    end: int


def read_clock(path: Path) -> list[Tick]:
    ticks = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            data = json.loads(line)
            ticks.append(Tick(str(data["test"]), int(data["start"]), int(data["end"])))
        except (ValueError, KeyError, TypeError):
            continue
    return ticks


def tests_running_at(ticks: list[Tick], mtime_ns: int | None) -> list[str]:
    """The tests running when a file got its last modification time: those whose run holds it,
    else those that start within SLACK_NS after it (the coarse clock).
    Several under pytest-xdist."""
    if mtime_ns is None or not ticks:
        return []
    inside = [t.test for t in ticks if t.start <= mtime_ns <= t.end]
    if inside:
        return sorted(set(inside))
    # The coarse clock runs behind the fine one, never ahead: a file time may fall just before
    # its test's start, never after its end (pytest's cache, written after the last test, is
    # the session's, not that test's).
    near = [t.test for t in ticks if t.start <= mtime_ns + SLACK_NS and mtime_ns <= t.end]
    return sorted(set(near))
