"""The facts the intakes hand to detection (`kinds.detect`), one type per kind of sighting. Pure.

A detector reads one of these types (`model/detection.py`), its fields by name. Who hands each:

- `StampReplaced`: the model (`model/model.py`), when a stamp it knew was rewritten by another
  owner (the tail saw it, or a walk found it changed);
- `LedgerLine`, `ReceiptFound`: the walks and the tail (`engine/walkintake.py`);
- `HeldInNamespace`, `HeldInSharedTemp`: the prober's holdings, by where the path lies
  (`model/writers.py`);
- `WroteInNamespace`, `WroteInSharedTemp`: the kernel's writes, by where the path lies
  (`kernel/writefacts.py`);
- `ListenerSeen`: a lane's listening socket of the watched roots (`engine/probeintake.py`);
- `BudgetFigure`: a footprint figure and the lane's budget for it (`engine/budgetintake.py`).

A new kind that reads one of these needs no intake change (docs/architecture.md, "Add an
incident kind").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lanewatch.lanes.leases import Lease
from lanewatch.lanes.stamp import Stamp
from lanewatch.linux.procid import Liveness
from lanewatch.model.family import Stamped
from lanewatch.model.holdings import Holding, OwnerIndex
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.ports import Listener, PortMemory


@dataclass(frozen=True, slots=True)
class StampReplaced:
    """The stamp of namespace `victim` now names `current`; it named `previous`. The source
    judged the previous owner when it saw the new stamp (`previous_alive`: None for a remote
    owner, then its heartbeat's freshness is what is known) and read the ledger for its
    release."""

    victim: str
    previous: Stamp | None
    current: Stamp
    previous_alive: Liveness | None
    previous_released: bool
    previous_fresh: bool
    at: float
    sha256: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class LedgerLine:
    """One line of namespace `victim`'s ledger."""

    victim: str
    line: Mapping[str, Any]
    ledger_path: str


@dataclass(frozen=True, slots=True)
class ReceiptFound:
    """A receipt in namespace `victim`, whose checkout is `namespace_checkout`; `receipt` is
    its parsed JSON (None: unreadable)."""

    victim: str
    namespace_checkout: str
    path: str
    receipt: object
    mtime: float
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class HeldInNamespace:
    """A process holds a path inside namespace `victim` (the prober saw it at `at`);
    `stamped`: what the victim's stamp on this host says, live or released."""

    h: Holding
    victim: str
    owners: OwnerIndex
    at: float
    stamped: Stamped | None = None


@dataclass(frozen=True, slots=True)
class HeldInSharedTemp:
    """A process holds a path in shared temp, outside every namespace. `rivals`: the other
    lane families (their heads' keys) whose processes hold the same path for writing now."""

    h: Holding
    owners: OwnerIndex
    roots: Sequence[str]
    at: float
    rivals: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class WroteInNamespace:
    """The kernel reported a write inside namespace `victim`. `victim_owner`: by one of its
    owner's processes; `victim_lane`, `victim_family`: what its stamp says."""

    w: KernelWrite
    victim: str
    victim_owner: bool
    victim_lane: str | None = None
    victim_family: str | None = None


@dataclass(frozen=True, slots=True)
class WroteInSharedTemp:
    """The kernel reported a lane's write in shared temp, outside every namespace. `rivals`:
    the other lane families (their heads' keys) the recorder saw write the same path."""

    w: KernelWrite
    roots: Sequence[str]
    rivals: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ListenerSeen:
    """A lane's process of a watched root listens on a socket. `leases`: the live port leases;
    `memory`: who listened on which port outside them while the engine watched; `ephemeral`:
    the kernel's own port range; `now`: (pid, socket inode) of every listener of this probe."""

    one: Listener
    leases: Sequence[Lease]
    memory: PortMemory
    ephemeral: tuple[int, int]
    at: float
    stamped: Mapping[str, Stamped] | None = None
    now: frozenset[tuple[int, int]] = frozenset()


@dataclass(frozen=True, slots=True)
class BudgetFigure:
    """How much of `resource` lane `lane` (namespace `victim`) holds, its budget, and (disk)
    how fast it grows."""

    victim: str
    lane: str | None
    resource: str
    used: int | None
    budget: int | None
    at: float
    growth: float | None = None


Fact = (
    StampReplaced
    | LedgerLine
    | ReceiptFound
    | HeldInNamespace
    | HeldInSharedTemp
    | WroteInNamespace
    | WroteInSharedTemp
    | ListenerSeen
    | BudgetFigure
)
