"""Which lane families wrote each name in `/dev/shm`, for the kernel's writes there. Pure state.

A name in `/dev/shm` (`linux.paths.IPC_TEMP`) written by one lane family alone is no collision
(`detectors/unbound_writer.alone_in_ipc`); the same name written by a second family is. The
kernel reports one write at a time, so whether another family wrote the name before is a memory
of the recorder's: this one, bounded to the latest `MOST` names. When a second family writes a
name, its write is judged with the first family as its rival, and the first family's latest
write of the name is handed back to be judged too, once, so the incident names both lanes
("a and b both write /dev/shm/x") from the first write on.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from lanewatch.model.family import head
from lanewatch.model.kernelwrites import KernelWrite

MOST = 4096  # names remembered; the oldest is forgotten first
Earlier = list[tuple[KernelWrite, str]]  # writes to judge now, each with its writer's root


@dataclass(slots=True)
class _Latest:
    write: KernelWrite  # the family's latest write of the name
    root: str  # the writer's root (where its incidents are kept)
    judged: bool  # it (or an earlier one of the family) was handed to detection with a rival


class IpcNames:
    def __init__(self, most: int = MOST) -> None:
        self.most = most
        self._names: OrderedDict[str, dict[str, _Latest]] = OrderedDict()

    def meet(self, w: KernelWrite, root: str) -> tuple[frozenset[str], Earlier]:
        """Remember `w` (a lane's write, its namespace known, by a lane of `root`); return the
        other families that wrote its name (their heads' keys) and their writes not yet judged
        with a rival, each with its writer's root."""
        if w.namespace is None:
            return frozenset(), []
        mine = head(w.namespace, w.family)
        families = self._names.get(w.path)
        if families is None:
            families = self._names[w.path] = {}
            if len(self._names) > self.most:
                self._names.popitem(last=False)
        else:
            self._names.move_to_end(w.path)
        rivals = frozenset(f for f in families if f != mine)
        earlier: Earlier = []
        for family in rivals:
            latest = families[family]
            if not latest.judged:
                latest.judged = True
                earlier.append((latest.write, latest.root))
        was = families.get(mine)
        families[mine] = _Latest(w, root, bool(rivals) or (was is not None and was.judged))
        return rivals, earlier
