"""Families: a lane and the lanes it starts for its own workers (`pytest`, `pytest-gw0`, …).

`pytest -p lanewatch -n 2` runs three lanes: the main process's and one per xdist worker. The
workers are the main lane's own: they start inside it (their TMPDIR, until they claim, is its
`tmp/`), report to it and end with it. None of them is an intruder in another's namespace, so
each worker lane names its family in its stamp (`Stamp.family`: the head's folder name) and the
writer detectors never report a write by one member of a family in another's namespace
(`model/family.py`). Writes outside every lane are judged as any lane's.

A worker names a family only when it is one: `family_of_parent` takes the lane bound in the
environment the worker inherited ($LANEWATCH_NAMESPACE) and accepts it only when that
namespace, in the same root, has a valid live stamp on this host and boot whose owner process
(pid and start ticks) is an ancestor of the claiming process. A copied environment, a lane of
another root or a head that is gone makes no family: the worker is then a lane of its own.
The head's own family, if it has one, is the worker's: a family has one head.
"""

from __future__ import annotations

import os
from pathlib import Path

from lanewatch.lanes.lane import ENV_NAMESPACE
from lanewatch.lanes.nested import is_ancestor
from lanewatch.lanes.stamp import OwnerState, read_stamp
from lanewatch.linux.procid import boot_id, hostname


def family_of_parent(root: Path, namespace: Path) -> str | None:
    """The family a worker lane claimed at `namespace` (in `root`) belongs to: the folder name
    of its family's head, or None (no parent lane, or one that cannot be proven)."""
    bound = os.environ.get(ENV_NAMESPACE)
    if not bound:
        return None
    parent = Path(os.path.realpath(bound))
    if parent.parent != Path(os.path.realpath(root)) or parent.name == namespace.name:
        return None
    read = read_stamp(parent)
    stamp = read.stamp
    if stamp is None or not read.ok or stamp.state is not OwnerState.LIVE:
        return None
    if stamp.host != hostname() or (stamp.boot_id and stamp.boot_id != boot_id()):
        return None
    if stamp.pid <= 1:
        return None  # init is everyone's ancestor: a stamp naming it proves nothing
    if not is_ancestor(stamp.pid, stamp.start_ticks):
        return None
    return stamp.family or parent.name
