"""Diagnostics for the churn test: what the engine process watches (inotify), its threads."""

from __future__ import annotations

import os
from pathlib import Path


def inotify_inodes(pid: int) -> set[int]:
    """Every inode any inotify instance of `pid` watches (from /proc/PID/fdinfo)."""
    inodes: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return inodes
    for fd in fds:
        try:
            text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("inotify wd:"):
                for part in line.split():
                    if part.startswith("ino:"):
                        inodes.add(int(part[4:], 16))
    return inodes


def watched(pid: int | None, key: str) -> str:
    """Whether the lane's folder and its `.lanewatch/` are watched by the engine's inotify."""
    if pid is None:
        return "no engine"
    inodes = inotify_inodes(pid)
    out = []
    for path in (Path(key), Path(key) / ".lanewatch"):
        try:
            ino = path.stat().st_ino
        except OSError:
            out.append(f"{path.name}:gone")
            continue
        out.append(f"{path.name}:{'watched' if ino in inodes else 'NOT watched'}")
    return f"{' '.join(out)} ({len(inodes)} watches)"


def threads(pid: int | None) -> str:
    """Each thread of `pid`: state and kernel wait channel (pipe_write: blocked on a full pipe)."""
    if pid is None:
        return "no engine"
    out = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return "gone"
    for tid in tids:
        try:
            state = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = Path(f"/proc/{pid}/task/{tid}/wchan").read_text().strip() or "-"
        except OSError:
            continue
        out.append(f"{state}:{wchan}")
    return " ".join(out)
