"""Which processes are lanewatch itself, for the sources that leave our own reads and writes out
of the picture: this process and, in the dashboard's engine process, the dashboard that started
it (its clears, trash moves and detail reads are not anyone's collision)."""

from __future__ import annotations

import os

_also: set[int] = set()
_known: frozenset[int] | None = None  # the answer, made at the first ask since it changed


def own_pids() -> frozenset[int]:
    """Asked once per lane in a probe: the answer is kept (no getpid(2) each time), made again
    after a fork (the child has a pid of its own) or a `count_as_own`."""
    global _known
    if _known is None:
        _known = frozenset({os.getpid(), *_also})
    return _known


def count_as_own(pid: int) -> None:
    """Count `pid` as lanewatch from now on (the engine process names its dashboard)."""
    global _known
    _also.add(pid)
    _known = None


def _forked() -> None:
    global _known
    _known = None


os.register_at_fork(after_in_child=_forked)
