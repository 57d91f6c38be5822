"""Which processes are lanewatch itself, for the sources that leave our own reads and writes out
of the picture: this process and, in the dashboard's engine process, the dashboard that started
it (its clears, trash moves and detail reads are not anyone's collision)."""

from __future__ import annotations

import os

_also: set[int] = set()


def own_pids() -> frozenset[int]:
    return frozenset({os.getpid(), *_also})


def count_as_own(pid: int) -> None:
    """Count `pid` as lanewatch from now on (the engine process names its dashboard)."""
    _also.add(pid)
