"""Writing inside a lane someone else claimed for us: `lanewatch prove` inside `lanewatch run`.

`lanewatch run --lane L -- sh -c 'lanewatch prove tests -- pytest'` must not fail because the
outer run holds L's lock: the outer run is the owner, and the prove works for it. The inner
process may write into the namespace only when all of these hold:

- `$LANEWATCH_NAMESPACE` names exactly that namespace (the outer run exported it);
- the namespace's stamp is valid, live, for the same lane and checkout, on this host and boot;
- the stamp's pid, with its kernel start ticks, is an ancestor of this process.

An inherited variable alone is not enough: a process that outlived its run, or a copied
environment, finds no live ancestor and must claim the lane itself (and is refused if another
owner has it).
"""

from __future__ import annotations

import os

from lanewatch.lanes.stamp import OwnerState, Stamp, read_stamp
from lanewatch.lanes.target import ENV_NAMESPACE, LaneTarget
from lanewatch.linux.proc import read_stat
from lanewatch.linux.procid import ProbeError, boot_id, hostname, start_ticks

MAX_DEPTH = 256


def parent_pid(pid: int) -> int | None:
    try:
        st = read_stat(pid)
    except OSError:
        return None
    return None if st is None else st.ppid


def is_ancestor(pid: int, ticks: int) -> bool:
    current: int | None = os.getppid()
    for _ in range(MAX_DEPTH):
        if current is None or current <= 0:
            return False
        if current == pid:
            try:
                return start_ticks(pid) == ticks
            except ProbeError:
                return False
        if current == 1:
            return False
        current = parent_pid(current)
    return False


def outer_owner(target: LaneTarget) -> Stamp | None:
    """The stamp of the live ancestor that owns `target`'s namespace for us, else None."""
    env = os.environ.get(ENV_NAMESPACE)
    if not env or os.path.realpath(env) != os.path.realpath(target.namespace):
        return None
    read = read_stamp(target.namespace)
    stamp = read.stamp
    if stamp is None or not read.ok or stamp.state is not OwnerState.LIVE:
        return None
    if stamp.lane != target.lane or stamp.checkout_id != target.checkout.checkout_id:
        return None
    if stamp.host != hostname() or (stamp.boot_id and stamp.boot_id != boot_id()):
        return None
    return stamp if is_ancestor(stamp.pid, stamp.start_ticks) else None
