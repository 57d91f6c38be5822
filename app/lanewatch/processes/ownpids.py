"""Which processes are lanewatch itself, for the sources that leave our own reads and writes out
of the picture: this process and, in the dashboard's engine process, the dashboard that started
it (its clears, trash moves and detail reads are not anyone's collision)."""

from __future__ import annotations

import os

_also: set[int] = set()
# The answer, with how many pids `_also` held when it was made: `_also` only grows, so a count
# that differs says the answer is stale, whichever thread made it. (Resetting it to None in
# `count_as_own` lost the new pid when a reader built its answer from `_also` just before the
# add and stored it just after the reset.)
_known: tuple[int, frozenset[int]] | None = None


def own_pids() -> frozenset[int]:
    """Asked once per lane in a probe: the answer is kept (no getpid(2) each time), made again
    after a fork (the child has a pid of its own) or a `count_as_own`."""
    global _known
    known = _known
    if known is None or known[0] != len(_also):
        count = len(_also)  # before the copy: a pid added meanwhile makes it stale, not lost
        known = _known = (count, frozenset({os.getpid(), *_also}))
    return known[1]


def count_as_own(pid: int) -> None:
    """Count `pid` as lanewatch from now on (the engine process names its dashboard)."""
    _also.add(pid)


def _forked() -> None:
    global _known
    _known = None


os.register_at_fork(after_in_child=_forked)
